//! MirrorPeers on the spoke: the agent's side of the peer secret exchange.
//!
//! The hub pokes (an empty `…mirrorpeer.spec.update_request`); the task asks on
//! `flotilla.peers.<cluster>` with its static curve key, the boxes it sealed and what it
//! applied, and is answered with its MirrorPeers, the peers' keys and the boxes for it. Then:
//!
//! - each box for it is opened with its key from the sender's key the hub named, checked (its
//!   MirrorPeer, pair and revision, newer than applied: a replay is refused) and written as a
//!   GREEN Secret `<mirrorpeer>-<from>` in its item's namespace;
//! - its source Secret (`items[].secretName` in `storageClusterRef.namespace`; made from 32
//!   random bytes when absent and `generate: true`) is sealed to every peer whose stored box is
//!   missing, sealed to an old key, or from older content (revision + 1);
//! - the GREEN Secrets of a MirrorPeer gone from the answer are deleted.
//!
//! It asks again at once while it has something to report, every [`PeerConfig::resync`], on
//! every poke and reconnect, and when the source changes (the backend's change signal, or a
//! check every [`PeerConfig::source_check`]). The MirrorPeers it is in are kept in the local
//! store, so a restarted agent asks at start.
//!
//! - [`rules`]: pure — source data, GREEN Secrets, which peers need a new box.

pub mod rules;

use crate::backend::{Backend, BackendError, Strategy};
use crate::store::{KnownMirrorPeer, LocalStore};
use flotilla_api::mirrorpeer as mp;
use flotilla_api::v1::{
    AppliedPeerSecret, MirrorPeerDelivery, PeerSecretPayload, PeerSourceError, PeerSyncRequest,
    PeerSyncResponse, SealedPeerSecret,
};
use flotilla_api::work::ManifestId;
use flotilla_bus::envelope::Event;
use flotilla_bus::peersecrets as wire;
use flotilla_bus::publish::Publisher;
use nkeys::XKey;
use rules::{Applied, Sent};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Settings.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Largest event sent (boxes beyond half of it wait for the next request).
    pub max_event_bytes: usize,
    /// How long a request waits for the hub.
    pub request_timeout: Duration,
    /// How often a peer asks when nothing pokes it (default 5 min).
    pub resync: Duration,
    /// How often the source Secrets are read when the backend signals no changes (default 10 s).
    pub source_check: Duration,
}

impl Default for PeerConfig {
    fn default() -> Self {
        Self {
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            request_timeout: Duration::from_secs(5),
            resync: Duration::from_secs(300),
            source_check: Duration::from_secs(10),
        }
    }
}

/// What the task needs.
pub struct Deps {
    /// This cluster's name.
    pub cluster: String,
    /// The cluster.
    pub backend: Arc<dyn Backend>,
    /// The curve key and the MirrorPeers known.
    pub store: Arc<LocalStore>,
    /// NATS (requests to the hub).
    pub client: async_nats::Client,
    /// Where the hub's answers come back (prefix wire; `None`: the client's inbox).
    pub spoke: Option<flotilla_bus::spoke::Spoke>,
    /// Settings.
    pub config: PeerConfig,
}

/// The handle of the agent's MirrorPeer task (cheap to clone).
#[derive(Clone)]
pub struct PeerSecrets {
    tx: mpsc::Sender<()>,
}

impl PeerSecrets {
    /// Starts the task (it asks at once); it ends when every handle is dropped.
    pub fn spawn(deps: Deps) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(1);
        let span = tracing::info_span!("mirrorpeers");
        let join = tokio::spawn(tracing::Instrument::instrument(
            Task::new(deps).run(rx),
            span,
        ));
        (Self { tx }, join)
    }

    /// Whether `event` is a MirrorPeer poke (for the agent's dispatch).
    pub fn handles(event: &Event) -> bool {
        wire::is_mirrorpeer(&event.event_type)
    }

    /// Asks the task to ask the hub (pokes coalesce).
    pub fn poke(&self) {
        let _ = self.tx.try_send(());
    }
}

struct Task {
    deps: Deps,
    xkey: XKey,
    requests: Publisher,
    /// What was sealed last, by `(mirror peer, to)`.
    sent: BTreeMap<(String, String), Sent>,
    /// Revisions applied (and the sender's key they count under), by `(mirror peer, from)`.
    applied: BTreeMap<(String, String), Applied>,
    /// Boxes that did not open or apply: `(mirror peer, from)` → `(revision, sender's key,
    /// error)`.
    failed: BTreeMap<(String, String), (u64, String, String)>,
    /// Source errors by MirrorPeer.
    source_errors: BTreeMap<String, String>,
    /// Boxes waiting for a request with room.
    outbox: Vec<SealedPeerSecret>,
    /// The source Secrets' hashes last sealed, by MirrorPeer (to notice rotations).
    hashes: BTreeMap<String, u64>,
    /// The last answer's deliveries (to read the sources again between requests).
    last: Vec<MirrorPeerDelivery>,
    failures: usize,
}

/// The agent's curve key ([`crate::claims::curve_key`]: the one it presents as a claim too).
fn curve_key(store: &LocalStore) -> XKey {
    crate::claims::curve_key(store)
}

fn secret_id(namespace: &str, name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

impl Task {
    fn new(deps: Deps) -> Self {
        let xkey = curve_key(&deps.store);
        let requests = Publisher::new(
            deps.client.clone(),
            deps.config.max_event_bytes,
            deps.config.request_timeout,
        )
        .with_spoke(deps.spoke.clone());
        Self {
            deps,
            xkey,
            requests,
            sent: BTreeMap::new(),
            applied: BTreeMap::new(),
            failed: BTreeMap::new(),
            source_errors: BTreeMap::new(),
            outbox: Vec::new(),
            hashes: BTreeMap::new(),
            last: Vec::new(),
            failures: 0,
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<()>) {
        let mut changes = self.deps.backend.changes();
        let mut next = Some(Instant::now());
        let mut check = tokio::time::interval(self.deps.config.source_check);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let active = !self.last.is_empty();
            tokio::select! {
                poke = rx.recv() => match poke {
                    None => return,
                    Some(()) => next = Some(Instant::now()),
                },
                () = sleep_until(next) => {
                    next = match self.round().await {
                        Ok(()) => {
                            self.failures = 0;
                            (!self.last.is_empty() || !self.known().is_empty())
                                .then(|| Instant::now() + self.deps.config.resync)
                        }
                        Err(e) => {
                            self.failures += 1;
                            let wait = flotilla_bus::connect::backoff(self.failures + 2, Duration::from_secs(60));
                            tracing::debug!(error = %e, retry_ms = wait.as_millis() as u64, "MirrorPeer request failed");
                            Some(Instant::now() + wait)
                        }
                    };
                }
                alive = changed(&mut changes), if active => {
                    if !alive {
                        changes = None;
                    } else if self.sources_moved().await {
                        next = Some(Instant::now());
                    }
                }
                _ = check.tick(), if active && changes.is_none() => {
                    if self.sources_moved().await {
                        next = Some(Instant::now());
                    }
                }
            }
        }
    }

    fn known(&self) -> Vec<KnownMirrorPeer> {
        self.deps.store.get().mirror_peers
    }

    /// Whether a source Secret's content differs from what was sealed last.
    async fn sources_moved(&self) -> bool {
        for d in &self.last {
            let Some(item) = &d.own_item else { continue };
            let id = secret_id(&mp::namespace(item), &mp::secret_name(item));
            let hash = match self.deps.backend.get(&id).await {
                Ok(Some(v)) => rules::source_data(&v).ok().map(|d| rules::content_hash(&d)),
                _ => None,
            };
            if hash != self.hashes.get(&d.mirror_peer).copied() {
                return true;
            }
        }
        false
    }

    /// Requests until nothing is left to report (bounded).
    async fn round(&mut self) -> Result<(), String> {
        for _ in 0..8 {
            let budget = self.deps.config.max_event_bytes / 2;
            let mut outbound = Vec::new();
            let mut used = 0;
            while let Some(b) = self.outbox.first() {
                if !outbound.is_empty() && used + b.sealed.len() > budget {
                    break;
                }
                used += b.sealed.len();
                outbound.push(self.outbox.remove(0));
            }
            let request = PeerSyncRequest {
                cluster_name: self.deps.cluster.clone(),
                xkey: self.xkey.public_key(),
                outbound,
                applied: self.applied_list(),
                source_errors: self
                    .source_errors
                    .iter()
                    .map(|(m, e)| PeerSourceError {
                        mirror_peer: m.clone(),
                        error: e.clone(),
                    })
                    .collect(),
            };
            let resp = self.ask(&request).await?;
            if !resp.error.is_empty() {
                return Err(format!("the hub refused the request: {}", resp.error));
            }
            for r in &resp.refused {
                tracing::warn!(refused = %r, "the hub refused part of the MirrorPeer request");
            }
            let applied = self.take_inbound(&resp).await;
            self.remove_gone(&resp).await;
            self.remember(&resp);
            self.seal_outbound(&resp).await;
            self.last = resp.deliveries;
            if self.outbox.is_empty() && !applied && !resp.more {
                return Ok(());
            }
        }
        Ok(())
    }

    async fn ask(&self, request: &PeerSyncRequest) -> Result<PeerSyncResponse, String> {
        let ev = Event::new(
            wire::request_type(),
            format!("flotilla-agent/{}", self.deps.cluster),
            self.deps.cluster.clone(),
            request,
        );
        self.requests
            .request(wire::subject(&self.deps.cluster), &ev, "PeerSyncResponse")
            .await
            .map_err(|e| e.to_string())
    }

    fn applied_list(&self) -> Vec<AppliedPeerSecret> {
        let mut out: Vec<AppliedPeerSecret> = self
            .applied
            .iter()
            .map(|((m, from), a)| AppliedPeerSecret {
                mirror_peer: m.clone(),
                from: from.clone(),
                revision: a.revision,
                error: String::new(),
                sender_xkey: a.sender_xkey.clone(),
            })
            .collect();
        out.extend(
            self.failed
                .iter()
                .map(
                    |((m, from), (revision, sender_xkey, error))| AppliedPeerSecret {
                        mirror_peer: m.clone(),
                        from: from.clone(),
                        revision: *revision,
                        error: error.clone(),
                        sender_xkey: sender_xkey.clone(),
                    },
                ),
        );
        out
    }

    /// Opens and applies the boxes for this cluster; whether anything changed to report.
    async fn take_inbound(&mut self, resp: &PeerSyncResponse) -> bool {
        let mut changed = false;
        for d in &resp.deliveries {
            let Some(item) = &d.own_item else { continue };
            let namespace = mp::namespace(item);
            for b in &d.inbound {
                let key = (d.mirror_peer.clone(), b.from.clone());
                let known = match self.applied.get(&key) {
                    Some(a) => Some(a.clone()),
                    None => {
                        self.applied_on_cluster(&namespace, &d.mirror_peer, &b.from)
                            .await
                    }
                };
                // Only a box under the same keys must be newer: a sender with a new key (or
                // this agent with a new one) counts its revisions afresh.
                let floor = Applied::floor(known.as_ref(), &b.sender_xkey);
                let result = self.apply_box(d, b, &namespace, floor).await;
                changed = true;
                match result {
                    Ok(revision) => {
                        tracing::info!(mirror_peer = %d.mirror_peer, from = %b.from, revision, "peer secret applied");
                        let applied = Applied {
                            revision,
                            sender_xkey: b.sender_xkey.clone(),
                        };
                        self.applied.insert(key.clone(), applied);
                        self.failed.remove(&key);
                    }
                    Err(e) => {
                        tracing::warn!(mirror_peer = %d.mirror_peer, from = %b.from, revision = b.revision, error = %e, "peer secret refused");
                        if let Some(a) = known {
                            self.applied.insert(key.clone(), a);
                        }
                        self.failed
                            .insert(key, (b.revision, b.sender_xkey.clone(), e));
                    }
                }
            }
        }
        changed
    }

    /// What the GREEN Secret already on the cluster holds (after a restart), when it was
    /// sealed to this agent's key.
    async fn applied_on_cluster(
        &self,
        namespace: &str,
        mirror_peer: &str,
        from: &str,
    ) -> Option<Applied> {
        let id = secret_id(namespace, &mp::green_name(mirror_peer, from));
        match self.deps.backend.get(&id).await {
            Ok(Some(v)) if rules::is_green_copy(&v, mirror_peer, from) => {
                rules::applied_of(&v, &self.xkey.public_key())
            }
            _ => None,
        }
    }

    async fn apply_box(
        &self,
        d: &MirrorPeerDelivery,
        b: &SealedPeerSecret,
        namespace: &str,
        applied: u64,
    ) -> Result<u64, String> {
        let Some(sender) = d.peers.iter().find(|p| p.cluster == b.from) else {
            return Err(format!("{:?} is not a peer of {}", b.from, d.mirror_peer));
        };
        if sender.xkey != b.sender_xkey || b.recipient_xkey != self.xkey.public_key() {
            return Err("the box names other keys than the peers'".into());
        }
        let payload = wire::open(
            &self.xkey,
            &b.sealed,
            &sender.xkey,
            wire::Expect {
                mirror_peer: &d.mirror_peer,
                from: &b.from,
                to: &self.deps.cluster,
                revision: b.revision,
                applied,
            },
        )
        .map_err(|e| e.to_string())?;
        let green = rules::green_secret(namespace, &payload, &b.sender_xkey, &b.recipient_xkey);
        let id = secret_id(namespace, &mp::green_name(&d.mirror_peer, &b.from));
        if let Some(existing) = self
            .deps
            .backend
            .get(&id)
            .await
            .map_err(|e| format!("reading {} failed: {e}", id.describe()))?
            && !rules::is_green_copy(&existing, &d.mirror_peer, &b.from)
        {
            return Err(format!(
                "{} exists and is not {}'s GREEN copy from {}: not overwritten",
                id.describe(),
                d.mirror_peer,
                b.from
            ));
        }
        self.deps
            .backend
            .apply(&id, &green, &Strategy::Update)
            .await
            .map_err(|e| format!("writing {} failed: {e}", id.describe()))?;
        Ok(payload.revision)
    }

    /// Deletes the GREEN Secrets of MirrorPeers gone from the answer.
    async fn remove_gone(&mut self, resp: &PeerSyncResponse) {
        let now: BTreeSet<&str> = resp
            .deliveries
            .iter()
            .map(|d| d.mirror_peer.as_str())
            .collect();
        let mut kept = Vec::new();
        for k in self.known() {
            if now.contains(k.name.as_str()) {
                kept.push(k);
                continue;
            }
            match self.delete_greens(&k).await {
                Ok(n) => {
                    tracing::info!(mirror_peer = %k.name, deleted = n, "MirrorPeer gone: its GREEN Secrets deleted");
                    self.sent.retain(|(m, _), _| *m != k.name);
                    self.applied.retain(|(m, _), _| *m != k.name);
                    self.failed.retain(|(m, _), _| *m != k.name);
                    self.source_errors.remove(&k.name);
                    self.hashes.remove(&k.name);
                }
                Err(e) => {
                    tracing::warn!(mirror_peer = %k.name, error = %e, "deleting GREEN Secrets failed; trying again");
                    kept.push(k);
                }
            }
        }
        if kept != self.known()
            && let Err(e) = self.deps.store.update(|s| s.mirror_peers = kept)
        {
            tracing::error!(error = %e, "saving the MirrorPeers failed");
        }
    }

    async fn delete_greens(&self, k: &KnownMirrorPeer) -> Result<usize, BackendError> {
        let secrets = match self.deps.backend.list("Secret", Some(&k.namespace)).await {
            Ok(s) => s,
            Err(BackendError::NotFound(_)) => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut n = 0;
        for s in secrets.iter().filter(|s| rules::is_green_of(s, &k.name)) {
            let Some(name) = s["metadata"]["name"].as_str() else {
                continue;
            };
            match self
                .deps
                .backend
                .delete(&secret_id(&k.namespace, name))
                .await
            {
                Ok(_) | Err(BackendError::NotFound(_)) => n += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Keeps the MirrorPeers of the answer in the store.
    fn remember(&self, resp: &PeerSyncResponse) {
        let mut known = self.known();
        for d in &resp.deliveries {
            let namespace = d.own_item.as_ref().map(mp::namespace).unwrap_or_default();
            if !known.iter().any(|k| k.name == d.mirror_peer) {
                known.push(KnownMirrorPeer {
                    name: d.mirror_peer.clone(),
                    namespace,
                });
            }
        }
        if known != self.known()
            && let Err(e) = self.deps.store.update(|s| s.mirror_peers = known)
        {
            tracing::error!(error = %e, "saving the MirrorPeers failed");
        }
    }

    /// Reads each source Secret and seals it to the peers that need a new box.
    async fn seal_outbound(&mut self, resp: &PeerSyncResponse) {
        for d in &resp.deliveries {
            let Some(item) = &d.own_item else { continue };
            let (namespace, name) = (mp::namespace(item), mp::secret_name(item));
            let data = match self.source(&namespace, &name, item.generate).await {
                Ok(data) => data,
                Err(e) => {
                    if self.source_errors.get(&d.mirror_peer) != Some(&e) {
                        tracing::warn!(mirror_peer = %d.mirror_peer, error = %e, "source Secret not exchanged");
                    }
                    self.source_errors.insert(d.mirror_peer.clone(), e);
                    continue;
                }
            };
            self.source_errors.remove(&d.mirror_peer);
            let hash = rules::content_hash(&data);
            self.hashes.insert(d.mirror_peer.clone(), hash);
            let pending: BTreeSet<(String, String)> = self
                .outbox
                .iter()
                .map(|b| (b.mirror_peer.clone(), b.to.clone()))
                .collect();
            for (to, xkey, revision) in rules::outbound(d, hash, &self.sent) {
                if pending.contains(&(d.mirror_peer.clone(), to.clone())) {
                    continue;
                }
                let payload = PeerSecretPayload {
                    mirror_peer: d.mirror_peer.clone(),
                    from: self.deps.cluster.clone(),
                    to: to.clone(),
                    revision,
                    data: data.clone().into_iter().collect(),
                    namespace: namespace.clone(),
                    storage_cluster_name: item
                        .storage_cluster_ref
                        .as_ref()
                        .map(|s| s.name.clone())
                        .unwrap_or_default(),
                };
                let sealed = match wire::seal(&payload, &self.xkey, &xkey) {
                    Ok(s) => s,
                    Err(e) => {
                        self.source_errors
                            .insert(d.mirror_peer.clone(), format!("sealing for {to}: {e}"));
                        continue;
                    }
                };
                tracing::debug!(mirror_peer = %d.mirror_peer, to = %to, revision, "peer secret sealed");
                self.sent.insert(
                    (d.mirror_peer.clone(), to.clone()),
                    Sent {
                        revision,
                        hash,
                        recipient: xkey.clone(),
                    },
                );
                self.outbox.push(SealedPeerSecret {
                    mirror_peer: d.mirror_peer.clone(),
                    from: self.deps.cluster.clone(),
                    to,
                    sender_xkey: self.xkey.public_key(),
                    recipient_xkey: xkey,
                    revision,
                    sealed,
                    ..Default::default()
                });
            }
        }
    }

    /// The source Secret's data; made when absent and `generate` says so.
    async fn source(
        &self,
        namespace: &str,
        name: &str,
        generate: bool,
    ) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let id = secret_id(namespace, name);
        let found = self
            .deps
            .backend
            .get(&id)
            .await
            .map_err(|e| format!("reading {} failed: {e}", id.describe()))?;
        let secret = match found {
            Some(s) => s,
            None if generate => {
                let mut bytes = [0u8; 32];
                rand::Rng::fill(&mut rand::rng(), &mut bytes);
                let s = rules::generated_source(namespace, name, bytes);
                self.deps
                    .backend
                    .apply(&id, &s, &Strategy::CreateOnly)
                    .await
                    .map_err(|e| format!("creating {} failed: {e}", id.describe()))?;
                tracing::info!(secret = %id.describe(), "source Secret generated");
                self.deps
                    .backend
                    .get(&id)
                    .await
                    .map_err(|e| e.to_string())?
                    .unwrap_or(s)
            }
            None => {
                return Err(format!(
                    "source Secret {namespace}/{name} not found (create it, or set \
                     items[].generate: true)"
                ));
            }
        };
        rules::source_data(&secret).map_err(|e| format!("{namespace}/{name}: {e}"))
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Waits for the backend's next change; false once its signal is gone.
async fn changed(changes: &mut Option<tokio::sync::watch::Receiver<u64>>) -> bool {
    match changes {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

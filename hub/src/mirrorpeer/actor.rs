//! The MirrorPeers' task: the only writer of their three buckets. It answers applies, deletes
//! and the clusters' requests, follows the inventory (a peer that comes back is poked; the
//! status names the peers not Available), pokes clusters with work left (backing off), and
//! keeps each MirrorPeer's status, stored when it changes.

use super::rules::{self, Observed, View, record_key};
use super::{Buckets, Deps, MirrorPeerError, Views};
use crate::backoff::Backoff;
use flotilla_api::meta::status as cstatus;
use flotilla_api::v1::{
    MirrorPeer, PeerKeyRecord, PeerSyncRequest, PeerSyncResponse, SealedPeerSecret,
};
use flotilla_bus::envelope::Event;
use flotilla_bus::peersecrets;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::Instrument;

type Reply<T> = oneshot::Sender<Result<T, MirrorPeerError>>;

/// The task's messages.
#[derive(Debug)]
pub enum Msg {
    /// Create or update a MirrorPeer.
    Apply(Box<MirrorPeer>, Reply<MirrorPeer>),
    /// Delete a MirrorPeer and its boxes.
    Delete(String, Reply<()>),
    /// A cluster's request (subject, envelope and acceptance checked).
    Sync(
        String,
        Box<PeerSyncRequest>,
        oneshot::Sender<PeerSyncResponse>,
    ),
}

/// What the buckets held at start.
pub struct Stored {
    /// MirrorPeers.
    pub peers: Vec<(String, MirrorPeer, u64)>,
    /// Boxes.
    pub secrets: Vec<(String, SealedPeerSecret, u64)>,
    /// Curve keys.
    pub keys: Vec<(String, PeerKeyRecord, u64)>,
}

struct Actor {
    buckets: Buckets,
    deps: Deps,
    views: Views,
    peers: BTreeMap<String, MirrorPeer>,
    revs: BTreeMap<String, u64>,
    records: BTreeMap<String, SealedPeerSecret>,
    keys: BTreeMap<String, String>,
    /// Boxes handed to their destination since this task started.
    delivered: BTreeSet<String>,
    /// `(mirror peer, cluster)` → the source error the cluster reported.
    source_errors: BTreeMap<(String, String), String>,
    /// Clusters with work left: when each is poked next (the wait doubling while it stays).
    pokes: Backoff<String>,
    /// Members last seen Available.
    available: BTreeSet<String>,
}

/// Spawns the task over what was stored.
pub(super) fn spawn(
    buckets: Buckets,
    deps: Deps,
    views: Views,
    stored: Stored,
    shutdown: watch::Receiver<bool>,
) -> (mpsc::Sender<Msg>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(deps.config.mailbox.max(1));
    let pokes = Backoff::new(deps.config.repoke_min, deps.config.repoke_max);
    let mut actor = Actor {
        buckets,
        deps,
        views,
        peers: BTreeMap::new(),
        revs: BTreeMap::new(),
        records: stored.secrets.into_iter().map(|(k, r, _)| (k, r)).collect(),
        keys: stored
            .keys
            .into_iter()
            .map(|(k, r, _)| (k, r.xkey))
            .collect(),
        delivered: BTreeSet::new(),
        source_errors: BTreeMap::new(),
        pokes,
        available: BTreeSet::new(),
    };
    for (_, p, rev) in stored.peers {
        actor.adopt(p, rev);
    }
    let task = tokio::spawn(
        actor
            .run(rx, shutdown)
            .instrument(tracing::info_span!("mirrorpeers")),
    );
    (tx, task)
}

fn name_of(p: &MirrorPeer) -> String {
    p.metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default()
}

fn is_available(c: &flotilla_api::v1::ManagedCluster) -> bool {
    crate::cluster::rules::available(c) == Some(cstatus::TRUE)
}

impl Actor {
    fn view(&self) -> View<'_> {
        View {
            peers: &self.peers,
            records: &self.records,
            keys: &self.keys,
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Msg>, mut shutdown: watch::Receiver<bool>) {
        use tokio::sync::broadcast::error::RecvError;
        let mut clusters = self.deps.inventory.subscribe();
        let mut clusters_open = true;
        self.purge_strays().await;
        // Clusters deleted while no hub ran this task (their keys and boxes stay otherwise).
        let mut known: BTreeSet<String> = self.keys.keys().cloned().collect();
        known.extend(
            self.records
                .values()
                .flat_map(|r| [r.from.clone(), r.to.clone()]),
        );
        for c in known {
            self.forget_if_deleted(&c).await;
        }
        self.available = self
            .members()
            .into_iter()
            .filter(|c| self.online(c))
            .collect();
        let now = Instant::now();
        for c in self.members() {
            if rules::has_work(&c, self.view()) {
                self.schedule(&c, now);
            }
        }
        let names: Vec<String> = self.peers.keys().cloned().collect();
        for n in names {
            self.refresh(&n).await;
        }
        loop {
            let wake = self
                .pokes
                .deadline()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = shutdown.changed() => {
                    if *shutdown.borrow() {
                        return;
                    }
                }
                change = clusters.recv(), if clusters_open => match change {
                    Ok(c) => self.cluster_changed(&c.key).await,
                    Err(RecvError::Lagged(_)) => {
                        let mut seen = self.members();
                        seen.extend(self.keys.keys().cloned());
                        for c in seen {
                            self.cluster_changed(&c).await;
                        }
                    }
                    Err(RecvError::Closed) => clusters_open = false,
                },
                msg = rx.recv() => match msg {
                    None => return,
                    Some(Msg::Apply(p, reply)) => {
                        let _ = reply.send(self.apply(*p).await);
                    }
                    Some(Msg::Delete(name, reply)) => {
                        let _ = reply.send(self.delete(&name).await);
                    }
                    Some(Msg::Sync(cluster, request, reply)) => {
                        let _ = reply.send(self.sync(&cluster, *request).await);
                    }
                },
                () = tokio::time::sleep_until(wake) => self.poke_due().await,
            }
        }
    }

    /// Every cluster named by some MirrorPeer.
    fn members(&self) -> BTreeSet<String> {
        self.peers
            .values()
            .flat_map(|p| rules::members(p).into_iter().map(str::to_string))
            .collect()
    }

    fn online(&self, cluster: &str) -> bool {
        self.deps
            .inventory
            .get(cluster)
            .is_some_and(|c| is_available(&c))
    }

    /// Boxes of MirrorPeers that are gone (a hub stopped between the two removals).
    async fn purge_strays(&mut self) {
        let strays: Vec<String> = self
            .records
            .iter()
            .filter(|(_, r)| !self.peers.contains_key(&r.mirror_peer))
            .map(|(k, _)| k.clone())
            .collect();
        for key in strays {
            if self.buckets.secrets.purge(&key).await.is_ok() {
                self.records.remove(&key);
            }
        }
    }

    /// Drops the boxes `keys` (a failure is logged and left for the next chance: a box left
    /// behind is never delivered, its keys being no longer current). Whether all went.
    async fn drop_boxes(&mut self, keys: Vec<String>, why: &str) -> bool {
        let mut all = true;
        for key in keys {
            match self.buckets.secrets.purge(&key).await {
                Ok(()) => {
                    tracing::info!(record = %key, why, "sealed peer secret dropped");
                    self.records.remove(&key);
                    self.delivered.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(record = %key, why, error = %e, "dropping a sealed peer secret failed");
                    all = false;
                }
            }
        }
        all
    }

    /// When `cluster` is gone from the inventory: its boxes (from it and to it) and then its
    /// key are dropped, so no peer seals to an agent that may be gone, and a cluster
    /// registering again under the name starts afresh with the key it presents. Whether
    /// anything was dropped.
    async fn forget_if_deleted(&mut self, cluster: &str) -> bool {
        if self.deps.inventory.get(cluster).is_some() {
            return false;
        }
        let boxes = rules::boxes_of(cluster, self.view());
        if boxes.is_empty() && !self.keys.contains_key(cluster) {
            return false;
        }
        // The key goes last: while a box is left, the key says there is more to forget.
        if !self.drop_boxes(boxes, "its cluster was deleted").await {
            return true;
        }
        if self.keys.contains_key(cluster) {
            match self.buckets.keys.purge(cluster).await {
                Ok(()) => {
                    self.keys.remove(cluster);
                    tracing::info!(
                        cluster,
                        "cluster deleted: its curve key and boxes forgotten"
                    );
                }
                Err(e) => {
                    tracing::warn!(cluster, error = %e, "forgetting a deleted cluster's key failed")
                }
            }
        }
        true
    }

    /// A cluster changed in the inventory: a deleted one's key and boxes are forgotten, a
    /// member whose availability flipped changes its MirrorPeers' status, and one that came
    /// back is poked.
    async fn cluster_changed(&mut self, cluster: &str) {
        let forgotten = self.forget_if_deleted(cluster).await;
        let names: Vec<String> = self
            .peers
            .iter()
            .filter(|(_, p)| rules::members(p).contains(&cluster))
            .map(|(n, _)| n.clone())
            .collect();
        if names.is_empty() {
            return;
        }
        let now_online = self.online(cluster);
        if now_online == self.available.contains(cluster) {
            if forgotten {
                for n in names {
                    self.refresh(&n).await;
                }
            }
            return;
        }
        if now_online {
            self.available.insert(cluster.to_string());
            if rules::has_work(cluster, self.view()) {
                self.schedule(cluster, Instant::now());
            }
        } else {
            self.available.remove(cluster);
        }
        for n in names {
            self.refresh(&n).await;
        }
    }

    /// Pokes `cluster` at `at` (or sooner), with the shortest back-off.
    fn schedule(&mut self, cluster: &str, at: Instant) {
        self.pokes.schedule(cluster.to_string(), at);
    }

    async fn poke_due(&mut self) {
        let now = Instant::now();
        for cluster in self.pokes.due(now) {
            self.poke(&cluster).await;
            if rules::has_work(&cluster, self.view()) {
                self.pokes.attempted(cluster, now);
            } else {
                self.pokes.remove(&cluster);
            }
        }
    }

    async fn poke(&self, cluster: &str) {
        let ev = Event::new(
            peersecrets::poke_type(),
            crate::cluster::SOURCE,
            cluster,
            &(),
        );
        if let Err(e) = self
            .deps
            .publisher
            .publish(self.deps.inventory.wire(cluster).spec(cluster), &ev)
            .await
        {
            tracing::debug!(cluster, error = %e, "poking a peer failed; poked again later");
        }
    }

    fn adopt(&mut self, p: MirrorPeer, rev: u64) {
        let name = name_of(&p);
        let mut shown = p.clone();
        if let Some(m) = shown.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.views
            .write()
            .expect("views lock")
            .insert(name.clone(), shown);
        self.revs.insert(name.clone(), rev);
        self.peers.insert(name, p);
    }

    async fn apply(&mut self, mut p: MirrorPeer) -> Result<MirrorPeer, MirrorPeerError> {
        let name = name_of(&p);
        if !self.deps.secure && !self.deps.config.allow_insecure {
            return Err(MirrorPeerError::Insecure(name));
        }
        let asked = p.metadata.as_ref().map_or(0, |m| m.resource_version);
        match self.peers.get(&name) {
            Some(old) => {
                let rev = self.revs.get(&name).copied().unwrap_or_default();
                if asked != 0 && asked != rev {
                    return Err(MirrorPeerError::Conflict(format!(
                        "MirrorPeer {name}: resourceVersion {asked} is stale (stored: {rev})"
                    )));
                }
                let errors = flotilla_api::mirrorpeer::validate_update(old, &p);
                if !errors.is_empty() {
                    return Err(MirrorPeerError::Invalid(errors));
                }
                let stored = old.metadata.clone().unwrap_or_default();
                let changed = old.spec != p.spec;
                let status = old.status.clone();
                crate::identity::keep(
                    p.metadata.get_or_insert_with(Default::default),
                    &stored,
                    changed,
                );
                p.status = status;
            }
            None => {
                crate::identity::create(p.metadata.get_or_insert_with(Default::default));
                p.status = None;
            }
        }
        if let Some(m) = p.metadata.as_mut() {
            m.resource_version = 0;
            m.deletion_timestamp = None;
        }
        let rev = self.buckets.peers.put(&name, &p).await?;
        let generation = p.metadata.as_ref().map_or(0, |m| m.generation);
        self.adopt(p, rev);
        tracing::info!(mirror_peer = %name, generation, "MirrorPeer applied");
        let now = Instant::now();
        for c in rules::members(&self.peers[&name])
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
        {
            if self.online(&c) {
                self.available.insert(c.clone());
            }
            self.schedule(&c, now);
        }
        self.refresh(&name).await;
        let mut shown = self.peers[&name].clone();
        if let Some(m) = shown.metadata.as_mut() {
            m.resource_version = self.revs[&name];
        }
        Ok(shown)
    }

    async fn delete(&mut self, name: &str) -> Result<(), MirrorPeerError> {
        let Some(p) = self.peers.get(name) else {
            return Err(MirrorPeerError::NotFound(name.to_string()));
        };
        let members: Vec<String> = rules::members(p).into_iter().map(str::to_string).collect();
        let boxes: Vec<String> = self
            .records
            .iter()
            .filter(|(_, r)| r.mirror_peer == name)
            .map(|(k, _)| k.clone())
            .collect();
        for key in boxes {
            self.buckets.secrets.purge(&key).await?;
            self.records.remove(&key);
            self.delivered.remove(&key);
        }
        self.buckets.peers.purge(name).await?;
        self.peers.remove(name);
        self.revs.remove(name);
        self.views.write().expect("views lock").remove(name);
        self.source_errors.retain(|(mp, _), _| mp != name);
        tracing::info!(mirror_peer = %name, "MirrorPeer deleted: its peers remove their GREEN Secrets");
        // No tombstone: the MirrorPeer missing from a peer's next answer is its deletion.
        let now = Instant::now();
        for c in members {
            self.schedule(&c, now);
        }
        Ok(())
    }

    async fn sync(&mut self, cluster: &str, req: PeerSyncRequest) -> PeerSyncResponse {
        let mine: Vec<String> = rules::of_cluster(self.view(), cluster)
            .into_iter()
            .map(name_of)
            .collect();
        if mine.is_empty() {
            // In no MirrorPeer: nothing is stored for it, and it removes what it still holds.
            self.pokes.remove(cluster);
            return PeerSyncResponse::default();
        }
        let checked = match rules::check(cluster, &req, self.view()) {
            Ok(c) => c,
            Err(why) => {
                // Logged by the route, within the cluster's warning budget.
                tracing::debug!(cluster, error = %why, "MirrorPeer request refused");
                return PeerSyncResponse {
                    error: why,
                    ..Default::default()
                };
            }
        };
        let mut refused = checked.refused;
        let now = Instant::now();
        if let Some(key) = checked.new_key
            && let Err(e) = self.adopt_key(cluster, key, &mine, now).await
        {
            return PeerSyncResponse {
                error: format!("storage unavailable: {e}; ask again"),
                ..Default::default()
            };
        }
        self.store_boxes(checked.boxes, now, &mut refused).await;
        self.store_floors(checked.floors, now).await;
        self.store_applied(checked.applied).await;
        self.source_errors.retain(|(_, c), _| c != cluster);
        for (mp, e) in checked.source_errors {
            self.source_errors.insert((mp, cluster.to_string()), e);
        }
        let (deliveries, more) =
            rules::deliveries(cluster, self.view(), self.deps.config.answer_budget);
        for d in &deliveries {
            for b in &d.inbound {
                self.delivered
                    .insert(record_key(&d.mirror_peer, &b.from, cluster));
            }
        }
        if !rules::has_work(cluster, self.view()) {
            self.pokes.remove(cluster);
        }
        for n in &mine {
            self.refresh(n).await;
        }
        PeerSyncResponse {
            deliveries,
            error: String::new(),
            refused,
            more,
        }
    }

    /// Stores the new curve key `cluster` presented (a peer of the MirrorPeers `mine`): its
    /// boxes sealed with or to the old key are dropped, and its peers are poked to seal again.
    async fn adopt_key(
        &mut self,
        cluster: &str,
        key: String,
        mine: &[String],
        now: Instant,
    ) -> Result<(), crate::store::StoreError> {
        let record = PeerKeyRecord { xkey: key.clone() };
        self.buckets.keys.put(cluster, &record).await?;
        tracing::info!(
            cluster,
            "a peer presented a new curve key: its peers seal again"
        );
        // Its boxes under the old key can no longer be taken as its, and the boxes to its
        // old key can no longer be opened: dropped before the new key's boxes are stored.
        let replaced = rules::replaced_boxes(cluster, &key, self.view());
        self.keys.insert(cluster.to_string(), key);
        self.drop_boxes(replaced, "sealed with or to a replaced key")
            .await;
        let peers: BTreeSet<String> = mine
            .iter()
            .filter_map(|n| self.peers.get(n))
            .flat_map(|p| rules::members(p).into_iter().map(str::to_string))
            .filter(|c| c != cluster)
            .collect();
        for p in peers {
            self.schedule(&p, now);
        }
        Ok(())
    }

    /// Stores checked boxes, poking each recipient; a box not stored is added to `refused`
    /// (the sender sends it again).
    async fn store_boxes(
        &mut self,
        boxes: Vec<SealedPeerSecret>,
        now: Instant,
        refused: &mut Vec<String>,
    ) {
        for b in boxes {
            let key = record_key(&b.mirror_peer, &b.from, &b.to);
            match self.buckets.secrets.put(&key, &b).await {
                Ok(_) => {
                    tracing::debug!(record = %key, revision = b.revision, "sealed peer secret stored");
                    self.delivered.remove(&key);
                    self.schedule(&b.to, now);
                    self.records.insert(key, b);
                }
                Err(e) => refused.push(format!(
                    "{} → {} of {}: not stored ({e}); send it again",
                    b.from, b.to, b.mirror_peer
                )),
            }
        }
    }

    /// Stores the pairs' floors a recipient reported, unless a newer box arrived meanwhile,
    /// poking each sender to seal again past its floor.
    async fn store_floors(&mut self, floors: Vec<SealedPeerSecret>, now: Instant) {
        for floor in floors {
            let key = record_key(&floor.mirror_peer, &floor.from, &floor.to);
            if self
                .records
                .get(&key)
                .is_some_and(|r| r.revision >= floor.revision)
            {
                continue; // A newer box arrived meanwhile: it counts.
            }
            match self.buckets.secrets.put(&key, &floor).await {
                Ok(_) => {
                    tracing::debug!(record = %key, revision = floor.revision, "a peer's applied revision kept as the pair's floor");
                    // The sender seals again past it now, not at its next resync: until then
                    // the peer refuses every box it sends.
                    self.schedule(&floor.from, now);
                    self.records.insert(key, floor);
                }
                Err(e) => tracing::debug!(record = %key, error = %e, "floor not stored"),
            }
        }
    }

    /// Stores the applied revisions and errors a recipient reported on the records held.
    async fn store_applied(&mut self, applied: Vec<(String, u64, String)>) {
        for (key, revision, error) in applied {
            let Some(mut r) = self.records.get(&key).cloned() else {
                continue;
            };
            r.applied_revision = revision;
            r.applied_error = error;
            match self.buckets.secrets.put(&key, &r).await {
                Ok(_) => {
                    self.records.insert(key, r);
                }
                Err(e) => tracing::debug!(record = %key, error = %e, "applied revision not stored"),
            }
        }
    }

    /// Recomputes a MirrorPeer's status and stores it when it changed.
    async fn refresh(&mut self, name: &str) {
        let Some(p) = self.peers.get(name) else {
            return;
        };
        let available: BTreeSet<&str> = self.available.iter().map(String::as_str).collect();
        let seen = Observed {
            available,
            delivered: &self.delivered,
            source_errors: &self.source_errors,
            insecure: !self.deps.secure,
        };
        let status = rules::status(p, self.view(), &seen);
        if p.status.as_ref() == Some(&status) {
            return;
        }
        let mut next = p.clone();
        next.status = Some(status);
        match self.buckets.peers.put(name, &next).await {
            Ok(rev) => self.adopt(next, rev),
            Err(e) => tracing::warn!(mirror_peer = %name, error = %e, "status not stored"),
        }
    }
}

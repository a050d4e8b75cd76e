//! The recovery window after a restore (I/O): whether it is open (bucket `hubmeta`, key
//! `recovery`, written by `flotilla-hub restore`), and the orphans — works spokes hold that
//! the restored store lacks (bucket `orphans`, key `<cluster>.<resource id>`). Every hub
//! follows both buckets into memory, so a cluster actor asks without a store read whether to
//! withhold a deletion ([`rules`]), and any hub lists the orphans.
//!
//! Orphan records are written unfenced: recording a stranger twice, or from a hub whose shard
//! lease just ended, writes the same record; decisions are compare-and-set on the record.

pub mod format;
mod metrics;
pub mod rules;

use crate::keys::ObjectRef;
use crate::store::{Bucket, StoreError};
use async_nats::jetstream::kv::Operation;
use flotilla_api::meta;
use flotilla_api::v1::{Orphan, OrphanDecision, OrphanKind, RecoveryStatus, RecoveryWindow};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Bucket of the hub's own facts about the store (key [`RECOVERY_KEY`]).
pub const HUBMETA: &str = "hubmeta";
/// Bucket of orphans, key `<cluster>.<resource id>`.
pub const ORPHANS: &str = "orphans";
/// The key of the open window in [`HUBMETA`].
pub const RECOVERY_KEY: &str = "recovery";
/// The key of the last window ever opened in [`HUBMETA`], kept after it closes: clusters that
/// have not resynced since are still covered ([`Recovery::restore_id`]).
pub const RESTORED_KEY: &str = "restored";

/// Why a recovery call failed.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Names that match no orphan of the cluster.
    #[error("cluster {cluster} has no orphan named {}", names.join(", "))]
    NotFound {
        /// The cluster.
        cluster: String,
        /// The names.
        names: Vec<String>,
    },
    /// Finishing while orphans are undecided.
    #[error(
        "{0} orphan(s) are undecided (flotilla get orphans); decide them, or finish with \
         --delete-orphans or --keep-orphans"
    )]
    Undecided(usize),
    /// No window is open.
    #[error("no recovery window is open")]
    NotOpen,
    /// A decision that does not fit an orphan's kind ([`rules::allowed`]).
    #[error("orphan {cluster}/{name}: {why}")]
    Unfit {
        /// The cluster.
        cluster: String,
        /// The orphan's name (or resource id).
        name: String,
        /// Why the decision does not fit.
        why: &'static str,
    },
}

/// One cluster's orphans by resource id, each with its revision.
type ClusterOrphans = BTreeMap<String, (Orphan, u64)>;

/// The window and the orphans, as every hub follows them. Cheap to clone.
#[derive(Clone)]
pub struct Recovery {
    inner: Arc<Inner>,
}

/// A work status the router refused as unknown, offered to name an orphan.
#[derive(Debug)]
struct Named {
    cluster: String,
    resource_id: String,
    name: String,
    generation: i64,
}

/// Statuses of unknown works waiting to name their orphan; more are dropped (the agent
/// republishes at its next reconnect, and the record is there without its name).
const NAMES_QUEUE: usize = 1024;

struct Inner {
    names: mpsc::Sender<Named>,
    orphans: Bucket<Orphan>,
    meta: Bucket<RecoveryWindow>,
    window: watch::Sender<Option<RecoveryWindow>>,
    /// The id of the last window ever opened ([`window_id`]).
    restored: watch::Sender<Option<String>>,
    index: RwLock<BTreeMap<String, ClusterOrphans>>,
}

/// A window's id: its own, or its backup's for a window opened before windows had one.
pub fn window_id(window: &RecoveryWindow) -> String {
    if window.id.is_empty() {
        window.backup_id.clone()
    } else {
        window.id.clone()
    }
}

impl Recovery {
    /// Loads the window and every orphan, and follows both buckets until `shutdown` flips.
    pub async fn start(
        orphans: Bucket<Orphan>,
        meta: Bucket<RecoveryWindow>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, JoinHandle<()>), StoreError> {
        // The whole bucket, so a record that does not decode is quarantined and listed like
        // every other bucket's; a window that does not decode stops the start (below), since
        // taking it for closed would let deletions through.
        meta.load_all().await?;
        let window = meta.get(RECOVERY_KEY).await?.map(|(w, _)| w);
        // A window opened by a hub that did not keep it under `restored` counts as the last.
        let restored = meta
            .get(RESTORED_KEY)
            .await?
            .map(|(w, _)| window_id(&w))
            .or_else(|| window.as_ref().map(window_id));
        if window.is_some() {
            tracing::warn!(
                "a recovery window is open: no spoke is told to delete a work the store lacks \
                 until an operator decides (flotilla get orphans; flotilla recovery finish)"
            );
        }
        let (names, named) = mpsc::channel(NAMES_QUEUE);
        let recovery = Self {
            inner: Arc::new(Inner {
                names,
                orphans,
                meta,
                window: watch::channel(window).0,
                restored: watch::channel(restored).0,
                index: RwLock::new(BTreeMap::new()),
            }),
        };
        let from = recovery.load().await?;
        let follower = recovery.clone();
        let task = tokio::spawn(async move { follower.follow(from, named, shutdown).await });
        Ok((recovery, task))
    }

    /// Replaces the index with the bucket's content; the stream sequence it read up to.
    async fn load(&self) -> Result<u64, StoreError> {
        let last = self.inner.orphans.last_sequence().await?;
        let mut index: BTreeMap<String, ClusterOrphans> = BTreeMap::new();
        for (key, orphan, revision) in self.inner.orphans.load_all().await? {
            if let Some(r) = ObjectRef::from_store_key(&key) {
                index
                    .entry(r.namespace)
                    .or_default()
                    .insert(r.name, (orphan, revision));
            }
        }
        *self.inner.index.write().expect("orphan index") = index;
        Ok(last)
    }

    /// Follows both buckets, and names orphans from the statuses offered; a watch that fails
    /// is opened again after a reload.
    async fn follow(
        self,
        mut from: u64,
        mut named: mpsc::Receiver<Named>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let watched = async {
                let orphans = self
                    .inner
                    .orphans
                    .kv()
                    .watch_all_from_revision(from + 1)
                    .await?;
                let meta = self.inner.meta.kv().watch_all().await?;
                Ok::<_, async_nats::jetstream::kv::WatchError>((orphans, meta))
            };
            match watched.await {
                Ok((mut orphans, mut meta)) => loop {
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        Some(Ok(entry)) = orphans.next() => self.apply(entry),
                        Some(n) = named.recv() => {
                            self.name(&n.cluster, &n.resource_id, &n.name, n.generation).await;
                        }
                        Some(Ok(entry)) = meta.next() => self.apply_meta(entry),
                        else => break,
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "watching the recovery buckets failed; retrying")
                }
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            match self.load().await {
                Ok(last) => from = last,
                Err(e) => tracing::warn!(error = %e, "reloading the orphans failed; retrying"),
            }
            if let Ok(window) = self.inner.meta.get(RECOVERY_KEY).await {
                self.inner.window.send_replace(window.map(|(w, _)| w));
            }
            if let Ok(Some((restored, _))) = self.inner.meta.get(RESTORED_KEY).await {
                self.inner.restored.send_replace(Some(window_id(&restored)));
            }
        }
    }

    /// A `hubmeta` record changed: the open window, or the last one opened. A record that does
    /// not decode changes nothing (taking it for a closed window would let deletions through;
    /// the same record stops a hub at start).
    fn apply_meta(&self, entry: async_nats::jetstream::kv::Entry) {
        let window = match entry.operation {
            Operation::Put => {
                match self
                    .inner
                    .meta
                    .decode(&entry.key, &entry.value, entry.revision)
                {
                    Ok(w) => Some(w),
                    Err(e) => {
                        tracing::error!(key = %entry.key, error = %e, "a recovery record does not decode; the window is left as it was");
                        return;
                    }
                }
            }
            Operation::Delete | Operation::Purge => None,
        };
        match entry.key.as_str() {
            RECOVERY_KEY => {
                tracing::info!(open = window.is_some(), "recovery window changed");
                if let Some(w) = &window {
                    self.inner.restored.send_if_modified(|r| {
                        let id = window_id(w);
                        let changed = r.as_ref() != Some(&id);
                        *r = Some(id);
                        changed
                    });
                }
                self.inner.window.send_replace(window);
            }
            RESTORED_KEY => {
                if let Some(w) = window {
                    self.inner.restored.send_replace(Some(window_id(&w)));
                }
            }
            _ => {}
        }
    }

    /// One orphan record changed.
    fn apply(&self, entry: async_nats::jetstream::kv::Entry) {
        let Some(r) = ObjectRef::from_store_key(&entry.key) else {
            return;
        };
        let mut index = self.inner.index.write().expect("orphan index");
        match entry.operation {
            Operation::Put => {
                let Ok(orphan) =
                    self.inner
                        .orphans
                        .decode(&entry.key, &entry.value, entry.revision)
                else {
                    return;
                };
                let cluster = index.entry(r.namespace).or_default();
                if cluster
                    .get(&r.name)
                    .is_none_or(|(_, rev)| *rev < entry.revision)
                {
                    cluster.insert(r.name, (orphan, entry.revision));
                }
            }
            Operation::Delete | Operation::Purge => {
                if let Some(cluster) = index.get_mut(&r.namespace) {
                    cluster.remove(&r.name);
                    if cluster.is_empty() {
                        index.remove(&r.namespace);
                    }
                }
            }
        }
    }

    /// The open window, if one is.
    pub fn window(&self) -> Option<RecoveryWindow> {
        self.inner.window.borrow().clone()
    }

    /// Whether a window is open.
    pub fn is_open(&self) -> bool {
        self.inner.window.borrow().is_some()
    }

    /// The id of the last window ever opened, open or finished: a cluster whose agent has not
    /// sent a full resync since is covered as if the window were open.
    pub fn restore_id(&self) -> Option<String> {
        self.inner.restored.borrow().clone()
    }

    /// A cluster's orphans by resource id.
    pub fn of_cluster(&self, cluster: &str) -> BTreeMap<String, Orphan> {
        let index = self.inner.index.read().expect("orphan index");
        index.get(cluster).map_or_else(BTreeMap::new, |c| {
            c.iter()
                .map(|(id, (o, _))| (id.clone(), o.clone()))
                .collect()
        })
    }

    /// How many orphan records the fleet has (no copy of them), for [`rules::MAX_ORPHANS`].
    pub fn total(&self) -> usize {
        let index = self.inner.index.read().expect("orphan index");
        index.values().map(|c| c.len()).sum()
    }

    /// How many orphan records `cluster` has (no copy of them).
    pub fn count(&self, cluster: &str) -> usize {
        let index = self.inner.index.read().expect("orphan index");
        index.get(cluster).map_or(0, |c| c.len())
    }

    /// A cluster's orphan records as [`rules::answer`] reads them.
    pub fn known(&self, cluster: &str) -> rules::Known {
        let index = self.inner.index.read().expect("orphan index");
        index.get(cluster).map_or_else(rules::Known::new, |c| {
            c.iter()
                .map(|(id, (o, _))| (id.clone(), (o.kind(), o.decision())))
                .collect()
        })
    }

    /// The generation a spoke holds of work `resource_id` when it holds it ahead of the store
    /// or the store lacks it (an orphan's), for [`rules::next_generation`]: a spec the store
    /// writes for it (an update, or a create adopting the orphan) goes above it, or the agent
    /// would take it for one it has.
    pub fn ahead_of(&self, cluster: &str, resource_id: &str) -> Option<i64> {
        let index = self.inner.index.read().expect("orphan index");
        index
            .get(cluster)?
            .get(resource_id)
            .map(|(o, _)| o.agent_generation)
    }

    /// Resource ids of a cluster's orphans the store lacks whose names have not come yet (at
    /// most `limit`): a resync answer asks the agent to publish their status again.
    pub fn unnamed(&self, cluster: &str, limit: usize) -> Vec<String> {
        let index = self.inner.index.read().expect("orphan index");
        index.get(cluster).map_or_else(Vec::new, |c| {
            c.iter()
                .filter(|(_, (o, _))| o.name.is_empty() && o.kind() == OrphanKind::Work)
                .map(|(id, _)| id.clone())
                .take(limit)
                .collect()
        })
    }

    /// Whether the cluster has any orphan record (a cheap check for every resync).
    pub fn has_orphans(&self, cluster: &str) -> bool {
        self.inner
            .index
            .read()
            .expect("orphan index")
            .contains_key(cluster)
    }

    /// The orphans of `cluster`, or of every cluster, sorted by cluster and name.
    pub fn list(&self, cluster: Option<&str>) -> Vec<Orphan> {
        let index = self.inner.index.read().expect("orphan index");
        let mut items: Vec<Orphan> = index
            .iter()
            .filter(|(c, _)| cluster.is_none_or(|want| want == c.as_str()))
            .flat_map(|(_, c)| c.values().map(|(o, _)| o.clone()))
            .collect();
        items.sort_by(|a, b| {
            (&a.cluster, &a.name, &a.resource_id).cmp(&(&b.cluster, &b.name, &b.resource_id))
        });
        items
    }

    /// One page of orphans (of `cluster`, or of every cluster) in (cluster, resource id)
    /// order, starting after `after` (the last page's last `(cluster, resource id)`), at most
    /// `limit`; and where the next page starts, when there is one.
    pub fn page(
        &self,
        cluster: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> (Vec<Orphan>, Option<(String, String)>) {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let index = self.inner.index.read().expect("orphan index");
        let from = after.map_or(Unbounded, |(c, _)| Included(c.to_string()));
        let mut items = Vec::new();
        let mut last: Option<(&String, &String)> = None;
        for (c, orphans) in index.range((from, Unbounded)) {
            if cluster.is_some_and(|want| want != c.as_str()) {
                continue;
            }
            let start = match after {
                Some((ac, id)) if ac == c.as_str() => Excluded(id.to_string()),
                _ => Unbounded,
            };
            for (id, (o, _)) in orphans.range((start, Unbounded)) {
                if items.len() == limit {
                    let next = last.map(|(c, id)| (c.clone(), id.clone()));
                    return (items, next);
                }
                items.push(o.clone());
                last = Some((c, id));
            }
        }
        (items, None)
    }

    /// The orphans counted by kind and decision.
    pub fn counts(&self) -> std::collections::HashMap<(OrphanKind, OrphanDecision), i64> {
        let index = self.inner.index.read().expect("orphan index");
        let mut counts = std::collections::HashMap::new();
        for (o, _) in index.values().flat_map(|c| c.values()) {
            *counts.entry((o.kind(), o.decision())).or_default() += 1;
        }
        counts
    }

    /// Exports the window and the orphans as gauges computed at each scrape
    /// (`flotilla_hub_recovery_open`, `flotilla_hub_orphans{kind,decision}`).
    pub fn export(&self, metrics: &crate::metrics::Metrics) {
        metrics.register_collector(Box::new(metrics::RecoveryMetrics(self.clone())));
    }

    /// The window and the orphans counted by decision.
    pub fn status(&self) -> RecoveryStatus {
        let index = self.inner.index.read().expect("orphan index");
        let mut status = RecoveryStatus {
            window: self.window(),
            clusters: index.len() as u32,
            ..Default::default()
        };
        for (o, _) in index.values().flat_map(|c| c.values()) {
            match o.decision() {
                OrphanDecision::Undecided => status.undecided += 1,
                OrphanDecision::Delete => status.delete += 1,
                OrphanDecision::Keep => status.keep += 1,
                OrphanDecision::Revert => status.revert += 1,
            }
        }
        status
    }

    /// Writes `orphan` over revision `expected` (0: new) and shows it at once.
    async fn write(&self, orphan: Orphan, expected: u64) -> Result<u64, StoreError> {
        let key = ObjectRef::new(&orphan.cluster, &orphan.resource_id);
        let revision = self
            .inner
            .orphans
            .write(&key.store_key(), &orphan, expected)
            .await?;
        let mut index = self.inner.index.write().expect("orphan index");
        let cluster = index.entry(key.namespace).or_default();
        if cluster
            .get(&key.name)
            .is_none_or(|(_, rev)| *rev < revision)
        {
            cluster.insert(key.name, (orphan, revision));
        }
        Ok(revision)
    }

    /// Records strangers of `cluster` as undecided orphans, each with its name when the store
    /// knows it (`Ahead`); a record another hub made first is left as it is. Whether every one
    /// is recorded (a failed write is tried again at the next resync).
    pub async fn record(&self, cluster: &str, strangers: &[(rules::Stranger, String)]) -> bool {
        let mut all = true;
        for (stranger, name) in strangers {
            let id = &stranger.id;
            let mut orphan = Orphan {
                cluster: cluster.to_string(),
                resource_id: id.clone(),
                name: name.clone(),
                agent_generation: stranger.agent_generation,
                store_generation: stranger.store_generation,
                first_seen: Some(meta::now()),
                ..Default::default()
            };
            orphan.set_kind(stranger.kind);
            match self.write(orphan, 0).await {
                Ok(_) => {
                    tracing::info!(cluster, resource_id = %id, kind = ?stranger.kind, "orphan recorded: the spoke holds a work the store lacks, or holds it newer")
                }
                Err(e) if e.is_conflict() => {}
                Err(e) => {
                    all = false;
                    tracing::warn!(cluster, resource_id = %id, error = %e, "recording an orphan failed; the next resync tries again")
                }
            }
        }
        all
    }

    /// Offers the status of a work the store lacks (the router refuses it) to name its orphan:
    /// only while a window is open or the cluster has orphans, only when the resource id is
    /// the one `name` makes on `cluster`, and without waiting (a full queue drops it).
    pub fn offer(&self, cluster: &str, resource_id: &str, name: &str, generation: i64) {
        if !(self.is_open() || self.has_orphans(cluster))
            || !rules::orphan_name_ok(name)
            || flotilla_bus::works::resource_id(cluster, name) != resource_id
        {
            return;
        }
        let _ = self.inner.names.try_send(Named {
            cluster: cluster.to_string(),
            resource_id: resource_id.to_string(),
            name: name.to_string(),
            generation,
        });
    }

    /// Names an orphan from the status its agent reports (recording it if no resync has yet,
    /// while the window is open). `name` must be the one `resource_id` was made from.
    async fn name(&self, cluster: &str, resource_id: &str, name: &str, generation: i64) {
        let current = self
            .inner
            .index
            .read()
            .expect("orphan index")
            .get(cluster)
            .and_then(|c| c.get(resource_id).cloned());
        let (mut orphan, expected) = match current {
            Some((o, _)) if o.name == name => return,
            Some(found) => found,
            None if self.is_open() => {
                if self.count(cluster) >= rules::MAX_ORPHANS_PER_CLUSTER
                    || self.total() >= rules::MAX_ORPHANS
                {
                    return;
                }
                let fresh = Orphan {
                    cluster: cluster.to_string(),
                    resource_id: resource_id.to_string(),
                    agent_generation: generation,
                    first_seen: Some(meta::now()),
                    ..Default::default()
                };
                (fresh, 0)
            }
            None => return,
        };
        orphan.name = name.to_string();
        match self.write(orphan, expected).await {
            Ok(_) => {}
            // The resync recorded it meanwhile (or another hub did): name the stored record.
            Err(e) if e.is_conflict() => self.name_stored(cluster, resource_id, name).await,
            Err(e) => tracing::warn!(cluster, resource_id, error = %e, "naming an orphan failed"),
        }
    }

    /// Names the record as the bucket holds it now, when it is still unnamed: the index lags
    /// the bucket by a watch, and a name lost here would wait for the next resync's request.
    async fn name_stored(&self, cluster: &str, resource_id: &str, name: &str) {
        let key = ObjectRef::new(cluster, resource_id);
        let stored = match self.inner.orphans.get(&key.store_key()).await {
            Ok(Some((orphan, revision))) if orphan.name.is_empty() => (orphan, revision),
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(cluster, resource_id, error = %e, "naming an orphan failed");
                return;
            }
        };
        let (mut orphan, revision) = stored;
        orphan.name = name.to_string();
        if let Err(e) = self.write(orphan, revision).await
            && !e.is_conflict()
        {
            tracing::warn!(cluster, resource_id, error = %e, "naming an orphan failed");
        }
    }

    /// Removes every orphan record of `cluster` (the cluster was deleted).
    pub async fn forget_cluster(&self, cluster: &str) {
        let ids: Vec<String> = self.of_cluster(cluster).into_keys().collect();
        self.settle(cluster, &ids).await;
    }

    /// Removes the records of `ids` of `cluster` (settled: gone from the spoke, or back in
    /// the store).
    pub async fn settle(&self, cluster: &str, ids: &[String]) {
        for id in ids {
            let key = ObjectRef::new(cluster, id);
            match self.inner.orphans.purge(&key.store_key()).await {
                Ok(()) => {
                    let mut index = self.inner.index.write().expect("orphan index");
                    if let Some(c) = index.get_mut(cluster) {
                        c.remove(id);
                        if c.is_empty() {
                            index.remove(cluster);
                        }
                    }
                    tracing::info!(cluster, resource_id = %id, "orphan settled");
                }
                Err(e) => {
                    tracing::warn!(cluster, resource_id = %id, error = %e, "removing a settled orphan failed")
                }
            }
        }
    }

    /// Decides orphans of `cluster` chosen by name or resource id (or all of them); the
    /// orphans as decided. Names matching none are refused before anything is written.
    pub async fn decide(
        &self,
        cluster: &str,
        names: &[String],
        all: bool,
        decision: OrphanDecision,
        by: &str,
    ) -> Result<Vec<Orphan>, RecoveryError> {
        let current: ClusterOrphans = self
            .inner
            .index
            .read()
            .expect("orphan index")
            .get(cluster)
            .cloned()
            .unwrap_or_default();
        let plain: BTreeMap<String, Orphan> = current
            .iter()
            .map(|(id, (o, _))| (id.clone(), o.clone()))
            .collect();
        let (chosen, missing) = rules::choose(&plain, names, all);
        if !missing.is_empty() {
            return Err(RecoveryError::NotFound {
                cluster: cluster.to_string(),
                names: missing,
            });
        }
        if let Some((orphan, why)) = chosen
            .iter()
            .find_map(|o| rules::allowed(o.kind(), decision).err().map(|why| (o, why)))
        {
            let name = if orphan.name.is_empty() {
                &orphan.resource_id
            } else {
                &orphan.name
            };
            return Err(RecoveryError::Unfit {
                cluster: cluster.to_string(),
                name: name.clone(),
                why,
            });
        }
        let mut decided = Vec::with_capacity(chosen.len());
        for orphan in chosen {
            let expected = current.get(&orphan.resource_id).map_or(0, |(_, rev)| *rev);
            let mut next = orphan.clone();
            next.set_decision(decision);
            next.decided_by = by.to_string();
            next.decided_at = Some(meta::now());
            self.write(next.clone(), expected).await?;
            decided.push(next);
        }
        Ok(decided)
    }

    /// Closes the window: undecided orphans become `undecided` ([`rules::on_finish`]: an
    /// `Ahead` one is reverted for `Delete`); refused while any is and `undecided` is
    /// `Undecided`.
    pub async fn finish(
        &self,
        undecided: OrphanDecision,
        by: &str,
    ) -> Result<RecoveryStatus, RecoveryError> {
        if !self.is_open() {
            return Err(RecoveryError::NotOpen);
        }
        let open: BTreeSet<String> = self
            .list(None)
            .into_iter()
            .filter(|o| o.decision() == OrphanDecision::Undecided)
            .map(|o| o.cluster)
            .collect();
        let count = self.status().undecided as usize;
        if count > 0 {
            if undecided == OrphanDecision::Undecided {
                return Err(RecoveryError::Undecided(count));
            }
            for cluster in &open {
                for kind in [
                    OrphanKind::Work,
                    OrphanKind::Ahead,
                    OrphanKind::Behind,
                    OrphanKind::Incarnation,
                ] {
                    let ids: Vec<String> = self
                        .of_cluster(cluster)
                        .into_values()
                        .filter(|o| o.decision() == OrphanDecision::Undecided && o.kind() == kind)
                        .map(|o| o.resource_id)
                        .collect();
                    if !ids.is_empty() {
                        let decision = rules::on_finish(kind, undecided);
                        self.decide(cluster, &ids, false, decision, by).await?;
                    }
                }
            }
        }
        self.inner.meta.purge(RECOVERY_KEY).await?;
        self.inner.window.send_replace(None);
        tracing::info!(by, "recovery window closed");
        Ok(self.status())
    }
}

/// Opens the window in a store just restored (`flotilla-hub restore`, before any hub runs),
/// with a fresh id when it has none, and keeps it as the last window opened.
pub async fn open(
    meta: &Bucket<RecoveryWindow>,
    window: &RecoveryWindow,
) -> Result<u64, StoreError> {
    let mut window = window.clone();
    if window.id.is_empty() {
        window.id = uuid::Uuid::new_v4().to_string();
    }
    meta.put(RESTORED_KEY, &window).await?;
    meta.put(RECOVERY_KEY, &window).await
}

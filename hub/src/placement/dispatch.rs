//! The dispatcher: the one task that turns inventory, set, binding, score and placement changes
//! into (a) a fresh [`Snapshot`] of the scheduler's indexed fleet and (b) wake-ups of only the
//! placements a change can affect. It never messages cluster actors; it reads their change
//! broadcasts.
//!
//! The dispatcher keeps one [`Fleet`] index up to date change by change (an update touches only
//! the changed cluster or score; cluster removals are batched into one re-index). Changes are
//! debounced: the first change opens a window of `PlacementConfig::debounce`; at its end, if
//! anything changed and some placement is woken, a copy of the index is published (a clone copies
//! integer tables and reference counts, not cluster data), and every placement collected in the
//! window is woken. A burst of 10,000 lease expiries therefore costs one publication and one
//! scheduling run per affected placement, and changes no placement can see cost no publication
//! until one is needed.
//!
//! Which placements a change can affect ([`flotilla_placement::ChangeFilter`]): a cluster change
//! matters to a placement only if it touches what the placement reads (label and claim keys of
//! its sets, predicates, groups and spread keys; taints; allocatable CPU/memory when it ranks by
//! them) and the cluster is decided for it, reaches it (eligible set and predicates) before or
//! after, or becomes or stops being a candidate; changes the scheduler cannot see at all
//! (conditions, lease renewals) match nothing. A score change matters to placements that use that
//! AddOnPlacementScore on a decided or reachable cluster. Set and binding changes re-index, rebuild every
//! filter and wake every placement (they are rare). A lagging broadcast receiver resynchronises
//! from the inventory and wakes everybody.

use crate::clusterset::{ClusterSets, SetChange};
use crate::inventory::{Change, ChangeKind, ClusterInventory};
use crate::placement::actor::PlacementHandle;
use crate::placement::convert;
use crate::placement::metrics::{PlacementMetrics, Timer};
use crate::placement::scores::ScoreInventory;
use crate::placement::snapshot::Snapshot;
use crate::placement::{PlacementInventory, PlacementView};
use dashmap::DashMap;
use flotilla_api::v1::{AddOnPlacementScore, ManagedCluster};
use flotilla_placement::{self as sched, ChangeFilter, Fleet};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// One placement as the dispatcher tracks it.
struct Tracked {
    spec: Option<sched::Placement>,
    filter: Option<ChangeFilter>,
    decided: HashSet<String>,
}

/// The scheduler's inputs: one [`Fleet`] kept up to date change by change (cluster
/// removals are batched into one re-index per window), and fleet-wide decision counts. A
/// [`Snapshot`] is a clone of it — integer tables and reference counts, not cluster data.
struct Index {
    fleet: Fleet,
    /// Clusters removed from the inventory but still in `fleet` until the next publication.
    removed: HashSet<String>,
    counts: HashMap<String, u32>,
    fleet_dirty: bool,
    counts_dirty: bool,
}

impl Default for Index {
    fn default() -> Self {
        Self {
            fleet: Fleet::new(vec![], vec![], vec![], vec![]),
            removed: HashSet::new(),
            counts: HashMap::new(),
            fleet_dirty: false,
            counts_dirty: false,
        }
    }
}

impl Index {
    /// The scheduler's current view of a cluster (`None` once removed).
    fn cluster(&self, name: &str) -> Option<&sched::Cluster> {
        if self.removed.contains(name) {
            None
        } else {
            self.fleet.cluster(name)
        }
    }

    /// A snapshot reusing `old`'s parts that did not change.
    fn build(&mut self, old: &Snapshot, metrics: &PlacementMetrics) -> Snapshot {
        let fleet = if self.fleet_dirty {
            let _t = Timer::start(&metrics.snapshot_seconds);
            metrics.snapshots.inc();
            self.fleet_dirty = false;
            if !self.removed.is_empty() {
                let gone: Vec<String> = self.removed.drain().collect();
                self.fleet.remove_clusters(&gone);
            }
            Arc::new(self.fleet.clone())
        } else {
            old.fleet.clone()
        };
        let counts = if self.counts_dirty {
            self.counts_dirty = false;
            Arc::new(self.counts.clone())
        } else {
            old.counts.clone()
        };
        Snapshot {
            fleet,
            counts,
            version: old.version + 1,
        }
    }
}

/// The dispatcher's state. Built by [`Dispatcher::new`] from the current inventories, then
/// driven by [`Dispatcher::run`].
pub(crate) struct Dispatcher {
    index: Index,
    placements: HashMap<String, Tracked>,
    pending: HashSet<String>,
    deadline: Option<Instant>,
    debounce: Duration,
    snapshot: watch::Sender<Arc<Snapshot>>,
    actors: Arc<DashMap<String, PlacementHandle>>,
    metrics: PlacementMetrics,
    sources: Sources,
}

/// Where changes come from.
pub(crate) struct Sources {
    pub(crate) clusters: ClusterInventory,
    pub(crate) sets: ClusterSets,
    pub(crate) scores: ScoreInventory,
    pub(crate) placements: PlacementInventory,
}

struct Receivers {
    clusters: broadcast::Receiver<Change<ManagedCluster>>,
    sets: broadcast::Receiver<SetChange>,
    scores: broadcast::Receiver<Change<AddOnPlacementScore>>,
    placements: broadcast::Receiver<Change<PlacementView>>,
}

fn decided_of(view: &PlacementView) -> HashSet<String> {
    view.decisions
        .iter()
        .flat_map(|d| convert::decided_clusters(d).map(str::to_string))
        .collect()
}

impl Dispatcher {
    /// Reads everything once and builds the first snapshot (blocking: at 100,000 clusters the
    /// index takes tens of milliseconds). Subscribes before reading, so no change is missed.
    pub(crate) fn new(
        sources: Sources,
        actors: Arc<DashMap<String, PlacementHandle>>,
        metrics: PlacementMetrics,
        debounce: Duration,
        snapshot: watch::Sender<Arc<Snapshot>>,
    ) -> (Self, ReceiversHandle) {
        let receivers = Receivers {
            clusters: sources.clusters.subscribe(),
            sets: sources.sets.subscribe(),
            scores: sources.scores.subscribe(),
            placements: sources.placements.subscribe(),
        };
        let mut d = Self {
            index: Index::default(),
            placements: HashMap::new(),
            pending: HashSet::new(),
            deadline: None,
            debounce,
            snapshot,
            actors,
            metrics,
            sources,
        };
        d.reload_sets();
        d.reload_fleet();
        d.reload_placements();
        let old = d.snapshot.borrow().clone();
        let snap = d.index.build(&old, &d.metrics);
        d.snapshot.send_replace(Arc::new(snap));
        (d, ReceiversHandle(receivers))
    }

    /// Rebuilds the fleet from the inventories (at start, and after a lagging receiver).
    fn reload_fleet(&mut self) {
        let f = &self.index.fleet;
        let (sets, bindings) = (f.sets().to_vec(), f.bindings().to_vec());
        let clusters = self
            .sources
            .clusters
            .snapshot()
            .iter()
            .map(|c| convert::cluster(c))
            .collect();
        let scores = self
            .sources
            .scores
            .snapshot()
            .iter()
            .map(|s| convert::score(s))
            .collect();
        self.index.fleet = Fleet::new(clusters, sets, bindings, scores);
        self.index.removed.clear();
        self.index.fleet_dirty = true;
    }

    fn reload_sets(&mut self) {
        let sets: Vec<sched::ManagedClusterSet> = self
            .sources
            .sets
            .sets()
            .iter()
            .map(convert::cluster_set)
            .collect();
        let bindings: Vec<sched::ManagedClusterSetBinding> = self
            .sources
            .sets
            .list_bindings("")
            .iter()
            .map(convert::binding)
            .collect();
        for t in self.placements.values_mut() {
            t.filter = t
                .spec
                .as_ref()
                .map(|s| ChangeFilter::new(s, &sets, &bindings));
        }
        self.index.fleet.set_sets(sets, bindings);
        self.index.fleet_dirty = true;
    }

    fn reload_placements(&mut self) {
        self.placements.clear();
        self.index.counts.clear();
        for (key, view) in self.sources.placements.with_prefix("") {
            self.track(&key, &view);
        }
        self.index.counts_dirty = true;
    }

    fn track(&mut self, key: &str, view: &PlacementView) {
        let spec = convert::placement(&view.placement).ok();
        let filter = spec
            .as_ref()
            .map(|s| ChangeFilter::new(s, self.index.fleet.sets(), self.index.fleet.bindings()));
        let decided = decided_of(view);
        for c in &decided {
            *self.index.counts.entry(c.clone()).or_default() += 1;
        }
        self.placements.insert(
            key.to_string(),
            Tracked {
                spec,
                filter,
                decided,
            },
        );
    }

    /// Stops tracking a placement; returns its spec.
    fn untrack(&mut self, key: &str) -> Option<sched::Placement> {
        let t = self.placements.remove(key)?;
        for c in &t.decided {
            if let Some(n) = self.index.counts.get_mut(c) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.index.counts.remove(c);
                }
            }
        }
        t.spec
    }

    fn touch(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + self.debounce);
        }
    }

    fn wake_all(&mut self) {
        self.pending.extend(self.placements.keys().cloned());
        self.touch();
    }

    fn on_cluster(&mut self, change: Change<ManagedCluster>) {
        let name = change.key.to_string();
        // Most changes (lease renewals, conditions) touch no field placement reads: checked
        // on the borrowed cluster, before building its scheduler copy.
        if !matches!(change.kind, ChangeKind::Deleted)
            && self
                .index
                .cluster(&name)
                .is_some_and(|held| convert::unchanged(&change.object, held))
        {
            return;
        }
        let new = match change.kind {
            ChangeKind::Deleted => None,
            _ => Some(convert::cluster(&change.object)),
        };
        let old = self.index.cluster(&name);
        if old == new.as_ref() {
            return;
        }
        for (key, t) in &self.placements {
            let affected = t
                .filter
                .as_ref()
                .is_some_and(|f| f.may_be_affected(t.decided.contains(&name), old, new.as_ref()));
            if affected {
                self.pending.insert(key.clone());
            }
        }
        match new {
            Some(c) => {
                self.index.removed.remove(&name);
                self.index.fleet.upsert_cluster(c);
            }
            // Removals re-index the fleet: batched, once per publication.
            None => {
                self.index.removed.insert(name);
            }
        }
        self.index.fleet_dirty = true;
        self.touch();
    }

    fn on_score(&mut self, change: Change<AddOnPlacementScore>) {
        let removed = convert::score(&change.object);
        let new = match change.kind {
            ChangeKind::Deleted => None,
            _ => Some(removed.clone()),
        };
        let old = self
            .index
            .fleet
            .score(&removed.cluster, &removed.resource_name);
        if old == new.as_ref() {
            return;
        }
        if let Some(s) = new.as_ref().or(old)
            && let Some(cluster) = self.index.cluster(&s.cluster)
        {
            for (pkey, t) in &self.placements {
                let affected = t.filter.as_ref().is_some_and(|f| {
                    f.score_change_may_affect(
                        &s.resource_name,
                        cluster,
                        t.decided.contains(&s.cluster),
                    )
                });
                if affected {
                    self.pending.insert(pkey.clone());
                }
            }
        }
        match new {
            Some(s) => self.index.fleet.upsert_score(s),
            None => {
                self.index
                    .fleet
                    .remove_score(&removed.cluster, &removed.resource_name);
            }
        };
        self.index.fleet_dirty = true;
        self.touch();
    }

    fn on_placement(&mut self, change: Change<PlacementView>) {
        let key = change.key.to_string();
        let old_spec = self.untrack(&key);
        if change.kind == ChangeKind::Deleted {
            self.pending.remove(&key);
        } else {
            self.track(&key, &change.object);
            // A new or changed spec was scheduled against a fleet that is about to be replaced
            // without the dispatcher knowing its filter: it looks again once the fleet is.
            let spec = self.placements.get(&key).and_then(|t| t.spec.as_ref());
            if self.index.fleet_dirty && old_spec.as_ref() != spec {
                self.pending.insert(key);
            }
        }
        self.index.counts_dirty = true;
        self.touch();
    }

    /// Ends a debounce window: publishes a new snapshot if anything changed and a
    /// placement is about to read it (`force` for API calls), then wakes the collected placements.
    /// A change that wakes nobody leaves the publication for later: a placement it cannot affect
    /// schedules the same against the older snapshot.
    async fn flush(&mut self, force: bool) {
        self.deadline = None;
        let dirty = self.index.fleet_dirty || self.index.counts_dirty;
        if dirty && (force || !self.pending.is_empty()) {
            // Batched removals re-index (tens of ms at 100,000 clusters): keep it off the async
            // workers.
            let mut index = std::mem::take(&mut self.index);
            let old = self.snapshot.borrow().clone();
            let metrics = self.metrics.clone();
            let (index, snap) = flotilla_hub_core::tasks::blocking(move || {
                let snap = index.build(&old, &metrics);
                (index, snap)
            })
            .await
            .expect("publishing the fleet snapshot panicked");
            self.index = index;
            self.snapshot.send_replace(Arc::new(snap));
        }
        tracing::debug!(
            pending = self.pending.len(),
            clusters = self.index.fleet.clusters().len(),
            "flushing placement changes"
        );
        for key in std::mem::take(&mut self.pending) {
            if let Some(h) = self.actors.get(&key) {
                self.metrics.wakeups.inc();
                h.wake();
            }
        }
    }

    fn cluster_event(&mut self, c: Result<Change<ManagedCluster>, RecvError>) -> bool {
        match c {
            Ok(c) => self.on_cluster(c),
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "cluster changes lagged; resynchronising");
                self.reload_fleet();
                self.wake_all();
            }
            Err(RecvError::Closed) => return false,
        }
        true
    }

    fn set_event(&mut self, s: Result<SetChange, RecvError>) -> bool {
        match s {
            Ok(_) | Err(RecvError::Lagged(_)) => {
                self.reload_sets();
                self.wake_all();
                true
            }
            Err(RecvError::Closed) => false,
        }
    }

    fn score_event(&mut self, s: Result<Change<AddOnPlacementScore>, RecvError>) -> bool {
        match s {
            Ok(s) => self.on_score(s),
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "score changes lagged; resynchronising");
                self.reload_fleet();
                self.wake_all();
            }
            Err(RecvError::Closed) => return false,
        }
        true
    }

    fn placement_event(&mut self, p: Result<Change<PlacementView>, RecvError>) -> bool {
        match p {
            Ok(p) => self.on_placement(p),
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "placement changes lagged; resynchronising");
                self.reload_placements();
                self.touch();
            }
            Err(RecvError::Closed) => return false,
        }
        true
    }

    /// Takes every change already queued (without waiting).
    fn drain(&mut self, rx: &mut Receivers) {
        use broadcast::error::TryRecvError;
        fn next<T: Clone>(r: &mut broadcast::Receiver<T>) -> Option<Result<T, RecvError>> {
            match r.try_recv() {
                Ok(v) => Some(Ok(v)),
                Err(TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
                Err(TryRecvError::Empty | TryRecvError::Closed) => None,
            }
        }
        while let Some(e) = next(&mut rx.sets) {
            self.set_event(e);
        }
        while let Some(e) = next(&mut rx.clusters) {
            self.cluster_event(e);
        }
        while let Some(e) = next(&mut rx.scores) {
            self.score_event(e);
        }
        while let Some(e) = next(&mut rx.placements) {
            self.placement_event(e);
        }
    }

    /// Runs until `shutdown` flips. A message on `sync` makes the dispatcher take every queued
    /// change and publish a fresh snapshot before answering, so an API call that follows a set,
    /// binding, label or score change schedules against it (read your writes).
    pub(crate) async fn run(
        mut self,
        receivers: ReceiversHandle,
        mut sync: mpsc::Receiver<oneshot::Sender<()>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut rx = receivers.0;
        loop {
            let deadline = self.deadline;
            let go_on = tokio::select! {
                _ = shutdown.changed() => false,
                c = rx.clusters.recv() => self.cluster_event(c),
                s = rx.sets.recv() => self.set_event(s),
                s = rx.scores.recv() => self.score_event(s),
                p = rx.placements.recv() => self.placement_event(p),
                Some(reply) = sync.recv() => {
                    self.drain(&mut rx);
                    self.flush(true).await;
                    let _ = reply.send(());
                    true
                }
                () = sleep_until(deadline), if deadline.is_some() => {
                    self.flush(false).await;
                    true
                }
            };
            if !go_on {
                return;
            }
        }
    }
}

/// The subscriptions taken before the first snapshot, handed to [`Dispatcher::run`].
pub(crate) struct ReceiversHandle(Receivers);

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

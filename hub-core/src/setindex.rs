//! Every hub's set index (issue 48, docs/notes/issue-48-design.md §6.1): which cluster sets
//! each cluster is in, kept from the hub's cluster view and its own watch of the `clustersets`
//! bucket, so that any hub — controllers or not — filters reads and decides writes by the
//! grants. The rules are pure ([`crate::grants::members::Membership`]); this is the task that
//! feeds them and publishes each new [`SetIndexView`], at most every [`COALESCE`].
//!
//! Readers hold a [`SetIndex`] handle: [`SetIndex::current`] is an `Arc` clone (no lock on the
//! hot path); watchers subscribe and ask [`Published::since`] what moved since the view they
//! filtered by, so a relabelled cluster is checked again by each watcher, not the fleet.

use crate::grants::index::{Changed, IndexChange, SetIndexView};
use crate::grants::members::Membership;
use crate::inventory::{ChangeKind, ClusterInventory, Inventory};
use crate::store::{Bucket, StoreError};
use crate::views::{self, Versioned};
use flotilla_api::v1::{ManagedCluster, ManagedClusterSet};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How long changes gather before a new view is published: a burst of relabels is one copy of
/// the index, not one per cluster.
pub const COALESCE: Duration = Duration::from_millis(50);

/// How many published changes a watcher can look back over; one further behind checks all.
const RECENT: usize = 64;

/// Moved clusters one publication names before it says "all" instead.
const MOVED_MAX: usize = 1_000;

/// What the index published: the view, and the changes that led to it.
#[derive(Debug, Default)]
pub struct Published {
    /// The current view.
    pub view: Arc<SetIndexView>,
    recent: VecDeque<IndexChange>,
}

impl Published {
    /// What moved since the view of generation `seen`: the clusters to check again, or
    /// [`Changed::All`] when it is older than the changes kept.
    pub fn since(&self, seen: u64) -> Changed {
        if seen >= self.view.generation() {
            return Changed::Some(Vec::new());
        }
        let Some(first) = self.recent.front() else {
            return Changed::All;
        };
        if first.generation > seen + 1 {
            return Changed::All;
        }
        let mut moved = Changed::Some(Vec::new());
        for change in self.recent.iter().filter(|c| c.generation > seen) {
            moved = merge(moved, change.clusters.clone());
        }
        moved
    }
}

fn merge(a: Changed, b: Changed) -> Changed {
    match (a, b) {
        (Changed::Some(mut a), Changed::Some(b)) => {
            a.extend(b);
            a.sort();
            a.dedup();
            if a.len() > MOVED_MAX {
                Changed::All
            } else {
                Changed::Some(a)
            }
        }
        _ => Changed::All,
    }
}

impl Versioned for ManagedClusterSet {
    fn revision(&self) -> u64 {
        self.metadata.as_ref().map_or(0, |m| m.resource_version)
    }
    fn set_revision(&mut self, revision: u64) {
        self.metadata
            .get_or_insert_with(Default::default)
            .resource_version = revision;
    }
}

/// The sets view holds no shard: every set is read from the bucket.
struct NoShards;

impl views::Holder for NoShards {
    fn holds(&self, _: u32) -> bool {
        false
    }
    fn stored(&self, _: views::Keys, _: &str, _: u64, _: bool) {}
}

/// The set index's handle: cheap to clone, read without locks.
#[derive(Clone, Debug)]
pub struct SetIndex {
    tx: Arc<watch::Sender<Arc<Published>>>,
}

impl Default for SetIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl SetIndex {
    /// An empty index (no cluster in any set) until [`SetIndex::spawn`] feeds it.
    pub fn new() -> Self {
        let (tx, _) = watch::channel(Arc::new(Published::default()));
        Self { tx: Arc::new(tx) }
    }

    /// The current view.
    pub fn current(&self) -> Arc<SetIndexView> {
        self.tx.borrow().view.clone()
    }

    /// The current publication.
    pub fn published(&self) -> Arc<Published> {
        self.tx.borrow().clone()
    }

    /// Changes of the index, for watchers.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }

    /// Loads the `clustersets` bucket into a view of its own and starts the task that keeps
    /// the index from it and from `clusters` until `stop` flips; returns once the first view
    /// is published.
    pub async fn spawn(
        &self,
        sets: Bucket<ManagedClusterSet>,
        clusters: ClusterInventory,
        stop: watch::Receiver<bool>,
    ) -> Result<Vec<JoinHandle<()>>, StoreError> {
        let inventory = Inventory::<ManagedClusterSet>::new(256);
        let set_changes = inventory.subscribe();
        let cluster_changes = clusters.subscribe();
        let (view, _) = views::View::load(
            sets,
            inventory.clone(),
            views::Keys::Cluster,
            Arc::new(NoShards),
        )
        .await?;
        let follow = tokio::spawn(
            view.follow(stop.clone())
                .instrument(tracing::info_span!("view", bucket = "clustersets")),
        );
        let mut task = Task {
            tx: self.tx.clone(),
            sets: inventory,
            clusters,
            membership: Membership::default(),
            pending: None,
        };
        task.rebuild();
        task.publish();
        let run = tokio::spawn(
            task.run(cluster_changes, set_changes, stop)
                .instrument(tracing::info_span!("set_index")),
        );
        Ok(vec![follow, run])
    }

    /// Publishes `view` as the index (tests, and hubs that build it themselves): any cluster
    /// may have moved.
    pub fn publish(&self, view: SetIndexView) {
        self.publish_change(view, Changed::All);
    }

    /// Publishes `view` as the index, `clusters` being what moved since the last view.
    pub fn publish_change(&self, view: SetIndexView, clusters: Changed) {
        let generation = view.generation();
        self.tx.send_modify(|p| {
            let mut recent = p.recent.clone();
            recent.push_back(IndexChange {
                generation,
                clusters,
            });
            while recent.len() > RECENT {
                recent.pop_front();
            }
            *p = Arc::new(Published {
                view: Arc::new(view),
                recent,
            });
        });
    }
}

struct Task {
    tx: Arc<watch::Sender<Arc<Published>>>,
    sets: Inventory<ManagedClusterSet>,
    clusters: ClusterInventory,
    membership: Membership,
    pending: Option<Changed>,
}

impl Task {
    async fn run(
        mut self,
        mut clusters: tokio::sync::broadcast::Receiver<crate::inventory::Change<ManagedCluster>>,
        mut sets: tokio::sync::broadcast::Receiver<crate::inventory::Change<ManagedClusterSet>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut due = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                change = clusters.recv() => match change {
                    Ok(c) => {
                        let object = (c.kind != ChangeKind::Deleted).then_some(&*c.object);
                        if self.membership.cluster(&c.key, object) {
                            self.note(Changed::Some(vec![c.key.clone()]), &mut due);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        self.rebuild();
                        self.note(Changed::All, &mut due);
                    }
                    Err(RecvError::Closed) => return,
                },
                change = sets.recv() => match change {
                    Ok(c) => {
                        let object = (c.kind != ChangeKind::Deleted).then_some(&*c.object);
                        let clusters = self.clusters.snapshot();
                        match self.membership.set(&c.key, object, clusters.iter().map(|c| &**c)) {
                            Ok(Some(changed)) => self.note(changed, &mut due),
                            Ok(None) => {}
                            Err(e) => tracing::error!(error = %e, set = %c.key, "the set index keeps its last view"),
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        self.rebuild();
                        self.note(Changed::All, &mut due);
                    }
                    Err(RecvError::Closed) => return,
                },
                () = tokio::time::sleep_until(due), if self.pending.is_some() => self.publish(),
            }
        }
    }

    fn note(&mut self, changed: Changed, due: &mut tokio::time::Instant) {
        if self.pending.is_none() {
            *due = tokio::time::Instant::now() + COALESCE;
        }
        self.pending = Some(match self.pending.take() {
            Some(p) => merge(p, changed),
            None => changed,
        });
    }

    /// Everything again, from the two views.
    fn rebuild(&mut self) {
        let sets = self.sets.snapshot();
        let clusters = self.clusters.snapshot();
        match Membership::new(sets.iter().map(|s| &**s), clusters.iter().map(|c| &**c)) {
            Ok(m) => {
                let generation = self.tx.borrow().view.generation();
                self.membership = m.starting_at(generation);
                self.pending = Some(Changed::All);
            }
            Err(e) => tracing::error!(error = %e, "the set index keeps its last view"),
        }
    }

    fn publish(&mut self) {
        let changed = self.pending.take().unwrap_or(Changed::All);
        let view = self.membership.view();
        let generation = view.generation();
        tracing::debug!(
            generation,
            clusters = view.clusters(),
            "set index published"
        );
        self.tx.send_modify(|p| {
            let mut recent = p.recent.clone();
            recent.push_back(IndexChange {
                generation,
                clusters: changed,
            });
            while recent.len() > RECENT {
                recent.pop_front();
            }
            *p = Arc::new(Published {
                view: Arc::new(view),
                recent,
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(changes: &[(u64, Changed)]) -> Published {
        let last = changes.last().map_or(0, |c| c.0);
        let view =
            SetIndexView::build(last, 0, Vec::<&str>::new(), Vec::<(&str, Vec<&str>)>::new())
                .unwrap();
        Published {
            view: Arc::new(view),
            recent: changes
                .iter()
                .map(|(generation, clusters)| IndexChange {
                    generation: *generation,
                    clusters: clusters.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_watcher_checks_again_only_what_moved_since_its_view() {
        let some = |names: &[&str]| Changed::Some(names.iter().map(|n| Arc::from(*n)).collect());
        let p = published(&[
            (5, some(&["c2"])),
            (6, some(&["c1", "c2"])),
            (7, some(&["c9"])),
        ]);
        assert_eq!(p.since(7), some(&[]));
        assert_eq!(p.since(6), some(&["c9"]));
        assert_eq!(p.since(4), some(&["c1", "c2", "c9"]));
        assert_eq!(p.since(3), Changed::All, "older than the changes kept");
        let all = published(&[(5, some(&["c2"])), (6, Changed::All)]);
        assert_eq!(all.since(5), Changed::All);
    }
}

//! The read-mostly view of every cluster, shared by the API, set status and (later) placement
//! actors, so that none of them has to message thousands of cluster actors. Cluster actors are
//! the only writers: they publish a new `Arc<ManagedCluster>` after every persisted change and
//! broadcast the change.

use dashmap::DashMap;
use flotilla_api::v1::ManagedCluster;
use std::sync::Arc;
use tokio::sync::broadcast;

/// What happened to a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// First seen (created, or loaded at start).
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

/// A change notification.
#[derive(Debug, Clone)]
pub struct ClusterChange {
    /// What happened.
    pub kind: ChangeKind,
    /// The cluster after the change (before it, for deletes).
    pub cluster: Arc<ManagedCluster>,
}

/// All clusters by name plus a change broadcast.
#[derive(Clone)]
pub struct Inventory {
    clusters: Arc<DashMap<String, Arc<ManagedCluster>>>,
    changes: broadcast::Sender<ClusterChange>,
}

impl Inventory {
    /// An empty inventory whose broadcast keeps `capacity` changes for slow subscribers.
    pub fn new(capacity: usize) -> Self {
        let (changes, _) = broadcast::channel(capacity.max(16));
        Self {
            clusters: Arc::new(DashMap::new()),
            changes,
        }
    }

    /// Publishes a cluster's new state.
    pub fn upsert(&self, cluster: ManagedCluster) {
        let name = cluster
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        let cluster = Arc::new(cluster);
        let kind = match self.clusters.insert(name, cluster.clone()) {
            Some(_) => ChangeKind::Modified,
            None => ChangeKind::Added,
        };
        let _ = self.changes.send(ClusterChange { kind, cluster });
    }

    /// Removes a cluster.
    pub fn remove(&self, name: &str) {
        if let Some((_, cluster)) = self.clusters.remove(name) {
            let _ = self.changes.send(ClusterChange {
                kind: ChangeKind::Deleted,
                cluster,
            });
        }
    }

    /// One cluster.
    pub fn get(&self, name: &str) -> Option<Arc<ManagedCluster>> {
        self.clusters.get(name).map(|c| c.clone())
    }

    /// A snapshot of every cluster, sorted by name.
    pub fn snapshot(&self) -> Vec<Arc<ManagedCluster>> {
        let mut all: Vec<_> = self.clusters.iter().map(|e| e.value().clone()).collect();
        all.sort_by(|a, b| name(a).cmp(name(b)));
        all
    }

    /// Number of clusters.
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// Whether there are no clusters.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Subscribes to changes.
    pub fn subscribe(&self) -> broadcast::Receiver<ClusterChange> {
        self.changes.subscribe()
    }
}

/// The name of a cluster.
pub fn name(c: &ManagedCluster) -> &str {
    c.metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default()
}

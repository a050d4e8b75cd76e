//! Read-mostly views shared by the API, set status and (later) placement actors, so that none of
//! them has to message thousands of actors: every cluster and every ManifestWork by key, plus a
//! change broadcast. Actors are the only writers: they publish a new `Arc` after every persisted
//! change.

use dashmap::DashMap;
use flotilla_api::v1::{ManagedCluster, ManifestWork};
use std::sync::Arc;
use tokio::sync::broadcast;

/// What happened to an object.
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
#[derive(Debug)]
pub struct Change<T> {
    /// What happened.
    pub kind: ChangeKind,
    /// The object's key.
    pub key: Arc<str>,
    /// The object after the change (before it, for deletes).
    pub object: Arc<T>,
}

impl<T> Clone for Change<T> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind,
            key: self.key.clone(),
            object: self.object.clone(),
        }
    }
}

/// Objects by key plus a change broadcast.
pub struct Inventory<T> {
    objects: Arc<DashMap<Arc<str>, Arc<T>>>,
    changes: broadcast::Sender<Change<T>>,
}

impl<T> Clone for Inventory<T> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            changes: self.changes.clone(),
        }
    }
}

/// Every cluster, keyed by name.
pub type ClusterInventory = Inventory<ManagedCluster>;
/// Every work, keyed by `<cluster>/<work>`.
pub type WorkInventory = Inventory<ManifestWork>;

impl<T: Send + Sync + 'static> Inventory<T> {
    /// An empty inventory whose broadcast keeps `capacity` changes for slow subscribers.
    pub fn new(capacity: usize) -> Self {
        let (changes, _) = broadcast::channel(capacity.max(16));
        Self {
            objects: Arc::new(DashMap::new()),
            changes,
        }
    }

    /// Publishes an object's new state.
    pub fn upsert(&self, key: &str, object: T) {
        self.upsert_shared(key, Arc::new(object));
    }

    /// Publishes an object's new state that its writer keeps too (one copy for both).
    pub fn upsert_shared(&self, key: &str, object: Arc<T>) {
        let key: Arc<str> = key.into();
        let kind = match self.objects.insert(key.clone(), object.clone()) {
            Some(_) => ChangeKind::Modified,
            None => ChangeKind::Added,
        };
        let _ = self.changes.send(Change { kind, key, object });
    }

    /// Removes an object.
    pub fn remove(&self, key: &str) {
        if let Some((key, object)) = self.objects.remove(key) {
            let _ = self.changes.send(Change {
                kind: ChangeKind::Deleted,
                key,
                object,
            });
        }
    }

    /// One object.
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.objects.get(key).map(|c| c.clone())
    }

    /// A snapshot of every object, sorted by key.
    pub fn snapshot(&self) -> Vec<Arc<T>> {
        let mut all: Vec<(Arc<str>, Arc<T>)> = self
            .objects
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter().map(|(_, v)| v).collect()
    }

    /// Keys and objects whose key starts with `prefix`, sorted by key.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(Arc<str>, Arc<T>)> {
        let mut all: Vec<(Arc<str>, Arc<T>)> = self
            .objects
            .iter()
            .filter(|e| e.key().starts_with(prefix))
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Subscribes to changes.
    pub fn subscribe(&self) -> broadcast::Receiver<Change<T>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_remove_and_prefix_queries_broadcast_changes() {
        let inv: Inventory<String> = Inventory::new(16);
        let mut rx = inv.subscribe();
        inv.upsert("c1/a", "x".into());
        inv.upsert("c1/a", "y".into());
        inv.upsert("c2/b", "z".into());
        assert_eq!(rx.try_recv().unwrap().kind, ChangeKind::Added);
        assert_eq!(rx.try_recv().unwrap().kind, ChangeKind::Modified);
        assert_eq!(inv.with_prefix("c1/").len(), 1);
        inv.remove("c1/a");
        let _ = rx.try_recv();
        let del = rx.try_recv().unwrap();
        assert_eq!((del.kind, &*del.key), (ChangeKind::Deleted, "c1/a"));
        assert_eq!(inv.snapshot().len(), 1);
    }
}

//! Read-mostly views shared by the API, set status and (later) placement actors, so that none of
//! them has to message thousands of actors: every cluster and every ManifestWork by key, plus a
//! change broadcast. Actors are the only writers: they publish a new `Arc` after every persisted
//! change.

use dashmap::DashMap;
use flotilla_api::v1::{ManagedCluster, ManifestWork};
use std::collections::BTreeSet;
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

/// Objects by key plus a change broadcast, with the keys of `<namespace>/<name>` objects
/// indexed by namespace: a namespace's objects (a cluster's works, add-ons, scores) are found
/// without scanning every object, which made per-cluster lookups quadratic at 10,000 clusters.
pub struct Inventory<T> {
    objects: Arc<DashMap<Arc<str>, Arc<T>>>,
    namespaces: Arc<DashMap<Arc<str>, BTreeSet<Arc<str>>>>,
    changes: broadcast::Sender<Change<T>>,
}

impl<T> Clone for Inventory<T> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            namespaces: self.namespaces.clone(),
            changes: self.changes.clone(),
        }
    }
}

/// The namespace of a `<namespace>/<name>` key.
fn namespace_of(key: &str) -> Option<&str> {
    key.split_once('/').map(|(ns, _)| ns)
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
            namespaces: Arc::new(DashMap::new()),
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
            None => {
                if let Some(ns) = namespace_of(&key) {
                    self.namespaces
                        .entry(ns.into())
                        .or_default()
                        .insert(key.clone());
                }
                ChangeKind::Added
            }
        };
        let _ = self.changes.send(Change { kind, key, object });
    }

    /// Removes an object.
    pub fn remove(&self, key: &str) {
        if let Some((key, object)) = self.objects.remove(key) {
            if let Some(ns) = namespace_of(&key) {
                self.namespaces.remove_if_mut(ns, |_, keys| {
                    keys.remove(&key);
                    keys.is_empty()
                });
            }
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

    /// Keys and objects whose key starts with `prefix`, sorted by key. A namespace's prefix
    /// (`<namespace>/`) is answered from the index; any other prefix scans every object.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(Arc<str>, Arc<T>)> {
        if let Some(ns) = prefix.strip_suffix('/')
            && !ns.contains('/')
        {
            let keys: Vec<Arc<str>> = self
                .namespaces
                .get(ns)
                .map(|keys| keys.iter().cloned().collect())
                .unwrap_or_default();
            return keys
                .into_iter()
                .filter_map(|k| {
                    let v = self.objects.get(&k)?.clone();
                    Some((k, v))
                })
                .collect();
        }
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

    #[test]
    fn a_namespaces_objects_come_from_the_index_sorted_and_follow_removals() {
        let inv: Inventory<String> = Inventory::new(16);
        for key in ["c1/b", "c1/a", "c10/a", "c2/a", "top"] {
            inv.upsert(key, key.to_string());
        }
        inv.upsert("c1/a", "again".into());
        let keys = |p: &str| -> Vec<String> {
            inv.with_prefix(p)
                .iter()
                .map(|(k, _)| k.to_string())
                .collect()
        };
        assert_eq!(keys("c1/"), ["c1/a", "c1/b"]);
        assert_eq!(inv.with_prefix("c1/")[0].1.as_str(), "again");
        // Not a namespace prefix: scanned, same answer shape.
        assert_eq!(keys("c1"), ["c1/a", "c1/b", "c10/a"]);
        assert_eq!(keys(""), ["c1/a", "c1/b", "c10/a", "c2/a", "top"]);
        inv.remove("c1/a");
        inv.remove("c1/b");
        assert!(keys("c1/").is_empty());
        assert!(inv.namespaces.get("c1").is_none());
        assert_eq!(keys("c2/"), ["c2/a"]);
    }
}

//! Read-mostly views shared by the API, set status and (later) placement actors, so that none of
//! them has to message thousands of actors: every cluster and every ManifestWork by key, plus a
//! change broadcast. Actors are the only writers: they publish a new `Arc` after every persisted
//! change. The works inventory also keeps its works by owner and its counts by state
//! ([`works`]).

mod works;

pub use works::WorkTally;

use crate::cluster::StoredWork;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use flotilla_api::v1::ManagedCluster;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::{Arc, RwLock};
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
/// The namespaces are kept in order too, so that a page of every object ([`Inventory::scan`])
/// costs its length, not a sort of every key.
///
/// `X` keeps what the inventory knows beside its objects ([`Tally`]): nothing by default; the
/// works inventory's index by owner and counts by state ([`WorkInventory`]), whose readers exist
/// only on that type.
pub struct Inventory<T, X = NoTally> {
    objects: Arc<DashMap<Arc<str>, Arc<T>>>,
    /// Told of every change under the object's entry.
    tally: Arc<X>,
    namespaces: Arc<DashMap<Arc<str>, BTreeSet<Arc<str>>>>,
    /// The keys of `namespaces`, in order: changed only under the namespace's map entry (a
    /// namespace's first object and last one), read without holding any entry.
    order: Arc<RwLock<BTreeSet<Arc<str>>>>,
    changes: broadcast::Sender<Change<T>>,
}

impl<T, X> Clone for Inventory<T, X> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            tally: self.tally.clone(),
            namespaces: self.namespaces.clone(),
            order: self.order.clone(),
            changes: self.changes.clone(),
        }
    }
}

/// What an inventory keeps beside its objects (an index, counts), told of every change while
/// the object's entry is held, so that a key's changes reach it in order. It must not call back
/// into the inventory.
pub trait Tally<T>: Send + Sync {
    /// `key` went from `old` (`None`: added) to `new` (`None`: removed).
    fn change(&self, key: &Arc<str>, old: Option<&T>, new: Option<&T>);
}

/// Keeps nothing: a plain inventory.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTally;

impl<T> Tally<T> for NoTally {
    fn change(&self, _: &Arc<str>, _: Option<&T>, _: Option<&T>) {}
}

/// Namespaces read from the order at once by [`Inventory::scan`].
const SCAN_BATCH: usize = 64;

/// The namespace of a `<namespace>/<name>` key.
fn namespace_of(key: &str) -> Option<&str> {
    key.split_once('/').map(|(ns, _)| ns)
}

/// Every cluster, keyed by name.
pub type ClusterInventory = Inventory<ManagedCluster>;
/// Every work, keyed by `<cluster>/<work>`, its status held encoded (decoded by the readers
/// that want it: [`StoredWork::status`], [`StoredWork::to_work`]); it keeps its works by owner
/// and its counts by state ([`WorkTally`]).
pub type WorkInventory = Inventory<StoredWork, WorkTally>;

impl<T: Send + Sync + 'static, X: Tally<T> + Default> Inventory<T, X> {
    /// An empty inventory whose broadcast keeps `capacity` changes for slow subscribers.
    pub fn new(capacity: usize) -> Self {
        let (changes, _) = broadcast::channel(capacity.max(16));
        Self {
            objects: Arc::new(DashMap::new()),
            tally: Arc::new(X::default()),
            namespaces: Arc::new(DashMap::new()),
            order: Arc::new(RwLock::new(BTreeSet::new())),
            changes,
        }
    }
}

impl<T: Send + Sync + 'static, X: Tally<T>> Inventory<T, X> {
    /// Publishes an object's new state.
    pub fn upsert(&self, key: &str, object: T) {
        self.upsert_shared(key, Arc::new(object));
    }

    /// Publishes an object's new state that its writer keeps too (one copy for both).
    pub fn upsert_shared(&self, key: &str, object: Arc<T>) {
        let key: Arc<str> = key.into();
        let kind = match self.objects.entry(key.clone()) {
            Entry::Occupied(mut held) => {
                let old = held.insert(object.clone());
                self.tally.change(&key, Some(&old), Some(&object));
                ChangeKind::Modified
            }
            Entry::Vacant(slot) => {
                let held = slot.insert(object.clone());
                self.tally.change(&key, None, Some(&object));
                drop(held);
                if let Some(ns) = namespace_of(&key) {
                    match self.namespaces.entry(ns.into()) {
                        Entry::Occupied(mut keys) => {
                            keys.get_mut().insert(key.clone());
                        }
                        Entry::Vacant(slot) => {
                            self.order_mut().insert(slot.key().clone());
                            slot.insert(BTreeSet::from([key.clone()]));
                        }
                    }
                }
                ChangeKind::Added
            }
        };
        let _ = self.changes.send(Change { kind, key, object });
    }

    /// Removes an object.
    pub fn remove(&self, key: &str) {
        let removed = self.objects.remove_if(key, |key, object| {
            self.tally.change(key, Some(object), None);
            true
        });
        if let Some((key, object)) = removed {
            if let Some(ns) = namespace_of(&key) {
                self.namespaces.remove_if_mut(ns, |ns, keys| {
                    keys.remove(&key);
                    if keys.is_empty() {
                        self.order_mut().remove(ns);
                    }
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

    /// Every key, sorted: what a watch lists lazily, looking each object up when its client
    /// has room for it (a key is shared, not copied).
    pub fn keys(&self) -> Vec<Arc<str>> {
        let mut keys: Vec<Arc<str>> = self.objects.iter().map(|e| e.key().clone()).collect();
        keys.sort();
        keys
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

    /// The namespaces holding objects that `admit` keeps, in order: a team's part of the fleet
    /// (its clusters' works, its clusters' add-ons) costs a test per namespace and then only its
    /// own keys, not a copy of every key (issue 48 review r4 §7).
    pub fn namespaces_where(&self, mut admit: impl FnMut(&str) -> bool) -> Vec<Arc<str>> {
        self.order()
            .iter()
            .filter(|ns| admit(ns))
            .cloned()
            .collect()
    }

    /// The `<namespace>/<name>` objects of `namespace` (or of every namespace) after the key
    /// `after` (empty: from the first), in (namespace, name) order, given to `visit` until it
    /// answers false. A page costs its length plus a lookup, however many objects there are.
    /// Objects whose key has no namespace are not scanned.
    pub fn scan(
        &self,
        namespace: Option<&str>,
        after: &str,
        mut visit: impl FnMut(&Arc<str>, &Arc<T>) -> bool,
    ) {
        let after_ns = namespace_of(after).unwrap_or(after);
        let mut from: Bound<Arc<str>> = match (namespace, after_ns) {
            (Some(ns), _) => Bound::Included(ns.into()),
            (None, "") => Bound::Unbounded,
            (None, ns) => Bound::Included(ns.into()),
        };
        loop {
            // The order is read, then let go before any namespace's entry is (their writers
            // take the entry, then the order).
            let batch: Vec<Arc<str>> = match namespace {
                Some(ns) if matches!(&from, Bound::Included(_)) && *ns >= *after_ns => {
                    vec![ns.into()]
                }
                Some(_) => Vec::new(),
                None => self
                    .order()
                    .range::<str, _>((from.as_ref().map(|n| &**n), Bound::Unbounded))
                    .take(SCAN_BATCH)
                    .cloned()
                    .collect(),
            };
            let Some(last) = batch.last().cloned() else {
                return;
            };
            for ns in &batch {
                let start = if **ns == *after_ns && after.len() > ns.len() {
                    Bound::Excluded(after)
                } else {
                    Bound::Unbounded
                };
                let keys: Vec<Arc<str>> = self
                    .namespaces
                    .get(ns)
                    .map(|keys| {
                        keys.range::<str, _>((start, Bound::Unbounded))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                for key in keys {
                    let Some(object) = self.objects.get(&key).map(|o| o.clone()) else {
                        continue;
                    };
                    if !visit(&key, &object) {
                        return;
                    }
                }
            }
            from = Bound::Excluded(last);
        }
    }

    fn order(&self) -> std::sync::RwLockReadGuard<'_, BTreeSet<Arc<str>>> {
        self.order.read().unwrap_or_else(|p| p.into_inner())
    }

    fn order_mut(&self) -> std::sync::RwLockWriteGuard<'_, BTreeSet<Arc<str>>> {
        self.order.write().unwrap_or_else(|p| p.into_inner())
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

    /// How many subscribers the change broadcast has (each is woken by every change).
    pub fn subscribers(&self) -> usize {
        self.changes.receiver_count()
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

    #[test]
    fn namespaces_where_lists_only_the_admitted_namespaces_in_order() {
        let inv: Inventory<String> = Inventory::new(16);
        for key in ["c2/a", "c1/a", "c1/b", "c3/a", "top"] {
            inv.upsert(key, key.to_string());
        }
        let mut asked = 0;
        let kept = inv.namespaces_where(|ns| {
            asked += 1;
            ns != "c2"
        });
        assert_eq!(kept, [Arc::from("c1"), Arc::from("c3")]);
        assert_eq!(asked, 3, "one test per namespace, not per object");
        inv.remove("c3/a");
        assert_eq!(
            inv.namespaces_where(|_| true),
            [Arc::from("c1"), Arc::from("c2")]
        );
    }

    /// Pages of `size` keys from `scan`, as `ListWorks` makes them.
    fn pages(inv: &Inventory<String>, namespace: Option<&str>, size: usize) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut after = String::new();
        loop {
            let mut page = Vec::new();
            inv.scan(namespace, &after, |k, _| {
                page.push(k.to_string());
                page.len() < size
            });
            match page.last() {
                Some(last) => after = last.clone(),
                None => return out,
            }
            let full = page.len() == size;
            out.push(page);
            if !full {
                return out;
            }
        }
    }

    #[test]
    fn a_scan_pages_through_namespaces_in_order_from_any_key() {
        let inv: Inventory<String> = Inventory::new(16);
        // `edge-1/…` sorts before `edge/…` as bytes: the scan goes by namespace, then name.
        for key in [
            "edge/b", "edge-1/a", "edge/a", "c2/a", "c10/a", "c1/a", "c1/b", "top",
        ] {
            inv.upsert(key, key.to_string());
        }
        let all: Vec<String> = pages(&inv, None, 100).concat();
        assert_eq!(
            all,
            [
                "c1/a", "c1/b", "c10/a", "c2/a", "edge/a", "edge/b", "edge-1/a"
            ],
            "no namespace: not scanned"
        );
        for size in 1..=8 {
            assert_eq!(pages(&inv, None, size).concat(), all, "pages of {size}");
        }
        assert_eq!(pages(&inv, Some("edge"), 1).concat(), ["edge/a", "edge/b"]);
        assert!(pages(&inv, Some("nowhere"), 2).is_empty());
        // From a key that is gone, and past the last one.
        let mut after_gone = Vec::new();
        inv.scan(None, "c1/aa", |k, _| {
            after_gone.push(k.to_string());
            true
        });
        assert_eq!(after_gone[0], "c1/b");
        let mut past = 0;
        inv.scan(None, "zzz/z", |_, _| {
            past += 1;
            true
        });
        assert_eq!(past, 0);
        // A namespace emptied leaves the order; filled again, it is back.
        inv.remove("c10/a");
        assert!(!pages(&inv, None, 3).concat().contains(&"c10/a".to_string()));
        assert!(!inv.order().contains("c10"));
        inv.upsert("c10/z", "z".into());
        assert!(pages(&inv, None, 3).concat().contains(&"c10/z".to_string()));
        // Many namespaces: more than one batch of the order.
        let big: Inventory<String> = Inventory::new(16);
        for i in 0..(SCAN_BATCH * 3 + 5) {
            big.upsert(&format!("ns{i:04}/w"), String::new());
        }
        let listed = pages(&big, None, 50).concat();
        assert_eq!(listed.len(), SCAN_BATCH * 3 + 5);
        assert!(listed.windows(2).all(|w| w[0] < w[1]));
    }
}

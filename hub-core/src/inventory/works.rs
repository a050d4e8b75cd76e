//! What the works inventory keeps beside its works, as they change ([`Tally`]): the keys of
//! each replica set's works (their owner label, [`REPLICASET_LABEL`]) and how many works are
//! in each [`WorkState`]. A replica set's reconcile, its per-cluster rows and a GitRepo's
//! `clusters` view read a set's works from the index in its size, where they scanned (and
//! sorted) every work of the fleet; a scrape of `flotilla_hub_works` reads five counters.
//!
//! [`WorkState`]: crate::cluster::work_states::WorkState

use super::{Tally, WorkInventory};
use crate::cluster::StoredWork;
use dashmap::DashMap;
use flotilla_api::meta::REPLICASET_LABEL;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The works inventory's index by owner and its counts by state.
#[derive(Default)]
pub struct WorkTally {
    /// Owner label value (`<namespace>.<name>`) → the keys of its works.
    owners: DashMap<Arc<str>, BTreeSet<Arc<str>>>,
    /// Works per state, in `WorkState::ALL`'s order.
    states: [AtomicU64; 5],
}

/// The owner label of a work (the replica set that made it).
fn owner_of(w: &StoredWork) -> Option<&str> {
    w.metadata
        .as_ref()?
        .labels
        .get(REPLICASET_LABEL)
        .map(String::as_str)
}

impl Tally<StoredWork> for WorkTally {
    fn change(&self, key: &Arc<str>, old: Option<&StoredWork>, new: Option<&StoredWork>) {
        let (was, is) = (old.and_then(owner_of), new.and_then(owner_of));
        if was != is {
            if let Some(owner) = was {
                self.owners.remove_if_mut(owner, |_, keys| {
                    keys.remove(key);
                    keys.is_empty()
                });
            }
            if let Some(owner) = is {
                self.owners
                    .entry(owner.into())
                    .or_default()
                    .insert(key.clone());
            }
        }
        let (was, is) = (old.map(StoredWork::state), new.map(StoredWork::state));
        if was != is {
            if let Some(s) = was {
                self.states[s.index()].fetch_sub(1, Ordering::Relaxed);
            }
            if let Some(s) = is {
                self.states[s.index()].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl WorkInventory {
    /// The works whose owner label is `owner` (a replica set's, `<namespace>.<name>`), by key:
    /// costs their number, not the fleet's.
    pub fn owned_by(&self, owner: &str) -> Vec<(Arc<str>, Arc<StoredWork>)> {
        // The keys are copied out, then let go before any work's entry is read (a writer holds
        // the work's entry, then the index's).
        let keys: Vec<Arc<str>> = self
            .tally
            .owners
            .get(owner)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        keys.into_iter()
            .filter_map(|k| {
                let w = self.objects.get(&k)?.clone();
                // Relabelled between the two reads: the index has moved it already.
                (owner_of(&w) == Some(owner)).then_some((k, w))
            })
            .collect()
    }

    /// How many works are in each state, in `WorkState::ALL`'s order.
    pub fn states(&self) -> [u64; 5] {
        std::array::from_fn(|i| self.tally.states[i].load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::work_states;
    use crate::inventory::Inventory;
    use flotilla_api::v1::{ManifestWorkStatus, ObjectMeta};

    fn work(owner: Option<&str>, available: bool) -> StoredWork {
        let mut w = StoredWork::default();
        w.metadata = Some(ObjectMeta {
            labels: owner
                .map(|o| (REPLICASET_LABEL.to_string(), o.to_string()))
                .into_iter()
                .collect(),
            ..Default::default()
        });
        if available {
            w.set_status(Some(&ManifestWorkStatus {
                conditions: vec![flotilla_api::v1::Condition {
                    r#type: "Available".into(),
                    status: "True".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }));
        }
        w
    }

    /// Every work of `inventory` whose owner label is `owner`, by key, found by scanning them all:
    /// what [`WorkInventory::owned_by`] replaced, for comparing them.
    fn scan_owned_by<X: crate::inventory::Tally<StoredWork>>(
        inventory: &Inventory<StoredWork, X>,
        owner: &str,
    ) -> Vec<(Arc<str>, Arc<StoredWork>)> {
        let mut all: Vec<(Arc<str>, Arc<StoredWork>)> = inventory
            .objects
            .iter()
            .filter(|e| owner_of(e.value()) == Some(owner))
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    fn keys(inv: &WorkInventory, owner: &str) -> Vec<String> {
        inv.owned_by(owner)
            .iter()
            .map(|(k, _)| k.to_string())
            .collect()
    }

    #[test]
    fn the_owner_index_follows_inserts_relabels_and_removals() {
        let inv = WorkInventory::new(16);
        inv.upsert("c2/web", work(Some("default.web"), false));
        inv.upsert("c1/web", work(Some("default.web"), false));
        inv.upsert("c1/db", work(Some("default.db"), false));
        inv.upsert("c1/plain", work(None, false));
        assert_eq!(keys(&inv, "default.web"), ["c1/web", "c2/web"]);
        assert_eq!(keys(&inv, "default.db"), ["c1/db"]);
        // A status update keeps the work where it is, once.
        inv.upsert("c1/web", work(Some("default.web"), true));
        assert_eq!(keys(&inv, "default.web"), ["c1/web", "c2/web"]);
        // Relabelled: it moves; unlabelled: it leaves the index.
        inv.upsert("c2/web", work(Some("default.db"), false));
        assert_eq!(keys(&inv, "default.web"), ["c1/web"]);
        assert_eq!(keys(&inv, "default.db"), ["c1/db", "c2/web"]);
        inv.upsert("c1/db", work(None, false));
        assert_eq!(keys(&inv, "default.db"), ["c2/web"]);
        // Removed: gone, and an owner without works leaves no entry behind.
        inv.remove("c2/web");
        inv.remove("c1/plain");
        assert!(keys(&inv, "default.db").is_empty());
        let tally = &inv.tally;
        assert!(tally.owners.get("default.db").is_none());
        assert_eq!(tally.owners.len(), 1);
        // The scan of an inventory without the index answers the same.
        let plain: Inventory<StoredWork> = Inventory::new(16);
        plain.upsert("c2/web", work(Some("default.web"), false));
        plain.upsert("c1/web", work(Some("default.web"), false));
        let scanned: Vec<String> = scan_owned_by(&plain, "default.web")
            .iter()
            .map(|(k, _)| k.to_string())
            .collect();
        assert_eq!(scanned, ["c1/web", "c2/web"]);
        inv.upsert("c3/web", work(Some("default.web"), false));
        assert_eq!(
            keys(&inv, "default.web"),
            scan_owned_by(&inv, "default.web")
                .iter()
                .map(|(k, _)| k.to_string())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_state_counts_follow_every_change() {
        let inv = WorkInventory::new(16);
        let counts = |inv: &WorkInventory| {
            let [available, applying, _, _, deleting] = inv.states();
            (available, applying, deleting)
        };
        inv.upsert("c1/a", work(None, false));
        inv.upsert("c2/a", work(None, false));
        assert_eq!(counts(&inv), (0, 2, 0));
        inv.upsert("c1/a", work(None, true));
        inv.upsert("c1/a", work(None, true));
        assert_eq!(counts(&inv), (1, 1, 0));
        let mut gone = work(None, true);
        if let Some(m) = gone.metadata.as_mut() {
            m.deletion_timestamp = Some(flotilla_api::meta::now());
        }
        inv.upsert("c1/a", gone);
        assert_eq!(counts(&inv), (0, 1, 1));
        inv.remove("c1/a");
        inv.remove("c1/a");
        assert_eq!(counts(&inv), (0, 1, 0));
        let all = inv.snapshot();
        assert_eq!(inv.states(), work_states::count(all.iter().map(|w| &**w)));
    }
}

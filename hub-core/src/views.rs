//! Every hub's read views of every cluster and work, fed by the KV buckets.
//!
//! Actors write the inventories of the shards this hub holds; everything else comes from one
//! watch per bucket, so any hub answers reads of the whole fleet and can start a shard's actors
//! from what it already has. An update replaces what the view holds only when its revision is
//! newer. Keys of the shards this hub holds are its actors' to write into the inventory; an
//! update the actors have not shown yet was written by someone else — the shard's previous
//! holder, whose last writes this hub had not read when it took the shard — and the actors are
//! told ([`Holder::stored`]) to read the store: nothing a previous holder stored is lost to a
//! view that lagged.

/// The shards this hub's actors own, told when one of their objects changed in the store.
pub trait Holder: Send + Sync + 'static {
    /// Whether this hub holds `shard`.
    fn holds(&self, shard: u32) -> bool;
    /// The object under inventory key `key`, of a held shard, was written (`removed`: deleted)
    /// at `revision`, newer than what its actor has shown.
    fn stored(&self, keys: Keys, key: &str, revision: u64, removed: bool);
}

use crate::inventory::{Inventory, NoTally, Tally};
use crate::keys::ObjectRef;
use crate::store::{Bucket, StoreError};
use async_nats::jetstream::kv::Operation;
use flotilla_api::v1::{ManagedCluster, ManifestWork};
use futures::StreamExt;
use prost::Message;
use std::time::Duration;
use tokio::sync::watch;

/// How long a view's watch may stay silent while its stream moves on before it is replaced.
const STALL_CHECK: Duration = Duration::from_secs(3);

/// An object whose KV revision is its resourceVersion.
pub trait Versioned: Message + Default + Clone + Send + Sync + 'static {
    /// The stored revision.
    fn revision(&self) -> u64;
    /// Sets it.
    fn set_revision(&mut self, revision: u64);
}

impl Versioned for ManagedCluster {
    fn revision(&self) -> u64 {
        self.metadata.as_ref().map_or(0, |m| m.resource_version)
    }
    fn set_revision(&mut self, revision: u64) {
        self.metadata
            .get_or_insert_with(Default::default)
            .resource_version = revision;
    }
}

impl Versioned for ManifestWork {
    fn revision(&self) -> u64 {
        self.metadata.as_ref().map_or(0, |m| m.resource_version)
    }
    fn set_revision(&mut self, revision: u64) {
        self.metadata
            .get_or_insert_with(Default::default)
            .resource_version = revision;
    }
}

/// How a bucket's keys map to inventory keys and shards.
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    /// Key `<cluster>`, shard of the cluster.
    Cluster,
    /// Key `<cluster>.<name>`, inventory key `<cluster>/<name>`, shard of the cluster.
    InCluster,
}

impl Keys {
    /// `(inventory key, shard)` of a KV key; `None` for a key that is not ours.
    pub fn map(self, key: &str) -> Option<(String, u32)> {
        match self {
            Self::Cluster => Some((key.to_string(), flotilla_bus::subjects::shard(key))),
            Self::InCluster => {
                let r = ObjectRef::from_store_key(key)?;
                let shard = flotilla_bus::subjects::shard(&r.namespace);
                Some((r.inventory_key(), shard))
            }
        }
    }
}

/// A bucket followed into an inventory.
pub struct View<T: Versioned, X = NoTally> {
    bucket: Bucket<T>,
    inventory: Inventory<T, X>,
    keys: Keys,
    holder: std::sync::Arc<dyn Holder>,
    seen: watch::Sender<u64>,
}

/// How far a view has read: the last stream sequence it applied.
#[derive(Clone)]
pub struct Progress(watch::Receiver<u64>);

impl Progress {
    /// Waits (at most `limit`) until the view has read up to `sequence`; whether it did.
    pub async fn reached(&self, sequence: u64, limit: Duration) -> bool {
        let mut rx = self.0.clone();
        tokio::time::timeout(limit, rx.wait_for(|s| *s >= sequence))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl<T: Versioned, X: Tally<T> + 'static> View<T, X> {
    /// Loads every object of `bucket` into `inventory` (every hub starts with the whole fleet).
    pub async fn load(
        bucket: Bucket<T>,
        inventory: Inventory<T, X>,
        keys: Keys,
        holder: std::sync::Arc<dyn Holder>,
    ) -> Result<(Self, Progress), StoreError> {
        // The stream's last sequence before the load: following from there re-reads a few
        // objects at worst, and revisions make that harmless.
        let last = bucket.last_sequence().await?;
        for (key, mut object, revision) in bucket.load_all().await? {
            if let Some((ikey, _)) = keys.map(&key) {
                object.set_revision(revision);
                inventory.upsert(&ikey, object);
            }
        }
        let (seen, progress) = watch::channel(last);
        Ok((
            Self {
                bucket,
                inventory,
                keys,
                holder,
                seen,
            },
            Progress(progress),
        ))
    }

    /// Follows the bucket from after the load until `stop` flips.
    pub async fn follow(self, mut stop: watch::Receiver<bool>) {
        loop {
            let from = *self.seen.borrow() + 1;
            let mut watch = match self.bucket.kv().watch_all_from_revision(from).await {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(bucket = self.bucket.name(), error = %e, "watching the bucket failed; retrying");
                    tokio::select! {
                        _ = stop.changed() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            // A watch is an ephemeral consumer on one NATS node: when that node dies, nothing
            // tells the client. Silence while the stream has moved on means a new watch.
            let mut check = tokio::time::interval(STALL_CHECK);
            check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut heard = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = check.tick() => {
                        if heard.elapsed() >= STALL_CHECK
                            && self.bucket.last_sequence().await.is_ok_and(|l| l > *self.seen.borrow())
                        {
                            tracing::warn!(bucket = self.bucket.name(), "bucket watch stalled; re-watching");
                            break;
                        }
                    }
                    next = watch.next() => match next {
                        Some(Ok(entry)) => {
                            heard = tokio::time::Instant::now();
                            self.apply(entry);
                        }
                        Some(Err(e)) => {
                            tracing::warn!(bucket = self.bucket.name(), error = %e, "bucket watch failed; re-watching");
                            break;
                        }
                        None => break,
                    }
                }
            }
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    fn apply(&self, entry: async_nats::jetstream::kv::Entry) {
        let revision = entry.revision;
        if let Some((ikey, shard)) = self.keys.map(&entry.key) {
            let held = self.holder.holds(shard);
            let current = self.inventory.get(&ikey);
            match entry.operation {
                Operation::Put => {
                    if current.is_none_or(|c| c.revision() < revision) {
                        if held {
                            self.holder.stored(self.keys, &ikey, revision, false);
                        } else {
                            self.put(&entry, &ikey);
                        }
                    }
                }
                Operation::Delete | Operation::Purge => {
                    crate::store::quarantine::clear(self.bucket.name(), &entry.key);
                    if current.is_some_and(|c| c.revision() < revision) {
                        if held {
                            self.holder.stored(self.keys, &ikey, revision, true);
                        } else {
                            self.inventory.remove(&ikey);
                        }
                    }
                }
            }
        }
        self.seen.send_modify(|s| *s = (*s).max(revision));
    }

    /// A value that does not decode is quarantined (said once) and the view keeps what it
    /// had.
    fn put(&self, entry: &async_nats::jetstream::kv::Entry, ikey: &str) {
        if let Ok(mut object) = self.bucket.decode(&entry.key, &entry.value, entry.revision) {
            object.set_revision(entry.revision);
            self.inventory.upsert(ikey, object);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_inventory_keys_and_their_clusters_shard() {
        let shard = flotilla_bus::subjects::shard("edge-1");
        assert_eq!(Keys::Cluster.map("edge-1"), Some(("edge-1".into(), shard)));
        assert_eq!(
            Keys::InCluster.map("edge-1.web.v2"),
            Some(("edge-1/web.v2".into(), shard))
        );
        assert_eq!(Keys::InCluster.map("nodot"), None);
    }
}

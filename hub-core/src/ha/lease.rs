//! Unit leases in a replicated KV bucket whose `max_age` is the lease TTL.
//!
//! Acquire is a `create` (the key must not exist), and the revision it returns is the holder's
//! epoch: the stream sequence never goes back, so every later holder has a larger one. Renew is a
//! compare-and-set update, which also resets the key's age. A holder that stops renewing loses
//! the key when the server ages it out; nobody is told (nats-server 2.9 sends no event), so the
//! others find out by reading. Release is a compare-and-set delete.

use crate::store::StoreError;
use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use flotilla_bus::jetstream::StreamOptions;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Bucket of unit leases, key [`key`].
pub const LEASES: &str = "hubleases";
/// Bucket of hub heartbeats, key `<hub-id>`.
pub const MEMBERS: &str = "hubmembers";

/// Who holds a lease (the value of a lease key), or who is alive (a heartbeat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubInfo {
    /// The hub's id (`--hub-id`).
    pub hub: String,
    /// Random per process: tells a restarted hub from its previous life.
    pub incarnation: String,
    /// Its gRPC API address.
    pub grpc: String,
    /// Its metrics address.
    pub metrics: String,
    /// Leaving: hand its units over, take none.
    #[serde(default)]
    pub draining: bool,
    /// Its version (`flotilla_api::version::VERSION`); empty from a hub of 0.1.0 before the
    /// field, which every later hub reads as that release.
    #[serde(default)]
    pub version: String,
}

impl HubInfo {
    fn encode(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).expect("plain struct"))
    }

    /// Decodes a stored value.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// The key of a unit's lease.
pub fn key(unit: u32) -> String {
    if unit < flotilla_bus::subjects::SHARDS {
        format!("shard.{unit}")
    } else {
        "controllers".to_string()
    }
}

/// Why a lease operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else holds it (create refused, or the revision moved).
    #[error("the lease is held by another hub")]
    Taken,
    /// The store did not answer; the write may still land.
    #[error(transparent)]
    Unknown(#[from] CallError),
}

/// Why a call to a bucket of the hubs (leases, heartbeats) did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer within the call's bound.
    #[error("timed out")]
    TimedOut,
    /// The store's error.
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
}

impl CallError {
    /// The store's error `e`.
    pub fn store(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Store(Box::new(e))
    }
}

/// `f`, bounded by `timeout`.
pub async fn within<T, E: std::error::Error + Send + Sync + 'static>(
    timeout: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(CallError::store(e)),
        Err(_) => Err(CallError::TimedOut),
    }
}

/// Opens (creating if needed) a bucket whose keys expire `ttl` after their last write. An
/// existing bucket keeps its own `max_age`, which is returned: every hub then uses the TTL of
/// whoever created it, whatever its own flag says.
pub async fn open_expiring(
    js: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
    opts: StreamOptions,
) -> Result<(kv::Store, Duration), StoreError> {
    Ok(flotilla_bus::jetstream::ensure_expiring_kv(js, bucket, ttl, opts).await?)
}

/// The lease bucket.
#[derive(Clone)]
pub struct Leases {
    kv: kv::Store,
    timeout: Duration,
}

impl Leases {
    /// Leases over `kv`, each operation bounded by `timeout`.
    pub fn new(kv: kv::Store, timeout: Duration) -> Self {
        Self { kv, timeout }
    }

    /// The holder of `unit` and the lease's revision (`None`: free).
    pub async fn read(&self, unit: u32) -> Result<Option<(HubInfo, u64)>, CallError> {
        let entry = within(self.timeout, self.kv.entry(key(unit))).await?;
        Ok(entry.and_then(|e| {
            (e.operation == kv::Operation::Put)
                .then(|| HubInfo::decode(&e.value).map(|h| (h, e.revision)))
                .flatten()
        }))
    }

    /// Takes a free unit; the revision returned is the epoch.
    pub async fn create(&self, unit: u32, me: &HubInfo) -> Result<u64, LeaseError> {
        match tokio::time::timeout(self.timeout, self.kv.create(key(unit), me.encode())).await {
            Ok(Ok(rev)) => Ok(rev),
            Ok(Err(e)) if e.kind() == kv::CreateErrorKind::AlreadyExists => Err(LeaseError::Taken),
            Ok(Err(e)) => Err(CallError::store(e).into()),
            Err(_) => Err(CallError::TimedOut.into()),
        }
    }

    /// Renews a held unit whose lease is at `revision`; returns the new revision.
    pub async fn renew(&self, unit: u32, me: &HubInfo, revision: u64) -> Result<u64, LeaseError> {
        self.renew_within(unit, me, revision, self.timeout).await
    }

    /// [`Self::renew`], waiting up to `patience` for the store's answer.
    pub async fn renew_within(
        &self,
        unit: u32,
        me: &HubInfo,
        revision: u64,
        patience: Duration,
    ) -> Result<u64, LeaseError> {
        match tokio::time::timeout(patience, self.kv.update(key(unit), me.encode(), revision)).await
        {
            Ok(Ok(rev)) => Ok(rev),
            Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(LeaseError::Taken)
            }
            Ok(Err(e)) => Err(CallError::store(e).into()),
            Err(_) => Err(CallError::TimedOut.into()),
        }
    }

    /// Gives a held unit up (only if the lease is still at `revision`).
    pub async fn release(&self, unit: u32, revision: u64) -> Result<(), LeaseError> {
        match tokio::time::timeout(
            self.timeout,
            self.kv.delete_expect_revision(key(unit), Some(revision)),
        )
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(CallError::store(e).into()),
            Err(_) => Err(CallError::TimedOut.into()),
        }
    }
}

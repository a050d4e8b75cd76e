//! Hub state in JetStream KV: one bucket per kind, protobuf values, the KV revision as the
//! object's `resourceVersion`. Every call rides through JetStream elections ([`ride`]).
//! [`fill`]: how full the streams are, listed by the controllers' holder (metrics).

pub mod fill;
pub mod quarantine;
pub mod ride;

use crate::ha::fence::{self, EPOCH_HEADER, Fence, HUB_HEADER};
use async_nats::jetstream::kv::Operation;
use bytes::Bytes;
use flotilla_bus::election::{self, Why};
use flotilla_bus::jetstream::{self as js, KvItem, StreamOptions};
use prost::Message;
use ride::{Call, ride};
use std::marker::PhantomData;
use std::sync::Arc;
use thiserror::Error;

/// Bucket of ManagedClusters, key `<cluster>`.
pub const CLUSTERS: &str = "clusters";
/// Bucket of ManifestWorks, key `<cluster>.<work>`.
pub const WORKS: &str = "works";
/// Bucket of ManagedClusterSets, key `<set>`.
pub const CLUSTERSETS: &str = "clustersets";
/// Bucket of ManagedClusterSetBindings, key `<namespace>.<set>`.
pub const BINDINGS: &str = "bindings";

/// How long store calls wait for the store.
#[derive(Debug, Clone, Copy)]
pub struct StoreConfig {
    /// How long a call waits for a JetStream election ([`ride::patience`]).
    pub patience: std::time::Duration,
    /// How long a starting hub waits for its store (`None`: as long as it takes).
    pub wait: Option<std::time::Duration>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            patience: ride::DEFAULT_PATIENCE,
            wait: None,
        }
    }
}

/// A storage failure.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Creating or reading a bucket failed.
    #[error(transparent)]
    JetStream(#[from] js::JetStreamError),
    /// A write was refused or failed.
    #[error("kv {bucket}/{key}: {message}")]
    Write {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// What failed.
        message: String,
        /// Whether the failure is a revision mismatch (someone else wrote first).
        conflict: bool,
        /// Whether a JetStream election explains it.
        election: Option<Why>,
    },
    /// A read failed.
    #[error("kv {bucket}/{key}: {message}")]
    Read {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// What failed.
        message: String,
        /// Whether a JetStream election explains it.
        election: Option<Why>,
    },
    /// The store did not answer within the caller's patience: an election that outlasted it,
    /// or a store that lost its quorum. Trying again later is safe.
    #[error(
        "kv {bucket}/{key}: the store did not answer for {} s ({why}: {last}); it may be \
         electing a leader or short of a quorum of NATS nodes — retry",
        waited.as_secs()
    )]
    Unavailable {
        /// Bucket.
        bucket: String,
        /// Key (empty: the whole bucket).
        key: String,
        /// How long the call waited.
        waited: std::time::Duration,
        /// Why the last attempt failed.
        why: Why,
        /// The last attempt's error.
        last: String,
    },
    /// The writer no longer owns the key's shard: its fence ran out or was revoked, or a later
    /// owner (a newer epoch) wrote the key.
    #[error("kv {bucket}/{key}: this hub no longer owns the shard ({why})")]
    Fenced {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// What showed it.
        why: String,
    },
    /// A stored value does not decode ([`quarantine`]d).
    #[error(
        "kv {bucket}/{key}: stored value does not decode ({source}): quarantined — \
         `flotilla-hub doctor` lists it, `flotilla-hub doctor --remove {bucket}/{key}` removes it"
    )]
    Corrupt {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
}

impl StoreError {
    /// Whether the write lost an optimistic-concurrency race: the key holds something else.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Write { conflict: true, .. })
    }

    /// Whether the outcome of a write is unknown (an outage, not a lost race): it may still land,
    /// so the writer must read the key again once the store answers before trusting its copy.
    pub fn is_ambiguous(&self) -> bool {
        matches!(
            self,
            Self::Write {
                conflict: false,
                ..
            } | Self::Unavailable { .. }
        )
    }

    /// Whether a stored value does not decode (trying again does not help).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Self::Corrupt { .. })
    }

    /// Whether the store did not answer within the caller's patience.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// Whether a JetStream election explains the failure (worth trying again), and how.
    pub fn election(&self) -> Option<Why> {
        match self {
            Self::JetStream(e) => e.election(),
            Self::Write { election, .. } | Self::Read { election, .. } => *election,
            Self::Fenced { .. } | Self::Corrupt { .. } | Self::Unavailable { .. } => None,
        }
    }
}

/// Result alias.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A typed KV bucket.
///
/// A bucket carrying a [`Fence`] (see [`Bucket::fenced`]) refuses every write once the fence is
/// no longer valid and stamps each write with the fence's epoch ([`EPOCH_HEADER`]); a write
/// refused by compare-and-set over a newer epoch's write is [`StoreError::Fenced`].
#[derive(Clone)]
pub struct Bucket<T> {
    // Shared, not cloned: a `Store` carries its stream's whole cached info (config, state) and
    // every cluster actor holds a fenced bucket of its own — about 4 KB each, when cloned.
    kv: Arc<async_nats::jetstream::kv::Store>,
    js: Arc<async_nats::jetstream::Context>,
    name: &'static str,
    fence: Option<(Fence, Arc<str>)>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Message + Default> Bucket<T> {
    /// Creates (if needed) and opens the bucket.
    pub async fn open(
        js: &async_nats::jetstream::Context,
        name: &'static str,
        opts: StreamOptions,
    ) -> Result<Self> {
        let what = Call {
            op: "open",
            bucket: name,
            key: "",
        };
        let kv = ride(what, || async {
            Ok::<_, StoreError>(js::ensure_kv(js, name, 1, opts).await?)
        })
        .await?;
        Ok(Self {
            kv: Arc::new(kv),
            js: Arc::new(js.clone()),
            name,
            fence: None,
            _t: PhantomData,
        })
    }

    /// This bucket, writing under `fence` as hub `hub`.
    pub fn fenced(&self, fence: Fence, hub: &str) -> Self {
        Self {
            kv: self.kv.clone(),
            js: self.js.clone(),
            name: self.name,
            fence: Some((fence, hub.into())),
            _t: PhantomData,
        }
    }

    /// The bucket's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The underlying KV store (for watches).
    pub fn kv(&self) -> &async_nats::jetstream::kv::Store {
        &self.kv
    }

    fn fenced_err(&self, key: &str, why: impl Into<String>) -> StoreError {
        StoreError::Fenced {
            bucket: self.name.into(),
            key: key.into(),
            why: why.into(),
        }
    }

    /// Refuses once the fence is gone.
    fn check_fence(&self, key: &str) -> Result<()> {
        match &self.fence {
            Some((f, _)) if !f.is_valid() => Err(self.fenced_err(
                key,
                format!(
                    "the lease of unit {} (epoch {}) has ended",
                    f.unit(),
                    f.epoch()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// After a refused compare-and-set: the stored write's epoch says whether a later owner
    /// wrote the key (fenced) or not (an ordinary conflict: adopt and decide again).
    async fn judge_conflict(&self, key: &str, error: StoreError) -> StoreError {
        let Some((f, _)) = &self.fence else {
            return error;
        };
        let subject = format!(
            "{}{key}",
            self.kv.put_prefix.as_ref().unwrap_or(&self.kv.prefix)
        );
        let Ok(stored) = self
            .kv
            .stream
            .get_last_raw_message_by_subject(&subject)
            .await
        else {
            return error;
        };
        let epoch = stored
            .headers
            .get(EPOCH_HEADER)
            .and_then(|v| fence::parse_header(v.as_str()))
            .filter(|(unit, _)| *unit == f.unit())
            .map(|(_, e)| e);
        match fence::judge(f.epoch(), epoch) {
            fence::Verdict::Fenced => self.fenced_err(
                key,
                format!(
                    "epoch {} of unit {} wrote it after epoch {}",
                    epoch.unwrap_or_default(),
                    f.unit(),
                    f.epoch()
                ),
            ),
            fence::Verdict::Adopt => error,
        }
    }

    /// A compare-and-set write stamped with the fence's epoch.
    async fn publish_fenced(&self, key: &str, bytes: Bytes, expected: u64) -> Result<u64> {
        let (f, hub) = self.fence.as_ref().expect("called with a fence");
        let subject = format!(
            "{}{key}",
            self.kv.put_prefix.as_ref().unwrap_or(&self.kv.prefix)
        );
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            expected.to_string().as_str(),
        );
        headers.insert(EPOCH_HEADER, f.header().as_str());
        headers.insert(HUB_HEADER, hub.as_ref());
        let ack = self
            .js
            .publish_with_headers(subject, headers, bytes)
            .await
            .map_err(|e| self.write_err(key, &e, false))?
            .await;
        match ack {
            Ok(a) => Ok(a.sequence),
            Err(e) => {
                let conflict =
                    e.kind() == async_nats::jetstream::context::PublishErrorKind::WrongLastSequence;
                Err(self.write_err(key, &e, conflict))
            }
        }
    }

    fn write_err(
        &self,
        key: &str,
        error: &(dyn std::error::Error + 'static),
        conflict: bool,
    ) -> StoreError {
        StoreError::Write {
            bucket: self.name.into(),
            key: key.into(),
            message: error.to_string(),
            conflict,
            election: if conflict {
                None
            } else {
                election::explains(error)
            },
        }
    }

    fn read_err(&self, key: &str, error: &(dyn std::error::Error + 'static)) -> StoreError {
        StoreError::Read {
            bucket: self.name.into(),
            key: key.into(),
            message: error.to_string(),
            election: election::explains(error),
        }
    }

    fn call<'a>(&'a self, op: &'static str, key: &'a str) -> Call<'a> {
        Call {
            op,
            bucket: self.name,
            key,
        }
    }

    /// The last sequence of the bucket's stream, as the server says now.
    pub async fn last_sequence(&self) -> Result<u64> {
        ride(self.call("read", ""), || async {
            let mut stream = self.kv.stream.clone();
            stream
                .info()
                .await
                .map(|i| i.state.last_sequence)
                .map_err(|e| self.read_err("", &e))
        })
        .await
    }

    /// Every live object with its revision.
    pub async fn load_all(&self) -> Result<Vec<(String, T, u64)>> {
        let items = ride(self.call("load", ""), || async {
            Ok::<_, StoreError>(js::load_all(&self.kv).await?)
        })
        .await?;
        self.decode_all(items)
    }

    /// Every live object whose key is `<prefix>.<rest>` (one cluster's works), with its
    /// revision.
    pub async fn load_prefix(&self, prefix: &str) -> Result<Vec<(String, T, u64)>> {
        let items = ride(self.call("load", prefix), || async {
            Ok::<_, StoreError>(js::load_prefix(&self.kv, prefix).await?)
        })
        .await?;
        self.decode_all(items)
    }

    /// The items that decode; the others are quarantined and skipped.
    fn decode_all(&self, items: Vec<KvItem>) -> Result<Vec<(String, T, u64)>> {
        Ok(items
            .into_iter()
            .filter_map(
                |KvItem {
                     key,
                     value,
                     revision,
                 }| {
                    match self.decode(&key, &value, revision) {
                        Ok(v) => Some((key, v, revision)),
                        Err(_) => None,
                    }
                },
            )
            .collect())
    }

    /// Decodes the value of `key` at `revision`: quarantined when it does not decode, cleared
    /// from the quarantine when it does.
    pub fn decode(&self, key: &str, value: &[u8], revision: u64) -> Result<T> {
        match T::decode(value) {
            Ok(v) => {
                quarantine::clear(self.name, key);
                Ok(v)
            }
            Err(source) => {
                quarantine::note(self.name, key, revision, value.len(), &source.to_string());
                Err(StoreError::Corrupt {
                    bucket: self.name.into(),
                    key: key.into(),
                    source,
                })
            }
        }
    }

    /// One object and its revision.
    pub async fn get(&self, key: &str) -> Result<Option<(T, u64)>> {
        let entry = ride(self.call("read", key), || async {
            self.kv.entry(key).await.map_err(|e| self.read_err(key, &e))
        })
        .await?;
        match entry {
            Some(e) if e.operation == async_nats::jetstream::kv::Operation::Put => {
                let v = self.decode(key, &e.value, e.revision)?;
                Ok(Some((v, e.revision)))
            }
            _ => {
                quarantine::clear(self.name, key);
                Ok(None)
            }
        }
    }

    /// One object and its revision as the stream's leader holds them. A plain [`Self::get`]
    /// may be answered by any replica (direct get), which can lag; a hub taking over a
    /// previous holder's objects must not start from an older one.
    pub async fn get_latest(&self, key: &str) -> Result<Option<(T, u64)>> {
        let Some((payload, revision)) = ride(self.call("read", key), || async {
            Ok::<_, StoreError>(js::get_latest(&self.kv, key).await?)
        })
        .await?
        else {
            return Ok(None);
        };
        let v = self.decode(key, &payload, revision)?;
        Ok(Some((v, revision)))
    }

    /// Writes `value` if the stored revision is `expected` (0 = the key must not exist).
    /// Returns the new revision.
    ///
    /// A write that fails is not always a write that did not happen: a publish that timed out
    /// can sit in the client's buffer and land after a reconnect, and a retried write can find
    /// its own first attempt. So every failure is logged with its key and followed by a read:
    /// when the key already holds exactly these bytes the write counts as done and its
    /// revision is returned. Otherwise the error says whether it was a lost race (`conflict`:
    /// re-read and adopt what is stored) or an outage (the outcome is unknown until a later
    /// read).
    pub async fn write(&self, key: &str, value: &T, expected: u64) -> Result<u64> {
        let bytes = Bytes::from(value.encode_to_vec());
        let revision = ride(self.call("write", key), || {
            Box::pin(self.write_once(key, bytes.clone(), expected))
        })
        .await?;
        quarantine::clear(self.name, key);
        Ok(revision)
    }

    /// One attempt of [`Self::write`].
    async fn write_once(&self, key: &str, bytes: Bytes, expected: u64) -> Result<u64> {
        self.check_fence(key)?;
        // Only the fenced publish, every cluster actor's path, runs inline: the other paths
        // (unfenced buckets, a create over a delete marker, a failure's read-back) are boxed,
        // so that the thousands of actors awaiting a write at once each hold a small future.
        let result = if self.fence.is_some() {
            match self.publish_fenced(key, bytes.clone(), expected).await {
                Err(e) if e.is_conflict() && expected == 0 => {
                    Box::pin(self.create_over_marker(key, bytes.clone(), e)).await
                }
                other => other,
            }
        } else {
            Box::pin(self.write_unfenced(key, bytes.clone(), expected)).await
        };
        match result {
            Ok(revision) => Ok(revision),
            Err(error) => Box::pin(self.after_failed_write(key, &bytes, expected, error)).await,
        }
    }

    /// A fenced create refused because the key exists: over a delete marker, the marker's
    /// revision is the one to expect.
    async fn create_over_marker(
        &self,
        key: &str,
        bytes: Bytes,
        refused: StoreError,
    ) -> Result<u64> {
        match self.kv.entry(key).await {
            Ok(Some(entry)) if entry.operation != Operation::Put => {
                self.publish_fenced(key, bytes, entry.revision).await
            }
            _ => Err(refused),
        }
    }

    async fn write_unfenced(&self, key: &str, bytes: Bytes, expected: u64) -> Result<u64> {
        if expected == 0 {
            self.kv.create(key, bytes).await.map_err(|e| {
                let conflict = matches!(
                    e.kind(),
                    async_nats::jetstream::kv::CreateErrorKind::AlreadyExists
                );
                self.write_err(key, &e, conflict)
            })
        } else {
            self.kv.update(key, bytes, expected).await.map_err(|e| {
                let conflict = matches!(
                    e.kind(),
                    async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision
                );
                self.write_err(key, &e, conflict)
            })
        }
    }

    /// After a failed write: the write counts as done if the key holds exactly `bytes` at a
    /// newer revision (it landed after all); otherwise the error, a conflict judged.
    async fn after_failed_write(
        &self,
        key: &str,
        bytes: &Bytes,
        expected: u64,
        error: StoreError,
    ) -> Result<u64> {
        if error.election().is_some() {
            // Said once per wait by the ride.
            tracing::debug!(bucket = self.name, key, expected, %error, "KV write failed");
        } else {
            tracing::warn!(bucket = self.name, key, expected, %error, "KV write failed");
        }
        match self.kv.entry(key).await {
            Ok(Some(e))
                if e.operation == async_nats::jetstream::kv::Operation::Put
                    && e.revision > expected
                    && e.value == *bytes =>
            {
                tracing::info!(
                    bucket = self.name,
                    key,
                    revision = e.revision,
                    "the failed KV write had landed"
                );
                Ok(e.revision)
            }
            _ if error.is_conflict() => Err(self.judge_conflict(key, error).await),
            _ => Err(error),
        }
    }

    /// Writes unconditionally (under the fence, if any); returns the new revision.
    pub async fn put(&self, key: &str, value: &T) -> Result<u64> {
        let bytes = Bytes::from(value.encode_to_vec());
        let revision = ride(self.call("write", key), || {
            Box::pin(self.put_once(key, bytes.clone()))
        })
        .await?;
        quarantine::clear(self.name, key);
        Ok(revision)
    }

    /// One attempt of [`Self::put`].
    async fn put_once(&self, key: &str, bytes: Bytes) -> Result<u64> {
        self.check_fence(key)?;
        if let Some((f, hub)) = &self.fence {
            let subject = format!(
                "{}{key}",
                self.kv.put_prefix.as_ref().unwrap_or(&self.kv.prefix)
            );
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(EPOCH_HEADER, f.header().as_str());
            headers.insert(HUB_HEADER, hub.as_ref());
            return self
                .js
                .publish_with_headers(subject, headers, bytes)
                .await
                .map_err(|e| self.write_err(key, &e, false))?
                .await
                .map(|ack| ack.sequence)
                .map_err(|e| self.write_err(key, &e, false));
        }
        self.kv
            .put(key, bytes)
            .await
            .map_err(|e| self.write_err(key, &e, false))
    }

    /// Removes a key and its history.
    pub async fn purge(&self, key: &str) -> Result<()> {
        ride(self.call("write", key), || async {
            self.check_fence(key)?;
            self.kv
                .purge(key)
                .await
                .map_err(|e| self.write_err(key, &e, false))
        })
        .await
    }
}

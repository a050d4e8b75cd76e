//! Hub state in JetStream KV: one bucket per kind, protobuf values, the KV revision as the
//! object's `resourceVersion`.

use bytes::Bytes;
use flotilla_bus::jetstream::{self as js, KvItem, StreamOptions};
use prost::Message;
use std::marker::PhantomData;
use thiserror::Error;

/// Bucket of ManagedClusters, key `<cluster>`.
pub const CLUSTERS: &str = "clusters";
/// Bucket of ManifestWorks, key `<cluster>.<work>`.
pub const WORKS: &str = "works";
/// Bucket of ManagedClusterSets, key `<set>`.
pub const CLUSTERSETS: &str = "clustersets";
/// Bucket of ManagedClusterSetBindings, key `<namespace>.<set>`.
pub const BINDINGS: &str = "bindings";

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
    },
    /// A stored value does not decode.
    #[error("kv {bucket}/{key}: stored value does not decode: {source}")]
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
            }
        )
    }
}

/// Result alias.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A typed KV bucket.
#[derive(Clone)]
pub struct Bucket<T> {
    kv: async_nats::jetstream::kv::Store,
    name: &'static str,
    _t: PhantomData<fn() -> T>,
}

impl<T: Message + Default> Bucket<T> {
    /// Creates (if needed) and opens the bucket.
    pub async fn open(
        js: &async_nats::jetstream::Context,
        name: &'static str,
        opts: StreamOptions,
    ) -> Result<Self> {
        Ok(Self {
            kv: js::ensure_kv(js, name, 1, opts).await?,
            name,
            _t: PhantomData,
        })
    }

    fn write_err(&self, key: &str, message: String, conflict: bool) -> StoreError {
        StoreError::Write {
            bucket: self.name.into(),
            key: key.into(),
            message,
            conflict,
        }
    }

    /// Every live object with its revision.
    pub async fn load_all(&self) -> Result<Vec<(String, T, u64)>> {
        let items = js::load_all(&self.kv).await?;
        items
            .into_iter()
            .map(
                |KvItem {
                     key,
                     value,
                     revision,
                 }| {
                    let v = T::decode(value.as_ref()).map_err(|source| StoreError::Corrupt {
                        bucket: self.name.into(),
                        key: key.clone(),
                        source,
                    })?;
                    Ok((key, v, revision))
                },
            )
            .collect()
    }

    /// One object and its revision.
    pub async fn get(&self, key: &str) -> Result<Option<(T, u64)>> {
        let entry = self.kv.entry(key).await.map_err(|e| StoreError::Read {
            bucket: self.name.into(),
            key: key.into(),
            message: e.to_string(),
        })?;
        match entry {
            Some(e) if e.operation == async_nats::jetstream::kv::Operation::Put => {
                let v = T::decode(e.value.as_ref()).map_err(|source| StoreError::Corrupt {
                    bucket: self.name.into(),
                    key: key.into(),
                    source,
                })?;
                Ok(Some((v, e.revision)))
            }
            _ => Ok(None),
        }
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
        let result = if expected == 0 {
            self.kv.create(key, bytes.clone()).await.map_err(|e| {
                let conflict = matches!(
                    e.kind(),
                    async_nats::jetstream::kv::CreateErrorKind::AlreadyExists
                );
                self.write_err(key, e.to_string(), conflict)
            })
        } else {
            self.kv
                .update(key, bytes.clone(), expected)
                .await
                .map_err(|e| {
                    let conflict = matches!(
                        e.kind(),
                        async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision
                    );
                    self.write_err(key, e.to_string(), conflict)
                })
        };
        let Err(error) = result else { return result };
        tracing::warn!(bucket = self.name, key, expected, %error, "KV write failed");
        match self.kv.entry(key).await {
            Ok(Some(e))
                if e.operation == async_nats::jetstream::kv::Operation::Put
                    && e.revision > expected
                    && e.value == bytes =>
            {
                tracing::info!(
                    bucket = self.name,
                    key,
                    revision = e.revision,
                    "the failed KV write had landed"
                );
                Ok(e.revision)
            }
            _ => Err(error),
        }
    }

    /// Writes unconditionally; returns the new revision.
    pub async fn put(&self, key: &str, value: &T) -> Result<u64> {
        self.kv
            .put(key, Bytes::from(value.encode_to_vec()))
            .await
            .map_err(|e| self.write_err(key, e.to_string(), false))
    }

    /// Removes a key and its history.
    pub async fn purge(&self, key: &str) -> Result<()> {
        self.kv
            .purge(key)
            .await
            .map_err(|e| self.write_err(key, e.to_string(), false))
    }
}

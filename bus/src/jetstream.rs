//! JetStream: the `FLOTILLA_STATUS` stream and KV buckets, created so that they work on
//! nats-server 2.9.10 (Debian bookworm) as well as newer servers.
//!
//! async-nats' `create_key_value` needs 2.10 account-info fields, so buckets are created here as
//! plain streams following the KV conventions (`KV_<bucket>`, subjects `$KV.<bucket>.>`, rollup
//! allowed, deletes denied, direct get, discard new) and then opened with `get_key_value`.

use async_nats::jetstream::{self, kv, stream};
use bytes::Bytes;
use futures::StreamExt;
use std::time::Duration;
use thiserror::Error;

/// Name of the status stream.
pub const STATUS_STREAM: &str = "FLOTILLA_STATUS";

/// A JetStream operation that failed.
#[derive(Debug, Error)]
pub enum JetStreamError {
    /// Creating or looking up a stream failed.
    #[error("stream {name}: {source}")]
    Stream {
        /// Stream name.
        name: String,
        /// The client's error.
        #[source]
        source: jetstream::context::CreateStreamError,
    },
    /// Opening a KV bucket failed.
    #[error("kv bucket {bucket}: {source}")]
    Open {
        /// Bucket name.
        bucket: String,
        /// The client's error.
        #[source]
        source: jetstream::context::KeyValueError,
    },
    /// Changing an existing stream's limits failed.
    #[error("stream {name}: updating its limits: {source}")]
    Update {
        /// Stream name.
        name: String,
        /// The client's error.
        #[source]
        source: jetstream::context::UpdateStreamError,
    },
    /// Reading a KV bucket failed.
    #[error("kv bucket {bucket}: {message}")]
    Read {
        /// Bucket name.
        bucket: String,
        /// What failed.
        message: String,
    },
}

/// Storage and replication of Flotilla's streams.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    /// Replicas (1 for a single server, 3 for a NATS cluster).
    pub replicas: usize,
    /// File (durable) or memory storage.
    pub storage: stream::StorageType,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            replicas: 1,
            storage: stream::StorageType::File,
        }
    }
}

/// Bounds of the status stream (DESIGN.md §5: every input has a limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusLimits {
    /// Bytes, at most (-1: unlimited); the oldest messages go first.
    pub max_bytes: i64,
    /// Age after which a message goes (zero: never).
    pub max_age: Duration,
}

impl Default for StatusLimits {
    fn default() -> Self {
        Self {
            max_bytes: -1,
            max_age: Duration::ZERO,
        }
    }
}

/// Creates (or opens) the status stream: every `flotilla.status.>` subject keeps only its latest
/// message, so a hub outage leaves a backlog bounded by the number of resources; the stream is
/// bounded in bytes and age, and no message may be larger than an event. An existing stream
/// whose bounds differ is updated to these.
pub async fn ensure_status_stream(
    js: &jetstream::Context,
    opts: StreamOptions,
    limits: StatusLimits,
) -> Result<stream::Stream, JetStreamError> {
    let config = stream::Config {
        name: STATUS_STREAM.to_string(),
        subjects: vec![crate::subjects::STATUS_ALL.to_string()],
        max_messages_per_subject: 1,
        max_bytes: limits.max_bytes,
        max_age: limits.max_age,
        max_message_size: crate::envelope::DEFAULT_MAX_EVENT_BYTES as i32,
        storage: opts.storage,
        num_replicas: opts.replicas,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    };
    let mut stream = js
        .get_or_create_stream(config.clone())
        .await
        .map_err(|source| JetStreamError::Stream {
            name: STATUS_STREAM.into(),
            source,
        })?;
    let current = stream.cached_info().config.clone();
    if current.max_bytes != config.max_bytes
        || current.max_age != config.max_age
        || current.max_message_size != config.max_message_size
    {
        let updated = stream::Config {
            max_bytes: config.max_bytes,
            max_age: config.max_age,
            max_message_size: config.max_message_size,
            ..current
        };
        js.update_stream(updated)
            .await
            .map_err(|source| JetStreamError::Update {
                name: STATUS_STREAM.into(),
                source,
            })?;
        stream = js
            .get_stream(STATUS_STREAM)
            .await
            .map_err(|e| JetStreamError::Read {
                bucket: STATUS_STREAM.into(),
                message: e.to_string(),
            })?;
    }
    Ok(stream)
}

/// Creates (if needed) and opens a KV bucket keeping `history` revisions per key.
pub async fn ensure_kv(
    js: &jetstream::Context,
    bucket: &str,
    history: i64,
    opts: StreamOptions,
) -> Result<kv::Store, JetStreamError> {
    let name = format!("KV_{bucket}");
    let config = stream::Config {
        name: name.clone(),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: history.max(1),
        max_bytes: -1,
        max_message_size: -1,
        storage: opts.storage,
        num_replicas: opts.replicas,
        allow_rollup: true,
        deny_delete: true,
        deny_purge: false,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    };
    js.get_or_create_stream(config)
        .await
        .map_err(|source| JetStreamError::Stream { name, source })?;
    js.get_key_value(bucket)
        .await
        .map_err(|source| JetStreamError::Open {
            bucket: bucket.into(),
            source,
        })
}

/// One live key of a bucket.
#[derive(Debug, Clone)]
pub struct KvItem {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Bytes,
    /// Its revision (the object's resourceVersion).
    pub revision: u64,
}

/// Reads the latest value of every live key in one pass (an ordered consumer delivering the last
/// message per subject), instead of one request per key: loading 10,000 clusters is one stream.
pub async fn load_all(store: &kv::Store) -> Result<Vec<KvItem>, JetStreamError> {
    let err = |message: String| JetStreamError::Read {
        bucket: store.name.clone(),
        message,
    };
    // `Store::status` returns stream info cached at open time: ask the server.
    let mut stream = store.stream.clone();
    let messages = stream
        .info()
        .await
        .map_err(|e| err(e.to_string()))?
        .state
        .messages;
    if messages == 0 {
        return Ok(Vec::new());
    }
    let mut watch = store
        .watch_with_history(">")
        .await
        .map_err(|e| err(e.to_string()))?;
    let mut items = Vec::with_capacity(messages as usize);
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .map_err(|_| err("timed out reading the bucket".into()))?;
        let Some(entry) = next else { break };
        let entry = entry.map_err(|e| err(e.to_string()))?;
        if entry.operation == kv::Operation::Put {
            items.push(KvItem {
                key: entry.key,
                value: entry.value,
                revision: entry.revision,
            });
        }
        if entry.delta == 0 {
            break;
        }
    }
    Ok(items)
}

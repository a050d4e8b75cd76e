//! JetStream: the `FLOTILLA_STATUS` stream and KV buckets, created so that they work on
//! nats-server 2.9.10 (Debian bookworm) as well as newer servers.
//!
//! async-nats' `create_key_value` needs 2.10 account-info fields, so buckets are created here as
//! plain streams following the KV conventions (`KV_<bucket>`, subjects `$KV.<bucket>.>`, rollup
//! allowed, deletes denied, direct get, discard new) and then opened with `get_key_value`,
//! asked again for a bounded time while a new stream is not known yet ([`OPEN_WAIT`]).

use crate::election::{self, Why};
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
    /// Changing an existing stream's limits or replicas failed.
    #[error("stream {name}: updating its configuration: {source}")]
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
        /// Whether a JetStream election explains it ([`crate::election`]).
        election: Option<Why>,
    },
}

/// A read's failure, told whether an election explains it.
fn read_err(
    bucket: &str,
    message: String,
    error: &(dyn std::error::Error + 'static),
) -> JetStreamError {
    JetStreamError::Read {
        bucket: bucket.to_string(),
        message,
        election: election::explains(error),
    }
}

impl JetStreamError {
    /// Whether JetStream refused because it has no room: the server's (or the account's)
    /// storage cannot hold what a stream reserves (its `max_bytes`). Waiting does not help; the
    /// operator must give JetStream more storage or ask for less.
    pub fn out_of_storage(&self) -> bool {
        use jetstream::ErrorCode;
        let source = match self {
            Self::Stream { source, .. } | Self::Update { source, .. } => source,
            Self::Open { .. } | Self::Read { .. } => return false,
        };
        matches!(
            source.kind(),
            jetstream::context::CreateStreamErrorKind::JetStream(e)
                if [
                    ErrorCode::STORAGE_RESOURCES_EXCEEDED,
                    ErrorCode::ACCOUNT_RESOURCES_EXCEEDED,
                    ErrorCode::MEMORY_RESOURCES_EXCEEDED,
                ]
                .contains(&e.error_code())
        )
    }

    /// Whether a JetStream election explains the failure (worth trying again), and how.
    pub fn election(&self) -> Option<Why> {
        match self {
            Self::Stream { source, .. } | Self::Update { source, .. } => election::explains(source),
            Self::Open { source, .. } => election::explains(source),
            Self::Read { election, .. } => *election,
        }
    }

    /// The stream or bucket the error is about.
    pub fn stream(&self) -> &str {
        match self {
            Self::Stream { name, .. } | Self::Update { name, .. } => name,
            Self::Open { bucket, .. } | Self::Read { bucket, .. } => bucket,
        }
    }
}

/// Storage and replication of Flotilla's streams.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    /// Replicas (1 for a single server, 3 for a NATS cluster; JetStream allows 1 to 5). Every
    /// stream and bucket is created with this many, and an existing one with fewer is scaled up
    /// (never down: a process started without `--replicas` must not take replication away).
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

/// The most replicas JetStream allows for a stream.
pub const MAX_REPLICAS: usize = 5;

/// What an existing stream's configuration must become to match `want`, or `None` when it
/// matches: replicas are raised to `want`'s (never lowered), and when `limits` is set the
/// status stream's bounds (`max_bytes`, `max_age`, `max_message_size`) become `want`'s. Every
/// other field is kept as the server has it.
pub fn reconcile_stream(
    current: &stream::Config,
    want: &stream::Config,
    limits: bool,
) -> Option<stream::Config> {
    let mut next = current.clone();
    if current.num_replicas < want.num_replicas {
        next.num_replicas = want.num_replicas;
    }
    if limits {
        next.max_bytes = want.max_bytes;
        next.max_age = want.max_age;
        next.max_message_size = want.max_message_size;
    }
    let changed = next.num_replicas != current.num_replicas
        || next.max_bytes != current.max_bytes
        || next.max_age != current.max_age
        || next.max_message_size != current.max_message_size;
    changed.then_some(next)
}

/// Creates the stream `want` describes, or brings an existing one in line with it
/// ([`reconcile_stream`]): `get_or_create_stream` alone never changes an existing stream, so
/// `--replicas 3` over buckets made with one replica would silently keep one.
async fn ensure_stream(
    js: &jetstream::Context,
    want: stream::Config,
    limits: bool,
) -> Result<stream::Stream, JetStreamError> {
    let name = want.name.clone();
    let stream = js
        .get_or_create_stream(want.clone())
        .await
        .map_err(|source| JetStreamError::Stream {
            name: name.clone(),
            source,
        })?;
    let Some(updated) = reconcile_stream(&stream.cached_info().config, &want, limits) else {
        return Ok(stream);
    };
    tracing::info!(
        stream = %name,
        replicas = updated.num_replicas,
        "updating an existing stream's configuration"
    );
    js.update_stream(updated)
        .await
        .map_err(|source| JetStreamError::Update {
            name: name.clone(),
            source,
        })?;
    js.get_stream(&name)
        .await
        .map_err(|e| read_err(&name, e.to_string(), &e))
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
/// whose bounds differ, or that has fewer replicas than `opts`, is updated.
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
    ensure_stream(js, config, true).await
}

/// Creates (if needed) and opens a KV bucket keeping `history` revisions per key, with
/// `opts.replicas` replicas (an existing bucket with fewer is scaled up, keeping its data).
pub async fn ensure_kv(
    js: &jetstream::Context,
    bucket: &str,
    history: i64,
    opts: StreamOptions,
) -> Result<kv::Store, JetStreamError> {
    let config = stream::Config {
        name: format!("KV_{bucket}"),
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
    ensure_stream(js, config, false).await?;
    open_kv(js, bucket).await
}

/// How long opening a bucket waits for its just-made stream to be known ([`open_kv`]).
pub const OPEN_WAIT: Duration = Duration::from_secs(10);

/// Opens the bucket whose stream was just created or found. On a NATS cluster a stream the
/// meta leader has just created takes a moment to be known to the server that answers the
/// stream-info request, which until then says "stream not found" (seen once in a full suite on
/// a busy machine); an election answers "no leader" or nothing at all. Those are asked again,
/// backing off from 25 ms to 500 ms, for [`OPEN_WAIT`] — as the first write to a new stream is
/// (an election explains its "no stream", [`crate::election`]); any other answer is final.
async fn open_kv(js: &jetstream::Context, bucket: &str) -> Result<kv::Store, JetStreamError> {
    let deadline = tokio::time::Instant::now() + OPEN_WAIT;
    let mut pause = Duration::from_millis(25);
    loop {
        match js.get_key_value(bucket).await {
            Ok(store) => return Ok(store),
            Err(source)
                if stream_not_known_yet(&source)
                    && tokio::time::Instant::now() + pause < deadline =>
            {
                tracing::debug!(bucket, error = %source, "the bucket's stream is not known yet; opening again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(source) => {
                return Err(JetStreamError::Open {
                    bucket: bucket.into(),
                    source,
                });
            }
        }
    }
}

/// Whether opening a bucket whose stream exists failed only because the stream is not known
/// yet where the request was answered ("stream not found"), or because an election is under
/// way ([`election::code`], [`election::explains`]): worth asking again.
pub fn stream_not_known_yet(error: &jetstream::context::KeyValueError) -> bool {
    use jetstream::context::{GetStreamError, GetStreamErrorKind};
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        // The server's answer is the error's kind, not one of its sources.
        if let Some(GetStreamErrorKind::JetStream(answer)) =
            e.downcast_ref::<GetStreamError>().map(GetStreamError::kind)
        {
            return election::code(answer.error_code()).is_some();
        }
        next = e.source();
    }
    election::explains(error).is_some()
}

/// Creates (or opens) a bucket whose keys expire `ttl` after their last write (leases,
/// heartbeats): history 1, every read from the stream leader (`allow_direct: false` — a lagging
/// replica could show an expired key or miss a fresh one), a duplicate window no longer than
/// the TTL (the server refuses a longer one). An existing bucket keeps its `max_age`, which is
/// returned: whoever created it chose the TTL for everyone. Replicas are raised as for
/// [`ensure_kv`].
pub async fn ensure_expiring_kv(
    js: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
    opts: StreamOptions,
) -> Result<(kv::Store, Duration), JetStreamError> {
    let config = stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age: ttl,
        max_bytes: -1,
        max_message_size: -1,
        storage: opts.storage,
        num_replicas: opts.replicas,
        allow_rollup: true,
        deny_delete: true,
        deny_purge: false,
        allow_direct: false,
        discard: stream::DiscardPolicy::New,
        duplicate_window: ttl,
        ..Default::default()
    };
    let stream = ensure_stream(js, config, false).await?;
    let ttl = stream.cached_info().config.max_age;
    let kv = open_kv(js, bucket).await?;
    Ok((kv, ttl))
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

/// Reads the latest value of every live key under `prefix` (keys `<prefix>.<rest>`): one
/// cluster's works, say. An ordered consumer filtered to those subjects, so the read costs what
/// the prefix holds, not what the bucket holds; a prefix with no key answers at once.
pub async fn load_prefix(store: &kv::Store, prefix: &str) -> Result<Vec<KvItem>, JetStreamError> {
    let err = |e: &(dyn std::error::Error + 'static)| {
        read_err(&store.name, format!("keys {prefix}.*: {e}"), e)
    };
    let filter = format!("{}{prefix}.>", store.prefix);
    let consumer = store
        .stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            filter_subject: filter,
            deliver_policy: jetstream::consumer::DeliverPolicy::LastPerSubject,
            replay_policy: jetstream::consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await
        .map_err(|e| err(&e))?;
    if consumer.cached_info().num_pending == 0 {
        return Ok(Vec::new());
    }
    let mut messages = consumer.messages().await.map_err(|e| err(&e))?;
    let mut items = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await
            .map_err(|_| JetStreamError::Read {
                bucket: store.name.clone(),
                message: format!("keys {prefix}.*: timed out reading the keys"),
                election: Some(Why::TimedOut),
            })?;
        let Some(message) = next else { break };
        let message = message.map_err(|e| err(&e))?;
        let info = message.info().map_err(|e| err(&*e))?;
        let (revision, pending) = (info.stream_sequence, info.pending);
        let removed = is_removal(message.headers.as_ref());
        if !removed && let Some(key) = message.subject.as_str().strip_prefix(&store.prefix) {
            items.push(KvItem {
                key: key.to_string(),
                value: message.payload.clone(),
                revision,
            });
        }
        if pending == 0 {
            break;
        }
    }
    Ok(items)
}

/// The latest value of `key` and its revision as the stream's leader holds them (`None`: no
/// such key, or deleted). A plain `kv::Store::entry` may be answered by any replica (direct
/// get), which can lag; a compare-and-set or a takeover must not start from an older value.
pub async fn get_latest(
    store: &kv::Store,
    key: &str,
) -> Result<Option<(Bytes, u64)>, JetStreamError> {
    let subject = format!("{}{key}", store.prefix);
    match store.stream.get_last_raw_message_by_subject(&subject).await {
        Ok(m) if is_removal(Some(&m.headers)) => Ok(None),
        Ok(m) => Ok(Some((m.payload, m.sequence))),
        Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => {
            Ok(None)
        }
        Err(e) => Err(read_err(&store.name, format!("key {key}: {e}"), &e)),
    }
}

/// Whether a KV message is a delete or purge marker (by its `KV-Operation` header).
pub fn is_removal(headers: Option<&async_nats::HeaderMap>) -> bool {
    headers
        .and_then(|h| h.get("KV-Operation"))
        .is_some_and(|op| op.as_str() == "DEL" || op.as_str() == "PURGE")
}

/// Reads the latest value of every live key in one pass (an ordered consumer delivering the last
/// message per subject), instead of one request per key: loading 10,000 clusters is one stream.
///
/// A server that delivers nothing for [`ENTRY_WAIT`] (a consumer on a stream whose replicas are
/// moving, a server busy for seconds under a burst) has the read started again on a fresh
/// consumer, [`LOAD_ATTEMPTS`] times in all, before the read fails: a hub loading its state
/// rides out a stall instead of failing its start.
pub async fn load_all(store: &kv::Store) -> Result<Vec<KvItem>, JetStreamError> {
    for attempt in 1..=LOAD_ATTEMPTS {
        match read_all(store).await? {
            Some(items) => return Ok(items),
            None if attempt < LOAD_ATTEMPTS => tracing::warn!(
                bucket = %store.name,
                attempt,
                "reading the bucket stalled; starting over on a new consumer"
            ),
            None => {}
        }
    }
    Err(JetStreamError::Read {
        bucket: store.name.clone(),
        message: format!("timed out reading the bucket ({LOAD_ATTEMPTS} attempts)"),
        election: Some(Why::TimedOut),
    })
}

/// How long [`load_all`] waits for the next entry of the bucket.
pub const ENTRY_WAIT: Duration = Duration::from_secs(10);

/// Full reads [`load_all`] makes before giving up on a stalled server.
pub const LOAD_ATTEMPTS: u32 = 3;

/// One full read; `None` when the server delivered nothing for [`ENTRY_WAIT`].
async fn read_all(store: &kv::Store) -> Result<Option<Vec<KvItem>>, JetStreamError> {
    let err = |e: &(dyn std::error::Error + 'static)| read_err(&store.name, e.to_string(), e);
    // `Store::status` returns stream info cached at open time: ask the server.
    let mut stream = store.stream.clone();
    let messages = stream.info().await.map_err(|e| err(&e))?.state.messages;
    if messages == 0 {
        return Ok(Some(Vec::new()));
    }
    let mut watch = store.watch_with_history(">").await.map_err(|e| err(&e))?;
    let mut items = Vec::with_capacity(messages as usize);
    loop {
        let Ok(next) = tokio::time::timeout(ENTRY_WAIT, watch.next()).await else {
            return Ok(None);
        };
        let Some(entry) = next else { break };
        let entry = entry.map_err(|e| err(&e))?;
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
    Ok(Some(items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetstream::context::{
        GetStreamError, GetStreamErrorKind, KeyValueError, KeyValueErrorKind,
    };

    fn server(code: u64) -> jetstream::Error {
        serde_json::from_value(serde_json::json!({
            "code": 404, "err_code": code, "description": "from the server"
        }))
        .expect("a JetStream error")
    }

    fn open_answered(code: u64) -> KeyValueError {
        KeyValueError::with_source(
            KeyValueErrorKind::GetBucket,
            GetStreamError::new(GetStreamErrorKind::JetStream(server(code))),
        )
    }

    #[test]
    fn a_stream_not_found_yet_or_an_election_is_asked_again_when_opening() {
        assert!(
            stream_not_known_yet(&open_answered(10059)),
            "stream not found"
        );
        assert!(stream_not_known_yet(&open_answered(10009)), "not leader");
        let nobody = KeyValueError::with_source(
            KeyValueErrorKind::GetBucket,
            GetStreamError::with_source(
                GetStreamErrorKind::Request,
                jetstream::context::RequestError::new(
                    jetstream::context::RequestErrorKind::NoResponders,
                ),
            ),
        );
        assert!(stream_not_known_yet(&nobody));
    }

    #[test]
    fn other_answers_to_an_open_are_final() {
        assert!(!stream_not_known_yet(&open_answered(10047)), "no storage");
        assert!(!stream_not_known_yet(&KeyValueError::new(
            KeyValueErrorKind::InvalidStoreName
        )));
    }

    fn config(replicas: usize) -> stream::Config {
        stream::Config {
            name: "KV_x".into(),
            num_replicas: replicas,
            max_bytes: -1,
            max_age: Duration::ZERO,
            max_message_size: -1,
            ..Default::default()
        }
    }

    #[test]
    fn replicas_are_raised_never_lowered_and_other_fields_kept() {
        let mut current = config(1);
        current.description = Some("set by an operator".into());
        let next = reconcile_stream(&current, &config(3), false).expect("R1 -> R3");
        assert_eq!(next.num_replicas, 3);
        assert_eq!(next.description.as_deref(), Some("set by an operator"));
        assert!(reconcile_stream(&config(3), &config(3), false).is_none());
        assert!(
            reconcile_stream(&config(3), &config(1), false).is_none(),
            "a process started without --replicas must not scale a bucket down"
        );
    }

    #[test]
    fn limits_are_reconciled_only_when_asked() {
        let mut want = config(1);
        want.max_bytes = 1 << 20;
        want.max_age = Duration::from_secs(60);
        assert!(reconcile_stream(&config(1), &want, false).is_none());
        let next = reconcile_stream(&config(1), &want, true).expect("limits differ");
        assert_eq!(
            (next.max_bytes, next.max_age),
            (1 << 20, Duration::from_secs(60))
        );
        let mut both = want.clone();
        both.num_replicas = 3;
        let next = reconcile_stream(&config(1), &both, true).unwrap();
        assert_eq!((next.num_replicas, next.max_bytes), (3, 1 << 20));
    }
}

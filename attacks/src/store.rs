//! The hub's state read the way an operator with `hub.creds` would check it after an attack:
//! stream info and last-message reads of the KV streams (`KV_<bucket>`) and of the status
//! stream, nothing that writes or creates a consumer.

use async_nats::jetstream;
use flotilla_api::v1;
use futures::TryStreamExt;
use prost::Message;
use std::collections::BTreeMap;
use std::time::Duration;

/// Name of the status stream.
pub const STATUS_STREAM: &str = "FLOTILLA_STATUS";

/// Bound of one JetStream read.
const READ: Duration = Duration::from_secs(10);

/// What is wrong with one stored value: a line of [`Snapshot::damage_since`], after
/// `bucket/key: `.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    /// A lease or heartbeat that is no JSON.
    #[error("holds something other than a hub's record: {0}")]
    NotHubJson(#[source] serde_json::Error),
    /// A lease or heartbeat that is JSON, but no `HubInfo`.
    #[error("holds a JSON document that is no hub's record: {0}")]
    NotHubRecord(serde_json::Value),
    /// A hub's record under a key that is not that hub's (heartbeats) or no lease's.
    #[error("holds hub {0:?}'s record under the wrong key")]
    HubUnderWrongKey(String),
    /// `account-iat` that is no number.
    #[error("holds something other than an account JWT iat")]
    NotIat,
    /// A revocation under a key that is no user key.
    #[error("is not under a user key")]
    NotUnderUserKey,
    /// A revocation that is no JSON.
    #[error("holds something other than a revocation: {0}")]
    NotRevocationJson(#[source] serde_json::Error),
    /// A revocation that is JSON, but no `{"at", "account"}`.
    #[error("holds a JSON document that is no revocation: {0}")]
    NotRevocation(serde_json::Value),
    /// A JetStream request, acknowledgement or hub answer ([`crate::wire::foreign`]).
    #[error("holds {0}")]
    Foreign(String),
    /// Bytes that do not decode as the bucket's type.
    #[error("does not decode: {0}")]
    Undecodable(#[source] prost::DecodeError),
    /// An object without metadata.
    #[error("has no metadata")]
    NoMetadata,
    /// An object stored under another object's key.
    #[error("holds object {0:?}, not the one its key names")]
    UnderWrongKey(String),
}

/// Why a read of the hub's JetStream state failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A read took longer than its bound.
    #[error("{0} timed out")]
    TimedOut(String),
    /// The stream names could not be listed.
    #[error("listing streams: {0}")]
    Streams(#[source] jetstream::context::StreamsError),
    /// A stream could not be looked up.
    #[error("stream {stream}: {source}")]
    Stream {
        /// The stream.
        stream: String,
        /// Why.
        #[source]
        source: jetstream::context::GetStreamError,
    },
    /// A stream's subjects could not be read.
    #[error("the subjects of stream {stream}: {source}")]
    Subjects {
        /// The stream.
        stream: String,
        /// Why.
        #[source]
        source: jetstream::stream::InfoError,
    },
    /// The last message of a subject could not be read (or there is none).
    #[error("{stream} {subject}: {source}")]
    Last {
        /// The stream.
        stream: String,
        /// The subject.
        subject: String,
        /// Why.
        #[source]
        source: jetstream::stream::LastRawMessageError,
    },
    /// A stored cluster does not decode.
    #[error("clusters/{name} does not decode: {source}")]
    Cluster {
        /// The cluster.
        name: String,
        /// Why.
        #[source]
        source: prost::DecodeError,
    },
}

/// One key's latest message in a KV stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The stored bytes.
    pub value: Vec<u8>,
    /// The message is a delete or purge marker (`KV-Operation`).
    pub deleted: bool,
}

/// Every KV stream's keys and latest values: bucket → key → entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// bucket → key → latest entry.
    pub buckets: BTreeMap<String, BTreeMap<String, Entry>>,
}

impl Snapshot {
    /// The live keys of `bucket`.
    pub fn live_keys(&self, bucket: &str) -> Vec<String> {
        self.buckets
            .get(bucket)
            .map(|keys| {
                keys.iter()
                    .filter(|(_, e)| !e.deleted)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Everything wrong with `self` as the state that follows `before`: a bucket gone, a key
    /// gone, a value that does not decode as its bucket's type or names another object.
    pub fn damage_since(&self, before: &Snapshot) -> Vec<String> {
        let mut damage = Vec::new();
        for (bucket, keys) in &before.buckets {
            let Some(now) = self.buckets.get(bucket) else {
                damage.push(format!(
                    "bucket {bucket} is gone (it had {} keys)",
                    keys.len()
                ));
                continue;
            };
            for (key, entry) in keys {
                if entry.deleted {
                    continue;
                }
                match now.get(key) {
                    None => damage.push(format!("{bucket}/{key} is gone")),
                    Some(e) if e.deleted => damage.push(format!("{bucket}/{key} was deleted")),
                    Some(_) => {}
                }
            }
        }
        for (bucket, keys) in &self.buckets {
            for (key, entry) in keys {
                if !entry.deleted
                    && let Err(why) = check_value(bucket, key, &entry.value)
                {
                    damage.push(format!("{bucket}/{key}: {why}"));
                }
            }
        }
        damage
    }
}

/// Checks a lease or heartbeat: a hub's `HubInfo` (and a heartbeat under that hub's id), not a
/// JetStream request or acknowledgement aimed at the bucket.
fn check_hub_info(bucket: &str, key: &str, value: &[u8]) -> Result<(), Damage> {
    let v: serde_json::Value = serde_json::from_slice(value).map_err(Damage::NotHubJson)?;
    let field = |f: &str| v[f].as_str().map(str::to_string);
    let (Some(hub), Some(_), Some(_)) = (field("hub"), field("incarnation"), field("grpc")) else {
        return Err(Damage::NotHubRecord(v));
    };
    let key_ok = match bucket {
        "hubmembers" => key == hub,
        _ => {
            key == "controllers"
                || key
                    .strip_prefix("shard.")
                    .is_some_and(|n| n.parse::<u32>().is_ok())
        }
    };
    if key_ok {
        Ok(())
    } else {
        Err(Damage::HubUnderWrongKey(hub))
    }
}

/// Checks a shared revocation (JSON, written only by hubs): a user key's `{"at", "account"}`
/// under that key, or `account-iat`, the latest account JWT `iat` (a number).
fn check_revocation(key: &str, value: &[u8]) -> Result<(), Damage> {
    if key == "account-iat" {
        return std::str::from_utf8(value)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(drop)
            .ok_or(Damage::NotIat);
    }
    if !(key.starts_with('U') && nkeys::KeyPair::from_public_key(key).is_ok()) {
        return Err(Damage::NotUnderUserKey);
    }
    let v: serde_json::Value = serde_json::from_slice(value).map_err(Damage::NotRevocationJson)?;
    match (v["at"].as_i64(), v["account"].as_str()) {
        (Some(_), Some("hub" | "agents")) => Ok(()),
        _ => Err(Damage::NotRevocation(v)),
    }
}

/// Checks that `value` is an object of `bucket`'s type stored under its own key.
pub fn check_value(bucket: &str, key: &str, value: &[u8]) -> Result<(), Damage> {
    // The hubs' own leases and heartbeats are JSON (`HubInfo`), written only by hubs.
    if matches!(bucket, "hubleases" | "hubmembers") {
        return check_hub_info(bucket, key, value);
    }
    // So are the revocations the hubs share.
    if bucket == "revocations" {
        return check_revocation(key, value);
    }
    if let Some(what) = crate::wire::foreign(value) {
        return Err(Damage::Foreign(what));
    }
    fn named<M: Message + Default>(
        value: &[u8],
        meta: impl Fn(&M) -> Option<&v1::ObjectMeta>,
    ) -> Result<(String, String), Damage> {
        let m = M::decode(value).map_err(Damage::Undecodable)?;
        let meta = meta(&m).ok_or(Damage::NoMetadata)?;
        Ok((meta.namespace.clone(), meta.name.clone()))
    }
    let (namespace, name) = match bucket {
        "clusters" => named::<v1::ManagedCluster>(value, |m| m.metadata.as_ref())?,
        "works" => named::<v1::ManifestWork>(value, |m| m.metadata.as_ref())?,
        "clustersets" => named::<v1::ManagedClusterSet>(value, |m| m.metadata.as_ref())?,
        "bindings" => named::<v1::ManagedClusterSetBinding>(value, |m| m.metadata.as_ref())?,
        "placements" => named::<v1::Placement>(value, |m| m.metadata.as_ref())?,
        "replicasets" => named::<v1::ManifestWorkReplicaSet>(value, |m| m.metadata.as_ref())?,
        "addons" => named::<v1::ClusterManagementAddOn>(value, |m| m.metadata.as_ref())?,
        "clusteraddons" => named::<v1::ManagedClusterAddOn>(value, |m| m.metadata.as_ref())?,
        "addontemplates" => named::<v1::AddOnTemplate>(value, |m| m.metadata.as_ref())?,
        // Keyed by something other than the object's own name: decoding is the check.
        "decisions" => {
            named::<v1::PlacementDecision>(value, |m| m.metadata.as_ref())?;
            return Ok(());
        }
        "scores" => {
            named::<v1::AddOnPlacementScore>(value, |m| m.metadata.as_ref())?;
            return Ok(());
        }
        _ => return Ok(()),
    };
    // Keys name the object they hold: `<name>` or `<namespace>.<name>`.
    let own = if namespace.is_empty() {
        name.clone()
    } else {
        format!("{namespace}.{name}")
    };
    if key == own || key == name {
        Ok(())
    } else {
        Err(Damage::UnderWrongKey(own))
    }
}

/// A read-only view of the hub's JetStream state through `hub.creds`.
pub struct RawStore {
    js: jetstream::Context,
}

impl RawStore {
    /// Wraps a client connected with the hub's credentials.
    pub fn new(client: async_nats::Client) -> Self {
        Self {
            js: jetstream::new(client),
        }
    }

    /// Names of every KV stream (`KV_<bucket>` → `<bucket>`).
    pub async fn buckets(&self) -> Result<Vec<String>, ReadError> {
        let names: Vec<String> = tokio::time::timeout(READ, self.js.stream_names().try_collect())
            .await
            .map_err(|_| ReadError::TimedOut("listing streams".into()))?
            .map_err(ReadError::Streams)?;
        let mut buckets: Vec<String> = names
            .into_iter()
            .filter_map(|n| n.strip_prefix("KV_").map(str::to_string))
            .collect();
        buckets.sort();
        Ok(buckets)
    }

    /// Every subject of `stream` matching `filter`, with its message count.
    pub async fn subjects(
        &self,
        stream: &str,
        filter: &str,
    ) -> Result<BTreeMap<String, u64>, ReadError> {
        let subjects = |source| ReadError::Subjects {
            stream: stream.to_string(),
            source,
        };
        let read = async {
            let info = self
                .stream(stream)
                .await?
                .info_with_subjects(filter)
                .await
                .map_err(subjects)?;
            info.try_collect::<BTreeMap<String, usize>>()
                .await
                .map(|m| m.into_iter().map(|(k, v)| (k, v as u64)).collect())
                .map_err(subjects)
        };
        tokio::time::timeout(READ, read)
            .await
            .map_err(|_| ReadError::TimedOut(format!("reading the subjects of {stream}")))?
    }

    /// The latest message on `subject` of `stream`.
    pub async fn last(&self, stream: &str, subject: &str) -> Result<Entry, ReadError> {
        let read = async {
            let m = self
                .stream(stream)
                .await?
                .get_last_raw_message_by_subject(subject)
                .await
                .map_err(|source| ReadError::Last {
                    stream: stream.to_string(),
                    subject: subject.to_string(),
                    source,
                })?;
            let deleted = m
                .headers
                .get("KV-Operation")
                .is_some_and(|op| op.as_str() == "DEL" || op.as_str() == "PURGE");
            Ok(Entry {
                value: m.payload.to_vec(),
                deleted,
            })
        };
        tokio::time::timeout(READ, read)
            .await
            .map_err(|_| ReadError::TimedOut(format!("reading {stream} {subject}")))?
    }

    /// Stream `stream`, looked up without its info.
    async fn stream(&self, stream: &str) -> Result<jetstream::stream::Stream<()>, ReadError> {
        self.js
            .get_stream_no_info(stream)
            .await
            .map_err(|source| ReadError::Stream {
                stream: stream.to_string(),
                source,
            })
    }

    /// Every KV bucket's keys and latest values.
    pub async fn snapshot(&self) -> Result<Snapshot, ReadError> {
        let mut snapshot = Snapshot::default();
        for bucket in self.buckets().await? {
            let stream = format!("KV_{bucket}");
            let prefix = format!("$KV.{bucket}.");
            let mut keys = BTreeMap::new();
            for subject in self
                .subjects(&stream, &format!("{prefix}>"))
                .await?
                .into_keys()
            {
                let entry = self.last(&stream, &subject).await?;
                let key = subject
                    .strip_prefix(&prefix)
                    .unwrap_or(&subject)
                    .to_string();
                keys.insert(key, entry);
            }
            snapshot.buckets.insert(bucket, keys);
        }
        Ok(snapshot)
    }

    /// The stored record of cluster `name` (`None` when absent or deleted).
    pub async fn cluster(&self, name: &str) -> Result<Option<v1::ManagedCluster>, ReadError> {
        use jetstream::stream::LastRawMessageErrorKind;
        let entry = match self
            .last("KV_clusters", &format!("$KV.clusters.{name}"))
            .await
        {
            Ok(e) => e,
            Err(ReadError::Last { source, .. })
                if source.kind() == LastRawMessageErrorKind::NoMessageFound =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if entry.deleted {
            return Ok(None);
        }
        v1::ManagedCluster::decode(entry.value.as_slice())
            .map(Some)
            .map_err(|source| ReadError::Cluster {
                name: name.to_string(),
                source,
            })
    }

    /// How many subjects of the status stream match `filter`.
    pub async fn status_subjects(&self, filter: &str) -> Result<usize, ReadError> {
        Ok(self.subjects(STATUS_STREAM, filter).await?.len())
    }
}

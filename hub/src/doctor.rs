//! `flotilla-hub doctor` (I/O: reads the store): every stored record that does not decode as
//! its bucket holds ([`crate::catalog`]), read straight from JetStream — what a running
//! hub quarantines and skips ([`crate::store::quarantine`]) — and the removal of one, by its
//! revision, only while that revision is still there and still does not decode.

use crate::catalog;
use crate::store::quarantine::Record;
use async_nats::jetstream::context::{GetStreamError, KeyValueError};
use async_nats::jetstream::kv::{DeleteError, EntryError};
use flotilla_bus::jetstream as js;

/// Why the doctor could not examine the store or remove a record; each names the bucket (and
/// key and revision) and, where the store refused, keeps its error.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// A `--remove` argument that is not `BUCKET/KEY@REVISION`.
    #[error("{0:?}: expected BUCKET/KEY@REVISION, as `flotilla-hub doctor` lists them")]
    NotARemoval(String),
    /// A `--remove` argument naming a bucket the doctor does not examine.
    #[error(
        "{given:?}: {bucket:?} is not a bucket the doctor examines ({})",
        examined()
    )]
    NotExamined {
        /// The argument.
        given: String,
        /// The bucket it names.
        bucket: String,
    },
    /// The bucket's stream could not be looked up.
    #[error("bucket {bucket}: {source}")]
    Stream {
        /// The bucket.
        bucket: String,
        /// Why.
        #[source]
        source: GetStreamError,
    },
    /// The bucket could not be opened.
    #[error("bucket {bucket}: {source}")]
    Open {
        /// The bucket.
        bucket: String,
        /// Why.
        #[source]
        source: KeyValueError,
    },
    /// A bucket's records could not be read.
    #[error(transparent)]
    Load(#[from] js::JetStreamError),
    /// The bucket of a removal does not exist (no hub made it).
    #[error("bucket {0} does not exist")]
    NoBucket(String),
    /// A removal's record could not be read.
    #[error("{bucket}/{key}: {source}")]
    Entry {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// Why.
        #[source]
        source: EntryError,
    },
    /// A removal's key holds no record.
    #[error("{bucket}/{key}: no such record")]
    NoRecord {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
    },
    /// The key was written since the doctor listed it.
    #[error(
        "{bucket}/{key}: its latest revision is {latest}, not {revision}: run the doctor again"
    )]
    Moved {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// Its latest revision.
        latest: u64,
        /// The revision to remove.
        revision: u64,
    },
    /// The record decodes (a good value was written over it, or a newer hub reads it).
    #[error("{bucket}/{key}@{revision} decodes: the doctor removes only what does not")]
    Decodes {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// The revision.
        revision: u64,
    },
    /// The delete marker could not be written.
    #[error("{bucket}/{key}@{revision}: {source}")]
    Delete {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// The revision.
        revision: u64,
        /// Why.
        #[source]
        source: DeleteError,
    },
}

/// The buckets the doctor examines, for a message.
fn examined() -> String {
    catalog::BUCKETS
        .iter()
        .map(|(b, _)| *b)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A record to remove: `BUCKET/KEY@REVISION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The bucket.
    pub bucket: String,
    /// The key.
    pub key: String,
    /// The revision that does not decode.
    pub revision: u64,
}

impl std::str::FromStr for Removal {
    type Err = DoctorError;

    fn from_str(s: &str) -> Result<Self, DoctorError> {
        let bad = || DoctorError::NotARemoval(s.to_string());
        let (bucket, rest) = s.split_once('/').ok_or_else(bad)?;
        let (key, revision) = rest.rsplit_once('@').ok_or_else(bad)?;
        let revision = revision.parse().map_err(|_| bad())?;
        if bucket.is_empty() || key.is_empty() {
            return Err(bad());
        }
        if catalog::decoder(bucket).is_none() {
            return Err(DoctorError::NotExamined {
                given: s.to_string(),
                bucket: bucket.to_string(),
            });
        }
        Ok(Self {
            bucket: bucket.to_string(),
            key: key.to_string(),
            revision,
        })
    }
}

/// Opens `bucket` when a hub made it (`None`: it does not exist yet).
async fn find(
    jetstream: &async_nats::jetstream::Context,
    bucket: &str,
) -> Result<Option<async_nats::jetstream::kv::Store>, DoctorError> {
    use async_nats::jetstream::context::GetStreamErrorKind;
    match jetstream.get_stream(format!("KV_{bucket}")).await {
        Ok(_) => {}
        Err(e)
            if matches!(e.kind(), GetStreamErrorKind::JetStream(j)
                if j.error_code() == async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND) =>
        {
            return Ok(None);
        }
        Err(source) => {
            return Err(DoctorError::Stream {
                bucket: bucket.to_string(),
                source,
            });
        }
    }
    jetstream
        .get_key_value(bucket)
        .await
        .map(Some)
        .map_err(|source| DoctorError::Open {
            bucket: bucket.to_string(),
            source,
        })
}

/// Every record that does not decode, bucket by bucket.
pub async fn examine(
    jetstream: &async_nats::jetstream::Context,
) -> Result<Vec<Record>, DoctorError> {
    let mut found = Vec::new();
    for (bucket, decode) in catalog::BUCKETS {
        let Some(kv) = find(jetstream, bucket).await? else {
            continue;
        };
        for item in js::load_all(&kv).await? {
            if let Err(e) = decode(&item.value) {
                found.push(Record {
                    bucket: (*bucket).to_string(),
                    key: item.key,
                    revision: item.revision,
                    bytes: item.value.len(),
                    error: e.to_string(),
                });
            }
        }
    }
    Ok(found)
}

/// Removes the record `removal` names (a delete marker, as the hub's own deletes), only if
/// its revision is still the key's latest and still does not decode.
pub async fn remove(
    jetstream: &async_nats::jetstream::Context,
    removal: &Removal,
) -> Result<(), DoctorError> {
    let Removal {
        bucket,
        key,
        revision,
    } = removal;
    let (bucket, key, revision) = (bucket.clone(), key.clone(), *revision);
    let decode = catalog::decoder(&bucket).ok_or_else(|| DoctorError::NotExamined {
        given: format!("{bucket}/{key}@{revision}"),
        bucket: bucket.clone(),
    })?;
    let Some(kv) = find(jetstream, &bucket).await? else {
        return Err(DoctorError::NoBucket(bucket));
    };
    let entry = match kv.entry(&key).await {
        Ok(entry) => entry,
        Err(source) => {
            return Err(DoctorError::Entry {
                bucket,
                key,
                source,
            });
        }
    };
    let Some(entry) = entry.filter(|e| e.operation == async_nats::jetstream::kv::Operation::Put)
    else {
        return Err(DoctorError::NoRecord { bucket, key });
    };
    if entry.revision != revision {
        return Err(DoctorError::Moved {
            bucket,
            key,
            latest: entry.revision,
            revision,
        });
    }
    if decode(&entry.value).is_ok() {
        return Err(DoctorError::Decodes {
            bucket,
            key,
            revision,
        });
    }
    match kv.delete_expect_revision(&key, Some(revision)).await {
        Ok(()) => Ok(()),
        Err(source) => Err(DoctorError::Delete {
            bucket,
            key,
            revision,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_names_a_bucket_a_key_and_a_revision() {
        let r: Removal = "works/edge-1.web@42".parse().unwrap();
        assert_eq!(
            r,
            Removal {
                bucket: "works".into(),
                key: "edge-1.web".into(),
                revision: 42
            }
        );
        for bad in ["works", "works/edge-1.web", "works/@4", "/k@4", "works/k@x"] {
            let e = bad.parse::<Removal>().unwrap_err().to_string();
            assert!(e.contains("BUCKET/KEY@REVISION"), "{bad}: {e}");
        }
        let e = "nosuch/k@4".parse::<Removal>().unwrap_err().to_string();
        assert!(e.contains("not a bucket the doctor examines"), "{e}");
    }
}

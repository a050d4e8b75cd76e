//! `flotilla-hub doctor` (I/O: reads the store): every stored record that does not decode as
//! its bucket holds ([`crate::catalog`]), read straight from JetStream — what a running
//! hub quarantines and skips ([`crate::store::quarantine`]) — and the removal of one, by its
//! revision, only while that revision is still there and still does not decode.

use crate::catalog;
use crate::store::quarantine::Record;
use flotilla_bus::jetstream as js;

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
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("{s:?}: expected BUCKET/KEY@REVISION, as `flotilla-hub doctor` lists them");
        let (bucket, rest) = s.split_once('/').ok_or_else(bad)?;
        let (key, revision) = rest.rsplit_once('@').ok_or_else(bad)?;
        let revision = revision.parse().map_err(|_| bad())?;
        if bucket.is_empty() || key.is_empty() {
            return Err(bad());
        }
        if catalog::decoder(bucket).is_none() {
            return Err(format!(
                "{s:?}: {bucket:?} is not a bucket the doctor examines ({})",
                catalog::BUCKETS
                    .iter()
                    .map(|(b, _)| *b)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
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
) -> Result<Option<async_nats::jetstream::kv::Store>, String> {
    use async_nats::jetstream::context::GetStreamErrorKind;
    match jetstream.get_stream(format!("KV_{bucket}")).await {
        Ok(_) => {}
        Err(e)
            if matches!(e.kind(), GetStreamErrorKind::JetStream(j)
                if j.error_code() == async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(format!("bucket {bucket}: {e}")),
    }
    jetstream
        .get_key_value(bucket)
        .await
        .map(Some)
        .map_err(|e| format!("bucket {bucket}: {e}"))
}

/// Every record that does not decode, bucket by bucket.
pub async fn examine(jetstream: &async_nats::jetstream::Context) -> Result<Vec<Record>, String> {
    let mut found = Vec::new();
    for (bucket, decode) in catalog::BUCKETS {
        let Some(kv) = find(jetstream, bucket).await? else {
            continue;
        };
        for item in js::load_all(&kv).await.map_err(|e| e.to_string())? {
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
) -> Result<(), String> {
    let Removal {
        bucket,
        key,
        revision,
    } = removal;
    let decode = catalog::decoder(bucket).ok_or_else(|| format!("{bucket}: not examined"))?;
    let kv = find(jetstream, bucket)
        .await?
        .ok_or_else(|| format!("bucket {bucket} does not exist"))?;
    let entry = kv
        .entry(key)
        .await
        .map_err(|e| format!("{bucket}/{key}: {e}"))?
        .filter(|e| e.operation == async_nats::jetstream::kv::Operation::Put)
        .ok_or_else(|| format!("{bucket}/{key}: no such record"))?;
    if entry.revision != *revision {
        return Err(format!(
            "{bucket}/{key}: its latest revision is {}, not {revision}: run the doctor again",
            entry.revision
        ));
    }
    if decode(&entry.value).is_ok() {
        return Err(format!(
            "{bucket}/{key}@{revision} decodes: the doctor removes only what does not"
        ));
    }
    kv.delete_expect_revision(key, Some(*revision))
        .await
        .map_err(|e| format!("{bucket}/{key}@{revision}: {e}"))
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
            let e = bad.parse::<Removal>().unwrap_err();
            assert!(e.contains("BUCKET/KEY@REVISION"), "{bad}: {e}");
        }
        let e = "nosuch/k@4".parse::<Removal>().unwrap_err();
        assert!(e.contains("not a bucket the doctor examines"), "{e}");
    }
}

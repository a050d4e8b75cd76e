//! A backup directory's `manifest.json` and the checks a restore makes before it sends a byte
//! (pure): the manifest's format and stream names, each stream's `backup.json` (the restore
//! request: the snapshot answer's `config` and `state`) against the stream it claims to be,
//! the replicas a restore rewrites, and whether a server is recent enough for a backup.
//!
//! A backup is `DIR/manifest.json` plus one directory per stream, `DIR/<stream>/backup.json`
//! and `DIR/<stream>/stream.tar.s2` — the layout the `nats` CLI writes (jsm.go
//! `SnapshotToDirectory`), so one stream can also be restored by hand with `nats`.

use super::plan::{Kind, OnRestore, Skipped, bucket_of, kind_of};
use crate::jetstream::STATUS_STREAM;
use crate::subjects::STATUS_ALL;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Each stream's restore request (the `nats` CLI's name).
pub const REQUEST_FILE: &str = "backup.json";
/// Each stream's data: the server's archive, untouched (the `nats` CLI's name).
pub const DATA_FILE: &str = "stream.tar.s2";
/// The manifest format this build writes and reads.
pub const FORMAT: u32 = 1;

/// `manifest.json`: what a backup holds, written last (a directory without it is a backup
/// that did not finish).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// The version of the `flotilla-hub` that wrote it.
    pub flotilla: String,
    /// The version of the nats-server the snapshots came from: a restore needs this one or a
    /// later one (an older server may not read a newer archive or configuration).
    pub nats_server: String,
    /// When the backup started (RFC 3339, UTC).
    pub taken_at: String,
    /// How long it took.
    pub duration_ms: u64,
    /// Every stream taken, in restore order.
    pub streams: Vec<StreamRecord>,
    /// Streams of the account left out, and why.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// One stream of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRecord {
    /// The stream's name (also its directory's).
    pub name: String,
    /// Bucket or stream.
    pub kind: Kind,
    /// What restore does after putting it back.
    pub restore: OnRestore,
    /// Size of `stream.tar.s2`.
    pub bytes: u64,
    /// SHA-256 of `stream.tar.s2`, lowercase hex.
    pub sha256: String,
    /// Messages in the snapshot.
    pub messages: u64,
    /// The snapshot's first sequence.
    pub first_seq: u64,
    /// The snapshot's last sequence (a bucket's latest revision).
    pub last_seq: u64,
    /// The stream's last sequence just before its snapshot, and
    pub last_seq_before: u64,
    /// just after it: with `last_seq`, how many writes the snapshot straddled (an archive may
    /// hold some past `last_seq`, never past this).
    pub last_seq_after: u64,
}

/// What is wrong with a manifest or a stream's restore request.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file is not a manifest.
    #[error("not a backup manifest: {0}")]
    Json(#[source] serde_json::Error),
    /// Written in a format this build does not read.
    #[error(
        "format {found}, written by flotilla {flotilla}; this flotilla-hub reads format {FORMAT} \
         — restore with flotilla {flotilla} or later"
    )]
    Format {
        /// The manifest's format.
        found: u32,
        /// The version that wrote it.
        flotilla: String,
    },
    /// A stream the manifest names is not one a backup takes.
    #[error("stream {0:?} is not a Flotilla stream (KV_<bucket> or {STATUS_STREAM})")]
    Foreign(String),
    /// A stream named twice.
    #[error("stream {0} is listed twice")]
    Duplicate(String),
    /// A stream's kind does not match its name.
    #[error("stream {0}: its kind does not match its name")]
    Kind(String),
    /// A digest that is not SHA-256 hex.
    #[error("stream {0}: sha256 is not 64 lowercase hex digits")]
    Digest(String),
    /// A stream's restore request is not what a snapshot of that stream answers.
    #[error("{0}")]
    Request(String),
}

impl Manifest {
    /// Reads and checks a manifest.
    pub fn parse(bytes: &[u8]) -> Result<Self, ManifestError> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(ManifestError::Json)?;
        manifest.check()?;
        Ok(manifest)
    }

    /// The format, the stream names and kinds, the digests.
    pub fn check(&self) -> Result<(), ManifestError> {
        if self.format != FORMAT {
            return Err(ManifestError::Format {
                found: self.format,
                flotilla: self.flotilla.clone(),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.streams {
            let kind = kind_of(&s.name).ok_or_else(|| ManifestError::Foreign(s.name.clone()))?;
            if kind != s.kind {
                return Err(ManifestError::Kind(s.name.clone()));
            }
            if !seen.insert(s.name.as_str()) {
                return Err(ManifestError::Duplicate(s.name.clone()));
            }
            let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
            if s.sha256.len() != 64 || !s.sha256.bytes().all(hex) {
                return Err(ManifestError::Digest(s.name.clone()));
            }
        }
        Ok(())
    }
}

/// The subjects a stream of this name must have: what the bus creates it with
/// ([`crate::jetstream`]).
fn expected_subjects(stream: &str) -> Option<String> {
    if stream == STATUS_STREAM {
        Some(STATUS_ALL.to_string())
    } else {
        bucket_of(stream).map(|bucket| format!("$KV.{bucket}.>"))
    }
}

/// Configuration fields that would make a restored stream take in, or send out, other
/// subjects' messages: a backup must not bring them.
const FORBIDDEN: &[&str] = &["mirror", "sources", "republish", "subject_transform"];

/// Checks a stream's restore request (`backup.json`) against the stream it is for: a
/// `config` and a `state` object, the config naming that stream with exactly the subjects the
/// bus gives it, and nothing that mirrors, sources or republishes.
pub fn check_request(stream: &str, request: &Value) -> Result<(), ManifestError> {
    let wrong = |why: String| Err(ManifestError::Request(why));
    let Some(config) = request.get("config").filter(|c| c.is_object()) else {
        return wrong("has no \"config\" object".into());
    };
    if !request.get("state").is_some_and(Value::is_object) {
        return wrong("has no \"state\" object".into());
    }
    let name = config.get("name").and_then(Value::as_str).unwrap_or("");
    if name != stream {
        return wrong(format!("configures stream {name:?}, not {stream}"));
    }
    let Some(want) = expected_subjects(stream) else {
        return wrong(format!("{stream} is not a Flotilla stream"));
    };
    let subjects: Vec<&str> = config
        .get("subjects")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if subjects != [want.as_str()] {
        return wrong(format!(
            "gives {stream} the subjects {subjects:?}; it must have exactly [{want:?}]"
        ));
    }
    for field in FORBIDDEN {
        let set = config.get(*field).is_some_and(|v| match v {
            Value::Null => false,
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        });
        if set {
            return wrong(format!("sets {field:?}, which no Flotilla stream has"));
        }
    }
    Ok(())
}

/// The request with its configuration's replicas set to `replicas` (how a restore onto a
/// cluster of another size changes them).
pub fn with_replicas(request: &Value, replicas: usize) -> Value {
    let mut request = request.clone();
    if let Some(config) = request.get_mut("config").and_then(Value::as_object_mut) {
        config.insert("num_replicas".into(), Value::from(replicas));
    }
    request
}

/// The `major.minor.patch` of a server version (`2.9.10`, `v2.15.1`, `2.15.0-dev`), each part
/// read up to its first non-digit.
fn version_parts(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version
        .trim()
        .trim_start_matches('v')
        .splitn(3, '.')
        .map(|p| {
            let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        });
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Whether a server of version `server` can take a backup made on `backup`: the same or a
/// later version. An unreadable version on either side is not refused (the server's own
/// answer decides).
pub fn server_can_restore(server: &str, backup: &str) -> bool {
    match (version_parts(server), version_parts(backup)) {
        (Some(server), Some(backup)) => server >= backup,
        _ => true,
    }
}

/// Lowercase hex of a digest.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests;

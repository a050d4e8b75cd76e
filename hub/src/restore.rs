//! `flotilla-hub restore` (I/O, thin): a backup ([`crate::backup`]) put back into an empty
//! JetStream account through the server's own restore API.
//!
//! Everything is checked before a byte is sent: the manifest, every stream's restore request
//! against the stream it claims to be (name, exactly its subjects, nothing that mirrors,
//! sources or republishes), every data file's size and SHA-256; then the server — its version
//! must be the backup's or later, and it must hold none of Flotilla's streams. Streams are
//! restored in the manifest's order; the shard leases are purged once back (their sequence
//! numbers stay, so every lease epoch taken afterwards is above every epoch stamped in the
//! restored records). A failure part-way lists the streams already restored.

mod joins;

pub use joins::{join_revocations, spend_joins};

use crate::backup::stream_names;
use async_nats::jetstream::{
    self, context::GetStreamError, context::StreamsError, stream::PurgeError,
};
use flotilla_bus::snapshot::manifest::{
    self, DATA_FILE, MANIFEST_FILE, Manifest, ManifestError, REQUEST_FILE, StreamRecord,
};
use flotilla_bus::snapshot::plan::{OnRestore, kind_of};
use flotilla_bus::snapshot::{self, SnapshotError};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::io::AsyncReadExt;

/// Why a restore was refused or failed; each names the file or stream.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// No manifest in the directory.
    #[error(
        "{}: missing — not a backup, or a backup that did not finish (manifest.json is \
         written last)",
        .0.display()
    )]
    NoManifest(PathBuf),
    /// The manifest, or a stream's restore request, is wrong.
    #[error("{}: {source}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: ManifestError,
    },
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A stream's restore request is not JSON.
    #[error("{}: not JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A data file's size differs from the manifest's.
    #[error(
        "{}: {found} bytes, manifest.json says {expected} (truncated or damaged)",
        path.display()
    )]
    Size {
        /// The file.
        path: PathBuf,
        /// Its size.
        found: u64,
        /// The manifest's.
        expected: u64,
    },
    /// A data file's digest differs from the manifest's.
    #[error("{}: sha256 differs from manifest.json (file damaged or edited)", .0.display())]
    Digest(PathBuf),
    /// The server is older than the one the backup came from.
    #[error(
        "the backup was taken from nats-server {backup}; this server is {server} — restore \
         into {backup} or later"
    )]
    ServerTooOld {
        /// The backup's server version.
        backup: String,
        /// This server's.
        server: String,
    },
    /// Listing the server's streams failed.
    #[error("listing the server's streams: {0}")]
    List(#[source] StreamsError),
    /// The server holds Flotilla streams already.
    #[error(
        "the server already has {}; restore needs an empty JetStream account (delete the \
         streams first, or use a new server)",
        .0.join(", ")
    )]
    NotEmpty(Vec<String>),
    /// A stream's restore failed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// Purging a restored stream failed.
    #[error("{stream}: purging it after the restore: {source}")]
    Purge {
        /// The stream.
        stream: String,
        /// The client's error.
        #[source]
        source: PurgeError,
    },
    /// Looking a restored stream up failed.
    #[error("{stream}: looking it up after the restore: {source}")]
    Lookup {
        /// The stream.
        stream: String,
        /// The client's error.
        #[source]
        source: GetStreamError,
    },
    /// The server rebuilt other than the manifest recorded.
    #[error(
        "{stream}: the server rebuilt {} messages up to sequence {} from the archive, but the \
         backup's manifest recorded {} up to {}: the archive does not hold what the manifest \
         describes (short: a nats-server 2.9 snapshot that ended early?) — take the backup again",
        got.0, got.1, expected.0, expected.1
    )]
    Short {
        /// The stream.
        stream: String,
        /// (messages, last sequence) in manifest.json.
        expected: (u64, u64),
        /// (messages, last sequence) the server reported.
        got: (u64, u64),
    },
    /// Opening the recovery window failed (every stream is restored).
    #[error(
        "every stream is restored, but opening the recovery window failed: {0} — do not start \
         a hub until `flotilla-hub restore` is run again into an empty server (spokes would be \
         told to delete works the backup lacks)"
    )]
    Window(#[source] crate::store::StoreError),
    /// Creating the status stream failed (every stream is restored, the window is open).
    #[error(
        "every stream is restored and the recovery window is open, but creating the status \
         stream failed: {0} — a hub creates it when it starts; orphans are then named only \
         when their agents reconnect again"
    )]
    StatusStream(#[source] flotilla_bus::jetstream::JetStreamError),
    /// A revocations file given with `--revocations` does not read (the source names it).
    #[error("--revocations {source}")]
    RevocationsFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: flotilla_auth::issuer::IssueError,
    },
    /// A revocations file names a key that is no NATS user key.
    #[error(
        "{}: {key:?} is not a NATS user key (56 characters from U): not a hub's \
         revocations.json?",
        path.display()
    )]
    NotUserKey {
        /// The file.
        path: PathBuf,
        /// The key (cut to 80 characters).
        key: String,
    },
    /// Writing the revocations given with `--revocations` failed (every stream is restored).
    #[error(
        "every stream is restored, but writing the revocations of --revocations failed: {0} \
         — do not start a hub until they are written (run restore again into an empty \
         server): keys revoked after the backup would work again"
    )]
    Revocations(#[source] flotilla_hub_core::security::revocations::RevocationError),
    /// Reading the restored clusters' join credentials failed (every stream is restored).
    #[error(
        "every stream is restored, but reading the restored clusters' join credentials failed: \
         {0} — do not start a hub until they are revoked (run restore again into an empty \
         server): a join credential spent after the backup would bind its cluster again"
    )]
    Joins(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stream failed after others were restored.
    #[error(
        "{source}\nRestored before it: {} — delete them (`nats stream rm NAME`) and run restore \
         again",
        restored.join(", ")
    )]
    Partial {
        /// Streams restored before the failure.
        restored: Vec<String>,
        /// The failure.
        #[source]
        source: Box<RestoreError>,
    },
}

/// A backup read and checked, ready to send.
#[derive(Debug)]
pub struct Checked {
    /// The backup's directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Each stream's restore request, in the manifest's order.
    pub requests: Vec<Value>,
    /// The SHA-256 of manifest.json: the backup's id in the recovery window.
    pub id: String,
}

/// What a restore did.
#[derive(Debug, Clone)]
pub struct Restored {
    /// Streams restored.
    pub streams: usize,
    /// Bytes sent.
    pub bytes: u64,
    /// Keys in the revocations bucket (revocations made after the backup are missing).
    pub revocations: u64,
}

/// Reads and checks the backup in `dir` without touching NATS.
pub async fn check(dir: &Path) -> Result<Checked, RestoreError> {
    let path = dir.join(MANIFEST_FILE);
    let bytes = match tokio::fs::read(&path).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RestoreError::NoManifest(path));
        }
        Err(source) => return Err(RestoreError::File { path, source }),
    };
    let id = manifest::hex(&Sha256::digest(&bytes));
    let manifest =
        Manifest::parse(&bytes).map_err(|source| RestoreError::Invalid { path, source })?;
    let mut requests = Vec::with_capacity(manifest.streams.len());
    for record in &manifest.streams {
        let stream_dir = dir.join(&record.name);
        let path = stream_dir.join(REQUEST_FILE);
        let text = tokio::fs::read(&path)
            .await
            .map_err(|source| RestoreError::File {
                path: path.clone(),
                source,
            })?;
        let request: Value =
            serde_json::from_slice(&text).map_err(|source| RestoreError::Json {
                path: path.clone(),
                source,
            })?;
        manifest::check_request(&record.name, &request)
            .map_err(|source| RestoreError::Invalid { path, source })?;
        requests.push(request);
        let data = stream_dir.join(DATA_FILE);
        let (found, sha256) = digest(&data).await?;
        if found != record.bytes {
            return Err(RestoreError::Size {
                path: data,
                found,
                expected: record.bytes,
            });
        }
        if sha256 != record.sha256 {
            return Err(RestoreError::Digest(data));
        }
    }
    Ok(Checked {
        dir: dir.to_path_buf(),
        manifest,
        requests,
        id,
    })
}

/// Size and SHA-256 of a file.
async fn digest(path: &Path) -> Result<(u64, String), RestoreError> {
    let err = |source| RestoreError::File {
        path: path.to_path_buf(),
        source,
    };
    let mut file = tokio::fs::File::open(path).await.map_err(err)?;
    let (mut hasher, mut size, mut buf) = (Sha256::new(), 0u64, vec![0u8; 256 << 10]);
    loop {
        let n = file.read(&mut buf).await.map_err(err)?;
        if n == 0 {
            return Ok((size, manifest::hex(&hasher.finalize())));
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
}

/// Checks the server can take `checked`: its version, and that it holds none of Flotilla's
/// streams.
pub async fn check_server(
    client: &async_nats::Client,
    checked: &Checked,
) -> Result<(), RestoreError> {
    let server = client.server_info().version;
    if !manifest::server_can_restore(&server, &checked.manifest.nats_server) {
        return Err(RestoreError::ServerTooOld {
            backup: checked.manifest.nats_server.clone(),
            server,
        });
    }
    let js = jetstream::new(client.clone());
    let mut present: Vec<String> = stream_names(&js)
        .await
        .map_err(RestoreError::List)?
        .into_iter()
        .filter(|name| {
            kind_of(name).is_some() || checked.manifest.streams.iter().any(|s| &s.name == name)
        })
        .collect();
    present.sort();
    if present.is_empty() {
        Ok(())
    } else {
        Err(RestoreError::NotEmpty(present))
    }
}

/// Restores every stream of `checked` (replicas rewritten to `replicas` when given), after
/// [`check_server`].
pub async fn restore(
    client: &async_nats::Client,
    checked: &Checked,
    replicas: Option<usize>,
) -> Result<Restored, RestoreError> {
    check_server(client, checked).await?;
    let js = jetstream::new(client.clone());
    let mut done = Restored {
        streams: 0,
        bytes: 0,
        revocations: 0,
    };
    let mut restored = Vec::new();
    let opts = flotilla_bus::jetstream::StreamOptions {
        replicas: replicas.unwrap_or_else(|| backup_replicas(checked)),
        ..Default::default()
    };
    // The window is written before any cluster or work is back: a hub that starts during the
    // restore (a pod restarted on its backoff) finds it open, or finds `hubmeta` made by
    // itself and the restore stops before any cluster is back.
    let hubmeta = format!("KV_{}", crate::recovery::HUBMETA);
    let names: Vec<(&str, OnRestore)> = checked
        .manifest
        .streams
        .iter()
        .map(|s| (s.name.as_str(), s.restore))
        .collect();
    let order = restore_order(&names, &hubmeta);
    let names: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
    if !names.contains(&hubmeta.as_str()) {
        open_window(&js, checked, opts).await?;
    }
    for i in order {
        let (record, request) = (&checked.manifest.streams[i], &checked.requests[i]);
        let request = match replicas {
            Some(n) => manifest::with_replicas(request, n),
            None => request.clone(),
        };
        let one = restore_one(client, &js, &checked.dir, record, &request);
        match one.await {
            Ok(stream) => {
                done.streams += 1;
                done.bytes += stream.bytes;
                if record.name == format!("KV_{}", crate::security::revocations::BUCKET) {
                    done.revocations = stream.messages;
                }
                restored.push(record.name.clone());
                if record.name == hubmeta {
                    open_window(&js, checked, opts).await?;
                }
            }
            Err(e) if restored.is_empty() => return Err(e),
            Err(e) => {
                return Err(RestoreError::Partial {
                    restored,
                    source: Box::new(e),
                });
            }
        }
    }
    open_status_stream(&js, checked, opts).await?;
    Ok(done)
}

/// The order of `streams` to restore: `hubmeta` (the recovery window's bucket) first, then
/// the buckets purged after their restore (the shard leases, which a backup takes last), the
/// rest as the backup lists them.
fn restore_order(streams: &[(&str, OnRestore)], hubmeta: &str) -> Vec<usize> {
    let mut order: Vec<usize> = (0..streams.len()).collect();
    order.sort_by_key(|&i| (streams[i].0 != hubmeta, streams[i].1 != OnRestore::Purge));
    order
}

/// The replicas the backup's streams had (its first stream's; 1 when it says none).
fn backup_replicas(checked: &Checked) -> usize {
    checked
        .requests
        .first()
        .and_then(|r| r.pointer("/config/num_replicas"))
        .and_then(Value::as_u64)
        .map_or(1, |n| {
            n.clamp(1, flotilla_bus::jetstream::MAX_REPLICAS as u64) as usize
        })
}

/// Creates the status stream when the backup did not hold it (taken without `--with-status`):
/// agents reconnect as soon as the server answers, before any hub runs, and republish every
/// status; with the stream there, those statuses wait for the first hub, which names the
/// orphans from them. Unbounded in bytes until a hub applies its own limits (every subject
/// keeps its latest message only).
async fn open_status_stream(
    js: &jetstream::Context,
    checked: &Checked,
    opts: flotilla_bus::jetstream::StreamOptions,
) -> Result<(), RestoreError> {
    let status = flotilla_bus::jetstream::STATUS_STREAM;
    if checked.manifest.streams.iter().any(|s| s.name == status) {
        return Ok(());
    }
    flotilla_bus::jetstream::ensure_status_stream(js, opts, Default::default())
        .await
        .map_err(RestoreError::StatusStream)?;
    Ok(())
}

/// Opens the recovery window in the restored store: hubs started on it tell no spoke to
/// delete a work the backup lacks until an operator decides.
async fn open_window(
    js: &jetstream::Context,
    checked: &Checked,
    opts: flotilla_bus::jetstream::StreamOptions,
) -> Result<(), RestoreError> {
    let meta = crate::store::Bucket::open(js, crate::recovery::HUBMETA, opts)
        .await
        .map_err(RestoreError::Window)?;
    let taken_at = flotilla_api::meta::parse_rfc3339(&checked.manifest.taken_at);
    let window = flotilla_api::v1::RecoveryWindow {
        backup_id: checked.id.clone(),
        backup_taken_at: taken_at,
        started_at: Some(flotilla_api::meta::now()),
        started_by: "restore".into(),
        id: String::new(),
    };
    crate::recovery::open(&meta, &window)
        .await
        .map_err(RestoreError::Window)?;
    Ok(())
}

/// Whether a stream's configuration (`backup.json`'s `config`) ages its messages out
/// (`max_age` above zero, in nanoseconds): the shard leases, whose keys live a lease TTL.
fn ages_out(request: &Value) -> bool {
    request["config"]["max_age"]
        .as_i64()
        .is_some_and(|ns| ns > 0)
}

/// Whether the server rebuilt the whole archive: the manifest's last sequence, and its message
/// count — or, for a stream that ages messages out, no more than it: the server drops on
/// restore the messages that aged out since the backup (the leases of a backup older than a
/// lease TTL), while the last sequence stays.
///
/// The archive may also hold more than the manifest recorded: the server reports a stream's
/// state when the snapshot starts and keeps appending while its blocks are streamed out, so
/// writes made during the snapshot can be in the archive's last block. Those are accepted up
/// to the stream's last sequence just after its snapshot (`last_seq_after`); each such write
/// adds at most one message (and may replace or purge older ones), so the count is bounded
/// above only. An archive that ends before the recorded last sequence is short.
fn rebuilt_whole(record: &StreamRecord, restored: &snapshot::Restored, ages_out: bool) -> bool {
    let grew = restored.last_seq.saturating_sub(record.last_seq);
    let latest = record.last_seq_after.max(record.last_seq);
    if restored.last_seq < record.last_seq || restored.last_seq > latest {
        return false;
    }
    if ages_out || grew > 0 {
        restored.messages <= record.messages + grew
    } else {
        restored.messages == record.messages
    }
}

/// Restores one stream and purges it when the manifest says so.
/// The server's count of what it rebuilt is compared with the manifest's: a 2.9 server
/// that ended a snapshot early gave a short archive whose digest still matches.
async fn restore_one(
    client: &async_nats::Client,
    js: &jetstream::Context,
    dir: &Path,
    record: &StreamRecord,
    request: &Value,
) -> Result<snapshot::Restored, RestoreError> {
    let stream = record.name.as_str();
    let path = dir.join(stream).join(DATA_FILE);
    let mut data = tokio::fs::File::open(&path)
        .await
        .map_err(|source| RestoreError::File { path, source })?;
    let restored = snapshot::restore(client, stream, request, &mut data).await?;
    if !rebuilt_whole(record, &restored, ages_out(request)) {
        return Err(RestoreError::Short {
            stream: stream.into(),
            expected: (record.messages, record.last_seq),
            got: (restored.messages, restored.last_seq),
        });
    }
    if record.restore == OnRestore::Purge {
        let found = js
            .get_stream(stream)
            .await
            .map_err(|source| RestoreError::Lookup {
                stream: stream.into(),
                source,
            })?;
        found.purge().await.map_err(|source| RestoreError::Purge {
            stream: stream.into(),
            source,
        })?;
    }
    tracing::info!(
        stream,
        bytes = restored.bytes,
        messages = restored.messages,
        written_during_snapshot = restored.last_seq.saturating_sub(record.last_seq),
        "stream restored"
    );
    Ok(restored)
}

/// How long a revocation of a legacy `revocations.json` (no lifetime recorded) is kept: past
/// every credential lifetime a hub issues by default.
const LEGACY_REVOCATION_TTL: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

/// The revocations of the hubs' `revocations.json` files (`--revocations`), checked before the
/// server is reached: each file reads, every key is a NATS user key.
pub fn read_revocations(
    files: &[PathBuf],
) -> Result<Vec<(String, flotilla_auth::issuer::Revocation)>, RestoreError> {
    let mut all = Vec::new();
    for path in files {
        let read = flotilla_auth::issuer::read_revocations(path, LEGACY_REVOCATION_TTL).map_err(
            |source| RestoreError::RevocationsFile {
                path: path.clone(),
                source,
            },
        )?;
        if let Some(key) = read.keys().find(|k| !flotilla_auth::issuer::is_user_key(k)) {
            return Err(RestoreError::NotUserKey {
                path: path.clone(),
                key: key.chars().take(80).collect(),
            });
        }
        all.extend(read);
    }
    Ok(all)
}

/// Writes `revocations` (from [`read_revocations`]) into the restored `revocations` bucket
/// (created when the backup had none: a backup of a plain-mode store), each merged with what
/// the backup brought back, before any hub starts: a hub then pushes them to the server with
/// the rest, so nothing revoked after the backup works again. Returns how many were written
/// (the others the backup held already, or refuse nothing any more).
pub async fn put_revocations(
    client: &async_nats::Client,
    checked: &Checked,
    replicas: Option<usize>,
    revocations: &[(String, flotilla_auth::issuer::Revocation)],
) -> Result<usize, RestoreError> {
    use flotilla_hub_core::security::revocations as shared;
    let js = jetstream::new(client.clone());
    let opts = flotilla_bus::jetstream::StreamOptions {
        replicas: replicas.unwrap_or_else(|| backup_replicas(checked)),
        ..Default::default()
    };
    let kv = flotilla_bus::jetstream::ensure_kv(&js, shared::BUCKET, 1, opts)
        .await
        .map_err(|e| RestoreError::Revocations(e.into()))?;
    shared::union(&kv, revocations, flotilla_auth::setup::unix_now())
        .await
        .map_err(RestoreError::Revocations)
}

/// What `flotilla-hub restore` prints when done.
pub fn summary(checked: &Checked, restored: &Restored) -> String {
    format!(
        "Restored {} streams ({} bytes) from a backup taken {} by flotilla {}.\n\
         The shard leases were emptied: hubs started on this server take every unit afresh.\n\
         {} revocation record(s) came back; any made after the backup are missing — rotate the \
         bootstrap credentials and review clusters denied or deleted since then \
         (docs/operations.md, \"After a restore\").\n\
         Hubs start in a recovery window: nothing spokes hold that this backup lacks is \
         deleted, and nothing they hold newer is overwritten, until you decide (flotilla get \
         orphans; flotilla recovery delete|keep|revert CLUSTER NAME; flotilla recovery \
         finish).",
        restored.streams,
        restored.bytes,
        checked.manifest.taken_at,
        checked.manifest.flotilla,
        restored.revocations,
    )
}

/// What `flotilla-hub restore --dry-run` prints: what would be restored and the room needed.
pub fn dry_run(checked: &Checked) -> String {
    let mut text = format!(
        "The backup in {} (taken {} from nats-server {}) is whole; the server can take it.\n\
         STREAM\tBYTES\tMESSAGES\tLAST SEQ\tTHEN",
        checked.dir.display(),
        checked.manifest.taken_at,
        checked.manifest.nats_server
    );
    let mut total = 0;
    for s in &checked.manifest.streams {
        total += s.bytes;
        let then = match s.restore {
            OnRestore::AsIs => "as is",
            OnRestore::Purge => "purged",
        };
        text += &format!(
            "\n{}\t{}\t{}\t{}\t{then}",
            s.name, s.bytes, s.messages, s.last_seq
        );
    }
    text += &format!(
        "\nJetStream needs room for about {} bytes while it unpacks (twice the snapshots).",
        total * 2
    );
    text
}

#[cfg(test)]
mod tests {
    use super::{OnRestore, ages_out, rebuilt_whole, restore_order};
    use flotilla_bus::snapshot::Restored;
    use flotilla_bus::snapshot::manifest::StreamRecord;

    #[test]
    fn a_stream_that_ages_messages_out_may_come_back_with_fewer_but_never_shorter() {
        let record: StreamRecord = serde_json::from_value(serde_json::json!({
            "name": "KV_hubleases", "kind": "bucket", "restore": "purge", "bytes": 1,
            "sha256": "00", "messages": 33, "first_seq": 34, "last_seq": 66,
            "last_seq_before": 66, "last_seq_after": 66,
        }))
        .unwrap();
        let got = |messages, last_seq| Restored {
            bytes: 1,
            messages,
            last_seq,
        };
        let leases = serde_json::json!({"config": {"max_age": 6_000_000_000_i64}});
        let works = serde_json::json!({"config": {"max_age": 0}});
        assert!(ages_out(&leases) && !ages_out(&works) && !ages_out(&serde_json::json!({})));
        assert!(rebuilt_whole(&record, &got(33, 66), false));
        assert!(
            rebuilt_whole(&record, &got(0, 66), true),
            "aged out since the backup"
        );
        assert!(!rebuilt_whole(&record, &got(0, 66), false), "short");
        assert!(
            !rebuilt_whole(&record, &got(33, 65), true),
            "a sequence missing"
        );
        assert!(!rebuilt_whole(&record, &got(34, 66), true));
    }

    #[test]
    fn an_archive_that_grew_while_it_was_taken_is_whole_up_to_the_backups_end() {
        // Recorded at 119 messages up to 236 when the snapshot started; the stream was at 240
        // just after its snapshot (nats-server 2.9 during a fanout: the archive held one more).
        let record: StreamRecord = serde_json::from_value(serde_json::json!({
            "name": "KV_works", "kind": "bucket", "restore": "as-is", "bytes": 1,
            "sha256": "00", "messages": 119, "first_seq": 1, "last_seq": 236,
            "last_seq_before": 230, "last_seq_after": 240,
        }))
        .unwrap();
        let got = |messages, last_seq| Restored {
            bytes: 1,
            messages,
            last_seq,
        };
        assert!(rebuilt_whole(&record, &got(120, 237), false), "a new key");
        assert!(
            rebuilt_whole(&record, &got(119, 237), false),
            "a key rewritten"
        );
        assert!(rebuilt_whole(&record, &got(123, 240), false));
        assert!(
            !rebuilt_whole(&record, &got(124, 241), false),
            "past the stream's end just after its snapshot"
        );
        assert!(
            !rebuilt_whole(&record, &got(125, 238), false),
            "more messages than writes"
        );
        assert!(!rebuilt_whole(&record, &got(118, 235), false), "short");
    }

    #[test]
    fn the_window_bucket_is_restored_first_then_the_leases_the_backup_took_last() {
        let streams = [
            ("KV_clusters", OnRestore::AsIs),
            ("KV_hubmeta", OnRestore::AsIs),
            ("KV_works", OnRestore::AsIs),
            ("KV_hubleases", OnRestore::Purge),
        ];
        assert_eq!(restore_order(&streams, "KV_hubmeta"), vec![1, 3, 0, 2]);
        let old_backup = [
            ("KV_hubleases", OnRestore::Purge),
            ("KV_clusters", OnRestore::AsIs),
        ];
        assert_eq!(
            restore_order(&old_backup, "KV_hubmeta"),
            vec![0, 1],
            "a backup without it keeps its order (the window is written first)"
        );
    }
}

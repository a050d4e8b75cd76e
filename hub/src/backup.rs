//! `flotilla-hub backup` (I/O, thin): every Flotilla stream of the account
//! ([`flotilla_bus::snapshot::plan`]) snapshotted through JetStream's own API into a new
//! directory, `manifest.json` written last — a directory without it is a backup that did not
//! finish, and [`crate::restore`] says so. Streams are taken one after another: each snapshot
//! is served by its stream's leader, on the disks the running hubs write to.
//!
//! Each stream's snapshot is point-in-time; across streams the backup spans its few seconds,
//! which the hub recovers from as after a `kill -9` (every relation between records is
//! reconciled at start). The manifest records each stream's last sequence just before and just
//! after its snapshot, so the writes it straddled are visible (and bound what the archive may
//! hold past the state the server reported when the snapshot started).

use crate::ha::lease::{LEASES, MEMBERS};
use async_nats::jetstream::{self, context::GetStreamError, context::StreamsError};
use flotilla_bus::snapshot::manifest::{
    DATA_FILE, FORMAT, MANIFEST_FILE, Manifest, REQUEST_FILE, StreamRecord,
};
use flotilla_bus::snapshot::plan::{self, Planned};
use flotilla_bus::snapshot::{self, SnapshotError, SnapshotOptions};
use futures::TryStreamExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Buckets a backup leaves out: running hubs rebuild them (heartbeats).
pub const REBUILT: &[&str] = &[MEMBERS];
/// Buckets restored and then purged ([`plan::OnRestore::Purge`]): the shard leases.
pub const PURGED: &[&str] = &[LEASES];

/// What `flotilla-hub backup` takes, and where to.
#[derive(Debug, Clone)]
pub struct Options {
    /// A new or empty directory.
    pub out: PathBuf,
    /// Take the status stream too.
    pub with_status: bool,
    /// Have the server check every message's checksum first.
    pub check: bool,
}

/// Why a backup failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The directory has files already.
    #[error("{}: not empty; backups go into a new directory", .0.display())]
    NotEmpty(PathBuf),
    /// Creating or writing a file or directory failed.
    #[error("{}: {source}", path.display())]
    File {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Listing the account's streams failed.
    #[error("listing the account's streams: {0}")]
    List(#[source] StreamsError),
    /// A stream's state could not be read.
    #[error("{stream}: reading its state: {source}")]
    State {
        /// The stream.
        stream: String,
        /// The client's error.
        #[source]
        source: GetStreamError,
    },
    /// A snapshot failed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// The account's stream names.
pub async fn stream_names(js: &jetstream::Context) -> Result<Vec<String>, StreamsError> {
    js.stream_names().try_collect().await
}

/// Takes a backup into `options.out`; its manifest.
pub async fn backup(
    client: &async_nats::Client,
    options: &Options,
) -> Result<Manifest, BackupError> {
    let started = std::time::Instant::now();
    let taken_at = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    new_dir(&options.out)?;
    let js = jetstream::new(client.clone());
    let names = stream_names(&js).await.map_err(BackupError::List)?;
    let plan = plan::plan(
        &names,
        &plan::Options {
            with_status: options.with_status,
            rebuilt: REBUILT,
            purged: PURGED,
        },
    );
    // The shard leases are snapshotted last: every epoch stamped on a record snapshotted
    // before them is then at or below their last sequence, which restore keeps when it purges
    // them, so every epoch after a restore is above every restored one (even when a unit
    // changed hands during the backup).
    let mut order: Vec<&Planned> = plan.streams.iter().collect();
    order.sort_by_key(|p| p.restore == plan::OnRestore::Purge);
    let mut records = Vec::with_capacity(plan.streams.len());
    for planned in order {
        let before = last_seq(&js, &planned.name).await?;
        let mut record = take(client, &options.out, planned, before, options.check).await?;
        // Read as soon as its snapshot ended: what the archive may hold beyond `last_seq`
        // (written while it streamed out) is bounded by it, and restore checks that bound.
        record.last_seq_after = last_seq(&js, &record.name).await?;
        records.push(record);
    }
    let manifest = Manifest {
        format: FORMAT,
        flotilla: env!("CARGO_PKG_VERSION").to_string(),
        nats_server: client.server_info().version,
        taken_at,
        duration_ms: started.elapsed().as_millis() as u64,
        streams: records,
        skipped: plan.skipped,
    };
    // Written aside then renamed: a manifest is there whole or not at all.
    let path = options.out.join(MANIFEST_FILE);
    let partial = options.out.join(format!("{MANIFEST_FILE}.partial"));
    write_private(&partial, &pretty(&manifest))?;
    std::fs::rename(&partial, &path).map_err(file_err(&path))?;
    Ok(manifest)
}

/// One stream's snapshot into `DIR/<stream>/`, its record (`last_seq_after` still to fill).
async fn take(
    client: &async_nats::Client,
    dir: &Path,
    planned: &Planned,
    last_seq_before: u64,
    check: bool,
) -> Result<StreamRecord, BackupError> {
    let stream_dir = dir.join(&planned.name);
    new_dir(&stream_dir)?;
    let data = stream_dir.join(DATA_FILE);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&data)
        .map_err(file_err(&data))?;
    let mut file = tokio::fs::File::from_std(file);
    let taken =
        snapshot::snapshot(client, &planned.name, &mut file, SnapshotOptions { check }).await?;
    file.sync_all().await.map_err(file_err(&data))?;
    let request = stream_dir.join(REQUEST_FILE);
    write_private(&request, &pretty(&taken.request))?;
    tracing::info!(
        stream = %planned.name,
        bytes = taken.bytes,
        messages = taken.state("messages"),
        "stream backed up"
    );
    Ok(StreamRecord {
        name: planned.name.clone(),
        kind: planned.kind,
        restore: planned.restore,
        bytes: taken.bytes,
        sha256: taken.sha256.clone(),
        messages: taken.state("messages"),
        first_seq: taken.state("first_seq"),
        last_seq: taken.state("last_seq"),
        last_seq_before,
        last_seq_after: 0,
    })
}

/// A stream's last sequence now.
async fn last_seq(js: &jetstream::Context, stream: &str) -> Result<u64, BackupError> {
    let found = js
        .get_stream(stream)
        .await
        .map_err(|source| BackupError::State {
            stream: stream.into(),
            source,
        })?;
    Ok(found.cached_info().state.last_sequence)
}

/// Creates `dir` (0700), or takes it when it exists and is empty.
fn new_dir(dir: &Path) -> Result<(), BackupError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_none()) {
        Ok(false) => Err(BackupError::NotEmpty(dir.into())),
        Ok(true) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(file_err(dir)),
        Err(e) => Err(file_err(dir)(e)),
    }
}

/// Writes a new file only its owner reads.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(file_err(path))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(file_err(path))
}

fn pretty(value: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// What `flotilla-hub backup` prints when done.
pub fn summary(dir: &Path, manifest: &Manifest) -> String {
    let bytes: u64 = manifest.streams.iter().map(|s| s.bytes).sum();
    let straddled: u64 = manifest
        .streams
        .iter()
        .map(|s| s.last_seq_after.saturating_sub(s.last_seq_before))
        .sum();
    let mut text = format!(
        "Backed up {} streams ({bytes} bytes) from nats-server {} into {} in {} ms.",
        manifest.streams.len(),
        manifest.nats_server,
        dir.display(),
        manifest.duration_ms
    );
    if straddled > 0 {
        text += &format!(
            "\n{straddled} writes happened while the streams' snapshots were taken (each stream \
             is a point in time; restored hubs reconcile the rest)."
        );
    }
    for skipped in &manifest.skipped {
        text += &format!("\nLeft out {}: {}", skipped.name, skipped.why);
    }
    text
}

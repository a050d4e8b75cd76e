//! The store's format marker (bucket `hubmeta`, key `format`, [`StoreFormat`]): which record
//! shapes the store holds and the oldest hub that can run on it. The first hub on an empty
//! store writes it; a hub whose migration changes record shapes raises [`FORMAT`] and
//! [`MIN_HUB`] in the same commit as its code, and writes the raised marker at start. A hub
//! older than the marker's `min_hub` refuses to start, so a hub rolled back past a migration
//! (or started on a store restored from a newer fleet) says so instead of misreading records.
//! Records a hub cannot decode are quarantined, not deleted, so even a wrong marker degrades
//! safely.
//!
//! [`judge`] is pure; [`check`] reads and writes the marker.

use crate::store::ride::{Call, ride};
use crate::store::{Bucket, StoreError};
use flotilla_api::v1::{RecoveryWindow, StoreFormat};
use flotilla_api::version::Version;
use prost::Message;

/// The marker's key in `hubmeta`.
pub const FORMAT_KEY: &str = "format";
/// This build's store format.
pub const FORMAT: u32 = 1;
/// The oldest hub that reads and writes [`FORMAT`].
pub const MIN_HUB: &str = "0.1.0";

/// Why a hub may not run on this store.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The store was written for newer hubs.
    #[error(
        "the store is in format {format}, written by flotilla-hub {written_by}, and needs a hub \
         >= {min_hub}; this hub is {me}: upgrade this hub (docs/operations.md#versions), or run \
         it on a store restored from a backup its own version took"
    )]
    TooOld {
        /// The stored format.
        format: u32,
        /// Who wrote the marker.
        written_by: String,
        /// The oldest hub it allows.
        min_hub: String,
        /// This hub.
        me: String,
    },
    /// The marker is there but unreadable: nobody can say which hubs may run on the store.
    #[error(
        "hubmeta/format does not read as a store format marker ({reason}): inspect it with \
         `flotilla-hub doctor`; this hub does not start on a store it cannot place"
    )]
    Unreadable {
        /// What was wrong.
        reason: String,
    },
    /// Reading or writing the marker failed.
    #[error("the store format marker: {0}")]
    Store(#[from] StoreError),
}

/// What a hub does about the stored marker (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run; the marker is right as it is.
    Run,
    /// Run, after writing this marker (none yet, or an older format this hub migrates from).
    Write(StoreFormat),
}

/// This build's marker.
pub fn ours(me: &Version) -> StoreFormat {
    StoreFormat {
        format: FORMAT,
        min_hub: MIN_HUB.into(),
        written_by: me.to_string(),
    }
}

/// Whether hub `me` may run on a store marked `stored` (`None`: no marker yet).
pub fn judge(stored: Option<&StoreFormat>, me: &Version) -> Result<Verdict, FormatError> {
    let Some(stored) = stored else {
        return Ok(Verdict::Write(ours(me)));
    };
    let min = Version::parse(&stored.min_hub).map_err(|e| FormatError::Unreadable {
        reason: format!("min_hub: {e}"),
    })?;
    if (me.major, me.minor, me.patch) < (min.major, min.minor, min.patch) || stored.format > FORMAT
    {
        return Err(FormatError::TooOld {
            format: stored.format,
            written_by: stored.written_by.chars().take(64).collect(),
            min_hub: stored.min_hub.clone(),
            me: me.to_string(),
        });
    }
    if stored.format < FORMAT {
        return Ok(Verdict::Write(ours(me)));
    }
    Ok(Verdict::Run)
}

/// Reads the marker, refuses a store this hub is too old for, and writes the marker when
/// [`judge`] says so (a create on an empty store: two hubs starting at once write the same).
///
/// Every read and write rides JetStream elections ([`ride`]): hubs started together on a
/// clustered JetStream meet the `hubmeta` stream's first leader election here, and a timeout
/// then is a wait, not a reason to exit.
pub async fn check(meta: &Bucket<RecoveryWindow>, me: &Version) -> Result<(), FormatError> {
    let stored = read(meta).await?;
    let Verdict::Write(marker) = judge(stored.as_ref().map(|(f, _)| f), me)? else {
        return Ok(());
    };
    let expected = stored.as_ref().map_or(0, |(_, rev)| *rev);
    let bytes = marker.encode_to_vec();
    let what = Call {
        op: "write",
        bucket: meta.name(),
        key: FORMAT_KEY,
    };
    let written = ride(what, || async {
        // Revision 0 is a create: the key must not exist.
        match meta
            .kv()
            .update(FORMAT_KEY, bytes.clone().into(), expected)
            .await
        {
            Ok(_) => Ok(Ok(())),
            Err(e) => match flotilla_bus::election::explains(&e) {
                Some(why) => Err(StoreError::Write {
                    bucket: meta.name().into(),
                    key: FORMAT_KEY.into(),
                    message: e.to_string(),
                    conflict: false,
                    election: Some(why),
                }),
                // Not an election: another hub wrote first (or the store refused outright).
                None => Ok(Err(e.to_string())),
            },
        }
    })
    .await?;
    match written {
        Ok(()) => {
            tracing::info!(
                format = FORMAT,
                min_hub = MIN_HUB,
                "store format marker written"
            );
            Ok(())
        }
        Err(e) => {
            // Another hub wrote it first (or a write whose answer was lost landed): judge
            // what is there now.
            tracing::debug!(error = %e, "the store format marker changed under this hub");
            check_written(meta, me, e).await
        }
    }
}

/// The stored marker and its revision (`None`: no marker), riding elections.
async fn read(meta: &Bucket<RecoveryWindow>) -> Result<Option<(StoreFormat, u64)>, FormatError> {
    let what = Call {
        op: "read",
        bucket: meta.name(),
        key: FORMAT_KEY,
    };
    let entry = ride(what, || async {
        meta.kv()
            .entry(FORMAT_KEY)
            .await
            .map_err(|e| StoreError::Read {
                bucket: meta.name().into(),
                key: FORMAT_KEY.into(),
                message: e.to_string(),
                election: flotilla_bus::election::explains(&e),
            })
    })
    .await?;
    match entry {
        Some(e) if e.operation == async_nats::jetstream::kv::Operation::Put => {
            let f = StoreFormat::decode(e.value.as_ref()).map_err(|e| FormatError::Unreadable {
                reason: e.to_string(),
            })?;
            Ok(Some((f, e.revision)))
        }
        _ => Ok(None),
    }
}

/// After a lost race to write the marker: the marker now stored must allow this hub. A
/// marker still missing (the store refused the write for another reason) is an error: the
/// hub does not run on a store it could not mark.
async fn check_written(
    meta: &Bucket<RecoveryWindow>,
    me: &Version,
    refused: String,
) -> Result<(), FormatError> {
    let stored = read(meta).await?;
    match judge(stored.as_ref().map(|(f, _)| f), me)? {
        Verdict::Run => Ok(()),
        // An older marker another hub (of an older build) left: the next start raises it.
        Verdict::Write(_) if stored.is_some() => Ok(()),
        Verdict::Write(_) => Err(FormatError::Store(StoreError::Write {
            bucket: meta.name().into(),
            key: FORMAT_KEY.into(),
            message: format!("refused and no marker stored since: {refused}"),
            conflict: false,
            election: None,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn marker(format: u32, min_hub: &str, by: &str) -> StoreFormat {
        StoreFormat {
            format,
            min_hub: min_hub.into(),
            written_by: by.into(),
        }
    }

    #[test]
    fn an_empty_store_gets_this_builds_marker_and_a_store_of_this_format_runs() {
        let me = v("0.2.0");
        assert_eq!(judge(None, &me).unwrap(), Verdict::Write(ours(&me)));
        let same = marker(FORMAT, MIN_HUB, "0.1.3");
        assert_eq!(judge(Some(&same), &me).unwrap(), Verdict::Run);
        // A pre-release of the minimum still runs: suffixes do not move a version's line.
        let min = v(MIN_HUB);
        let dev = v(&format!("{}.{}.{}-dev", min.major, min.minor, min.patch));
        assert_eq!(judge(Some(&same), &dev).unwrap(), Verdict::Run);
    }

    #[test]
    fn a_hub_older_than_the_stores_min_hub_or_format_is_refused_saying_what_to_do() {
        let newer = marker(FORMAT + 1, "0.3.0", "0.4.0");
        let err = judge(Some(&newer), &v("0.2.5")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the store is in format {}, written by flotilla-hub 0.4.0, and needs a hub >= \
                 0.3.0; this hub is 0.2.5: upgrade this hub (docs/operations.md#versions), or \
                 run it on a store restored from a backup its own version took",
                FORMAT + 1
            )
        );
        // A newer format this build does not know is refused even if min_hub allows it.
        assert!(judge(Some(&marker(FORMAT + 1, "0.0.1", "9.0.0")), &v("0.2.0")).is_err());
        // An older format is raised to this build's.
        let me = v("0.2.0");
        assert_eq!(
            judge(Some(&marker(0, "0.0.1", "0.0.9")), &me).unwrap(),
            Verdict::Write(ours(&me))
        );
    }

    #[test]
    fn a_marker_reads_as_an_empty_recovery_window_and_a_bad_min_hub_is_refused() {
        let bytes = marker(FORMAT, MIN_HUB, "0.1.0").encode_to_vec();
        assert_eq!(
            RecoveryWindow::decode(bytes.as_slice()).unwrap(),
            RecoveryWindow::default(),
            "hubmeta is read as RecoveryWindow by the doctor and the loader"
        );
        let err = judge(Some(&marker(FORMAT, "soon", "x")), &v("0.1.0")).unwrap_err();
        assert!(err.to_string().contains("min_hub"), "{err}");
    }
}

//! Which streams of the account a backup takes and how each is restored (pure).
//!
//! The plan starts from the account's stream names (`$JS.API.STREAM.NAMES`), not from a list
//! written here, so a bucket added later is backed up without a change: every KV bucket's
//! stream (`KV_<bucket>`) is Flotilla's — the hub's account holds nothing else — except the
//! buckets the caller says running hubs rebuild; the status stream only when asked for (agents
//! republish every status when they reconnect); anything else is listed as skipped. The order
//! is the restore order: the buckets restored then purged first (the hub's leases: a half-done
//! restore must not leave old leases behind), then the other buckets by name, the status
//! stream last.

use crate::jetstream::STATUS_STREAM;
use serde::{Deserialize, Serialize};

/// What kind of stream a planned one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A KV bucket's stream (`KV_<bucket>`, subjects `$KV.<bucket>.>`).
    Bucket,
    /// The status stream ([`STATUS_STREAM`]).
    Stream,
}

/// What restore does with a stream after putting it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnRestore {
    /// Nothing: the records and their revisions are as they were.
    AsIs,
    /// Every message is purged, the sequence numbers kept: the hub's leases, so that every
    /// lease epoch taken after the restore is above every epoch stamped in the restored
    /// records, and no unit is held by a hub of the past.
    Purge,
}

/// How to plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Take the status stream too.
    pub with_status: bool,
    /// Buckets (names, not streams) left out because running hubs rebuild them (heartbeats).
    pub rebuilt: &'a [&'a str],
    /// Buckets restored and then purged.
    pub purged: &'a [&'a str],
}

/// One stream the backup takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The stream's name.
    pub name: String,
    /// Bucket or stream.
    pub kind: Kind,
    /// What restore does after putting it back.
    pub restore: OnRestore,
}

/// One stream of the account the backup leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The stream's name.
    pub name: String,
    /// Why (written to `manifest.json`).
    pub why: String,
}

/// The streams a backup takes, in restore order, and those it leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Taken, in restore order.
    pub streams: Vec<Planned>,
    /// Left out, by name.
    pub skipped: Vec<Skipped>,
}

/// The bucket a stream name is the KV stream of (`KV_clusters` → `clusters`), when its name
/// is one (a bucket name is letters, digits, `-` and `_`).
pub fn bucket_of(stream: &str) -> Option<&str> {
    stream.strip_prefix("KV_").filter(|bucket| {
        !bucket.is_empty()
            && bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// Whether a stream name is one Flotilla keeps (a bucket's, or the status stream), and which.
pub fn kind_of(stream: &str) -> Option<Kind> {
    if stream == STATUS_STREAM {
        Some(Kind::Stream)
    } else {
        bucket_of(stream).map(|_| Kind::Bucket)
    }
}

/// The backup's plan over the account's stream `names`.
pub fn plan(names: &[String], options: &Options<'_>) -> Plan {
    let mut out = Plan::default();
    let mut names: Vec<&String> = names.iter().collect();
    names.sort();
    names.dedup();
    let skip = |name: &str, why: &str| Skipped {
        name: name.to_string(),
        why: why.to_string(),
    };
    for name in names {
        let planned = |kind, restore| Planned {
            name: name.clone(),
            kind,
            restore,
        };
        match (kind_of(name), bucket_of(name)) {
            (Some(Kind::Bucket), Some(bucket)) if options.rebuilt.contains(&bucket) => out
                .skipped
                .push(skip(name, "heartbeats: rebuilt by running hubs")),
            (Some(Kind::Bucket), Some(bucket)) if options.purged.contains(&bucket) => {
                out.streams.push(planned(Kind::Bucket, OnRestore::Purge))
            }
            (Some(Kind::Bucket), _) => out.streams.push(planned(Kind::Bucket, OnRestore::AsIs)),
            (Some(Kind::Stream), _) if options.with_status => {
                out.streams.push(planned(Kind::Stream, OnRestore::AsIs))
            }
            (Some(Kind::Stream), _) => out.skipped.push(skip(
                name,
                "statuses: every agent republishes them when it reconnects (--with-status takes them)",
            )),
            (None, _) => out.skipped.push(skip(name, "not Flotilla's")),
        }
    }
    out.streams
        .sort_by_key(|p| (p.restore != OnRestore::Purge, p.kind == Kind::Stream));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTIONS: Options<'static> = Options {
        with_status: false,
        rebuilt: &["hubmembers"],
        purged: &["hubleases"],
    };

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn taken(plan: &Plan) -> Vec<(&str, OnRestore)> {
        plan.streams
            .iter()
            .map(|p| (p.name.as_str(), p.restore))
            .collect()
    }

    #[test]
    fn leases_come_first_and_are_purged_members_are_left_to_the_hubs() {
        let plan = plan(
            &names(&[
                "KV_works",
                "KV_hubmembers",
                "KV_clusters",
                "KV_hubleases",
                "FLOTILLA_STATUS",
                "KV_revocations",
            ]),
            &OPTIONS,
        );
        assert_eq!(
            taken(&plan),
            [
                ("KV_hubleases", OnRestore::Purge),
                ("KV_clusters", OnRestore::AsIs),
                ("KV_revocations", OnRestore::AsIs),
                ("KV_works", OnRestore::AsIs),
            ]
        );
        let skipped: Vec<&str> = plan.skipped.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(skipped, ["FLOTILLA_STATUS", "KV_hubmembers"]);
        assert!(plan.skipped[0].why.contains("--with-status"));
    }

    #[test]
    fn the_status_stream_is_taken_last_when_asked_for() {
        let plan = plan(
            &names(&["FLOTILLA_STATUS", "KV_works", "KV_hubleases"]),
            &Options {
                with_status: true,
                ..OPTIONS
            },
        );
        assert_eq!(
            taken(&plan),
            [
                ("KV_hubleases", OnRestore::Purge),
                ("KV_works", OnRestore::AsIs),
                ("FLOTILLA_STATUS", OnRestore::AsIs),
            ]
        );
        assert_eq!(plan.streams[2].kind, Kind::Stream);
    }

    #[test]
    fn a_bucket_added_later_is_taken_and_foreign_streams_are_skipped() {
        let plan = plan(
            &names(&[
                "KV_orphans",
                "ORDERS",
                "KV_",
                "KV_a.b",
                "KV_works",
                "KV_works",
            ]),
            &OPTIONS,
        );
        assert_eq!(
            taken(&plan),
            [
                ("KV_orphans", OnRestore::AsIs),
                ("KV_works", OnRestore::AsIs)
            ]
        );
        let skipped: Vec<(&str, &str)> = plan
            .skipped
            .iter()
            .map(|s| (s.name.as_str(), s.why.as_str()))
            .collect();
        assert_eq!(
            skipped,
            [
                ("KV_", "not Flotilla's"),
                ("KV_a.b", "not Flotilla's"),
                ("ORDERS", "not Flotilla's"),
            ]
        );
    }

    #[test]
    fn names_are_told_apart() {
        assert_eq!(bucket_of("KV_hub-leases_2"), Some("hub-leases_2"));
        assert_eq!(bucket_of("KV_x/y"), None);
        assert_eq!(kind_of(STATUS_STREAM), Some(Kind::Stream));
        assert_eq!(kind_of("FLOTILLA_STATUS2"), None);
    }
}

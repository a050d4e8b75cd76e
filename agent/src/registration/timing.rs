//! What a spec resync asks and when (pure): the first request's shape, the waits after an
//! unanswered or a busy answer, and the jitter of periodic timers.

use flotilla_api::v1::SpecResyncRequest;
use rand::Rng;
use std::time::Duration;

/// A resync sends the full version map in its first request when it has at most this many
/// entries (one round trip; a few works' map is smaller than two), else the digest first.
pub(super) const FULL_MAP_AT_MOST: usize = 16;
pub(super) fn jitter(d: Duration, low: f64) -> Duration {
    d.mul_f64(rand::rng().random_range(low..=1.0))
}

/// The wait before asking again after `failures` spec resyncs in a row went unanswered (before
/// jitter): 5 s, doubling, at most 30 s. A hub slow to answer a whole fleet reconnecting at
/// once then sees fewer repeats each round instead of every agent again every 5 s.
pub(super) fn resync_wait(failures: u32) -> Duration {
    Duration::from_secs(5)
        .saturating_mul(1u32 << failures.saturating_sub(1).min(4))
        .min(Duration::from_secs(30))
}

/// The first request of a resync of `versions` (and the works' `uids`, which go with the
/// map): the whole map when it has at most [`FULL_MAP_AT_MOST`] entries, else only its digest.
pub(super) fn first_resync_request(
    cluster: &str,
    versions: &std::collections::HashMap<String, i64>,
    uids: &std::collections::HashMap<String, String>,
) -> SpecResyncRequest {
    let small = versions.len() <= FULL_MAP_AT_MOST;
    SpecResyncRequest {
        cluster_name: cluster.to_string(),
        versions: if small {
            versions.clone()
        } else {
            Default::default()
        },
        uids: if small {
            uids.clone()
        } else {
            Default::default()
        },
        digest: if small {
            String::new()
        } else {
            flotilla_bus::works::versions_digest(
                versions
                    .iter()
                    .map(|(id, generation)| (id.as_str(), *generation)),
            )
        },
        takes_specs: true,
        takes_busy: true,
    }
}

/// How long to wait after a busy answer: the hub's `retry_after_ms`, within [0.1 s, 10 min]
/// (a hub that names no time, or an absurd one, does not stop the agent asking).
pub(crate) fn busy_wait(retry_after_ms: u32) -> Duration {
    Duration::from_millis(u64::from(retry_after_ms))
        .clamp(Duration::from_millis(100), Duration::from_secs(600))
}

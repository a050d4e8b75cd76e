//! Records that do not decode (pure state, process-wide: a process runs one hub). A value in a
//! bucket that is not what the bucket holds — left by a downgrade, a bug or a restored backup —
//! must never stop the hub: loads skip it, the key is noted here once (logged with its bucket,
//! key and revision, counted in `flotilla_hub_store_quarantined`), and it is listed on
//! `/debug/store` and by `flotilla-hub doctor` until a good value replaces it or it is removed.
//!
//! Skipped is not absent: a single read of the key still fails (`StoreError::Corrupt`), and
//! whoever would act on the key's absence — a resync that would have the agent delete a work's
//! resources, a sweep of a parent's children — asks [`holds`] / [`under`] first and leaves the
//! key's dependants alone.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

/// Keys noted at most (beyond: counted, not listed).
pub const MAX_NOTED: usize = 10_000;

/// One record that does not decode.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Record {
    /// The bucket.
    pub bucket: String,
    /// The key.
    pub key: String,
    /// The revision that does not decode.
    pub revision: u64,
    /// Its size in bytes.
    pub bytes: usize,
    /// The decoder's error.
    pub error: String,
}

#[derive(Default)]
struct State {
    records: BTreeMap<(String, String), Record>,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(Mutex::default);

/// The quarantine's metrics.
#[derive(Debug, Default, Clone)]
pub struct QuarantineMetrics {
    /// Keys quarantined now.
    pub quarantined: Gauge,
    /// Records found not to decode, over the process.
    pub found: Counter,
}

/// The process's [`QuarantineMetrics`].
pub static METRICS: LazyLock<QuarantineMetrics> = LazyLock::new(QuarantineMetrics::default);

impl QuarantineMetrics {
    /// Registers them (under the hub's `store` prefix).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "quarantined",
            "Stored records that do not decode, skipped by this hub (flotilla-hub doctor lists them)",
            self.quarantined.clone(),
        );
        registry.register(
            "quarantine_found",
            "Stored records found not to decode (each key and revision once)",
            self.found.clone(),
        );
    }
}

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Notes that `bucket/key` at `revision` does not decode; logs it the first time.
pub fn note(bucket: &str, key: &str, revision: u64, bytes: usize, error: &str) {
    let mut s = state();
    let id = (bucket.to_string(), key.to_string());
    if s.records.get(&id).is_some_and(|r| r.revision == revision) {
        return;
    }
    tracing::warn!(
        bucket,
        key,
        revision,
        bytes,
        error,
        "a stored record does not decode: skipped (quarantined) until it is replaced or \
         removed — `flotilla-hub doctor` lists such records"
    );
    METRICS.found.inc();
    if s.records.len() >= MAX_NOTED && !s.records.contains_key(&id) {
        return;
    }
    s.records.insert(
        id,
        Record {
            bucket: bucket.to_string(),
            key: key.to_string(),
            revision,
            bytes,
            error: error.to_string(),
        },
    );
    METRICS
        .quarantined
        .set(i64::try_from(s.records.len()).unwrap_or(i64::MAX));
}

/// `bucket/key` decoded, was written or removed: no longer quarantined.
pub fn clear(bucket: &str, key: &str) {
    let mut s = state();
    if s.records.is_empty() {
        return;
    }
    if s.records
        .remove(&(bucket.to_string(), key.to_string()))
        .is_some()
    {
        tracing::info!(bucket, key, "a quarantined record was replaced or removed");
        METRICS
            .quarantined
            .set(i64::try_from(s.records.len()).unwrap_or(i64::MAX));
    }
}

/// Whether `bucket/key` is quarantined.
pub fn holds(bucket: &str, key: &str) -> bool {
    let s = state();
    !s.records.is_empty()
        && s.records
            .contains_key(&(bucket.to_string(), key.to_string()))
}

/// The quarantined keys of `bucket` under `<prefix>.`, without the prefix (one cluster's
/// works: their names).
pub fn under(bucket: &str, prefix: &str) -> Vec<String> {
    let s = state();
    if s.records.is_empty() {
        return Vec::new();
    }
    let dotted = format!("{prefix}.");
    s.records
        .keys()
        .filter(|(b, _)| b == bucket)
        .filter_map(|(_, k)| k.strip_prefix(&dotted).map(str::to_string))
        .collect()
}

/// Every quarantined record.
pub fn list() -> Vec<Record> {
    state().records.values().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_noted_once_listed_under_its_prefix_and_cleared() {
        // Buckets of this test's own: the state is process-wide.
        note("q-works", "edge-1.web", 7, 3, "invalid wire type");
        note("q-works", "edge-1.web", 7, 3, "invalid wire type");
        note("q-works", "edge-2.db", 9, 1, "invalid wire type");
        assert!(holds("q-works", "edge-1.web"));
        assert_eq!(under("q-works", "edge-1"), vec!["web".to_string()]);
        assert!(
            under("q-works", "edge").is_empty(),
            "a prefix is a whole key part"
        );
        let mine: Vec<_> = list()
            .into_iter()
            .filter(|r| r.bucket == "q-works")
            .collect();
        assert_eq!(mine.len(), 2);
        assert_eq!(mine[0].revision, 7);
        clear("q-works", "edge-1.web");
        assert!(!holds("q-works", "edge-1.web"));
        assert!(holds("q-works", "edge-2.db"));
        clear("q-works", "edge-2.db");
    }
}

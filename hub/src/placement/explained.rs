//! The scheduler's explanation of a placement (`GetPlacementDebug`, the dashboard's placement
//! page), kept per placement view and fleet snapshot: the page reloads itself on each change of
//! its placement and any namespace viewer may open it, so without a cache every view ran a full
//! `explain` over the candidates (issue 48 review r4 §7). An explanation is reused while the
//! placement's published view is the same `Arc`, the snapshot's version the same, and for at
//! most [`FRESH`] (the scheduler reads the clock: a toleration's seconds run out). Misses are
//! computed one at a time, so a burst of viewers costs one explanation, not one each.

use super::PlacementView;
use flotilla_api::v1::PlacementDebug;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long an explanation is reused at most.
pub const FRESH: Duration = Duration::from_secs(30);

/// Explanations kept at most (the oldest goes first).
pub const CAPACITY: usize = 1024;

/// One kept explanation.
struct Entry {
    /// The view it explains (weak: a replaced view is not kept alive, and its allocation is
    /// not reused while this points at it, so a pointer match is the same view).
    view: Weak<PlacementView>,
    /// The snapshot version it was computed against.
    version: u64,
    /// When it was computed.
    at: Instant,
    /// The explanation.
    debug: Arc<PlacementDebug>,
}

impl Entry {
    fn answers(&self, view: &Arc<PlacementView>, version: u64, now: Instant) -> bool {
        std::ptr::eq(self.view.as_ptr(), Arc::as_ptr(view))
            && self.version == version
            && now.saturating_duration_since(self.at) < FRESH
    }
}

/// Explanations by placement key (`<namespace>/<name>`), bounded.
#[derive(Default)]
pub struct Explained {
    entries: Mutex<HashMap<String, Entry>>,
    /// Held while a missing explanation is computed.
    computing: tokio::sync::Mutex<()>,
}

impl Explained {
    /// The explanation of `view` against snapshot `version`, if one is kept and fresh.
    pub fn get(
        &self,
        key: &str,
        view: &Arc<PlacementView>,
        version: u64,
        now: Instant,
    ) -> Option<Arc<PlacementDebug>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let e = entries.get(key)?;
        e.answers(view, version, now).then(|| e.debug.clone())
    }

    /// Keeps `debug` as the explanation of `view` against snapshot `version`. When full, the
    /// stale entries go, then the oldest.
    pub fn put(
        &self,
        key: &str,
        view: &Arc<PlacementView>,
        version: u64,
        now: Instant,
        debug: Arc<PlacementDebug>,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CAPACITY && !entries.contains_key(key) {
            entries.retain(|_, e| {
                e.view.strong_count() > 0 && now.saturating_duration_since(e.at) < FRESH
            });
            if entries.len() >= CAPACITY
                && let Some(oldest) = (entries.iter())
                    .min_by_key(|(_, e)| e.at)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        let entry = Entry {
            view: Arc::downgrade(view),
            version,
            at: now,
            debug,
        };
        entries.insert(key.to_string(), entry);
    }

    /// Taken around computing a missing explanation: the next caller waits, then finds it.
    pub async fn one_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.computing.lock().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> Arc<PlacementView> {
        Arc::new(PlacementView {
            placement: Default::default(),
            decisions: Vec::new(),
        })
    }

    fn debug(error: &str) -> Arc<PlacementDebug> {
        Arc::new(PlacementDebug {
            error: error.to_string(),
            ..Default::default()
        })
    }

    #[test]
    fn an_explanation_is_reused_for_the_same_view_and_snapshot_while_fresh() {
        let cache = Explained::default();
        let (v, t) = (view(), Instant::now());
        cache.put("ns/p", &v, 7, t, debug("first"));
        let hit = cache.get("ns/p", &v, 7, t + Duration::from_secs(1));
        assert_eq!(hit.map(|d| d.error.clone()).as_deref(), Some("first"));
        // A new view of the placement, a new snapshot, or time up: computed again.
        assert!(cache.get("ns/p", &view(), 7, t).is_none(), "another view");
        assert!(cache.get("ns/p", &v, 8, t).is_none(), "another snapshot");
        assert!(cache.get("ns/p", &v, 7, t + FRESH).is_none(), "stale");
        assert!(cache.get("ns/q", &v, 7, t).is_none(), "another placement");
    }

    #[test]
    fn the_cache_is_bounded_dropping_stale_entries_then_the_oldest() {
        let cache = Explained::default();
        let t = Instant::now();
        let views: Vec<_> = (0..CAPACITY).map(|_| view()).collect();
        for (i, v) in views.iter().enumerate() {
            let at = t + Duration::from_millis(i as u64);
            cache.put(&format!("ns/p{i}"), v, 1, at, debug("x"));
        }
        let later = t + Duration::from_secs(1);
        let extra = view();
        cache.put("ns/extra", &extra, 1, later, debug("x"));
        let len = cache.entries.lock().unwrap().len();
        assert_eq!(len, CAPACITY, "the oldest made room");
        assert!(cache.get("ns/p0", &views[0], 1, later).is_none());
        assert!(cache.get("ns/p1", &views[1], 1, later).is_some());
        // Once they are stale, they all go at the next insertion past the bound.
        let much_later = t + FRESH + Duration::from_secs(5);
        cache.put("ns/new", &view(), 1, much_later, debug("x"));
        let len = cache.entries.lock().unwrap().len();
        assert_eq!(len, 1);
    }
}

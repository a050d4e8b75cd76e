//! Per-key back-off: when each key is tried next, the wait doubling between a least and a
//! longest one while attempts go unanswered, and starting over when something changes. Pure
//! over [`tokio::time::Instant`] (tested with paused time).
//!
//! One rule for every owner that retries per key — a spec re-sent until its cluster confirms,
//! a cluster poked while it has work left, a record removal retried until the store takes it.
//! Like [`crate::settle::Unsettled`], nothing here runs by itself: the owner's loop sleeps until
//! [`Backoff::deadline`], asks which keys are [`Backoff::due`], tries them, and says how each
//! went ([`Backoff::attempted`], [`Backoff::schedule`], [`Backoff::remove`]).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The wait after an attempt that waited `wait` went unanswered: doubled, up to `longest`. The
/// one doubling rule of every back-off here — [`Backoff`]'s keys and a cluster actor's work
/// re-sends ([`crate::cluster::resend`]), which keep their waits in their own entries.
pub fn next_wait(wait: Duration, longest: Duration) -> Duration {
    wait.saturating_mul(2).min(longest)
}

/// The back-off state of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// When the key is tried next.
    at: Instant,
    /// The wait after the next attempt, if it goes unanswered.
    wait: Duration,
}

/// The keys of one owner that are tried again, each at its own time.
#[derive(Debug, Clone)]
pub struct Backoff<K> {
    min: Duration,
    max: Duration,
    slots: BTreeMap<K, Slot>,
}

impl<K: Ord + Clone> Backoff<K> {
    /// An empty set whose waits start at `min` and double up to `max` (`max` below `min` is
    /// taken as `min`).
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max: max.max(min),
            slots: BTreeMap::new(),
        }
    }

    /// Tries `key` at `at`, or at the time already set for it if that is sooner; the wait
    /// starts over from the least (something changed: the key is worth trying promptly again).
    pub fn schedule(&mut self, key: K, at: Instant) {
        let min = self.min;
        let slot = self.slots.entry(key).or_insert(Slot { at, wait: min });
        slot.at = slot.at.min(at);
        slot.wait = min;
    }

    /// Tries `key` at `at` exactly, the wait starting over from the least: an attempt that
    /// succeeded, followed by a check of the owner's own period.
    pub fn succeeded(&mut self, key: K, at: Instant) {
        self.slots.insert(key, Slot { at, wait: self.min });
    }

    /// An attempt of `key` made `now` and not (yet) answered: it is tried again after the
    /// current wait, which then doubles up to the longest. A key not in the set waits the
    /// least. Returns when it is tried next.
    pub fn attempted(&mut self, key: K, now: Instant) -> Instant {
        let (min, max) = (self.min, self.max);
        let slot = self.slots.entry(key).or_insert(Slot { at: now, wait: min });
        slot.at = now + slot.wait;
        slot.wait = next_wait(slot.wait, max);
        slot.at
    }

    /// An attempt of `key` made `now` by an owner that lost count of the attempts before it (it
    /// restarted): there may have been many, so it is tried again after the longest wait.
    /// Returns when it is tried next.
    pub fn resumed(&mut self, key: K, now: Instant) -> Instant {
        let at = now + self.max;
        self.slots.insert(key, Slot { at, wait: self.max });
        at
    }

    /// Forgets `key` (done, or gone); whether it was in the set.
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.slots.remove(key).is_some()
    }

    /// The keys whose time has come at `now`, in key order.
    pub fn due(&self, now: Instant) -> Vec<K> {
        self.slots
            .iter()
            .filter(|(_, s)| s.at <= now)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// When `key` is tried next (`None`: it is not in the set).
    pub fn at<Q: Ord + ?Sized>(&self, key: &Q) -> Option<Instant>
    where
        K: Borrow<Q>,
    {
        self.slots.get(key).map(|s| s.at)
    }

    /// Whether `key` is in the set.
    pub fn contains<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.slots.contains_key(key)
    }

    /// When the soonest key is due (`None`: the set is empty).
    pub fn deadline(&self) -> Option<Instant> {
        self.slots.values().map(|s| s.at).min()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many keys wait.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Keeps only the keys `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.slots.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn unanswered_attempts_double_the_wait_up_to_the_longest() {
        let mut b = Backoff::new(2 * S, 60 * S);
        let t0 = Instant::now();
        b.schedule("c1", t0);
        assert_eq!(b.deadline(), Some(t0));
        let waits: Vec<Duration> = (0..8)
            .map(|_| {
                let now = Instant::now();
                let next = b.attempted("c1", now);
                next - now
            })
            .collect();
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, vec![2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_starts_the_wait_over_and_keeps_the_sooner_time() {
        let mut b = Backoff::new(2 * S, 60 * S);
        let t0 = Instant::now();
        for _ in 0..4 {
            b.attempted("c1", t0);
        }
        assert_eq!(b.at(&"c1"), Some(t0 + 16 * S));
        // Scheduled later than already set: the sooner time stays, the wait starts over.
        b.schedule("c1", t0 + 100 * S);
        assert_eq!(b.at(&"c1"), Some(t0 + 16 * S));
        assert_eq!(b.attempted("c1", t0 + 16 * S), t0 + 18 * S);
        // Scheduled sooner: taken.
        b.schedule("c1", t0 + 17 * S);
        assert_eq!(b.at(&"c1"), Some(t0 + 17 * S));
    }

    #[tokio::test(start_paused = true)]
    async fn due_lists_the_keys_whose_time_has_come_and_remove_forgets() {
        let mut b = Backoff::new(S, 10 * S);
        let t0 = Instant::now();
        b.schedule("a", t0);
        b.schedule("b", t0 + 5 * S);
        b.attempted("c", t0);
        assert_eq!(b.due(t0), vec!["a"]);
        assert_eq!(b.due(t0 + S), vec!["a", "c"]);
        assert_eq!(b.deadline(), Some(t0));
        assert!(b.remove(&"a"));
        assert!(!b.remove(&"a"));
        assert_eq!(b.deadline(), Some(t0 + S));
        assert_eq!(b.len(), 2);
        b.retain(|k| *k != "c");
        assert_eq!(b.due(t0 + 10 * S), vec!["b"]);
        assert!(b.remove(&"b"));
        assert!(b.is_empty());
        assert_eq!(b.deadline(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn success_sets_the_next_check_and_the_least_wait() {
        let mut b = Backoff::new(2 * S, 60 * S);
        let t0 = Instant::now();
        for _ in 0..6 {
            b.attempted("k", t0);
        }
        b.succeeded("k", t0 + 300 * S);
        assert_eq!(b.at(&"k"), Some(t0 + 300 * S));
        // The next unanswered attempt waits the least again.
        assert_eq!(b.attempted("k", t0 + 300 * S), t0 + 302 * S);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resumed_key_waits_the_longest() {
        let mut b = Backoff::new(30 * S, 480 * S);
        let t0 = Instant::now();
        assert_eq!(b.resumed("k", t0), t0 + 480 * S);
        assert_eq!(b.attempted("k", t0 + 480 * S), t0 + 960 * S);
        assert!(b.contains(&"k"));
    }

    #[test]
    fn a_longest_wait_below_the_least_is_the_least() {
        let mut b = Backoff::new(5 * S, S);
        let t0 = Instant::now();
        assert_eq!(b.attempted(1, t0), t0 + 5 * S);
        assert_eq!(b.attempted(1, t0), t0 + 5 * S);
    }
}

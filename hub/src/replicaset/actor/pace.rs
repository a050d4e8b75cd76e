//! How soon a change to one of the set's works is reconciled (pure): at least 100 ms out, and
//! at least twice the last reconcile's duration, so that a set whose works' statuses stream in
//! spends at most about a third of its time reconciling (session-16 review D1). A 50 ms
//! reconcile then runs at most about ten times a second, a 400 ms one about twice. Never later
//! than the resync would. A changed status reaches the views at once and the bucket at most
//! once a second ([`persist_at`]; session-16 review D4): during a rollout the counts move at
//! nearly every reconcile, and each write carries the whole set, its templates included.

use std::time::Duration;
use tokio::time::Instant;

/// The least time between two writes of a set's status to its bucket.
pub const PERSIST_EVERY: Duration = Duration::from_secs(1);

/// When a status that changed `now` is written to the bucket, the last write having been at
/// `last` (`None`: none yet): at once, or a second after the last.
pub fn persist_at(last: Option<Instant>, now: Instant) -> Instant {
    last.map_or(now, |at| now.max(at + PERSIST_EVERY))
}

/// The least wait after a work change.
pub const MIN_WAIT: Duration = Duration::from_millis(100);

/// How long after a work change to reconcile, the last reconcile having taken `last`; never
/// more than `resync`.
pub fn after_work_change(last: Duration, resync: Duration) -> Duration {
    MIN_WAIT.max(last.saturating_mul(2)).min(resync)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_changes_wait_twice_the_last_reconcile_and_at_least_100_ms() {
        let resync = Duration::from_secs(30);
        let ms = Duration::from_millis;
        assert_eq!(after_work_change(Duration::ZERO, resync), ms(100));
        assert_eq!(after_work_change(ms(50), resync), ms(100));
        assert_eq!(after_work_change(ms(51), resync), ms(102));
        assert_eq!(after_work_change(ms(400), resync), ms(800));
        assert_eq!(after_work_change(Duration::from_secs(20), resync), resync);
        assert_eq!(after_work_change(Duration::MAX, resync), resync);
    }

    #[test]
    fn a_status_is_written_at_once_then_at_most_once_a_second() {
        let now = Instant::now();
        assert_eq!(persist_at(None, now), now);
        assert_eq!(
            persist_at(Some(now - Duration::from_secs(5)), now),
            now,
            "long ago"
        );
        let just = now - Duration::from_millis(300);
        assert_eq!(persist_at(Some(just), now), just + PERSIST_EVERY);
    }
}

//! Settling writes whose outcome is unknown: one rule for every owner of stored state.
//!
//! A compare-and-set write that timed out, or whose connection dropped, may still land — the
//! publish can sit in the client's buffer and reach the stream after a reconnect. Until the key
//! is read again its owner does not know what the store holds. So the owner notes the key in
//! its [`Unsettled`] and, from its own loop, reads every noted key again each time
//! [`Unsettled::deadline`] passes, until the store answers; then it adopts what it read (the
//! write that landed, someone else's, or nothing). A lost race (a conflict) is settled at once
//! by the writer, which reads the key before answering.
//!
//! Nothing here runs by itself: the settling happens in the owner's loop, so stopping the owner
//! stops it, and a stopped hub leaves no task behind reading keys.

use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// How long after a failed write (or a failed re-read) its key is read again.
pub const RETRY: Duration = Duration::from_secs(1);

/// The keys of one owner whose last write had an unknown outcome.
#[derive(Debug)]
pub struct Unsettled<K> {
    keys: BTreeSet<K>,
    next: Option<Instant>,
}

impl<K: Ord> Default for Unsettled<K> {
    fn default() -> Self {
        Self {
            keys: BTreeSet::new(),
            next: None,
        }
    }
}

impl<K: Ord> Unsettled<K> {
    /// Notes `key` to be read again (a retry of a key already noted changes nothing).
    pub fn note(&mut self, key: K) {
        self.keys.insert(key);
        self.next.get_or_insert_with(|| Instant::now() + RETRY);
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `key` is waiting.
    pub fn contains(&self, key: &K) -> bool {
        self.keys.contains(key)
    }

    /// When the owner's loop reads the keys again (`None`: nothing waits).
    pub fn deadline(&self) -> Option<Instant> {
        self.next
    }

    /// Takes every waiting key to read it again now. A key whose read fails is noted again.
    pub fn take(&mut self) -> Vec<K> {
        self.next = None;
        std::mem::take(&mut self.keys).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keys_wait_one_retry_and_a_failed_read_waits_again() {
        let mut u = Unsettled::default();
        assert_eq!(u.deadline(), None);
        let start = Instant::now();
        u.note("a");
        tokio::time::advance(Duration::from_millis(300)).await;
        u.note("b");
        u.note("a");
        // The first note sets the time; later ones join it.
        assert_eq!(u.deadline(), Some(start + RETRY));
        assert!(u.contains(&"b"));
        assert_eq!(u.take(), vec!["a", "b"]);
        assert!(u.is_empty());
        assert_eq!(u.deadline(), None);
        u.note("b");
        assert_eq!(u.deadline(), Some(Instant::now() + RETRY));
    }
}

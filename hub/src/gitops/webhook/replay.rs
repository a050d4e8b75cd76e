//! What a verified delivery leaves behind, bounded (pure: the caller's clock): the deliveries
//! handled lately, so a replay — the same signed body again, or the same delivery id — fetches
//! and writes nothing; and when a GitRepo's status may record a webhook again, so a stream of
//! verified deliveries writes the store at most once a second per GitRepo.

use super::verify::{Headers, Provider, delivery_id};
use sha2::{Digest, Sha256};
use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Deliveries remembered at most (the oldest forgotten first).
pub const RECENT: usize = 1024;
/// A GitRepo's status records a webhook at most this often.
pub const STATUS_EVERY: Duration = Duration::from_secs(1);
/// …and the same commit again at most this often (its time refreshed, nothing else changes).
pub const SAME_COMMIT_EVERY: Duration = Duration::from_secs(60);

/// What one delivery is remembered by, for one GitRepo: a digest of its body (what is signed),
/// and one of its id when it has one. Per GitRepo: two GitRepos following one repository each
/// have their own hook, and the forge sends each the same body — the second is not a replay.
pub type Mark = [u8; 32];

/// The marks of a delivery from `provider` for the GitRepo `gitrepo` (its `namespace/name`).
pub fn marks(provider: Provider, headers: &Headers, body: &[u8], gitrepo: &str) -> Vec<Mark> {
    let digest = |kind: &str, bytes: &[u8]| -> Mark {
        let mut h = Sha256::new();
        h.update(kind.as_bytes());
        h.update([0]);
        h.update(provider.name().as_bytes());
        h.update([0]);
        h.update(gitrepo.as_bytes());
        h.update([0]);
        h.update(bytes);
        h.finalize().into()
    };
    let mut marks = vec![digest("body", body)];
    if let Some(id) = delivery_id(headers) {
        marks.push(digest("id", id.as_bytes()));
    }
    marks
}

/// The deliveries handled lately.
#[derive(Debug, Default)]
pub struct Recent {
    order: VecDeque<Mark>,
    seen: HashSet<Mark>,
}

impl Recent {
    /// Whether a delivery with `marks` is the first seen lately (then it is remembered);
    /// `false`: a replay, nothing remembered.
    pub fn first(&mut self, marks: &[Mark]) -> bool {
        if marks.iter().any(|m| self.seen.contains(m)) {
            return false;
        }
        for m in marks {
            if self.order.len() == RECENT
                && let Some(old) = self.order.pop_front()
            {
                self.seen.remove(&old);
            }
            self.order.push_back(*m);
            self.seen.insert(*m);
        }
        true
    }

    /// Forgets a delivery whose fetch could not be started (the sender's retry is welcome).
    pub fn forget(&mut self, marks: &[Mark]) {
        for m in marks {
            if self.seen.remove(m) {
                self.order.retain(|o| o != m);
            }
        }
    }

    /// Marks remembered now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// Whether a GitRepo's status records a webhook at `now`, its last recorded at `written`
/// (`None`: none by this task), for the commit it already records or another.
pub fn record(written: Option<Instant>, same_commit: bool, now: Instant) -> bool {
    let every = if same_commit {
        SAME_COMMIT_EVERY
    } else {
        STATUS_EVERY
    };
    written.is_none_or(|w| now.saturating_duration_since(w) >= every)
}

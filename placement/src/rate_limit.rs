//! `spec.scoreRateLimit`: which scores the PlacementDecisions record.
//!
//! OCM's API (cluster v1beta1, 2026) says: "Score changes that do not change the selected set of
//! clusters in the placement will not be reflected in decisions more often than the given
//! duration", with `status.lastScoreUpdateTime` recording the last write. OCM's controller does
//! not implement the field yet; Flotilla reads it as follows:
//!
//! - When the selected set changes, every decision records its fresh score and
//!   `lastScoreUpdateTime` becomes now: the pages are rewritten anyway.
//! - When the set is the same and some score moved, the fresh scores are recorded only if
//!   `lastScoreUpdateTime` is at least `scoreRateLimit` old (or unset); otherwise the recorded
//!   scores stay and the placement is scheduled again when the limit runs out, so the last
//!   change is never lost.
//! - When nothing moved, nothing is written and `lastScoreUpdateTime` stays.
//!
//! With `sortBy: Score` the order follows the recorded scores, so a held-back score change does
//! not reorder the decisions either.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The scores to record and the status time that goes with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    /// One score per selected cluster, in the order given.
    pub(crate) scores: Vec<i64>,
    /// The new `status.lastScoreUpdateTime`.
    pub(crate) last_update: Option<SystemTime>,
    /// When held-back scores may be written (schedule again then).
    pub(crate) requeue_at: Option<SystemTime>,
}

/// Decides the recorded scores of the `selected` clusters (name and fresh score each).
/// `same_set`: the selection equals the current decisions; `recorded`: the scores the current
/// decisions carry; `last_update`: their `lastScoreUpdateTime`.
pub(crate) fn record(
    selected: &[(&str, i64)],
    same_set: bool,
    recorded: Option<&HashMap<String, i64>>,
    last_update: Option<SystemTime>,
    limit: Duration,
    now: SystemTime,
) -> Recorded {
    let fresh = || selected.iter().map(|&(_, s)| s).collect::<Vec<_>>();
    let old = |name: &str| recorded.and_then(|r| r.get(name)).copied();
    let moved = selected.iter().any(|&(name, s)| old(name) != Some(s));
    if !moved && same_set {
        return Recorded {
            scores: fresh(),
            last_update,
            requeue_at: None,
        };
    }
    if same_set
        && let Some(last) = last_update
        && let Some(allowed) = last.checked_add(limit)
        && now < allowed
    {
        return Recorded {
            scores: selected
                .iter()
                .map(|&(name, s)| old(name).unwrap_or(s))
                .collect(),
            last_update,
            requeue_at: Some(allowed),
        };
    }
    Recorded {
        scores: fresh(),
        last_update: if selected.is_empty() && last_update.is_none() {
            None
        } else {
            Some(now)
        },
        requeue_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    fn scores(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
        pairs.iter().map(|&(n, s)| (n.to_owned(), s)).collect()
    }

    #[test]
    fn a_first_selection_records_fresh_scores_and_the_time() {
        let r = record(&[("a", 100), ("b", 50)], false, None, None, MINUTE, at(0));
        assert_eq!(r.scores, [100, 50]);
        assert_eq!(r.last_update, Some(at(0)));
        assert_eq!(r.requeue_at, None);
    }

    #[test]
    fn nothing_selected_and_nothing_recorded_sets_no_time() {
        let r = record(&[], true, None, None, MINUTE, at(0));
        assert_eq!(r.last_update, None);
    }

    #[test]
    fn unchanged_scores_keep_the_time() {
        let old = scores(&[("a", 100), ("b", 50)]);
        let r = record(
            &[("a", 100), ("b", 50)],
            true,
            Some(&old),
            Some(at(0)),
            MINUTE,
            at(500),
        );
        assert_eq!(r.scores, [100, 50]);
        assert_eq!(r.last_update, Some(at(0)));
        assert_eq!(r.requeue_at, None);
    }

    #[test]
    fn a_score_change_within_the_limit_is_held_back_until_the_limit_runs_out() {
        let old = scores(&[("a", 100), ("b", 50)]);
        let fresh = [("a", 100), ("b", 80)];
        let r = record(&fresh, true, Some(&old), Some(at(0)), MINUTE, at(30));
        assert_eq!(r.scores, [100, 50], "recorded scores stay");
        assert_eq!(r.last_update, Some(at(0)));
        assert_eq!(r.requeue_at, Some(at(60)));

        let r = record(&fresh, true, Some(&old), Some(at(0)), MINUTE, at(60));
        assert_eq!(r.scores, [100, 80], "written once the limit ran out");
        assert_eq!(r.last_update, Some(at(60)));
        assert_eq!(r.requeue_at, None);
    }

    #[test]
    fn a_changed_selection_records_fresh_scores_at_once() {
        let old = scores(&[("a", 100), ("b", 50)]);
        let r = record(
            &[("a", 90), ("c", 70)],
            false,
            Some(&old),
            Some(at(0)),
            MINUTE,
            at(1),
        );
        assert_eq!(r.scores, [90, 70]);
        assert_eq!(r.last_update, Some(at(1)));
        assert_eq!(r.requeue_at, None);
    }

    #[test]
    fn a_zero_limit_writes_every_change() {
        let old = scores(&[("a", 1)]);
        let r = record(
            &[("a", 2)],
            true,
            Some(&old),
            Some(at(5)),
            Duration::ZERO,
            at(5),
        );
        assert_eq!(r.scores, [2]);
        assert_eq!(r.last_update, Some(at(5)));
    }
}

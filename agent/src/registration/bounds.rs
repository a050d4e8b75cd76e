//! How long the agent waits for the hub (pure): request bounds that follow the answer times it
//! sees, and how the burst of work after a reconnect is spread.
//!
//! A fixed 5 s bound turns a hub that answers a reconnecting fleet in 8 s into one that never
//! answers: every request times out, is asked again, and adds to the queue it waited in. Here
//! the bound is three times the smoothed answer time, within [floor, [`MAX_BOUND`]]; a request
//! left unanswered counts as an answer at least as slow as the bound it had, so the next one
//! waits longer instead of asking again as soon.

use std::time::Duration;

/// The longest the agent waits for one answer, however slow the hub has been: a dead hub must
/// still be noticed within a minute (several hubs: the agent then tries another).
pub const MAX_BOUND: Duration = Duration::from_secs(60);

/// The longest spread of the work after a reconnect (the issue-45 plan: a spread adds to every
/// cluster's recovery, which should stay under two minutes at 100,000 clusters).
pub const MAX_RECONNECT_SPREAD: Duration = Duration::from_secs(10);

/// Weight of a new answer time in the smoothed one.
const WEIGHT: f64 = 0.5;

/// The smoothed answer time of the hub and the bound it gives the next request.
#[derive(Debug, Clone)]
pub struct AnswerTimes {
    floor: Duration,
    smoothed: Option<Duration>,
}

impl AnswerTimes {
    /// No answer seen yet: requests wait `floor` (the configured request timeout).
    pub fn new(floor: Duration) -> Self {
        Self {
            floor: floor.min(MAX_BOUND),
            smoothed: None,
        }
    }

    /// How long the next request waits for its answer: three times the smoothed answer time,
    /// at least the floor, at most [`MAX_BOUND`].
    pub fn bound(&self) -> Duration {
        self.smoothed
            .map_or(self.floor, |s| s.saturating_mul(3))
            .clamp(self.floor, MAX_BOUND)
    }

    /// The hub answered (anything, busy included) after `took`.
    pub fn answered(&mut self, took: Duration) {
        self.smoothed = Some(match self.smoothed {
            None => took,
            Some(s) => s.mul_f64(1.0 - WEIGHT) + took.mul_f64(WEIGHT),
        });
    }

    /// A request with bound `waited` went unanswered: the answer would have taken at least
    /// that long, so the smoothed time is raised to it (the next bound is three times it).
    pub fn unanswered(&mut self, waited: Duration) {
        self.smoothed = Some(self.smoothed.map_or(waited, |s| s.max(waited)));
    }
}

/// The longest spread of the work after a reconnect for an agent resyncing every
/// `resync_interval`: a tenth of it, at most [`MAX_RECONNECT_SPREAD`] (an agent that resyncs
/// every few seconds has no burst worth spreading).
pub fn reconnect_spread(resync_interval: Duration) -> Duration {
    (resync_interval / 10).min(MAX_RECONNECT_SPREAD)
}

/// A delay within `[0, spread]` for a uniform `fraction` in `[0, 1]`.
pub fn spread_delay(spread: Duration, fraction: f64) -> Duration {
    spread.mul_f64(fraction.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE: Duration = Duration::from_secs(5);

    #[test]
    fn a_quick_hub_keeps_the_configured_bound() {
        let mut times = AnswerTimes::new(FIVE);
        assert_eq!(times.bound(), FIVE);
        times.answered(Duration::from_millis(20));
        assert_eq!(times.bound(), FIVE);
    }

    #[test]
    fn the_bound_follows_slow_answers_up_to_a_minute() {
        let mut times = AnswerTimes::new(FIVE);
        times.answered(Duration::from_secs(8));
        assert_eq!(times.bound(), Duration::from_secs(24));
        times.answered(Duration::from_secs(40));
        assert_eq!(times.bound(), MAX_BOUND);
    }

    #[test]
    fn an_unanswered_request_lengthens_the_next_bound_within_the_cap() {
        let mut times = AnswerTimes::new(FIVE);
        times.unanswered(times.bound());
        assert_eq!(times.bound(), Duration::from_secs(15));
        times.unanswered(times.bound());
        assert_eq!(times.bound(), Duration::from_secs(45));
        times.unanswered(times.bound());
        assert_eq!(times.bound(), MAX_BOUND);
    }

    #[test]
    fn quick_answers_bring_the_bound_back_down() {
        let mut times = AnswerTimes::new(FIVE);
        times.unanswered(MAX_BOUND);
        let bounds: Vec<u64> = (0..6)
            .map(|_| {
                times.answered(Duration::from_millis(100));
                times.bound().as_secs()
            })
            .collect();
        assert_eq!(bounds, [60, 45, 22, 11, 5, 5]);
    }

    #[test]
    fn a_floor_above_the_cap_is_capped() {
        assert_eq!(
            AnswerTimes::new(Duration::from_secs(600)).bound(),
            MAX_BOUND
        );
    }

    #[test]
    fn the_reconnect_spread_is_a_tenth_of_the_resync_interval_at_most_ten_seconds() {
        assert_eq!(
            reconnect_spread(Duration::from_secs(300)),
            MAX_RECONNECT_SPREAD
        );
        assert_eq!(
            reconnect_spread(Duration::from_secs(2)),
            Duration::from_millis(200)
        );
        assert_eq!(spread_delay(FIVE, 0.5), Duration::from_millis(2_500));
        assert_eq!(spread_delay(FIVE, 7.0), FIVE);
        assert_eq!(spread_delay(FIVE, -1.0), Duration::ZERO);
    }
}

//! The period of an agent's periodic resyncs, as the hub asks it (pure).
//!
//! A periodic resync is a safety net: the hub re-sends a spec until its status confirms it and
//! an agent acknowledges what it receives, so what a resync finds is rare. Its cost is not: at
//! a fixed five minutes a fleet of 100,000 asks 333 resyncs a second of its hub, forever, and
//! through a long outage's recovery that background is what the hub spends most on (issue 45:
//! 8.5 resyncs per agent in a 48-minute storm, most of them periodic). The hub therefore keeps
//! the fleet's periodic resyncs under a budget per second and tells each agent the period that
//! gives, in every resync answer; the agent waits the longer of that and its own setting.

use std::time::Duration;

/// The fleet's periodic resyncs per second the hub asks for at most, by default.
pub const DEFAULT_PERIODIC_RESYNCS_PER_SECOND: u32 = 50;

/// The period that keeps `clusters` agents' periodic resyncs at `per_second` a second at most;
/// `None` without a budget (`0`). Whole seconds, rounded up; at least one.
pub fn period(clusters: usize, per_second: u32) -> Option<Duration> {
    if per_second == 0 {
        return None;
    }
    let seconds = (clusters as u64).div_ceil(u64::from(per_second)).max(1);
    Some(Duration::from_secs(seconds))
}

/// The period as the answer carries it (`resync_period_seconds`; 0 = none).
pub fn answer_seconds(clusters: usize, per_second: u32) -> u32 {
    period(clusters, per_second).map_or(0, |p| u32::try_from(p.as_secs()).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_spreads_the_fleet_over_the_budget() {
        assert_eq!(period(100_000, 50), Some(Duration::from_secs(2_000)));
        assert_eq!(period(10_000, 50), Some(Duration::from_secs(200)));
        assert_eq!(period(101, 50), Some(Duration::from_secs(3)));
    }

    #[test]
    fn a_small_fleet_still_gets_a_period_of_a_second_and_no_budget_none() {
        assert_eq!(period(0, 50), Some(Duration::from_secs(1)));
        assert_eq!(period(3, 50), Some(Duration::from_secs(1)));
        assert_eq!(period(100_000, 0), None);
        assert_eq!(answer_seconds(100_000, 0), 0);
        assert_eq!(answer_seconds(usize::MAX, 1), u32::MAX);
    }
}

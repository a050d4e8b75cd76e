//! Drift repair's timing, as pure rules: when someone else changes or deletes what a work
//! applied, the work applies again within [`DriftRules::debounce`] (a burst of events is one
//! repair). A resource that keeps being changed back — another controller or a person fighting
//! the work — is not fought at full speed: once [`DriftRules::fight_after`] repairs fell within
//! [`DriftRules::window`], repairs wait an exponential back-off (from
//! [`DriftRules::backoff_min`] to [`DriftRules::backoff_max`]) and the work reports the fight
//! in its `Contested` condition, until a whole window passes without a repair. The periodic
//! re-apply stays the backstop for everything no watch saw.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The work condition reporting a fight over its resources.
pub const CONTESTED: &str = "Contested";

/// Drift repair's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftRules {
    /// Time from the first change seen to the repair.
    pub debounce: Duration,
    /// Span over which repairs are counted.
    pub window: Duration,
    /// Repairs within the window that make it a fight.
    pub fight_after: usize,
    /// First wait between repairs in a fight.
    pub backoff_min: Duration,
    /// Longest wait between repairs in a fight.
    pub backoff_max: Duration,
}

impl Default for DriftRules {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(500),
            window: Duration::from_secs(60),
            fight_after: 3,
            backoff_min: Duration::from_secs(5),
            backoff_max: Duration::from_secs(300),
        }
    }
}

/// One work's drift repairs.
#[derive(Debug, Clone)]
pub struct Drift {
    rules: DriftRules,
    /// When repairs that wrote something ran, within the window.
    repairs: VecDeque<Instant>,
    /// The wait between repairs while fighting.
    backoff: Option<Duration>,
    /// When the next repair is due.
    due: Option<Instant>,
}

/// A fight the work reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fight {
    /// Repairs within the window.
    pub repairs: usize,
    /// The wait between repairs now.
    pub backoff: Duration,
}

impl Drift {
    /// No repair yet.
    pub fn new(rules: DriftRules) -> Self {
        Self {
            rules,
            repairs: VecDeque::new(),
            backoff: None,
            due: None,
        }
    }

    /// Someone changed a resource at `now`: the repair is due after the debounce, or once the
    /// back-off since the last repair has passed. A repair already due stays due.
    pub fn changed(&mut self, now: Instant) -> Instant {
        let mut at = now + self.rules.debounce;
        if let (Some(backoff), Some(last)) = (self.backoff, self.repairs.back()) {
            at = at.max(*last + backoff);
        }
        let due = self.due.map_or(at, |d| d.min(at));
        self.due = Some(due);
        due
    }

    /// When the next repair is due, if one is.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// A repair ran at `now` and wrote `writes` resources back. Returns whether the work's
    /// fight changed (started, grew its back-off or ended).
    pub fn repaired(&mut self, now: Instant, writes: usize) -> bool {
        self.due = None;
        let before = self.fight();
        if writes > 0 {
            self.repairs.push_back(now);
        }
        self.forget(now);
        if writes > 0 && self.repairs.len() >= self.rules.fight_after {
            self.backoff = Some(self.backoff.map_or(self.rules.backoff_min, |b| {
                (b * 2).min(self.rules.backoff_max)
            }));
        }
        before != self.fight()
    }

    /// Drops repairs older than the window; a quiet window ends a fight. Returns whether the
    /// fight ended.
    pub fn forget(&mut self, now: Instant) -> bool {
        while self
            .repairs
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > self.rules.window)
        {
            self.repairs.pop_front();
        }
        if self.repairs.is_empty() && self.backoff.is_some() {
            self.backoff = None;
            return true;
        }
        false
    }

    /// The fight going on, if any.
    pub fn fight(&self) -> Option<Fight> {
        self.backoff.map(|backoff| Fight {
            repairs: self.repairs.len(),
            backoff,
        })
    }

    /// The settings.
    pub fn rules(&self) -> &DriftRules {
        &self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> DriftRules {
        DriftRules {
            debounce: Duration::from_millis(500),
            window: Duration::from_secs(60),
            fight_after: 3,
            backoff_min: Duration::from_secs(5),
            backoff_max: Duration::from_secs(20),
        }
    }

    #[test]
    fn a_burst_of_changes_is_one_repair_after_the_debounce() {
        let t0 = Instant::now();
        let mut d = Drift::new(rules());
        assert_eq!(d.changed(t0), t0 + Duration::from_millis(500));
        assert_eq!(
            d.changed(t0 + Duration::from_millis(300)),
            t0 + Duration::from_millis(500)
        );
        assert!(!d.repaired(t0 + Duration::from_millis(500), 1));
        assert_eq!(d.due(), None);
        assert_eq!(d.fight(), None);
    }

    #[test]
    fn repeated_repairs_become_a_fight_that_backs_off_and_ends_after_a_quiet_window() {
        let t0 = Instant::now();
        let mut d = Drift::new(rules());
        let s = Duration::from_secs;
        assert!(!d.repaired(t0, 1));
        assert!(!d.repaired(t0 + s(1), 1));
        // The third repair within the window: a fight, 5 s between repairs.
        assert!(d.repaired(t0 + s(2), 1));
        assert_eq!(
            d.fight(),
            Some(Fight {
                repairs: 3,
                backoff: s(5)
            })
        );
        assert_eq!(d.changed(t0 + s(3)), t0 + s(7));
        assert!(d.repaired(t0 + s(7), 1));
        assert_eq!(d.fight().map(|f| f.backoff), Some(s(10)));
        assert!(d.repaired(t0 + s(17), 1));
        assert!(d.repaired(t0 + s(37), 1));
        assert_eq!(d.fight().map(|f| f.backoff), Some(s(20)));
        // Capped.
        d.repaired(t0 + s(57), 1);
        assert_eq!(d.fight().map(|f| f.backoff), Some(s(20)));
        // A pass that found nothing to write does not feed the fight, and a quiet window ends it.
        d.repaired(t0 + s(80), 0);
        assert!(d.fight().is_some());
        assert!(d.forget(t0 + s(118)));
        assert_eq!(d.fight(), None);
        assert_eq!(
            d.changed(t0 + s(120)),
            t0 + s(120) + Duration::from_millis(500)
        );
    }
}

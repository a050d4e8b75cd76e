//! Drift repair's timing, as pure rules: when someone else changes or deletes what a work
//! applied, the work applies again within [`DriftRules::debounce`] (a burst of events is one
//! repair). A resource that keeps being changed back — another controller or a person fighting
//! the work — is not fought at full speed: once [`DriftRules::fight_after`] repairs fell within
//! [`DriftRules::window`], repairs wait an exponential back-off (from
//! [`DriftRules::backoff_min`] to [`DriftRules::backoff_max`]) and the work reports the fight
//! in its `Contested` condition, until a whole window passes without a repair. The periodic
//! re-apply stays the backstop for everything no watch saw.
//!
//! Any repair that wrote something back — from a watch or found by the periodic pass — is
//! kept as [`Drift::last_repair`] for one window: the work reports it in its `Repaired`
//! condition (a GitRepo's cluster shows `Modified`, then `Ready` once the window passes).

use flotilla_api::work::ManifestId;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use flotilla_api::work::conditions::{CONTESTED, REPAIRED};

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
    /// The last repair that wrote something back, within the window.
    last: Option<Repair>,
}

/// A repair that wrote resources back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// When it ran.
    pub at: Instant,
    /// What it put back, in the order applied.
    pub resources: Vec<ManifestId>,
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
            last: None,
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

    /// A repair a watch asked for ran at `now` and wrote `written` back. Returns whether the
    /// work's fight changed (started, grew its back-off or ended).
    pub fn repaired(&mut self, now: Instant, written: &[ManifestId]) -> bool {
        self.due = None;
        let before = self.fight();
        let wrote = !written.is_empty();
        if wrote {
            self.repairs.push_back(now);
        }
        self.put_back(now, written);
        self.forget(now);
        if wrote && self.repairs.len() >= self.rules.fight_after {
            self.backoff = Some(self.backoff.map_or(self.rules.backoff_min, |b| {
                (b * 2).min(self.rules.backoff_max)
            }));
        }
        before != self.fight()
    }

    /// The periodic re-apply at `now` wrote `written` back: drift no watch saw. It is reported
    /// as a repair but does not feed a fight (it runs on its own schedule, not someone else's).
    pub fn put_back(&mut self, now: Instant, written: &[ManifestId]) {
        if !written.is_empty() {
            self.last = Some(Repair {
                at: now,
                resources: written.to_vec(),
            });
        }
    }

    /// The last repair that wrote something back, while within the window.
    pub fn last_repair(&self) -> Option<&Repair> {
        self.last.as_ref()
    }

    /// When the last repair leaves the window (and the work's `Repaired` condition goes).
    pub fn repair_ends(&self) -> Option<Instant> {
        self.last.as_ref().map(|r| r.at + self.rules.window)
    }

    /// Drops repairs older than the window; a quiet window ends a fight. Returns whether the
    /// fight ended.
    pub fn forget(&mut self, now: Instant) -> bool {
        if self
            .last
            .as_ref()
            .is_some_and(|r| now.saturating_duration_since(r.at) >= self.rules.window)
        {
            self.last = None;
        }
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
mod tests;

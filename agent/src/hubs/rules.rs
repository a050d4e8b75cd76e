//! Which hub the agent talks to (OCM's MultipleHubs), as pure rules over simulated instants.
//!
//! - The hubs are tried in the order listed, starting with the first (or the one a restarted
//!   agent was on).
//! - A hub is alive when it answers: a registration or a spec-resync answer. A JetStream
//!   acknowledgement is not enough: it proves only that NATS is up.
//! - When the current hub has not answered for the connection timeout (counted from the last
//!   answer, or from the switch to it), the agent switches to the next hub in the list that has
//!   not denied it. A shorter outage never switches.
//! - A hub that denies the agent (`hubAcceptsClient: false`) is left at once for the next hub
//!   that has not, and skipped from then on; when every other hub timed out as well, denied hubs
//!   are tried again (the admin may have accepted the cluster meanwhile), one timeout each.
//! - No preemption: a first hub that comes back does not pull the agent back (OCM does the same).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// OCM's default `hubConnectionTimeoutSeconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// OCM's minimum `hubConnectionTimeoutSeconds`.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(180);

/// What happened on the current hub's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The hub answered a registration or a resync.
    Alive,
    /// The hub denied the cluster (`hubAcceptsClient: false`).
    Denied,
    /// Time passed.
    Tick,
}

/// Why the agent leaves a hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No answer for the connection timeout.
    Unanswered,
    /// The hub denied the cluster.
    Denied,
}

/// What the agent does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Stay on the current hub; look again at `until` at the latest.
    Stay {
        /// When the current hub times out.
        until: Instant,
    },
    /// Switch to hub `to` (an index into the list).
    Switch {
        /// The next hub.
        to: usize,
        /// Why.
        reason: Reason,
    },
}

/// The selection: the current hub and what is known of the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// How many hubs are listed.
    pub hubs: usize,
    /// The current hub.
    pub current: usize,
    /// When the agent switched to it (or started on it).
    pub since: Instant,
    /// Its last answer since then.
    pub last_alive: Option<Instant>,
    /// Hubs that denied the cluster.
    pub denied: BTreeSet<usize>,
    /// Hubs that timed out since any hub last answered.
    pub failed: BTreeSet<usize>,
    /// The connection timeout.
    pub timeout: Duration,
}

impl Selection {
    /// Starting on hub `current` of `hubs` at `now`, with hubs known to have denied the cluster.
    pub fn new(
        hubs: usize,
        current: usize,
        denied: BTreeSet<usize>,
        timeout: Duration,
        now: Instant,
    ) -> Self {
        Self {
            hubs,
            current: current.min(hubs.saturating_sub(1)),
            since: now,
            last_alive: None,
            denied,
            failed: BTreeSet::new(),
            timeout,
        }
    }

    /// The session with the current hub started at `now`: its timeout counts from there.
    pub fn started(&mut self, now: Instant) {
        self.since = now;
        self.last_alive = None;
    }

    /// When the current hub times out without an answer.
    pub fn deadline(&self) -> Instant {
        self.last_alive.unwrap_or(self.since).max(self.since) + self.timeout
    }

    /// Takes an event at `now` and decides; a switch is already applied to the selection.
    pub fn on(&mut self, event: Event, now: Instant) -> Decision {
        match event {
            Event::Alive => {
                self.last_alive = Some(now);
                self.failed.clear();
                self.denied.remove(&self.current);
            }
            Event::Denied => {
                self.denied.insert(self.current);
                if let Some(to) = self.next(false) {
                    return self.switch(to, Reason::Denied, now);
                }
            }
            Event::Tick if now >= self.deadline() => {
                self.failed.insert(self.current);
                if let Some(to) = self.next(false).or_else(|| self.next(true)) {
                    return self.switch(to, Reason::Unanswered, now);
                }
                // The only hub: wait another timeout.
                self.since = now;
            }
            Event::Tick => {}
        }
        Decision::Stay {
            until: self.deadline(),
        }
    }

    /// The next hub in list order after the current one (wrapping), skipping denied hubs
    /// unless `denied_too`, preferring hubs that did not time out in this round.
    fn next(&self, denied_too: bool) -> Option<usize> {
        let others = (1..self.hubs).map(|i| (self.current + i) % self.hubs);
        let allowed: Vec<usize> = others
            .filter(|i| denied_too || !self.denied.contains(i))
            .collect();
        allowed
            .iter()
            .copied()
            .find(|i| !self.failed.contains(i))
            .or_else(|| allowed.first().copied())
    }

    fn switch(&mut self, to: usize, reason: Reason, now: Instant) -> Decision {
        self.current = to;
        self.since = now;
        self.last_alive = None;
        Decision::Switch { to, reason }
    }
}

/// Checks a connection timeout as OCM does: at least [`MIN_TIMEOUT`].
pub fn check_timeout(timeout: Duration) -> Result<(), String> {
    if timeout < MIN_TIMEOUT {
        return Err(format!(
            "--hub-connection-timeout-seconds: {} is below the minimum of {} (OCM's \
             hubConnectionTimeoutSeconds)",
            timeout.as_secs(),
            MIN_TIMEOUT.as_secs()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

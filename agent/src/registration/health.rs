//! The registration loop's own health report (pure, over the caller's clock).
//!
//! The work actors say when a step runs too long; the loop that feeds them said nothing. A
//! starved agent whose every resync is answered busy or after its bound, or a call that never
//! ends, keeps the agent's works from ever arriving while its leases keep the cluster
//! Available at the hub, and nothing on either side says why (seen once at 100,000 clusters).
//! [`LoopHealth`] follows the resync outcomes and the call in flight and, on the status tick,
//! names what is wrong: no resync answered for [`SILENT_AFTER`], or a call outstanding for more
//! than [`CALL_BOUNDS`] of its bounds (spec events wait behind a resync call). It says so again
//! every [`REPEAT_EVERY`] while it lasts, and once when it is over.

use std::time::Duration;
use tokio::time::Instant;

/// How long resyncs may go unanswered (busy, refused, timed out) before the loop says so.
pub const SILENT_AFTER: Duration = Duration::from_secs(300);

/// A call outstanding this many of its bounds is stuck (it should have timed out at one).
pub const CALL_BOUNDS: u32 = 2;

/// While a finding lasts it is repeated this often.
pub const REPEAT_EVERY: Duration = Duration::from_secs(300);

/// How a resync ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with the hub's view (specs, deletions, or in sync).
    Answered,
    /// Answered busy: a slot in the hub's queue.
    Busy,
    /// Refused or unreadable.
    Refused,
    /// No answer within the bound.
    Unanswered,
}

/// Resyncs that came to nothing since the last one answered, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misses {
    /// Answered busy.
    pub busy: u32,
    /// Refused or unreadable.
    pub refused: u32,
    /// Not answered in time.
    pub unanswered: u32,
}

/// What is wrong now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// No resync answered for `for_`; `misses` says how the tries ended.
    Unanswered { for_: Duration, misses: Misses },
    /// A call (`what`) has been outstanding for `for_`, past `CALL_BOUNDS` times its `bound`.
    Stuck {
        what: &'static str,
        for_: Duration,
        bound: Duration,
    },
}

/// What the status tick reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Something is wrong (first time, or repeated).
    Unwell(Vec<Finding>),
    /// What was reported is over.
    Recovered,
}

/// The loop's health: resync outcomes and the calls in flight.
#[derive(Debug, Clone, Default)]
pub struct LoopHealth {
    /// When the first resync since the last answered one was sent (`None`: the last was
    /// answered, or none was sent).
    failing_since: Option<Instant>,
    misses: Misses,
    /// When the resync call in flight was sent, and its bound.
    resync_call: Option<(Instant, Duration)>,
    /// When the registration call in flight was sent, and its bound.
    register_call: Option<(Instant, Duration)>,
    /// When something was last reported (`None`: all well).
    reported: Option<Instant>,
}

impl LoopHealth {
    /// A resync was sent `now` with `bound`.
    pub fn resync_sent(&mut self, now: Instant, bound: Duration) {
        self.resync_call = Some((now, bound));
        self.failing_since.get_or_insert(now);
    }

    /// The resync in flight ended with `outcome`.
    pub fn resync_ended(&mut self, outcome: Outcome) {
        self.resync_call = None;
        match outcome {
            Outcome::Answered => {
                self.failing_since = None;
                self.misses = Misses::default();
            }
            Outcome::Busy => self.misses.busy = self.misses.busy.saturating_add(1),
            Outcome::Refused => self.misses.refused = self.misses.refused.saturating_add(1),
            Outcome::Unanswered => {
                self.misses.unanswered = self.misses.unanswered.saturating_add(1);
            }
        }
    }

    /// Calls sent over a connection that is gone are moot (the loop drops them).
    pub fn calls_dropped(&mut self) {
        self.resync_call = None;
        self.register_call = None;
    }

    /// A registration was sent `now` with `bound`.
    pub fn register_sent(&mut self, now: Instant, bound: Duration) {
        self.register_call = Some((now, bound));
    }

    /// The registration in flight ended.
    pub fn register_ended(&mut self) {
        self.register_call = None;
    }

    /// The findings now, if any.
    pub fn findings(&self, now: Instant) -> Vec<Finding> {
        let mut found = Vec::new();
        if let Some(since) = self.failing_since {
            let for_ = now.saturating_duration_since(since);
            if for_ >= SILENT_AFTER {
                found.push(Finding::Unanswered {
                    for_,
                    misses: self.misses,
                });
            }
        }
        for (what, call) in [
            ("resync", self.resync_call),
            ("registration", self.register_call),
        ] {
            let Some((sent, bound)) = call else { continue };
            let for_ = now.saturating_duration_since(sent);
            if for_ > bound.saturating_mul(CALL_BOUNDS) {
                found.push(Finding::Stuck { what, for_, bound });
            }
        }
        found
    }

    /// What the status tick at `now` says: the findings the first time and every
    /// [`REPEAT_EVERY`] while they last, "recovered" once when they end, else nothing.
    pub fn report(&mut self, now: Instant) -> Option<Report> {
        let found = self.findings(now);
        match (found.is_empty(), self.reported) {
            (true, None) => None,
            (true, Some(_)) => {
                self.reported = None;
                Some(Report::Recovered)
            }
            (false, Some(at)) if now.saturating_duration_since(at) < REPEAT_EVERY => None,
            (false, _) => {
                self.reported = Some(now);
                Some(Report::Unwell(found))
            }
        }
    }
}

#[cfg(test)]
mod tests;

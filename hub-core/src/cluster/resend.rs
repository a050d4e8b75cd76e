//! When a cluster actor re-sends a work's spec, and how many re-sends the hub makes at most.
//!
//! - [`Delivery`] and [`Delivery::due`]: the pure rule over one work's delivery bookkeeping. A
//!   spec is re-sent only once the cluster has been *heard from* since it was sent (a lease
//!   renewal, a status, a resync or a registration reached the actor), a back-off after the
//!   first such message: a cluster that cannot be heard cannot hear either, and a spec sent
//!   into a cut is not sent again into it. The back-off counts from the first message after the
//!   send, so a cluster returning from a cut gets one back-off for its own resync (which sends
//!   what it missed) before the hub re-sends. A spec the agent acknowledged on receipt
//!   (`WorkStatusReport.received_generation`) is being applied, not lost: it waits the longest
//!   back-off instead. A one-way partition is not told apart from a cut: an agent that can
//!   receive but not publish is never heard from and not re-sent to, and one that can publish
//!   but not receive is re-sent to into the void at the back-off, as before. Either is repaired
//!   by the agent's periodic resync (every 5 minutes, jittered) once it is whole again.
//! - [`Budget`]: a token bucket shared by every cluster actor of the hub; a re-send it refuses
//!   waits for the actor's next re-send tick (one second), it is not retried in a loop.
//!
//! Pure over [`tokio::time::Instant`] except [`Budget`], which holds one small lock.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Default hub-wide re-sends per second ([`Budget`]): well above a healthy fleet's losses,
/// well below what a hub answering a reconnecting fleet's resyncs can spare.
pub const DEFAULT_RESENDS_PER_SECOND: u32 = 2000;

/// Re-sends in a row after which a spec's delivery is reported ([`Delivery::suspect`]).
pub const SUSPECT_AFTER: u16 = 5;

/// Why a spec is (re-)sent by the re-send timer; the label of `flotilla_hub_work_resends_by_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// This hub has not sent the current spec: stored by the shard's previous holder, or by a
    /// write whose outcome was unknown.
    NotSentHere,
    /// Loaded at the hub's start, unconfirmed: the old hub may have died as it sent it.
    Resumed,
    /// Sent, heard from since, and no status for it after the back-off: lost.
    Unconfirmed,
    /// Received by the agent (acknowledged) but still not applied after the longest back-off.
    ReceivedNotApplied,
}

impl Reason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Reason::NotSentHere => "not_sent_here",
            Reason::Resumed => "resumed",
            Reason::Unconfirmed => "unconfirmed",
            Reason::ReceivedNotApplied => "received_not_applied",
        }
    }
}

/// The delivery bookkeeping of one work's current spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// When this hub last sent the spec (`None`: it has not).
    sent: Option<Instant>,
    /// When the cluster was first heard from after that send (`None`: not yet).
    heard: Option<Instant>,
    /// The back-off: how long after `heard` the spec is sent again.
    wait: Duration,
    /// The agent acknowledged receiving the current spec (and is applying it).
    received: bool,
    /// Loaded at start ([`Delivery::resumed`]).
    resumed: bool,
    /// Re-sends by the timer since the last new spec or status.
    resends: u16,
}

impl Delivery {
    /// A spec this hub has not sent: the re-send timer sends it on its next tick.
    pub fn unsent(wait: Duration) -> Self {
        Self {
            sent: None,
            heard: None,
            wait,
            received: false,
            resumed: false,
            resends: 0,
        }
    }

    /// An unconfirmed spec loaded at the hub's start: the old hub may never have sent it, or
    /// sent it into a cut just before it died, and this hub cannot wait to hear whether; it is
    /// sent `after` from `now` (not at once: statuses already in the stream confirm most).
    pub fn resumed(now: Instant, wait: Duration, after: Duration) -> Self {
        let at = (now + after).checked_sub(wait).unwrap_or(now);
        Self {
            sent: Some(at),
            heard: Some(at),
            wait,
            received: false,
            resumed: true,
            resends: 0,
        }
    }

    /// The spec was sent `now`: nothing heard since, nothing received.
    pub fn sent(&mut self, now: Instant) {
        self.sent = Some(now);
        self.heard = None;
        self.received = false;
        self.resumed = false;
    }

    /// The spec was re-sent `now` by the timer: as [`Self::sent`], and the back-off doubles up
    /// to `longest` ([`crate::backoff::next_wait`]).
    pub fn resent(&mut self, now: Instant, longest: Duration) {
        self.sent(now);
        self.wait = crate::backoff::next_wait(self.wait, longest);
        self.resends = self.resends.saturating_add(1);
    }

    /// A new spec or a status: the back-off starts over from `least`.
    pub fn restart(&mut self, least: Duration) {
        self.wait = least;
        self.resends = 0;
    }

    /// Re-sends by the timer since the last new spec or status.
    pub fn resends(&self) -> u16 {
        self.resends
    }

    /// Whether the re-send just made is one to say out loud: the [`SUSPECT_AFTER`]th in a row
    /// to a cluster that is heard from, then every [`SUSPECT_AFTER`]th. Each went out after
    /// the cluster was heard, so its agent is alive but has not reported the spec — the spec
    /// does not reach it (a wrong subject, a dead subscription) or its reports do not reach
    /// the hub — and the logs should say which cluster and work, once in a while.
    pub fn suspect(&self) -> bool {
        self.resends > 0 && self.resends.is_multiple_of(SUSPECT_AFTER)
    }

    /// The cluster was heard from at `at` (only the first message after a send counts).
    pub fn heard(&mut self, at: Instant) {
        if self.heard.is_none() && self.sent.is_some_and(|s| at > s) {
            self.heard = Some(at);
        }
    }

    /// The agent acknowledged receiving the current spec, at `at` (which is also hearing from
    /// it).
    pub fn received(&mut self, at: Instant) {
        self.heard(at);
        if self.sent.is_some() {
            self.received = true;
        }
    }

    /// Whether the agent acknowledged receiving the current spec.
    pub fn is_received(&self) -> bool {
        self.received
    }

    /// Whether the timer sends the spec `now`, and why; `longest` is the bound of a spec the
    /// agent acknowledged: it is being applied, and the agent restarts a stuck work's actor by
    /// itself (after five minutes), so only a spec lost after all is sent again then.
    pub fn due(&self, now: Instant, longest: Duration) -> Option<Reason> {
        let Some(_) = self.sent else {
            return Some(Reason::NotSentHere);
        };
        // Not heard from since the send: it cannot have been heard either.
        let heard = self.heard?;
        let (wait, reason) = match (self.received, self.resumed) {
            (true, _) => (longest.max(self.wait), Reason::ReceivedNotApplied),
            (false, true) => (self.wait, Reason::Resumed),
            (false, false) => (self.wait, Reason::Unconfirmed),
        };
        (now >= heard + wait).then_some(reason)
    }
}

/// The hub-wide re-send budget: a token bucket of `per_second` tokens a second, holding at most
/// one second's worth. Cheap to share (`Arc`); `0` per second is no limit.
#[derive(Debug)]
pub struct Budget {
    per_second: u32,
    bucket: Mutex<Bucket>,
}

/// The tokens left and when they were counted.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Budget {
    /// A full bucket of `per_second` tokens refilled at that rate (`0`: unlimited).
    pub fn per_second(per_second: u32) -> Self {
        Self {
            per_second,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(per_second),
                at: Instant::now(),
            }),
        }
    }

    /// The most one cluster may take in one tick: a 64th of the budget (at least one), so a
    /// cluster with thousands of due works does not take every token on each tick while the
    /// others wait for its backlog to drain. `usize::MAX` when unlimited.
    pub fn share(&self) -> usize {
        if self.per_second == 0 {
            return usize::MAX;
        }
        (self.per_second as usize / 64).max(1)
    }

    /// Takes one re-send from the budget `now`; false when it is spent (try on the next tick).
    pub fn take(&self, now: Instant) -> bool {
        if self.per_second == 0 {
            return true;
        }
        let mut b = self.bucket.lock().expect("re-send budget lock");
        let rate = f64::from(self.per_second);
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(rate);
        b.at = b.at.max(now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests;

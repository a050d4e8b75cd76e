//! Admission of new clusters under a registration burst.
//!
//! Registering a name the hub has never seen costs a cluster actor and a JetStream KV create;
//! when a site's uplink returns, or a fleet is installed at once, thousands arrive in a second
//! and the store answers in seconds. Left alone, agents whose request is not answered within
//! their timeout ask again, and every repeat adds load: a 100,000-cluster registration at 1,000
//! agents a second sent 448,000 requests for 93,000 clusters and never converged.
//!
//! So at most `--registrations-in-flight` new names are being created at once ([`Permit`]s,
//! held until the cluster actor has answered), and an agent asking past that is answered at once
//! with `REGISTRATION_STATE_BUSY` and the time to ask again ([`Busy::retry_after`]). The times
//! are slots of a virtual queue ([`Pace`], pure): each busy answer takes the next slot, spaced
//! by the rate at which registrations complete, so a burst of N is spread over about N ÷ rate
//! seconds instead of all coming back at once.
//!
//! Spec resyncs are admitted by a gate of their own (the router's): a reconnecting site's fleet
//! asks at once, and past the bound an agent that reads busy answers gets its slot of the same
//! kind of queue, spaced by the rate at which resyncs are answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// New names created at once, at most, by default (`--registrations-in-flight`).
pub const DEFAULT_REGISTRATIONS_IN_FLIGHT: usize = 256;

/// The shortest wait a busy answer asks for.
pub const MIN_RETRY: Duration = Duration::from_secs(1);

/// The longest wait a busy answer asks for (a longer queue is told this, and asks again).
pub const MAX_RETRY: Duration = Duration::from_secs(300);

/// The admission gate; a cheap clone over shared state.
#[derive(Debug, Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    in_flight: AtomicUsize,
    pace: Mutex<Pace>,
}

/// One new name being created; the slot is free again when it is dropped (after the answer).
#[derive(Debug)]
pub struct Permit {
    inner: Arc<Inner>,
    /// When the request was admitted.
    admitted: Instant,
    /// Whether dropping it counts as a completion (not for an abandoned request).
    completes: bool,
}

/// The gate is full: ask again after `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy {
    /// When the agent should ask again.
    pub retry_after: Duration,
}

impl Admission {
    /// A gate admitting `limit` new names at once (at least one).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            inner: Arc::new(Inner {
                limit,
                in_flight: AtomicUsize::new(0),
                // Before any registration completed, assume each takes 100 ms.
                pace: Mutex::new(Pace::new(Instant::now(), 10.0 * limit as f64)),
            }),
        }
    }

    /// A permit to create a new name, or the time to ask again.
    pub fn try_admit(&self, now: Instant) -> Result<Permit, Busy> {
        let taken = self
            .inner
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.inner.limit).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Permit {
                inner: self.inner.clone(),
                admitted: now,
                completes: true,
            }),
            Err(_) => Err(self.busy(now)),
        }
    }

    /// The time to ask again for a request the hub cannot take now for another reason (a full
    /// mailbox): the next slot of the same queue.
    pub fn busy(&self, now: Instant) -> Busy {
        Busy {
            retry_after: self.inner.pace().busy(now),
        }
    }

    /// New names being created now.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Acquire)
    }
}

impl Inner {
    fn pace(&self) -> std::sync::MutexGuard<'_, Pace> {
        self.pace.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Permit {
    /// Whether the request waited past `bound` since it was admitted: its asker has given up
    /// on the answer and asked again, so answering it now is wasted work.
    pub fn outlived(&self, now: Instant, bound: Duration) -> bool {
        now.saturating_duration_since(self.admitted) > bound
    }

    /// Frees the slot of a request that is dropped unanswered: it is not a completion, so the
    /// queue's measured rate (and the waits it hands out) stays that of answered requests.
    pub fn abandon(mut self) {
        self.completes = false;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.inner.in_flight.fetch_sub(1, Ordering::AcqRel);
        if self.completes {
            self.inner.pace().completed(Instant::now());
        }
    }
}

/// The virtual queue busy agents are placed in: pure, driven by the caller's clock.
#[derive(Debug, Clone)]
pub struct Pace {
    /// Registrations completed per second (smoothed; at least one).
    rate: f64,
    /// Completions counted since `window_start`.
    completed: u32,
    /// Whether an agent was answered busy since `window_start`.
    saturated: bool,
    window_start: Instant,
    /// The last slot handed out.
    last_slot: Instant,
}

/// How long a completion count is gathered before it updates the rate.
const RATE_WINDOW: Duration = Duration::from_secs(1);

impl Pace {
    /// A queue assuming `rate` completions a second until it has measured some.
    pub fn new(now: Instant, rate: f64) -> Self {
        Self {
            rate: rate.max(1.0),
            completed: 0,
            saturated: false,
            window_start: now,
            last_slot: now,
        }
    }

    /// Completions a second, as last measured.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// One registration completed at `now`.
    pub fn completed(&mut self, now: Instant) {
        self.completed += 1;
        self.roll(now);
    }

    /// Folds a finished window's count into the rate. Only a window in which the gate was full
    /// measures how fast registrations can complete; in another one the count is what was
    /// asked, which may only raise the estimate (an idle gate says nothing about the store).
    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < RATE_WINDOW {
            return;
        }
        let measured = f64::from(self.completed) / elapsed.as_secs_f64();
        self.rate = if self.saturated {
            (0.5 * self.rate + 0.5 * measured).max(1.0)
        } else {
            self.rate.max(measured)
        };
        self.completed = 0;
        self.saturated = false;
        self.window_start = now;
    }

    /// The wait of the next busy agent: the slot after the last one handed out, one
    /// completion's time later, at least [`MIN_RETRY`] and at most [`MAX_RETRY`] from now.
    pub fn busy(&mut self, now: Instant) -> Duration {
        self.roll(now);
        self.saturated = true;
        let spacing = Duration::from_secs_f64(1.0 / self.rate);
        let slot = (self.last_slot + spacing).max(now + MIN_RETRY);
        let slot = slot.min(now + MAX_RETRY);
        self.last_slot = slot;
        slot - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_admits_up_to_its_limit_and_frees_a_slot_with_each_answer() {
        let gate = Admission::new(2);
        let now = Instant::now();
        let a = gate.try_admit(now).unwrap();
        let _b = gate.try_admit(now).unwrap();
        let busy = gate.try_admit(now).unwrap_err();
        assert!(busy.retry_after >= MIN_RETRY, "{busy:?}");
        assert_eq!(gate.in_flight(), 2);
        drop(a);
        assert_eq!(gate.in_flight(), 1);
        let _c = gate.try_admit(now).unwrap();
    }

    #[test]
    fn an_abandoned_request_frees_its_slot_without_counting_as_answered() {
        let gate = Admission::new(1);
        let start = Instant::now();
        let permit = gate.try_admit(start).unwrap();
        assert!(!permit.outlived(start + Duration::from_secs(60), Duration::from_secs(60)));
        assert!(permit.outlived(start + Duration::from_secs(61), Duration::from_secs(60)));
        let rate = gate.inner.pace().rate();
        permit.abandon();
        assert_eq!(gate.in_flight(), 0, "the slot is free");
        assert_eq!(gate.inner.pace().completed, 0, "nothing was answered");
        assert_eq!(gate.inner.pace().rate(), rate);
    }

    #[test]
    fn a_burst_is_spread_over_the_time_the_store_needs_for_it() {
        let start = Instant::now();
        let mut pace = Pace::new(start, 100.0);
        // 1,000 busy answers at once, 100 completions a second: the last comes back ~10 s on.
        let waits: Vec<Duration> = (0..1000).map(|_| pace.busy(start)).collect();
        assert_eq!(waits[0], MIN_RETRY);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]), "slots in order");
        let last = waits[999].as_secs_f64();
        assert!((10.5..=11.5).contains(&last), "last slot {last} s");
    }

    #[test]
    fn the_rate_follows_what_completes_while_the_gate_is_full() {
        let start = Instant::now();
        let mut pace = Pace::new(start, 1000.0);
        // Ten completions a second while agents are turned away: the rate falls towards ten.
        for s in 0..5u64 {
            pace.busy(start + Duration::from_millis(s * 1000));
            for i in 0..10u64 {
                pace.completed(start + Duration::from_millis(s * 1000 + i * 100));
            }
        }
        pace.completed(start + Duration::from_secs(5));
        assert!(pace.rate() < 100.0, "rate {}", pace.rate());
        // An idle stretch keeps the rate it measured.
        let before = pace.rate();
        pace.busy(start + Duration::from_secs(60));
        assert_eq!(pace.rate(), before);
        // A quiet gate's few completions say nothing about the store: the estimate stays.
        let mut quiet = Pace::new(start, 1000.0);
        for s in 0..5u64 {
            quiet.completed(start + Duration::from_secs(s));
        }
        assert_eq!(quiet.rate(), 1000.0);
    }

    #[test]
    fn the_queue_drains_as_time_passes() {
        let start = Instant::now();
        let mut pace = Pace::new(start, 10.0);
        for _ in 0..100 {
            pace.busy(start);
        }
        // 100 waiting at 10 a second: ten seconds later the queue is empty again.
        assert_eq!(pace.busy(start + Duration::from_secs(12)), MIN_RETRY);
    }

    #[test]
    fn no_wait_is_longer_than_the_cap() {
        let now = Instant::now();
        let mut pace = Pace::new(now, 1.0);
        let longest = (0..1000).map(|_| pace.busy(now)).max().unwrap();
        assert_eq!(longest, MAX_RETRY);
    }
}

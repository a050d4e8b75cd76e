//! The status stream's clock as this hub sees it (pure).
//!
//! A status message carries the time its stream stored it, on the stream leader's clock; the
//! hub judges leases ("is this renewal fresh?") and re-sends ("was the cluster heard from after
//! the spec was sent?") on its own. A leader whose clock is D behind the hub's made every
//! message look D older: re-sends waited D longer, and with D past a lease's grace every
//! renewal looked replayed. [`ServerClock`] estimates the offset from messages delivered as
//! they were stored — those with nothing pending behind them in the consumer, whose true age is
//! a delivery's few milliseconds — and maps a stored time onto the hub's clock. A replay (a
//! hub's start, a consumer catching up) has messages pending, so it never moves the estimate.
//!
//! The estimate is the least offset seen over the last [`WINDOWS`] minutes: delivery latency
//! only adds to a sample, so the least is the closest; clocks drift slowly, and a stretch in
//! which the consumer never caught up keeps the last estimate.

use std::time::{Duration, Instant, SystemTime};

/// Minutes of samples the estimate is the least of.
pub const WINDOWS: usize = 10;
/// The length of one window.
const WINDOW: Duration = Duration::from_secs(60);

/// The offset of this hub's clock from the stream leader's (pure; one per status consumer).
#[derive(Debug, Clone)]
pub struct ServerClock {
    /// The least offset (hub − server, ms) sampled in each window; `None`: no sample.
    windows: [Option<i64>; WINDOWS],
    /// The window being filled.
    current: usize,
    /// When it started.
    started: Option<Instant>,
}

impl Default for ServerClock {
    fn default() -> Self {
        Self {
            windows: [None; WINDOWS],
            current: 0,
            started: None,
        }
    }
}

impl ServerClock {
    /// One message received at `now` (`local` on the wall clock), stored at `stored` on the
    /// server's clock, with `pending` messages behind it in the consumer.
    pub fn observe(&mut self, now: Instant, local: SystemTime, stored: SystemTime, pending: u64) {
        if pending > 0 {
            return;
        }
        self.roll(now);
        let sample = signed_ms(local, stored);
        let slot = &mut self.windows[self.current];
        *slot = Some(slot.map_or(sample, |least| least.min(sample)));
    }

    /// The estimated offset (hub − server, ms); 0 before any sample.
    pub fn offset_ms(&self) -> i64 {
        self.windows.iter().flatten().copied().min().unwrap_or(0)
    }

    /// When a message stored at `stored` (server clock) was stored, on the hub's clock.
    pub fn local(&self, stored: SystemTime) -> SystemTime {
        let offset = self.offset_ms();
        let by = Duration::from_millis(offset.unsigned_abs());
        if offset >= 0 {
            stored + by
        } else {
            stored.checked_sub(by).unwrap_or(stored)
        }
    }

    /// Moves to the window `now` falls in, forgetting windows older than [`WINDOWS`].
    fn roll(&mut self, now: Instant) {
        let Some(started) = self.started else {
            self.started = Some(now);
            return;
        };
        let passed = now.saturating_duration_since(started).as_secs() / WINDOW.as_secs();
        if passed == 0 {
            return;
        }
        for _ in 0..passed.min(WINDOWS as u64) {
            self.current = (self.current + 1) % WINDOWS;
            self.windows[self.current] = None;
        }
        self.started = Some(started + WINDOW * u32::try_from(passed).unwrap_or(u32::MAX));
    }
}

/// `a − b` in milliseconds, negative when `b` is later.
fn signed_ms(a: SystemTime, b: SystemTime) -> i64 {
    match a.duration_since(b) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    fn wall() -> SystemTime {
        SystemTime::UNIX_EPOCH + 1_000_000 * S
    }

    #[test]
    fn a_server_behind_the_hub_is_corrected_by_the_freshest_sample() {
        let mut clock = ServerClock::default();
        let now = Instant::now();
        // The server is 30 s behind; deliveries took 40 and 5 ms.
        clock.observe(now, wall(), wall() - 30 * S - 40 * MS, 0);
        clock.observe(now, wall(), wall() - 30 * S - 5 * MS, 0);
        assert_eq!(clock.offset_ms(), 30_005);
        // A message the server stamped 10 s ago (its clock) was stored 10 s ago on ours.
        let local = clock.local(wall() - 40 * S);
        assert_eq!(wall().duration_since(local).unwrap(), 10 * S - 5 * MS);
    }

    #[test]
    fn a_server_ahead_of_the_hub_is_corrected_too() {
        let mut clock = ServerClock::default();
        clock.observe(Instant::now(), wall(), wall() + 20 * S, 0);
        assert_eq!(clock.offset_ms(), -20_000);
        assert_eq!(clock.local(wall() + 20 * S), wall());
    }

    #[test]
    fn replayed_messages_never_move_the_estimate() {
        let mut clock = ServerClock::default();
        let now = Instant::now();
        // A hub's start: an hour of stored messages, each with more behind it.
        clock.observe(now, wall(), wall() - 3600 * S, 500);
        clock.observe(now, wall(), wall() - 60 * S, 1);
        assert_eq!(
            clock.offset_ms(),
            0,
            "no sample yet: the stored time is taken as is"
        );
        assert_eq!(clock.local(wall() - 60 * S), wall() - 60 * S);
    }

    #[test]
    fn old_windows_are_forgotten() {
        let mut clock = ServerClock::default();
        let start = Instant::now();
        // A leader 20 s ahead of the hub, then one in step with it: the old estimate is the
        // least until its window is older than the last WINDOWS minutes.
        clock.observe(start, wall(), wall() + 20 * S, 0);
        clock.observe(start + WINDOW * 5, wall(), wall() - 2 * MS, 0);
        assert_eq!(clock.offset_ms(), -20_000);
        clock.observe(
            start + WINDOW * (WINDOWS as u32 - 1),
            wall(),
            wall() - 3 * MS,
            0,
        );
        assert_eq!(clock.offset_ms(), -20_000, "still within the windows");
        clock.observe(
            start + WINDOW * (WINDOWS as u32 + 1),
            wall(),
            wall() - 3 * MS,
            0,
        );
        assert_eq!(clock.offset_ms(), 2, "the first window is gone");
        clock.observe(
            start + WINDOW * (3 * WINDOWS as u32),
            wall(),
            wall() - 7 * MS,
            0,
        );
        assert_eq!(clock.offset_ms(), 7, "only the last sample is left");
    }
}

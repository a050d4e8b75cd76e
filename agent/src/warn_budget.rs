//! A process-wide budget for warnings that every agent of a process may give at once (pure
//! counters over the caller's clock; one static [`WarnBudget`] per kind of warning).
//!
//! A real agent is one cluster per process and says each of these at most every few minutes.
//! A simulator runs 25,000 agents in a process, and when its process is starved they all say
//! the same thing: 38,861 "a call is outstanding" and 71,126 "a work's actor is busy" lines in
//! one 100,000-cluster run, which buried the one line that mattered. Each kind gets
//! [`PER_WINDOW`] warnings per [`WINDOW`]; the first one after a suppressed stretch says how
//! many were left out. The metrics count every occurrence regardless.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Warnings of one kind let through per window.
pub const PER_WINDOW: u32 = 20;

/// The window.
pub const WINDOW: Duration = Duration::from_secs(60);

/// What to do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allow {
    /// Say it; `left_out` occurrences were not said since the last one that was.
    Say {
        /// Occurrences suppressed before this one.
        left_out: u64,
    },
    /// Over the budget: count it, do not say it.
    Quiet,
}

#[derive(Debug, Default)]
struct Counts {
    window_start: Option<Instant>,
    said: u32,
    left_out: u64,
}

/// One kind of warning's budget.
#[derive(Debug)]
pub struct WarnBudget {
    counts: Mutex<Counts>,
}

impl WarnBudget {
    /// An unused budget (for a `static`).
    pub const fn new() -> Self {
        Self {
            counts: Mutex::new(Counts {
                window_start: None,
                said: 0,
                left_out: 0,
            }),
        }
    }

    /// Whether an occurrence now may be said.
    pub fn allow(&self) -> Allow {
        self.allow_at(Instant::now())
    }

    /// [`Self::allow`] at `now`.
    pub fn allow_at(&self, now: Instant) -> Allow {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let new_window = c
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= WINDOW);
        if new_window {
            c.window_start = Some(now);
            c.said = 0;
        }
        if c.said >= PER_WINDOW {
            c.left_out += 1;
            return Allow::Quiet;
        }
        c.said += 1;
        Allow::Say {
            left_out: std::mem::take(&mut c.left_out),
        }
    }
}

impl Default for WarnBudget {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_says_its_budget_then_counts_what_it_left_out() {
        let b = WarnBudget::new();
        let t0 = Instant::now();
        for _ in 0..PER_WINDOW {
            assert_eq!(b.allow_at(t0), Allow::Say { left_out: 0 });
        }
        for _ in 0..5 {
            assert_eq!(b.allow_at(t0 + Duration::from_secs(30)), Allow::Quiet);
        }
        assert_eq!(b.allow_at(t0 + WINDOW), Allow::Say { left_out: 5 });
        assert_eq!(
            b.allow_at(t0 + WINDOW + Duration::from_secs(1)),
            Allow::Say { left_out: 0 }
        );
    }

    #[test]
    fn one_agent_per_process_is_never_quieted() {
        // A real agent says each finding at most every few minutes.
        let b = WarnBudget::new();
        let t0 = Instant::now();
        for i in 0..100 {
            assert_eq!(
                b.allow_at(t0 + Duration::from_secs(300) * i),
                Allow::Say { left_out: 0 }
            );
        }
    }
}

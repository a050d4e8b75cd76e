//! The health of one work's actor, shared with its handle: which handler it runs and since
//! its last finished step, so the manager can tell a stalled actor ([`Stall`]) from a busy one;
//! and the `works` gauge, held for as long as the actor's task lives.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a work's actor and its handle share: the generation and uid held, whether the work is
/// gone, and what the actor is busy with (for the manager's health check).
#[derive(Default)]
pub(super) struct Shared {
    pub(super) generation: AtomicI64,
    /// The held spec's `metadata.uid` (the spec resync's `uids`): which incarnation it is.
    uid: Mutex<String>,
    pub(super) finished: AtomicBool,
    busy: Mutex<Busy>,
}

/// The handler a work's actor is running, and since its last step finished.
#[derive(Default)]
struct Busy {
    doing: Option<(&'static str, Instant)>,
    /// Whether this stall was reported already (once per stall).
    reported: bool,
}

impl Shared {
    /// Notes the spec now held: its generation and uid.
    pub(super) fn hold(&self, work: Option<&flotilla_api::v1::ManifestWork>) {
        let meta = work.and_then(|w| w.metadata.as_ref());
        self.generation
            .store(meta.map_or(0, |m| m.generation), Ordering::Relaxed);
        *self.uid.lock().expect("uid lock") = meta.map(|m| m.uid.clone()).unwrap_or_default();
    }

    /// The held spec's uid ("" when the hub sent none).
    pub(super) fn uid(&self) -> String {
        self.uid.lock().expect("uid lock").clone()
    }

    pub(super) fn enter(&self, doing: &'static str) {
        *self.busy.lock().expect("busy lock") = Busy {
            doing: Some((doing, Instant::now())),
            reported: false,
        };
    }

    pub(super) fn leave(&self) {
        self.busy.lock().expect("busy lock").doing = None;
    }

    /// A step of the running handler finished (one resource applied, observed or deleted): a
    /// work of many resources on a slow API server is busy for long, yet not stalled.
    pub(super) fn progress(&self) {
        let mut busy = self.busy.lock().expect("busy lock");
        if let Some((doing, _)) = busy.doing {
            *busy = Busy {
                doing: Some((doing, Instant::now())),
                reported: false,
            };
        }
    }

    /// The handler whose current step has run for at least `after`, if one has.
    pub(super) fn stall(&self, after: Duration) -> Option<Stall> {
        let mut busy = self.busy.lock().expect("busy lock");
        let (doing, since) = busy.doing?;
        let for_ = since.elapsed();
        if for_ < after {
            return None;
        }
        let first = !busy.reported;
        busy.reported = true;
        Some(Stall { doing, for_, first })
    }
}

/// A handler of a work's actor that has run for `for_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// The handler: `apply`, `update`, `observe`, `repair`, `republish` or `delete`.
    pub doing: &'static str,
    /// How long its current step has run.
    pub for_: Duration,
    /// Whether this is the first time this stall is looked at (it is reported once).
    pub first: bool,
}

/// One work in the agent's `works` gauge while its actor's task lives (also when the task is
/// aborted).
pub(super) struct Held(Arc<crate::metrics::AgentMetrics>);

impl Held {
    pub(super) fn count(metrics: &Arc<crate::metrics::AgentMetrics>) -> Self {
        metrics.works.inc();
        Self(metrics.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.works.dec();
    }
}

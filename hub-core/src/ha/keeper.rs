//! A held unit's renewals, on a task of their own.
//!
//! The shard loop's round reads every lease, beats the heartbeat, takes free units and releases
//! handed-over ones; each of those waits up to its timeout when JetStream is slow, and several
//! in a row (a takeover under load) used to push the next renewal past the fence's deadline, so
//! a hub that was alive and reachable lost every unit at once and restarted them all — more load
//! on a store already slow. A keeper renews its unit every renew interval whatever the round is
//! doing: the fence ends only when renewals really fail for the TTL minus the margin.

use super::fence::Fence;
use super::lease::{HubInfo, LeaseError, Leases};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

/// The longest time between two acknowledged renewals of one unit seen in this process, in
/// milliseconds (a process runs one hub): the renew interval when all is well, more while a
/// JetStream election stalls the lease bucket. The fence holds while it stays under the TTL
/// minus the margin; `/debug/shards` shows it (`longest_renewal_gap_ms`), and the election
/// test reads it to check the default lease margins against real elections.
static LONGEST_GAP_MS: AtomicU64 = AtomicU64::new(0);

/// [`LONGEST_GAP_MS`].
pub fn longest_renewal_gap() -> Duration {
    Duration::from_millis(LONGEST_GAP_MS.load(Ordering::Relaxed))
}

/// The timers a keeper follows.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Renew this long after the last acknowledged renewal was sent.
    pub renew: Duration,
    /// The lease TTL.
    pub ttl: Duration,
    /// Stop acting this long before the lease could expire.
    pub margin: Duration,
}

impl Timing {
    /// The fence's deadline for a renewal (or the acquiring write) sent at `sent`.
    pub fn deadline(&self, sent: Instant) -> Instant {
        sent + self.ttl.saturating_sub(self.margin)
    }

    /// How long a renewal sent at `sent` waits for its answer: half the time the fence has
    /// left, at least a renew interval, never past the fence's end. A store slowed down by load
    /// (a 100,000-cluster registration burst on two cores answered in 5–10 s) still renews: cut
    /// at the renew interval, every renewal timed out, the hub lost its shards while it was
    /// alive and their restart added to the load. Half leaves time for a second attempt when
    /// the first was lost rather than slow.
    fn patience(&self, fence: &Fence, sent: Instant) -> Duration {
        match fence.deadline() {
            None => self.renew,
            Some(end) => {
                let left = end.saturating_duration_since(sent);
                (left / 2).max(self.renew).min(left)
            }
        }
    }

    /// How soon a renewal that failed is tried again: several attempts fit in the time the
    /// fence has left.
    fn retry(&self) -> Duration {
        (self.renew / 3).max(Duration::from_millis(200))
    }
}

/// The renewals of one held unit; dropping it stops them.
pub struct Keeper {
    revision: watch::Receiver<u64>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Keeper {
    /// Starts renewing `unit`, whose lease is at `revision` and was written at `sent`, extending
    /// `fence` after each acknowledged renewal.
    pub fn spawn(
        leases: Leases,
        me: HubInfo,
        unit: u32,
        revision: u64,
        sent: Instant,
        fence: Fence,
        timing: Timing,
    ) -> Self {
        let (revision_tx, revision_rx) = watch::channel(revision);
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(
            keep(
                Lease {
                    leases,
                    me,
                    unit,
                    fence,
                    timing,
                },
                sent,
                revision_tx,
                stop_rx,
            )
            .instrument(tracing::info_span!("lease_keeper", unit)),
        );
        Self {
            revision: revision_rx,
            stop,
            task: Some(task),
        }
    }

    /// The lease's latest revision this hub wrote.
    pub fn revision(&self) -> u64 {
        *self.revision.borrow()
    }

    /// Stops renewing and waits until no renewal is in flight; returns the last revision (to
    /// release the lease at).
    pub async fn stop(mut self) -> u64 {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.revision()
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

struct Lease {
    leases: Leases,
    me: HubInfo,
    unit: u32,
    fence: Fence,
    timing: Timing,
}

async fn keep(
    lease: Lease,
    sent: Instant,
    revision: watch::Sender<u64>,
    mut stop: watch::Receiver<bool>,
) {
    let Lease {
        leases,
        me,
        unit,
        fence,
        timing,
    } = lease;
    let mut next = sent + timing.renew;
    let mut last_acked = sent;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        if !fence.is_valid() {
            // Ran out or revoked: the shard loop stops the unit and may take it again under a
            // new epoch; this lease is not renewed any more.
            return;
        }
        let sent = Instant::now();
        let current = *revision.borrow();
        // A stop that arrives mid-renewal waits for its answer, so the caller knows the revision.
        match leases
            .renew_within(unit, &me, current, timing.patience(&fence, sent))
            .await
        {
            Ok(rev) => {
                revision.send_replace(rev);
                fence.extend(timing.deadline(sent));
                next = sent + timing.renew;
                let gap = u64::try_from((sent - last_acked).as_millis()).unwrap_or(u64::MAX);
                LONGEST_GAP_MS.fetch_max(gap, Ordering::Relaxed);
                last_acked = sent;
            }
            // The revision moved: a renewal that timed out may have landed. Read it.
            Err(LeaseError::Taken) => match leases.read(unit).await {
                Ok(Some((holder, rev))) if holder.incarnation == me.incarnation => {
                    revision.send_replace(rev);
                    next = Instant::now();
                }
                Ok(_) => {
                    tracing::warn!(unit, "the lease is gone or another hub's; stopping at once");
                    fence.revoke();
                    return;
                }
                Err(e) => {
                    tracing::warn!(unit, error = %e, "reading the lease after a refused renewal failed");
                    next = Instant::now() + timing.retry();
                }
            },
            Err(LeaseError::Unknown(e)) => {
                crate::store::ride::saw_election();
                tracing::warn!(unit, error = %e, "lease renewal failed; retrying");
                next = Instant::now() + timing.retry();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            renew: Duration::from_secs(3),
            ttl: Duration::from_secs(15),
            margin: Duration::from_secs(2),
        }
    }

    /// Whether `got` is `want` to the fence's millisecond resolution.
    fn about(got: Duration, want: Duration) -> bool {
        got.abs_diff(want) < Duration::from_millis(5)
    }

    #[test]
    fn a_renewal_waits_half_the_time_the_fence_has_left_but_never_past_it() {
        let now = Instant::now();
        let fence = |left: u64| Fence::new(0, 1, now + Duration::from_secs(left));
        let t = timing();
        let p = t.patience(&fence(13), now);
        assert!(about(p, Duration::from_millis(6500)), "{p:?}");
        let p = t.patience(&fence(5), now);
        assert!(
            about(p, Duration::from_secs(3)),
            "at least a renew interval: {p:?}"
        );
        let p = t.patience(&fence(2), now);
        assert!(
            about(p, Duration::from_secs(2)),
            "never past the fence's end: {p:?}"
        );
        assert_eq!(
            t.patience(&Fence::unlimited(0), now),
            Duration::from_secs(3)
        );
    }
}

//! The cluster actor's timers as one deadline (pure).
//!
//! An actor waits on its mailbox, its shard's stop and five timers: the re-send tick, the lease
//! deadline, the works' TTL expiry, the persist retry and the unsettled works' re-read. As five
//! `Sleep`s in the run loop's `select!` each was a timer entry in every cluster's task, armed
//! or not (`select!` builds every branch's future), and up to five timer registrations on each
//! turn of the loop. [`earliest`] picks the one that is due first; the loop keeps one `Sleep`,
//! reset to it, and runs that timer's handler when it fires (timers due at once fire on
//! consecutive turns). An actor with nothing armed but its lease deadline and a TTL parks
//! ([`park_alarm`]) and leaves those to its shard's alarm task.

use tokio::time::Instant;

/// Which timer fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// Re-send unconfirmed specs to a cluster heard from since (every `RESEND_CHECK` while
    /// any is unconfirmed and the cluster is Available).
    Resend,
    /// The lease ran out.
    Lease,
    /// A work's TTL after finishing ran out.
    Expiry,
    /// A failed cluster write is tried again.
    Persist,
    /// Works whose last write had an unknown outcome are read again.
    Verify,
}

/// The earliest armed timer (`None`: not armed); on a tie, the first listed.
pub(super) fn earliest(
    armed: impl IntoIterator<Item = (Timer, Option<Instant>)>,
) -> Option<(Timer, Instant)> {
    armed
        .into_iter()
        .filter_map(|(t, at)| Some((t, at?)))
        .fold(None, |best, (t, at)| match best {
            Some((_, b)) if b <= at => best,
            _ => Some((t, at)),
        })
}

/// The alarm an actor with these timers armed parks with ([`super::super::parking`]): the
/// earlier of its lease deadline and its TTL expiry (`Ok(None)`: none armed). Any other armed
/// timer — a re-send tick, a persist retry, a re-read — keeps the actor in its task
/// (`Err` names it): those are for actors in the middle of something.
pub(super) fn park_alarm(
    armed: impl IntoIterator<Item = (Timer, Option<Instant>)>,
) -> Result<Option<Instant>, Timer> {
    let mut alarm = None;
    for (timer, at) in armed {
        let Some(at) = at else { continue };
        match timer {
            Timer::Lease | Timer::Expiry => {
                alarm = Some(alarm.map_or(at, |a: Instant| a.min(at)));
            }
            Timer::Resend | Timer::Persist | Timer::Verify => return Err(timer),
        }
    }
    Ok(alarm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_earliest_armed_timer_fires_and_ties_go_to_the_first_listed() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(
            earliest([(Timer::Resend, None), (Timer::Lease, None)]),
            None
        );
        assert_eq!(
            earliest([
                (Timer::Resend, Some(t0 + s(3))),
                (Timer::Lease, Some(t0 + s(1))),
                (Timer::Expiry, None),
                (Timer::Persist, Some(t0 + s(2))),
            ]),
            Some((Timer::Lease, t0 + s(1)))
        );
        assert_eq!(
            earliest([
                (Timer::Lease, Some(t0 + s(1))),
                (Timer::Verify, Some(t0 + s(1))),
            ]),
            Some((Timer::Lease, t0 + s(1)))
        );
    }

    #[test]
    fn only_an_actor_waiting_for_its_lease_or_a_ttl_parks_and_with_the_earlier_of_the_two() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(
            park_alarm([(Timer::Lease, None), (Timer::Expiry, None)]),
            Ok(None)
        );
        assert_eq!(
            park_alarm([
                (Timer::Resend, None),
                (Timer::Lease, Some(t0 + s(300))),
                (Timer::Expiry, Some(t0 + s(20))),
                (Timer::Persist, None),
                (Timer::Verify, None),
            ]),
            Ok(Some(t0 + s(20)))
        );
        for busy in [Timer::Resend, Timer::Persist, Timer::Verify] {
            assert_eq!(
                park_alarm([(Timer::Lease, Some(t0 + s(300))), (busy, Some(t0 + s(1)))]),
                Err(busy)
            );
        }
    }
}

//! The pure decisions of the shard-lease loop: which free units to take and which held unit to
//! hand over, from what was read and who is alive. The executor in [`super::shards`] reads,
//! calls [`plan`] and carries the actions out.

use super::assign;
use std::time::Duration;
use tokio::time::Instant;

/// What this hub knows of one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// No lease; free since then (as this hub first saw it).
    Free {
        /// First seen free.
        since: Instant,
    },
    /// Another hub holds it.
    Other {
        /// Its hub id.
        hub: String,
    },
    /// This hub holds it.
    Mine {
        /// Being handed over (drain, then release).
        releasing: bool,
    },
}

/// A live hub as the planner needs it.
#[derive(Debug, Clone)]
pub struct Live {
    /// Hub id.
    pub hub: String,
    /// Leaving: takes nothing.
    pub draining: bool,
    /// More than one minor version below the newest live hub ([`super::skew::waits`]): takes
    /// no new units, is assigned none, and keeps those it holds until it leaves.
    pub waiting: bool,
    /// Member since (this incarnation, as seen here).
    pub since: Instant,
}

/// Settings of the planner.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// A free unit whose assigned owner does not take it is taken by the `r`-th ranked hub after
    /// `(r + 1) × stagger`.
    pub stagger: Duration,
    /// A hub must be a member this long before units are handed to it.
    pub settle: Duration,
    /// Units handed over per round at most (a draining hub hands everything at once).
    pub max_releases: usize,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the unit's lease.
    Acquire(u32),
    /// Drain and release the unit.
    Release(u32),
}

/// Plans one round: at most `max_releases` hand-overs, and none while others are in progress.
/// A waiting hub (its [`Live::waiting`]) takes nothing and hands over only when draining.
pub fn plan(
    me: &str,
    draining: bool,
    units: &[Unit],
    live: &[Live],
    now: Instant,
    t: Timing,
) -> Vec<Action> {
    let active: Vec<&str> = live
        .iter()
        .filter(|l| !l.draining && !l.waiting)
        .map(|l| l.hub.as_str())
        .collect();
    let waiting = live.iter().any(|l| l.hub == me && l.waiting);
    let desired = assign::assign(&active, units.len() as u32);
    let mut actions = Vec::new();
    let releasing = units
        .iter()
        .any(|u| matches!(u, Unit::Mine { releasing: true }));
    let mut releases_left = if releasing { 0 } else { t.max_releases };
    for (i, unit) in units.iter().enumerate() {
        let u = i as u32;
        match unit {
            Unit::Free { since } if !draining && !waiting => {
                let wanted = desired[i].as_deref() == Some(me);
                let rank = assign::ranking(&active, u)
                    .iter()
                    .position(|h| *h == me)
                    .unwrap_or(active.len());
                let waited = now.saturating_duration_since(*since);
                if wanted || waited >= t.stagger * (rank as u32 + 1) {
                    actions.push(Action::Acquire(u));
                }
            }
            Unit::Mine { releasing: false } if draining || (releases_left > 0 && !waiting) => {
                let hand_over = draining
                    || match desired[i].as_deref() {
                        Some(owner) if owner != me => live.iter().any(|l| {
                            l.hub == owner && now.saturating_duration_since(l.since) >= t.settle
                        }),
                        _ => false,
                    };
                if hand_over {
                    actions.push(Action::Release(u));
                    releases_left = releases_left.saturating_sub(1);
                }
            }
            _ => {}
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing {
        stagger: Duration::from_secs(2),
        settle: Duration::from_secs(6),
        max_releases: 1,
    };

    fn live(hubs: &[&str], since: Instant) -> Vec<Live> {
        hubs.iter()
            .map(|h| Live {
                hub: h.to_string(),
                draining: false,
                waiting: false,
                since,
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn without_releases_allowed_only_a_leaving_hub_hands_over() {
        let now = Instant::now();
        let units = vec![Unit::Mine { releasing: false }; 4];
        let hubs = live(&["a", "b"], now - Duration::from_secs(60));
        let calm = Timing {
            max_releases: 0,
            ..T
        };
        assert!(plan("a", false, &units, &hubs, now, calm).is_empty());
        let leaving = plan("a", true, &units, &hubs, now, calm);
        assert_eq!(leaving.len(), 4);
        assert!(leaving.iter().all(|a| matches!(a, Action::Release(_))));
        assert!(!plan("a", false, &units, &hubs, now, T).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_hub_takes_every_free_unit_at_once() {
        let now = Instant::now();
        let units = vec![Unit::Free { since: now }; 33];
        let actions = plan("a", false, &units, &live(&["a"], now), now, T);
        assert_eq!(actions.len(), 33);
        assert!(actions.iter().all(|a| matches!(a, Action::Acquire(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_free_unit_goes_to_its_assigned_hub_first_then_to_the_next_ranked() {
        let now = Instant::now();
        let hubs = live(&["a", "b"], now);
        let desired = assign::assign(&["a", "b"], 33);
        let theirs = desired
            .iter()
            .position(|o| o.as_deref() == Some("b"))
            .unwrap() as u32;
        let mut units = vec![Unit::Other { hub: "b".into() }; 33];
        units[theirs as usize] = Unit::Free { since: now };
        assert!(plan("a", false, &units, &hubs, now, T).is_empty());
        // b does not take it (paused): a takes it once its rank's wait is over.
        let later = now + Duration::from_secs(4);
        assert_eq!(
            plan("a", false, &units, &hubs, later, T),
            vec![Action::Acquire(theirs)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn units_are_handed_one_at_a_time_to_a_settled_newcomer() {
        let t0 = Instant::now();
        let units = vec![Unit::Mine { releasing: false }; 33];
        let mut hubs = live(&["a"], t0);
        hubs.push(Live {
            hub: "b".into(),
            draining: false,
            waiting: false,
            since: t0 + Duration::from_secs(1),
        });
        // Not settled yet.
        assert!(plan("a", false, &units, &hubs, t0 + Duration::from_secs(2), T).is_empty());
        let later = t0 + Duration::from_secs(10);
        let actions = plan("a", false, &units, &hubs, later, T);
        assert_eq!(actions.len(), 1);
        let Action::Release(u) = actions[0] else {
            panic!("{actions:?}")
        };
        assert_eq!(
            assign::assign(&["a", "b"], 33)[u as usize].as_deref(),
            Some("b")
        );
        // Nothing more while that one is being released.
        let mut releasing = units.clone();
        releasing[u as usize] = Unit::Mine { releasing: true };
        assert!(plan("a", false, &releasing, &hubs, later, T).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_draining_hub_releases_everything_and_takes_nothing() {
        let now = Instant::now();
        let mut units = vec![Unit::Mine { releasing: false }; 3];
        units.push(Unit::Free {
            since: now - Duration::from_secs(60),
        });
        let actions = plan("a", true, &units, &live(&["a", "b"], now), now, T);
        assert_eq!(
            actions,
            vec![Action::Release(0), Action::Release(1), Action::Release(2)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_hub_takes_nothing_keeps_what_it_holds_and_is_assigned_nothing() {
        let now = Instant::now();
        let mut hubs = live(&["old", "new"], now - Duration::from_secs(60));
        hubs[0].waiting = true;
        let free = vec![
            Unit::Free {
                since: now - Duration::from_secs(600)
            };
            33
        ];
        // The old hub takes nothing, however long the units have been free; the new one all.
        assert!(plan("old", false, &free, &hubs, now, T).is_empty());
        assert_eq!(plan("new", false, &free, &hubs, now, T).len(), 33);
        // What it holds it keeps (no hand-over to the assigned owner) until it leaves.
        let held = vec![Unit::Mine { releasing: false }; 33];
        assert!(plan("old", false, &held, &hubs, now, T).is_empty());
        assert_eq!(plan("old", true, &held, &hubs, now, T).len(), 33);
        // Once it no longer waits it hands over as usual.
        hubs[0].waiting = false;
        assert_eq!(plan("old", false, &held, &hubs, now, T).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn draining_hubs_are_not_assigned_anything() {
        let now = Instant::now();
        let mut hubs = live(&["a", "b"], now);
        hubs[1].draining = true;
        let units = vec![Unit::Free { since: now }; 33];
        assert_eq!(plan("a", false, &units, &hubs, now, T).len(), 33);
    }
}

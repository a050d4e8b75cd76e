use super::*;

const T: Duration = Duration::from_secs(600);

fn start(hubs: usize) -> (Selection, Instant) {
    let now = Instant::now();
    (Selection::new(hubs, 0, BTreeSet::new(), T, now), now)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn an_outage_shorter_than_the_timeout_never_switches() {
    let (mut s, t0) = start(2);
    assert_eq!(
        s.on(Event::Alive, t0 + secs(10)),
        Decision::Stay {
            until: t0 + secs(610)
        }
    );
    assert_eq!(
        s.on(Event::Tick, t0 + secs(609)),
        Decision::Stay {
            until: t0 + secs(610)
        }
    );
    // It answers again just in time: a full timeout from that answer.
    s.on(Event::Alive, t0 + secs(609));
    assert_eq!(
        s.on(Event::Tick, t0 + secs(1000)),
        Decision::Stay {
            until: t0 + secs(1209)
        }
    );
    assert_eq!(s.current, 0);
}

#[test]
fn the_agent_switches_exactly_at_the_timeout_and_counts_the_new_hub_from_the_switch() {
    let (mut s, t0) = start(3);
    assert!(matches!(
        s.on(Event::Tick, t0 + T - secs(1)),
        Decision::Stay { .. }
    ));
    assert_eq!(
        s.on(Event::Tick, t0 + T),
        Decision::Switch {
            to: 1,
            reason: Reason::Unanswered
        }
    );
    assert_eq!(s.deadline(), t0 + T + T, "the new hub gets a whole timeout");
    assert_eq!(
        s.on(Event::Tick, t0 + T + T),
        Decision::Switch {
            to: 2,
            reason: Reason::Unanswered
        }
    );
    // Wraps around to the first.
    assert_eq!(
        s.on(Event::Tick, t0 + T * 3),
        Decision::Switch {
            to: 0,
            reason: Reason::Unanswered
        }
    );
}

#[test]
fn a_deny_leaves_at_once_and_the_denied_hub_is_skipped() {
    let (mut s, t0) = start(3);
    s.on(Event::Alive, t0);
    assert_eq!(
        s.on(Event::Denied, t0 + secs(5)),
        Decision::Switch {
            to: 1,
            reason: Reason::Denied
        }
    );
    // Hub 1 times out: hub 2 next, then hub 1 again, never the denied hub 0 while another
    // hub is left.
    let t1 = t0 + secs(5);
    assert_eq!(
        s.on(Event::Tick, t1 + T),
        Decision::Switch {
            to: 2,
            reason: Reason::Unanswered
        }
    );
    assert_eq!(
        s.on(Event::Tick, t1 + T * 2),
        Decision::Switch {
            to: 1,
            reason: Reason::Unanswered
        }
    );
    assert!(s.denied.contains(&0));
}

#[test]
fn denied_hubs_are_tried_again_when_every_other_hub_timed_out() {
    // OCM's demo: hub 1 denies, hub 2 goes away; once hub 1 accepts again the agent is back.
    let (mut s, t0) = start(2);
    assert_eq!(
        s.on(Event::Denied, t0),
        Decision::Switch {
            to: 1,
            reason: Reason::Denied
        }
    );
    assert_eq!(
        s.on(Event::Tick, t0 + T),
        Decision::Switch {
            to: 0,
            reason: Reason::Unanswered
        },
        "the denied hub is the only one left"
    );
    s.on(Event::Alive, t0 + T + secs(1));
    assert!(
        !s.denied.contains(&0),
        "it answered without denying: no longer skipped"
    );
    // Still denying: back to the other hub at once (it is allowed, if it failed).
    let (mut s, t0) = start(2);
    s.on(Event::Denied, t0);
    s.on(Event::Tick, t0 + T);
    assert_eq!(
        s.on(Event::Denied, t0 + T + secs(1)),
        Decision::Switch {
            to: 1,
            reason: Reason::Denied
        }
    );
}

#[test]
fn with_every_other_hub_denied_a_deny_stays_until_the_timeout() {
    let (mut s, t0) = start(2);
    s.on(Event::Denied, t0);
    // Hub 1 denies too: nowhere to go now.
    assert_eq!(
        s.on(Event::Denied, t0 + secs(1)),
        Decision::Stay { until: t0 + T }
    );
    assert_eq!(s.current, 1);
    assert_eq!(
        s.on(Event::Tick, t0 + T),
        Decision::Switch {
            to: 0,
            reason: Reason::Unanswered
        }
    );
}

#[test]
fn a_recovered_first_hub_does_not_pull_the_agent_back() {
    let (mut s, t0) = start(2);
    s.on(Event::Tick, t0 + T);
    assert_eq!(s.current, 1);
    for i in 1..10 {
        assert!(matches!(
            s.on(Event::Alive, t0 + T + secs(i * 60)),
            Decision::Stay { .. }
        ));
    }
    assert_eq!(s.current, 1);
}

#[test]
fn a_single_hub_waits_rather_than_switching_to_itself() {
    let (mut s, t0) = start(1);
    assert_eq!(
        s.on(Event::Tick, t0 + T),
        Decision::Stay { until: t0 + T + T }
    );
}

#[test]
fn the_timeout_has_ocms_minimum() {
    assert!(check_timeout(DEFAULT_TIMEOUT).is_ok());
    assert!(check_timeout(MIN_TIMEOUT).is_ok());
    let e = check_timeout(secs(179)).unwrap_err();
    assert!(e.contains("179") && e.contains("180"), "{e}");
}

#[test]
fn a_hubs_time_counts_from_its_session_start() {
    let (mut s, t0) = start(2);
    s.on(Event::Tick, t0 + T);
    // Stopping hub 0's session took 5 s: hub 1 still gets a whole timeout.
    s.started(t0 + T + secs(5));
    assert!(matches!(
        s.on(Event::Tick, t0 + T + T),
        Decision::Stay { .. }
    ));
    assert_eq!(s.deadline(), t0 + T + secs(5) + T);
}

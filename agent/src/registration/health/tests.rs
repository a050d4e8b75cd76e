use super::*;

const BOUND: Duration = Duration::from_secs(5);

fn at(start: Instant, secs: u64) -> Instant {
    start + Duration::from_secs(secs)
}

#[test]
fn answered_resyncs_report_nothing() {
    let t0 = Instant::now();
    let mut h = LoopHealth::default();
    for i in 0..10 {
        h.resync_sent(at(t0, i * 200), BOUND);
        h.resync_ended(Outcome::Answered);
        assert_eq!(h.report(at(t0, i * 200 + 1)), None);
    }
}

#[test]
fn resyncs_unanswered_for_five_minutes_are_reported_with_how_they_ended() {
    let t0 = Instant::now();
    let mut h = LoopHealth::default();
    for (i, outcome) in [
        Outcome::Busy,
        Outcome::Unanswered,
        Outcome::Busy,
        Outcome::Refused,
    ]
    .into_iter()
    .enumerate()
    {
        h.resync_sent(at(t0, i as u64 * 60), BOUND);
        h.resync_ended(outcome);
    }
    assert_eq!(h.report(at(t0, 299)), None);
    let Some(Report::Unwell(found)) = h.report(at(t0, 300)) else {
        panic!("not reported");
    };
    assert_eq!(
        found,
        [Finding::Unanswered {
            for_: Duration::from_secs(300),
            misses: Misses {
                busy: 2,
                refused: 1,
                unanswered: 1
            }
        }]
    );
}

#[test]
fn a_finding_is_repeated_every_five_minutes_and_its_end_said_once() {
    let t0 = Instant::now();
    let mut h = LoopHealth::default();
    h.resync_sent(t0, BOUND);
    h.resync_ended(Outcome::Busy);
    assert!(matches!(h.report(at(t0, 300)), Some(Report::Unwell(_))));
    assert_eq!(h.report(at(t0, 400)), None);
    assert!(matches!(h.report(at(t0, 600)), Some(Report::Unwell(_))));
    h.resync_sent(at(t0, 610), BOUND);
    h.resync_ended(Outcome::Answered);
    assert_eq!(h.report(at(t0, 611)), Some(Report::Recovered));
    assert_eq!(h.report(at(t0, 612)), None);
}

#[test]
fn a_call_outstanding_past_two_bounds_is_stuck() {
    let t0 = Instant::now();
    let mut h = LoopHealth::default();
    h.register_sent(t0, BOUND);
    assert_eq!(h.findings(at(t0, 10)), []);
    assert_eq!(
        h.findings(at(t0, 11)),
        [Finding::Stuck {
            what: "registration",
            for_: Duration::from_secs(11),
            bound: BOUND
        }]
    );
    h.register_ended();
    assert_eq!(h.findings(at(t0, 12)), []);
}

#[test]
fn a_stuck_resync_is_both_stuck_and_after_five_minutes_unanswered() {
    let t0 = Instant::now();
    let mut h = LoopHealth::default();
    h.resync_sent(t0, BOUND);
    let found = h.findings(at(t0, 300));
    assert_eq!(found.len(), 2);
    assert!(matches!(found[1], Finding::Stuck { what: "resync", .. }));
}

#[test]
fn a_reconnect_drops_the_calls_but_not_the_unanswered_time() {
    let t0 = Instant::now();
    let mut h = LoopHealth::default();
    h.resync_sent(t0, BOUND);
    h.register_sent(t0, BOUND);
    h.calls_dropped();
    let found = h.findings(at(t0, 300));
    assert!(
        matches!(found[..], [Finding::Unanswered { .. }]),
        "{found:?}"
    );
}

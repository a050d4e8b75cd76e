use super::*;

const S: Duration = Duration::from_secs(1);
const LEAST: Duration = Duration::from_secs(30);
const LONGEST: Duration = Duration::from_secs(480);

#[tokio::test(start_paused = true)]
async fn a_spec_this_hub_has_not_sent_is_sent_at_once() {
    let d = Delivery::unsent(LEAST);
    assert_eq!(d.due(Instant::now(), LONGEST), Some(Reason::NotSentHere));
}

#[tokio::test(start_paused = true)]
async fn never_heard_from_since_the_send_is_never_re_sent() {
    let t0 = Instant::now();
    let mut d = Delivery::unsent(LEAST);
    d.sent(t0);
    assert_eq!(d.due(t0 + 10 * LONGEST, LONGEST), None);
    // A message from before the send (a renewal replayed from the stream) is not hearing.
    d.heard(t0 - S);
    d.heard(t0);
    assert_eq!(d.due(t0 + 10 * LONGEST, LONGEST), None);
}

#[tokio::test(start_paused = true)]
async fn heard_since_the_send_is_re_sent_a_back_off_after_the_first_message() {
    let t0 = Instant::now();
    let mut d = Delivery::unsent(LEAST);
    d.sent(t0);
    // Back from a cut at t0 + 100 s: one back-off for the agent's own resync first.
    d.heard(t0 + 100 * S);
    d.heard(t0 + 120 * S);
    assert_eq!(d.due(t0 + 129 * S, LONGEST), None);
    assert_eq!(d.due(t0 + 130 * S, LONGEST), Some(Reason::Unconfirmed));
}

#[tokio::test(start_paused = true)]
async fn each_re_send_doubles_the_back_off_up_to_the_longest_and_waits_to_hear_again() {
    let t0 = Instant::now();
    let mut d = Delivery::unsent(LEAST);
    let mut now = t0;
    let mut waits = Vec::new();
    d.sent(now);
    for _ in 0..6 {
        d.heard(now + S);
        let due = (1..2000)
            .map(|s| now + s * S)
            .find(|t| d.due(*t, LONGEST).is_some())
            .expect("due once heard");
        waits.push((due - now - S).as_secs());
        now = due;
        d.resent(now, LONGEST);
        assert_eq!(d.due(now + LONGEST * 4, LONGEST), None, "not heard since");
    }
    assert_eq!(waits, vec![30, 60, 120, 240, 480, 480]);
    d.restart(LEAST);
    d.heard(now + S);
    assert_eq!(d.due(now + S + LEAST, LONGEST), Some(Reason::Unconfirmed));
}

#[tokio::test(start_paused = true)]
async fn a_received_spec_waits_the_longest_bound_not_the_back_off() {
    let t0 = Instant::now();
    let mut d = Delivery::unsent(LEAST);
    d.sent(t0);
    d.received(t0 + S);
    assert!(d.is_received());
    assert_eq!(d.due(t0 + S + LEAST, LONGEST), None);
    assert_eq!(
        d.due(t0 + S + LONGEST, LONGEST),
        Some(Reason::ReceivedNotApplied)
    );
    // A new send forgets the receipt: it was of the spec before.
    d.sent(t0 + 2 * S);
    assert!(!d.is_received());
}

#[tokio::test(start_paused = true)]
async fn a_receipt_before_any_send_of_this_hub_changes_nothing() {
    let mut d = Delivery::unsent(LEAST);
    d.received(Instant::now());
    assert!(!d.is_received());
    assert_eq!(d.due(Instant::now(), LONGEST), Some(Reason::NotSentHere));
}

#[tokio::test(start_paused = true)]
async fn a_resumed_spec_is_sent_shortly_after_start_without_hearing() {
    let t0 = Instant::now() + 1000 * S;
    let d = Delivery::resumed(t0, LEAST, 3 * S);
    assert_eq!(d.due(t0 + 2 * S, LONGEST), None);
    assert_eq!(d.due(t0 + 3 * S, LONGEST), Some(Reason::Resumed));
}

#[tokio::test(start_paused = true)]
async fn the_budget_gives_its_rate_per_second_and_no_more() {
    let b = Budget::per_second(10);
    let t0 = Instant::now();
    let taken = (0..25).filter(|_| b.take(t0)).count();
    assert_eq!(taken, 10, "a full bucket holds one second's worth");
    assert!(!b.take(t0 + Duration::from_millis(50)));
    assert!(
        b.take(t0 + Duration::from_millis(100)),
        "refilled at 10 a second"
    );
    // Idle for a minute: still one second's worth, not sixty.
    let later = t0 + 60 * S;
    assert_eq!((0..25).filter(|_| b.take(later)).count(), 10);
}

#[test]
fn a_budget_of_zero_is_no_limit() {
    let b = Budget::per_second(0);
    assert!((0..10_000).all(|_| b.take(Instant::now())));
}

#[test]
fn reasons_have_distinct_labels() {
    let labels = [
        Reason::NotSentHere,
        Reason::Resumed,
        Reason::Unconfirmed,
        Reason::ReceivedNotApplied,
    ]
    .map(Reason::label);
    let set: std::collections::BTreeSet<_> = labels.iter().collect();
    assert_eq!(set.len(), labels.len());
}

#[test]
fn one_cluster_takes_at_most_a_64th_of_the_budget_a_tick() {
    assert_eq!(Budget::per_second(2_000).share(), 31);
    assert_eq!(Budget::per_second(10).share(), 1, "at least one");
    assert_eq!(Budget::per_second(0).share(), usize::MAX, "unlimited");
}

#[tokio::test(start_paused = true)]
async fn every_fifth_re_send_in_a_row_is_suspect_until_a_status_restarts_the_count() {
    let t0 = Instant::now();
    let mut d = Delivery::unsent(LEAST);
    d.sent(t0);
    let suspect: Vec<bool> = (1..=10)
        .map(|i| {
            d.resent(t0 + i * S, LONGEST);
            d.suspect()
        })
        .collect();
    let expected: Vec<bool> = (1..=10).map(|i| i % 5 == 0).collect();
    assert_eq!(suspect, expected);
    assert_eq!(d.resends(), 10);
    d.restart(LEAST);
    assert_eq!(d.resends(), 0);
    assert!(!d.suspect());
}

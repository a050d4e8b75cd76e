use super::alarms::Alarms;
use std::time::Duration;
use tokio::time::Instant;

#[test]
fn an_alarm_set_again_replaces_the_old_one_and_none_clears_it() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut a = Alarms::default();
    a.set("edge-1", Some(t0 + s(300)));
    a.set("edge-2", Some(t0 + s(10)));
    a.set("edge-1", Some(t0 + s(5)));
    assert_eq!(a.len(), 2);
    assert_eq!(a.next(), Some(t0 + s(5)));
    a.set("edge-1", None);
    assert_eq!(a.len(), 1);
    assert_eq!(a.next(), Some(t0 + s(10)));
    // Clearing what is not set changes nothing.
    a.set("edge-3", None);
    assert_eq!(a.len(), 1);
}

#[test]
fn due_alarms_are_taken_earliest_first_and_later_ones_stay() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut a = Alarms::default();
    a.set("c", Some(t0 + s(3)));
    a.set("a", Some(t0 + s(1)));
    a.set("b", Some(t0 + s(2)));
    a.set("d", Some(t0 + s(60)));
    let due: Vec<String> = a.due(t0 + s(3)).iter().map(|n| n.to_string()).collect();
    assert_eq!(due, ["a", "b", "c"]);
    assert!(a.due(t0 + s(3)).is_empty(), "taken once");
    assert_eq!(a.next(), Some(t0 + s(60)));
    // Two clusters due at the same instant are both taken.
    a.set("e", Some(t0 + s(60)));
    assert_eq!(a.due(t0 + s(60)).len(), 2);
    assert!(a.is_empty());
}

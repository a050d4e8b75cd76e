use super::timing::{FULL_MAP_AT_MOST, busy_wait, first_resync_request, resync_wait};
use std::time::Duration;

#[test]
fn a_resync_of_a_few_works_sends_the_map_at_once_and_of_many_the_digest_first() {
    let map = |n: usize| (0..n).map(|i| (format!("w{i}"), 1)).collect();
    let uids = |n: usize| (0..n).map(|i| (format!("w{i}"), format!("u{i}"))).collect();
    let few = first_resync_request("c1", &map(FULL_MAP_AT_MOST), &uids(FULL_MAP_AT_MOST));
    assert_eq!(few.versions.len(), FULL_MAP_AT_MOST);
    assert_eq!(few.uids.len(), FULL_MAP_AT_MOST, "the uids go with the map");
    assert!(few.digest.is_empty() && few.takes_busy && few.takes_specs);
    let none = first_resync_request("c1", &map(0), &uids(0));
    assert!(none.versions.is_empty() && none.digest.is_empty());
    let many = first_resync_request(
        "c1",
        &map(FULL_MAP_AT_MOST + 1),
        &uids(FULL_MAP_AT_MOST + 1),
    );
    assert!(many.versions.is_empty() && many.uids.is_empty() && !many.digest.is_empty());
    assert!(many.takes_busy && many.takes_specs);
}

#[test]
fn unanswered_resyncs_wait_longer_each_time_up_to_a_bound() {
    let waits: Vec<u64> = (1..=7).map(|n| resync_wait(n).as_secs()).collect();
    assert_eq!(waits, [5, 10, 20, 30, 30, 30, 30]);
    assert_eq!(resync_wait(u32::MAX), Duration::from_secs(30));
}

#[test]
fn a_busy_hub_is_waited_for_as_long_as_it_says_within_bounds() {
    assert_eq!(busy_wait(2_500), Duration::from_millis(2_500));
    assert_eq!(busy_wait(0), Duration::from_millis(100));
    assert_eq!(busy_wait(u32::MAX), Duration::from_secs(600));
}

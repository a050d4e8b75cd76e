//! The replay memory and how often a GitRepo's status records webhooks.
use super::*;

#[test]
fn a_replayed_delivery_is_known_by_its_body_or_its_id_and_the_memory_is_bounded() {
    let d = github("s3cret", "push", github_push("refs/heads/main"));
    let mut with_id = d.clone();
    with_id
        .headers
        .insert("x-github-delivery".into(), "72d3162e".into());
    let mut recent = Recent::default();
    let first = marks(
        Provider::GitHub,
        &with_id.headers,
        &with_id.body,
        "default/shop",
    );
    assert_eq!(first.len(), 2);
    assert!(recent.first(&first));
    assert!(!recent.first(&first), "the same delivery again");
    // The id is not signed: the same body under another id is still a replay.
    assert!(!recent.first(&marks(
        Provider::GitHub,
        &d.headers,
        &d.body,
        "default/shop"
    )));
    let other = github("s3cret", "push", github_push("refs/heads/dev"));
    let mut other_id = other.clone();
    other_id
        .headers
        .insert("x-github-delivery".into(), "72d3162e".into());
    assert!(!recent.first(&marks(
        Provider::GitHub,
        &other_id.headers,
        &other_id.body,
        "default/shop"
    )));
    let other_marks = marks(
        Provider::GitHub,
        &other.headers,
        &other.body,
        "default/shop",
    );
    assert!(recent.first(&other_marks));
    recent.forget(&other_marks);
    assert!(
        recent.first(&other_marks),
        "forgotten when no fetch started"
    );
    for i in 0..(RECENT + 10) {
        let mut mark = [7u8; 32];
        mark[..8].copy_from_slice(&(i as u64).to_le_bytes());
        recent.first(&[mark]);
    }
    assert_eq!(recent.len(), RECENT);
    assert!(recent.first(&first), "the oldest forgotten");
}

#[test]
fn the_same_delivery_for_another_gitrepo_is_not_a_replay() {
    // Two GitRepos following one repository, each with its own hook: the forge sends each the
    // same body.
    let d = github("s3cret", "push", github_push("refs/heads/main"));
    let mut recent = Recent::default();
    let shop = marks(Provider::GitHub, &d.headers, &d.body, "default/shop");
    let bank = marks(Provider::GitHub, &d.headers, &d.body, "finance/shop");
    assert!(recent.first(&shop));
    assert!(recent.first(&bank), "another GitRepo's first");
    assert!(
        !recent.first(&shop) && !recent.first(&bank),
        "each one's replay"
    );
}

#[test]
fn a_gitrepos_status_records_webhooks_at_most_once_a_second_and_the_same_commit_once_a_minute() {
    let t = Instant::now();
    assert!(record(None, true, t));
    assert!(!record(Some(t), false, t + Duration::from_millis(500)));
    assert!(record(Some(t), false, t + STATUS_EVERY));
    assert!(!record(Some(t), true, t + Duration::from_secs(30)));
    assert!(record(Some(t), true, t + SAME_COMMIT_EVERY));
}

use super::*;
use flotilla_api::v1::PolicyStatusReport;

fn hashes() -> [String; 2] {
    ["inform".to_string(), "enforce".to_string()]
}

fn record(
    cluster: &str,
    generation: i64,
    hash: &str,
    observed: Option<i64>,
) -> PolicyClusterRecord {
    PolicyClusterRecord {
        cluster_name: cluster.into(),
        policy_namespace: "ns".into(),
        policy_name: "p".into(),
        generation,
        spec_hash: hash.into(),
        report: observed.map(|g| PolicyStatusReport {
            cluster_name: cluster.into(),
            observed_generation: g,
            ..Default::default()
        }),
        report_sequence: 0,
    }
}

fn targets(of: &[(&str, bool)]) -> BTreeMap<String, bool> {
    of.iter().map(|(c, e)| (c.to_string(), *e)).collect()
}

fn records(of: Vec<PolicyClusterRecord>) -> BTreeMap<String, PolicyClusterRecord> {
    of.into_iter()
        .map(|r| (r.cluster_name.clone(), r))
        .collect()
}

fn send(cluster: &str, enforce: bool, generation: i64) -> Send {
    Send {
        cluster: cluster.into(),
        enforce,
        generation,
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_cluster_and_a_changed_spec_are_delivered_at_the_next_generation() {
    let now = Instant::now();
    let t = targets(&[("new", false), ("changed", true), ("same", false)]);
    let r = records(vec![
        record("changed", 3, "inform", Some(3)),
        record("same", 2, "inform", Some(2)),
    ]);
    let p = plan(
        &t,
        &r,
        by_override(hashes()),
        &resend_backoff(),
        |_| true,
        now,
    );
    assert_eq!(
        p.deliver,
        vec![
            (send("changed", true, 4), "enforce".to_string()),
            (send("new", false, 1), "inform".to_string()),
        ]
    );
    assert_eq!(p.confirmed, vec!["same".to_string()]);
    assert!(p.resend.is_empty() && p.delete.is_empty() && p.forget.is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_unconfirmed_spec_is_sent_again_once_its_wait_is_over() {
    let now = Instant::now();
    let t = targets(&[("c1", false)]);
    // Reported an older generation: not confirmed.
    let r = records(vec![record("c1", 2, "inform", Some(1))]);
    let mut resend = resend_backoff();
    resend.attempted("c1".to_string(), now);
    let waiting = plan(&t, &r, by_override(hashes()), &resend, |_| true, now);
    assert_eq!(waiting, Plan::default());
    let due = plan(
        &t,
        &r,
        by_override(hashes()),
        &resend,
        |_| true,
        now + RESEND_AFTER,
    );
    assert_eq!(due.resend, vec![send("c1", false, 2)]);
    assert!(due.resumed.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_restarted_hub_sends_an_unconfirmed_spec_at_once_and_then_waits_the_longest() {
    let now = Instant::now();
    let t = targets(&[("c1", false)]);
    let r = records(vec![record("c1", 2, "inform", None)]);
    let p = plan(
        &t,
        &r,
        by_override(hashes()),
        &resend_backoff(),
        |_| true,
        now,
    );
    assert_eq!(p.resend, vec![send("c1", false, 2)]);
    assert_eq!(p.resumed, vec!["c1".to_string()]);
    let mut resend = resend_backoff();
    assert_eq!(resend.resumed("c1".to_string(), now), now + RESEND_MAX);
}

#[tokio::test(start_paused = true)]
async fn clusters_no_longer_decided_lose_their_copy_or_their_record_when_gone() {
    let now = Instant::now();
    let r = records(vec![
        record("left", 1, "inform", Some(1)),
        record("deleted", 1, "inform", Some(1)),
    ]);
    let p = plan(
        &BTreeMap::new(),
        &r,
        by_override(hashes()),
        &resend_backoff(),
        |c| c != "deleted",
        now,
    );
    assert_eq!(p.delete, vec!["left".to_string()]);
    assert_eq!(p.forget, vec!["deleted".to_string()]);
    assert!(p.deliver.is_empty() && p.resend.is_empty());
}

#[tokio::test(start_paused = true)]
async fn resends_back_off_from_thirty_seconds_to_sixteen_times_that() {
    let now = Instant::now();
    let mut resend = resend_backoff();
    let waits: Vec<u64> = (0..7)
        .map(|_| (resend.attempted("c1".to_string(), now) - now).as_secs())
        .collect();
    assert_eq!(waits, vec![30, 60, 120, 240, 480, 480, 480]);
}

#[tokio::test(start_paused = true)]
async fn with_hub_templates_only_the_clusters_whose_own_copy_changed_are_delivered() {
    let now = Instant::now();
    let t = targets(&[("a", false), ("b", false), ("c", false)]);
    let r = records(vec![
        record("a", 2, "vlan-3620", Some(2)),
        record("b", 2, "vlan-3621", Some(2)),
        record("c", 1, "vlan-old", Some(1)),
    ]);
    let own = |c: &str, _: bool| match c {
        "a" => "vlan-3620".to_string(),
        "b" => "vlan-3621".to_string(),
        _ => "vlan-3622".to_string(),
    };
    let p = plan(&t, &r, own, &resend_backoff(), |_| true, now);
    assert_eq!(
        p.deliver,
        vec![(send("c", false, 2), "vlan-3622".to_string())]
    );
    assert_eq!(p.confirmed, vec!["a".to_string(), "b".to_string()]);
}

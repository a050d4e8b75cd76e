use super::*;
use flotilla_api::v1::RolloutConfig;
use flotilla_rollout::GroupKey;
use std::time::Duration;

fn cluster(name: &str, group: u32, status: Status) -> Cluster {
    Cluster {
        name: name.into(),
        group: GroupKey {
            index: group,
            name: format!("g{group}"),
        },
        status,
        since: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(100)),
    }
}

fn progressive(max_concurrency: &str, max_failures: &str) -> Strategy {
    strategy(
        Some(&RolloutStrategy {
            r#type: "Progressive".into(),
            progressive: Some(RolloutConfig {
                max_concurrency: max_concurrency.into(),
                max_failures: max_failures.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        "spec.rolloutStrategy",
    )
    .unwrap()
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(200)
}

#[test]
fn a_round_starts_up_to_the_concurrency_and_the_rest_wait() {
    let clusters = [
        cluster("a", 0, Status::ToApply),
        cluster("b", 0, Status::ToApply),
        cluster("c", 1, Status::ToApply),
        cluster("d", 1, Status::Succeeded),
    ];
    let r = round(&progressive("2", ""), "p", &clusters, now(), false);
    assert_eq!(r.start.len(), 2);
    assert_eq!(r.waiting.len(), 1);
    assert!(r.waiting.iter().all(|w| !r.start.contains(w)));
    assert!(r.stopped_reason.is_empty());
    assert_eq!(
        r.groups,
        vec![
            DecisionGroupSummary {
                index: 0,
                name: "g0".into(),
                total: 2,
                available: 0,
            },
            DecisionGroupSummary {
                index: 1,
                name: "g1".into(),
                total: 2,
                available: 1,
            },
        ]
    );
}

#[test]
fn a_paused_round_starts_nobody_and_everyone_to_apply_waits() {
    let clusters = [
        cluster("a", 0, Status::ToApply),
        cluster("b", 0, Status::ToApply),
    ];
    let r = round(&progressive("2", ""), "p", &clusters, now(), true);
    assert_eq!(r.step.start.len(), 2, "the step itself is unchanged");
    assert!(r.start.is_empty());
    assert_eq!(r.waiting, vec!["a".to_string(), "b".to_string()]);
}

#[test]
fn a_breached_round_says_why_it_stopped() {
    let clusters = [
        cluster("a", 0, Status::Failed),
        cluster("b", 0, Status::ToApply),
    ];
    let r = round(&progressive("1", "0"), "p", &clusters, now(), false);
    assert!(r.start.is_empty());
    assert!(
        r.stopped_reason.starts_with("stopped in ") && r.stopped_reason.contains("failed [\"a\"]"),
        "{}",
        r.stopped_reason
    );
}

#[test]
fn notes_and_strategy_errors_name_their_field() {
    let bad = strategy(
        Some(&RolloutStrategy {
            r#type: "Sometimes".into(),
            ..Default::default()
        }),
        "spec.placementRefs[1].rolloutStrategy",
    )
    .unwrap_err();
    assert_eq!(
        bad,
        vec![
            "spec.placementRefs[1].rolloutStrategy.type: \"Sometimes\" is not one of All, Progressive, ProgressivePerGroup"
                .to_string()
        ]
    );
    let s = strategy(
        Some(&RolloutStrategy {
            r#type: "Progressive".into(),
            progressive: Some(RolloutConfig {
                mandatory_decision_groups: vec![flotilla_api::v1::MandatoryDecisionGroup {
                    group_name: "nowhere".into(),
                    group_index: 0,
                }],
                ..Default::default()
            }),
            ..Default::default()
        }),
        "spec.x",
    )
    .unwrap();
    let r = round(
        &s,
        "spec.x",
        &[cluster("a", 0, Status::ToApply)],
        now(),
        false,
    );
    assert!(
        r.notes.iter().all(|n| n.starts_with("spec.x: ")),
        "{:?}",
        r.notes
    );
}

use super::*;
use flotilla_api::v1::{AddOnConfig, RolloutConfig, RolloutStrategy};

const T0: u64 = 1_800_000_000;

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + s)
}

fn install(cluster: &str, placement: Option<usize>, status: Status) -> Installation {
    Installation {
        cluster: cluster.into(),
        placement,
        group: GroupKey::default(),
        status,
        since: Some(at(0)),
    }
}

fn placement(
    name: &str,
    kind: &str,
    max_concurrency: &str,
    max_failures: &str,
) -> PlacementStrategy {
    let config = RolloutConfig {
        max_concurrency: max_concurrency.into(),
        max_failures: max_failures.into(),
        ..Default::default()
    };
    PlacementStrategy {
        namespace: "default".into(),
        name: name.into(),
        configs: vec![],
        rollout_strategy: Some(RolloutStrategy {
            r#type: kind.into(),
            progressive: (kind == "Progressive").then_some(config),
            ..Default::default()
        }),
    }
}

fn progression_of(
    p: &PlacementStrategy,
    installs: &[Installation],
    plan: &Plan,
) -> InstallProgression {
    progression(&ProgressionInput {
        placement: p,
        installations: installs,
        round: &plan.rounds[0],
        defaults: &[],
        hash: &|_: &str, _: &str, _: &str| "h".to_string(),
        previous: None,
    })
}

#[test]
fn add_ons_installed_by_hand_all_start_at_once() {
    let installs = [
        install("a", None, Status::ToApply),
        install("b", None, Status::ToApply),
        install("c", None, Status::Succeeded),
    ];
    let plan = plan(&[], &installs, at(10));
    assert_eq!(plan.start, vec![0, 1]);
    assert_eq!(plan.waiting, vec![false; 3]);
    assert!(plan.rounds.is_empty(), "no progression without a placement");
}

#[test]
fn a_progressive_placement_starts_its_concurrency_and_the_rest_wait() {
    let p = placement("edge", "Progressive", "1", "");
    let installs = [
        install("a", Some(0), Status::ToApply),
        install("b", Some(0), Status::ToApply),
        install("c", None, Status::ToApply),
    ];
    let plan = plan(std::slice::from_ref(&p), &installs, at(10));
    assert_eq!(
        plan.start.len(),
        2,
        "one of the placement's, and the hand-made one"
    );
    assert!(plan.start.contains(&2));
    assert_eq!(plan.waiting.iter().filter(|w| **w).count(), 1);
    assert_eq!(plan.rounds.len(), 1);
    assert_eq!(plan.rounds[0].members, vec![0, 1]);
    let prog = progression_of(&p, &installs, &plan);
    assert_eq!((prog.total, prog.updated, prog.failed), (2, 0, 0));
    let progressing = prog
        .conditions
        .iter()
        .find(|c| c.r#type == cond::PROGRESSING)
        .unwrap();
    assert_eq!(progressing.status, status::TRUE);
    assert_eq!(
        progressing.message,
        "0/2 progressing..., 0 failed 0 timeout."
    );
}

#[test]
fn a_refused_strategy_starts_nobody_and_names_its_field() {
    let p = placement("edge", "Sometimes", "", "");
    let installs = [install("a", Some(0), Status::ToApply)];
    let plan = plan(std::slice::from_ref(&p), &installs, at(10));
    assert!(plan.start.is_empty());
    assert!(plan.rounds.is_empty());
    assert_eq!(plan.refused.len(), 1);
    assert!(
        plan.refused[0].1[0].starts_with("spec.installStrategy.placements[0].rolloutStrategy.type"),
        "{:?}",
        plan.refused
    );
}

#[test]
fn a_breach_stops_the_placement_and_its_progression_says_why() {
    let p = placement("edge", "Progressive", "1", "0");
    let installs = [
        install("a", Some(0), Status::Failed),
        install("b", Some(0), Status::ToApply),
    ];
    let plan = plan(std::slice::from_ref(&p), &installs, at(10));
    assert!(plan.start.is_empty());
    assert_eq!(plan.waiting, vec![false, true]);
    let prog = progression_of(&p, &installs, &plan);
    assert_eq!(prog.failed, 1);
    assert!(
        prog.stopped_reason.contains("failed [\"a\"]"),
        "{}",
        prog.stopped_reason
    );
    let c = prog
        .conditions
        .iter()
        .find(|c| c.r#type == cond::PROGRESSING)
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (status::FALSE, "Failed")
    );
}

#[test]
fn a_completed_rollout_records_its_configs_as_applied_and_known_good() {
    let mut p = placement("edge", "All", "", "");
    p.configs.push(AddOnConfig {
        group: "addon.open-cluster-management.io".into(),
        resource: "addondeploymentconfigs".into(),
        namespace: "default".into(),
        name: "cfg".into(),
    });
    let installs = [install("a", Some(0), Status::Succeeded)];
    let done = plan(std::slice::from_ref(&p), &installs, at(10));
    let prog = progression_of(&p, &installs, &done);
    assert_eq!(prog.config_references.len(), 1);
    let r = &prog.config_references[0];
    assert_eq!(r.desired_config.as_ref().unwrap().spec_hash, "h");
    assert_eq!(r.last_applied_config, r.desired_config);
    assert_eq!(r.last_known_good_config, r.desired_config);

    // Not complete: what was last applied stays as the previous progression had it.
    let installs = [install("a", Some(0), Status::ToApply)];
    let plan2 = plan(std::slice::from_ref(&p), &installs, at(10));
    let prog2 = progression(&ProgressionInput {
        placement: &p,
        installations: &installs,
        round: &plan2.rounds[0],
        defaults: &[],
        hash: &|_: &str, _: &str, _: &str| "h2".to_string(),
        previous: Some(&prog),
    });
    let r2 = &prog2.config_references[0];
    assert_eq!(r2.desired_config.as_ref().unwrap().spec_hash, "h2");
    assert_eq!(r2.last_applied_config.as_ref().unwrap().spec_hash, "h");
}

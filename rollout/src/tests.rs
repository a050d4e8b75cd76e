use super::Strategy;
use super::strategy::{IntOrString, RawStrategy, parse_duration};
use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;

const T0: SystemTime = SystemTime::UNIX_EPOCH;

fn at(secs: u64) -> SystemTime {
    T0 + Duration::from_secs(secs)
}

/// A fixture cluster: `cluster("c1").group(1).status(Status::Progressing, 10)`.
fn cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        group: GroupKey::default(),
        status: Status::ToApply,
        since: None,
    }
}

impl Cluster {
    fn group(mut self, index: u32) -> Self {
        self.group.index = index;
        self
    }
    fn named_group(mut self, name: &str) -> Self {
        self.group.name = name.into();
        self
    }
    fn status(mut self, status: Status, since: u64) -> Self {
        self.status = status;
        self.since = Some(at(since));
        self
    }
}

fn progressive(max_concurrency: u32) -> Strategy {
    Strategy {
        kind: Kind::Progressive,
        max_concurrency: Some(Threshold::Count(max_concurrency)),
        ..Strategy::default()
    }
}

fn names(n: usize) -> Vec<Cluster> {
    (0..n).map(|i| cluster(&format!("c{i:02}"))).collect()
}

#[test]
fn all_starts_every_cluster_at_once() {
    let s = step(&Strategy::default(), &names(5), T0);
    assert_eq!(s.start.len(), 5);
    assert!(s.breach.is_none() && !s.complete);
}

#[test]
fn progressive_keeps_max_concurrency_in_flight_in_name_order() {
    let mut cs = names(5);
    let s = step(&progressive(2), &cs, T0);
    assert_eq!(s.start, vec!["c00", "c01"]);
    cs[0] = cs[0].clone().status(Status::Progressing, 0);
    cs[1] = cs[1].clone().status(Status::Succeeded, 0);
    let s = step(&progressive(2), &cs, at(1));
    assert_eq!(s.start, vec!["c02"], "one slot freed by the success");
}

#[test]
fn a_percentage_of_concurrency_is_rounded_up() {
    let strategy = Strategy {
        max_concurrency: Some(Threshold::Percent(25.0)),
        ..progressive(1)
    };
    // 25 % of 10 = 2.5 → 3.
    assert_eq!(step(&strategy, &names(10), T0).start.len(), 3);
}

#[test]
fn mandatory_groups_go_first_and_tolerate_no_failure() {
    let mut cs: Vec<Cluster> = (0..6)
        .map(|i| cluster(&format!("c{i}")).group(if i < 2 { 0 } else { 1 }))
        .collect();
    let strategy = Strategy {
        mandatory_groups: vec![GroupSelector::Index(0)],
        ..progressive(10)
    };
    let s = step(&strategy, &cs, T0);
    assert_eq!(s.start, vec!["c0", "c1"]);
    cs[0] = cs[0].clone().status(Status::Failed, 0);
    cs[1] = cs[1].clone().status(Status::Succeeded, 0);
    let s = step(&strategy, &cs, at(1));
    let breach = s.breach.expect("a canary failure stops the rollout");
    assert_eq!(breach.failed, vec!["c0"]);
    assert!(breach.phase.contains("mandatory"), "{breach:?}");
    assert!(s.start.is_empty());
}

#[test]
fn groups_roll_out_in_index_order_one_whole_group_at_a_time() {
    let mut cs: Vec<Cluster> = (0..6)
        .map(|i| cluster(&format!("c{i}")).group(2 - (i / 2) as u32))
        .collect();
    let strategy = Strategy {
        kind: Kind::ProgressivePerGroup,
        ..Strategy::default()
    };
    let s = step(&strategy, &cs, T0);
    assert_eq!(s.start, vec!["c4", "c5"], "group 0 first");
    cs[4] = cs[4].clone().status(Status::Succeeded, 0);
    cs[5] = cs[5].clone().status(Status::Progressing, 0);
    assert!(
        step(&strategy, &cs, at(1)).start.is_empty(),
        "group 0 still in flight"
    );
    cs[5] = cs[5].clone().status(Status::Succeeded, 1);
    assert_eq!(step(&strategy, &cs, at(2)).start, vec!["c2", "c3"]);
}

#[test]
fn min_success_time_keeps_the_slot_until_the_soak_ends() {
    let mut cs = names(2);
    let strategy = Strategy {
        min_success_time: Duration::from_secs(60),
        ..progressive(1)
    };
    cs[0] = cs[0].clone().status(Status::Succeeded, 100);
    let s = step(&strategy, &cs, at(130));
    assert!(s.start.is_empty());
    assert_eq!(s.recheck_after, Some(Duration::from_secs(30)));
    assert_eq!(step(&strategy, &cs, at(160)).start, vec!["c01"]);
}

#[test]
fn past_the_deadline_a_cluster_times_out_and_counts_as_a_failure() {
    let mut cs = names(3);
    let strategy = Strategy {
        progress_deadline: Some(Duration::from_secs(600)),
        max_failures: Threshold::Count(0),
        ..progressive(1)
    };
    cs[0] = cs[0].clone().status(Status::Progressing, 0);
    let s = step(&strategy, &cs, at(599));
    assert!(s.timed_out.is_empty());
    assert_eq!(s.recheck_after, Some(Duration::from_secs(1)));
    let s = step(&strategy, &cs, at(600));
    assert_eq!(s.timed_out, vec!["c00"]);
    assert_eq!(s.breach.unwrap().timed_out, vec!["c00"]);
}

#[test]
fn failures_within_max_failures_let_the_rollout_go_on() {
    let mut cs = names(4);
    let strategy = Strategy {
        max_failures: Threshold::Count(1),
        ..progressive(1)
    };
    cs[0] = cs[0].clone().status(Status::Failed, 0);
    // A tolerated failure frees its slot: the rollout goes on.
    let s = step(&strategy, &cs, at(1));
    assert_eq!(s.start, vec!["c01"]);
    assert_eq!(s.failed, vec!["c00"]);
    cs[1] = cs[1].clone().status(Status::Failed, 0);
    let s = step(&strategy, &cs, at(1));
    assert!(s.breach.is_some() && s.start.is_empty());
}

#[test]
fn too_large_settings_are_clamped_and_said() {
    let strategy = Strategy {
        max_failures: Threshold::Count(50),
        max_concurrency: Some(Threshold::Count(20)),
        ..progressive(1)
    };
    let s = step(&strategy, &names(5), T0);
    assert_eq!(s.start.len(), 5);
    assert!(
        s.notes.iter().any(|n| n.starts_with("maxFailures")),
        "{:?}",
        s.notes
    );
    assert!(
        s.notes.iter().any(|n| n.starts_with("maxConcurrency")),
        "{:?}",
        s.notes
    );
}

#[test]
fn an_unknown_mandatory_group_is_said_not_skipped_silently() {
    let strategy = Strategy {
        mandatory_groups: vec![GroupSelector::Name("canary".into())],
        ..progressive(1)
    };
    let s = step(&strategy, &names(2), T0);
    assert!(
        s.notes.iter().any(|n| n.contains("canary")),
        "{:?}",
        s.notes
    );
}

#[test]
fn mandatory_groups_match_by_name_before_index() {
    let cs = vec![
        cluster("a").group(3).named_group("canary"),
        cluster("b").group(0),
    ];
    let strategy = Strategy {
        mandatory_groups: vec![GroupSelector::Name("canary".into())],
        ..progressive(5)
    };
    assert_eq!(step(&strategy, &cs, T0).start, vec!["a"]);
}

#[test]
fn complete_when_every_cluster_succeeded_and_soaked() {
    let cs = vec![
        cluster("a").status(Status::Succeeded, 0),
        cluster("b").status(Status::Skip, 0),
    ];
    assert!(step(&progressive(1), &cs, at(1)).complete);
}

#[test]
fn strategies_parse_from_ocm_fields_and_every_bad_field_is_named() {
    let raw = RawStrategy {
        kind: "Progressive".into(),
        max_concurrency: Some(IntOrString::Str("25%".into())),
        mandatory_groups: vec![("canary".into(), 0), (String::new(), 2)],
        min_success_time: "5m".into(),
        progress_deadline: "1h30m".into(),
        max_failures: Some(IntOrString::Int(2)),
    };
    let s = raw.parse("spec.placementRefs[0].rolloutStrategy").unwrap();
    assert_eq!(s.max_concurrency, Some(Threshold::Percent(25.0)));
    assert_eq!(
        s.mandatory_groups,
        vec![
            GroupSelector::Name("canary".into()),
            GroupSelector::Index(2)
        ]
    );
    assert_eq!(s.min_success_time, Duration::from_secs(300));
    assert_eq!(s.progress_deadline, Some(Duration::from_secs(5400)));

    let bad = RawStrategy {
        kind: "Progressive".into(),
        max_concurrency: Some(IntOrString::Int(0)),
        mandatory_groups: vec![(String::new(), -1)],
        min_success_time: "5 minutes".into(),
        progress_deadline: "10".into(),
        max_failures: Some(IntOrString::Str("ten".into())),
    };
    let errors = bad.parse("rs").unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "rs.progressive.maxConcurrency",
            "rs.progressive.maxFailures",
            "rs.progressive.mandatoryDecisionGroups[0].groupIndex",
            "rs.progressive.minSuccessTime",
            "rs.progressive.progressDeadline",
        ]
    );
    let negative = RawStrategy {
        kind: "Progressive".into(),
        max_concurrency: Some(IntOrString::Int(-3)),
        ..RawStrategy::default()
    };
    assert!(
        negative.parse("rs").unwrap_err()[0]
            .reason
            .contains("negative")
    );
    let unknown = RawStrategy {
        kind: "Canary".into(),
        ..RawStrategy::default()
    };
    assert_eq!(unknown.parse("rs").unwrap_err()[0].field, "rs.type");
}

#[test]
fn durations_follow_ocm() {
    assert_eq!(parse_duration("None"), Ok(None));
    assert_eq!(parse_duration(""), Ok(None));
    assert_eq!(parse_duration("90s"), Ok(Some(Duration::from_secs(90))));
    assert_eq!(parse_duration("2h"), Ok(Some(Duration::from_secs(7200))));
    assert!(parse_duration("1d").is_err());
    assert!(parse_duration("-5m").is_err());
}

/// A fleet driven by the step function under simulated time: each started cluster progresses,
/// then succeeds or fails after a few seconds. Returns the most clusters ever in flight (started
/// and not yet past soak) outside the mandatory phase, the order clusters started, and the
/// final step.
fn simulate(
    strategy: &Strategy,
    mut clusters: Vec<Cluster>,
    outcome: impl Fn(&str) -> Status,
) -> (usize, Vec<String>, Step) {
    let mut now = T0;
    let mut order = Vec::new();
    let mut peak = 0;
    for _ in 0..10_000 {
        // Progressing clusters finish 3 s after they started.
        for c in clusters.iter_mut() {
            if c.status == Status::Progressing
                && now.duration_since(c.since.unwrap()).unwrap() >= Duration::from_secs(3)
            {
                *c = c.clone().status(outcome(&c.name), 0);
                c.since = Some(now);
            }
        }
        let s = step(strategy, &clusters, now);
        for name in &s.start {
            let c = clusters.iter_mut().find(|c| &c.name == name).unwrap();
            c.status = Status::Progressing;
            c.since = Some(now);
            order.push(name.clone());
        }
        let mandatory_open = clusters
            .iter()
            .any(|c| strategy.is_mandatory(&c.group) && c.status != Status::Succeeded);
        if !mandatory_open {
            let flying = step(strategy, &clusters, now).in_flight.len();
            peak = peak.max(flying);
        }
        if s.finished {
            return (peak, order, s);
        }
        now += Duration::from_secs(1);
    }
    panic!("the rollout never ended");
}

fn fleet(n: usize, groups: u32) -> Vec<Cluster> {
    (0..n)
        .map(|i| cluster(&format!("c{i:03}")).group(i as u32 % groups.max(1)))
        .collect()
}

proptest! {
    #[test]
    fn never_more_than_max_concurrency_in_flight(
        n in 1usize..60,
        max in 1u32..8,
        soak in 0u64..5,
    ) {
        let strategy = Strategy {
            min_success_time: Duration::from_secs(soak),
            ..progressive(max)
        };
        let (peak, order, last) = simulate(&strategy, fleet(n, 1), |_| Status::Succeeded);
        prop_assert!(peak <= max as usize, "peak {peak} > {max}");
        prop_assert!(last.complete);
        prop_assert_eq!(order.len(), n);
        let mut sorted = order.clone();
        sorted.sort();
        prop_assert_eq!(order, sorted, "Progressive goes in name order");
    }

    #[test]
    fn mandatory_groups_finish_before_anything_else_starts(
        n in 2usize..40,
        groups in 2u32..5,
        mandatory in 0u32..5,
    ) {
        let mandatory = mandatory % groups;
        let strategy = Strategy {
            mandatory_groups: vec![GroupSelector::Index(mandatory)],
            ..progressive(3)
        };
        let clusters = fleet(n, groups);
        let in_mandatory: BTreeSet<String> = clusters
            .iter()
            .filter(|c| c.group.index == mandatory)
            .map(|c| c.name.clone())
            .collect();
        let (_, order, last) = simulate(&strategy, clusters, |_| Status::Succeeded);
        prop_assert!(last.complete);
        let first: BTreeSet<String> = order.iter().take(in_mandatory.len()).cloned().collect();
        prop_assert_eq!(first, in_mandatory);
    }

    #[test]
    fn a_breach_stops_new_starts(
        n in 3usize..40,
        max_failures in 0u32..3,
        failing_every in 2usize..5,
    ) {
        let strategy = Strategy {
            max_failures: Threshold::Count(max_failures),
            ..progressive(2)
        };
        let fails = |name: &str| {
            let i: usize = name[1..].parse().unwrap();
            if i.is_multiple_of(failing_every) { Status::Failed } else { Status::Succeeded }
        };
        let failing = (0..n).filter(|i| i.is_multiple_of(failing_every)).count();
        let (_, order, last) = simulate(&strategy, fleet(n, 1), fails);
        if failing > max_failures as usize {
            let breach = last.breach.clone().expect("stopped");
            prop_assert!(breach.failed.len() > max_failures as usize);
            prop_assert!(order.len() < n || last.start.is_empty());
            // Once breached, no step starts anything.
            prop_assert!(last.start.is_empty());
        } else {
            prop_assert_eq!(order.len(), n);
        }
    }

    #[test]
    fn per_group_never_opens_a_group_before_the_previous_one_is_done(
        n in 2usize..40,
        groups in 1u32..6,
    ) {
        let strategy = Strategy {
            kind: Kind::ProgressivePerGroup,
            ..Strategy::default()
        };
        let clusters = fleet(n, groups);
        let group_of = |name: &str| clusters.iter().find(|c| c.name == name).unwrap().group.index;
        let (_, order, last) = simulate(&strategy, clusters.clone(), |_| Status::Succeeded);
        prop_assert!(last.complete);
        let indices: Vec<u32> = order.iter().map(|n| group_of(n)).collect();
        let mut sorted = indices.clone();
        sorted.sort();
        prop_assert_eq!(indices, sorted);
    }
}

#[test]
fn a_breach_names_its_phase_its_non_empty_lists_and_the_limit() {
    let mut b = Breach {
        failed: vec!["edge-2".into()],
        timed_out: vec![],
        max_failures: 0,
        phase: "group 0".into(),
    };
    assert_eq!(
        b.to_string(),
        "stopped in group 0: failed [\"edge-2\"] (maxFailures 0)"
    );
    b.timed_out = vec!["edge-3".into()];
    assert_eq!(
        b.to_string(),
        "stopped in group 0: failed [\"edge-2\"], timed out [\"edge-3\"] (maxFailures 0)"
    );
    b.failed.clear();
    assert_eq!(
        b.to_string(),
        "stopped in group 0: timed out [\"edge-3\"] (maxFailures 0)"
    );
}

//! The placement examples from the OCM docs (seed docs 000 and 001), reproduced exactly.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use super::fixtures::{World, t};
use crate::{
    AddOnPlacementScore, Cluster, ClusterSelector, ConditionStatus, ConditionType,
    DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, IntOrString, LabelSelector,
    ManagedClusterSet, PLACEMENT_LABEL, Placement, PlacementInput, PrioritizerMode, Reason,
    ScoreCoordinate, Taint, TaintEffect, Toleration,
};

const PLATFORM: &str = "platform.open-cluster-management.io";

/// `placement1`: three clusters labelled purpose=test with claim platform=aws, from set prod.
fn placement1() -> Placement {
    Placement::new("default", "placement1")
        .number_of_clusters(3)
        .cluster_set("prod")
        .predicate(
            LabelSelector::default().label("purpose", "test"),
            LabelSelector::default().in_values(PLATFORM, ["aws"]),
        )
}

fn prod_world() -> World {
    World::default()
        .set(ManagedClusterSet::exclusive("prod"))
        .set(ManagedClusterSet::exclusive("dev"))
        .bind("default", "prod")
        .bind("default", "dev")
}

fn matching(name: &str) -> Cluster {
    Cluster::test(name)
        .in_set("prod")
        .label("purpose", "test")
        .claim(PLATFORM, "aws")
}

#[test]
fn seed_placement1_selects_three_matching_clusters_from_prod() {
    let world = prod_world()
        .clusters(["c1", "c2", "c3", "c4", "c5"].map(matching))
        .cluster(
            Cluster::test("wrong-purpose")
                .in_set("prod")
                .label("purpose", "dev")
                .claim(PLATFORM, "aws"),
        )
        .cluster(
            Cluster::test("wrong-platform")
                .in_set("prod")
                .label("purpose", "test")
                .claim(PLATFORM, "gcp"),
        )
        .cluster(
            Cluster::test("no-claim")
                .in_set("prod")
                .label("purpose", "test"),
        )
        .cluster(
            Cluster::test("a-dev")
                .in_set("dev")
                .label("purpose", "test")
                .claim(PLATFORM, "aws"),
        );
    let p = placement1();
    let s = world
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)))
        .unwrap();

    // Default prioritizers tie (Balance 100, Steady 0 for all): name order decides.
    assert_eq!(s.selected().collect::<Vec<_>>(), ["c1", "c2", "c3"]);
    assert_eq!(s.pages.len(), 1);
    assert_eq!(s.pages[0].name, "placement1-decision-1");
    assert_eq!(s.pages[0].namespace, "default");
    assert_eq!(s.pages[0].labels[PLACEMENT_LABEL], "placement1");
    assert_eq!(s.status.number_of_selected_clusters, 3);
    let sat = s
        .status
        .condition(ConditionType::PlacementSatisfied)
        .unwrap();
    assert_eq!(
        (sat.status, sat.reason),
        (ConditionStatus::True, Reason::AllDecisionsScheduled)
    );
    let mis = s
        .status
        .condition(ConditionType::PlacementMisconfigured)
        .unwrap();
    assert_eq!(mis.status, ConditionStatus::False);
}

#[test]
fn seed_placement1_with_too_few_matches_is_not_satisfied() {
    let world = prod_world().clusters(["c1", "c2"].map(matching));
    let p = placement1();
    let s = world
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)))
        .unwrap();
    assert_eq!(s.status.number_of_selected_clusters, 2);
    let sat = s
        .status
        .condition(ConditionType::PlacementSatisfied)
        .unwrap();
    assert_eq!(
        (sat.status, sat.reason),
        (ConditionStatus::False, Reason::NotAllDecisionsScheduled)
    );
    assert_eq!(sat.message, "1 cluster decisions unscheduled");
}

fn gpu_cluster() -> Cluster {
    // timeAdded: '2022-02-21T08:11:06Z'
    let added = SystemTime::UNIX_EPOCH + Duration::from_secs(1_645_431_066);
    Cluster::test("cluster1").taint(Taint::new("gpu", "true", TaintEffect::NoSelect, added))
}

#[test]
fn seed_gpu_taint_hides_cluster_by_default() {
    let world = World::global("default").cluster(gpu_cluster());
    let p = Placement::new("default", "placement1");
    let (s, debug) = world
        .fleet()
        .explain(&PlacementInput::new(&p, t(0)))
        .unwrap();
    assert_eq!(s.selected().count(), 0);
    let sat = s
        .status
        .condition(ConditionType::PlacementSatisfied)
        .unwrap();
    assert_eq!(sat.reason, Reason::NoManagedClusterMatched);
    let why = debug
        .cluster("cluster1")
        .unwrap()
        .filters
        .last()
        .unwrap()
        .reason
        .clone();
    assert_eq!(
        why.as_deref(),
        Some("taint gpu=true:NoSelect is not tolerated")
    );
}

#[test]
fn seed_gpu_taint_is_tolerated_by_equal_toleration() {
    let world = World::global("default").cluster(gpu_cluster());
    let p = Placement::new("default", "placement1").toleration(Toleration::equal("gpu", "true"));
    let s = world
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)))
        .unwrap();
    assert_eq!(s.selected().collect::<Vec<_>>(), ["cluster1"]);
    let wrong =
        Placement::new("default", "placement1").toleration(Toleration::equal("gpu", "false"));
    let s = world
        .fleet()
        .schedule(&PlacementInput::new(&wrong, t(0)))
        .unwrap();
    assert_eq!(s.selected().count(), 0);
}

#[test]
fn seed_exact_prioritizers_pick_two_by_memory_steady_and_cpuratio() {
    // Exact: ResourceAllocatableMemory (weight 1), Steady (3), AddOn default/cpuratio (1).
    let gib = 1024.0 * 1024.0 * 1024.0;
    let world = World::global("default")
        .cluster(Cluster::test("a").memory(8.0 * gib))
        .cluster(Cluster::test("b").memory(32.0 * gib))
        .cluster(Cluster::test("c").memory(16.0 * gib))
        .cluster(Cluster::test("d").memory(8.0 * gib))
        .score(AddOnPlacementScore::new("a", "default").score("cpuratio", 90))
        .score(AddOnPlacementScore::new("c", "default").score("cpuratio", 80));
    let p = Placement::new("default", "placement1")
        .number_of_clusters(2)
        .mode(PrioritizerMode::Exact)
        .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableMemory"), 1)
        .prioritizer(ScoreCoordinate::built_in("Steady"), 3)
        .prioritizer(ScoreCoordinate::add_on("default", "cpuratio"), 1);
    // memory: a −100, b 100, c −33, d −100; cpuratio: a 90, c 80. Steady: d decided → 300.
    // totals: a −10, b 100, c 47, d 200 → d, b.
    let current: BTreeSet<String> = ["d".to_owned()].into();
    let input = PlacementInput::new(&p, t(0)).current_decisions(&current);
    let (s, debug) = world.fleet().explain(&input).unwrap();
    assert_eq!(s.selected().collect::<Vec<_>>(), ["b", "d"]);
    let totals: Vec<(String, Option<i64>)> = debug
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.total))
        .collect();
    assert_eq!(
        totals,
        [
            ("a".into(), Some(-10)),
            ("b".into(), Some(100)),
            ("c".into(), Some(47)),
            ("d".into(), Some(200))
        ]
    );
}

#[test]
fn seed_300_clusters_with_canary_group_and_150_per_group() {
    let clusters = (1..=300).map(|i| {
        let c = Cluster::test(&format!("cluster{i}"));
        if i <= 10 {
            c.label("canary", "true")
        } else {
            c
        }
    });
    let world = World::global("default").clusters(clusters);
    let p = Placement::new("default", "aws-placement")
        .cluster_set("global")
        .decision_group(
            "canary",
            ClusterSelector::labels(LabelSelector::default().exists("canary")),
        )
        .clusters_per_decision_group(IntOrString::Int(150));
    let s = world
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)))
        .unwrap();

    assert_eq!(s.status.number_of_selected_clusters, 300);
    let groups: Vec<(u32, &str, u32, Vec<&str>)> = s
        .status
        .decision_groups
        .iter()
        .map(|g| {
            (
                g.decision_group_index,
                g.decision_group_name.as_str(),
                g.cluster_count,
                g.decisions.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            (0, "canary", 10, vec!["aws-placement-decision-1"]),
            (
                1,
                "",
                150,
                vec!["aws-placement-decision-2", "aws-placement-decision-3"]
            ),
            (
                2,
                "",
                140,
                vec!["aws-placement-decision-4", "aws-placement-decision-5"]
            ),
        ]
    );
    let canary = &s.pages[0];
    assert_eq!(canary.labels[DECISION_GROUP_INDEX_LABEL], "0");
    assert_eq!(canary.labels[DECISION_GROUP_NAME_LABEL], "canary");
    assert_eq!(canary.labels[PLACEMENT_LABEL], "aws-placement");
    let mut want: Vec<String> = (1..=10).map(|i| format!("cluster{i}")).collect();
    want.sort();
    assert_eq!(canary.cluster_names().collect::<Vec<_>>(), want);
    let sizes: Vec<usize> = s.pages.iter().map(|p| p.decisions.len()).collect();
    assert_eq!(sizes, [10, 100, 50, 100, 40]);
    assert_eq!(s.pages[3].labels[DECISION_GROUP_INDEX_LABEL], "2");
    assert_eq!(s.pages[3].labels[DECISION_GROUP_NAME_LABEL], "");
}

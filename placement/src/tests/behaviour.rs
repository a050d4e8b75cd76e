//! End-to-end scheduling rules, one test per behaviour.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use super::fixtures::{World, t};
use crate::IntOrString;
use crate::{
    AddOnPlacementScore, Cluster, ConditionStatus, ConditionType, ErrorKind, Filter, LabelSelector,
    ManagedClusterSet, Placement, PlacementInput, PrioritizerMode, Reason, Schedule, ScheduleError,
    ScoreCoordinate, SortBy, SpreadConstraint, Taint, TaintEffect, Toleration, WhenUnsatisfiable,
};

fn run(world: &World, p: &Placement) -> Schedule {
    world
        .fleet()
        .schedule(&PlacementInput::new(p, t(0)))
        .unwrap()
}

fn names(s: &Schedule) -> Vec<&str> {
    s.selected().collect()
}

fn reason(s: &Schedule) -> Reason {
    s.status
        .condition(ConditionType::PlacementSatisfied)
        .unwrap()
        .reason
}

fn set_of(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn no_bindings_in_namespace_means_no_managed_cluster_set_bindings() {
    let w = World::default()
        .set(ManagedClusterSet::global())
        .bind("elsewhere", "global")
        .cluster(Cluster::test("a"));
    let s = run(&w, &Placement::new("ns", "p"));
    assert_eq!(names(&s), Vec::<&str>::new());
    assert_eq!(reason(&s), Reason::NoManagedClusterSetBindings);
    assert_eq!(
        s.pages.len(),
        1,
        "one empty PlacementDecision is still written"
    );
}

#[test]
fn spec_sets_not_bound_means_no_intersection() {
    let w = World::global("ns").cluster(Cluster::test("a"));
    let s = run(&w, &Placement::new("ns", "p").cluster_set("prod"));
    assert_eq!(reason(&s), Reason::NoIntersection);
    let c = s
        .status
        .condition(ConditionType::PlacementSatisfied)
        .unwrap();
    assert_eq!(
        c.message,
        "None of ManagedClusterSets [prod] is bound to placement namespace"
    );
}

#[test]
fn empty_sets_mean_all_managed_cluster_sets_empty() {
    let w = World::default()
        .set(ManagedClusterSet::exclusive("prod"))
        .bind("ns", "prod")
        .cluster(Cluster::test("a").in_set("dev"));
    assert_eq!(
        reason(&run(&w, &Placement::new("ns", "p"))),
        Reason::AllManagedClusterSetsEmpty
    );
}

#[test]
fn deleting_clusters_are_never_candidates() {
    let w = World::global("ns")
        .cluster(Cluster::test("a").deleting(true))
        .cluster(Cluster::test("b"));
    assert_eq!(names(&run(&w, &Placement::new("ns", "p"))), ["b"]);
    let only_deleting = World::global("ns").cluster(Cluster::test("a").deleting(true));
    assert_eq!(
        reason(&run(&only_deleting, &Placement::new("ns", "p"))),
        Reason::AllManagedClusterSetsEmpty
    );
}

#[test]
fn clusters_of_unbound_sets_are_ignored_and_union_counts_each_cluster_once() {
    let w = World::default()
        .set(ManagedClusterSet::exclusive("prod"))
        .set(ManagedClusterSet::exclusive("dev"))
        .set(ManagedClusterSet::with_selector(
            "eu",
            LabelSelector::default().label("region", "eu"),
        ))
        .bind("ns", "prod")
        .bind("ns", "eu")
        .cluster(Cluster::test("p1").in_set("prod").label("region", "eu"))
        .cluster(Cluster::test("d1").in_set("dev"))
        .cluster(Cluster::test("e1").in_set("dev").label("region", "eu"));
    let s = run(&w, &Placement::new("ns", "p"));
    assert_eq!(names(&s), ["e1", "p1"]);
    assert_eq!(s.status.number_of_selected_clusters, 2);
}

#[test]
fn predicates_are_ored_and_each_ands_labels_and_claims() {
    let w = World::global("ns")
        .cluster(Cluster::test("label-only").label("env", "prod"))
        .cluster(
            Cluster::test("both")
                .label("env", "prod")
                .claim("platform", "aws"),
        )
        .cluster(Cluster::test("gpu").label("gpu", "a100"))
        .cluster(Cluster::test("none"));
    let p = Placement::new("ns", "p")
        .predicate(
            LabelSelector::default().label("env", "prod"),
            LabelSelector::default().in_values("platform", ["aws"]),
        )
        .predicate(
            LabelSelector::default().exists("gpu"),
            LabelSelector::default(),
        );
    assert_eq!(names(&run(&w, &p)), ["both", "gpu"]);
}

#[test]
fn no_predicates_select_every_candidate_and_unset_number_takes_all() {
    let w = World::global("ns").clusters(["a", "b", "c"].map(Cluster::test));
    let s = run(&w, &Placement::new("ns", "p"));
    assert_eq!(names(&s), ["a", "b", "c"]);
    assert_eq!(reason(&s), Reason::AllDecisionsScheduled);
}

#[test]
fn no_match_means_no_managed_cluster_matched() {
    let w = World::global("ns").cluster(Cluster::test("a"));
    let p = Placement::new("ns", "p").predicate(
        LabelSelector::default().exists("x"),
        LabelSelector::default(),
    );
    let s = run(&w, &p);
    assert_eq!(reason(&s), Reason::NoManagedClusterMatched);
    assert_eq!(
        s.status
            .condition(ConditionType::PlacementSatisfied)
            .unwrap()
            .message,
        "No ManagedCluster matches any of the cluster predicate"
    );
}

#[test]
fn number_of_clusters_zero_selects_nothing_and_is_satisfied() {
    let w = World::global("ns").clusters(["a", "b"].map(Cluster::test));
    let s = run(&w, &Placement::new("ns", "p").number_of_clusters(0));
    assert_eq!(names(&s), Vec::<&str>::new());
    assert_eq!(reason(&s), Reason::AllDecisionsScheduled);
}

#[test]
fn ties_are_broken_by_name_ascending() {
    let w = World::global("ns").clusters(["d", "b", "a", "c"].map(Cluster::test));
    assert_eq!(
        names(&run(&w, &Placement::new("ns", "p").number_of_clusters(2))),
        ["a", "b"]
    );
}

#[test]
fn higher_total_wins_over_name() {
    let w = World::global("ns")
        .cluster(Cluster::test("a").cpu(1.0))
        .cluster(Cluster::test("z").cpu(8.0));
    let p = Placement::new("ns", "p")
        .number_of_clusters(1)
        .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), 1);
    assert_eq!(names(&run(&w, &p)), ["z"]);
    let negative = p.prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), -1);
    assert_eq!(
        names(&run(&w, &negative)),
        ["a"],
        "negative weight prefers the least"
    );
}

#[test]
fn steady_keeps_current_decisions() {
    let w = World::global("ns").clusters(["a", "b", "c"].map(Cluster::test));
    let p = Placement::new("ns", "p").number_of_clusters(1);
    let current = set_of(&["c"]);
    let s = w
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)).current_decisions(&current))
        .unwrap();
    assert_eq!(names(&s), ["c"]);
}

#[test]
fn balance_prefers_clusters_with_fewer_other_decisions() {
    let w = World::global("ns").clusters(["a", "b", "c"].map(Cluster::test));
    let p = Placement::new("ns", "p").number_of_clusters(1);
    let counts: HashMap<String, u32> = [("a".to_owned(), 4), ("b".to_owned(), 1)].into();
    let input = PlacementInput::new(&p, t(0)).other_decision_counts(&counts);
    let (s, debug) = w.fleet().explain(&input).unwrap();
    assert_eq!(names(&s), ["c"]);
    let balance = |n: &str| debug.cluster(n).unwrap().scores[0].score;
    assert_eq!((balance("a"), balance("b"), balance("c")), (-100, 50, 100));
}

#[test]
fn balance_max_counts_clusters_outside_the_feasible_set_so_steady_keeps_the_decision() {
    // "x" is not feasible (fails the predicate) but holds the most decisions elsewhere (4).
    // OCM scales Balance by that 4: b (decided, 2 elsewhere) scores 0 + Steady 100 = 100 and a
    // (1 elsewhere) scores 50, so b stays. Scaling by the feasible maximum (2) would give b
    // −100 + 100 = 0 and a 0, and the name tie-break would move the decision to a.
    let w = World::global("ns").clusters([
        Cluster::test("a").label("env", "prod"),
        Cluster::test("b").label("env", "prod"),
        Cluster::test("x").label("env", "dev"),
    ]);
    let p = Placement::new("ns", "p").number_of_clusters(1).predicate(
        crate::parse_selector("env=prod").unwrap(),
        LabelSelector::everything(),
    );
    let current = set_of(&["b"]);
    let others: HashMap<String, u32> = [
        ("a".to_owned(), 1),
        ("b".to_owned(), 2),
        ("x".to_owned(), 4),
    ]
    .into();
    let input = PlacementInput::new(&p, t(0))
        .current_decisions(&current)
        .other_decision_counts(&others);
    let (s, debug) = w.fleet().explain(&input).unwrap();
    let balance = |n: &str| debug.cluster(n).unwrap().scores[0].score;
    assert_eq!((balance("a"), balance("b")), (50, 0));
    assert_eq!(names(&s), ["b"], "the existing decision is kept");
    // The same through fleet-wide counts that include this placement's own decision on b.
    let all: HashMap<String, u32> = [
        ("a".to_owned(), 1),
        ("b".to_owned(), 3),
        ("x".to_owned(), 4),
    ]
    .into();
    let input = PlacementInput::new(&p, t(0))
        .current_decisions(&current)
        .all_decision_counts(&all);
    assert_eq!(names(&w.fleet().schedule(&input).unwrap()), ["b"]);
}

#[test]
fn fleet_wide_counts_minus_own_decisions_equal_other_counts() {
    let w = World::global("ns").clusters(["a", "b", "c"].map(Cluster::test));
    let p = Placement::new("ns", "p").number_of_clusters(2);
    let current = set_of(&["a", "b"]);
    // Fleet-wide counts include this placement's own decisions on a and b.
    let all: HashMap<String, u32> = [("a".to_owned(), 5), ("b".to_owned(), 1)].into();
    let others: HashMap<String, u32> = [("a".to_owned(), 4), ("b".to_owned(), 0)].into();
    let fleet = w.fleet();
    let with_all = PlacementInput::new(&p, t(0))
        .current_decisions(&current)
        .all_decision_counts(&all);
    let with_others = PlacementInput::new(&p, t(0))
        .current_decisions(&current)
        .other_decision_counts(&others);
    let (a, da) = fleet.explain(&with_all).unwrap();
    let (b, db) = fleet.explain(&with_others).unwrap();
    assert_eq!(a, b);
    assert_eq!(da, db);
    assert_eq!(da.cluster("a").unwrap().scores[0].score, -100);
}

#[test]
fn weight_zero_disables_and_exact_without_configs_ties_everything() {
    let w = World::global("ns").clusters(["a", "b"].map(Cluster::test));
    let counts: HashMap<String, u32> = [("a".to_owned(), 0), ("b".to_owned(), 0)].into();
    let current = set_of(&["b"]);
    let p = Placement::new("ns", "p")
        .number_of_clusters(1)
        .prioritizer(ScoreCoordinate::built_in("Steady"), 0);
    let input = PlacementInput::new(&p, t(0))
        .current_decisions(&current)
        .other_decision_counts(&counts);
    let (s, debug) = w.fleet().explain(&input).unwrap();
    assert_eq!(names(&s), ["a"], "Steady disabled: name order");
    assert_eq!(debug.prioritizers.len(), 1);
    let exact = Placement::new("ns", "p")
        .number_of_clusters(1)
        .mode(PrioritizerMode::Exact);
    let (s, debug) = w
        .fleet()
        .explain(&PlacementInput::new(&exact, t(0)).current_decisions(&current))
        .unwrap();
    assert_eq!(names(&s), ["a"]);
    assert!(debug.prioritizers.is_empty());
    assert_eq!(debug.cluster("b").unwrap().total, Some(0));
}

#[test]
fn memory_prioritizer_prefers_more_allocatable_memory() {
    let w = World::global("ns")
        .cluster(Cluster::test("small").memory(1e9))
        .cluster(Cluster::test("big").memory(64e9))
        .cluster(Cluster::new("unknown"));
    let p = Placement::new("ns", "p")
        .number_of_clusters(1)
        .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableMemory"), 2);
    let (s, debug) = w.fleet().explain(&PlacementInput::new(&p, t(0))).unwrap();
    assert_eq!(names(&s), ["big"]);
    let mem = |n: &str| debug.cluster(n).unwrap().scores[2].score;
    assert_eq!((mem("small"), mem("big"), mem("unknown")), (-100, 100, 0));
}

#[test]
fn addon_scores_rank_clusters_and_expire() {
    let w = World::global("ns")
        .clusters(["a", "b"].map(Cluster::test))
        .score(AddOnPlacementScore::new("a", "load").score("free", 10))
        .score(
            AddOnPlacementScore::new("b", "load")
                .score("free", 60)
                .valid_until(t(100)),
        );
    let p = Placement::new("ns", "p")
        .number_of_clusters(1)
        .prioritizer(ScoreCoordinate::add_on("load", "free"), 1);
    let fleet = w.fleet();
    let before = fleet.schedule(&PlacementInput::new(&p, t(0))).unwrap();
    assert_eq!(names(&before), ["b"]);
    assert_eq!(
        before.requeue_at,
        Some(t(100)),
        "re-evaluate when b's score expires"
    );
    assert_eq!(before.toleration_expires_at, None);
    let after = fleet.schedule(&PlacementInput::new(&p, t(100))).unwrap();
    assert_eq!(names(&after), ["a"], "expired score counts as 0");
    assert_eq!(after.requeue_at, None);
}

fn decisions(s: &Schedule) -> Vec<(&str, i64)> {
    s.pages
        .iter()
        .flat_map(|p| &p.decisions)
        .map(|d| (d.cluster_name.as_str(), d.score))
        .collect()
}

fn recorded(s: &Schedule) -> HashMap<String, i64> {
    decisions(s)
        .into_iter()
        .map(|(n, score)| (n.to_owned(), score))
        .collect()
}

/// Four clusters with AddOn scores a 10, b 60, c 60, d -5, ranked by that score alone.
fn scored_world(b: i32) -> (World, Placement) {
    let w = World::global("ns")
        .clusters(["a", "b", "c", "d"].map(Cluster::test))
        .score(AddOnPlacementScore::new("a", "load").score("free", 10))
        .score(AddOnPlacementScore::new("b", "load").score("free", b))
        .score(AddOnPlacementScore::new("c", "load").score("free", 60))
        .score(AddOnPlacementScore::new("d", "load").score("free", -5));
    let p = Placement::new("ns", "p")
        .mode(PrioritizerMode::Exact)
        .prioritizer(ScoreCoordinate::add_on("load", "free"), 2);
    (w, p)
}

#[test]
fn decisions_record_weighted_scores_in_name_order_by_default() {
    let (w, p) = scored_world(60);
    let s = run(&w, &p);
    assert_eq!(
        decisions(&s),
        [("a", 20), ("b", 120), ("c", 120), ("d", -10)]
    );
    assert_eq!(s.status.last_score_update, Some(t(0)));
}

#[test]
fn sort_by_score_orders_decisions_and_groups_highest_first_ties_by_name() {
    let (w, p) = scored_world(60);
    let p = p
        .sort_by(SortBy::Score)
        .clusters_per_decision_group(IntOrString::Int(2));
    let s = run(&w, &p);
    assert_eq!(
        decisions(&s),
        [("b", 120), ("c", 120), ("a", 20), ("d", -10)]
    );
    let groups: Vec<Vec<&str>> = s
        .pages
        .iter()
        .map(|p| p.cluster_names().collect())
        .collect();
    assert_eq!(groups, [vec!["b", "c"], vec!["a", "d"]]);
}

#[test]
fn score_rate_limit_holds_back_score_only_changes_until_it_runs_out() {
    let (w, p) = scored_world(60);
    let p = p.sort_by(SortBy::Score).score_rate_limit("30s");
    let first = run(&w, &p);
    let current = first.selected_set();
    let old = recorded(&first);
    let last = first.status.last_score_update;

    // b drops below a: the set is the same, so within 30 s nothing is rewritten or reordered.
    let (w, _) = scored_world(0);
    let fleet = w.fleet();
    let input = |now| {
        PlacementInput::new(&p, now)
            .current_decisions(&current)
            .recorded_scores(&old, last)
    };
    let held = fleet.schedule(&input(t(10))).unwrap();
    assert_eq!(decisions(&held), decisions(&first));
    assert_eq!(held.status.last_score_update, Some(t(0)));
    assert_eq!(
        held.requeue_at,
        Some(t(30)),
        "look again when the limit runs out"
    );

    let written = fleet.schedule(&input(t(30))).unwrap();
    assert_eq!(
        decisions(&written),
        [("c", 120), ("a", 20), ("b", 0), ("d", -10)]
    );
    assert_eq!(written.status.last_score_update, Some(t(30)));
    assert_eq!(written.requeue_at, None);
}

#[test]
fn a_changed_selection_writes_fresh_scores_inside_the_rate_limit() {
    let (w, p) = scored_world(60);
    let p = p.number_of_clusters(2);
    let first = run(&w, &p);
    assert_eq!(names(&first), ["b", "c"]);
    let current = first.selected_set();
    let old = recorded(&first);
    let (w, _) = scored_world(0);
    let s = w
        .fleet()
        .schedule(
            &PlacementInput::new(&p, t(5))
                .current_decisions(&current)
                .recorded_scores(&old, first.status.last_score_update),
        )
        .unwrap();
    assert_eq!(decisions(&s), [("a", 20), ("c", 120)]);
    assert_eq!(s.status.last_score_update, Some(t(5)));
}

#[test]
fn no_select_if_new_keeps_decided_clusters_but_blocks_new_ones() {
    let drain = Taint::test("drain", "", TaintEffect::NoSelectIfNew);
    let w = World::global("ns")
        .cluster(Cluster::test("old").taint(drain.clone()))
        .cluster(Cluster::test("new").taint(drain));
    let p = Placement::new("ns", "p");
    let current = set_of(&["old"]);
    let s = w
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)).current_decisions(&current))
        .unwrap();
    assert_eq!(names(&s), ["old"]);
}

#[test]
fn no_select_if_new_toleration_seconds_bound_a_cluster_not_yet_decided() {
    // Both taints added at t(0); the toleration holds for 60 s.
    let drain = Taint::test("drain", "", TaintEffect::NoSelectIfNew);
    let w = World::global("ns")
        .cluster(Cluster::test("old").taint(drain.clone()))
        .cluster(Cluster::test("new").taint(drain));
    let p = Placement::new("ns", "p").toleration(Toleration::exists("drain").seconds(60));
    let fleet = w.fleet();
    let current = set_of(&["old"]);
    let at = |secs, current| {
        fleet
            .schedule(&PlacementInput::new(&p, t(secs)).current_decisions(current))
            .unwrap()
    };
    let before = at(59, &current);
    assert_eq!(names(&before), ["new", "old"]);
    assert_eq!(
        before.toleration_expires_at,
        Some(t(60)),
        "re-evaluate when the new cluster's toleration expires"
    );
    assert_eq!(
        names(&at(60, &current)),
        ["old"],
        "a new cluster is no longer selected"
    );
    let both = set_of(&["new", "old"]);
    let kept = at(60, &both);
    assert_eq!(
        names(&kept),
        ["new", "old"],
        "decided clusters need no toleration"
    );
    assert_eq!(kept.toleration_expires_at, None);
}

#[test]
fn cel_predicates_select_by_label_version_claims_and_scores() {
    let w = World::global("ns")
        .cluster(
            Cluster::test("a")
                .label("version", "1.14.3")
                .kubernetes_version("v1.30.2"),
        )
        .cluster(
            Cluster::test("b")
                .label("version", "1.15.0")
                .kubernetes_version("v1.29.0"),
        )
        .cluster(
            Cluster::test("c")
                .label("version", "1.16.1")
                .kubernetes_version("v1.30.2"),
        )
        .score(AddOnPlacementScore::new("a", "resource-usage-score").score("memAvailable", 60))
        .score(AddOnPlacementScore::new("b", "resource-usage-score").score("memAvailable", -20));
    let version = r"managedCluster.metadata.labels['version'].matches('^1\\.(14|15)\\.\\d+$')";
    let p = Placement::new("ns", "p")
        .predicate_selector(crate::ClusterSelector::default().cel([version]));
    assert_eq!(names(&run(&w, &p)), ["a", "b"]);
    // Every expression of a predicate must hold; predicates are still ORed.
    let memory = "managedCluster.scores('resource-usage-score')\
                  .filter(s, s.name == 'memAvailable').all(e, e.value > 0)";
    let p = Placement::new("ns", "p")
        .predicate_selector(crate::ClusterSelector::default().cel([version, memory]))
        .predicate_selector(
            crate::ClusterSelector::default()
                .cel(["managedCluster.status.version.kubernetes == 'v1.30.2' && \
             managedCluster.metadata.name == 'c'"]),
        );
    let (s, debug) = w.fleet().explain(&PlacementInput::new(&p, t(0))).unwrap();
    assert_eq!(
        names(&s),
        ["a", "c"],
        "b fails the score, c has no score but matches the second"
    );
    let why = debug.cluster("b").unwrap().filters[1]
        .reason
        .clone()
        .unwrap();
    assert!(
        why.contains("predicates[0]: celSelector does not match"),
        "{why}"
    );
}

#[test]
fn a_cel_expression_that_does_not_compile_makes_the_placement_misconfigured() {
    let w = World::global("ns").cluster(Cluster::test("a"));
    let p = Placement::new("ns", "p").predicate_selector(
        crate::ClusterSelector::default()
            .cel(["managedCluster.metadata.name == 'a'", "managedCluster.("]),
    );
    let err = w
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)))
        .unwrap_err();
    assert!(err.accepted_by_ocm());
    assert_eq!(
        err.errors()[0].path,
        "spec.predicates[0].requiredClusterSelector.celSelector.celExpressions[1]"
    );
    assert!(
        err.errors()[0].message.starts_with("compilation failed"),
        "{err}"
    );
}

#[test]
fn prefer_no_select_ranks_after_untainted_clusters_whatever_the_score() {
    let w = World::global("ns")
        .cluster(Cluster::test("tainted").cpu(64.0).taint(Taint::test(
            "cost",
            "high",
            TaintEffect::PreferNoSelect,
        )))
        .cluster(Cluster::test("plain").cpu(1.0));
    let p = Placement::new("ns", "p")
        .number_of_clusters(1)
        .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), 10);
    let (s, debug) = w.fleet().explain(&PlacementInput::new(&p, t(0))).unwrap();
    assert_eq!(names(&s), ["plain"]);
    assert!(debug.cluster("tainted").unwrap().prefer_no_select_penalty);
    let all = Placement::new("ns", "p");
    assert_eq!(
        names(&run(&w, &all)),
        ["plain", "tainted"],
        "still feasible"
    );
    let tolerant = p.toleration(Toleration::exists("cost"));
    assert_eq!(
        names(&run(&w, &tolerant)),
        ["tainted"],
        "a toleration lifts the penalty"
    );
}

#[test]
fn toleration_seconds_hold_until_expiry_and_requeue_exactly_then() {
    let w = World::global("ns")
        .cluster(Cluster::test("flaky").taint(Taint::test(
            "unreachable",
            "",
            TaintEffect::NoSelect,
        )))
        .cluster(Cluster::test("ok"));
    let p = Placement::new("ns", "p").toleration(Toleration::exists("unreachable").seconds(300));
    let fleet = w.fleet();
    let s = fleet.schedule(&PlacementInput::new(&p, t(10))).unwrap();
    assert_eq!(names(&s), ["flaky", "ok"]);
    assert_eq!(s.toleration_expires_at, Some(t(300)));
    assert_eq!(s.requeue_at, Some(t(300)));
    assert_eq!(s.requeue_after(t(10)), Some(Duration::from_secs(290)));
    let later = fleet.schedule(&PlacementInput::new(&p, t(300))).unwrap();
    assert_eq!(names(&later), ["ok"]);
    assert_eq!(
        later.requeue_at, None,
        "expired tolerations of infeasible clusters do not requeue"
    );
}

#[test]
fn misconfigured_spec_is_not_scheduled_and_explains_itself() {
    let w = World::global("ns").cluster(Cluster::test("a"));
    let p = Placement::new("ns", "p").prioritizer(ScoreCoordinate::built_in("Cheapest"), 1);
    let err = w
        .fleet()
        .schedule(&PlacementInput::new(&p, t(0)))
        .unwrap_err();
    assert!(err.accepted_by_ocm());
    let ScheduleError::Misconfigured { errors, .. } = &err;
    assert_eq!(errors[0].kind, ErrorKind::Misconfigured);
    let conds = err.conditions();
    let mis = conds
        .iter()
        .find(|c| c.type_ == ConditionType::PlacementMisconfigured)
        .unwrap();
    assert_eq!(mis.status, ConditionStatus::True);
    assert!(
        mis.message
            .contains("unknown built-in prioritizer \"Cheapest\""),
        "{}",
        mis.message
    );
    assert!(
        err.to_string()
            .starts_with("placement ns/p is misconfigured: spec.prioritizerPolicy")
    );

    let invalid = Placement::new("ns", "p").prioritizer(ScoreCoordinate::built_in("Steady"), 11);
    let err = w
        .fleet()
        .schedule(&PlacementInput::new(&invalid, t(0)))
        .unwrap_err();
    assert!(!err.accepted_by_ocm(), "OCM's API would reject this one");
}

#[test]
fn do_not_schedule_spread_caps_selection_and_reports_unscheduled() {
    let w = World::global("ns")
        .clusters(["a1", "a2", "a3"].map(|n| Cluster::test(n).label("zone", "a")))
        .cluster(Cluster::test("b1").label("zone", "b"))
        .cluster(Cluster::test("nozone"));
    let p = Placement::new("ns", "p")
        .number_of_clusters(4)
        .spread(SpreadConstraint::label(
            "zone",
            1,
            WhenUnsatisfiable::DoNotSchedule,
        ));
    let (s, debug) = w.fleet().explain(&PlacementInput::new(&p, t(0))).unwrap();
    assert_eq!(names(&s), ["a1", "a2", "b1"]);
    let sat = s
        .status
        .condition(ConditionType::PlacementSatisfied)
        .unwrap();
    assert_eq!(sat.reason, Reason::NotAllDecisionsScheduled);
    assert!(
        sat.message.starts_with("1 cluster decisions unscheduled"),
        "{}",
        sat.message
    );
    assert_eq!(
        debug.cluster("a3").unwrap().not_selected_reason.as_deref(),
        Some("selecting it would exceed maxSkew 1 in domain zone=a (spread constraint 0)")
    );
    assert_eq!(
        debug
            .cluster("nozone")
            .unwrap()
            .not_selected_reason
            .as_deref(),
        Some("missing topology key \"zone\" of spread constraint 0 (DoNotSchedule)")
    );
}

#[test]
fn schedule_anyway_spread_balances_but_fills_the_count() {
    let w = World::global("ns")
        .clusters(["a1", "a2", "a3"].map(|n| Cluster::test(n).label("zone", "a")))
        .cluster(Cluster::test("b1").label("zone", "b"));
    let p = Placement::new("ns", "p")
        .number_of_clusters(2)
        .spread(SpreadConstraint::label(
            "zone",
            1,
            WhenUnsatisfiable::ScheduleAnyway,
        ));
    assert_eq!(names(&run(&w, &p)), ["a1", "b1"]);
    let p4 = p.number_of_clusters(4);
    let s = run(&w, &p4);
    assert_eq!(names(&s).len(), 4);
    assert_eq!(reason(&s), Reason::AllDecisionsScheduled);
}

#[test]
fn debug_explains_each_filter_and_score() {
    let w = World::global("ns")
        .cluster(Cluster::test("gone").deleting(true))
        .cluster(Cluster::test("dev").label("env", "dev"))
        .cluster(Cluster::test("prod").label("env", "prod"))
        .cluster(Cluster::test("prod2").label("env", "prod"));
    let p = Placement::new("ns", "p").number_of_clusters(1).predicate(
        LabelSelector::default().label("env", "prod"),
        LabelSelector::default(),
    );
    let (_, debug) = w.fleet().explain(&PlacementInput::new(&p, t(0))).unwrap();
    assert_eq!(debug.eligible_sets, ["global"]);
    let names: Vec<&str> = debug.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["dev", "gone", "prod", "prod2"]);

    let gone = debug.cluster("gone").unwrap();
    assert_eq!(gone.filters.len(), 1);
    assert_eq!(
        (gone.filters[0].filter, gone.filters[0].passed),
        (Filter::Deleting, false)
    );

    let dev = debug.cluster("dev").unwrap();
    let last = dev.filters.last().unwrap();
    assert_eq!((last.filter, last.passed), (Filter::Predicates, false));
    assert_eq!(
        last.reason.as_deref(),
        Some("no predicate matched (predicates[0]: labelSelector does not match)")
    );
    assert_eq!(dev.total, None);

    let prod = debug.cluster("prod").unwrap();
    assert!(prod.selected);
    assert_eq!(prod.rank, Some(0));
    let scores: Vec<(&str, i32, i64)> = prod
        .scores
        .iter()
        .map(|s| (s.prioritizer.as_str(), s.weight, s.score))
        .collect();
    assert_eq!(scores, [("Balance", 1, 100), ("Steady", 1, 0)]);
    assert_eq!(prod.total, Some(100));

    let prod2 = debug.cluster("prod2").unwrap();
    assert!(!prod2.selected);
    assert_eq!(
        prod2.not_selected_reason.as_deref(),
        Some("rank 1 is beyond numberOfClusters 1")
    );
}

#[test]
fn explain_and_schedule_agree() {
    let w = World::global("ns")
        .clusters((0..50).map(|i| Cluster::test(&format!("c{i:02}")).cpu(f64::from(i % 7))));
    let p = Placement::new("ns", "p")
        .number_of_clusters(7)
        .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), 3);
    let fleet = w.fleet();
    let input = PlacementInput::new(&p, t(0));
    assert_eq!(
        fleet.schedule(&input).unwrap(),
        fleet.explain(&input).unwrap().0
    );
}

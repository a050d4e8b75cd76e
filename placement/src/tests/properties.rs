//! Properties of the scheduler over random fleets and placements.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::fixtures::t;
use crate::{
    AddOnPlacementScore, ChangeFilter, Cluster, ClusterSelector, Fleet, IntOrString, LabelSelector,
    MAX_DECISIONS_PER_PAGE, ManagedClusterSet, ManagedClusterSetBinding, Placement, PlacementInput,
    Schedule, ScoreCoordinate, SpreadConstraint, Taint, TaintCheck, TaintEffect, Toleration,
    WhenUnsatisfiable, check_taints, eligible_cluster_sets,
};

const NS: &str = "ns";

fn effect() -> impl Strategy<Value = TaintEffect> {
    prop_oneof![
        Just(TaintEffect::NoSelect),
        Just(TaintEffect::PreferNoSelect),
        Just(TaintEffect::NoSelectIfNew)
    ]
}

fn taint() -> impl Strategy<Value = Taint> {
    (
        prop::sample::select(vec!["gpu", "maint", "unreachable"]),
        prop::sample::select(vec!["", "true"]),
        effect(),
        0u64..400,
    )
        .prop_map(|(k, v, e, at)| Taint::new(k, v, e, t(at)))
}

fn cluster(i: usize) -> impl Strategy<Value = Cluster> {
    (
        prop::option::of(prop::sample::select(vec!["s1", "s2"])),
        prop::option::of(prop::sample::select(vec!["prod", "dev"])),
        prop::option::of(prop::sample::select(vec!["a", "b", "c"])),
        prop::option::of(prop::sample::select(vec!["aws", "gcp"])),
        any::<bool>(),
        prop::collection::vec(taint(), 0..3),
        prop::option::of(0u32..64),
        prop::option::of(0u32..64),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            move |(set, env, zone, platform, canary, taints, cpu, mem, deleting)| {
                let mut c = Cluster::new(format!("c{i:03}"));
                if let Some(s) = set {
                    c = c.in_set(s);
                }
                if let Some(e) = env {
                    c = c.label("env", e);
                }
                if let Some(z) = zone {
                    c = c.label("zone", z);
                }
                if let Some(p) = platform {
                    c = c.claim("platform", p);
                }
                if canary {
                    c = c.label("canary", "true");
                }
                c.taints = taints;
                c.allocatable.cpu = cpu.map(f64::from);
                c.allocatable.memory = mem.map(|m| f64::from(m) * 1e9);
                c.deleting(deleting)
            },
        )
}

fn clusters(max: usize) -> impl Strategy<Value = Vec<Cluster>> {
    (0..max).prop_flat_map(|n| (0..n).map(cluster).collect::<Vec<_>>())
}

fn toleration() -> impl Strategy<Value = Toleration> {
    (
        prop::sample::select(vec!["gpu", "maint", "unreachable", ""]),
        prop::option::of(effect()),
        prop::option::of(0i64..400),
        any::<bool>(),
    )
        .prop_map(|(k, e, secs, equal)| {
            let mut tol = if equal && !k.is_empty() {
                Toleration::equal(k, "true")
            } else {
                Toleration::exists(k)
            };
            tol.effect = e;
            tol.toleration_seconds = secs;
            tol
        })
}

fn selector() -> impl Strategy<Value = (LabelSelector, LabelSelector)> {
    prop::sample::select(vec![
        (
            LabelSelector::default().label("env", "prod"),
            LabelSelector::default(),
        ),
        (
            LabelSelector::default().not_in("zone", ["a"]),
            LabelSelector::default(),
        ),
        (
            LabelSelector::default(),
            LabelSelector::default().in_values("platform", ["aws"]),
        ),
        (
            LabelSelector::default().exists("zone"),
            LabelSelector::default().does_not_exist("platform"),
        ),
    ])
}

fn prioritizer() -> impl Strategy<Value = (ScoreCoordinate, i32)> {
    (
        prop::sample::select(vec![
            ScoreCoordinate::built_in("Balance"),
            ScoreCoordinate::built_in("Steady"),
            ScoreCoordinate::built_in("ResourceAllocatableCPU"),
            ScoreCoordinate::built_in("ResourceAllocatableMemory"),
            ScoreCoordinate::add_on("load", "free"),
        ]),
        -10i32..=10,
    )
}

fn spread(hard: bool) -> impl Strategy<Value = Vec<SpreadConstraint>> {
    let whens = if hard {
        vec![
            WhenUnsatisfiable::DoNotSchedule,
            WhenUnsatisfiable::ScheduleAnyway,
        ]
    } else {
        vec![WhenUnsatisfiable::ScheduleAnyway]
    };
    prop::collection::vec(
        (
            prop::sample::select(vec!["zone", "env", "platform"]),
            1i32..3,
            prop::sample::select(whens),
        )
            .prop_map(|(key, skew, when)| {
                if key == "platform" {
                    SpreadConstraint::claim(key, skew, when)
                } else {
                    SpreadConstraint::label(key, skew, when)
                }
            }),
        0..3,
    )
}

fn placement(hard_spread: bool) -> impl Strategy<Value = Placement> {
    (
        prop::collection::vec(selector(), 0..3),
        prop::option::of(0i32..60),
        prop::collection::vec(toleration(), 0..3),
        prop::collection::vec(prioritizer(), 0..4),
        any::<bool>(),
        prop::sample::select(vec![
            IntOrString::hundred_percent(),
            IntOrString::Int(7),
            IntOrString::String("30%".into()),
            IntOrString::Int(1),
            IntOrString::Int(0),
        ]),
        spread(hard_spread),
        prop::sample::select(vec![
            vec![],
            vec!["s1".to_owned()],
            vec!["global".to_owned(), "s2".to_owned()],
            vec!["prod-ab".to_owned(), "s1".to_owned()],
        ]),
    )
        .prop_map(
            |(preds, n, tols, prios, canary_group, size, spread, sets)| {
                let mut p = Placement::new(NS, "p");
                for (l, c) in preds {
                    p = p.predicate(l, c);
                }
                p.number_of_clusters = n;
                p.tolerations = tols;
                for (sc, w) in prios {
                    p = p.prioritizer(sc, w);
                }
                if canary_group {
                    p = p.decision_group(
                        "canary",
                        ClusterSelector::labels(LabelSelector::default().exists("canary")),
                    );
                }
                p.cluster_sets = sets;
                p.spread_policy.spread_constraints = spread;
                p.clusters_per_decision_group(size)
            },
        )
}

/// One change to a cluster, as a cluster actor might publish it.
#[derive(Debug, Clone)]
enum Mutation {
    Label(&'static str, Option<&'static str>),
    Claim(&'static str, Option<&'static str>),
    Cpu(Option<u32>),
    Memory(Option<u32>),
    AddTaint(Taint),
    ClearTaints,
    Deleting(bool),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let value = || {
        prop::option::of(prop::sample::select(vec![
            "prod", "dev", "a", "b", "true", "s1", "s2",
        ]))
    };
    prop_oneof![
        (
            prop::sample::select(vec![
                "env",
                "zone",
                "canary",
                "team",
                crate::CLUSTERSET_LABEL,
            ]),
            value()
        )
            .prop_map(|(k, v)| Mutation::Label(k, v)),
        (
            prop::sample::select(vec!["platform", "zone", "site"]),
            value()
        )
            .prop_map(|(k, v)| Mutation::Claim(k, v)),
        prop::option::of(0u32..64).prop_map(Mutation::Cpu),
        prop::option::of(0u32..64).prop_map(Mutation::Memory),
        taint().prop_map(Mutation::AddTaint),
        Just(Mutation::ClearTaints),
        any::<bool>().prop_map(Mutation::Deleting),
    ]
}

fn mutate(c: &Cluster, m: &Mutation) -> Cluster {
    let mut c = c.clone();
    let set = |map: &mut crate::Pairs, k: &str, v: Option<&str>| match v {
        Some(v) => {
            map.insert(k.to_owned(), v.to_owned());
        }
        None => {
            map.remove(k);
        }
    };
    match m {
        Mutation::Label(k, v) => set(&mut c.labels, k, *v),
        Mutation::Claim(k, v) => set(&mut c.claims, k, *v),
        Mutation::Cpu(v) => c.allocatable.cpu = v.map(f64::from),
        Mutation::Memory(v) => c.allocatable.memory = v.map(|m| f64::from(m) * 1e9),
        Mutation::AddTaint(t) => c.taints.push(t.clone()),
        Mutation::ClearTaints => c.taints.clear(),
        Mutation::Deleting(d) => c.deleting = *d,
    }
    c
}

/// One update to a fleet.
#[derive(Debug, Clone)]
enum Update {
    Change(usize, Mutation),
    Add(Cluster),
    Remove(usize),
    Score(usize, Option<i32>, Option<u64>),
    RemoveScore(usize),
    /// A score for a cluster that may not exist yet.
    ScoreFor(String, i32),
    Bind(Vec<&'static str>),
}

fn update() -> impl Strategy<Value = Update> {
    prop_oneof![
        4 => (any::<usize>(), mutation()).prop_map(|(i, m)| Update::Change(i, m)),
        2 => (cluster(0), 0u32..1000).prop_map(|(mut c, n)| {
            c.name = format!("n{n:03}");
            Update::Add(c)
        }),
        1 => any::<usize>().prop_map(Update::Remove),
        2 => (any::<usize>(), prop::option::of(-100i32..=100), prop::option::of(0u64..600))
            .prop_map(|(i, v, u)| Update::Score(i, v, u)),
        1 => any::<usize>().prop_map(Update::RemoveScore),
        1 => (0u32..1000, -100i32..=100).prop_map(|(n, v)| Update::ScoreFor(format!("n{n:03}"), v)),
        1 => prop::sample::subsequence(vec!["s1", "s2", "global", "prod-ab"], 0..=4).prop_map(Update::Bind),
    ]
}

/// Everything a run needs besides the placement.
#[derive(Debug, Clone)]
struct Case {
    clusters: Vec<Cluster>,
    bindings: Vec<ManagedClusterSetBinding>,
    scores: Vec<AddOnPlacementScore>,
    current: BTreeSet<String>,
    counts: HashMap<String, u32>,
    now: SystemTime,
}

fn sets() -> Vec<ManagedClusterSet> {
    vec![
        ManagedClusterSet::exclusive("s1"),
        ManagedClusterSet::exclusive("s2"),
        ManagedClusterSet::global(),
        ManagedClusterSet::with_selector(
            "prod-ab",
            LabelSelector::default()
                .label("env", "prod")
                .in_values("zone", ["a", "b"]),
        ),
    ]
}

fn case(max: usize) -> impl Strategy<Value = Case> {
    clusters(max).prop_flat_map(|clusters| {
        let n = clusters.len();
        (
            Just(clusters),
            prop::sample::subsequence(vec!["s1", "s2", "global", "prod-ab"], 0..=4),
            prop::collection::vec(
                (
                    any::<bool>(),
                    0u32..5,
                    prop::option::of(-100i32..=100),
                    prop::option::of(0u64..600),
                ),
                n,
            ),
            0u64..500,
        )
            .prop_map(|(clusters, bound, per, now)| {
                let mut current = BTreeSet::new();
                let mut counts = HashMap::new();
                let mut scores = Vec::new();
                for (c, (decided, count, score, until)) in clusters.iter().zip(per) {
                    if decided {
                        current.insert(c.name.clone());
                    }
                    counts.insert(c.name.clone(), count);
                    if let Some(v) = score {
                        let mut s =
                            AddOnPlacementScore::new(c.name.clone(), "load").score("free", v);
                        s.valid_until = until.map(t);
                        scores.push(s);
                    }
                }
                Case {
                    clusters,
                    bindings: bound
                        .into_iter()
                        .map(|s| ManagedClusterSetBinding::new(NS, s))
                        .collect(),
                    scores,
                    current,
                    counts,
                    now: t(now),
                }
            })
    })
}

impl Case {
    fn fleet(&self) -> Fleet {
        Fleet::new(
            self.clusters.clone(),
            sets(),
            self.bindings.clone(),
            self.scores.clone(),
        )
    }

    fn run_on(&self, fleet: &Fleet, p: &Placement, now: SystemTime) -> Schedule {
        let input = PlacementInput::new(p, now)
            .current_decisions(&self.current)
            .other_decision_counts(&self.counts);
        fleet.schedule(&input).expect("generated specs are valid")
    }

    /// Feasible clusters, computed naively from the public building blocks.
    fn feasible(&self, p: &Placement) -> BTreeSet<String> {
        let sets = sets();
        let eligible = eligible_cluster_sets(NS, &p.cluster_sets, &sets, &self.bindings);
        self.clusters
            .iter()
            .filter(|c| !c.deleting && eligible.sets.iter().any(|s| s.contains(c)))
            .filter(|c| {
                p.predicates.is_empty()
                    || p.predicates.iter().any(|pr| {
                        pr.required_cluster_selector
                            .label_selector
                            .matches(&c.labels)
                            && pr
                                .required_cluster_selector
                                .claim_selector
                                .matches(&c.claims)
                    })
            })
            .filter(|c| {
                matches!(
                    check_taints(
                        &c.taints,
                        &p.tolerations,
                        self.current.contains(&c.name),
                        self.now
                    ),
                    TaintCheck::Tolerated { .. }
                )
            })
            .map(|c| c.name.clone())
            .collect()
    }
}

fn check_groups(s: &Schedule) -> Result<(), TestCaseError> {
    let mut seen = BTreeSet::new();
    for page in &s.pages {
        prop_assert!(page.decisions.len() <= MAX_DECISIONS_PER_PAGE);
        let names: Vec<&str> = page.cluster_names().collect();
        prop_assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted within page");
        for n in names {
            prop_assert!(seen.insert(n.to_owned()), "{} in two pages", n);
        }
    }
    prop_assert_eq!(seen.len() as u32, s.status.number_of_selected_clusters);
    let total: u32 = s
        .status
        .decision_groups
        .iter()
        .map(|g| g.cluster_count)
        .sum();
    prop_assert_eq!(total, s.status.number_of_selected_clusters);
    let mut page_no = 0;
    for (i, g) in s.status.decision_groups.iter().enumerate() {
        prop_assert_eq!(g.decision_group_index as usize, i);
        let in_group: usize = g
            .decisions
            .iter()
            .map(|name| {
                page_no += 1;
                s.pages
                    .iter()
                    .find(|p| &p.name == name)
                    .map_or(usize::MAX, |p| p.decisions.len())
            })
            .sum();
        prop_assert_eq!(in_group, g.cluster_count as usize);
    }
    prop_assert_eq!(page_no, s.pages.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decisions_are_feasible_and_groups_partition_them(c in case(250), p in placement(true)) {
        let s = c.run_on(&c.fleet(), &p, c.now);
        let feasible = c.feasible(&p);
        for name in s.selected() {
            prop_assert!(feasible.contains(name), "{} selected but not feasible", name);
        }
        check_groups(&s)?;
    }

    #[test]
    fn count_is_min_of_requested_and_feasible(c in case(120), p in placement(false)) {
        let s = c.run_on(&c.fleet(), &p, c.now);
        let feasible = c.feasible(&p).len();
        let want = p.number_of_clusters.map_or(feasible, |n| (n as usize).min(feasible));
        prop_assert_eq!(s.status.number_of_selected_clusters as usize, want);
    }

    #[test]
    fn same_input_in_any_order_gives_the_same_result(c in case(120), p in placement(true), rot in 0usize..1000) {
        let s = c.run_on(&c.fleet(), &p, c.now);
        let mut shuffled = c.clone();
        shuffled.clusters.reverse();
        if !shuffled.clusters.is_empty() {
            let k = rot % shuffled.clusters.len();
            shuffled.clusters.rotate_left(k);
        }
        shuffled.scores.reverse();
        let again = shuffled.run_on(&shuffled.fleet(), &p, c.now);
        prop_assert_eq!(&s, &again);
        prop_assert_eq!(&s, &c.run_on(&c.fleet(), &p, c.now));
    }

    #[test]
    fn toleration_expiry_is_reported_exactly(c in case(60), p in placement(true)) {
        let fleet = c.fleet();
        let verdicts = |now: SystemTime| -> Vec<(String, bool)> {
            let input = PlacementInput::new(&p, now)
                .current_decisions(&c.current)
                .other_decision_counts(&c.counts);
            let (_, debug) = fleet.explain(&input).unwrap();
            debug
                .clusters
                .iter()
                .filter(|d| d.total.is_some())
                .map(|d| (d.name.clone(), d.prefer_no_select_penalty))
                .collect()
        };
        let s = c.run_on(&fleet, &p, c.now);
        let at_now = verdicts(c.now);
        match s.toleration_expires_at {
            None => prop_assert_eq!(&verdicts(t(1_000_000)), &at_now, "nothing expires"),
            Some(expiry) => {
                prop_assert!(expiry > c.now);
                prop_assert_eq!(&verdicts(expiry - Duration::from_nanos(1)), &at_now, "nothing changes before");
                prop_assert_ne!(&verdicts(expiry), &at_now, "something changes exactly then");
            }
        }
        prop_assert!(s.requeue_at <= s.toleration_expires_at || s.toleration_expires_at.is_none());
    }

    #[test]
    fn changes_the_filter_ignores_never_change_the_schedule(
        c in case(60),
        p in placement(true),
        pick in 0usize..1000,
        m in mutation(),
    ) {
        prop_assume!(!c.clusters.is_empty());
        let i = pick % c.clusters.len();
        let old = c.clusters[i].clone();
        let new = mutate(&old, &m);
        let filter = ChangeFilter::new(&p, &sets(), &c.bindings);
        let decided = c.current.contains(&old.name);
        if !filter.may_be_affected(decided, Some(&old), Some(&new)) {
            let before = c.run_on(&c.fleet(), &p, c.now);
            let mut changed = c.clone();
            changed.clusters[i] = new;
            let after = changed.run_on(&changed.fleet(), &p, c.now);
            prop_assert_eq!(before, after, "{:?} on {} was ignored but moved the schedule", m, old.name);
        }
    }

    #[test]
    fn an_updated_fleet_schedules_like_a_fresh_one(
        c in case(40),
        p in placement(true),
        updates in prop::collection::vec(update(), 0..40),
    ) {
        let mut fleet = c.fleet();
        let mut clusters = c.clusters.clone();
        let mut bindings = c.bindings.clone();
        let mut scores: std::collections::BTreeMap<String, AddOnPlacementScore> = c
            .scores
            .iter()
            .map(|s| (s.cluster.clone(), s.clone()))
            .collect();
        for u in &updates {
            match u {
                Update::Change(i, m) if !clusters.is_empty() => {
                    let k = i % clusters.len();
                    let new = mutate(&clusters[k], m);
                    clusters[k] = new.clone();
                    fleet.upsert_cluster(new);
                }
                Update::Add(new) => {
                    match clusters.iter().position(|x| x.name == new.name) {
                        Some(k) => clusters[k] = new.clone(),
                        None => clusters.push(new.clone()),
                    }
                    fleet.upsert_cluster(new.clone());
                }
                Update::Remove(i) if !clusters.is_empty() => {
                    let gone = clusters.remove(i % clusters.len());
                    prop_assert!(fleet.remove_cluster(&gone.name));
                }
                Update::Score(i, v, until) if !clusters.is_empty() => {
                    let name = clusters[i % clusters.len()].name.clone();
                    let mut s = AddOnPlacementScore::new(name.clone(), "load");
                    if let Some(v) = v {
                        s = s.score("free", *v);
                    }
                    s.valid_until = until.map(t);
                    scores.insert(name, s.clone());
                    fleet.upsert_score(s);
                }
                Update::RemoveScore(i) if !clusters.is_empty() => {
                    let name = clusters[i % clusters.len()].name.clone();
                    let was = scores.remove(&name).is_some();
                    prop_assert_eq!(fleet.remove_score(&name, "load"), was);
                }
                Update::ScoreFor(name, v) => {
                    let s = AddOnPlacementScore::new(name.clone(), "load").score("free", *v);
                    scores.insert(name.clone(), s.clone());
                    fleet.upsert_score(s);
                }
                Update::Bind(sets_bound) => {
                    bindings = sets_bound
                        .iter()
                        .map(|s| ManagedClusterSetBinding::new(NS, *s))
                        .collect();
                    fleet.set_sets(sets(), bindings.clone());
                }
                _ => {}
            }
        }
        let fresh = Fleet::new(
            clusters.clone(),
            sets(),
            bindings,
            scores.values().cloned().collect(),
        );
        let input = PlacementInput::new(&p, c.now)
            .current_decisions(&c.current)
            .other_decision_counts(&c.counts);
        let a = fleet.explain(&input).expect("generated specs are valid");
        let b = fresh.explain(&input).expect("generated specs are valid");
        prop_assert_eq!(a, b);
    }
}

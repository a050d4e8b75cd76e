//! Scheduler benchmarks: one placement with every prioritizer over 10k and 100k clusters, and
//! 1,000 placements rescheduled over a 10k-cluster fleet — all of them, and only those one
//! cluster's label change can affect (what the hub's dispatcher does: filter, rebuild the index,
//! update the index, reschedule the affected), and what updating the index costs.
//!
//! Run with `cargo bench -j 1 -p flotilla-placement --bench schedule`.

use std::collections::{BTreeSet, HashMap};
use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use flotilla_placement::{
    AddOnPlacementScore, ChangeFilter, Cluster, Fleet, LabelSelector, ManagedClusterSet,
    ManagedClusterSetBinding, Placement, PlacementInput, ScoreCoordinate, SpreadConstraint, Taint,
    TaintEffect, Toleration, WhenUnsatisfiable,
};

const NS: &str = "bench";

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn name(i: usize) -> String {
    format!("cluster-{i:06}")
}

/// A fleet of `n` clusters with varied labels, claims, resources, a few taints, and an
/// AddOnPlacementScore per cluster.
fn fleet(n: usize) -> Fleet {
    let envs = ["prod", "staging", "dev"];
    let clusters = (0..n)
        .map(|i| {
            let mut c = Cluster::new(name(i))
                .in_set(format!("s{}", i % 4))
                .label("env", envs[i % 3])
                .label("zone", format!("z{}", i % 10))
                .label("region", format!("r{}", i % 3))
                .claim(
                    "platform.open-cluster-management.io",
                    if i % 2 == 0 { "aws" } else { "gcp" },
                )
                .cpu((4 + (i * 7919) % 60) as f64)
                .memory(((8 + (i * 104_729) % 248) as f64) * 1e9);
            if i % 100 == 1 {
                c = c.taint(Taint::new(
                    "cost",
                    "high",
                    TaintEffect::PreferNoSelect,
                    now(),
                ));
            }
            if i % 100 == 2 {
                c = c.taint(Taint::new("maint", "", TaintEffect::NoSelect, now()));
            }
            c
        })
        .collect();
    let scores = (0..n)
        .map(|i| {
            AddOnPlacementScore::new(name(i), "load")
                .score("free", (i % 201) as i32 - 100)
                .valid_until(now() + Duration::from_secs(3600))
        })
        .collect();
    let mut sets = vec![ManagedClusterSet::global()];
    sets.extend((0..4).map(|s| ManagedClusterSet::exclusive(format!("s{s}"))));
    Fleet::new(
        clusters,
        sets,
        vec![ManagedClusterSetBinding::new(NS, "global")],
        scores,
    )
}

/// Balance (default 1), Steady (default 1), CPU, Memory and AddOn all enabled.
fn all_prioritizers(p: Placement) -> Placement {
    p.prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), 2)
        .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableMemory"), 1)
        .prioritizer(ScoreCoordinate::add_on("load", "free"), 3)
        .toleration(Toleration::exists("maint").seconds(600))
}

fn counts(n: usize) -> HashMap<String, u32> {
    (0..n).map(|i| (name(i), (i % 5) as u32)).collect()
}

fn current(n: usize) -> BTreeSet<String> {
    (0..n).step_by(10).map(name).collect()
}

fn one_placement(c: &mut Criterion) {
    let mut group = c.benchmark_group("one_placement_all_prioritizers");
    group.sample_size(20);
    for n in [10_000usize, 100_000] {
        let fleet = fleet(n);
        let counts = counts(n);
        let current = current(n);
        let predicate = LabelSelector::default().in_values("env", ["prod", "staging"]);
        let cases = [
            (
                "top100",
                all_prioritizers(Placement::new(NS, "p").number_of_clusters(100))
                    .predicate(predicate.clone(), LabelSelector::default()),
            ),
            (
                "all_feasible",
                all_prioritizers(Placement::new(NS, "p"))
                    .predicate(predicate.clone(), LabelSelector::default()),
            ),
            (
                "top1000_spread_zone",
                all_prioritizers(Placement::new(NS, "p").number_of_clusters(1000))
                    .predicate(predicate.clone(), LabelSelector::default())
                    .spread(SpreadConstraint::label(
                        "zone",
                        1,
                        WhenUnsatisfiable::DoNotSchedule,
                    )),
            ),
        ];
        for (label, p) in &cases {
            group.bench_with_input(BenchmarkId::new(*label, n), p, |b, p| {
                b.iter(|| {
                    let input = PlacementInput::new(p, now())
                        .current_decisions(&current)
                        .other_decision_counts(&counts);
                    black_box(fleet.schedule(&input).unwrap())
                })
            });
        }
    }
    group.finish();

    // Indexing only (Fleet::new), inputs cloned outside the measurement.
    let f = fleet(100_000);
    let inputs = (
        f.clusters()
            .iter()
            .map(|c| (**c).clone())
            .collect::<Vec<_>>(),
        f.sets().to_vec(),
        f.bindings().to_vec(),
        f.scores().cloned().collect::<Vec<_>>(),
    );
    let mut build = c.benchmark_group("fleet_index");
    build.sample_size(10);
    build.bench_function("fleet_new_100000", |b| {
        b.iter_batched(
            || inputs.clone(),
            |(cs, sets, bindings, scores)| black_box(Fleet::new(cs, sets, bindings, scores)),
            BatchSize::LargeInput,
        )
    });
    // What the hub does instead of rebuilding: update one cluster in place, publish a clone.
    build.bench_function("fleet_clone_100000", |b| b.iter(|| black_box(f.clone())));
    let relabelled = (*f.clusters()[1236]).clone().label("env", "dev");
    build.bench_function("upsert_one_cluster_100000", |b| {
        b.iter_batched(
            || f.clone(),
            |mut fleet| {
                fleet.upsert_cluster(relabelled.clone());
                black_box(fleet)
            },
            BatchSize::LargeInput,
        )
    });
    build.finish();
}

fn many_placements(c: &mut Criterion) {
    let n = 10_000;
    let fleet = fleet(n);
    let counts = counts(n);
    let placements: Vec<Placement> = (0..1000).map(many).collect();
    // Previous decisions of each placement, from a first run.
    let previous: Vec<BTreeSet<String>> = placements
        .iter()
        .map(|p| {
            let input = PlacementInput::new(p, now()).other_decision_counts(&counts);
            fleet.schedule(&input).unwrap().selected_set()
        })
        .collect();

    let mut group = c.benchmark_group("reschedule");
    group.sample_size(10);
    group.bench_function("1000_placements_10000_clusters", |b| {
        b.iter(|| {
            let mut selected = 0usize;
            for (p, cur) in placements.iter().zip(&previous) {
                let input = PlacementInput::new(p, now())
                    .current_decisions(cur)
                    .other_decision_counts(&counts);
                selected += fleet
                    .schedule(&input)
                    .unwrap()
                    .status
                    .number_of_selected_clusters as usize;
            }
            black_box(selected)
        })
    });
    group.finish();
}

fn many(k: usize) -> Placement {
    let mut p = Placement::new(NS, format!("p{k}"));
    p = match k % 4 {
        0 => p.predicate(
            LabelSelector::default().label("zone", format!("z{}", k % 10)),
            LabelSelector::default(),
        ),
        1 => p.predicate(
            LabelSelector::default().label("env", "prod"),
            LabelSelector::default().in_values("platform.open-cluster-management.io", ["aws"]),
        ),
        2 => p.cluster_set(format!("s{}", k % 4)),
        _ => p,
    };
    if !k.is_multiple_of(5) {
        p = p.number_of_clusters(((k % 50 + 1) * 10) as i32);
    }
    all_prioritizers(p)
}

fn label_change(c: &mut Criterion) {
    let n = 10_000;
    let base = fleet(n);
    let counts = counts(n);
    let placements: Vec<Placement> = (0..1000).map(many).collect();
    let filters: Vec<ChangeFilter> = placements
        .iter()
        .map(|p| ChangeFilter::new(p, base.sets(), base.bindings()))
        .collect();
    let previous: Vec<BTreeSet<String>> = placements
        .iter()
        .map(|p| {
            let input = PlacementInput::new(p, now()).other_decision_counts(&counts);
            base.schedule(&input).unwrap().selected_set()
        })
        .collect();
    // cluster-001236 (prod, aws, zone z6): env prod -> dev is read by the 250 env=prod placements.
    let i = 1236;
    let old = (*base.clusters()[i]).clone();
    let new = old.clone().label("env", "dev");
    let mut group = c.benchmark_group("label_change");
    group.sample_size(10);
    group.bench_function("1000_placements_10000_clusters_env_change", |b| {
        b.iter_batched(
            || base.clone(),
            |mut fleet| {
                // As the hub's dispatcher: filter, update its fleet, publish a copy, reschedule.
                let affected: Vec<usize> = filters
                    .iter()
                    .enumerate()
                    .filter(|(k, f)| {
                        f.may_be_affected(previous[*k].contains(&old.name), Some(&old), Some(&new))
                    })
                    .map(|(k, _)| k)
                    .collect();
                fleet.upsert_cluster(new.clone());
                let fleet = std::sync::Arc::new(fleet.clone());
                let mut selected = 0usize;
                for k in &affected {
                    let input = PlacementInput::new(&placements[*k], now())
                        .current_decisions(&previous[*k])
                        .other_decision_counts(&counts);
                    selected += fleet
                        .schedule(&input)
                        .unwrap()
                        .status
                        .number_of_selected_clusters as usize;
                }
                black_box((affected.len(), selected))
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, one_placement, many_placements, label_change);
criterion_main!(benches);

//! The works inventory at 100,000 works in 1,000 replica sets (100 clusters each), each work
//! with a status of four conditions: what a replica set's reconcile (or a GitRepo page's rows)
//! pays to find its works, what a scrape of `flotilla_hub_works` pays, and what the owner
//! index and the state counts add to each status write.
//!
//! "scan" is how it was done before the index (session-15 review B.13, B.14): a sorted
//! snapshot of every work, filtered by owner label; every work's conditions decoded and
//! counted.
//!
//! Run with `cargo bench -j 1 -p flotilla-hub-core --bench works_inventory`.

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_api::meta::REPLICASET_LABEL;
use flotilla_api::v1::{Condition, ManifestWork, ManifestWorkStatus, ObjectMeta};
use flotilla_hub_core::cluster::StoredWork;
use flotilla_hub_core::cluster::work_states::WorkState;
use flotilla_hub_core::inventory::{Inventory, Tally, WorkInventory};
use std::hint::black_box;

const SETS: usize = 1_000;
const CLUSTERS: usize = 100;

fn work(cluster: usize, set: usize, available: bool) -> StoredWork {
    let condition = |ty: &str, status: &str| Condition {
        r#type: ty.into(),
        status: status.into(),
        reason: "AppliedManifestWorkComplete".into(),
        message: "Apply manifest work complete".into(),
        ..Default::default()
    };
    let available = if available { "True" } else { "False" };
    StoredWork::from(ManifestWork {
        metadata: Some(ObjectMeta {
            name: format!("set-{set:04}"),
            namespace: format!("cluster-{cluster:05}"),
            labels: [(
                REPLICASET_LABEL.to_string(),
                format!("default.set-{set:04}"),
            )]
            .into(),
            ..Default::default()
        }),
        spec: None,
        status: Some(ManifestWorkStatus {
            conditions: vec![
                condition("Applied", "True"),
                condition("Available", available),
                condition("Progressing", "False"),
                condition("Degraded", "False"),
            ],
            ..Default::default()
        }),
        hub: None,
    })
}

fn key(cluster: usize, set: usize) -> String {
    format!("cluster-{cluster:05}/set-{set:04}")
}

fn filled<X: Tally<StoredWork>>(inv: Inventory<StoredWork, X>) -> Inventory<StoredWork, X> {
    for c in 0..CLUSTERS {
        for s in 0..SETS {
            inv.upsert(&key(c, s), work(c, s, true));
        }
    }
    inv
}

fn owner_of(w: &StoredWork) -> Option<&str> {
    w.metadata
        .as_ref()?
        .labels
        .get(REPLICASET_LABEL)
        .map(String::as_str)
}

fn bench(c: &mut Criterion) {
    let indexed = filled(WorkInventory::new(16));
    // No index: what every status write cost before the owner index and the state counts.
    let plain = filled(Inventory::<StoredWork>::new(16));
    let owner = "default.set-0500";
    let mut g = c.benchmark_group("works_inventory_100k");
    g.sample_size(20);
    g.bench_function("one set's works: scan (before)", |b| {
        b.iter(|| {
            let mine: Vec<_> = plain
                .snapshot()
                .into_iter()
                .filter(|w| owner_of(w) == Some(owner))
                .collect();
            black_box(mine)
        })
    });
    g.bench_function("one set's works: owner index", |b| {
        b.iter(|| black_box(indexed.owned_by(owner)))
    });
    g.bench_function("works by state: decode every work (before)", |b| {
        b.iter(|| {
            let mut counts = [0u64; 5];
            for w in plain.snapshot() {
                let deleting = w
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.deletion_timestamp.is_some());
                let state = WorkState::of(deleting, &w.conditions());
                counts[WorkState::ALL.iter().position(|s| *s == state).unwrap_or(0)] += 1;
            }
            black_box(counts)
        })
    });
    g.bench_function("works by state: counters", |b| {
        b.iter(|| black_box(indexed.states()))
    });
    let mut flip = false;
    g.bench_function("a status write: no index", |b| {
        b.iter(|| {
            flip = !flip;
            plain.upsert(&key(7, 7), work(7, 7, flip));
        })
    });
    g.bench_function("a status write: index and counts", |b| {
        b.iter(|| {
            flip = !flip;
            indexed.upsert(&key(7, 7), work(7, 7, flip));
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

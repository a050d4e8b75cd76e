//! `flotilla-load placement`: the hub's placement machinery (dispatcher, one actor per
//! placement, KV persistence of placements and decisions) in this process, against a real
//! nats-server, over a synthetic inventory.
//!
//! Real agents at 10,000–100,000 clusters do not fit one 2-core machine next to the hub (see
//! DESIGN.md §9), so the scenario writes ManagedCluster objects straight into a
//! `ClusterInventory` — exactly what cluster actors publish after each persisted change — and
//! AddOnPlacementScores straight into the score inventory. Everything downstream of the inventory
//! is the production code path: change broadcast → dispatcher (filter per placement, debounce,
//! fleet index rebuild) → actor wake-up → scheduling on the blocking pool → decision pages and
//! status written to JetStream KV → published views.
//!
//! Two measurements:
//! - **one placement, all prioritizers** (Balance, Steady, ResourceAllocatableCPU ×2,
//!   ResourceAllocatableMemory, AddOn ×3) over C clusters: the scheduling run alone (the pure
//!   scheduler on the hub's own fleet snapshot) and the API call end to end (apply → schedule →
//!   decision pages and status stored), for `numberOfClusters: 100` and for all feasible
//!   clusters.
//! - **reschedule**: P placements over C clusters, then one cluster's labels change (a label
//!   many placements select on, one fewer can be affected by, one nobody reads): per change, how
//!   many placements the dispatcher woke and the time until all of them were rescheduled and
//!   stored.

use anyhow::{Context, Result, bail};
use flotilla_api::meta::{self, CLUSTERSET_LABEL, TAINT_UNREACHABLE};
use flotilla_api::v1::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, AddOnScoreCoordinate,
    ClusterClaim, ClusterPredicate, ClusterSelector, LabelSelector, LabelSelectorRequirement,
    ManagedCluster, ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ManagedClusterSpec,
    ManagedClusterStatus, ObjectMeta, Placement, PlacementSpec, PrioritizerConfig,
    PrioritizerPolicy, ScoreCoordinate, Taint, Toleration,
};
use flotilla_bus::connect::{self, NatsConfig};
use flotilla_bus::jetstream::StreamOptions;
use flotilla_hub::clusterset::ClusterSets;
use flotilla_hub::inventory::ClusterInventory;
use flotilla_hub::metrics::Metrics;
use flotilla_hub::placement::{Buckets, Deps, PlacementConfig, Placements};
use flotilla_hub::store::{self, Bucket};
use flotilla_placement::PlacementInput;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

const NS: &str = "load";

/// Settings of the scenario.
#[derive(Debug, Clone)]
pub struct Settings {
    /// NATS URL (a dedicated server: the scenario refuses buckets that already hold placements).
    pub nats_url: String,
    /// Fleet sizes for the one-placement measurement.
    pub clusters: Vec<usize>,
    /// Placements in the reschedule measurement.
    pub placements: usize,
    /// Fleet size of the reschedule measurement.
    pub reschedule_clusters: usize,
    /// Dispatcher debounce.
    pub debounce: Duration,
    /// Scheduling runs of the pure scheduler averaged for the compute time.
    pub repeats: usize,
    /// JetStream replicas of the buckets it opens (3 on a NATS cluster).
    pub replicas: usize,
}

/// One-placement results for one fleet size.
#[derive(Debug, Serialize)]
pub struct OneSummary {
    clusters: usize,
    case: &'static str,
    selected: i32,
    decision_pages: usize,
    schedule_compute_ms_mean: f64,
    schedule_compute_ms_min: f64,
    apply_end_to_end_ms: f64,
    /// Building the fleet index from scratch.
    fleet_rebuild_ms: f64,
    /// Updating one cluster in the index and cloning it for publication (what the hub does).
    fleet_update_and_publish_ms: f64,
}

/// Reschedule results.
#[derive(Debug, Serialize)]
pub struct RescheduleSummary {
    clusters: usize,
    placements: usize,
    apply_all_seconds: f64,
    changed_cluster: String,
    changes: Vec<LabelChange>,
    debounce_ms: f64,
}

/// One label change and what it cost.
#[derive(Debug, Serialize)]
pub struct LabelChange {
    change: String,
    placements_woken: u64,
    placements_with_new_decisions: u64,
    /// From the inventory change until every woken placement was rescheduled and stored
    /// (includes the debounce window); `None` when nothing was woken.
    all_woken_rescheduled_ms: Option<f64>,
}

/// Everything the scenario prints.
#[derive(Debug, Serialize)]
pub struct Summary {
    scenario: &'static str,
    one_placement: Vec<OneSummary>,
    reschedule: RescheduleSummary,
}

fn name(i: usize) -> String {
    format!("cluster-{i:06}")
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// A synthetic cluster like the criterion bench's: varied labels, claims, resources, a few taints.
pub fn cluster(i: usize) -> ManagedCluster {
    let envs = ["prod", "staging", "dev"];
    let mut taints = Vec::new();
    if i % 100 == 1 {
        taints.push(Taint {
            key: "cost".into(),
            value: "high".into(),
            effect: "PreferNoSelect".into(),
            time_added: Some(meta::now()),
        });
    }
    if i % 100 == 2 {
        taints.push(Taint {
            key: "maint".into(),
            value: String::new(),
            effect: "NoSelect".into(),
            time_added: Some(meta::now()),
        });
    }
    if i % 1000 == 3 {
        taints.push(Taint {
            key: TAINT_UNREACHABLE.into(),
            value: String::new(),
            effect: "NoSelect".into(),
            time_added: Some(meta::now()),
        });
    }
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name(i),
            labels: [
                (CLUSTERSET_LABEL.to_string(), format!("s{}", i % 4)),
                ("env".to_string(), envs[i % 3].to_string()),
                ("zone".to_string(), format!("z{}", i % 10)),
                ("region".to_string(), format!("r{}", i % 3)),
            ]
            .into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSpec {
            hub_accepts_client: true,
            lease_duration_seconds: 60,
            taints,
        }),
        status: Some(ManagedClusterStatus {
            allocatable: [
                ("cpu".to_string(), format!("{}", 4 + (i * 7919) % 60)),
                (
                    "memory".to_string(),
                    format!("{}Gi", 8 + (i * 104_729) % 248),
                ),
            ]
            .into(),
            cluster_claims: vec![ClusterClaim {
                name: meta::CLAIM_PLATFORM.into(),
                value: if i.is_multiple_of(2) { "aws" } else { "gcp" }.into(),
            }],
            ..Default::default()
        }),
        hub: None,
    }
}

fn score(i: usize) -> AddOnPlacementScore {
    AddOnPlacementScore {
        metadata: Some(ObjectMeta {
            name: "load".into(),
            namespace: name(i),
            ..Default::default()
        }),
        status: Some(AddOnPlacementScoreStatus {
            conditions: vec![],
            scores: vec![AddOnPlacementScoreItem {
                name: "free".into(),
                value: (i % 201) as i32 - 100,
            }],
            valid_until: Some(meta::timestamp(now() + Duration::from_secs(3600))),
        }),
    }
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
    LabelSelector {
        match_labels: Default::default(),
        match_expressions: vec![LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|s| s.to_string()).collect(),
        }],
    }
}

fn predicate(labels: LabelSelector, claims: Option<LabelSelector>) -> ClusterPredicate {
    ClusterPredicate {
        required_cluster_selector: Some(ClusterSelector {
            label_selector: Some(labels),
            claim_selector: claims,
        }),
    }
}

fn builtin(name: &str, weight: i32) -> PrioritizerConfig {
    PrioritizerConfig {
        score_coordinate: Some(ScoreCoordinate {
            r#type: "BuiltIn".into(),
            built_in: name.into(),
            add_on: None,
        }),
        weight: Some(weight),
    }
}

/// Every prioritizer: Balance and Steady (Additive defaults), CPU ×2, Memory ×1, AddOn ×3, and a
/// toleration of the `maint` taint for 10 minutes.
fn all_prioritizers(mut spec: PlacementSpec) -> PlacementSpec {
    spec.prioritizer_policy = Some(PrioritizerPolicy {
        mode: "Additive".into(),
        configurations: vec![
            builtin("ResourceAllocatableCPU", 2),
            builtin("ResourceAllocatableMemory", 1),
            PrioritizerConfig {
                score_coordinate: Some(ScoreCoordinate {
                    r#type: "AddOn".into(),
                    built_in: String::new(),
                    add_on: Some(AddOnScoreCoordinate {
                        resource_name: "load".into(),
                        score_name: "free".into(),
                    }),
                }),
                weight: Some(3),
            },
        ],
    });
    spec.tolerations.push(Toleration {
        key: "maint".into(),
        operator: "Exists".into(),
        toleration_seconds: Some(600),
        ..Default::default()
    });
    spec
}

fn placement(name: &str, spec: PlacementSpec) -> Placement {
    Placement {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: NS.into(),
            ..Default::default()
        }),
        spec: Some(spec),
        status: None,
    }
}

/// The k-th placement of the reschedule measurement (varied like the criterion bench).
fn many(k: usize) -> Placement {
    let mut spec = PlacementSpec::default();
    match k % 4 {
        0 => spec.predicates.push(predicate(
            expr("zone", "In", &[&format!("z{}", k % 10)]),
            None,
        )),
        1 => spec.predicates.push(predicate(
            expr("env", "In", &["prod"]),
            Some(expr(meta::CLAIM_PLATFORM, "In", &["aws"])),
        )),
        2 => spec.cluster_sets.push(format!("s{}", k % 4)),
        _ => {}
    }
    if !k.is_multiple_of(5) {
        spec.number_of_clusters = Some(((k % 50 + 1) * 10) as i32);
    }
    placement(&format!("p{k:04}"), all_prioritizers(spec))
}

struct Hub {
    inventory: ClusterInventory,
    placements: Placements,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

async fn start(settings: &Settings, clusters: usize) -> Result<Hub> {
    let nats = connect::connect(&NatsConfig::new(&settings.nats_url, "flotilla-load"), None)
        .await
        .with_context(|| format!("connecting to {}", settings.nats_url))?;
    let js = async_nats::jetstream::new(nats);
    let opts = StreamOptions {
        replicas: settings.replicas,
        ..StreamOptions::default()
    };
    let buckets = Buckets::open_unfenced(&js, opts).await?;
    // Fresh state for every fleet size: this is a dedicated server (checked in `run`).
    for (key, p, _) in buckets.placements.load_all().await? {
        let m = p.metadata.unwrap_or_default();
        if m.namespace != NS {
            bail!(
                "the placements bucket holds {key}, not from a previous load run: use a dedicated nats-server"
            );
        }
    }
    let inventory = ClusterInventory::new(200_000);
    for i in 0..clusters {
        inventory.upsert(&name(i), cluster(i));
    }
    let sets = ClusterSets::load(
        Bucket::open(&js, store::CLUSTERSETS, opts).await?,
        Bucket::open(&js, store::BINDINGS, opts).await?,
        inventory.clone(),
    )
    .await?;
    sets.apply_binding(ManagedClusterSetBinding {
        metadata: Some(ObjectMeta {
            name: "global".into(),
            namespace: NS.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetBindingSpec {
            cluster_set: "global".into(),
        }),
        status: None,
    })
    .await
    .map_err(|e| anyhow::anyhow!("binding the global set: {e}"))?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let config = PlacementConfig {
        debounce: settings.debounce,
        ..PlacementConfig::default()
    };
    let (placements, task) = Placements::start(
        Deps {
            buckets,
            clusters: inventory.clone(),
            sets,
            metrics: Arc::new(Metrics::new()),
        },
        config,
        shutdown_rx,
    )
    .await?;
    // Scores straight into the read view, as the score actor publishes them.
    let scores = placements.scores().inventory().clone();
    for i in 0..clusters {
        scores.upsert(
            &flotilla_hub::keys::ObjectRef::new(name(i), "load").inventory_key(),
            score(i),
        );
    }
    // Delete what an earlier run left.
    for v in placements.list(NS) {
        let m = v.placement.metadata.clone().unwrap_or_default();
        placements
            .delete(&m.namespace, &m.name)
            .await
            .map_err(|e| anyhow::anyhow!("cleaning up {}: {e}", m.name))?;
    }
    placements.sync().await;
    Ok(Hub {
        inventory,
        placements,
        shutdown,
        task,
    })
}

impl Hub {
    async fn stop(self) {
        for v in self.placements.list(NS) {
            let m = v.placement.metadata.clone().unwrap_or_default();
            let _ = self.placements.delete(&m.namespace, &m.name).await;
        }
        let _ = self.shutdown.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }

    /// Waits until the dispatcher is idle: every woken placement has been scheduled.
    async fn quiet(&self) {
        let m = self.placements.metrics();
        let mut last = (u64::MAX, u64::MAX);
        let mut stable = 0;
        loop {
            self.placements.sync().await;
            let now = (m.wakeups.get(), m.schedule_count());
            if now == last {
                stable += 1;
                if stable >= 3 {
                    return;
                }
            } else {
                stable = 0;
            }
            last = now;
            tokio::time::sleep(settle()).await;
        }
    }
}

fn settle() -> Duration {
    Duration::from_millis(50)
}

async fn one_placement(settings: &Settings, clusters: usize) -> Result<Vec<OneSummary>> {
    let hub = start(settings, clusters).await?;
    // The index from scratch, and what the hub's dispatcher does instead after one change:
    // update its fleet in place and publish a copy.
    let (rebuild_ms, update_ms) = {
        let snap = hub.placements.snapshot();
        let (cs, sets, bindings, scores) = (
            snap.fleet
                .clusters()
                .iter()
                .map(|c| (**c).clone())
                .collect::<Vec<_>>(),
            snap.fleet.sets().to_vec(),
            snap.fleet.bindings().to_vec(),
            snap.fleet.scores().cloned().collect::<Vec<_>>(),
        );
        let changed = cs[clusters / 2].clone().label("owner", "team-a");
        let t = Instant::now();
        let f = flotilla_placement::Fleet::new(cs, sets, bindings, scores);
        let rebuild = t.elapsed().as_secs_f64() * 1e3;
        let mut f = std::hint::black_box(f);
        let t = Instant::now();
        f.upsert_cluster(changed);
        let published = Arc::new(f.clone());
        let update = t.elapsed().as_secs_f64() * 1e3;
        drop(std::hint::black_box(published));
        (rebuild, update)
    };
    let mut out = Vec::new();
    let env = predicate(expr("env", "In", &["prod", "staging"]), None);
    let cases: [(&'static str, PlacementSpec); 2] = [
        (
            "top100",
            all_prioritizers(PlacementSpec {
                number_of_clusters: Some(100),
                predicates: vec![env.clone()],
                ..Default::default()
            }),
        ),
        (
            "all-feasible",
            all_prioritizers(PlacementSpec {
                predicates: vec![env],
                ..Default::default()
            }),
        ),
    ];
    for (case, spec) in cases {
        let p = placement(case, spec);
        let t = Instant::now();
        let applied = hub
            .placements
            .apply(p.clone())
            .await
            .map_err(|e| anyhow::anyhow!("apply {case}: {e}"))?;
        let apply_ms = t.elapsed().as_secs_f64() * 1e3;
        let view = hub
            .placements
            .get(NS, case)
            .context("the applied placement")?;
        // The scheduling run alone, on the hub's own snapshot, with the hub's current decisions
        // (Steady) and fleet-wide counts (Balance).
        let spec = flotilla_hub::placement::convert::placement(&applied)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let decided = view.clusters();
        let snap = hub.placements.snapshot();
        let mut times = Vec::new();
        for _ in 0..settings.repeats.max(1) {
            let input = PlacementInput::new(&spec, now())
                .current_decisions(&decided)
                .all_decision_counts(&snap.counts);
            let t = Instant::now();
            let s = snap
                .fleet
                .schedule(&input)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(s);
        }
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        out.push(OneSummary {
            clusters,
            case,
            selected: applied
                .status
                .as_ref()
                .map_or(0, |s| s.number_of_selected_clusters),
            decision_pages: view.decisions.len(),
            schedule_compute_ms_mean: mean,
            schedule_compute_ms_min: min,
            apply_end_to_end_ms: apply_ms,
            fleet_rebuild_ms: rebuild_ms,
            fleet_update_and_publish_ms: update_ms,
        });
        hub.placements
            .delete(NS, case)
            .await
            .map_err(|e| anyhow::anyhow!("delete {case}: {e}"))?;
    }
    hub.stop().await;
    Ok(out)
}

async fn reschedule(settings: &Settings) -> Result<RescheduleSummary> {
    let clusters = settings.reschedule_clusters;
    let hub = start(settings, clusters).await?;
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..settings.placements {
        let p = hub.placements.clone();
        tasks.spawn(async move { p.apply(many(k)).await });
        while tasks.len() >= 32 {
            if let Some(r) = tasks.join_next().await {
                r?.map_err(|e| anyhow::anyhow!("apply: {e}"))?;
            }
        }
    }
    while let Some(r) = tasks.join_next().await {
        r?.map_err(|e| anyhow::anyhow!("apply: {e}"))?;
    }
    hub.quiet().await;
    let apply_all = t.elapsed();

    // One cluster's labels change, three ways: a label 250 placements select on (env), one that
    // 250 placements read but only 50 can be affected by (zone), one nobody reads (owner).
    let i = 1236 % clusters.max(1);
    let mut changes = Vec::new();
    let mut current = cluster(i);
    for (key, value) in [("env", "dev"), ("zone", "z7"), ("owner", "team-a")] {
        let labels = &mut current.metadata.as_mut().unwrap().labels;
        let before = labels.get(key).cloned().unwrap_or_else(|| "(none)".into());
        labels.insert(key.into(), value.into());
        let m = hub.placements.metrics().clone();
        let (w0, s0, d0) = (
            m.wakeups.get(),
            m.schedule_count(),
            m.decision_changes.get(),
        );
        let t = Instant::now();
        hub.inventory.upsert(&name(i), current.clone());
        // Every change is seen once the dispatcher's window has closed; then wait for the woken
        // placements to be rescheduled and stored.
        tokio::time::sleep(settings.debounce).await;
        hub.placements.sync().await;
        let done = loop {
            let woken = m.wakeups.get() - w0;
            if m.schedule_count() - s0 >= woken {
                break t.elapsed();
            }
            if t.elapsed() > Duration::from_secs(120) {
                bail!("placements were not rescheduled within 120 s");
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        };
        hub.quiet().await;
        let woken = m.wakeups.get() - w0;
        changes.push(LabelChange {
            change: format!("{key}: {before} -> {value}"),
            placements_woken: woken,
            placements_with_new_decisions: m.decision_changes.get() - d0,
            all_woken_rescheduled_ms: (woken > 0).then_some(done.as_secs_f64() * 1e3),
        });
    }
    let summary = RescheduleSummary {
        clusters,
        placements: settings.placements,
        apply_all_seconds: apply_all.as_secs_f64(),
        changed_cluster: name(i),
        changes,
        debounce_ms: settings.debounce.as_secs_f64() * 1e3,
    };
    hub.stop().await;
    Ok(summary)
}

/// Runs both measurements and returns the summary.
pub async fn run(settings: Settings) -> Result<Summary> {
    let mut one = Vec::new();
    for &c in &settings.clusters {
        one.extend(one_placement(&settings, c).await?);
    }
    let reschedule = reschedule(&settings).await?;
    Ok(Summary {
        scenario: "placement",
        one_placement: one,
        reschedule,
    })
}

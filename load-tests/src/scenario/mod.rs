//! The fleet scenarios, one file each. They share [`Run`]: a topology (attached or
//! self-started), the fleet's settings, and the steps every scenario is built from — start the
//! fleet and wait until the hub shows it Available, apply one work per cluster with bounded
//! concurrency (retrying while the hub is away), and wait for the works to converge.
//!
//! - [`register`]: C clusters register; time and per-cluster latency to Available.
//! - [`apply`]: the hub's ApplyWork path alone (clusters created ahead of agents, no fleet).
//! - [`fanout`]: one work to every cluster, then the same round trips over bare NATS
//!   ([`transport`]) for `efficiency`.
//! - [`storm`]: every agent cut off, the work changed, all reconnect at once.
//! - [`hub_restart`]: `kill -9` of the hub mid-fanout, restart, nothing lost.
//! - [`ha`]: N hubs share the fleet; fanout, then one hub killed: takeover time.
//! - [`flapping`]: a share of the fleet flapping while the work changes.
//! - [`gitops`]: a Git repository of bundles followed over every cluster; one commit to every
//!   bundle until every cluster runs it.
//! - [`policy`]: one inform policy over every cluster until all reported, then enforced until
//!   every cluster is Compliant.
//! - [`proxy`]: a 20 MiB list and 1,000 watches through the cluster proxy; with `--sessions`
//!   exec and port-forward sessions ([`sessions`]).
//! - [`steady`]: the idle fleet renewing its leases: hub CPU and message rate.
//! - [`teams`]: C clusters in T teams' sets: a team's lists, gets and watches against the
//!   fleet admin's, a set move, the set index and the proxy's grant decision (issue 48).
//! - [`transport`]: the transport limit alone.

pub mod apply;
pub mod fanout;
pub mod flapping;
pub mod gitops;
pub mod ha;
pub mod hub_metrics;
pub mod hub_restart;
pub mod policy;
pub mod proxy;
pub mod register;
pub mod sessions;
pub mod steady;
pub mod storm;
pub mod streams;
pub mod teams;
pub mod transport;

use crate::fleet::{FleetArgs, LoadFleet};
use crate::report::{Sampler, Summary};
use crate::topology::Topology;
use crate::watch::{ClusterWatch, WorkWatch};
use anyhow::{Context, Result};
use flotilla_api::v1::ManifestWork;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// The name of the work every scenario sends.
pub const WORK: &str = "load";

/// A scenario's setting.
pub struct Run {
    /// Where it runs.
    pub topology: Topology,
    /// The fleet.
    pub fleet: FleetArgs,
    /// Bound of each phase of the run (the fleet's start, a first version, the measured phase):
    /// a scenario that has several calls [`Run::next_phase`] between them.
    pub timeout: Duration,
    /// Concurrent ApplyWork calls.
    pub concurrency: usize,
    /// ApplyWorks streams at once (0: ApplyWork calls).
    pub streams: usize,
    /// Where plots go.
    pub out: Option<PathBuf>,
    /// When the run (or its current phase) began.
    pub started: Instant,
}

/// Phases a scenario may bound one by one ([`Run::next_phase`]); the whole run is bounded by
/// this many timeouts (and two minutes to stop its processes).
pub const PHASES: u32 = 3;

impl Run {
    /// The current phase's deadline.
    pub fn deadline(&self) -> Instant {
        self.started + self.timeout
    }

    /// Starts the next phase's timeout: at 100,000 clusters the fleet's start (11 min) and a
    /// first version (25 min) left the reconnect storm under 5 minutes of a 40-minute budget
    /// counted from the run's start.
    pub fn next_phase(&mut self) {
        self.started = Instant::now();
    }

    /// A gRPC channel to the hub (connects lazily, so it survives a hub restart).
    pub fn channel(&self) -> Result<Channel> {
        Ok(
            tonic::transport::Endpoint::from_shared(self.topology.hub_endpoint.clone())
                .context("the hub endpoint")?
                .connect_timeout(Duration::from_secs(5))
                .connect_lazy(),
        )
    }

    /// Cluster name prefix with its dash.
    pub fn prefix(&self) -> String {
        format!("{}-", self.fleet.name_prefix)
    }

    /// Starts the fleet and waits until the hub shows every cluster Available; applies the
    /// profile's taints. Returns the fleet, the cluster watch and the time it took.
    pub async fn start_fleet(&mut self) -> Result<(LoadFleet, ClusterWatch, Duration)> {
        let mut clusters = ClusterWatch::start(self.topology.hub_endpoint.clone(), self.prefix());
        let t0 = Instant::now();
        let mut fleet = LoadFleet::start(&self.topology, &self.fleet).await?;
        let want = self.fleet.clusters;
        let deadline = self.deadline();
        loop {
            let step = (Instant::now() + Duration::from_secs(2)).min(deadline);
            match clusters.wait_available(want, step).await {
                Ok(()) => break,
                Err(n) if Instant::now() >= deadline => {
                    fleet.stop().await;
                    anyhow::bail!(
                        "only {n} of {want} clusters Available within the run's {:?}; hub log:\n{}",
                        self.timeout,
                        self.topology.hub_log_tail()
                    );
                }
                Err(_) => fleet.check_running()?,
            }
        }
        let took = t0.elapsed();
        self.apply_taints().await?;
        Ok((fleet, clusters, took))
    }

    async fn apply_taints(&self) -> Result<()> {
        let Some(profile) = self.fleet.load_profile()? else {
            return Ok(());
        };
        if profile.taints.is_empty() {
            return Ok(());
        }
        let config = flotilla_sim::FleetConfig::new("", 0).with_profile(profile);
        let mut api =
            flotilla_api::v1::cluster_service_client::ClusterServiceClient::new(self.channel()?);
        for n in 0..self.fleet.clusters {
            let taints = flotilla_sim::taints(&config, n + 1);
            if taints.is_empty() {
                continue;
            }
            api.taint_cluster(flotilla_api::v1::TaintClusterRequest {
                name: self.fleet.name(n),
                add: taints
                    .into_iter()
                    .map(|(key, value, effect)| flotilla_api::v1::Taint {
                        key,
                        value,
                        effect,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .await
            .with_context(|| format!("tainting {}", self.fleet.name(n)))?;
        }
        Ok(())
    }

    /// Applies version `version` of the load work to every cluster (see [`Applier::apply`]).
    pub async fn apply_all(&self, version: u32, works: &WorkWatch) -> Result<u64> {
        self.applier()?
            .apply(self.fleet.names(), version, works)
            .await
    }

    /// A handle that applies works, independent of the run (to apply while the hub restarts).
    pub fn applier(&self) -> Result<Applier> {
        Ok(Applier {
            api: WorkServiceClient::new(self.channel()?),
            concurrency: self.concurrency.max(1),
            streams: self.streams,
            deadline: self.deadline(),
        })
    }

    /// The fleet's resident memory now, in all and per agent (the simulator processes', or this
    /// process's for an in-process fleet).
    pub fn record_fleet_rss(&self, fleet: &LoadFleet, summary: &mut Summary) {
        let rss: u64 = fleet
            .pids()
            .iter()
            .filter_map(|p| crate::report::rss_bytes(*p))
            .sum();
        summary.set("fleet_rss_bytes", rss);
        summary.set(
            "fleet_rss_per_agent_bytes",
            rss / self.fleet.clusters.max(1) as u64,
        );
    }

    /// Records the hub's current RSS divided by the fleet's size (`hub_rss_per_cluster_bytes`).
    pub fn record_hub_rss_per_cluster(&self, summary: &mut Summary) {
        if let Some(rss) = self.topology.hub_pid().and_then(crate::report::rss_bytes) {
            summary.set(
                "hub_rss_per_cluster_bytes",
                rss / self.fleet.clusters.max(1) as u64,
            );
        }
    }

    /// Writes the plots of a phase (with `--out`) and names them in the summary.
    pub fn plot(&self, summary: &mut Summary, works: &WorkWatch, sampler: Sampler) -> Result<()> {
        let plots = crate::plots::write(
            self.out.as_deref(),
            summary.scenario,
            &works.latencies_ms(),
            &sampler.finish(),
        )?;
        if !plots.is_empty() {
            summary.set("plots", plots);
        }
        Ok(())
    }

    /// Waits until every cluster's work converged (or the deadline); fills the summary's
    /// percentiles and `converged`, counting the works that did not as errors.
    pub async fn wait_works(&self, works: &mut WorkWatch, summary: &mut Summary) {
        let want = self.fleet.clusters;
        let got = works.wait_done(want, self.deadline()).await;
        summary.clusters_converged = Some(works.done());
        summary.latencies(&works.latencies_ms());
        match got {
            Ok(()) => summary.converged = summary.errors == 0,
            Err(n) => {
                summary.errors += (want - n) as u64;
                summary.converged = false;
                summary.set("not_converged_examples", works.missing(5));
            }
        }
    }
}

/// Binds the default cluster set to `namespace` (what a Placement there needs to choose from
/// it).
pub async fn bind_default_set(channel: &Channel, namespace: &str) -> Result<()> {
    flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient::new(channel.clone())
        .apply_binding(flotilla_api::v1::ManagedClusterSetBinding {
            metadata: Some(flotilla_api::v1::ObjectMeta {
                name: "default".into(),
                namespace: namespace.into(),
                ..Default::default()
            }),
            spec: Some(flotilla_api::v1::ManagedClusterSetBindingSpec {
                cluster_set: "default".into(),
            }),
            status: None,
        })
        .await
        .context("binding the default set")?;
    Ok(())
}

/// Applies load works with bounded concurrency.
#[derive(Clone)]
pub struct Applier {
    api: WorkServiceClient<Channel>,
    concurrency: usize,
    streams: usize,
    deadline: Instant,
}

impl Applier {
    /// Applies version `version` of the load work to each of `names`, `concurrency` at a time,
    /// telling `works` what to expect. A call the hub cannot answer (it is restarting) is
    /// retried until the run's deadline; the count of calls that failed for good is returned.
    pub async fn apply(&self, names: Vec<String>, version: u32, works: &WorkWatch) -> Result<u64> {
        if self.streams > 0 {
            return self.apply_streamed(names, version, works).await;
        }
        let sem = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        let errors = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        let deadline = self.deadline;
        for name in names {
            let permit = sem.clone().acquire_owned().await?;
            let mut api = self.api.clone();
            let works = works.clone();
            let errors = errors.clone();
            tasks.spawn(async move {
                let work = load_work(&name, version);
                loop {
                    let sent = Instant::now();
                    match api.apply_work(work.clone()).await {
                        Ok(stored) => {
                            let generation =
                                stored.into_inner().metadata.map_or(0, |m| m.generation);
                            works.expect(&name, generation, sent);
                            break;
                        }
                        Err(s) if retryable(&s) && Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(s) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(cluster = %name, error = %s, "apply failed");
                            break;
                        }
                    }
                }
                drop(permit);
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.context("apply task")?;
        }
        Ok(errors.load(Ordering::Relaxed))
    }
}

impl Applier {
    /// [`Applier::apply`] over `ApplyWorks` streams: works refused for a reason worth repeating
    /// or never answered (the hub went away) are sent again until the run's deadline.
    async fn apply_streamed(
        &self,
        names: Vec<String>,
        version: u32,
        works: &WorkWatch,
    ) -> Result<u64> {
        let mut pending = names;
        let mut errors = 0;
        loop {
            let batch: Vec<ManifestWork> = pending.iter().map(|n| load_work(n, version)).collect();
            let (answers, missing) = streams::apply(&self.api, batch, self.streams).await?;
            let mut again: Vec<usize> = missing;
            for a in answers {
                let name = &pending[a.index];
                if a.result.code == 0 {
                    let generation = a.result.metadata.map_or(0, |m| m.generation);
                    works.expect(name, generation, a.sent);
                } else if retryable(&tonic::Status::new(a.result.code.into(), "")) {
                    again.push(a.index);
                } else {
                    errors += 1;
                    tracing::error!(cluster = %name, error = %a.result.message, "apply failed");
                }
            }
            if again.is_empty() {
                return Ok(errors);
            }
            if Instant::now() >= self.deadline {
                return Ok(errors + again.len() as u64);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            again.sort_unstable();
            pending = again.into_iter().map(|i| pending[i].clone()).collect();
        }
    }
}

/// Whether a failed call is worth repeating (the hub is away or busy).
fn retryable(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::ResourceExhausted
            | tonic::Code::Aborted
            | tonic::Code::Cancelled
    )
}

/// The load work of `cluster` at `version`: a ConfigMap, a Deployment and a Service, as an
/// application's smallest real shape.
pub fn load_work(cluster: &str, version: u32) -> ManifestWork {
    let yaml = format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: {cluster}, name: {WORK}, labels: {{flotilla.io/load: "true"}}}}
spec:
  workload:
    manifests:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: web-config, namespace: default}}, data: {{version: "{version}"}}}}
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: web, namespace: default}}
        spec:
          replicas: 2
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec: {{containers: [{{name: web, image: nginx:1.27}}]}}
      - {{apiVersion: v1, kind: Service, metadata: {{name: web, namespace: default}}, spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}}}
"#
    );
    match flotilla_api::ocm::parse_documents(&yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::Work(w)) => w,
        other => unreachable!("the load work is a valid ManifestWork: {other:?}"),
    }
}

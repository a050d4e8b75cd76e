//! A simulated fleet: many real agent instances (in-memory state, [`SimBackend`] clusters) in
//! one process, with varied labels, claims and capacities so that placement and the demo have
//! something to choose from. Each agent has its own NATS connection, like a real edge cluster.
//!
//! [`scores`]: every agent reports `cpuAvailable` / `memAvailable` AddOnPlacementScores; the fleet
//! drifts its clusters' load so the scores move.

#![deny(missing_docs)]

pub mod scores;

use anyhow::Context;
use flotilla_agent::backend::Backend;
use flotilla_agent::backend::sim::{SimBackend, SimConfig};
use flotilla_agent::{AgentConfig, StateConfig};
use flotilla_api::v1::ClusterClaim;
use flotilla_bus::connect::NatsArgs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How the fleet is built.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// NATS connection of every agent (URL, credentials, CA).
    pub nats: NatsArgs,
    /// Number of clusters.
    pub clusters: usize,
    /// Name prefix (`sim` → `sim-0001`).
    pub name_prefix: String,
    /// Index of the first cluster (to run several simulators side by side).
    pub first_index: usize,
    /// Agents started per second (0 = all at once).
    pub start_rate: u32,
    /// Pending poll interval of each agent.
    pub pending_poll: Duration,
    /// Status check interval of each agent.
    pub status_interval: Duration,
    /// How often each agent observes its work resources.
    pub work_status_interval: Duration,
    /// Periodic spec resync of each agent (besides reconnects).
    pub resync_interval: Duration,
    /// Time for simulated workloads to become ready.
    pub ready_delay: Duration,
    /// AddOnPlacementScore reports (`None` = none).
    pub scores: Option<scores::ScoreConfig>,
    /// Where each agent keeps its state and its simulated cluster (`DIR/<cluster>/`), so that a
    /// restarted simulator comes back as the same agents with the same works, like real ones.
    /// `None`: memory only.
    pub state_dir: Option<PathBuf>,
    /// Secure mode: every agent registers with these bootstrap credentials and then uses the
    /// credentials the hub issues it.
    pub bootstrap_creds: Option<PathBuf>,
}

impl FleetConfig {
    /// Defaults for `clusters` clusters on `nats_url`.
    pub fn new(nats_url: &str, clusters: usize) -> Self {
        Self {
            nats: NatsArgs::url(nats_url),
            clusters,
            name_prefix: "sim".into(),
            first_index: 1,
            start_rate: 500,
            pending_poll: Duration::from_secs(5),
            status_interval: Duration::from_secs(10),
            work_status_interval: Duration::from_secs(2),
            resync_interval: Duration::from_secs(300),
            ready_delay: Duration::from_secs(1),
            state_dir: None,
            bootstrap_creds: None,
            scores: Some(scores::ScoreConfig::every(Duration::from_secs(30))),
        }
    }
}

const REGIONS: [&str; 4] = ["eu-west", "us-east", "us-west", "ap-south"];
const ENVS: [&str; 3] = ["prod", "staging", "dev"];
const PLATFORMS: [&str; 4] = ["AWS", "GCP", "Azure", "Other"];
const CPUS: [u32; 5] = [4, 8, 16, 32, 64];
const MEMS: [u32; 5] = [16, 32, 64, 128, 256];
const VERSIONS: [&str; 3] = ["v1.29.6", "v1.30.2", "v1.31.1"];

/// The name of the `i`-th simulated cluster.
pub fn cluster_name(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i:04}")
}

/// The profile of the `i`-th cluster: deterministic, so runs are repeatable.
pub fn profile(config: &FleetConfig, i: usize) -> (AgentConfig, SimBackend) {
    let name = cluster_name(&config.name_prefix, i);
    let mut agent = AgentConfig::new(&name, &config.nats.url);
    config.nats.apply_to(&mut agent.nats);
    agent.state = StateConfig::Memory;
    agent.bootstrap_creds = config.bootstrap_creds.clone();
    agent.pending_poll = config.pending_poll;
    agent.status_interval = config.status_interval;
    agent.work_status_interval = config.work_status_interval;
    agent.resync_interval = config.resync_interval;
    agent.score_interval = config.scores.as_ref().map(|s| s.interval);
    // Simulated agents share one process: keep per-connection buffers small.
    agent.nats.client_capacity = 64;
    agent.nats.subscription_capacity = 256;
    let region = REGIONS[i % REGIONS.len()];
    agent.labels.insert("region".into(), region.into());
    agent
        .labels
        .insert("env".into(), ENVS[(i / 4) % ENVS.len()].into());
    agent.labels.insert(
        "purpose".into(),
        if i.is_multiple_of(5) { "test" } else { "serve" }.into(),
    );
    if i.is_multiple_of(10) {
        agent.labels.insert("canary".into(), "true".into());
    }
    agent.claims.push(ClusterClaim {
        name: "region.open-cluster-management.io".into(),
        value: region.into(),
    });
    agent.claims.push(ClusterClaim {
        name: "site.flotilla.io".into(),
        value: format!("site-{}", i % 50),
    });
    let backend = SimBackend::new(
        CPUS[i % CPUS.len()],
        MEMS[(i / 3) % MEMS.len()],
        VERSIONS[i % VERSIONS.len()],
    )
    .with_platform(PLATFORMS[(i / 2) % PLATFORMS.len()])
    .with_config(SimConfig {
        ready_delay: config.ready_delay,
        ..SimConfig::default()
    });
    (agent, backend)
}

/// A running fleet.
pub struct Fleet {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// The clusters' backends, for failure injection.
    pub backends: Vec<(String, Arc<SimBackend>)>,
}

impl Fleet {
    /// Starts every agent (at `start_rate` per second). Fails when a state directory cannot
    /// be used (unwritable, or holding another cluster's state).
    pub async fn start(config: &FleetConfig) -> anyhow::Result<Self> {
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut backends = Vec::with_capacity(config.clusters);
        for n in 0..config.clusters {
            let i = config.first_index + n;
            let (mut agent, backend) = profile(config, i);
            let backend = match &config.state_dir {
                Some(dir) => {
                    let dir = dir.join(&agent.cluster_name);
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                    agent.state = StateConfig::Dir(dir.clone());
                    backend
                        .persisted(dir.join("sim-cluster.json"))
                        .map_err(anyhow::Error::msg)?
                }
                None => backend,
            };
            let backend = Arc::new(backend);
            backends.push((agent.cluster_name.clone(), backend.clone()));
            let mut rx = stop_rx.clone();
            let b: Arc<dyn Backend> = backend;
            tasks.spawn(async move {
                let name = agent.cluster_name.clone();
                let shutdown = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = flotilla_agent::run(agent, b, shutdown).await {
                    tracing::error!(cluster = %name, error = %e, "simulated agent failed");
                }
            });
            if config.start_rate > 0 && (n + 1) % config.start_rate.max(1) as usize == 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        if let Some(sc) = &config.scores {
            let drifting = backends
                .iter()
                .enumerate()
                .map(|(n, (_, b))| (b.clone(), config.first_index + n))
                .collect();
            tasks.spawn(scores::drift(drifting, sc.clone(), stop_rx.clone()));
        }
        Ok(Self {
            stop,
            tasks,
            backends,
        })
    }

    /// Stops every agent and waits for them.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn profiles_are_varied_valid_and_deterministic() {
        let cfg = FleetConfig::new("nats://127.0.0.1:4222", 20);
        let mut regions = std::collections::HashSet::new();
        for i in 1..=20 {
            let (a, b) = profile(&cfg, i);
            assert!(a.validate().is_empty(), "{:?}", a.validate());
            regions.insert(a.labels["region"].clone());
            assert_eq!(profile(&cfg, i).0.labels, a.labels);
            assert!(!b.info().await.capacity["cpu"].is_empty());
        }
        assert_eq!(regions.len(), REGIONS.len());
        assert_eq!(cluster_name("sim", 7), "sim-0007");
    }
}

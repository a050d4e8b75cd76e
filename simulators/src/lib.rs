//! A simulated fleet: many real agent instances (in-memory state, [`SimBackend`] clusters) in
//! one process, with varied labels, claims and capacities so that placement and the demo have
//! something to choose from. Each agent has its own NATS connection, like a real edge cluster.
//!
//! - [`profile`]: fleet profile files (label, claim, capacity, taint and failure distributions,
//!   and the connectivity model); without one, the built-in fleet of [`cluster`].
//! - [`fleet`]: the running fleet, one slot per cluster whose link can go down and up.
//! - [`connectivity`]: flapping, outages and restarts played against the fleet.
//! - `latency`: slow links — a relay per latency class holding bytes for half the round trip
//!   each way.
//! - [`scores`]: every agent reports `cpuAvailable` / `memAvailable` AddOnPlacementScores; the
//!   fleet drifts its clusters' load so the scores move.
//! - Add-ons: every agent runs the add-on agents its cluster's Deployments declare
//!   (`flotilla/fleet-metrics`) in-process ([`FleetConfig::simulate_addons`], on by default).

#![deny(missing_docs)]

pub mod connectivity;
pub mod fleet;
mod latency;
pub mod profile;
pub mod scores;

pub use fleet::Fleet;
pub use profile::FleetProfile;

use flotilla_agent::backend::sim::{SimBackend, SimConfig};
use flotilla_agent::{AgentConfig, StateConfig};
use flotilla_api::v1::ClusterClaim;
use flotilla_bus::connect::NatsArgs;
use std::path::PathBuf;
use std::time::Duration;

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
    /// How long a work reports `Repaired` after a repair (the agent's drift window).
    pub drift_window: Duration,
    /// Periodic spec resync of each agent (besides reconnects).
    pub resync_interval: Duration,
    /// Time for simulated workloads to become ready (a profile's `readyDelayMs` overrides it).
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
    /// A fleet profile; `None` is the built-in fleet with always-up links.
    pub profile: Option<FleetProfile>,
    /// The metrics every agent of the fleet counts into.
    pub metrics: std::sync::Arc<flotilla_agent::metrics::AgentMetrics>,
    /// Agents per NATS connection (0 or 1: one connection each, like real clusters). Sharing
    /// cuts memory and the server's connection count for very large fleets; not with
    /// `bootstrap_creds`.
    pub share_connections: usize,
    /// Run the add-on agents the simulated clusters' Deployments declare (the example
    /// `flotilla/fleet-metrics`) inside each agent ([`AgentConfig::simulate_addons`]); on by
    /// default, so add-ons installed from the hub report leases and scores.
    pub simulate_addons: bool,
    /// Serve the hub's cluster-proxy calls from each simulated cluster
    /// ([`AgentConfig::cluster_proxy`]); on by default.
    pub cluster_proxy: bool,
    /// Play agents that predate the one-subscription wire ([`AgentConfig::legacy_wire`]):
    /// three or four subscriptions each, against a hub of the compatibility window. Off by
    /// default (one subscription per agent).
    pub legacy_wire: bool,
    /// The longest ServiceAccount token a simulated cluster issues (a cloud's cap on token
    /// lifetimes, [`SimConfig::token_max_lifetime`]); `None`: what is asked.
    pub token_max_lifetime: Option<Duration>,
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
            drift_window: Duration::from_secs(60),
            resync_interval: Duration::from_secs(300),
            ready_delay: Duration::from_secs(1),
            state_dir: None,
            bootstrap_creds: None,
            scores: Some(scores::ScoreConfig::every(Duration::from_secs(30))),
            profile: None,
            metrics: std::sync::Arc::default(),
            share_connections: 0,
            simulate_addons: true,
            cluster_proxy: true,
            legacy_wire: false,
            token_max_lifetime: None,
        }
    }

    /// Uses `profile`, taking its score interval when it sets one.
    pub fn with_profile(mut self, profile: FleetProfile) -> Self {
        if let Some(s) = profile.score_interval_seconds {
            self.scores = (s > 0).then(|| scores::ScoreConfig::every(Duration::from_secs(s)));
        }
        self.profile = Some(profile);
        self
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

/// The built-in labels of cluster `i`.
fn builtin_labels(i: usize) -> std::collections::BTreeMap<String, String> {
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("region".into(), REGIONS[i % REGIONS.len()].to_string());
    labels.insert("env".into(), ENVS[(i / 4) % ENVS.len()].to_string());
    labels.insert(
        "purpose".into(),
        if i.is_multiple_of(5) { "test" } else { "serve" }.to_string(),
    );
    if i.is_multiple_of(10) {
        labels.insert("canary".into(), "true".into());
    }
    labels
}

/// The `i`-th cluster: its agent's configuration and its simulated cluster, from the profile
/// (or the built-in fleet for what the profile leaves out). Deterministic, so runs repeat.
pub fn cluster(config: &FleetConfig, i: usize) -> (AgentConfig, SimBackend) {
    let builtin = FleetProfile::default();
    let p = config.profile.as_ref().unwrap_or(&builtin);
    let name = cluster_name(&config.name_prefix, i);
    let mut agent = AgentConfig::new(&name, &config.nats.url);
    config.nats.apply_to(&mut agent.nats);
    agent.state = StateConfig::Memory;
    agent.bootstrap_creds = config.bootstrap_creds.clone();
    agent.pending_poll = config.pending_poll;
    agent.status_interval = config.status_interval;
    agent.work_status_interval = config.work_status_interval;
    agent.drift_window = config.drift_window;
    agent.resync_interval = config.resync_interval;
    agent.score_interval = config.scores.as_ref().map(|s| s.interval);
    agent.metrics = config.metrics.clone();
    agent.simulate_addons = config.simulate_addons;
    agent.cluster_proxy = config.cluster_proxy;
    agent.legacy_wire = config.legacy_wire;
    // Simulated agents share one process: keep per-connection buffers small.
    agent.nats.client_capacity = 64;
    agent.nats.subscription_capacity = 256;
    let labels = p.labels(i).unwrap_or_else(|| builtin_labels(i));
    let claims = p.claims(i, &labels).unwrap_or_else(|| {
        [
            (
                "region.open-cluster-management.io".to_string(),
                labels["region"].clone(),
            ),
            ("site.flotilla.io".to_string(), format!("site-{}", i % 50)),
        ]
        .into_iter()
        .collect()
    });
    agent.labels = labels.into_iter().collect();
    agent.claims = claims
        .into_iter()
        .map(|(name, value)| ClusterClaim { name, value })
        .collect();
    let (cpu, mem) = match &p.capacity {
        Some(c) => (
            c.cpu[(p.draw(i, "cpu") * c.cpu.len() as f64) as usize % c.cpu.len()],
            c.memory_gi
                [(p.draw(i, "memory") * c.memory_gi.len() as f64) as usize % c.memory_gi.len()],
        ),
        None => (CPUS[i % CPUS.len()], MEMS[(i / 3) % MEMS.len()]),
    };
    let version = p
        .choose(i, "kubernetesVersion", p.kubernetes_versions.as_ref())
        .unwrap_or_else(|| VERSIONS[i % VERSIONS.len()].to_string());
    let platform = p
        .choose(i, "platform", p.platforms.as_ref())
        .unwrap_or_else(|| PLATFORMS[(i / 2) % PLATFORMS.len()].to_string());
    let ready_delay = p.ready_delay_ms.map_or(config.ready_delay, |r| {
        Duration::from_millis(p.within(i, "readyDelay", r) as u64)
    });
    let apply_error = p
        .apply_failures
        .as_ref()
        .filter(|f| p.in_share(i, "applyFailure", f.share))
        .map(|f| f.message.clone());
    let backend = SimBackend::new(cpu, mem, &version)
        .with_platform(&platform)
        .with_config(SimConfig {
            ready_delay,
            apply_error,
            token_max_lifetime: config.token_max_lifetime,
            ..SimConfig::default()
        });
    if let Some(r) = p.allocatable {
        let share = p.within(i, "allocatable", r);
        backend.set_allocatable(
            "cpu",
            &format!("{}m", (f64::from(cpu) * 1000.0 * share) as u64),
        );
        backend.set_allocatable(
            "memory",
            &format!("{}Mi", (f64::from(mem) * 1024.0 * share) as u64),
        );
    }
    (agent, backend)
}

/// The taints the profile gives cluster `i` (key, value, effect); the hub sets taints, so
/// `flotilla-load` applies these through the API.
pub fn taints(config: &FleetConfig, i: usize) -> Vec<(String, String, String)> {
    let Some(p) = &config.profile else {
        return Vec::new();
    };
    p.taints
        .iter()
        .filter(|t| p.in_share(i, &format!("taint/{}", t.key), t.share))
        .map(|t| (t.key.clone(), t.value.clone(), t.effect.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_agent::backend::Backend;

    #[tokio::test]
    async fn profiles_are_varied_valid_and_deterministic() {
        let cfg = FleetConfig::new("nats://127.0.0.1:4222", 20);
        let mut regions = std::collections::HashSet::new();
        for i in 1..=20 {
            let (a, b) = cluster(&cfg, i);
            assert!(a.validate().is_empty(), "{:?}", a.validate());
            regions.insert(a.labels["region"].clone());
            assert_eq!(cluster(&cfg, i).0.labels, a.labels);
            assert!(!b.info().await.capacity["cpu"].is_empty());
        }
        assert_eq!(regions.len(), REGIONS.len());
        assert_eq!(cluster_name("sim", 7), "sim-0007");
    }

    #[tokio::test]
    async fn a_profile_shapes_the_clusters_and_the_builtin_fills_the_rest() {
        let profile = FleetProfile::parse(
            "labels: {region: {mars: 1}}\n\
             capacity: {cpu: [2], memoryGi: [4]}\n\
             applyFailures: {share: 1, message: broken}\n\
             taints: [{key: gpu, effect: NoSelect, share: 1}]\n",
            "test",
        )
        .unwrap();
        let cfg = FleetConfig::new("nats://127.0.0.1:4222", 3).with_profile(profile);
        let (a, b) = cluster(&cfg, 1);
        assert_eq!(a.labels["region"], "mars");
        assert!(
            !a.labels.contains_key("env"),
            "the labels section replaces the built-in labels"
        );
        assert!(
            a.claims
                .iter()
                .any(|c| c.name == "region.open-cluster-management.io" && c.value == "mars"),
            "built-in claims mirror the profile's region: {:?}",
            a.claims
        );
        assert_eq!(b.info().await.capacity["cpu"], "2");
        assert_eq!(
            taints(&cfg, 1),
            vec![("gpu".into(), String::new(), "NoSelect".into())]
        );
        let work = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "default"}});
        let id = flotilla_api::work::ManifestId {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "x".into(),
        };
        let e = b
            .apply(&id, &work, &flotilla_agent::backend::Strategy::Update)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("broken"), "{e}");
    }
}

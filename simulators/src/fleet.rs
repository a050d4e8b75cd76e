//! A running fleet: one slot per simulated cluster, holding the cluster (which keeps running)
//! and, while its link is up, its agent.
//!
//! A slot's link is down while any reason holds it down (a flap, an outage, a storm), so
//! overlapping causes compose: the agent runs again when the last one lifts. Taking a link down
//! stops the agent (its connection closes, as when an edge site's uplink drops); bringing it up
//! starts the agent again with the state it had, like a real agent reconnecting after the link
//! returns. A restart without state gives the agent a fresh key and no works, like a
//! reinstalled agent.

use crate::FleetConfig;
use anyhow::Context;
use flotilla_agent::backend::Backend;
use flotilla_agent::backend::sim::SimBackend;
use flotilla_agent::store::LocalStore;
use flotilla_agent::{AgentConfig, StateConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

/// One simulated cluster.
struct Slot {
    config: AgentConfig,
    backend: Arc<SimBackend>,
    /// Memory mode: the agent's state, kept across link drops.
    store: Mutex<Option<Arc<LocalStore>>>,
    /// Reasons the link is down; the agent runs while this is 0.
    down: Mutex<u32>,
    agent: tokio::sync::Mutex<Option<Running>>,
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Counters of link changes (also exported as metrics by `flotilla-sim`).
#[derive(Debug, Default)]
pub struct Counters {
    /// Agents started (first start, returns and restarts).
    pub agent_starts: AtomicU64,
    /// Agents stopped by a link going down.
    pub link_downs: AtomicU64,
    /// Agents restarted by the connectivity model.
    pub restarts: AtomicU64,
    /// Agents that stopped with an error.
    pub agent_failures: AtomicU64,
}

/// A running fleet. Cheap to share: clones see the same clusters.
#[derive(Clone)]
pub struct Fleet {
    slots: Arc<Vec<Slot>>,
    stop: watch::Sender<bool>,
    background: Arc<Mutex<JoinSet<()>>>,
    /// Link and agent counters.
    pub counters: Arc<Counters>,
    /// The clusters' names and backends, for failure injection.
    pub backends: Arc<Vec<(String, Arc<SimBackend>)>>,
}

impl Counters {
    /// The counters in OpenMetrics text (without the closing `# EOF`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, help, c) in [
            (
                "agent_starts",
                "Simulated agents started (first starts, returns and restarts)",
                &self.agent_starts,
            ),
            (
                "link_downs",
                "Links taken down by the connectivity model or a storm",
                &self.link_downs,
            ),
            (
                "restarts",
                "Agents restarted by the connectivity model",
                &self.restarts,
            ),
            (
                "agent_failures",
                "Simulated agents that stopped with an error",
                &self.agent_failures,
            ),
        ] {
            out += &format!(
                "# HELP flotilla_sim_{name} {help}.\n# TYPE flotilla_sim_{name} counter\nflotilla_sim_{name}_total {}\n",
                c.load(Ordering::Relaxed)
            );
        }
        out
    }
}

impl Fleet {
    /// The agents' metrics and the fleet's counters, in OpenMetrics text.
    pub fn render_metrics(&self, agents: &flotilla_agent::metrics::AgentMetrics) -> String {
        let text = agents.render();
        let body = text.strip_suffix("# EOF\n").unwrap_or(&text);
        format!("{body}{}# EOF\n", self.counters.render())
    }

    /// Starts every agent (at `start_rate` per second), then the fleet profile's connectivity
    /// model. Fails when a state directory cannot be used (unwritable, or holding another
    /// cluster's state).
    pub async fn start(config: &FleetConfig) -> anyhow::Result<Self> {
        Self::start_with_progress(config, |_| {}).await
    }

    /// [`Fleet::start`], calling `progress` with the number of agents started so far.
    pub async fn start_with_progress(
        config: &FleetConfig,
        progress: impl Fn(usize),
    ) -> anyhow::Result<Self> {
        let (stop, _) = watch::channel(false);
        // Link-latency relays, served as background tasks of the fleet (ended at stop).
        let (mut urls, mut serving) = (Vec::new(), Vec::new());
        if let Some(p) = &config.profile {
            for l in &p.connectivity.latency {
                let rtt = Duration::from_millis(l.rtt_ms);
                let relay = crate::latency::start(&config.nats.url, rtt).await?;
                urls.push(relay.url);
                serving.push(relay.serve);
            }
        }
        anyhow::ensure!(
            config.share_connections <= 1 || config.bootstrap_creds.is_none(),
            "sharing NATS connections (--share-connections) cannot be combined with secure mode \
             (--bootstrap-creds): each cluster's credentials need a connection of their own"
        );
        // Shared connections: per agent URL (latency classes have their own), one connection
        // for every `share_connections` agents, opened as their groups fill.
        let mut shared: std::collections::HashMap<
            String,
            (flotilla_agent::SharedConnection, usize),
        > = std::collections::HashMap::new();
        let mut slots = Vec::with_capacity(config.clusters);
        for n in 0..config.clusters {
            let i = config.first_index + n;
            let (mut agent, backend) = crate::cluster(config, i);
            if let Some((class, _)) = config.profile.as_ref().and_then(|p| p.link_latency(i)) {
                agent.nats.url = urls[class].clone();
            }
            if config.share_connections > 1 {
                let full = shared
                    .get(&agent.nats.url)
                    .is_none_or(|(_, used)| *used >= config.share_connections);
                if full {
                    let mut nats = agent.nats.clone();
                    nats.name = format!("flotilla-sim-shared-{}", agent.cluster_name);
                    let conn = flotilla_agent::SharedConnection::connect(&nats)
                        .await
                        .with_context(|| format!("connecting to {}", agent.nats.url))?;
                    shared.insert(agent.nats.url.clone(), (conn, 0));
                }
                let (conn, used) = shared.get_mut(&agent.nats.url).expect("just inserted");
                *used += 1;
                agent.connection = Some(conn.clone());
            }
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
            let store = config
                .state_dir
                .is_none()
                .then(|| Arc::new(LocalStore::memory(&agent.cluster_name)));
            slots.push(Slot {
                config: agent,
                backend: Arc::new(backend),
                store: Mutex::new(store),
                down: Mutex::new(0),
                agent: tokio::sync::Mutex::new(None),
            });
        }
        let backends = slots
            .iter()
            .map(|s| (s.config.cluster_name.clone(), s.backend.clone()))
            .collect();
        let fleet = Self {
            slots: Arc::new(slots),
            stop,
            background: Arc::default(),
            counters: Arc::default(),
            backends: Arc::new(backends),
        };
        for serve in serving {
            fleet.spawn(serve);
        }
        let rate = config.start_rate as usize;
        for n in 0..fleet.slots.len() {
            fleet.start_agent(n).await;
            if rate > 0 && (n + 1) % rate == 0 {
                progress(n + 1);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        progress(fleet.slots.len());
        if let Some(sc) = &config.scores {
            let drifting = fleet
                .backends
                .iter()
                .enumerate()
                .map(|(n, (_, b))| (b.clone(), config.first_index + n))
                .collect();
            let rx = fleet.stop.subscribe();
            fleet.spawn(crate::scores::drift(drifting, sc.clone(), rx));
        }
        crate::connectivity::start(&fleet, config);
        Ok(fleet)
    }

    /// Number of clusters.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the fleet has no clusters.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The name of the `n`-th cluster of this fleet (0-based).
    pub fn name(&self, n: usize) -> &str {
        &self.slots[n].config.cluster_name
    }

    /// A receiver that turns true when the fleet stops.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Runs `task` until the fleet stops.
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.background.lock().expect("background lock").spawn(task);
    }

    /// Takes the `n`-th cluster's link down for one more reason (its agent stops when the
    /// first reason arrives).
    pub async fn link_down(&self, n: usize) {
        let first = {
            let mut down = self.slots[n].down.lock().expect("down lock");
            *down += 1;
            *down == 1
        };
        if first {
            self.counters.link_downs.fetch_add(1, Ordering::Relaxed);
            self.stop_agent(n).await;
        }
    }

    /// Lifts one reason the `n`-th cluster's link was down (its agent starts again when no
    /// reason is left).
    pub async fn link_up(&self, n: usize) {
        let last = {
            let mut down = self.slots[n].down.lock().expect("down lock");
            *down = down.saturating_sub(1);
            *down == 0
        };
        if last && !*self.stop.borrow() {
            self.start_agent(n).await;
        }
    }

    /// Every link down at once, concurrently.
    pub async fn all_links_down(&self) {
        let mut set = JoinSet::new();
        for n in 0..self.len() {
            let fleet = self.clone();
            set.spawn(async move { fleet.link_down(n).await });
        }
        while set.join_next().await.is_some() {}
    }

    /// Every link up at once (the reconnect storm).
    pub async fn all_links_up(&self) {
        let mut set = JoinSet::new();
        for n in 0..self.len() {
            let fleet = self.clone();
            set.spawn(async move { fleet.link_up(n).await });
        }
        while set.join_next().await.is_some() {}
    }

    /// Restarts the `n`-th agent; without `keep_state` it comes back with a fresh key and no
    /// works (its simulated cluster keeps its objects, as a reinstalled agent finds them).
    pub async fn restart(&self, n: usize, keep_state: bool) {
        self.counters.restarts.fetch_add(1, Ordering::Relaxed);
        self.stop_agent(n).await;
        if !keep_state {
            let slot = &self.slots[n];
            match &slot.config.state {
                StateConfig::Dir(dir) => {
                    let _ = std::fs::remove_file(dir.join("agent-state.json"));
                    let _ = std::fs::remove_dir_all(dir.join("works"));
                }
                _ => {
                    *slot.store.lock().expect("store lock") =
                        Some(Arc::new(LocalStore::memory(&slot.config.cluster_name)));
                }
            }
        }
        let up = *self.slots[n].down.lock().expect("down lock") == 0;
        if up && !*self.stop.borrow() {
            self.start_agent(n).await;
        }
    }

    async fn start_agent(&self, n: usize) {
        let slot = &self.slots[n];
        let mut agent = slot.agent.lock().await;
        if agent.is_some() {
            return;
        }
        let mut config = slot.config.clone();
        if let Some(store) = slot.store.lock().expect("store lock").clone() {
            config.state = StateConfig::Shared(store);
        }
        let backend: Arc<dyn Backend> = slot.backend.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let counters = self.counters.clone();
        counters.agent_starts.fetch_add(1, Ordering::Relaxed);
        let task = tokio::spawn(async move {
            let name = config.cluster_name.clone();
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(e) = flotilla_agent::run(config, backend, shutdown).await {
                counters.agent_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(cluster = %name, error = %e, "simulated agent failed");
            }
        });
        *agent = Some(Running { stop, task });
    }

    async fn stop_agent(&self, n: usize) {
        let running = self.slots[n].agent.lock().await.take();
        if let Some(r) = running {
            let _ = r.stop.send(());
            let _ = r.task.await;
        }
    }

    /// Stops every agent and background task and waits for them.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let background = std::mem::take(&mut *self.background.lock().expect("background lock"));
        let mut background = background;
        background.abort_all();
        while background.join_next().await.is_some() {}
        let mut set = JoinSet::new();
        for n in 0..self.len() {
            let fleet = self.clone();
            set.spawn(async move { fleet.stop_agent(n).await });
        }
        while set.join_next().await.is_some() {}
    }
}

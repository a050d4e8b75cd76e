//! What the hub says, followed through its watch APIs: which clusters are Available (and which
//! healthy ones ever stopped being so), and when each cluster's work reached the generation the
//! scenario last applied. A watch that breaks (the hub restarted) is opened again; the hub
//! replays the current objects on every new watch, so nothing is missed.

use flotilla_api::meta::{self, COND_AVAILABLE};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{ManifestWork, WatchClustersRequest, WatchWorksRequest};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Clusters as the hub shows them.
#[derive(Clone)]
pub struct ClusterWatch {
    state: Arc<Mutex<ClusterState>>,
    changed: watch::Receiver<usize>,
}

#[derive(Default)]
struct ClusterState {
    /// Clusters the hub knows (registered, not deleted).
    known: HashSet<String>,
    available: HashSet<String>,
    /// Clusters that were Available and then were not, with how often.
    lost: HashMap<String, u32>,
    /// When each cluster was first seen Available.
    first_up: HashMap<String, Instant>,
}

impl ClusterWatch {
    /// Follows the clusters whose names start with `prefix`.
    pub fn start(endpoint: String, prefix: String) -> Self {
        let state = Arc::new(Mutex::new(ClusterState::default()));
        let (tx, changed) = watch::channel(0);
        let s = state.clone();
        let open = move || {
            let endpoint = endpoint.clone();
            async move {
                let mut client = ClusterServiceClient::connect(endpoint).await.ok()?;
                let stream = client
                    .watch_clusters(WatchClustersRequest::default())
                    .await
                    .ok()?;
                Some(stream.into_inner())
            }
        };
        follow(tx, open, move |ev: flotilla_api::v1::ClusterEvent| {
            let c = ev.cluster?;
            let name = c.metadata.as_ref().map(|m| m.name.clone())?;
            if !name.starts_with(&prefix) {
                return None;
            }
            let deleted = ev.r#type == flotilla_api::v1::EventType::Deleted as i32;
            let up = !deleted
                && c.spec.as_ref().is_some_and(|s| s.hub_accepts_client)
                && c.status
                    .as_ref()
                    .and_then(|s| meta::condition_status(&s.conditions, COND_AVAILABLE))
                    == Some("True");
            let mut st = s.lock().expect("cluster watch lock");
            if deleted {
                st.known.remove(&name);
            } else {
                st.known.insert(name.clone());
            }
            if up {
                st.first_up.entry(name.clone()).or_insert_with(Instant::now);
                st.available.insert(name);
            } else if st.available.remove(&name) {
                *st.lost.entry(name).or_default() += 1;
            }
            Some(st.available.len())
        });
        Self { state, changed }
    }

    /// Clusters Available now.
    pub fn available(&self) -> usize {
        self.state
            .lock()
            .expect("cluster watch lock")
            .available
            .len()
    }

    /// Whether the hub knows `name` (it registered and was not deleted).
    pub fn is_known(&self, name: &str) -> bool {
        self.state
            .lock()
            .expect("cluster watch lock")
            .known
            .contains(name)
    }

    /// Whether `name` is Available now.
    pub fn is_available(&self, name: &str) -> bool {
        self.state
            .lock()
            .expect("cluster watch lock")
            .available
            .contains(name)
    }

    /// Clusters that stopped being Available at some point, and how often.
    pub fn lost(&self) -> HashMap<String, u32> {
        self.state.lock().expect("cluster watch lock").lost.clone()
    }

    /// Milliseconds from `since` until each cluster was first Available, sorted.
    pub fn first_available_ms(&self, since: Instant) -> Vec<f64> {
        let st = self.state.lock().expect("cluster watch lock");
        let mut v: Vec<f64> = st
            .first_up
            .values()
            .map(|t| t.saturating_duration_since(since).as_secs_f64() * 1000.0)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Forgets earlier losses (after the fleet first came up).
    pub fn clear_lost(&self) {
        self.state.lock().expect("cluster watch lock").lost.clear();
    }

    /// Waits until at least `n` clusters are Available, or the deadline.
    pub async fn wait_available(&mut self, n: usize, deadline: Instant) -> Result<(), usize> {
        let this = self.clone();
        wait_until(&mut self.changed, n, deadline, || this.available()).await
    }
}

/// One work per cluster (same name in every cluster namespace), followed to convergence:
/// Applied and Available at the generation last applied.
#[derive(Clone)]
pub struct WorkWatch {
    state: Arc<Mutex<WorkState>>,
    changed: watch::Receiver<usize>,
}

#[derive(Default)]
struct WorkState {
    /// Cluster → (generation expected, when it was applied).
    expected: HashMap<String, (i64, Instant)>,
    /// Cluster → highest converged generation seen, and when first seen.
    seen: HashMap<String, (i64, Instant)>,
    /// Cluster → latency of the expected generation, once converged.
    done: HashMap<String, Duration>,
    /// Work changes seen (to count status events).
    events: u64,
}

impl WorkState {
    fn settle(&mut self, cluster: &str) {
        if let (Some((want, sent)), Some((got, at))) =
            (self.expected.get(cluster), self.seen.get(cluster))
            && got >= want
            && !self.done.contains_key(cluster)
        {
            self.done
                .insert(cluster.to_string(), at.saturating_duration_since(*sent));
        }
    }
}

/// The generation a work converged at, if it did.
pub fn converged_generation(w: &ManifestWork) -> Option<i64> {
    let generation = w.metadata.as_ref()?.generation;
    let conds = w.status.as_ref().map(|s| s.conditions.as_slice())?;
    let ok = |t: &str| {
        conds
            .iter()
            .any(|c| c.r#type == t && c.status == "True" && c.observed_generation >= generation)
    };
    (ok("Applied") && ok("Available")).then_some(generation)
}

impl WorkWatch {
    /// Follows the works named `work` in clusters whose names start with `prefix`.
    pub fn start(endpoint: String, prefix: String, work: String) -> Self {
        let state = Arc::new(Mutex::new(WorkState::default()));
        let (tx, changed) = watch::channel(0);
        let s = state.clone();
        let open = move || {
            let endpoint = endpoint.clone();
            async move {
                let mut client = WorkServiceClient::connect(endpoint).await.ok()?;
                let stream = client
                    .watch_works(WatchWorksRequest::default())
                    .await
                    .ok()?;
                Some(stream.into_inner())
            }
        };
        follow(tx, open, move |ev: flotilla_api::v1::WorkEvent| {
            let w = ev.work?;
            let m = w.metadata.as_ref()?;
            if m.name != work || !m.namespace.starts_with(&prefix) {
                return None;
            }
            let mut st = s.lock().expect("work watch lock");
            st.events += 1;
            if let Some(generation) = converged_generation(&w) {
                let entry = st
                    .seen
                    .entry(m.namespace.clone())
                    .or_insert((generation, Instant::now()));
                if generation > entry.0 {
                    *entry = (generation, Instant::now());
                }
                st.settle(&m.namespace);
            }
            Some(st.done.len())
        });
        Self { state, changed }
    }

    /// The scenario applied `generation` of `cluster`'s work at `sent`.
    pub fn expect(&self, cluster: &str, generation: i64, sent: Instant) {
        let mut st = self.state.lock().expect("work watch lock");
        st.expected.insert(cluster.to_string(), (generation, sent));
        st.done.remove(cluster);
        st.settle(cluster);
    }

    /// Measures `cluster`'s latency from `at` (the reconnect of a storm) and waits for its
    /// expected generation again.
    pub fn restart_clock(&self, cluster: &str, at: Instant) {
        let mut st = self.state.lock().expect("work watch lock");
        if let Some(e) = st.expected.get_mut(cluster) {
            e.1 = at;
        }
        st.done.remove(cluster);
        if st.seen.get(cluster).is_some_and(|(_, t)| *t < at) {
            // Converged before the clock restarted: counts from the restart, not before it.
            if let Some(s) = st.seen.get_mut(cluster) {
                s.1 = at;
            }
        }
        st.settle(cluster);
    }

    /// Clusters whose work converged at the expected generation.
    pub fn done(&self) -> usize {
        self.state.lock().expect("work watch lock").done.len()
    }

    /// Work events seen so far.
    pub fn events(&self) -> u64 {
        self.state.lock().expect("work watch lock").events
    }

    /// Latencies (apply → converged) of every converged cluster, sorted, in milliseconds.
    pub fn latencies_ms(&self) -> Vec<f64> {
        let st = self.state.lock().expect("work watch lock");
        let mut v: Vec<f64> = st.done.values().map(|d| d.as_secs_f64() * 1000.0).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Clusters expected but not converged (for failure messages), at most `n`.
    pub fn missing(&self, n: usize) -> Vec<String> {
        let st = self.state.lock().expect("work watch lock");
        let mut v: Vec<String> = st
            .expected
            .keys()
            .filter(|c| !st.done.contains_key(*c))
            .cloned()
            .collect();
        v.sort();
        v.truncate(n);
        v
    }

    /// Waits until `n` works converged, or the deadline; returns how many did.
    pub async fn wait_done(&mut self, n: usize, deadline: Instant) -> Result<(), usize> {
        let this = self.clone();
        wait_until(&mut self.changed, n, deadline, || this.done()).await
    }
}

/// Keeps a watch open until every receiver of `tx` is gone: `open` starts it (None: the hub is
/// not reachable yet, tried again shortly), each event goes to `on_event`, whose count of
/// interesting objects (if the event mattered) is sent on `tx`. A broken watch — the hub
/// restarted — is opened again; the hub replays the current objects first.
fn follow<T, Open, Fut>(
    tx: watch::Sender<usize>,
    mut open: Open,
    mut on_event: impl FnMut(T) -> Option<usize> + Send + 'static,
) where
    T: Send + 'static,
    Open: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Option<tonic::Streaming<T>>> + Send,
{
    tokio::spawn(async move {
        while !tx.is_closed() {
            let Some(mut stream) = open().await else {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            };
            while let Ok(Some(ev)) = stream.message().await {
                if let Some(n) = on_event(ev) {
                    let _ = tx.send(n);
                }
            }
        }
    });
}

/// Waits until `count()` reaches `n` (woken by `changed`, checked at least twice a second), or
/// the deadline; the shortfall is the count reached.
async fn wait_until(
    changed: &mut watch::Receiver<usize>,
    n: usize,
    deadline: Instant,
    count: impl Fn() -> usize,
) -> Result<(), usize> {
    loop {
        let now = count();
        if now >= n {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(now);
        }
        let _ = tokio::time::timeout(left.min(Duration::from_millis(500)), changed.changed()).await;
    }
}

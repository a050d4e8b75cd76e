//! `proxy`: the cluster proxy under load. C simulated clusters register; then
//!
//! 1. **list**: the first cluster is filled with `list_mib` MiB of 64 KiB ConfigMaps through
//!    the proxy (writes), and listed whole through it `repeats` times: time, throughput, and the
//!    hub's and the fleet's peak RSS over their RSS before the lists (VmHWM, reset before each
//!    list) — the proxy streams, so neither should grow by the list's size. The simulator
//!    builds its list body whole, so its growth is the simulator's; with `kube_agent` the same
//!    list is made through a real `flotilla-agent` on the testkit's Kubernetes API server,
//!    whose growth is the agent's own;
//! 2. **watches**: `watches` watches opened at once, spread over the clusters (at most 250 on
//!    one agent, under its cap of 256 calls): time until every one has its response head, the
//!    hub's RSS with all of them open, then one ConfigMap created on every cluster and the time
//!    until every watch has seen it (latency per watch from its cluster's write), and the time
//!    until the hub has closed every call after the clients go away;
//! 3. **sessions** (`--sessions`, [`super::sessions`]): exec round trips, port-forward throughput
//!    and memory per open session through the hub, through a leaf and directly.
//!
//! `--list-mib 0` and `--watches 0` leave out the first two.
//!
//! The proxy is served plain on loopback without tokens (every caller an admin): a
//! self-started hub gets `--cluster-proxy-listen`; an attached hub's proxy is `--proxy-url`.

use super::Run;
use super::hub_metrics::OPEN_CALLS;
use crate::report::{Phase, Summary, percentile, rss_bytes};
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One object of the list: a ConfigMap with this much data.
const OBJECT_BYTES: usize = 64 * 1024;
/// Watches one agent may be given (its cap is 256 calls at once).
const WATCHES_PER_AGENT: usize = 250;
/// The namespace the listed objects live in.
const LISTED: &str = "listed";
/// The namespace the watches watch.
const WATCHED: &str = "watched";

/// What to measure.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Base URL of the hub's cluster proxy (`http://127.0.0.1:PORT`).
    pub proxy_url: String,
    /// Size of the list, in MiB.
    pub list_mib: usize,
    /// Times the list is made.
    pub repeats: usize,
    /// Watches opened at once.
    pub watches: usize,
    /// Also list through a real agent on a Kubernetes API server (the testkit's).
    pub kube_agent: bool,
    /// The sessions phase, when asked for.
    pub sessions: Option<super::sessions::Settings>,
}

type Http = Client<HttpConnector, Full<Bytes>>;

/// Runs the scenario.
pub async fn run(mut run: Run, settings: Settings) -> Result<(Summary, Run)> {
    let clusters = run.fleet.clusters;
    if settings.watches > clusters * WATCHES_PER_AGENT {
        bail!(
            "--watches {} over {clusters} clusters is more than {WATCHES_PER_AGENT} a cluster \
             (an agent serves 256 calls at once): give more --clusters",
            settings.watches
        );
    }
    let mut summary = Summary::new("proxy", clusters);
    let (fleet, _watch, register) = run.start_fleet().await?;
    summary.set("register_seconds", round(register.as_secs_f64()));
    let mut http = Client::builder(TokioExecutor::new());
    http.pool_max_idle_per_host(settings.watches.max(16));
    let http: Http = http.build_http();
    let proxy = Proxy {
        http,
        base: settings.proxy_url.trim_end_matches('/').to_string(),
    };
    let hub = run.topology.hub_pid();
    let fleet_pids = fleet.pids();
    let phase = Phase::begin(&run.topology).await;

    for c in 0..clusters {
        proxy.namespace(&run.fleet.name(c), WATCHED).await?;
    }

    // 1. The list, from a simulated cluster (the fleet's process answers it) and, with
    // `kube_agent`, from a real agent process forwarding to a Kubernetes API server.
    let objects = (settings.list_mib * (1 << 20)).div_ceil(OBJECT_BYTES);
    summary.set("list_objects", objects);
    let sim = List {
        proxy: &proxy,
        cluster: run.fleet.name(0),
        objects,
        repeats: settings.repeats.max(1),
        hub,
        agents: fleet_pids.clone(),
    };
    if settings.list_mib > 0 {
        sim.measure(&mut summary, "list").await?;
    }
    if settings.kube_agent && settings.list_mib > 0 {
        let agent = KubeAgent::start(LIST_AGENT, &run.topology.agent_urls()[0], &proxy).await?;
        let kube = List {
            cluster: LIST_AGENT.to_string(),
            agents: agent.pid().into_iter().collect(),
            ..sim
        };
        kube.measure(&mut summary, "list_kube").await?;
        agent.stop().await;
    }

    // 2. The watches.
    let watched = watches(&run, &proxy, &settings, &mut summary).await?;

    // 3. exec and port-forward sessions.
    if let Some(sessions) = &settings.sessions {
        super::sessions::measure(&run, &proxy, sessions, &mut summary).await?;
    }
    phase.end(&run.topology, &mut summary).await;
    summary.converged = watched.is_none_or(|(delivered, closed)| {
        delivered == settings.watches && (closed || hub.is_none())
    });
    summary.errors = watched.map_or(0, |(delivered, _)| settings.watches - delivered) as u64;
    fleet.stop().await;
    Ok((summary, run))
}

/// The watches of step 2: opened, one write on every cluster, closed. Returns how many saw
/// their cluster's write and whether every call closed; `None` with no watches.
async fn watches(
    run: &Run,
    proxy: &Proxy,
    settings: &Settings,
    summary: &mut Summary,
) -> Result<Option<(usize, bool)>> {
    if settings.watches == 0 {
        return Ok(None);
    }
    let clusters = run.fleet.clusters;
    let hub = run.topology.hub_pid();
    let hub_before = hub.and_then(rss_bytes).unwrap_or(0);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (opened_tx, mut opened) = mpsc::unbounded_channel();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let t = Instant::now();
    let mut watchers = tokio::task::JoinSet::new();
    for i in 0..settings.watches {
        let cluster = i % clusters;
        let (proxy, name) = (proxy.clone(), run.fleet.name(cluster));
        let (events_tx, opened_tx, stop) = (events_tx.clone(), opened_tx.clone(), stop.clone());
        watchers.spawn(async move {
            proxy
                .watch(&name, cluster, opened_tx, events_tx, stop)
                .await
        });
    }
    drop((events_tx, opened_tx));
    let mut open = 0;
    while open < settings.watches {
        match tokio::time::timeout_at(run.deadline().into(), opened.recv()).await {
            Ok(Some(Ok(()))) => open += 1,
            Ok(Some(Err(e))) => bail!("a watch through the proxy failed to open: {e:#}"),
            Ok(None) | Err(_) => bail!("only {open} of {} watches opened", settings.watches),
        }
    }
    summary.set("watches", settings.watches);
    summary.set("watch_open_seconds", round(t.elapsed().as_secs_f64()));
    summary.set(
        "watch_hub_rss_growth_bytes",
        hub.and_then(rss_bytes)
            .unwrap_or(0)
            .saturating_sub(hub_before),
    );
    summary.set(
        "watch_hub_open_calls",
        run.topology.hub_metric(OPEN_CALLS).await,
    );

    // One write on every cluster, each watch timed from its own cluster's write.
    let mut written = vec![None; clusters];
    let mut writes = tokio::task::JoinSet::new();
    for (c, at) in written.iter_mut().enumerate() {
        *at = Some(Instant::now());
        let (proxy, name) = (proxy.clone(), run.fleet.name(c));
        writes.spawn(async move { proxy.create(&name, WATCHED, "ping", 16).await });
    }
    while let Some(done) = writes.join_next().await {
        done.context("a write task")??;
    }
    let mut latencies = Vec::with_capacity(settings.watches);
    while latencies.len() < settings.watches {
        match tokio::time::timeout_at(run.deadline().into(), events.recv()).await {
            Ok(Some((cluster, at))) => {
                let from = written[cluster].expect("every cluster was written");
                latencies.push(at.saturating_duration_since(from).as_secs_f64() * 1000.0);
            }
            Ok(None) | Err(_) => break,
        }
    }
    summary.set("watch_events_delivered", latencies.len());
    latencies.sort_by(f64::total_cmp);
    summary.latencies(&latencies);
    summary.set(
        "watch_event_max_ms",
        round(latencies.last().copied().unwrap_or(0.0)),
    );

    // The clients go away: every call ends at the hub and the agents.
    let t = Instant::now();
    let _ = stop_tx.send(true);
    watchers.shutdown().await;
    let mut closed = false;
    while t.elapsed() < Duration::from_secs(60) {
        if run.topology.hub_metric(OPEN_CALLS).await == Some(0.0) {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    summary.set(
        "watch_close_seconds",
        closed.then(|| round(t.elapsed().as_secs_f64())),
    );
    Ok(Some((latencies.len(), closed)))
}

/// One list measurement: `objects` written to `cluster`, then listed `repeats` times.
struct List<'a> {
    proxy: &'a Proxy,
    cluster: String,
    objects: usize,
    repeats: usize,
    hub: Option<u32>,
    /// The processes answering for the cluster (the fleet, or one agent).
    agents: Vec<u32>,
}

impl List<'_> {
    /// Fills, lists, and sets `<key>_…` in the summary: the fill time, each list's time, the
    /// median, the throughput, and the hub's and the agents' peak RSS growth during a list.
    async fn measure(&self, summary: &mut Summary, key: &str) -> Result<()> {
        self.proxy.namespace(&self.cluster, LISTED).await?;
        let t = Instant::now();
        self.proxy.fill(&self.cluster, self.objects).await?;
        summary.set(
            &format!("{key}_fill_seconds"),
            round(t.elapsed().as_secs_f64()),
        );
        let mut times = Vec::new();
        let (mut hub_growth, mut agent_growth) = (0u64, 0u64);
        for _ in 0..self.repeats {
            let hub_before = self.hub.and_then(rss_bytes).unwrap_or(0);
            let agents_before: Vec<u64> = self
                .agents
                .iter()
                .map(|p| rss_bytes(*p).unwrap_or(0))
                .collect();
            for pid in self.hub.iter().chain(&self.agents) {
                reset_peak_rss(*pid);
            }
            let t = Instant::now();
            let (bytes, items) = self.proxy.list(&self.cluster).await?;
            times.push(t.elapsed().as_secs_f64());
            if items != self.objects {
                bail!(
                    "the list of {} through the proxy had {items} of {} objects ({bytes} bytes)",
                    self.cluster,
                    self.objects
                );
            }
            summary.set(&format!("{key}_bytes"), bytes);
            hub_growth = hub_growth.max(
                self.hub
                    .and_then(peak_rss_bytes)
                    .unwrap_or(0)
                    .saturating_sub(hub_before),
            );
            for (pid, before) in self.agents.iter().zip(agents_before) {
                agent_growth =
                    agent_growth.max(peak_rss_bytes(*pid).unwrap_or(0).saturating_sub(before));
            }
        }
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let median = percentile(&sorted, 0.5);
        let mib = (self.objects * OBJECT_BYTES) as f64 / f64::from(1 << 20);
        summary.set(
            &format!("{key}_seconds"),
            times.iter().map(|t| round(*t)).collect::<Vec<_>>(),
        );
        summary.set(&format!("{key}_median_seconds"), round(median));
        summary.set(
            &format!("{key}_mib_per_second"),
            round(mib / median.max(1e-6)),
        );
        summary.set(&format!("{key}_hub_peak_rss_growth_bytes"), hub_growth);
        summary.set(&format!("{key}_agent_peak_rss_growth_bytes"), agent_growth);
        Ok(())
    }
}

/// The cluster of the list through a real agent.
const LIST_AGENT: &str = "kube-0";

/// A real `flotilla-agent` process with the Kubernetes backend, on the testkit's API server
/// (in this process), registered with the hub and reachable through the proxy.
pub(super) struct KubeAgent {
    child: tokio::process::Child,
    api: flotilla_testkit::kube::FakeKube,
    _state: tempfile::TempDir,
}

impl KubeAgent {
    /// Starts cluster `name`'s agent on `nats_url` and waits until the proxy reaches it.
    pub(super) async fn start(name: &str, nats_url: &str, proxy: &Proxy) -> Result<Self> {
        let api = flotilla_testkit::kube::FakeKube::start().await;
        let state = tempfile::tempdir().context("a state directory for the agent")?;
        let child = tokio::process::Command::new(crate::topology::sibling_binary("flotilla-agent"))
            .args(["--cluster-name", name, "--nats-url", nats_url])
            .args(["--backend", "kubernetes", "--kubeconfig"])
            .arg(api.kubeconfig())
            .arg("--state-dir")
            .arg(state.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context(
                "starting flotilla-agent (build it with `cargo build --release -p flotilla-agent`)",
            )?;
        let agent = Self {
            child,
            api,
            _state: state,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !proxy.reachable(name).await {
            if Instant::now() > deadline {
                bail!("{name} was not reachable through the proxy within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(agent)
    }

    /// The agent's process id.
    pub(super) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Its cluster's API server.
    pub(super) fn api(&self) -> &flotilla_testkit::kube::FakeKube {
        &self.api
    }

    /// Kills the agent.
    pub(super) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The hub's cluster proxy, as a client sees it.
#[derive(Clone)]
pub(super) struct Proxy {
    http: Http,
    base: String,
}

impl Proxy {
    fn url(&self, cluster: &str, path: &str) -> String {
        format!("{}{path}", self.cluster_base(cluster))
    }

    /// `http://…/clusters/NAME`: what a kubeconfig's `server` says for `cluster`.
    pub(super) fn cluster_base(&self, cluster: &str) -> String {
        format!("{}/clusters/{cluster}", self.base)
    }

    /// Creates `count` ConfigMaps of [`OBJECT_BYTES`] in [`LISTED`] on `cluster`, eight at a
    /// time.
    async fn fill(&self, cluster: &str, count: usize) -> Result<()> {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..count {
            if tasks.len() >= 8
                && let Some(done) = tasks.join_next().await
            {
                done.context("a write task")??;
            }
            let (proxy, cluster) = (self.clone(), cluster.to_string());
            tasks.spawn(async move {
                proxy
                    .create(&cluster, LISTED, &format!("bench-{i}"), OBJECT_BYTES)
                    .await
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.context("a write task")??;
        }
        Ok(())
    }

    /// Whether `cluster` answers through the proxy.
    async fn reachable(&self, cluster: &str) -> bool {
        let Ok(request) = http::Request::get(self.url(cluster, "/api/v1/namespaces"))
            .body(Full::new(Bytes::new()))
        else {
            return false;
        };
        match self.http.request(request).await {
            Ok(r) => {
                let ok = r.status().is_success();
                let _ = r.into_body().collect().await;
                ok
            }
            Err(_) => false,
        }
    }

    /// Creates one ConfigMap with `bytes` of data.
    async fn create(&self, cluster: &str, namespace: &str, name: &str, bytes: usize) -> Result<()> {
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"blob": "x".repeat(bytes)},
        });
        self.post(
            cluster,
            &format!("/api/v1/namespaces/{namespace}/configmaps"),
            &body,
        )
        .await
        .with_context(|| format!("creating {namespace}/{name} on {cluster}"))
    }

    /// Creates a namespace.
    async fn namespace(&self, cluster: &str, name: &str) -> Result<()> {
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
        });
        self.post(cluster, "/api/v1/namespaces", &body)
            .await
            .with_context(|| format!("creating namespace {name} on {cluster}"))
    }

    /// POSTs `body` to `path` of `cluster`, which must succeed.
    pub(super) async fn post(
        &self,
        cluster: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<()> {
        let request = http::Request::post(self.url(cluster, path))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))?;
        let response = self.http.request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            bail!("{status}: {}", String::from_utf8_lossy(&body));
        }
        Ok(())
    }

    /// Lists [`LISTED`] on `cluster`, taking the body as it streams: its bytes, and how many
    /// of the filled objects it names (counted without keeping the body).
    async fn list(&self, cluster: &str) -> Result<(u64, usize)> {
        let request = http::Request::get(
            self.url(cluster, &format!("/api/v1/namespaces/{LISTED}/configmaps")),
        )
        .body(Full::new(Bytes::new()))?;
        let response = self.http.request(request).await.context("listing")?;
        if !response.status().is_success() {
            bail!("listing through the proxy: {}", response.status());
        }
        let mut body = response.into_body();
        let (mut bytes, mut names) = (0u64, Counter::new(b"\"name\":\"bench-"));
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.context("reading the list")?.into_data() {
                bytes += data.len() as u64;
                names.feed(&data);
            }
        }
        Ok((bytes, names.count))
    }

    /// Watches [`WATCHED`] on `cluster` until `stop`: says when its response head came, and
    /// when it saw the ConfigMap `ping` added.
    async fn watch(
        &self,
        cluster_name: &str,
        cluster: usize,
        opened: mpsc::UnboundedSender<Result<()>>,
        events: mpsc::UnboundedSender<(usize, Instant)>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let request = http::Request::get(self.url(
            cluster_name,
            &format!("/api/v1/namespaces/{WATCHED}/configmaps?watch=1&timeoutSeconds=3600"),
        ))
        .body(Full::new(Bytes::new()))
        .expect("a valid request");
        let response = match self.http.request(request).await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                let _ = opened.send(Err(anyhow::anyhow!("{cluster_name}: {}", r.status())));
                return;
            }
            Err(e) => {
                let _ = opened.send(Err(anyhow::anyhow!("{cluster_name}: {e}")));
                return;
            }
        };
        let _ = opened.send(Ok(()));
        let mut body = response.into_body();
        let mut line = Vec::new();
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = stop.changed() => return,
            };
            let Some(Ok(frame)) = frame else { return };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            for &b in data.iter() {
                if b != b'\n' {
                    line.push(b);
                    continue;
                }
                let event: serde_json::Value = serde_json::from_slice(&line).unwrap_or_default();
                line.clear();
                if event["type"] == "ADDED" && event["object"]["metadata"]["name"] == "ping" {
                    let _ = events.send((cluster, Instant::now()));
                }
            }
        }
    }
}

/// Counts a pattern's occurrences in a stream of chunks.
struct Counter {
    pattern: &'static [u8],
    tail: Vec<u8>,
    count: usize,
}

impl Counter {
    fn new(pattern: &'static [u8]) -> Self {
        Self {
            pattern,
            tail: Vec::new(),
            count: 0,
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        let keep = self.pattern.len() - 1;
        let mut window = std::mem::take(&mut self.tail);
        window.extend_from_slice(chunk);
        self.count += window
            .windows(self.pattern.len())
            .filter(|w| *w == self.pattern)
            .count();
        self.tail = window[window.len().saturating_sub(keep)..].to_vec();
    }
}

/// Resets a process's peak RSS (VmHWM) to its RSS now (`clear_refs` 5).
fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// A process's peak RSS (VmHWM).
fn peak_rss_bytes(pid: u32) -> Option<u64> {
    crate::report::proc_stats(pid).map(|(_, peak)| peak)
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::Counter;

    #[test]
    fn a_pattern_split_across_chunks_is_counted_once() {
        let mut c = Counter::new(b"\"name\":\"bench-");
        c.feed(b"{\"name\":\"ben");
        c.feed(b"ch-1\"},{\"name\":\"bench-2\"}");
        c.feed(b"\"name\":\"bench-3");
        assert_eq!(c.count, 3);
    }
}

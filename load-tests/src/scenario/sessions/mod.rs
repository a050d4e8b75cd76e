//! The sessions phase of `proxy` (`--sessions`): exec round trips, port-forward throughput and
//! memory per open session, over three paths to the same kind of endpoint — the testkit's
//! Kubernetes API server, which runs an exec as a local process and forwards a pod's port to a
//! local echo server ([`flotilla_testkit::EchoServer`]):
//!
//! - **hub**: client → the hub's proxy → the hub's nats-server → a real `flotilla-agent`
//!   (Kubernetes backend, kube-rs) → its API server;
//! - **leaf**: the same with the agent behind a leaf nats-server (an edge site; needs
//!   `--leaf-nodes` ≥ 1);
//! - **direct**: the client straight on an API server (no hub, no NATS, no agent).
//!
//! Exec: many small execs (`echo hi`, from the upgrade to the exit) and lines through one open
//! `cat` (stdin to stdout), both with the same `v5.channel.k8s.io` client ([`clients::Exec`]);
//! p50/p99 and their ratios to direct. Port-forward: kubectl 1.32 through the hub (SPDY in a
//! WebSocket, as an operator runs it) with a TCP echo through its local port; direct: the
//! `v4.channel.k8s.io` client on the API server (kube-rs' protocol — the hub does not serve it)
//! and plain TCP to the echo server (the machine's floor). Memory: the hub's and each agent's
//! RSS before and after `--session-idle` idle exec sessions (`cat` waiting on stdin) on each
//! of `--session-idle-agents` agents (the hub's, the leaf's, and more on the hub's server),
//! then as many idle forwarded connections, divided by the sessions.

mod clients;

use super::Run;
use super::proxy::{KubeAgent, Proxy};
use crate::report::{Summary, percentile, rss_bytes};
use anyhow::{Context, Result, bail};
pub use clients::kubectl_1_32;
use clients::{Exec, PortForward};
use flotilla_testkit::EchoServer;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Sessions one caller may have open on one agent (the agent's `SESSIONS_PER_CALLER`; every
/// client of this scenario is the same anonymous caller).
pub const AGENT_SESSIONS_PER_CALLER: usize = 16;
/// The hub's gauge of open sessions.
const OPEN_SESSIONS: &str = "flotilla_hub_cluster_proxy_sessions";

/// What to measure.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Small execs timed per path.
    pub execs: usize,
    /// Lines echoed through one open `cat` per path.
    pub echoes: usize,
    /// MiB echoed through each port-forward.
    pub forward_mib: usize,
    /// Idle sessions held open on each agent for the memory figures.
    pub idle_sessions: usize,
    /// Agents holding them (the hub's and the leaf's, and more on the hub's server).
    pub idle_agents: usize,
    /// The kubectl run for port-forward.
    pub kubectl: PathBuf,
}

impl Settings {
    /// Refuses settings the scenario cannot meet, before anything starts.
    pub fn check(&self) -> Result<()> {
        if self.idle_sessions > AGENT_SESSIONS_PER_CALLER {
            bail!(
                "--session-idle {} is more than an agent serves one caller \
                 ({AGENT_SESSIONS_PER_CALLER}): give at most {AGENT_SESSIONS_PER_CALLER}",
                self.idle_sessions
            );
        }
        if self.execs == 0 || self.echoes == 0 || self.forward_mib == 0 {
            bail!("--session-execs, --session-echoes and --session-forward-mib must be at least 1");
        }
        Ok(())
    }
}

/// A pod with port 80, created through the hub on each agent's API server.
fn pod() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                 "ports": [{"containerPort": 80}]}]},
    })
}

/// One way to the endpoint.
struct Path {
    /// `hub`, `leaf` or `direct`: the summary's key part.
    key: &'static str,
    /// The base URL exec and port-forward requests go to.
    base: String,
}

/// A real agent on its own API server, whose pod `web` forwards port 80 to an echo server.
struct Spoke {
    agent: KubeAgent,
    echo: EchoServer,
}

impl Spoke {
    async fn start(name: &str, nats_url: &str, proxy: &Proxy) -> Result<Self> {
        let agent = KubeAgent::start(name, nats_url, proxy).await?;
        proxy
            .post(name, "/api/v1/namespaces/default/pods", &pod())
            .await
            .with_context(|| format!("creating pod default/web on {name} through the hub"))?;
        let echo = EchoServer::start().await;
        agent.api().forward("default", "web", 80, echo.addr());
        Ok(Self { agent, echo })
    }
}

/// Measures and sets the `session_…` figures in `summary`.
pub(super) async fn measure(
    run: &Run,
    proxy: &Proxy,
    settings: &Settings,
    summary: &mut Summary,
) -> Result<()> {
    let hub_spoke = Spoke::start("session-hub", &run.topology.nats_url, proxy).await?;
    let leaf_url = (run.topology.leaf_count() > 0).then(|| run.topology.agent_urls()[0].clone());
    let leaf_spoke = match &leaf_url {
        Some(url) => Some(Spoke::start("session-leaf", url, proxy).await?),
        None => None,
    };
    let mut paths = vec![Path {
        key: "hub",
        base: proxy.cluster_base("session-hub"),
    }];
    if leaf_spoke.is_some() {
        paths.push(Path {
            key: "leaf",
            base: proxy.cluster_base("session-leaf"),
        });
    }
    paths.push(Path {
        key: "direct",
        base: hub_spoke.agent.api().url(),
    });
    summary.set(
        "session_paths",
        paths.iter().map(|p| p.key).collect::<Vec<_>>(),
    );
    // Others may share the machine: its load around the measurements goes with them.
    summary.set("session_loadavg_before", load_average());

    for path in &paths {
        exec_latency(path, settings, summary).await?;
    }
    ratios(
        summary,
        &paths,
        &["exec_p50_ms", "exec_p99_ms", "echo_p50_ms", "echo_p99_ms"],
    );

    let bytes = settings.forward_mib << 20;
    for path in &paths {
        let seconds = if path.key == "direct" {
            clients::forward_direct(&path.base, bytes).await?
        } else {
            let pf = PortForward::start(&settings.kubectl, &path.base).await?;
            clients::echo_through(pf.port, bytes).await?
        };
        summary.set(
            &format!("session_{}_forward_mib_per_second", path.key),
            round(settings.forward_mib as f64 / seconds),
        );
    }
    let tcp = clients::echo_through(hub_spoke.echo.addr().port(), bytes).await?;
    summary.set(
        "session_tcp_forward_mib_per_second",
        round(settings.forward_mib as f64 / tcp),
    );
    ratios(summary, &paths, &["forward_mib_per_second"]);

    // The agents holding idle sessions: these two, and more on the hub's server up to
    // `idle_agents`, so that the hub's growth is read over enough sessions.
    let mut holders = vec![(&hub_spoke, proxy.cluster_base("session-hub"))];
    if let Some(spoke) = &leaf_spoke {
        holders.push((spoke, proxy.cluster_base("session-leaf")));
    }
    let mut extra = Vec::new();
    for i in holders.len()..settings.idle_agents {
        let name = format!("session-idle-{i}");
        extra.push((
            Spoke::start(&name, &run.topology.nats_url, proxy).await?,
            name,
        ));
    }
    holders.extend(extra.iter().map(|(s, name)| (s, proxy.cluster_base(name))));
    if settings.idle_sessions > 0 {
        memory(run, &holders, settings, summary).await?;
    }
    summary.set("session_loadavg_after", load_average());
    for (spoke, _) in extra {
        spoke.agent.stop().await;
    }
    if let Some(spoke) = leaf_spoke {
        spoke.agent.stop().await;
    }
    hub_spoke.agent.stop().await;
    Ok(())
}

/// `session_<path>_exec_{p50,p99}_ms` (whole small execs) and `…_echo_…` (a line through an
/// open `cat`).
async fn exec_latency(path: &Path, settings: &Settings, summary: &mut Summary) -> Result<()> {
    let echo_hi = clients::exec_path(&["echo", "hi"], false);
    // Warm up: connections, the agent's client, the API server's first process.
    for _ in 0..3 {
        Exec::open(&path.base, &echo_hi).await?.finish().await?;
    }
    let mut execs = Vec::with_capacity(settings.execs);
    for _ in 0..settings.execs {
        let t = Instant::now();
        let out = Exec::open(&path.base, &echo_hi)
            .await
            .with_context(|| format!("exec on the {} path", path.key))?
            .finish()
            .await?;
        execs.push(t.elapsed().as_secs_f64() * 1000.0);
        if out != b"hi\n" {
            bail!("exec echo hi on the {} path printed {out:?}", path.key);
        }
    }
    set_quantiles(summary, &format!("session_{}_exec", path.key), &mut execs);

    let mut cat = Exec::open(&path.base, &clients::exec_path(&["cat"], true)).await?;
    let line = b"0123456789abcdef\n";
    let mut echoes = Vec::with_capacity(settings.echoes);
    for _ in 0..settings.echoes {
        let t = Instant::now();
        cat.stdin(line).await?;
        cat.read_stdout(line.len()).await?;
        echoes.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    cat.close().await?;
    set_quantiles(summary, &format!("session_{}_echo", path.key), &mut echoes);
    Ok(())
}

/// `<key>_p50_ms` and `<key>_p99_ms` of `ms`.
fn set_quantiles(summary: &mut Summary, key: &str, ms: &mut [f64]) {
    ms.sort_by(f64::total_cmp);
    summary.set(&format!("{key}_p50_ms"), round(percentile(ms, 0.5)));
    summary.set(&format!("{key}_p99_ms"), round(percentile(ms, 0.99)));
}

/// `session_<path>_<figure>_ratio`: each path's figure over direct's.
fn ratios(summary: &mut Summary, paths: &[Path], figures: &[&str]) {
    for figure in figures {
        let value = |path: &str| {
            summary
                .extra
                .get(&format!("session_{path}_{figure}"))
                .and_then(serde_json::Value::as_f64)
        };
        let Some(direct) = value("direct") else {
            continue;
        };
        let found: Vec<(String, f64)> = paths
            .iter()
            .filter(|p| p.key != "direct")
            .filter_map(|p| {
                let v = value(p.key)?;
                Some((
                    format!("session_{}_{figure}_ratio", p.key),
                    round(v / direct.max(1e-9)),
                ))
            })
            .collect();
        for (key, ratio) in found {
            summary.set(&key, ratio);
        }
    }
}

/// Memory per idle session: exec sessions, then forwarded connections, `idle_sessions` on each
/// agent of `holders` (with its base URL through the hub); the hub's RSS growth over all of
/// them, the agents' over theirs.
async fn memory(
    run: &Run,
    holders: &[(&Spoke, String)],
    settings: &Settings,
    summary: &mut Summary,
) -> Result<()> {
    let spokes: Vec<&Spoke> = holders.iter().map(|(s, _)| *s).collect();
    let bases: Vec<&String> = holders.iter().map(|(_, b)| b).collect();
    let n = settings.idle_sessions;
    let hub = run.topology.hub_pid();
    let sample = || {
        let agents: Vec<u64> = spokes
            .iter()
            .map(|s| s.agent.pid().and_then(rss_bytes).unwrap_or(0))
            .collect();
        (hub.and_then(rss_bytes).unwrap_or(0), agents)
    };
    let per_session = |before: &(u64, Vec<u64>), after: &(u64, Vec<u64>)| {
        let hub = after.0.saturating_sub(before.0) / (n * spokes.len()) as u64;
        let agents: u64 = after
            .1
            .iter()
            .zip(&before.1)
            .map(|(a, b)| a.saturating_sub(*b))
            .sum::<u64>()
            / (n * spokes.len()) as u64;
        (hub, agents)
    };
    summary.set("session_idle_sessions_per_agent", n);
    summary.set("session_idle_agents", spokes.len());

    // Warm each agent and the hub's way to it (clients, connections, first buffers), so
    // that only the sessions' own memory is read.
    for base in &bases {
        Exec::open(base, &clients::exec_path(&["cat"], true))
            .await?
            .close()
            .await?;
    }
    sessions_closed(run).await?;
    settle().await;
    let before = sample();
    let mut open = Vec::new();
    for base in &bases {
        for _ in 0..n {
            open.push(Exec::open(base, &clients::exec_path(&["cat"], true)).await?);
        }
    }
    settle().await;
    let (hub_bytes, agent_bytes) = per_session(&before, &sample());
    summary.set("session_hub_bytes_per_exec_session", hub_bytes);
    summary.set("session_agent_bytes_per_exec_session", agent_bytes);
    for exec in open {
        exec.close().await?;
    }
    sessions_closed(run).await?;

    // One port-forward per agent, its connection to the hub made before the baseline.
    let mut forwards = Vec::new();
    for base in &bases {
        let pf = PortForward::start(&settings.kubectl, base).await?;
        drop(clients::idle_connection(pf.port).await?);
        forwards.push(pf);
    }
    sessions_closed(run).await?;
    settle().await;
    let before = sample();
    let mut connections = Vec::new();
    for pf in &forwards {
        for _ in 0..n {
            connections.push(clients::idle_connection(pf.port).await?);
        }
    }
    settle().await;
    let (hub_bytes, agent_bytes) = per_session(&before, &sample());
    summary.set("session_hub_bytes_per_forwarded_connection", hub_bytes);
    summary.set("session_agent_bytes_per_forwarded_connection", agent_bytes);
    drop(connections);
    drop(forwards);
    sessions_closed(run).await
}

/// Lets the processes reach a steady state before reading RSS.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// Waits until the self-started hub has no session open (attached: a short pause).
async fn sessions_closed(run: &Run) -> Result<()> {
    let t = Instant::now();
    loop {
        match run.topology.hub_metric(OPEN_SESSIONS).await {
            None => {
                settle().await;
                return Ok(());
            }
            Some(0.0) => return Ok(()),
            Some(v) if t.elapsed() > Duration::from_secs(60) => {
                bail!("the hub still had {v} sessions open 60 s after their clients went")
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The machine's load averages over 1, 5 and 15 minutes (`/proc/loadavg`).
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_path_encodes_every_argument_of_the_command() {
        assert_eq!(
            clients::exec_path(&["sh", "-c", "echo a&b"], true),
            "/api/v1/namespaces/default/pods/web/exec?command=sh&command=-c&\
             command=echo%20a%26b&stdout=true&stderr=true&stdin=true"
        );
    }

    #[test]
    fn each_path_is_compared_with_the_direct_one() {
        let mut summary = Summary::new("proxy", 1);
        summary.set("session_hub_exec_p50_ms", 6.0);
        summary.set("session_leaf_exec_p50_ms", 9.0);
        summary.set("session_direct_exec_p50_ms", 2.0);
        let paths = ["hub", "leaf", "direct"].map(|key| Path {
            key,
            base: String::new(),
        });
        ratios(&mut summary, &paths, &["exec_p50_ms", "echo_p50_ms"]);
        let get = |k: &str| summary.extra.get(k).and_then(serde_json::Value::as_f64);
        assert_eq!(get("session_hub_exec_p50_ms_ratio"), Some(3.0));
        assert_eq!(get("session_leaf_exec_p50_ms_ratio"), Some(4.5));
        assert_eq!(get("session_direct_exec_p50_ms_ratio"), None);
        assert_eq!(get("session_hub_echo_p50_ms_ratio"), None);
    }
}

//! Where a scenario runs: attached to a NATS server and hub someone else started
//! (`--nats-url` and `--hub`), or self-started — a JetStream nats-server for the hub, K leaf
//! nats-servers that the agents connect to as edge sites do (`--leaf-nodes K`), and a
//! `flotilla-hub` process from the same build — all stopped when the scenario ends.
//!
//! Leaf nodes share the hub server's account (no JetStream domain): agents behind a leaf reach
//! the same subjects, request/reply and the hub's JetStream API, which works on nats-server 2.9
//! without extra configuration (docs/edge-sites.md shows the configuration an operator writes
//! for a site).
//!
//! Every process the topology starts is registered with the run's [`CpuLedger`] under its role,
//! and every hub it kills is read after the kill, before it is reaped, so a phase's CPU per
//! role counts restarts and extra hubs exactly ([`crate::cpu_ledger`]).

use crate::cpu::Role;
use crate::cpu_ledger::CpuLedger;
use anyhow::{Context, Result, bail};
use flotilla_testkit::{NatsOptions, NatsServer, free_port};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a server waits on a blocked write before it drops the connection as a slow
/// consumer (nats-server's default is 10 s). A fleet of 100,000 on two shared cores stalls the
/// hub's server for longer than that; the leaves then dropped their uplinks, every reconnect
/// sent the site's whole interest again, and registration never finished (BENCHMARKS.md). The
/// same setting docs/edge-sites.md gives operators for a site's uplink.
const WRITE_DEADLINE: &str = "write_deadline: \"60s\"";

/// Where to run.
#[derive(Debug, Clone)]
pub struct TopologyArgs {
    /// An existing NATS server (attach) — with `hub`.
    pub nats_url: Option<String>,
    /// An existing hub's gRPC endpoint (attach) — with `nats_url`.
    pub hub: Option<String>,
    /// The attached hub's PID, for its CPU and memory.
    pub hub_pid: Option<u32>,
    /// The attached NATS server's monitoring URL (`http://host:8222`), for message rates.
    pub nats_monitor: Option<String>,
    /// Self-started: leaf nats-servers between the agents and the hub's server.
    pub leaf_nodes: usize,
    /// Extra `flotilla-hub` arguments (self-started).
    pub hub_args: Vec<String>,
}

/// A running topology.
pub struct Topology {
    /// Where the hub's NATS server is.
    pub nats_url: String,
    /// The hub's gRPC endpoint.
    pub hub_endpoint: String,
    monitor: Option<String>,
    /// The self-started hub's `/metrics` address (`host:port`).
    hub_metrics: Option<String>,
    /// The hub's PID (0: unknown); shared with samplers, which follow a restarted hub.
    hub_pid: Arc<AtomicU32>,
    _server: Option<NatsServer>,
    leaves: Vec<NatsServer>,
    hub: Option<HubProcess>,
    /// More hubs of the same control plane (`ha`), with their metrics addresses.
    extra_hubs: Vec<(HubProcess, String)>,
    /// The CPU of every process of the run, and the task that samples it.
    cpu: Arc<CpuLedger>,
    cpu_sampler: tokio::task::JoinHandle<()>,
}

struct HubProcess {
    child: Child,
    args: Vec<String>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Topology {
    /// Attaches, or starts NATS, leaves and a hub.
    pub async fn start(args: &TopologyArgs) -> Result<Self> {
        match (&args.nats_url, &args.hub) {
            (Some(nats_url), Some(hub)) => {
                if args.leaf_nodes > 0 {
                    bail!(
                        "--leaf-nodes starts leaf servers for a self-started topology; attached to \
                         {nats_url}, give the agents' servers with --nats-url instead"
                    );
                }
                let cpu = CpuLedger::new();
                cpu.track(Role::Driver, std::process::id());
                if let Some(pid) = args.hub_pid {
                    cpu.track(Role::Hub, pid);
                }
                Ok(Self {
                    nats_url: nats_url.clone(),
                    hub_endpoint: hub.clone(),
                    monitor: args.nats_monitor.clone(),
                    hub_metrics: None,
                    hub_pid: Arc::new(AtomicU32::new(args.hub_pid.unwrap_or(0))),
                    _server: None,
                    leaves: Vec::new(),
                    hub: None,
                    extra_hubs: Vec::new(),
                    cpu_sampler: cpu.spawn_sampler(),
                    cpu,
                })
            }
            (None, None) => Self::self_started(args).await,
            _ => bail!("give both --nats-url and --hub to attach, or neither to start everything"),
        }
    }

    async fn self_started(args: &TopologyArgs) -> Result<Self> {
        let monitor_port = free_port();
        let server = NatsServer::start_with(NatsOptions {
            jetstream: true,
            leaf_listen: args.leaf_nodes > 0,
            extra: format!("http: 127.0.0.1:{monitor_port}\nmax_payload: 8MB\n{WRITE_DEADLINE}\n"),
            ..NatsOptions::default()
        });
        let leaves: Vec<NatsServer> = (0..args.leaf_nodes)
            .map(|_| server.start_leaf_with(format!("{WRITE_DEADLINE}\n")))
            .collect();
        let cpu = CpuLedger::new();
        cpu.track(Role::Driver, std::process::id());
        if let Some(pid) = server.pid() {
            cpu.track(Role::JetStream, pid);
        }
        for pid in leaves.iter().filter_map(NatsServer::pid) {
            cpu.track(Role::Leaf, pid);
        }
        let grpc = free_port();
        let metrics = format!("127.0.0.1:{}", free_port());
        let dir = tempfile::tempdir().context("creating a directory for the hub's log")?;
        let mut hub_args = vec![
            "--nats-url".to_string(),
            server.url(),
            "--grpc-listen".into(),
            format!("127.0.0.1:{grpc}"),
            "--metrics-listen".into(),
            metrics.clone(),
            "--auto-accept".into(),
        ];
        hub_args.extend(args.hub_args.iter().cloned());
        let log = hub_log(dir.path(), "hub-0.log");
        let child = spawn_hub(&hub_args, &log)?;
        cpu.track(Role::Hub, child.id());
        let mut topology = Self {
            nats_url: server.url(),
            hub_endpoint: format!("http://127.0.0.1:{grpc}"),
            monitor: Some(format!("http://127.0.0.1:{monitor_port}")),
            hub_metrics: Some(metrics),
            hub_pid: Arc::new(AtomicU32::new(child.id())),
            _server: Some(server),
            leaves,
            hub: Some(HubProcess {
                child,
                args: hub_args,
                log,
                _dir: dir,
            }),
            extra_hubs: Vec::new(),
            cpu_sampler: cpu.spawn_sampler(),
            cpu,
        };
        topology.wait_for_hub(Duration::from_secs(60)).await?;
        Ok(topology)
    }

    /// The URLs agents connect to: the leaves round-robin, or the hub's server.
    pub fn agent_urls(&self) -> Vec<String> {
        if self.leaves.is_empty() {
            vec![self.nats_url.clone()]
        } else {
            self.leaves.iter().map(NatsServer::url).collect()
        }
    }

    /// A description for summaries.
    pub fn describe(&self) -> String {
        match (&self.hub, self.leaves.len()) {
            (None, _) => format!(
                "attached: NATS {}, hub {}",
                self.nats_url, self.hub_endpoint
            ),
            (Some(_), 0) => "self-started: one JetStream nats-server, one hub".into(),
            (Some(_), k) => format!(
                "self-started: one JetStream nats-server, {k} leaf nats-server(s) for the agents, one hub"
            ),
        }
    }

    /// Number of leaf servers.
    pub fn leaf_count(&self) -> usize {
        self.leaves.len()
    }

    /// The hub's PID (self-started, or given).
    pub fn hub_pid(&self) -> Option<u32> {
        Some(self.hub_pid.load(Ordering::Relaxed)).filter(|p| *p != 0)
    }

    /// The hub's PID as it changes over restarts (0: unknown), for samplers.
    pub fn hub_pid_cell(&self) -> Arc<AtomicU32> {
        self.hub_pid.clone()
    }

    /// The CPU of every process of the run (the fleet registers its simulator processes).
    pub fn cpu(&self) -> &CpuLedger {
        &self.cpu
    }

    /// Whether this run started the hub (and may kill it).
    pub fn owns_hub(&self) -> bool {
        self.hub.is_some()
    }

    /// Waits until the hub answers the API.
    pub async fn wait_for_hub(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            // A hub that died on its own is read as a zombie before `try_wait` reaps it.
            self.cpu.refresh();
            if let Some(hub) = self.hub.as_mut()
                && let Ok(Some(status)) = hub.child.try_wait()
            {
                bail!(
                    "flotilla-hub exited with {status}; its log:\n{}",
                    std::fs::read_to_string(&hub.log).unwrap_or_default()
                );
            }
            if let Ok(mut c) =
                flotilla_api::v1::cluster_service_client::ClusterServiceClient::connect(
                    self.hub_endpoint.clone(),
                )
                .await
                && c.list_clusters(flotilla_api::v1::ListClustersRequest {
                    page_size: 1,
                    ..Default::default()
                })
                .await
                // A hub with a token file (the teams scenario) answers, refusing the call.
                .map_or_else(|s| s.code() == tonic::Code::Unauthenticated, |_| true)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the hub at {} did not answer within {timeout:?}",
                    self.hub_endpoint
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether the self-started hub is still running (true when attached: not ours to watch).
    pub fn hub_alive(&mut self) -> bool {
        self.cpu.refresh();
        self.hub
            .as_mut()
            .is_none_or(|h| matches!(h.child.try_wait(), Ok(None)))
    }

    /// `kill -9` of the self-started hub.
    pub fn kill_hub(&mut self) -> Result<()> {
        let hub = self
            .hub
            .as_mut()
            .context("the hub was not started by this run; it is not killed")?;
        hub.child.kill().context("killing the hub")?;
        self.cpu.read_killed(hub.child.id());
        hub.child.wait().context("waiting for the killed hub")?;
        Ok(())
    }

    /// Starts the self-started hub again with the same arguments and waits until it answers.
    pub async fn restart_hub(&mut self) -> Result<()> {
        let hub = self
            .hub
            .as_mut()
            .context("the hub was not started by this run")?;
        hub.child = spawn_hub(&hub.args, &hub.log)?;
        self.cpu.track(Role::Hub, hub.child.id());
        self.hub_pid.store(hub.child.id(), Ordering::Relaxed);
        self.wait_for_hub(Duration::from_secs(120)).await
    }

    /// Starts another hub of the same control plane (the first one's flags, its own ports) and
    /// waits until it answers. Returns its index (the first hub is 0).
    pub async fn add_hub(&mut self) -> Result<usize> {
        let first = self
            .hub
            .as_ref()
            .context("extra hubs join a self-started hub")?;
        let (grpc, metrics) = (free_port(), format!("127.0.0.1:{}", free_port()));
        let mut args = Vec::new();
        let mut it = first.args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--grpc-listen" | "--metrics-listen" | "--hub-id" => {
                    it.next();
                }
                _ => args.push(a.clone()),
            }
        }
        let index = self.extra_hubs.len() + 1;
        args.extend([
            "--grpc-listen".into(),
            format!("127.0.0.1:{grpc}"),
            "--metrics-listen".into(),
            metrics.clone(),
            "--hub-id".into(),
            format!("load-hub-{index}"),
        ]);
        let dir = tempfile::tempdir().context("creating a directory for the hub's log")?;
        let log = hub_log(dir.path(), &format!("hub-{index}.log"));
        let child = spawn_hub(&args, &log)?;
        self.cpu.track(Role::Hub, child.id());
        self.extra_hubs.push((
            HubProcess {
                child,
                args,
                log,
                _dir: dir,
            },
            metrics,
        ));
        Ok(index)
    }

    /// `kill -9` of hub `index` (an extra one: 1 and up).
    pub fn kill_extra_hub(&mut self, index: usize) -> Result<()> {
        let (hub, _) = self
            .extra_hubs
            .get_mut(index.wrapping_sub(1))
            .with_context(|| format!("no extra hub {index}"))?;
        hub.child.kill().context("killing the hub")?;
        self.cpu.read_killed(hub.child.id());
        hub.child.wait().context("waiting for the killed hub")?;
        Ok(())
    }

    /// The units hub `index` holds now (its `/debug/shards`); `None` when it does not answer.
    pub async fn held_units(&self, index: usize) -> Option<Vec<u64>> {
        let metrics = if index == 0 {
            self.hub_metrics.clone()?
        } else {
            self.extra_hubs.get(index - 1)?.1.clone()
        };
        let doc = http_get_json(&format!("http://{metrics}/debug/shards"))
            .await
            .ok()?;
        Some(
            doc["held"]
                .as_array()?
                .iter()
                .filter_map(serde_json::Value::as_u64)
                .collect(),
        )
    }

    /// Kills every leaf server: every agent behind them loses its link at once.
    pub fn cut_leaves(&mut self) {
        // Their last readings: the testkit kills and reaps them at once.
        self.cpu.refresh();
        for leaf in &mut self.leaves {
            leaf.stop();
        }
    }

    /// Starts the leaf servers again on the same ports: every agent reconnects at once.
    pub fn restore_leaves(&mut self) {
        for leaf in &mut self.leaves {
            leaf.start_again();
            if let Some(pid) = leaf.pid() {
                self.cpu.track(Role::Leaf, pid);
            }
        }
    }

    /// Messages in and out of the hub's NATS server so far (its monitoring endpoint), when
    /// known.
    pub async fn nats_messages(&self) -> Option<u64> {
        let monitor = self.monitor.as_ref()?;
        let varz = http_get_json(&format!("{monitor}/varz")).await.ok()?;
        Some(varz["in_msgs"].as_u64()? + varz["out_msgs"].as_u64()?)
    }

    /// The sum of every series of a counter or gauge on the self-started hub's `/metrics`
    /// (`name` as exposed, e.g. `flotilla_hub_mailbox_dropped_total`), when known.
    pub async fn hub_metric(&self, name: &str) -> Option<f64> {
        let addr = self.hub_metrics.as_ref()?;
        let text = http_get(&format!("http://{addr}/metrics")).await.ok()?;
        Some(
            text.lines()
                .filter(|l| {
                    l.strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with([' ', '{']))
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// The end of the hub's log (self-started), for failure messages.
    pub fn hub_log_tail(&self) -> String {
        let Some(hub) = &self.hub else {
            return String::new();
        };
        let log = std::fs::read_to_string(&hub.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.cpu_sampler.abort();
        let extra = self.extra_hubs.iter_mut().map(|(h, _)| h);
        for hub in self.hub.iter_mut().chain(extra) {
            let _ = hub.child.kill();
            let _ = hub.child.wait();
        }
    }
}

/// The `flotilla-hub` of this build (next to this executable), or from `PATH`.
pub fn sibling_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Where a hub logs: `$FLOTILLA_LOAD_LOG_DIR/<name>` when set (kept after the run, with
/// `FLOTILLA_LOAD_HUB_LOG` choosing the level), else a file of `temp` (removed with it).
fn hub_log(temp: &std::path::Path, name: &str) -> PathBuf {
    match std::env::var_os("FLOTILLA_LOAD_LOG_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            dir.join(name)
        }
        None => temp.join("hub.log"),
    }
}

fn spawn_hub(args: &[String], log: &std::path::Path) -> Result<Child> {
    let bin = sibling_binary("flotilla-hub");
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    Command::new(&bin)
        .args(args)
        .env(
            "RUST_LOG",
            std::env::var("FLOTILLA_LOAD_HUB_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (build it with `cargo build --release -p flotilla-hub`)",
                bin.display()
            )
        })
}

/// GET a small JSON document over plain HTTP/1.0 (the nats-server monitoring endpoint).
async fn http_get_json(url: &str) -> Result<serde_json::Value> {
    let body = http_get(url).await?;
    serde_json::from_str(&body).with_context(|| format!("{url}: not JSON"))
}

/// GET a small document over plain HTTP/1.0; the body as text.
async fn http_get(url: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url}: only http:// monitoring URLs"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("connecting to {host}"))?;
    stream
        .write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await?;
    let text = String::from_utf8_lossy(&body);
    let (_, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("{url}: no HTTP body"))?;
    Ok(body.to_owned())
}

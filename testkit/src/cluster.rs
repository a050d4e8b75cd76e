//! A clustered JetStream on loopback: N `nats-server` processes joined by routes, each with its
//! own client, route and monitoring port and its own store directory, started the way
//! `docs/ha-design.md` §5 verified on 2.9 and 2.15:
//!
//! ```text
//! nats-server -a 127.0.0.1 -p P_i -n n<i> -js -sd DIR/n<i> -m M_i \
//!   --cluster_name C --cluster nats://127.0.0.1:R_i --routes <every R_j> [--no_advertise]
//! ```
//!
//! [`NatsCluster::start`] returns once every node answers `/healthz` and JetStream has a meta
//! leader whose peers are all current, so an R3 stream can be created at once (callers should
//! still retry their first JetStream call: the research saw one timeout right after formation on
//! a busy machine). Nodes can be killed (SIGKILL) and started again with the same ports and
//! store; dropping the cluster kills the processes it started, by their PIDs.

use crate::{INSTALL_HINT, free_port, nats_server_version};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long formation, a restart or a health check may take before the fixture panics.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a cluster is started, at most, when ports it was given are taken meanwhile.
const BIND_ATTEMPTS: usize = 4;
/// How long a node that lost a port takes to say so and exit.
const BIND_WITHIN: Duration = Duration::from_millis(500);

/// How a test cluster is set up.
#[derive(Debug, Clone)]
pub struct NatsClusterOptions {
    /// Number of servers (3 for R3 streams; at least 1).
    pub nodes: usize,
    /// Start every node with `--no_advertise`: servers then tell clients no other node's URL
    /// (`INFO connect_urls` stays empty), so a client behind a [`crate::LinkProxy`] cannot
    /// reconnect around a cut.
    pub no_advertise: bool,
    /// The cluster name (`--cluster_name`).
    pub name: String,
}

impl Default for NatsClusterOptions {
    fn default() -> Self {
        Self {
            nodes: 3,
            no_advertise: false,
            name: "flotilla-test".to_string(),
        }
    }
}

/// One server of a [`NatsCluster`].
pub struct ClusterNode {
    index: usize,
    name: String,
    binary: PathBuf,
    args: Vec<String>,
    port: u16,
    monitor_port: u16,
    route_port: u16,
    log: PathBuf,
    child: Option<Child>,
}

impl ClusterNode {
    /// The server name (`n<index>`), as JetStream reports it for leaders and peers.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's index in its cluster (`node(i)`).
    pub fn index(&self) -> usize {
        self.index
    }

    /// `nats://127.0.0.1:<client port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The HTTP monitoring port (`/healthz`, `/jsz`, `/varz`).
    pub fn monitor_port(&self) -> u16 {
        self.monitor_port
    }

    /// The route (cluster) port.
    pub fn route_port(&self) -> u16 {
        self.route_port
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kills the server (SIGKILL, like a machine loss) and reaps it; ports and store are kept.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a stopped server again with the same ports, name and store, and waits until it
    /// answers `/healthz`. Use [`NatsCluster::start_again`] to also wait for the cluster.
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.spawn();
            self.wait_healthy(Instant::now() + READY_TIMEOUT);
        }
    }

    /// The node's log so far (every start appends to it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A monitoring endpoint's JSON (`/jsz?streams=true`), or `None` when the node does not
    /// answer with 200.
    pub fn monitor(&self, path: &str) -> Option<serde_json::Value> {
        let (status, body) = http_get(self.monitor_port, path)?;
        (status == 200).then(|| serde_json::from_str(&body).ok())?
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the nats-server log");
        let child = Command::new(&self.binary)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}. {INSTALL_HINT}", self.binary.display()));
        self.child = Some(child);
    }

    /// Waits for `/healthz` to answer 200; panics with the log if the process exits or the
    /// deadline passes.
    fn wait_healthy(&mut self, deadline: Instant) {
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "nats-server {} exited with {status}; log:\n{}",
                    self.name,
                    self.log()
                );
            }
            if http_get(self.monitor_port, "/healthz").is_some_and(|(status, _)| status == 200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nats-server {} was not healthy within {READY_TIMEOUT:?}; log:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// N `nats-server` processes with JetStream, joined into one cluster on loopback.
pub struct NatsCluster {
    binary: PathBuf,
    name: String,
    nodes: Vec<ClusterNode>,
    /// Holds every node's store and log; removed after the nodes are killed (field order).
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts `options.nodes` servers of `binary` (one of [`crate::nats_server_binaries`]) and
    /// waits until the cluster is formed: every node healthy, a JetStream meta leader, every
    /// other node a current peer of it. Panics with the logs otherwise.
    pub fn start(binary: impl Into<PathBuf>, options: NatsClusterOptions) -> Self {
        let binary = binary.into();
        assert!(options.nodes >= 1, "a cluster needs at least one node");
        assert!(
            binary.is_file(),
            "{} is not a file. {INSTALL_HINT}",
            binary.display()
        );
        // A port `free_port` found free can be taken by another process before the server
        // binds it (two test binaries run side by side): such a start is made again on other
        // ports.
        for _ in 1..BIND_ATTEMPTS {
            let mut cluster = Self::spawn_all(&binary, &options);
            if !cluster.lost_a_port() {
                cluster.wait_formed();
                return cluster;
            }
        }
        let mut cluster = Self::spawn_all(&binary, &options);
        cluster.wait_formed();
        cluster
    }

    /// Whether a node exited at once because one of its ports was taken.
    fn lost_a_port(&mut self) -> bool {
        let deadline = Instant::now() + BIND_WITHIN;
        while Instant::now() < deadline {
            for node in &mut self.nodes {
                if !node.is_running() {
                    return node.log().contains("address already in use");
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Every node started on ports of its own (not yet waited for).
    fn spawn_all(binary: &Path, options: &NatsClusterOptions) -> Self {
        let binary = binary.to_path_buf();
        let dir = tempfile::tempdir().expect("create a temp dir for the cluster");
        let ports: Vec<(u16, u16, u16)> = (0..options.nodes)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let routes = ports
            .iter()
            .map(|(_, _, r)| format!("nats://127.0.0.1:{r}"))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = ports
            .iter()
            .enumerate()
            .map(|(index, &(port, monitor_port, route_port))| {
                let name = format!("n{index}");
                let store = dir.path().join(&name);
                std::fs::create_dir_all(&store).expect("create a node's store dir");
                let mut args: Vec<String> = vec![
                    "-a".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    port.to_string(),
                    "-n".into(),
                    name.clone(),
                    "-js".into(),
                    "-sd".into(),
                    store.display().to_string(),
                    "-m".into(),
                    monitor_port.to_string(),
                    "--cluster_name".into(),
                    options.name.clone(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{route_port}"),
                    "--routes".into(),
                    routes.clone(),
                ];
                if options.no_advertise {
                    args.push("--no_advertise".into());
                }
                ClusterNode {
                    index,
                    log: dir.path().join(format!("{name}.log")),
                    name,
                    binary: binary.clone(),
                    args,
                    port,
                    monitor_port,
                    route_port,
                    child: None,
                }
            })
            .collect();
        let mut cluster = Self {
            binary,
            name: options.name.clone(),
            nodes,
            _dir: dir,
        };
        for node in &mut cluster.nodes {
            node.spawn();
        }
        cluster
    }

    /// The binary every node runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// What the binary says its version is (`nats-server: v2.9.10`), for messages.
    pub fn version(&self) -> String {
        nats_server_version(&self.binary)
    }

    /// The cluster name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes (never, once started).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node's client URL, comma-separated: what `--nats-url` takes.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(ClusterNode::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `i` (0-based; its server name is `n<i>`).
    pub fn node(&self, i: usize) -> &ClusterNode {
        &self.nodes[i]
    }

    /// Node `i`, to stop or start it.
    pub fn node_mut(&mut self, i: usize) -> &mut ClusterNode {
        &mut self.nodes[i]
    }

    /// Kills node `i` (SIGKILL); its ports and store are kept for [`NatsCluster::start_again`].
    pub fn stop(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    /// Starts node `i` again with the same ports and store and waits until the cluster is formed
    /// again (every running node healthy, a meta leader with every running peer current).
    pub fn start_again(&mut self, i: usize) {
        self.nodes[i].start_again();
        self.wait_formed();
    }

    /// Every node's log, each under a header naming the node.
    pub fn log(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- {} ({}) ---\n{}", n.name, n.url(), n.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The index of the JetStream meta leader, as the running nodes report it (`None` while
    /// there is none or they disagree).
    pub fn meta_leader(&self) -> Option<usize> {
        let mut leader = None;
        for node in self.running() {
            let jsz = node.monitor("/jsz")?;
            let name = jsz.pointer("/meta_cluster/leader")?.as_str()?;
            let index = self.index_of(name)?;
            if leader.is_some_and(|l| l != index) {
                return None;
            }
            leader = Some(index);
        }
        leader
    }

    /// The index of the node leading `stream` (a stream name such as `KV_clusters`), from the
    /// running nodes' `/jsz?streams=true`; `None` while it has no leader.
    pub fn leader_of(&self, stream: &str) -> Option<usize> {
        self.running().find_map(|node| {
            let jsz = node.monitor("/jsz?streams=true")?;
            let accounts = jsz.get("account_details")?.as_array()?;
            accounts
                .iter()
                .filter_map(|a| a.get("stream_detail")?.as_array())
                .flatten()
                .find(|s| s.get("name").and_then(|n| n.as_str()) == Some(stream))
                .and_then(|s| s.pointer("/cluster/leader")?.as_str())
                .and_then(|name| self.index_of(name))
        })
    }

    /// How many streams each node leads (by index), from the running nodes' `/jsz?streams=true`.
    pub fn stream_leaders(&self) -> std::collections::BTreeMap<usize, usize> {
        let mut leaders: std::collections::BTreeMap<String, usize> = Default::default();
        for node in self.running() {
            let Some(jsz) = node.monitor("/jsz?streams=true") else {
                continue;
            };
            for stream in jsz
                .get("account_details")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
                .filter_map(|a| a.get("stream_detail")?.as_array())
                .flatten()
            {
                let (Some(name), Some(leader)) = (
                    stream.get("name").and_then(|n| n.as_str()),
                    stream.pointer("/cluster/leader").and_then(|l| l.as_str()),
                ) else {
                    continue;
                };
                if let Some(index) = self.index_of(leader) {
                    leaders.insert(name.to_string(), index);
                }
            }
        }
        let mut counts = std::collections::BTreeMap::new();
        for index in leaders.values() {
            *counts.entry(*index).or_insert(0) += 1;
        }
        counts
    }

    /// The node that leads the most streams (the meta leader among equals): the one whose
    /// loss makes the most elections.
    pub fn busiest(&self) -> Option<usize> {
        let meta = self.meta_leader();
        self.stream_leaders()
            .into_iter()
            .max_by_key(|(index, count)| (*count, Some(*index) == meta))
            .map(|(index, _)| index)
    }

    /// Whether every stream has a leader on a running node, as the running nodes report it.
    pub fn every_stream_led(&self, streams: &[&str]) -> bool {
        streams.iter().all(|s| {
            self.leader_of(s)
                .is_some_and(|i| self.nodes[i].child.is_some())
        })
    }

    /// Waits until every running node is healthy and JetStream has a meta leader that every
    /// running node names and that reports every other running node as a current peer.
    pub fn wait_formed(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        for node in &mut self.nodes {
            if node.child.is_some() {
                node.wait_healthy(deadline);
            }
        }
        loop {
            if self.formed() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the {} cluster ({}) did not form within {READY_TIMEOUT:?}; logs:\n{}",
                self.name,
                self.version(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn formed(&self) -> bool {
        let Some(leader) = self.meta_leader() else {
            return false;
        };
        let running: Vec<&str> = self
            .running()
            .filter(|n| n.index != leader)
            .map(|n| n.name.as_str())
            .collect();
        let Some(jsz) = self.nodes[leader].monitor("/jsz") else {
            return false;
        };
        let replicas = jsz
            .pointer("/meta_cluster/replicas")
            .and_then(|r| r.as_array())
            .cloned()
            .unwrap_or_default();
        running.iter().all(|name| {
            replicas.iter().any(|r| {
                r.get("name").and_then(|n| n.as_str()) == Some(name)
                    && r.get("current").and_then(|c| c.as_bool()) == Some(true)
            })
        })
    }

    fn running(&self) -> impl Iterator<Item = &ClusterNode> {
        self.nodes.iter().filter(|n| n.child.is_some())
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }
}

/// A plain HTTP/1.0 GET on `127.0.0.1:port`: the status code and the body, or `None` when the
/// server does not answer (not listening yet, killed).
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let timeout = Duration::from_secs(2);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

//! A secure fleet made of the real binaries: `flotilla-hub init`, `nats-server -c` (the server
//! under test), `flotilla-hub --secure-dir`, `flotilla-agent --bootstrap-creds` on the simulated
//! backend, and the `flotilla` CLI run the way an operator runs it. Every process is killed and
//! every file removed when the fleet is dropped.

use crate::attacker::{self, Attacker, Outcome};
use crate::store::RawStore;
use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bound of anything that should happen soon (a registration, an accept, a hub start).
pub const SOON: Duration = Duration::from_secs(30);

/// Polls `$check` (an expression that may `.await`, giving an `Option`) every 200 ms until it
/// is `Some`, or fails `$fleet` with `$what` and every log after `$timeout`.
#[macro_export]
macro_rules! wait_for {
    ($fleet:expr, $what:expr, $timeout:expr, $check:expr) => {{
        let timeout: ::std::time::Duration = $timeout;
        let deadline = ::std::time::Instant::now() + timeout;
        loop {
            if let ::std::option::Option::Some(v) = $check {
                break v;
            }
            if ::std::time::Instant::now() >= deadline {
                $fleet.fail(&format!(
                    "timed out after {timeout:?} waiting for {}",
                    $what
                ));
            }
            ::tokio::time::sleep(::std::time::Duration::from_millis(200)).await;
        }
    }};
}

/// A nats-server binary the suite runs against.
#[derive(Debug, Clone)]
pub struct Server {
    /// `debian` or `current` ([`flotilla_testkit::nats_server_binaries`]).
    pub label: &'static str,
    /// The binary.
    pub binary: PathBuf,
    /// What it says its version is.
    pub version: String,
}

impl Server {
    /// The server labelled `label` in [`flotilla_testkit::nats_server_binaries`] (panics with
    /// the install hint when it is missing: an attack never skips a server).
    pub fn get(label: &str) -> Self {
        let (label, binary) = match label {
            "debian" => ("debian", flotilla_testkit::nats_server_debian_binary()),
            "current" => ("current", flotilla_testkit::nats_server_current_binary()),
            other => panic!("no nats-server labelled {other:?}"),
        };
        let version = flotilla_testkit::nats_server_version(&binary);
        Self {
            label,
            binary,
            version,
        }
    }

    /// Every server of [`flotilla_testkit::nats_server_binaries`].
    pub fn all() -> Vec<Self> {
        flotilla_testkit::nats_server_binaries()
            .into_iter()
            .map(|(label, _)| Self::get(label))
            .collect()
    }
}

/// Flags of the hub under attack, besides the ones every fleet sets (secure directory, NATS
/// URL, listen addresses, one-second leases with a grace of three).
#[derive(Debug, Clone, Default)]
pub struct HubOptions {
    flags: Vec<String>,
}

impl HubOptions {
    /// No extra flags.
    pub fn new() -> Self {
        Self::default()
    }

    /// `--flag value`.
    pub fn flag(mut self, flag: &str, value: &str) -> Self {
        self.flags.extend([flag.to_string(), value.to_string()]);
        self
    }

    /// `--switch` (a flag without a value, such as `--auto-accept`).
    pub fn switch(mut self, flag: &str) -> Self {
        self.flags.push(flag.to_string());
        self
    }
}

/// How an agent is started.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Registration credentials (default: the fleet's `bootstrap.creds`).
    pub creds: Option<PathBuf>,
    /// More flags.
    pub flags: Vec<String>,
    /// Leave out `--nats-ca`, even on a TLS fleet.
    pub without_ca: bool,
    /// More environment variables (`SSL_CERT_FILE`: the system's roots as the agent sees them).
    pub env: Vec<(String, String)>,
}

impl AgentOptions {
    /// Registers with `creds` instead of the fleet's bootstrap credentials.
    pub fn creds(mut self, creds: &Path) -> Self {
        self.creds = Some(creds.to_path_buf());
        self
    }

    /// `--flag value`.
    pub fn flag(mut self, flag: &str, value: &str) -> Self {
        self.flags.extend([flag.to_string(), value.to_string()]);
        self
    }
}

/// What one run of the CLI (or of a binary) did.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit code (`None`: killed or timed out).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// Exit code 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs `cmd` to completion within `timeout`, feeding `stdin`.
pub async fn run(
    mut cmd: tokio::process::Command,
    stdin: Option<&str>,
    timeout: Duration,
) -> Output {
    use tokio::io::AsyncWriteExt;
    cmd.stdin(if stdin.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    })
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Output {
                code: None,
                stdout: String::new(),
                stderr: format!("spawning {cmd:?}: {e}"),
            };
        }
    };
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(input.as_bytes()).await;
    }
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        Ok(Err(e)) => Output {
            code: None,
            stdout: String::new(),
            stderr: format!("waiting for {cmd:?}: {e}"),
        },
        Err(_) => Output {
            code: None,
            stdout: String::new(),
            stderr: format!("still running after {timeout:?} (killed)"),
        },
    }
}

/// The first line of `log` that reports an error (clap's usage errors, `flotilla-hub: …`), or
/// its last line.
/// A `flotilla-hub` command line with the fleet's test timings.
fn hub_command(
    nats_url: &str,
    options: &HubOptions,
    secure: &Path,
    grpc: u16,
    metrics: u16,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(binary("flotilla-hub"));
    cmd.arg("--secure-dir")
        .arg(secure)
        .args(["--nats-url", nats_url])
        .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args(["--default-lease-duration-seconds", "1"])
        .args(["--lease-grace-multiplier", "3"])
        .args([
            "--status-stream-max-bytes",
            &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
        ])
        .args(&options.flags)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    cmd
}

fn first_error(log: &str) -> String {
    log.lines()
        .find(|l| l.contains("error") || l.contains("ERROR") || l.starts_with("flotilla-hub:"))
        .or_else(|| log.lines().last())
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A secure fleet: a secure directory, the nats-server under test, a hub and agents.
pub struct Fleet {
    // Fields drop in order: agents and hub first, then the server, then the files.
    agents: BTreeMap<String, Proc>,
    hub: Option<Proc>,
    /// Other hubs of the same control plane ([`Fleet::other_hub`]).
    others: Vec<Proc>,
    /// The running nats-server.
    pub nats: NatsServer,
    /// The nats-server under test.
    pub server: Server,
    /// The secure directory `flotilla-hub init` wrote.
    pub secure: PathBuf,
    tls: bool,
    /// The server starts TLS before its first line (`init --tls-first`).
    tls_first: bool,
    hub_options: HubOptions,
    hub_starts: u32,
    grpc_port: u16,
    metrics_port: u16,
    /// The bearer token the fleet's CLI runs pass (`--token`), for a hub with a token file.
    cli_token: Option<String>,
    dir: tempfile::TempDir,
}

impl Fleet {
    /// `flotilla-hub init` (plain NATS on loopback) and the server under test.
    pub async fn secure(server: Server) -> Self {
        Self::init(server, false, false).await
    }

    /// `flotilla-hub init --tls` and the server under test, serving TLS.
    pub async fn secure_tls(server: Server) -> Self {
        Self::init(server, true, false).await
    }

    /// `flotilla-hub init --tls --tls-first` (nats-server 2.10.4 and later): the server starts
    /// TLS before its first line, and the agents take `--nats-tls-first`.
    pub async fn secure_tls_first(server: Server) -> Self {
        Self::init(server, true, true).await
    }

    async fn init(server: Server, tls: bool, tls_first: bool) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir for the fleet");
        let secure = dir.path().join("secure");
        let port = free_port();
        let mut cmd = tokio::process::Command::new(binary("flotilla-hub"));
        cmd.args(["init", "--dir"])
            .arg(&secure)
            .args(["--nats-listen", &format!("127.0.0.1:{port}")]);
        if tls {
            cmd.arg("--tls");
        }
        if tls_first {
            cmd.arg("--tls-first");
        }
        let out = run(cmd, None, SOON).await;
        assert!(
            out.ok(),
            "[{}] flotilla-hub init failed: {}{}",
            server.version,
            out.stdout,
            out.stderr
        );
        let nats = NatsServer::start_from_config_with(
            &server.binary,
            secure.join("nats-server.conf"),
            port,
        );
        Self {
            agents: BTreeMap::new(),
            hub: None,
            others: Vec::new(),
            nats,
            server,
            secure,
            tls,
            tls_first,
            hub_options: HubOptions::default(),
            hub_starts: 0,
            grpc_port: free_port(),
            metrics_port: free_port(),
            cli_token: None,
            dir,
        }
    }

    /// The fleet's scratch directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The NATS URL clients use: `tls://` for a TLS fleet.
    pub fn nats_url(&self) -> String {
        if self.tls {
            format!("tls://127.0.0.1:{}", self.nats.port())
        } else {
            self.nats.url()
        }
    }

    /// The plaintext URL of the same server (`nats://`), whatever it serves.
    pub fn plain_nats_url(&self) -> String {
        self.nats.url()
    }

    /// The CA clients trust, for a TLS fleet.
    pub fn ca(&self) -> Option<PathBuf> {
        self.tls.then(|| self.secure.join("tls").join("ca.pem"))
    }

    /// The shared bootstrap credentials.
    pub fn bootstrap_creds(&self) -> PathBuf {
        self.secure.join("bootstrap.creds")
    }

    /// `http://127.0.0.1:<grpc port>`.
    pub fn hub_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// Panics with `message`, the server under test and the tail of every log.
    pub fn fail(&self, message: &str) -> ! {
        let mut logs = Vec::new();
        if let Some(hub) = &self.hub {
            logs.push(tail(&hub.output(), 60));
        }
        for hub in &self.others {
            logs.push(tail(&hub.output(), 40));
        }
        for agent in self.agents.values() {
            logs.push(tail(&agent.output(), 25));
        }
        logs.push(format!(
            "--- nats-server log ---\n{}",
            tail(&self.nats.log(), 25)
        ));
        panic!(
            "[{} at {}] {message}\n{}",
            self.server.version,
            self.server.binary.display(),
            logs.join("\n")
        );
    }

    /// Asserts `cond`, failing the fleet with `message` otherwise.
    pub fn check(&self, cond: bool, message: impl FnOnce() -> String) {
        if !cond {
            self.fail(&message());
        }
    }

    /// The `flotilla-hub` command line of this fleet against `nats_url`, with `options`.
    pub fn hub_command(
        &mut self,
        nats_url: &str,
        options: &HubOptions,
    ) -> (std::process::Command, PathBuf) {
        self.hub_starts += 1;
        let log = self.dir.path().join(format!("hub-{}.log", self.hub_starts));
        let (secure, grpc, metrics) = (self.secure.clone(), self.grpc_port, self.metrics_port);
        (hub_command(nats_url, options, &secure, grpc, metrics), log)
    }

    /// Starts the hub with `options` and waits until its API answers.
    pub async fn hub(&mut self, options: HubOptions) {
        self.hub_options = options;
        self.start_hub().await;
    }

    async fn start_hub(&mut self) {
        let url = self.nats_url();
        let options = self.hub_options.clone();
        let (cmd, log) = self.hub_command(&url, &options);
        self.hub = Some(Proc::spawn("flotilla-hub", cmd, log));
        let deadline = std::time::Instant::now() + SOON;
        loop {
            if let Some(hub) = self.hub.as_mut()
                && !hub.is_running()
            {
                let said = first_error(&hub.output());
                self.fail(&format!("flotilla-hub exited while starting: {said}"));
            }
            if self.clusters().await.is_some() {
                return;
            }
            if std::time::Instant::now() >= deadline {
                self.fail("flotilla-hub did not answer `get clusters` within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Starts another hub of the same control plane as on another machine — with `secure`, its
    /// own copy of the secure directory, and ports of its own — and waits until its API
    /// answers. Returns its API URL (for [`Fleet::cli_at`]).
    pub async fn other_hub(&mut self, secure: &Path, options: &HubOptions) -> String {
        let (grpc, metrics) = (free_port(), free_port());
        let cmd = hub_command(&self.nats_url(), options, secure, grpc, metrics);
        let log = self
            .dir
            .path()
            .join(format!("other-hub-{}.log", self.others.len()));
        self.others.push(Proc::spawn("flotilla-hub", cmd, log));
        let api = format!("http://127.0.0.1:{grpc}");
        let deadline = std::time::Instant::now() + SOON;
        loop {
            if self
                .cli_at(&api, &["get", "clusters", "-o", "json"])
                .await
                .ok()
            {
                return api;
            }
            if self.others.last_mut().is_some_and(|h| !h.is_running()) {
                let said = first_error(&self.others.last().expect("just pushed").output());
                self.fail(&format!(
                    "the other flotilla-hub exited while starting: {said}"
                ));
            }
            if std::time::Instant::now() >= deadline {
                self.fail("the other flotilla-hub did not answer `get clusters` within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Makes every CLI run of the fleet pass `--token TOKEN` (a hub started with
    /// `--api-token-file`; set it before [`Fleet::hub`], which waits for `get clusters`).
    pub fn use_token(&mut self, token: &str) {
        self.cli_token = Some(token.to_string());
    }

    /// The hub's process id, while it runs.
    pub fn hub_pid(&self) -> Option<u32> {
        self.hub.as_ref().and_then(|h| h.pid())
    }

    /// The `--grpc-listen` address of the hub.
    pub fn grpc_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.grpc_port))
    }

    /// Kills the hub with SIGKILL (like `kill -9`).
    pub fn kill_hub(&mut self) {
        if let Some(mut hub) = self.hub.take() {
            hub.kill();
        }
    }

    /// `kill -9` the hub and start it again with the same flags, ports and secure directory;
    /// waits until its API answers.
    pub async fn restart_hub(&mut self) {
        self.kill_hub();
        self.start_hub().await;
    }

    /// Whether the hub is still running.
    pub fn hub_running(&mut self) -> bool {
        self.hub.as_mut().is_some_and(|h| h.is_running())
    }

    /// Where agent `name` keeps its state (`cluster.creds` among it).
    pub fn state_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("state-{name}"))
    }

    /// The `flotilla-agent` command line for cluster `name` against `nats_url`.
    pub fn agent_command(
        &self,
        name: &str,
        nats_url: &str,
        options: &AgentOptions,
    ) -> std::process::Command {
        let creds = options
            .creds
            .clone()
            .unwrap_or_else(|| self.bootstrap_creds());
        let mut cmd = std::process::Command::new(binary("flotilla-agent"));
        cmd.args(["--cluster-name", name, "--nats-url", nats_url])
            .arg("--state-dir")
            .arg(self.state_dir(name))
            .arg("--bootstrap-creds")
            .arg(creds)
            .args(["--pending-poll-seconds", "1"])
            .args(["--status-interval-seconds", "1"])
            .args(["--work-status-interval-seconds", "1"])
            .args(["--resync-interval-seconds", "5"])
            .args(["--score-interval-seconds", "0"])
            .args(["--sim-ready-delay-ms", "100"])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1");
        if let Some(ca) = self.ca().filter(|_| !options.without_ca) {
            cmd.arg("--nats-ca").arg(ca);
        }
        if self.tls_first {
            cmd.arg("--nats-tls-first");
        }
        cmd.args(&options.flags);
        cmd.envs(options.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Starts the agent of cluster `name` with the bootstrap credentials.
    pub fn agent(&mut self, name: &str) {
        self.agent_with(name, AgentOptions::default());
    }

    /// Starts the agent of cluster `name` with `options`.
    pub fn agent_with(&mut self, name: &str, options: AgentOptions) {
        let url = self.nats_url();
        self.agent_at(name, &url, options);
    }

    /// Starts the agent of cluster `name` with `options`, reaching NATS at `nats_url` (a relay
    /// on the path, say).
    pub fn agent_at(&mut self, name: &str, nats_url: &str, options: AgentOptions) {
        let cmd = self.agent_command(name, nats_url, &options);
        let log = self.dir.path().join(format!("agent-{name}.log"));
        self.agents.insert(
            name.to_string(),
            Proc::spawn(&format!("flotilla-agent {name}"), cmd, log),
        );
    }

    /// Starts agent `name`, waits until it registered, accepts it and waits until it is
    /// Available over its own credentials (`STATE_DIR/cluster.creds`).
    pub async fn accepted_agent(&mut self, name: &str) {
        self.agent(name);
        wait_for!(
            self,
            format!("{name} to register"),
            SOON,
            self.cluster(name).await
        );
        self.cli_ok(&["accept", name]).await;
        self.wait_available(name).await;
        let creds = self.state_dir(name).join("cluster.creds");
        wait_for!(
            self,
            format!("{name}'s cluster.creds"),
            SOON,
            creds.is_file().then_some(())
        );
    }

    /// Kills agent `name`.
    pub fn stop_agent(&mut self, name: &str) {
        if let Some(mut agent) = self.agents.remove(name) {
            agent.kill();
        }
    }

    /// Whether agent `name` is still running.
    pub fn agent_running(&mut self, name: &str) -> bool {
        self.agents.get_mut(name).is_some_and(|a| a.is_running())
    }

    /// Runs `flotilla --hub <hub> ARGS`.
    pub async fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_stdin(args, None).await
    }

    /// Runs `flotilla --hub <hub> ARGS` with `stdin`.
    pub async fn cli_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = tokio::process::Command::new(binary("flotilla"));
        cmd.args(["--hub", &self.hub_url()]);
        if let Some(token) = &self.cli_token {
            cmd.args(["--token", token]);
        }
        cmd.args(args);
        run(cmd, stdin, SOON).await
    }

    /// Runs `flotilla --hub <api> ARGS` against another hub ([`Fleet::other_hub`]).
    pub async fn cli_at(&self, api: &str, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(binary("flotilla"));
        cmd.args(["--hub", api]);
        if let Some(token) = &self.cli_token {
            cmd.args(["--token", token]);
        }
        cmd.args(args);
        run(cmd, None, SOON).await
    }

    /// Runs the CLI, which must succeed; its stdout.
    pub async fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args).await;
        if !out.ok() {
            self.fail(&format!(
                "flotilla {} failed (exit {:?}): {}{}",
                args.join(" "),
                out.code,
                out.stderr,
                out.stdout
            ));
        }
        out.stdout
    }

    /// `flotilla apply -f -` with `yaml`, which must succeed.
    pub async fn apply(&self, yaml: &str) {
        let out = self.cli_with_stdin(&["apply", "-f", "-"], Some(yaml)).await;
        if !out.ok() {
            self.fail(&format!(
                "flotilla apply failed: {}{}",
                out.stderr, out.stdout
            ));
        }
    }

    /// `flotilla join-token NAME ARGS`: the per-cluster join credential it prints, written to a
    /// file of the fleet.
    pub async fn join_token(&self, name: &str, args: &[&str]) -> PathBuf {
        let mut all = vec!["join-token", name];
        all.extend_from_slice(args);
        let out = self.cli_ok(&all).await;
        let Some(creds) = creds_block(&out) else {
            self.fail(&format!(
                "`flotilla join-token` printed no credentials file:\n{out}"
            ));
        };
        let file = self.dir.path().join(format!("join-{name}.creds"));
        if let Err(e) = std::fs::write(&file, creds) {
            self.fail(&format!("writing {}: {e}", file.display()));
        }
        file
    }

    /// `get clusters -o json`, or `None` while the hub does not answer.
    pub async fn clusters(&self) -> Option<Vec<Value>> {
        let out = self.cli(&["get", "clusters", "-o", "json"]).await;
        if !out.ok() {
            return None;
        }
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v["items"].as_array().cloned()
    }

    /// Cluster `name` as `get clusters -o json` shows it.
    pub async fn cluster(&self, name: &str) -> Option<Value> {
        self.clusters()
            .await?
            .into_iter()
            .find(|c| c["metadata"]["name"] == name)
    }

    /// `get works --cluster CLUSTER -o json`.
    pub async fn works(&self, cluster: &str) -> Option<Vec<Value>> {
        let out = self
            .cli(&["get", "works", "--cluster", cluster, "-o", "json"])
            .await;
        if !out.ok() {
            return None;
        }
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v["items"].as_array().cloned()
    }

    /// Work `name` of `cluster`.
    pub async fn work(&self, cluster: &str, name: &str) -> Option<Value> {
        self.works(cluster)
            .await?
            .into_iter()
            .find(|w| w["metadata"]["name"] == name)
    }

    /// Waits until cluster `name` is accepted and Available.
    pub async fn wait_available(&self, name: &str) -> Value {
        wait_for!(
            self,
            format!("{name} accepted and Available"),
            SOON,
            self.cluster(name)
                .await
                .filter(|c| accepted(c) && available(c))
        )
    }

    /// Applies work `name` on `cluster` (a ConfigMap holding `value`) and waits until it is
    /// Applied at its new generation; returns the work.
    pub async fn apply_work(&self, cluster: &str, name: &str, value: &str) -> Value {
        let before = self.work(cluster, name).await.map_or(0, |w| generation(&w));
        self.apply(&work_yaml(cluster, name, value)).await;
        self.wait_work_applied(cluster, name, before + 1).await
    }

    /// Waits until work `name` of `cluster` is at generation `at_least` or later and Applied
    /// at that generation.
    pub async fn wait_work_applied(&self, cluster: &str, name: &str, at_least: i64) -> Value {
        wait_for!(
            self,
            format!("work {cluster}/{name} Applied at generation {at_least} or later"),
            SOON,
            self.work(cluster, name)
                .await
                .filter(|w| generation(w) >= at_least && applied(w))
        )
    }

    /// The hub's `/metrics` text.
    pub async fn metrics(&self) -> String {
        match http_get(self.metrics_port, "/metrics").await {
            Ok(body) => body,
            Err(e) => self.fail(&format!("reading the hub's /metrics: {e}")),
        }
    }

    /// A read-only view of the hub's JetStream state with `hub.creds`.
    pub async fn store(&self) -> RawStore {
        let creds = self.secure.join("hub.creds");
        match Attacker::connect(
            &self.nats_url(),
            &creds,
            "_INBOX.checker",
            self.ca().as_deref(),
        )
        .await
        {
            Ok(a) => RawStore::new(a.client),
            Err(e) => self.fail(&format!(
                "connecting with hub.creds to check the store: {e}"
            )),
        }
    }

    /// An attacker holding the fleet's `bootstrap.creds` (replies in the bootstrap inbox space).
    pub async fn attacker_with_bootstrap(&self) -> Attacker {
        self.attacker_with(&self.bootstrap_creds(), "_INBOX_bootstrap.attacker")
            .await
    }

    /// An attacker holding cluster `cluster`'s `STATE_DIR/cluster.creds` (copied: the agent
    /// may be stopped or running).
    pub async fn attacker_as(&self, cluster: &str) -> Attacker {
        let source = self.state_dir(cluster).join("cluster.creds");
        let copy = self.dir.path().join(format!("stolen-{cluster}.creds"));
        if let Err(e) = std::fs::copy(&source, &copy) {
            self.fail(&format!("copying {}: {e}", source.display()));
        }
        self.attacker_with(&copy, &format!("_INBOX.{cluster}"))
            .await
    }

    /// An attacker holding `creds`, reading replies under `inbox`.
    pub async fn attacker_with(&self, creds: &Path, inbox: &str) -> Attacker {
        match Attacker::connect(&self.nats_url(), creds, inbox, self.ca().as_deref()).await {
            Ok(a) => a,
            Err(e) => self.fail(&format!("the attacker cannot connect: {e}")),
        }
    }

    /// Agent `name`'s process id (while it runs).
    pub fn agent_pid(&self, name: &str) -> Option<u32> {
        self.agents.get(name).and_then(Proc::pid)
    }

    /// Whether the server refuses (or cuts within a second) a connection with `creds`.
    pub async fn connect_outcome(&self, creds: &Path) -> Outcome {
        attacker::try_connect(
            &self.nats_url(),
            creds,
            self.ca().as_deref(),
            Duration::from_secs(1),
        )
        .await
    }
}

/// Memory of process `pid` from `/proc/<pid>/status`, in KiB: `(VmRSS, VmHWM)` — resident now
/// and its peak so far.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The NATS credentials file (user JWT and seed blocks) inside `text`.
pub fn creds_block(text: &str) -> Option<String> {
    let start = text.find("-----BEGIN NATS USER JWT-----")?;
    let seed_end = "------END USER NKEY SEED------";
    let end = text[start..].find(seed_end)? + start + seed_end.len();
    Some(format!("{}\n", &text[start..end]))
}

/// A plain HTTP/1.0 GET on 127.0.0.1:`port` (the hub's metrics listener); the body.
pub async fn http_get(port: u16, path: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => {
                Ok(body.to_string())
            }
            _ => Err(format!("unexpected answer: {}", tail(&text, 5))),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "timed out".to_string())?
}

/// The sum of every sample of metric `name` (all label sets) in a Prometheus text.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    samples(text, name).iter().map(|(_, v)| v).sum()
}

/// The sample lines of metric `name`, for messages.
pub fn metric_samples_text(text: &str, name: &str) -> String {
    samples(text, name)
        .iter()
        .map(|(labels, v)| format!("{name}{{{labels}}} {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every sample of metric `name`: (labels, value).
pub fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = if let Some(r) = rest.strip_prefix('{') {
                let (labels, value) = r.split_once('}')?;
                (labels.to_string(), value)
            } else if rest.starts_with(' ') {
                (String::new(), rest)
            } else {
                return None;
            };
            let value: f64 = value.split_whitespace().next()?.parse().ok()?;
            Some((labels, value))
        })
        .collect()
}

/// The status of condition `ty` of an OCM-shaped object.
pub fn condition(object: &Value, ty: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

/// `spec.hubAcceptsClient`.
pub fn accepted(cluster: &Value) -> bool {
    cluster["spec"]["hubAcceptsClient"] == true
}

/// `ManagedClusterConditionAvailable=True`.
pub fn available(cluster: &Value) -> bool {
    condition(cluster, "ManagedClusterConditionAvailable").as_deref() == Some("True")
}

/// `metadata.generation` of a work.
pub fn generation(work: &Value) -> i64 {
    work["metadata"]["generation"].as_i64().unwrap_or(0)
}

/// Applied=True, observed at the work's current generation.
pub fn applied(work: &Value) -> bool {
    work["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| {
            c["type"] == "Applied"
                && c["status"] == "True"
                && c["observedGeneration"].as_i64().unwrap_or(0) == generation(work)
        })
    })
}

/// A ManifestWork for `cluster` holding one ConfigMap whose data is `value`.
pub fn work_yaml(cluster: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: {cluster}
  name: {name}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {name}
          namespace: default
        data:
          value: \"{value}\"
"
    )
}

/// An OCM ManagedCluster created ahead of its agent, already accepted.
pub fn precreated_cluster_yaml(name: &str) -> String {
    format!(
        "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: {name}
spec:
  hubAcceptsClient: true
"
    )
}

/// The cell of column `column` in the row whose first cell is `first`, in a table laid out in
/// left-aligned columns (kubectl's layout: headers separated by at least two spaces).
pub fn table_cell(table: &str, first: &str, column: &str) -> Option<String> {
    let mut lines = table.lines();
    let header = lines.next()?;
    // Column starts: offsets where a header name begins after two or more spaces.
    let mut starts = vec![0usize];
    let bytes = header.as_bytes();
    for i in 2..bytes.len() {
        if bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' ' {
            starts.push(i);
        }
    }
    let index = starts
        .iter()
        .position(|&s| header[s..].split("  ").next().map(str::trim) == Some(column))?;
    let row = lines.find(|l| l.split_whitespace().next() == Some(first))?;
    let start = starts[index];
    let end = starts
        .get(index + 1)
        .copied()
        .unwrap_or(row.len())
        .min(row.len());
    (start <= end).then(|| row[start..end].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_cells_are_found_by_header() {
        let t = "NAME     ACCEPTED   KUBERNETES VERSION   KEY\nedge-1   true       v1.30.2              SHA256:ab12\n";
        assert_eq!(
            table_cell(t, "edge-1", "KEY").as_deref(),
            Some("SHA256:ab12")
        );
        assert_eq!(
            table_cell(t, "edge-1", "KUBERNETES VERSION").as_deref(),
            Some("v1.30.2")
        );
        assert_eq!(table_cell(t, "edge-2", "KEY"), None);
        assert_eq!(table_cell(t, "edge-1", "NOPE"), None);
    }

    #[test]
    fn metric_samples_are_summed_over_labels() {
        let text = "# HELP x\nflotilla_hub_limit_refusals_total{limit=\"pending\"} 3\nflotilla_hub_limit_refusals_total{limit=\"status\"} 2\nflotilla_hub_limit_refusals_totalx 9\n";
        assert_eq!(metric_sum(text, "flotilla_hub_limit_refusals_total"), 5.0);
    }
}

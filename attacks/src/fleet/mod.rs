//! A secure fleet made of the real binaries: `flotilla-hub init`, `nats-server -c` (the server
//! under test), `flotilla-hub --secure-dir`, `flotilla-agent --bootstrap-creds` on the simulated
//! backend, and the `flotilla` CLI run the way an operator runs it. Every process is killed and
//! every file removed when the fleet is dropped.
//!
//! - this module: [`Fleet`] itself — its secure directory, its nats-server, its failures.
//! - `server`: the nats-server binaries the suite runs against.
//! - `hub`: starting, killing and restarting the hub, and other hubs of one control plane.
//! - `agents`: starting and stopping agents.
//! - `cli`: the `flotilla` CLI as an operator runs it, and reading what it prints.
//! - `attackers`: attackers and the raw store view, connected to the fleet's server.
//! - `process`: running a command to completion, reading a process's memory.
//! - `metrics`: the hub's `/metrics` and Prometheus samples.
//! - `objects`: OCM objects as the CLI shows them, and the YAML the attacks apply.

use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

mod agents;
mod attackers;
mod cli;
mod hub;
mod metrics;
mod objects;
mod process;
mod server;

pub use agents::AgentOptions;
pub use cli::{creds_block, table_cell};
pub use hub::HubOptions;
pub use metrics::{HTTP_TIMEOUT, HttpError, http_get, metric_samples_text, metric_sum, samples};
pub use objects::{
    accepted, applied, available, condition, generation, precreated_cluster_yaml, work_yaml,
};
pub use process::{Output, memory_kib, run};
pub use server::Server;

/// Bound of anything that should happen soon (a registration, an accept, a hub start).
pub const SOON: Duration = Duration::from_secs(30);

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

    /// Panics with `message`, the server under test and the tail of every log.
    pub fn fail(&self, message: &str) -> ! {
        let mut logs = Vec::new();
        if let Some(hub) = &self.hub {
            logs.push(process::tail(&hub.output(), 60));
        }
        for hub in &self.others {
            logs.push(process::tail(&hub.output(), 40));
        }
        for agent in self.agents.values() {
            logs.push(process::tail(&agent.output(), 25));
        }
        logs.push(format!(
            "--- nats-server log ---\n{}",
            process::tail(&self.nats.log(), 25)
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
}

#[cfg(test)]
mod tests;

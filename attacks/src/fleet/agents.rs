//! The fleet's agents: `flotilla-agent` on the simulated backend with the fleet's test
//! timings, started with the bootstrap credentials or an attacker's choice, and stopped.

use super::{Fleet, SOON};
use flotilla_testkit::{Proc, binary};
use std::path::{Path, PathBuf};

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

impl Fleet {
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

    /// Agent `name`'s process id (while it runs).
    pub fn agent_pid(&self, name: &str) -> Option<u32> {
        self.agents.get(name).and_then(Proc::pid)
    }
}

//! The hub under attack: its command line, starting it and waiting until its API answers,
//! killing and restarting it, and other hubs of the same control plane.

use super::process::first_error;
use super::{Fleet, SOON};
use flotilla_testkit::{Proc, binary, free_port};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// A `flotilla-hub` command line with the fleet's test timings.
fn command(
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

/// Copies directory `from` to `to`: files and subdirectories.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

impl Fleet {
    /// `http://127.0.0.1:<grpc port>`.
    pub fn hub_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
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
        (command(nats_url, options, &secure, grpc, metrics), log)
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
        let cmd = command(&self.nats_url(), options, secure, grpc, metrics);
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

    /// A copy of the secure directory at `name` in the fleet's directory, as an operator copies
    /// it to another hub's machine (for [`Fleet::other_hub`]).
    pub fn secure_copy(&self, name: &str) -> PathBuf {
        let to = self.dir.path().join(name);
        if let Err(e) = copy_tree(&self.secure, &to) {
            self.fail(&format!(
                "copying {} to {}: {e}",
                self.secure.display(),
                to.display()
            ));
        }
        to
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
}

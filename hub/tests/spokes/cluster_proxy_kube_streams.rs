//! exec, attach, cp and port-forward through the hub's cluster proxy with the real kubectl
//! (pinned `kubectl.1.32`) against the **Kubernetes backend**: the agent opens the same
//! upgrade on the testkit's API server with kube-rs, which runs commands as local processes
//! on this machine and forwards ports to a local echo server — the protocol a real API server
//! speaks. A deployer acts as its execute-as ServiceAccount and the spoke's rules decide.

use crate::cluster_proxy::{ProxyHub, kubectl, steady_proxy_hub, wait_inventory};
use crate::cluster_proxy_streams::{hub_metrics, on_a_terminal, port_forward, sessions};
use crate::common;
use crate::kube_fixture;

use common::kubectl::Kubectl;
use common::tokens::{ADMIN, DEPLOYER};
use common::*;
use flotilla_testkit::kube::{AccessRule, FakeKube};
use flotilla_testkit::{EchoServer, NatsServer};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// A pod whose container has a literal environment variable and declares port 80.
const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: web
      image: nginx:1.27
      ports: [{containerPort: 80}]
      env: [{name: GREETING, value: hello from the spoke}]
"#;

/// What a test runs on: a hub, an agent with the Kubernetes backend on the testkit's API
/// server with [`POD`], its port 80 forwarded to an echo server, and kubectl 1.32 as the admin.
pub(crate) struct KubeSpoke {
    pub(crate) hub: ProxyHub,
    cluster: kube_fixture::Cluster,
    _agent: TestAgent,
    _echo: EchoServer,
    admin: Kubectl,
}

impl KubeSpoke {
    pub(crate) async fn start(nats: &NatsServer) -> Self {
        let hub = steady_proxy_hub(nats).await;
        let cluster = kube_fixture::Cluster::Fake(FakeKube::start().await);
        let agent =
            kube_fixture::kube_agent_with(agent_config("edge-1", &nats.url()), &cluster).await;
        wait_inventory(&hub, "edge-1", true).await;
        let admin = kubectl(&hub, "edge-1", ADMIN).pinned("1.32");
        admin
            .ok(&["apply", "--validate=false", "-f", "-"], Some(POD))
            .await;
        let echo = EchoServer::start().await;
        let spoke = Self {
            hub,
            cluster,
            _agent: agent,
            _echo: echo,
            admin,
        };
        spoke
            .fake()
            .forward("default", "web", 80, spoke._echo.addr());
        spoke
    }

    fn fake(&self) -> &FakeKube {
        self.cluster.fake().expect("the testkit's API server")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_attach_and_cp_reach_the_kubernetes_api_through_kube_rs() {
    let nats = NatsServer::start();
    let spoke = KubeSpoke::start(&nats).await;
    let admin = &spoke.admin;
    assert_eq!(
        admin.ok(&["exec", "web", "--", "echo", "hi"], None).await,
        "hi\n"
    );
    // The container's environment, a non-zero exit with its stderr.
    let (code, stdout, stderr) = admin
        .run_bytes(
            &[
                "exec",
                "web",
                "--",
                "sh",
                "-c",
                "echo $GREETING; echo oops >&2; exit 3",
            ],
            b"",
        )
        .await;
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(stdout, b"hello from the spoke\n");
    assert!(stderr.contains("oops"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );
    // stdin: 1 MiB through cat, its end reaching the process (v5 to the API server).
    let input: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let (code, stdout, stderr) = admin
        .run_bytes(&["exec", "-i", "web", "--", "cat"], &input)
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout == input, "{} bytes back", stdout.len());
    let err = admin
        .fails(&["exec", "web", "--", "no-such-command-here"], None)
        .await;
    assert!(err.contains("executable file not found in $PATH"), "{err}");

    // kubectl cp both ways: the machine's tar, in a directory of this test.
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("pod");
    std::fs::create_dir(&remote).unwrap();
    let local = dir.path().join("payload.bin");
    let payload: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    std::fs::write(&local, &payload).unwrap();
    let target = format!("web:{}/payload.bin", remote.display());
    admin
        .ok(&["cp", local.to_str().unwrap(), &target], None)
        .await;
    assert!(std::fs::read(remote.join("payload.bin")).unwrap() == payload);
    let back = dir.path().join("back.bin");
    admin
        .ok(&["cp", &target, back.to_str().unwrap()], None)
        .await;
    assert!(
        std::fs::read(&back).unwrap() == payload,
        "the copy back differs"
    );

    // attach -i: the pod's attach command (cat) echoes stdin and exits when it ends.
    let (code, stdout, stderr) = admin
        .run_bytes(&["attach", "-i", "web"], b"hello\nworld\n")
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, b"hello\nworld\n");

    let metrics = hub_metrics(&spoke.hub).await;
    assert!(
        metrics.contains(
            r#"flotilla_hub_cluster_proxy_sessions_ended_total{kind="exec",why="exited"}"#
        ),
        "{metrics}"
    );
    assert_eq!(sessions(&spoke.hub), 0);
    wait_until(
        || spoke.fake().open_sessions() == 0,
        "the spoke's sessions closed",
    )
    .await;
}

/// Sends `n` bytes through the forwarded port and reads them all back before closing: the
/// kube-rs port-forward cannot half-close, so the client waits for its answer first.
async fn echoed_whole(port: u16, n: usize) {
    let payload: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(29)).collect();
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut r, mut w) = tcp.split();
    let writing = w.write_all(&payload);
    let mut got = vec![0u8; n];
    let reading = r.read_exact(&mut got);
    let (written, read) = tokio::time::timeout(Duration::from_secs(90), async {
        tokio::join!(writing, reading)
    })
    .await
    .expect("the echo came back in time");
    written.unwrap();
    read.unwrap();
    assert!(got == payload, "the echo differs");
    tcp.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_a_pods_port_through_the_kubernetes_api() {
    let nats = NatsServer::start();
    let spoke = KubeSpoke::start(&nats).await;
    let pf = port_forward(&spoke.admin).await;
    echoed_whole(pf.port, 50 * 1024 * 1024).await;
    echoed_whole(pf.port, 1024 * 1024).await;
    drop(pf);
    // kubectl 1.30 (raw SPDY to the hub; the same kube-rs WebSocket to the spoke).
    let old = kubectl(&spoke.hub, "edge-1", ADMIN).pinned("1.30");
    let pf = port_forward(&old).await;
    echoed_whole(pf.port, 4 * 1024 * 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployer_execs_as_its_service_account_and_the_spokes_rules_decide() {
    let nats = NatsServer::start();
    let spoke = KubeSpoke::start(&nats).await;
    let deployer = kubectl(&spoke.hub, "edge-1", DEPLOYER).pinned("1.32");
    let as_executor = "--as=system:serviceaccount:default:executor1";
    // kubectl reads the pod first, then upgrades: the ServiceAccount may get pods, no more.
    spoke.fake().allow(
        AccessRule::service_account("default", "executor1")
            .verbs(&["get"])
            .resources("", &["pods"]),
    );
    let err = deployer
        .fails(&[as_executor, "exec", "web", "--", "echo", "hi"], None)
        .await;
    assert!(err.contains("403"), "{err}");
    assert!(
        err.contains("acting as system:serviceaccount:default:executor1"),
        "{err}"
    );
    spoke.fake().allow(
        AccessRule::service_account("default", "executor1")
            .verbs(&["create"])
            .resources("", &["pods/exec"]),
    );
    assert_eq!(
        deployer
            .ok(&[as_executor, "exec", "web", "--", "echo", "hi"], None)
            .await,
        "hi\n"
    );
    assert!(
        spoke.fake().impersonations().iter().any(|i| {
            i.user == "system:serviceaccount:default:executor1" && i.request.contains("/exec?")
        }),
        "the agent impersonated the executor on the upgrade"
    );
    // Port-forward is another subresource, refused until granted: the refusal comes when a
    // connection is forwarded, and kubectl ends the port-forward with it.
    let port = flotilla_testkit::free_port();
    let mut child = deployer
        .command(&[
            as_executor,
            "port-forward",
            "pod/web",
            &format!("{port}:80"),
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
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
    let out = tokio::time::timeout(SOON, child.wait_with_output())
        .await
        .expect("kubectl ended the port-forward")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("403"), "{stderr}");
}

/// Waits (bounded) until `done`.
async fn wait_until(done: impl Fn() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + SOON;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_with_a_tty_reaches_the_kubernetes_api() {
    let nats = NatsServer::start();
    let spoke = KubeSpoke::start(&nats).await;
    // kube-rs opens the exec with tty=true (the testkit's API server runs it without a pty:
    // its output is as the process writes it, and a tty has no stderr).
    let (code, out) = on_a_terminal(
        &spoke.admin,
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
    assert!(out.contains("hi"), "{out:?}");
    assert!(!out.contains("oops"), "{out:?}");
    let (code, out) = on_a_terminal(
        &spoke.admin,
        &[
            "exec",
            "-it",
            "web",
            "--",
            "sh",
            "-c",
            "read line; echo got $line; exit 4",
        ],
        "typed\r",
    )
    .await;
    assert_eq!(code, 4, "{out:?}");
    assert!(out.contains("got typed"), "{out:?}");
    let deadline = std::time::Instant::now() + SOON;
    while sessions(&spoke.hub) != 0 || spoke.fake().open_sessions() != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a session outlived its kubectl"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

//! exec, attach, cp and port-forward through the hub to clusters whose agents sit behind an
//! edge site's **leaf node** (the agents connect to the site's nats-server, which holds the one
//! link to the hub's): a simulated cluster and a cluster on the Kubernetes backend (the
//! testkit's API server) behind the same leaf, one hub, kubectl 1.32 pinned. The cases of
//! `cluster_proxy_streams` and `cluster_proxy_kube_streams` that move bytes, run on both
//! clusters at once: every session's frames, its credit and its end cross the leaf link.

use crate::cluster_proxy::{ProxyHub, kubectl, steady_proxy_hub, wait_inventory};
use crate::cluster_proxy_streams::{port_forward, sessions};
use crate::common;
use crate::kube_fixture;

use common::kubectl::Kubectl;
use common::tokens::ADMIN;
use common::*;
use flotilla_testkit::kube::FakeKube;
use flotilla_testkit::{EchoServer, NatsServer};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A pod declaring port 80 (the simulator's echo; the testkit forwards it to an
/// [`EchoServer`]), with an environment variable.
const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: web
      image: nginx:1.27
      ports: [{containerPort: 80}]
      env: [{name: GREETING, value: hello behind a leaf}]
"#;

/// The bytes forwarded through each cluster's port-forward.
const FORWARDED: usize = 50 * 1024 * 1024;

/// One cluster behind the leaf, as the test drives it.
struct Spoke {
    name: &'static str,
    admin: Kubectl,
    /// Where `kubectl cp` writes inside the pod: the simulated container's `/tmp`, or a
    /// directory of this test for the testkit's local processes.
    pod_dir: PathBuf,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_streams_reach_a_simulated_and_a_kubernetes_cluster_behind_a_leaf_node() {
    let nats = NatsServer::start_leaf_hub();
    let site = nats.start_leaf();
    let hub = steady_proxy_hub(&nats).await;
    let _sim = start_agent(agent_config("leaf-sim", &site.url()));
    let cluster = kube_fixture::Cluster::Fake(FakeKube::start().await);
    let _kube =
        kube_fixture::kube_agent_with(agent_config("leaf-kube", &site.url()), &cluster).await;
    let api = cluster.fake().expect("the testkit's API server");
    let echo = EchoServer::start().await;
    api.forward("default", "web", 80, echo.addr());
    let dir = tempfile::tempdir().unwrap();
    let kube_pod_dir = dir.path().join("pod");
    std::fs::create_dir(&kube_pod_dir).unwrap();
    let sim = Spoke::start(&hub, "leaf-sim", PathBuf::from("/tmp")).await;
    // The simulator runs the pod (Ready); the testkit's API server only stores it.
    sim.admin
        .ok(
            &["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"],
            None,
        )
        .await;
    let kube = Spoke::start(&hub, "leaf-kube", kube_pod_dir).await;

    tokio::join!(sim.run(dir.path()), kube.run(dir.path()));

    // A port-forward connection's place is given back once its task sees kubectl gone.
    let deadline = tokio::time::Instant::now() + SOON;
    while sessions(&hub) > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hub's sessions all ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while api.open_sessions() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the spoke's sessions closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Spoke {
    /// Waits for the cluster in the hub's inventory and applies [`POD`] on it.
    async fn start(hub: &ProxyHub, name: &'static str, pod_dir: PathBuf) -> Self {
        wait_inventory(hub, name, true).await;
        let admin = kubectl(hub, name, ADMIN).pinned("1.32");
        admin
            .ok(&["apply", "--validate=false", "-f", "-"], Some(POD))
            .await;
        Self {
            name,
            admin,
            pod_dir,
        }
    }

    /// exec (output, exit code and stderr, stdin), cp both ways, attach, and a 50 MiB
    /// port-forward; `local` is a directory for the test's files.
    async fn run(&self, local: &Path) {
        let (name, admin) = (self.name, &self.admin);
        assert_eq!(
            admin.ok(&["exec", "web", "--", "echo", "hi"], None).await,
            "hi\n",
            "{name}"
        );
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
        assert_eq!(code, Some(3), "{name}: {stderr}");
        assert_eq!(stdout, b"hello behind a leaf\n", "{name}");
        assert!(stderr.contains("oops"), "{name}: {stderr}");
        let input: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let (code, stdout, stderr) = admin
            .run_bytes(&["exec", "-i", "web", "--", "cat"], &input)
            .await;
        assert_eq!(code, Some(0), "{name}: {stderr}");
        assert!(stdout == input, "{name}: {} bytes back", stdout.len());

        // cp in, then out again.
        let payload: Vec<u8> = (0..2 * 1024 * 1024u32)
            .map(|i| (i * 7 % 253) as u8)
            .collect();
        let sent = local.join(format!("{name}-in.bin"));
        std::fs::write(&sent, &payload).unwrap();
        let target = format!("web:{}/payload.bin", self.pod_dir.display());
        admin
            .ok(&["cp", sent.to_str().unwrap(), &target], None)
            .await;
        let back = local.join(format!("{name}-back.bin"));
        admin
            .ok(&["cp", &target, back.to_str().unwrap()], None)
            .await;
        assert!(
            std::fs::read(&back).unwrap() == payload,
            "{name}: the copy back differs"
        );

        let (code, stdout, stderr) = admin
            .run_bytes(&["attach", "-i", "web"], b"hello\nleaf\n")
            .await;
        assert_eq!(code, Some(0), "{name}: {stderr}");
        assert_eq!(stdout, b"hello\nleaf\n", "{name}");

        let pf = port_forward(admin).await;
        echoed(pf.port, FORWARDED, name).await;
    }
}

/// Sends `n` bytes through the forwarded `port` while reading the echo, and compares them;
/// the client closes only once all came back (the Kubernetes backend's port-forward cannot
/// half-close, docs/proxy.md).
async fn echoed(port: u16, n: usize, name: &str) {
    let payload: Vec<u8> = (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(7))
        .collect();
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut r, mut w) = tcp.split();
    let mut got = vec![0u8; n];
    let (written, read) = tokio::time::timeout(Duration::from_secs(120), async {
        tokio::join!(w.write_all(&payload), r.read_exact(&mut got))
    })
    .await
    .unwrap_or_else(|_| panic!("{name}: the 50 MiB echo did not come back in time"));
    written.unwrap();
    read.unwrap();
    assert!(got == payload, "{name}: the forwarded bytes differ");
    tcp.shutdown().await.unwrap();
}

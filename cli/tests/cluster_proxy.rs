//! The cluster proxy with the real binaries: `flotilla-hub --cluster-proxy-listen`,
//! `flotilla-sim`, and the kubeconfig `flotilla kubeconfig` prints, used by the real kubectl.

mod common;

use common::{HubBuilder, cli_ok, start_sim, wait_available};
use flotilla_testkit::{NatsServer, free_port};
use std::process::Command;

#[test]
fn kubectl_reaches_a_flotilla_sim_cluster_with_the_kubeconfig_flotilla_prints() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{port}"))
        .start();
    let sim = start_sim(&nats, dir.path(), 1, "edge", &[]);
    wait_available(&hub, &[&hub.proc, &sim], "edge", 1);
    let kubeconfig = dir.path().join("edge.kubeconfig");
    let server = format!("http://127.0.0.1:{port}");
    std::fs::write(
        &kubeconfig,
        cli_ok(&hub.grpc, &["kubeconfig", "edge-0001", "--server", &server]),
    )
    .unwrap();
    let kubectl = |args: &[&str]| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("kube-cache"))
            .arg("--request-timeout=30s")
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl is installed");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    kubectl(&["create", "configmap", "hello", "--from-literal=greeting=hi"]);
    assert_eq!(
        kubectl(&[
            "get",
            "configmap",
            "hello",
            "-o",
            "jsonpath={.data.greeting}"
        ]),
        "hi"
    );
    assert!(kubectl(&["get", "namespaces", "-o", "name"]).contains("namespace/default"));
}

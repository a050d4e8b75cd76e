//! The cluster proxy with the real binaries: `flotilla-hub --cluster-proxy-listen`,
//! `flotilla-sim`, and the kubeconfig `flotilla kubeconfig` prints, used by the real kubectl.

mod common;

use common::{HubBuilder, Kubectl, start_sim, wait_available};
use flotilla_testkit::{NatsServer, free_port};

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
    let kubectl = Kubectl::new(&hub, dir.path(), "edge-0001", &format!("127.0.0.1:{port}"));
    let kubectl = |args: &[&str]| kubectl.ok(args);
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

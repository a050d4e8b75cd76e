//! The fleet-metrics add-on's counts on a real cluster, against the testkit's Kubernetes API
//! server: its nodes, and the AppliedManifestWorks (the anchors of the works the agent applied)
//! once their CRD is installed.

use flotilla_agent::addons::fleet_metrics::{KubeSource, Source};
use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_api::work::manifest_id;
use flotilla_bus::addons;
use flotilla_bus::envelope::Event;
use flotilla_testkit::kube::FakeKube;
use flotilla_testkit::{NatsServer, Proc};
use futures::StreamExt;
use serde_json::json;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_flotilla-addon-fleet-metrics");

#[tokio::test]
async fn the_kube_source_counts_nodes_and_applied_manifest_works() {
    let fake = FakeKube::start().await;
    let kubeconfig = fake.kubeconfig();
    let source = tokio::time::timeout(
        Duration::from_secs(20),
        KubeSource::connect(Some(&kubeconfig)),
    )
    .await
    .expect("connected in time")
    .expect("connect to the fake API server");
    assert_eq!(source.node_count().await, Some(2), "the fake has two nodes");
    // No AppliedManifestWork CRD: the work count is unknown, not 0.
    assert_eq!(source.work_count().await, None);

    let kube = KubeBackend::connect(Some(&kubeconfig)).await.unwrap();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "appliedmanifestworks.work.open-cluster-management.io"},
        "spec": {"group": "work.open-cluster-management.io",
            "names": {"kind": "AppliedManifestWork", "plural": "appliedmanifestworks",
                      "singular": "appliedmanifestwork", "listKind": "AppliedManifestWorkList"},
            "scope": "Cluster",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}});
    kube.apply(&manifest_id(&crd).unwrap(), &crd, &Strategy::Update)
        .await
        .expect("the CRD is created");
    assert_eq!(source.work_count().await, Some(0));
    for name in ["hub-a-work-1", "hub-a-work-2", "hub-a-work-3"] {
        let amw = json!({"apiVersion": "work.open-cluster-management.io/v1",
            "kind": "AppliedManifestWork", "metadata": {"name": name},
            "spec": {"hubHash": "hub-a", "manifestWorkName": name}});
        kube.apply(&manifest_id(&amw).unwrap(), &amw, &Strategy::Update)
            .await
            .expect("an AppliedManifestWork is created");
    }
    assert_eq!(source.work_count().await, Some(3));
}

#[tokio::test]
async fn an_unreadable_kubeconfig_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, "not: [a kubeconfig").unwrap();
    let err = KubeSource::connect(Some(&path)).await.err().unwrap();
    assert!(err.starts_with("--kubeconfig "), "{err}");
}

#[test]
fn the_binary_lists_every_bad_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "--cluster-name=Bad_Name",
            "--addon-name=fleet.metrics",
            "--creds",
        ])
        .arg(dir.path().join("missing.creds"))
        .env_remove("CLUSTER_NAME")
        .env_remove("ADDON_NAME")
        .env_remove("REPORT_INTERVAL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    for wanted in [
        "--cluster-name \"Bad_Name\"",
        "--addon-name \"fleet.metrics\"",
        "--creds ",
    ] {
        assert!(err.contains(wanted), "{wanted} in {err}");
    }
    let out = Command::new(BIN)
        .args(["--cluster-name=edge-1", "--interval-seconds=0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses a zero interval");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval-seconds"));
}

#[tokio::test]
async fn the_binary_renews_the_lease_and_reports_the_clusters_counts() {
    let nats = NatsServer::start();
    let fake = FakeKube::start().await;
    let observer = async_nats::connect(nats.url()).await.unwrap();
    let mut sub = observer
        .subscribe(addons::all_of("fleet-metrics", "edge-1"))
        .await
        .unwrap();
    observer.flush().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg(format!("--nats-url={}", nats.url()))
        .args(["--cluster-name", "edge-1", "--interval-seconds", "1"])
        .arg("--kubeconfig")
        .arg(fake.kubeconfig())
        .env_remove("ADDON_NAME")
        .env_remove("REPORT_INTERVAL");
    let mut proc = Proc::spawn("fleet-metrics", cmd, dir.path().join("addon.log"));
    let (mut lease, mut report) = (false, None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !(lease && report.is_some()) {
        let m = tokio::time::timeout_at(deadline, sub.next())
            .await
            .unwrap_or_else(|_| panic!("no lease and report in time\n{}", proc.output()))
            .unwrap();
        let ev = Event::decode(&m.payload, 1 << 20).unwrap();
        if m.subject.ends_with(".lease") {
            assert_eq!(ev.event_type, addons::lease_type());
            lease = true;
        } else {
            report = Some(
                ev.decode_data::<flotilla_api::v1::AddOnPlacementScoreReport>("report")
                    .unwrap(),
            );
        }
    }
    // Two nodes; no AppliedManifestWork CRD, so no work count.
    let report = report.unwrap();
    assert_eq!(
        report.scores,
        flotilla_agent::addons::fleet_metrics::scores(Some(2), None)
    );
    assert!(proc.is_running());
    proc.kill();
}

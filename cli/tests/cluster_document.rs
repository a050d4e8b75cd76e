//! OCM ManagedCluster documents: a cluster created ahead of its agent (GitOps provisioning) is
//! accepted, labelled and tainted as the document says and becomes Available when its agent
//! registers, without an admin step; applying the document again edits the cluster.

mod common;

use common::{AgentBuilder, HubBuilder, clusters_json, condition, run_cli, wait_for};
use flotilla_testkit::NatsServer;

const DOC: &str = r#"apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: store-0042
  labels:
    region: eu-west
    store-format: kiosk
spec:
  hubAcceptsClient: true
  leaseDurationSeconds: 2
  taints:
    - key: maintenance
      value: "true"
      effect: PreferNoSelect
"#;

fn cluster_json(hub: &str, name: &str) -> Option<serde_json::Value> {
    clusters_json(hub)?
        .into_iter()
        .find(|c| c["metadata"]["name"] == name)
}

fn hub_answers(hub: &common::Hub) {
    wait_for("the hub answering", &[&hub.proc], || {
        (run_cli(&hub.grpc, &["get", "clusters"], None).code == Some(0)).then_some(())
    });
}

#[test]
fn a_cluster_applied_ahead_of_its_agent_joins_without_an_admin_and_edits_apply() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    // No auto-accept: only the document accepts the cluster.
    let hub = HubBuilder::new(&nats, dir.path()).start();
    hub_answers(&hub);
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(DOC));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "managedcluster.cluster.open-cluster-management.io/store-0042 applied (accepted)"
        ),
        "{}",
        out.stdout
    );
    let c = cluster_json(&hub.grpc, "store-0042").expect("the cluster exists before its agent");
    assert_eq!(c["spec"]["hubAcceptsClient"], true, "{c}");
    assert_eq!(c["spec"]["leaseDurationSeconds"], 2, "{c}");
    assert_eq!(c["metadata"]["labels"]["store-format"], "kiosk", "{c}");
    assert_ne!(
        condition(&c, "ManagedClusterConditionAvailable").as_deref(),
        Some("True")
    );

    // The agent asks with other labels: the document's stay (the hub's labels are authoritative).
    let agent = AgentBuilder::new(&nats, dir.path(), "store-0042")
        .label("region=us-east")
        .start();
    let c = wait_for(
        "the pre-created cluster Available",
        &[&hub.proc, &agent],
        || {
            let c = cluster_json(&hub.grpc, "store-0042")?;
            (condition(&c, "ManagedClusterConditionAvailable").as_deref() == Some("True"))
                .then_some(c)
        },
    );
    assert_eq!(c["metadata"]["labels"]["region"], "eu-west", "{c}");
    let taints = c["spec"]["taints"].as_array().unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "maintenance" && t["effect"] == "PreferNoSelect"),
        "{c}"
    );

    // Applied again: labels set, the taint the document no longer lists removed, lease changed.
    let edited = DOC
        .replace("store-format: kiosk", "store-format: warehouse")
        .replace("leaseDurationSeconds: 2", "leaseDurationSeconds: 3")
        .replace(
            "  taints:\n    - key: maintenance\n      value: \"true\"\n      effect: PreferNoSelect\n",
            "",
        );
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&edited));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let c = cluster_json(&hub.grpc, "store-0042").unwrap();
    assert_eq!(c["metadata"]["labels"]["store-format"], "warehouse", "{c}");
    assert_eq!(c["spec"]["leaseDurationSeconds"], 3, "{c}");
    let taints = c["spec"]["taints"].as_array().cloned().unwrap_or_default();
    assert!(!taints.iter().any(|t| t["key"] == "maintenance"), "{c}");
}

#[test]
fn a_document_listing_the_hubs_taints_applies_with_a_warning() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    hub_answers(&hub);
    // As `kubectl get managedcluster -o yaml` prints a cluster whose agent is gone.
    let doc = DOC.replace(
        "  taints:\n",
        "  taints:\n    - key: cluster.open-cluster-management.io/unreachable\n      effect: NoSelect\n      timeAdded: \"2024-05-01T10:00:00Z\"\n",
    );
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&doc));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "warning: managedcluster.cluster.open-cluster-management.io/store-0042: \
             spec.taints[0]: cluster.open-cluster-management.io/unreachable is maintained by the \
             hub; ignored"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("store-0042 applied (accepted)"),
        "{}",
        out.stdout
    );
    let c = cluster_json(&hub.grpc, "store-0042").unwrap();
    let taints = c["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let unreachable = taints
        .iter()
        .find(|t| t["key"] == "cluster.open-cluster-management.io/unreachable")
        .expect("the hub's own taint: no lease yet");
    assert_ne!(
        unreachable["timeAdded"], "2024-05-01T10:00:00Z",
        "timeAdded is the hub's: {c}"
    );
    assert!(taints.iter().any(|t| t["key"] == "maintenance"), "{c}");
}

#[test]
fn bad_managed_cluster_documents_name_the_field_and_create_nothing() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    hub_answers(&hub);
    for (bad, field) in [
        (
            DOC.replace("effect: PreferNoSelect", "effect: NoSchedule"),
            "spec.taints[0].effect",
        ),
        (
            DOC.replace("leaseDurationSeconds: 2", "leaseDurationSeconds: -5"),
            "spec.leaseDurationSeconds",
        ),
        (
            DOC.replace("name: store-0042", "name: Store_42"),
            "metadata.name",
        ),
    ] {
        let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&bad));
        assert_ne!(out.code, Some(0), "{bad}");
        assert!(
            out.stderr.contains(field),
            "{field} not named in: {}",
            out.stderr
        );
    }
    let out = run_cli(&hub.grpc, &["get", "clusters"], None);
    assert!(
        !out.stdout.contains("store"),
        "nothing was created: {}",
        out.stdout
    );
}

#[test]
fn a_fleet_provisioned_from_one_file_is_created_in_full_with_a_work_for_each() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    hub_answers(&hub);
    // 40 clusters, then a work for each: the clusters go concurrently, the works after them.
    let mut file = String::new();
    for i in 0..40 {
        file += &format!(
            "---\napiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\n\
             metadata: {{name: site-{i}, labels: {{store: \"{i}\"}}}}\nspec: {{hubAcceptsClient: true}}\n"
        );
    }
    for i in 0..40 {
        file += &format!(
            "---\napiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
             metadata: {{name: w, namespace: site-{i}}}\nspec:\n  workload:\n    manifests:\n\
             \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c, namespace: default}}}}\n"
        );
    }
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&file));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.contains(" applied"))
            .count(),
        80,
        "{}",
        out.stdout
    );
    let clusters = clusters_json(&hub.grpc).unwrap();
    assert_eq!(
        clusters
            .iter()
            .filter(|c| c["metadata"]["name"].as_str().unwrap().starts_with("site-"))
            .count(),
        40
    );
}

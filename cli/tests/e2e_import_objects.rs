//! ClusterImportPolicy object sources with real processes: a `flotilla-agent` on a simulated
//! management cluster ("mgmt") holds Cluster API `Cluster`s that a ManifestWork created; a
//! policy applied with `flotilla apply -f` lists them through mgmt's agent and creates their
//! clusters ahead of their agents; deleting the work deletes the created cluster (a cluster an
//! admin made before the policy stays), and `flotilla watch importpolicies` follows the policy.
//! In secure mode over TLS the deleted cluster's agent, which had come back over credentials of
//! its own, is refused by NATS after the revocation.

mod common;

use common::*;
use flotilla_testkit::{NatsServer, Proc};
use serde_json::Value;
use std::path::Path;

const POLICY: &str = r#"apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterImportPolicy
metadata: {name: capi}
spec:
  source:
    group: cluster.x-k8s.io
    resource: clusters
    versions: [v1beta1]
    clusters: [mgmt]
  nameTemplate: source.metadata.name
  creationCondition: 'source.spec.paused == false'
  template: '{"labels": {"provider": "capi"}}'
"#;

/// A ManifestWork to mgmt creating one CAPI `Cluster` per name.
fn work(names: &[&str]) -> String {
    let mut doc = String::from(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
         metadata: {namespace: mgmt, name: capi-clusters}\nspec:\n  workload:\n    manifests:\n",
    );
    for n in names {
        doc.push_str(&format!(
            "      - {{apiVersion: cluster.x-k8s.io/v1beta1, kind: Cluster, metadata: {{name: {n}, \
             namespace: default}}, spec: {{paused: false}}}}\n"
        ));
    }
    doc
}

const HAND_MADE: &str = "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\n\
                         metadata: {name: capi-hand}\nspec: {hubAcceptsClient: true}\n";

fn apply(hub: &Hub, dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    let out = run_cli(&hub.grpc, &["apply", "-f", path.to_str().unwrap()], None);
    assert_eq!(out.code, Some(0), "apply {file}: {}", out.stderr);
}

fn cluster(hub: &Hub, name: &str) -> Option<Value> {
    clusters_json(&hub.grpc)?
        .into_iter()
        .find(|c| c["metadata"]["name"] == name)
}

/// mgmt accepted, the hand-made cluster, the work's CAPI clusters on mgmt, then the policy.
fn import_capi_from_mgmt(hub: &Hub, dir: &Path, mgmt: &Proc) {
    let logs = [&hub.proc, mgmt];
    wait_for("mgmt registers", &logs, || cluster(hub, "mgmt"));
    cli_ok(&hub.grpc, &["accept", "mgmt"]);
    wait_for("mgmt Available", &logs, || {
        cluster(hub, "mgmt").filter(available)
    });
    apply(hub, dir, "hand.yaml", HAND_MADE);
    apply(hub, dir, "work.yaml", &work(&["capi-1", "capi-hand"]));
    apply(hub, dir, "policy.yaml", POLICY);
    wait_for("capi-1 created by the policy", &logs, || {
        cluster(hub, "capi-1").filter(|c| {
            c["metadata"]["labels"]["provider"] == "capi" && c["spec"]["hubAcceptsClient"] == true
        })
    });
    let described = cli_ok(&hub.grpc, &["describe", "cluster", "capi-1"]);
    assert!(
        described.contains("Created from:      a ClusterImportPolicy"),
        "{described}"
    );
    let hand = cluster(hub, "capi-hand").unwrap();
    assert!(
        hand["metadata"]["labels"]["provider"].is_null(),
        "adopted, not relabelled: {hand}"
    );
    let out = cli_ok(&hub.grpc, &["get", "importpolicies"]);
    assert!(out.contains("cluster.x-k8s.io/clusters on mgmt"), "{out}");
    wait_for("describe: listed on mgmt", &logs, || {
        let out = cli_ok(&hub.grpc, &["describe", "importpolicy", "capi"]);
        (out.contains("Listed on:          mgmt") && out.contains("SourcesListed True"))
            .then_some(())
    });
}

/// Deleting the work removes the CAPI objects: capi-1 goes, capi-hand stays.
fn delete_the_work(hub: &Hub, logs: &[&Proc]) {
    cli_ok(
        &hub.grpc,
        &["delete", "work", "capi-clusters", "--cluster", "mgmt"],
    );
    wait_for("capi-1 deleted with its source", logs, || {
        cluster(hub, "capi-1").is_none().then_some(())
    });
    assert!(cluster(hub, "capi-hand").is_some(), "made by hand: kept");
}

#[test]
fn capi_clusters_on_a_mgmt_agent_are_created_and_deleted_with_their_work() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--import-poll-seconds", "1")
        .start();
    let mgmt = AgentBuilder::new(&nats, dir.path(), "mgmt").start();
    import_capi_from_mgmt(&hub, dir.path(), &mgmt);
    let mut cmd = std::process::Command::new(flotilla_testkit::binary("flotilla"));
    cmd.args(["--hub", &hub.grpc, "watch", "importpolicies"]);
    let watch = Proc::spawn("flotilla watch", cmd, dir.path().join("watch.log"));
    wait_for("watch shows the policy and its counts", &[&watch], || {
        let out = watch.output();
        out.lines()
            .any(|l| l.starts_with("ADDED") && l.contains("capi") && l.contains("True"))
            .then_some(())
    });
    // The created cluster's agent registers and is accepted with no admin step.
    let capi1 = AgentBuilder::new(&nats, dir.path(), "capi-1").start();
    let logs = [&hub.proc, &mgmt, &capi1];
    wait_for("capi-1 Available", &logs, || {
        cluster(&hub, "capi-1").filter(available)
    });
    delete_the_work(&hub, &logs);
}

#[test]
fn in_secure_mode_a_deleted_imported_clusters_agent_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secure = dir.path().join("secure");
    let (nats, tls_url) = secure_nats(&secure);
    let hub = HubBuilder::new(&nats, dir.path())
        .nats_url(&tls_url)
        .flag("--secure-dir", &secure.display().to_string())
        .flag("--import-poll-seconds", "1")
        .start();
    let ca = secure.join("tls").join("ca.pem").display().to_string();
    let agent = |name: &str, creds: &Path| {
        AgentBuilder::at(&tls_url, dir.path(), name)
            .flag("--bootstrap-creds", &creds.display().to_string())
            .flag("--nats-ca", &ca)
            .start()
    };
    let mgmt = agent("mgmt", &secure.join("bootstrap.creds"));
    wait_for("the hub answering", &[&hub.proc], || {
        cli(&hub.grpc, &["get", "clusters"]).0.then_some(())
    });
    import_capi_from_mgmt(&hub, dir.path(), &mgmt);
    // The policy never binds a key: capi-1's agent comes with a join credential for its name.
    let join = cli_ok(&hub.grpc, &["join-token", "capi-1", "--ttl", "30m"]);
    let join_file = dir.path().join("capi-1.creds");
    std::fs::write(&join_file, join).unwrap();
    let capi1 = agent("capi-1", &join_file);
    let logs = [&hub.proc, &mgmt, &capi1];
    wait_for("capi-1 Available over its own credentials", &logs, || {
        cluster(&hub, "capi-1").filter(available)
    });
    assert!(
        dir.path()
            .join("state-capi-1")
            .join("cluster.creds")
            .is_file()
    );
    assert!(
        !capi1.output().contains("NATS refused the credentials"),
        "refused before its cluster was deleted"
    );
    delete_the_work(&hub, &logs);
    wait_for("capi-1's agent refused after the revocation", &logs, || {
        capi1
            .output()
            .contains("NATS refused the credentials")
            .then_some(())
    });
}

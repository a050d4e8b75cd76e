//! ManifestWorkReplicaSets with the real binaries: OCM YAML applied with `flotilla apply -f`, a
//! progressive rollout followed with `flotilla rollout status --watch`, works found by label, a
//! failure beyond maxFailures stopping the rollout and saying why.

mod common;

use common::*;
use flotilla_testkit::{NatsServer, binary};
use std::process::Command;

const SETUP: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: default, namespace: default}
spec: {clusterSet: default}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: default}
spec:
  clusterSets: [default]
"#;

fn replica_set(name: &str, annotation: &str, max_failures: u32) -> String {
    format!(
        r#"apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {{name: {name}, namespace: default}}
spec:
  placementRefs:
    - name: edge
      rolloutStrategy:
        type: Progressive
        progressive:
          maxConcurrency: 1
          maxFailures: {max_failures}
  manifestWorkTemplate:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: {name}
            namespace: default
            annotations: {{{annotation}}}
          data: {{hello: world}}
"#
    )
}

#[test]
fn a_replica_set_rolls_out_progressively_and_a_breach_stops_it() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub_proc = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let hub = hub_proc.grpc.clone();
    let sim = start_sim(&nats, dir.path(), 3, "edge", &["--ready-delay-ms", "300"]);
    wait_available(&hub_proc, &[&hub_proc.proc, &sim], "edge", 3);
    let file = dir.path().join("setup.yaml");
    std::fs::write(&file, SETUP).unwrap();
    cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);

    // A good template rolls out one cluster at a time and completes.
    let file = dir.path().join("rs.yaml");
    std::fs::write(&file, replica_set("greeting", "", 0)).unwrap();
    let out = cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.contains("manifestworkreplicaset.work.open-cluster-management.io/greeting applied"),
        "{out}"
    );
    let status = Command::new(binary("flotilla"))
        .args(["--hub", &hub, "rollout", "status", "greeting", "--watch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        text.contains("rollout complete") && text.contains("3/3 available"),
        "{text}"
    );
    let table = cli_ok(&hub, &["get", "replicasets", "-n", "default"]);
    let r = row(&table, "greeting").unwrap_or_else(|| panic!("{table}"));
    assert!(
        r.contains("edge") && r.split_whitespace().filter(|w| *w == "3").count() >= 3,
        "{table}"
    );
    let works = cli_ok(
        &hub,
        &[
            "get",
            "works",
            "-l",
            "work.open-cluster-management.io/manifestworkreplicaset=default.greeting",
        ],
    );
    assert_eq!(
        works.lines().filter(|l| l.starts_with("greeting")).count(),
        3,
        "{works}"
    );
    let described = cli_ok(&hub, &["describe", "replicaset", "greeting"]);
    for part in [
        "Progressive maxConcurrency=1",
        "rollout complete",
        "PlacementRolledOut",
    ] {
        assert!(described.contains(part), "{part} missing:\n{described}");
    }
    let yaml = cli_ok(
        &hub,
        &[
            "get",
            "replicasets",
            "greeting",
            "-n",
            "default",
            "-o",
            "yaml",
        ],
    );
    assert!(
        yaml.contains("kind: ManifestWorkReplicaSet") && yaml.contains("available: 3"),
        "{yaml}"
    );

    // A template every cluster fails to apply stops after the first failure (maxFailures 0).
    std::fs::write(
        &file,
        replica_set("broken", "sim.flotilla.io/apply-error: \"disk full\"", 0),
    )
    .unwrap();
    cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    let status = Command::new(binary("flotilla"))
        .args(["--hub", &hub, "rollout", "status", "broken", "--watch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(!status.status.success(), "{text}");
    assert!(
        text.contains("stopped") && text.contains("maxFailures 0"),
        "{text}"
    );
    let works = cli_ok(
        &hub,
        &[
            "get",
            "works",
            "-l",
            "work.open-cluster-management.io/manifestworkreplicaset=default.broken",
        ],
    );
    assert_eq!(
        works.lines().filter(|l| l.starts_with("broken")).count(),
        1,
        "only the first cluster got the failing work: {works}"
    );
}

fn works_of(hub: &str, rs: &str) -> Vec<serde_json::Value> {
    let out = cli_ok(
        hub,
        &[
            "get",
            "works",
            "-l",
            &format!("work.open-cluster-management.io/manifestworkreplicaset=default.{rs}"),
            "-o",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    v["items"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_hub_killed_mid_rollout_resumes_where_it_was() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let port = flotilla_testkit::free_port();
    let mut hub = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    let sim = start_sim(&nats, dir.path(), 3, "edge", &["--ready-delay-ms", "200"]);
    wait_available(&hub, &[&hub.proc, &sim], "edge", 3);
    let file = dir.path().join("setup.yaml");
    std::fs::write(&file, SETUP).unwrap();
    cli_ok(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
    // One at a time, each soaking 2 s: about 6 s in all.
    let slow = replica_set("slow", "", 0).replace(
        "          maxFailures: 0",
        "          maxFailures: 0\n          minSuccessTime: 2s",
    );
    std::fs::write(&file, slow).unwrap();
    cli_ok(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
    wait_for("the first cluster's work", &[&hub.proc, &sim], || {
        let works = works_of(&hub.grpc, "slow");
        (works.len() == 1).then_some(())
    });

    hub.proc.kill(); // SIGKILL mid-rollout
    let hub2 = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    wait_for("hub back", &[&hub2.proc], || clusters_json(&hub2.grpc));
    // It goes on from where it was: never more than one new work at a time, and it completes.
    let status = std::process::Command::new(binary("flotilla"))
        .args(["--hub", &hub2.grpc, "rollout", "status", "slow", "--watch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}{}", hub2.proc.output());
    assert!(text.contains("3/3 available"), "{text}");
    for w in works_of(&hub2.grpc, "slow") {
        assert_eq!(
            w["metadata"]["generation"], 1,
            "a work was rewritten: {w:#}"
        );
    }
    drop(sim);
}

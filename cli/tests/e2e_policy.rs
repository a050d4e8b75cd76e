//! Governance with the real binaries: policy-collection's namespace policy applied unchanged
//! with `flotilla apply -f` (no namespace: `default`), inform then enforce over a fleet of
//! simulated clusters, followed with `flotilla policy status --watch`, described, listed in
//! OCM's shape, deleted.

mod common;

use common::*;
use flotilla_testkit::NatsServer;

const SETUP: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: default, namespace: default}
spec: {clusterSet: default}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: placement-policy-namespace
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata:
  name: binding-policy-namespace
placementRef:
  name: placement-policy-namespace
  kind: Placement
  apiGroup: cluster.open-cluster-management.io
subjects:
- name: policy-namespace
  kind: Policy
  apiGroup: policy.open-cluster-management.io
"#;

const NAMESPACE_POLICY: &str =
    include_str!("../../api/src/ocm/policy/testdata/policy-namespace.yaml");

#[test]
fn policy_collections_namespace_policy_applies_unchanged_and_is_enforced_on_the_fleet() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub_proc = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let hub = hub_proc.grpc.clone();
    let sim = start_sim(&nats, dir.path(), 3, "edge", &[]);
    wait_for("3 clusters Available", &[&hub_proc.proc, &sim], || {
        (clusters_json(&hub)?.iter().filter(|c| available(c)).count() == 3).then_some(())
    });
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, format!("{SETUP}---\n{NAMESPACE_POLICY}")).unwrap();
    let out = cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.contains(
            "policy.policy.open-cluster-management.io/policy-namespace applied (namespace default, remediation inform)"
        ),
        "{out}"
    );

    // Inform: every cluster reports NonCompliant.
    wait_for("the policy NonCompliant", &[&hub_proc.proc, &sim], || {
        let table = cli_ok(&hub, &["get", "policies", "-n", "default"]);
        row(&table, "policy-namespace")
            .is_some_and(|r| r.contains("inform") && r.contains("NonCompliant"))
            .then_some(())
    });
    let status = cli_ok(&hub, &["policy", "status", "policy-namespace"]);
    assert!(status.contains("0/3 compliant"), "{status}");
    assert!(
        status.contains("binding binding-policy-namespace → Placement placement-policy-namespace"),
        "{status}"
    );

    // Enforce: `policy status --watch` returns once every cluster is Compliant.
    std::fs::write(
        &file,
        NAMESPACE_POLICY.replace(
            "remediationAction: inform\n  disabled",
            "remediationAction: enforce\n  disabled",
        ),
    )
    .unwrap();
    cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    let watched = run_cli(
        &hub,
        &["policy", "status", "policy-namespace", "--watch"],
        None,
    );
    assert_eq!(
        watched.code,
        Some(0),
        "{}{}",
        watched.stdout,
        watched.stderr
    );
    assert!(
        watched.stdout.contains("3/3 compliant"),
        "{}",
        watched.stdout
    );

    let described = cli_ok(&hub, &["describe", "policy", "policy-namespace"]);
    for part in [
        "Compliance state:    Compliant",
        "Standards:           NIST SP 800-53",
        "ConfigurationPolicy policy-namespace-example",
        "namespaces [prod] was created successfully",
    ] {
        assert!(described.contains(part), "{part} missing:\n{described}");
    }
    let yaml = cli_ok(
        &hub,
        &[
            "get",
            "policies",
            "policy-namespace",
            "-n",
            "default",
            "-o",
            "yaml",
        ],
    );
    for part in [
        "apiVersion: policy.open-cluster-management.io/v1",
        "policy-templates:",
        "compliant: Compliant",
        "clustername: edge-0001",
    ] {
        assert!(yaml.contains(part), "{part} missing:\n{yaml}");
    }
    let bindings = cli_ok(&hub, &["get", "placementbindings"]);
    assert!(
        row(&bindings, "default")
            .is_some_and(|r| r.contains("Placement/placement-policy-namespace")),
        "{bindings}"
    );

    cli_ok(&hub, &["delete", "policy", "policy-namespace"]);
    let (ok, _, err) = cli(&hub, &["describe", "policy", "policy-namespace"]);
    assert!(!ok && err.contains("not found"), "{err}");
}

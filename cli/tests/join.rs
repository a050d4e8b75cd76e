//! `flotilla join`: the install manifests validate against the Kubernetes OpenAPI schemas
//! (`kubernetes-validate`, installed by `scripts/test.sh`), in every RBAC variant, with and
//! without secrets; the default RBAC is least privilege; a hub without secure mode gives no
//! credential; bad arguments are refused naming the argument.

mod common;

use common::{HubBuilder, cli, wait_for};
use flotilla_testkit::{NatsServer, binary};
use serde::Deserialize;
use serde_json::Value;
use std::process::Command;

const HINT: &str = "kubernetes-validate is not installed: run `pip install kubernetes-validate`, \
or `./scripts/test.sh`, which installs it";

fn join(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(binary("flotilla"))
        .arg("join")
        .args(args)
        .output()
        .expect("run flotilla join");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn validate(yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.30.0", "--no-warn"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{HINT} ({e})"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{yaml}");
    let passed = text.matches("passed").count();
    let documents = yaml.matches("\nkind: ").count();
    assert_eq!(passed, documents, "{text}");
}

/// The documents of a manifest.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The rules of the ClusterRole.
fn cluster_rules(docs: &[Value]) -> Vec<Value> {
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole")
        .expect("a ClusterRole");
    role["rules"].as_array().unwrap().clone()
}

/// Checks the least-privilege ClusterRole: no wildcard anywhere, no Secrets, and no write
/// outside the agent's own bookkeeping (its anchors, managed namespaces, access reviews).
fn assert_least_privilege(docs: &[Value]) {
    for rule in cluster_rules(docs) {
        for field in ["apiGroups", "resources", "verbs", "nonResourceURLs"] {
            assert!(!strings(&rule[field]).contains(&"*"), "{field}: {rule}");
        }
        let resources = strings(&rule["resources"]);
        assert!(
            !resources.contains(&"secrets"),
            "cluster-wide secrets: {rule}"
        );
        let verbs = strings(&rule["verbs"]);
        let writes = verbs.iter().any(|v| {
            matches!(
                *v,
                "create" | "update" | "patch" | "delete" | "deletecollection" | "escalate" | "bind"
            )
        });
        if writes {
            for r in resources {
                assert!(
                    ["namespaces", "subjectaccessreviews", "appliedmanifestworks"].contains(&r),
                    "cluster-wide write of {r}: {rule}"
                );
            }
        }
        // Impersonation only in the executors' namespaces (Roles), never cluster-wide.
        assert!(
            !verbs.contains(&"impersonate"),
            "cluster-wide impersonate: {rule}"
        );
    }
}

#[test]
fn install_manifests_validate_against_the_kubernetes_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("bootstrap.creds");
    let ca = dir.path().join("ca.pem");
    std::fs::write(
        &creds,
        "-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n",
    )
    .unwrap();
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let (creds, ca) = (creds.display().to_string(), ca.display().to_string());

    // The default, without a hub to ask: least privilege, no credential.
    let (ok, plain, err) = join(&["edge-1", "--nats-url", "nats://hub:4222", "--offline"]);
    assert!(ok, "{err}");
    validate(&plain);
    assert!(plain.contains("--backend=kubernetes") && plain.contains("--cluster-name=edge-1"));
    let docs = documents(&plain);
    assert_least_privilege(&docs);
    assert!(!docs.iter().any(|d| d["kind"] == "Secret"));
    assert!(
        !docs.iter().any(|d| d["kind"] == "Role"),
        "no Role unless asked"
    );
    assert!(err.contains("no --executor-namespace"), "{err}");
    // The executor check (OCM's spec.executor) asks SubjectAccessReviews.
    assert!(cluster_rules(&docs).iter().any(|r| {
        strings(&r["resources"]) == ["subjectaccessreviews"] && strings(&r["verbs"]) == ["create"]
    }));

    let (ok, secure, err) = join(&[
        "edge-1",
        "--nats-url",
        "tls://hub:4222",
        "--bootstrap-creds",
        &creds,
        "--nats-ca",
        &ca,
        "--allow",
        "monitoring.coreos.com/servicemonitors",
        "--executor-namespace",
        "team-a",
        "--addon-namespace",
        "open-cluster-management-agent-addon",
        "--label",
        "env=prod",
    ]);
    assert!(ok, "{err}");
    validate(&secure);
    assert!(err.is_empty(), "{err}");
    let docs = documents(&secure);
    assert_least_privilege(&docs);
    assert!(secure.contains("kind: Secret") && secure.contains("a.b.c"));
    assert!(secure.contains("# bootstrap.creds: the fleet-wide bootstrap credentials"));
    assert!(secure.contains("--bootstrap-creds=/etc/flotilla/bootstrap.creds"));
    assert!(secure.contains("--nats-ca=/etc/flotilla/ca.pem"));
    let read = cluster_rules(&docs)
        .into_iter()
        .find(|r| strings(&r["resources"]) == ["servicemonitors"])
        .expect("--allow adds a rule");
    assert_eq!(strings(&read["verbs"]), ["get", "list", "watch"]);
    let roles: Vec<(&str, Vec<&str>)> = docs
        .iter()
        .filter(|d| d["kind"] == "Role")
        .map(|d| {
            let resources = d["rules"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| strings(&r["resources"]))
                .collect();
            (d["metadata"]["namespace"].as_str().unwrap(), resources)
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("team-a", vec!["serviceaccounts"]),
            ("open-cluster-management-agent-addon", vec!["secrets"])
        ]
    );

    let (ok, admin, err) = join(&[
        "edge-1",
        "--nats-url",
        "nats://hub:4222",
        "--offline",
        "--rbac",
        "cluster-admin",
    ]);
    assert!(ok, "{err}");
    validate(&admin);
    assert!(admin.contains("resources: [\"*\"]"));
    assert!(err.contains("warning: --rbac cluster-admin"), "{err}");
}

#[test]
fn a_hub_without_secure_mode_gives_no_credential() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    wait_for("the hub answers", &[&hub.proc], || {
        cli(&hub.grpc, &["get", "clusters"]).0.then_some(())
    });
    let args = ["join", "edge-1", "--nats-url", "nats://hub:4222"];
    let (ok, out, err) = cli(&hub.grpc, &args);
    assert!(ok, "{err}");
    assert!(
        err.contains("issues no join credential") && err.contains("secure mode"),
        "{err}"
    );
    validate(&out);
    assert!(!out.contains("kind: Secret") && !out.contains("--bootstrap-creds"));
    // Pre-approval needs a join credential: refused rather than silently dropped.
    let (ok, _, err) = cli(&hub.grpc, &[&args[..], &["--accept"]].concat());
    assert!(!ok && err.contains("--accept: the hub at"), "{err}");
}

#[test]
fn bad_join_arguments_name_what_is_wrong() {
    let (ok, _, err) = join(&["Bad_Name", "--nats-url", "nats://hub:4222"]);
    assert!(!ok && err.contains("CLUSTER \"Bad_Name\""), "{err}");
    let (ok, _, err) = join(&[
        "edge-1",
        "--nats-url",
        "nats://hub:4222",
        "--bootstrap-creds",
        "/no/such/file",
    ]);
    assert!(
        !ok && err.contains("--bootstrap-creds /no/such/file"),
        "{err}"
    );
    let (ok, _, err) = join(&[
        "edge-1",
        "--nats-url",
        "nats://hub:4222",
        "--allow",
        "nogroup",
    ]);
    assert!(!ok && err.contains("--allow \"nogroup\""), "{err}");
    let (ok, _, err) = join(&[
        "edge-1",
        "--nats-url",
        "nats://hub:4222",
        "--rbac",
        "cluster-admin",
        "--executor-namespace",
        "team-a",
    ]);
    assert!(!ok && err.contains("--executor-namespace is for"), "{err}");
    // Without --offline or a file the hub is asked; none answers here.
    let (ok, _, err) = join(&["edge-1", "--nats-url", "nats://hub:4222"]);
    assert!(
        !ok && err.contains("asking the hub for a join credential"),
        "{err}"
    );
}

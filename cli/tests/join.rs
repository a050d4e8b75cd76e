//! `flotilla join`: the install manifests validate against the Kubernetes OpenAPI schemas
//! (`kubernetes-validate`, installed by `scripts/test.sh`), in every RBAC variant, with and
//! without secrets; bad arguments are refused naming the argument.

use flotilla_testkit::binary;
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

    let (ok, plain, err) = join(&["edge-1", "--nats-url", "nats://hub:4222"]);
    assert!(ok, "{err}");
    validate(&plain);
    assert!(plain.contains("--backend=kubernetes") && plain.contains("--cluster-name=edge-1"));
    assert!(
        plain.contains("resources: [\"*\"]"),
        "admin RBAC by default"
    );
    assert!(!plain.contains("kind: Secret"));

    let (ok, secure, err) = join(&[
        "edge-1",
        "--nats-url",
        "tls://hub:4222",
        "--bootstrap-creds",
        &creds,
        "--nats-ca",
        &ca,
        "--rbac",
        "least-privilege",
        "--allow",
        "monitoring.coreos.com/servicemonitors",
        "--label",
        "env=prod",
    ]);
    assert!(ok, "{err}");
    validate(&secure);
    assert!(secure.contains("kind: Secret") && secure.contains("a.b.c"));
    assert!(secure.contains("--bootstrap-creds=/etc/flotilla/bootstrap.creds"));
    assert!(secure.contains("--nats-ca=/etc/flotilla/ca.pem"));
    assert!(secure.contains("servicemonitors") && !secure.contains("resources: [\"*\"]"));
    // The executor check (OCM's spec.executor) asks SubjectAccessReviews.
    assert!(secure.contains("resources: [subjectaccessreviews]\n  verbs: [create]"));
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
        "--rbac",
        "least-privilege",
        "--allow",
        "nogroup",
    ]);
    assert!(!ok && err.contains("--allow \"nogroup\""), "{err}");
}

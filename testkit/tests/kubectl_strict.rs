//! The testkit's API server answers `fieldValidation=Strict` as a real one does, seen through
//! the real `kubectl` (1.32 sends `fieldValidation=Strict` with every apply by default): a
//! misspelt field is refused with the API server's strict decoding error and nothing is stored,
//! on a create (POST) and on an apply to an existing object (a strategic merge patch);
//! `--validate=false` (`fieldValidation=Ignore`) stores what it is sent.

use flotilla_testkit::kube::{FakeKube, ObjectKey};
use std::path::Path;
use std::process::{Command, Output};

/// Runs `kubectl --kubeconfig <kubeconfig> <args>` on a blocking thread.
async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let mut command = Command::new("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig).args(args);
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::task::spawn_blocking(move || command.output().expect("kubectl runs")),
    )
    .await
    .expect("kubectl finished in time")
    .expect("kubectl's thread")
}

fn deployment(replicas_key: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n\
         spec:\n  {replicas_key}: {replicas}\n  selector:\n    matchLabels:\n      app: web\n\
         \x20 template:\n    metadata:\n      labels:\n        app: web\n    spec:\n\
         \x20     containers:\n      - name: web\n        image: nginx:1.27\n"
    )
}

#[tokio::test]
async fn kubectl_apply_of_a_misspelt_field_is_refused_with_the_strict_decoding_error() {
    let fake = FakeKube::start().await;
    let dir = tempfile::tempdir().unwrap();
    let misspelt = dir.path().join("misspelt.yaml");
    let right = dir.path().join("right.yaml");
    std::fs::write(&misspelt, deployment("replcas", 3)).unwrap();
    std::fs::write(&right, deployment("replicas", 1)).unwrap();
    let config = fake.kubeconfig();
    let web = ObjectKey::new("apps", "deployments", "default", "web");
    kubectl(&config, &["create", "namespace", "default"]).await;

    let out = kubectl(&config, &["apply", "-f", misspelt.to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains(
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding \
             error: unknown field \"spec.replcas\""
        ),
        "{stderr}"
    );
    assert!(fake.get(&web).is_none(), "nothing stored");
    assert!(
        fake.requests().iter().any(|r| r
            .starts_with("POST /apis/apps/v1/namespaces/default/deployments")
            && r.contains("fieldValidation=Strict")),
        "kubectl asked for strict validation: {:?}",
        fake.requests()
    );

    // Created spelt right, then applied misspelt: the patch is refused, the object unchanged.
    let out = kubectl(&config, &["apply", "-f", right.to_str().unwrap()]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(&config, &["apply", "-f", misspelt.to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains("strict decoding error: unknown field \"spec.replcas\""),
        "{stderr}"
    );
    let stored = fake.get(&web).expect("kept");
    assert_eq!(stored["spec"]["replicas"], 1);
    assert!(stored["spec"].get("replcas").is_none());

    // Without validation the server takes what it is sent (this server keeps the field; a real
    // one drops it with a warning).
    let out = kubectl(
        &config,
        &[
            "apply",
            "--validate=false",
            "-f",
            misspelt.to_str().unwrap(),
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

//! OCM's ManifestWork `executor` end to end with processes: a hub with a token file, a
//! simulated cluster, and the CLI applying OCM's documented example
//! (`examples/executor-work.yaml`) as a deployer granted that executor.

mod common;

use common::{HubBuilder, run_cli, start_sim, wait_for};
use flotilla_testkit::NatsServer;
use serde_json::Value;

const EXAMPLE: &str = include_str!("../../examples/executor-work.yaml");
const ADMIN: &str = "adm1n-token-exec-0001";
const DEPLOYER: &str = "depl0y-token-exec-002";

#[test]
fn a_deployer_applies_ocms_executor_example_and_it_becomes_available() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN},alice,admin\n{DEPLOYER},ci,deployer,default/executor1\n"),
    )
    .unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--api-token-file", &tokens.display().to_string())
        .auto_accept()
        .start();
    let sim = start_sim(&nats, dir.path(), 1, "exec", &["--ready-delay-ms", "200"]);
    let as_token = |token: &str, args: &[&str], stdin: Option<&str>| {
        let all: Vec<&str> = ["--token", token].iter().chain(args).copied().collect();
        run_cli(&hub.grpc, &all, stdin)
    };
    wait_for("cluster exec-0001 Available", &[&hub.proc, &sim], || {
        let out = as_token(ADMIN, &["get", "clusters", "-o", "json"], None);
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v["items"]
            .as_array()?
            .iter()
            .any(|c| {
                c["metadata"]["name"] == "exec-0001"
                    && common::condition(c, "ManagedClusterConditionAvailable").as_deref()
                        == Some("True")
            })
            .then_some(())
    });

    let example = EXAMPLE.replace("CLUSTER", "exec-0001");
    let out = as_token(DEPLOYER, &["apply", "-f", "-"], Some(&example));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let work = wait_for("the example Available", &[&hub.proc, &sim], || {
        let out = as_token(
            ADMIN,
            &["get", "works", "-n", "exec-0001", "-o", "json"],
            None,
        );
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        let w = v["items"]
            .as_array()?
            .iter()
            .find(|w| w["metadata"]["name"] == "example-manifestwork")?
            .clone();
        (common::condition(&w, "Available").as_deref() == Some("True")).then_some(w)
    });
    assert_eq!(common::condition(&work, "Applied").as_deref(), Some("True"));
    // `get works -o yaml` shows the executor as OCM writes it.
    let out = as_token(
        ADMIN,
        &["get", "works", "-n", "exec-0001", "-o", "yaml"],
        None,
    );
    // (A List: the work's spec is indented under `items`.)
    assert!(
        out.stdout.contains(
            "    executor:\n      subject:\n        type: ServiceAccount\n        serviceAccount:\n          namespace: default\n          name: executor1"
        ),
        "{}",
        out.stdout
    );

    let out = as_token(
        ADMIN,
        &[
            "describe",
            "work",
            "example-manifestwork",
            "-n",
            "exec-0001",
        ],
        None,
    );
    assert!(
        out.stdout
            .contains("Executor: system:serviceaccount:default:executor1"),
        "{}",
        out.stdout
    );

    // Another executor: refused, naming the field and the identity.
    let other = example.replace("name: executor1", "name: cluster-admin");
    let out = as_token(DEPLOYER, &["apply", "-f", "-"], Some(&other));
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(
        out.stderr.contains("spec.executor") && out.stderr.contains("ci (deployer)"),
        "{}",
        out.stderr
    );
}

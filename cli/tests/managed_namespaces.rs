//! ManagedClusterSet `managedNamespaces` through the real binaries, as an operator drives it:
//! `flotilla apply -f` of the OCM YAML in `examples/`, the cluster moved into the set, then
//! `get cluster -o yaml`, `describe cluster` and the namespace on the spoke through `proxy`.

mod common;

use common::{AgentBuilder, HubBuilder, cli_ok, run_cli, wait_for};
use flotilla_testkit::NatsServer;
use serde_json::Value;

const EXAMPLE: &str = include_str!("../../examples/managed-namespaces.yaml");

/// `(set, name, NamespaceAvailable status)` from `get cluster NAME -o json`.
fn managed(hub: &str, name: &str) -> Option<Vec<(String, String, String)>> {
    let out = run_cli(hub, &["get", "cluster", name, "-o", "json"], None);
    let c: Value = serde_json::from_str(&out.stdout).ok()?;
    let list = c["status"]["managedNamespaces"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Some(
        list.iter()
            .map(|n| {
                let available = n["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "NamespaceAvailable")
                    .and_then(|c| c["status"].as_str())
                    .unwrap_or("")
                    .to_string();
                (
                    n["clusterSet"].as_str().unwrap_or("").to_string(),
                    n["name"].as_str().unwrap_or("").to_string(),
                    available,
                )
            })
            .collect(),
    )
}

/// The hub's label on a spoke namespace, read through `flotilla proxy`.
fn spoke_label(hub: &str, cluster: &str, ns: &str) -> Option<String> {
    let out = run_cli(
        hub,
        &["proxy", cluster, "get", "namespace", ns, "-o", "json"],
        None,
    );
    let object: Value = serde_json::from_str(&out.stdout).ok()?;
    let labels = object["metadata"]["labels"].as_object()?;
    labels
        .iter()
        .find(|(k, _)| k.starts_with("clusterset.open-cluster-management.io/"))
        .and_then(|(_, v)| v.as_str().map(str::to_string))
}

#[test]
fn the_ocm_example_set_puts_its_namespaces_on_members_and_the_cli_shows_them() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let agent = AgentBuilder::new(&nats, dir.path(), "store-1")
        .flag("--status-interval-seconds", "1")
        .start();
    let logs = [&hub.proc, &agent];
    common::wait_available(&hub, &logs, "store-1", 1);

    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(EXAMPLE));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let set = cli_ok(&hub.grpc, &["get", "clusterset", "app-team", "-o", "yaml"]);
    assert!(
        set.contains("managedNamespaces:\n  - name: app-frontend\n  - name: app-backend"),
        "{set}"
    );
    cli_ok(
        &hub.grpc,
        &[
            "label",
            "store-1",
            "cluster.open-cluster-management.io/clusterset=app-team",
        ],
    );
    let want: Vec<(String, String, String)> = [
        ("app-team", "app-backend", "True"),
        ("app-team", "app-frontend", "True"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    wait_for("store-1 managing the set's namespaces", &logs, || {
        (managed(&hub.grpc, "store-1")? == want).then_some(())
    });
    let yaml = cli_ok(&hub.grpc, &["get", "cluster", "store-1", "-o", "yaml"]);
    assert!(yaml.contains("managedNamespaces:"), "{yaml}");
    assert!(yaml.contains("reason: NamespaceApplied"), "{yaml}");
    let described = cli_ok(&hub.grpc, &["describe", "cluster", "store-1"]);
    assert!(
        described
            .contains("  app-frontend (set app-team): NamespaceAvailable=True (NamespaceApplied)"),
        "{described}"
    );
    wait_for("app-frontend labelled on the spoke", &logs, || {
        (spoke_label(&hub.grpc, "store-1", "app-frontend")? == "true").then_some(())
    });

    // Out of the set: gone from the status, kept on the spoke but no longer managed.
    cli_ok(
        &hub.grpc,
        &[
            "label",
            "store-1",
            "cluster.open-cluster-management.io/clusterset=default",
        ],
    );
    wait_for("store-1 no longer managing namespaces", &logs, || {
        managed(&hub.grpc, "store-1")?.is_empty().then_some(())
    });
    wait_for("app-frontend unmanaged on the spoke", &logs, || {
        (spoke_label(&hub.grpc, "store-1", "app-frontend")? == "false").then_some(())
    });
}

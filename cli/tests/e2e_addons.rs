//! Add-ons with the real binaries: an AddOnTemplate, an AddOnDeploymentConfig and a
//! ClusterManagementAddOn installed on a placement's clusters with `flotilla apply -f`, followed
//! with `flotilla get addons` and `flotilla addon status`; a config change rolled out one cluster
//! at a time survives a hub killed mid-way; `flotilla addon disable --all` removes every work;
//! OCM documents of every other shape (hub taints, add-ons without a template, `lifecycle: self`,
//! v1beta1) apply from one file, and each add-on kind deletes.

mod common;

use common::*;
use flotilla_testkit::{NatsServer, binary};
use serde_json::Value;
use std::process::Command;

const ADDON: &str = "hello";
const WORK_LABEL: &str = "open-cluster-management.io/addon-name=hello";

/// The binding and placement every add-on here is installed on (as in `e2e_rollout.rs`).
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

/// The add-on's template: a ConfigMap and a Deployment naming the cluster and greeting with
/// the config's `GREETING`.
const TEMPLATE: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {name: hello-v1}
spec:
  addonName: hello
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: hello-config, namespace: default}
          data:
            cluster: "{{CLUSTER_NAME}}"
            greeting: "{{GREETING}}"
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: hello-agent, namespace: default}
          spec:
            replicas: 1
            selector: {matchLabels: {app: hello-agent}}
            template:
              metadata: {labels: {app: hello-agent}}
              spec:
                containers:
                  - name: agent
                    image: quay.io/example/hello:v1
                    env:
                      - {name: CLUSTER, value: "{{CLUSTER_NAME}}"}
                      - {name: GREETING, value: "{{GREETING}}"}
"#;

/// The add-on, installed on placement default/edge one cluster at a time, each soaking 2 s.
const CLUSTER_MANAGEMENT_ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: hello}
spec:
  addOnMeta: {displayName: Hello}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: hello-v1}
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
      defaultConfig: {namespace: default, name: hello-config}
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: edge
        rolloutStrategy:
          type: Progressive
          progressive:
            maxConcurrency: 1
            minSuccessTime: 2s
"#;

fn deployment_config(greeting: &str) -> String {
    format!(
        r#"apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnDeploymentConfig
metadata: {{name: hello-config, namespace: default}}
spec:
  customizedVariables:
    - {{name: GREETING, value: {greeting}}}
"#
    )
}

/// `get addons -o json`: the List's items, or `None` while the hub does not answer.
fn addons_json(hub: &str) -> Option<Vec<Value>> {
    let (ok, out, _) = cli(hub, &["get", "addons", "-o", "json"]);
    if !ok {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    assert_eq!(v["kind"], "List", "{out}");
    v["items"].as_array().cloned()
}

/// The add-on's works (`get works -l open-cluster-management.io/addon-name=hello -o json`).
fn works_of_addon(hub: &str) -> Option<Vec<Value>> {
    let (ok, out, _) = cli(hub, &["get", "works", "-l", WORK_LABEL, "-o", "json"]);
    if !ok {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    v["items"].as_array().cloned()
}

/// The `greeting` of the work's ConfigMap.
fn greeting(work: &Value) -> Option<String> {
    work["spec"]["workload"]["manifests"]
        .as_array()?
        .iter()
        .find(|m| m["kind"] == "ConfigMap")
        .and_then(|m| m["data"]["greeting"].as_str().map(str::to_string))
}

fn apply(hub: &str, dir: &std::path::Path, name: &str, yaml: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, yaml).unwrap();
    cli_ok(hub, &["apply", "-f", file.to_str().unwrap()])
}

#[test]
fn a_hub_killed_mid_addon_upgrade_resumes() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let port = flotilla_testkit::free_port();
    let mut hub = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    let sim = start_sim(&nats, dir.path(), 3, "edge", &["--ready-delay-ms", "200"]);
    wait_available(&hub, &[&hub.proc, &sim], "edge", 3);
    apply(&hub.grpc, dir.path(), "setup.yaml", SETUP);
    let all = format!(
        "{TEMPLATE}\n---\n{}\n---\n{CLUSTER_MANAGEMENT_ADDON}",
        deployment_config("hello")
    );
    let out = apply(&hub.grpc, dir.path(), "addon.yaml", &all);
    for line in [
        "addontemplate.addon.open-cluster-management.io/hello-v1 applied",
        "addondeploymentconfig.addon.open-cluster-management.io/hello-config applied",
        "clustermanagementaddon.addon.open-cluster-management.io/hello applied",
    ] {
        assert!(out.contains(line), "{line} missing:\n{out}");
    }

    // Installed on the placement's three clusters, each Available.
    wait_for("3 add-ons Available", &[&hub.proc, &sim], || {
        let items = addons_json(&hub.grpc)?;
        (items.len() == 3
            && items
                .iter()
                .all(|a| condition(a, "Available").as_deref() == Some("True")))
        .then_some(())
    });
    wait_for("addon status 3/3", &[&hub.proc, &sim], || {
        let (ok, out, _) = cli(&hub.grpc, &["addon", "status", ADDON]);
        (ok && out.contains("3/3 updated") && out.contains("rollout complete")).then_some(())
    });
    let table = cli_ok(&hub.grpc, &["get", "addons"]);
    assert_eq!(
        table.lines().filter(|l| l.starts_with("hello ")).count(),
        3,
        "{table}"
    );
    for r in table.lines().skip(1) {
        assert!(r.contains("True"), "{table}");
    }
    let table = cli_ok(&hub.grpc, &["get", "cma"]);
    let r = row(&table, ADDON).unwrap_or_else(|| panic!("{table}"));
    assert!(r.contains("Hello") && r.contains("Placements"), "{table}");
    let table = cli_ok(&hub.grpc, &["get", "addontemplates"]);
    assert!(row(&table, "hello-v1").is_some(), "{table}");
    let table = cli_ok(
        &hub.grpc,
        &["get", "addondeploymentconfigs", "-n", "default"],
    );
    assert!(row(&table, "hello-config").is_some(), "{table}");
    let works = works_of_addon(&hub.grpc).unwrap();
    assert_eq!(works.len(), 3, "{works:#?}");
    for w in &works {
        assert_eq!(
            w["metadata"]["name"],
            format!("addon-{ADDON}-deploy-0"),
            "{w:#}"
        );
        assert_eq!(greeting(w).as_deref(), Some("hello"), "{w:#}");
        let cm = w["spec"]["workload"]["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["kind"] == "ConfigMap")
            .unwrap();
        assert_eq!(cm["data"]["cluster"], w["metadata"]["namespace"], "{w:#}");
    }

    // A new greeting rolls out one cluster at a time; the hub dies after the first.
    apply(
        &hub.grpc,
        dir.path(),
        "config.yaml",
        &deployment_config("bonjour"),
    );
    wait_for(
        "the first cluster's work upgraded",
        &[&hub.proc, &sim],
        || {
            let works = works_of_addon(&hub.grpc)?;
            works
                .iter()
                .any(|w| greeting(w).as_deref() == Some("bonjour"))
                .then_some(())
        },
    );
    hub.proc.kill(); // SIGKILL mid-upgrade

    let hub2 = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    wait_for("hub back", &[&hub2.proc], || clusters_json(&hub2.grpc));
    let status = Command::new(binary("flotilla"))
        .args(["--hub", &hub2.grpc, "addon", "status", ADDON, "--watch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{text}{}{}",
        String::from_utf8_lossy(&status.stderr),
        hub2.proc.output()
    );
    assert!(
        text.contains("3/3 updated") && text.contains("rollout complete"),
        "{text}"
    );
    let works = works_of_addon(&hub2.grpc).unwrap();
    assert_eq!(works.len(), 3, "{works:#?}");
    for w in &works {
        assert_eq!(greeting(w).as_deref(), Some("bonjour"), "{w:#}");
        // Written once at install and once for the new greeting: never again after the restart.
        let generation = w["metadata"]["generation"].as_i64().unwrap_or_default();
        assert!(generation <= 2, "a work was rewritten: {w:#}");
    }

    // Disabling everywhere removes every work.
    let out = cli_ok(&hub2.grpc, &["addon", "disable", ADDON, "--all"]);
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("removed from cluster"))
            .count(),
        3,
        "{out}"
    );
    wait_for("every add-on work removed", &[&hub2.proc, &sim], || {
        works_of_addon(&hub2.grpc)?.is_empty().then_some(())
    });
    wait_for(
        "every ManagedClusterAddOn removed",
        &[&hub2.proc, &sim],
        || addons_json(&hub2.grpc)?.is_empty().then_some(()),
    );
    drop(sim);
}

/// One file of OCM documents in every shape the hub takes: a cluster saved with its hub taints,
/// an add-on managed by someone else (OCM's helloworld, no AddOnTemplate), and a v1beta1
/// template add-on whose own manager installs it (`lifecycle: self`).
const EVERY_SHAPE: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: site-1}
spec:
  hubAcceptsClient: true
  taints:
    - {key: cluster.open-cluster-management.io/unreachable, effect: NoSelect}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: helloworld}
spec:
  addOnMeta: {displayName: helloworld, description: helloworld is an example addon}
  supportedConfigs:
    - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs}
  installStrategy: {type: Manual}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: helloworld, namespace: site-1}
spec: {installNamespace: default}
---
apiVersion: addon.open-cluster-management.io/v1beta1
kind: AddOnDeploymentConfig
metadata: {name: hello-config, namespace: default}
spec:
  customizedVariables:
    - {name: GREETING, value: hi}
---
apiVersion: addon.open-cluster-management.io/v1beta1
kind: ClusterManagementAddOn
metadata:
  name: hello
  annotations: {addon.open-cluster-management.io/lifecycle: self}
spec:
  addOnMeta: {displayName: Hello}
  defaultConfigs:
    - {group: addon.open-cluster-management.io, resource: addontemplates, name: hello-v1}
    - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: hello-config}
---
apiVersion: addon.open-cluster-management.io/v1beta1
kind: ManagedClusterAddOn
metadata:
  name: hello
  namespace: site-1
  annotations: {addon.open-cluster-management.io/v1alpha1-install-namespace: hello-ns}
spec: {}
"#;

#[test]
fn ocm_documents_of_every_shape_apply_and_say_who_manages_each_add_on() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    wait_for("the hub answering", &[&hub.proc], || {
        cli(&hub.grpc, &["get", "clusters"]).0.then_some(())
    });
    let all = format!("{TEMPLATE}\n---\n{EVERY_SHAPE}");
    let file = dir.path().join("every-shape.yaml");
    std::fs::write(&file, &all).unwrap();
    let (ok, out, err) = cli(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
    assert!(ok, "{err}\n{out}");
    assert_eq!(
        out.lines().filter(|l| l.contains(" applied")).count(),
        7,
        "{out}"
    );
    assert!(
        err.contains("spec.taints[0]: cluster.open-cluster-management.io/unreachable is maintained by the hub"),
        "{err}"
    );

    let table = cli_ok(&hub.grpc, &["get", "clustermanagementaddons"]);
    let managed_by = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no {name} in:\n{table}"))
    };
    assert!(table.contains("MANAGED BY"), "{table}");
    assert!(managed_by("helloworld").contains(&"external"), "{table}");
    assert!(managed_by("hello").contains(&"self"), "{table}");

    // The v1beta1 installation is stored as v1alpha1, its install namespace in the spec.
    let items = addons_json(&hub.grpc).unwrap();
    let hello = items
        .iter()
        .find(|a| a["metadata"]["name"] == "hello")
        .expect("the v1beta1 ManagedClusterAddOn");
    assert_eq!(
        hello["apiVersion"], "addon.open-cluster-management.io/v1alpha1",
        "{hello}"
    );
    assert_eq!(hello["spec"]["installNamespace"], "hello-ns", "{hello}");
    let yaml = cli_ok(&hub.grpc, &["get", "cma", "hello", "-o", "yaml"]);
    assert!(
        yaml.contains("supportedConfigs:") && yaml.contains("defaultConfig:"),
        "stored as v1alpha1: {yaml}"
    );

    // Each add-on kind deletes through the CLI, saying what went; the rest stay.
    let steps: [(&[&str], &str); 5] = [
        (
            &["delete", "managedclusteraddon", "hello", "-c", "site-1"],
            "managedclusteraddon/hello deleted (cluster site-1)",
        ),
        (
            &["delete", "cma", "helloworld"],
            "clustermanagementaddon/helloworld deleted (with its ManagedClusterAddOns)",
        ),
        (
            &["delete", "clustermanagementaddon", "hello"],
            "clustermanagementaddon/hello deleted",
        ),
        (
            &[
                "delete",
                "addondeploymentconfig",
                "hello-config",
                "-n",
                "default",
            ],
            "addondeploymentconfig/hello-config deleted (namespace default)",
        ),
        (
            &["delete", "addontemplate", "hello-v1"],
            "addontemplate/hello-v1 deleted",
        ),
    ];
    for (args, said) in steps {
        let out = cli_ok(&hub.grpc, args);
        assert!(out.contains(said), "{args:?}: {out}");
    }
    let left = addons_json(&hub.grpc).unwrap();
    assert!(left.is_empty(), "every ManagedClusterAddOn went: {left:?}");
    let cmas = cli_ok(&hub.grpc, &["get", "clustermanagementaddons"]);
    assert!(
        !cmas.lines().any(|l| l.starts_with("hello")),
        "both ClusterManagementAddOns went: {cmas}"
    );
    let templates = cli_ok(&hub.grpc, &["get", "addontemplates"]);
    assert!(!templates.contains("hello-v1"), "{templates}");
    let configs = cli_ok(
        &hub.grpc,
        &["get", "addondeploymentconfigs", "-n", "default"],
    );
    assert!(!configs.contains("hello-config"), "{configs}");
    // A name that is not there is an error naming it, not a silent success.
    let (ok, out, err) = cli(&hub.grpc, &["delete", "addontemplate", "hello-v1"]);
    assert!(!ok, "{out}");
    assert!(err.contains("hello-v1"), "{err}");
}

/// OCM's helloworld add-on (its own manager deploys its agent), installed by hand on
/// `edge-0001` in namespace `default`.
const HELLOWORLD: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: helloworld}
spec:
  addOnMeta: {displayName: helloworld, description: helloworld is an example addon}
  installStrategy: {type: Manual}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: helloworld, namespace: edge-0001}
spec: {installNamespace: default}
"#;

/// The helloworld agent's Lease on the spoke, renewed `ago` seconds ago (a MicroTime).
fn helloworld_lease(ago: u64) -> String {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(ago);
    let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let stamp = Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("@{secs}"),
            "+%Y-%m-%dT%H:%M:%S.000000Z",
        ])
        .output()
        .expect("date");
    let renew = String::from_utf8_lossy(&stamp.stdout).trim().to_string();
    format!(
        r#"apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: helloworld, namespace: default}}
spec: {{holderIdentity: helloworld-agent, leaseDurationSeconds: 60, renewTime: "{renew}"}}
"#
    )
}

/// `Some` once helloworld's `Available` on edge-0001 is `want` (status, reason).
fn helloworld_is(hub: &str, want: (&str, &str)) -> Option<()> {
    helloworld_available(hub)
        .filter(|(s, r)| (s.as_str(), r.as_str()) == want)
        .map(|_| ())
}

/// `Available` of helloworld on edge-0001 as `get addons -o json` shows it: (status, reason).
fn helloworld_available(hub: &str) -> Option<(String, String)> {
    let items = addons_json(hub)?;
    let a = items.iter().find(|a| {
        a["metadata"]["name"] == "helloworld" && a["metadata"]["namespace"] == "edge-0001"
    })?;
    let c = a["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

#[test]
fn an_add_on_managed_by_someone_else_is_available_while_its_spoke_lease_is_renewed() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let port = flotilla_testkit::free_port();
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{port}"))
        .start();
    let sim = start_sim(
        &nats,
        dir.path(),
        1,
        "edge",
        &["--status-interval-seconds", "1"],
    );
    wait_available(&hub, &[&hub.proc, &sim], "edge", 1);
    apply(&hub.grpc, dir.path(), "helloworld.yaml", HELLOWORLD);
    let logs = [&hub.proc, &sim];
    wait_for("helloworld Unknown: no lease on the spoke", &logs, || {
        helloworld_is(&hub.grpc, ("Unknown", "ManagedClusterAddOnLeaseNotFound"))
    });
    // The add-on's agent renews its Lease on the spoke (written here with the real kubectl
    // through the hub's cluster proxy, as an add-on manager's agent would on its cluster).
    let kubectl = Kubectl::new(&hub, dir.path(), "edge-0001", &format!("127.0.0.1:{port}"));
    let renew = |ago: u64| {
        let file = dir.path().join("lease.yaml");
        std::fs::write(&file, helloworld_lease(ago)).unwrap();
        // The simulated API server serves no OpenAPI document to validate against.
        kubectl.ok(&["apply", "--validate=false", "-f", file.to_str().unwrap()]);
    };
    renew(0);
    wait_for("helloworld Available by its spoke lease", &logs, || {
        helloworld_is(&hub.grpc, ("True", "ManagedClusterAddOnLeaseUpdated"))
    });
    // Its agent stops: the Lease is older than OCM's grace of 5 × 60 s.
    renew(400);
    wait_for("helloworld no longer available", &logs, || {
        helloworld_is(
            &hub.grpc,
            ("False", "ManagedClusterAddOnLeaseUpdateStopped"),
        )
    });
}

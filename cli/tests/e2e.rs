//! End-to-end: the real binaries (nats-server, flotilla-hub, flotilla-agent, flotilla-sim,
//! flotilla) as separate processes, driven the way an operator would.
//!
//! The binaries must be built first (`cargo build --workspace --bins`; `scripts/test.sh` does).

mod common;

use common::{
    AgentBuilder, HubBuilder, available, cli, cli_ok, cli_with_stdin, clusters_json, condition,
    run_cli, self_signed_tls, start_sim, wait_available, wait_for,
};
use flotilla_testkit::{NatsServer, binary, free_port};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn operator_registers_accepts_labels_taints_applies_sets_and_deletes() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    let agent = AgentBuilder::new(&nats, dir.path(), "cluster1")
        .label("purpose=test")
        .claim("team.example.com=edge")
        .platform("AWS")
        .flag("--status-interval-seconds", "1")
        .start();

    // The cluster asks to join and waits.
    let table = wait_for(
        "cluster1 pending in `get clusters`",
        &[&hub.proc, &agent],
        || {
            let (ok, out, _) = cli(&hub.grpc, &["get", "clusters"]);
            (ok && out.contains("cluster1")).then_some(out)
        },
    );
    let header = table.lines().next().unwrap();
    for col in [
        "NAME",
        "ACCEPTED",
        "AVAILABLE",
        "CLUSTERSET",
        "CPU",
        "MEMORY",
        "KUBERNETES VERSION",
    ] {
        assert!(header.contains(col), "missing column {col}: {header}");
    }
    let row = table.lines().find(|l| l.starts_with("cluster1")).unwrap();
    assert!(row.contains("false"), "{row}");

    assert!(cli_ok(&hub.grpc, &["accept", "cluster1"]).contains("accepted"));
    wait_for("cluster1 Available", &[&hub.proc, &agent], || {
        let items = clusters_json(&hub.grpc)?;
        let c = items.iter().find(|c| c["metadata"]["name"] == "cluster1")?;
        available(c).then_some(())
    });

    cli_ok(&hub.grpc, &["label", "cluster1", "env=prod", "purpose-"]);
    cli_ok(&hub.grpc, &["taint", "cluster1", "gpu=true:NoSelect"]);
    let yaml = cli_ok(&hub.grpc, &["get", "clusters", "cluster1", "-o", "yaml"]);
    let c: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(c["kind"], "ManagedCluster");
    assert_eq!(c["metadata"]["labels"]["env"], "prod");
    assert!(c["metadata"]["labels"].get("purpose").is_none());
    let taints = c["spec"]["taints"].as_sequence().unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "gpu" && t["effect"] == "NoSelect" && t["timeAdded"].is_string())
    );
    let claims = c["status"]["clusterClaims"].as_sequence().unwrap();
    assert!(
        claims
            .iter()
            .any(|x| x["name"] == "platform.open-cluster-management.io" && x["value"] == "AWS")
    );
    assert!(
        claims
            .iter()
            .any(|x| x["name"] == "team.example.com" && x["value"] == "edge")
    );

    // Sets and bindings in the OCM shapes, from stdin.
    let sets = include_str!("../../examples/prod-clusterset.yaml");
    let (ok, out, err) = cli_with_stdin(&hub.grpc, &["apply", "-f", "-"], sets);
    assert!(ok, "{err}");
    assert!(
        out.contains("managedclusterset.cluster.open-cluster-management.io/prod"),
        "{out}"
    );
    let sets_table = cli_ok(&hub.grpc, &["get", "clustersets"]);
    let prod = sets_table.lines().find(|l| l.starts_with("prod")).unwrap();
    assert!(
        prod.contains("default") && prod.contains("1 ManagedClusters selected"),
        "{sets_table}"
    );
    let global = sets_table
        .lines()
        .find(|l| l.starts_with("global"))
        .unwrap();
    assert!(
        global.contains("1 ManagedClusters selected"),
        "{sets_table}"
    );
    let sets_yaml = cli_ok(&hub.grpc, &["get", "clustersets", "-o", "yaml"]);
    assert!(
        sets_yaml.starts_with("apiVersion: v1\nkind: List"),
        "{sets_yaml}"
    );

    // Bad YAML: every problem reported, nothing applied.
    let bad = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata:\n  name: ok-set\n---\napiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata:\n  name: broken\nspec:\n  clusterSelector:\n    selectorTyp: LabelSelector\n";
    let (ok, _, err) = cli_with_stdin(&hub.grpc, &["apply", "-f", "-"], bad);
    assert!(!ok);
    assert!(
        err.contains("document 2") && err.contains("selectorTyp"),
        "{err}"
    );
    assert!(
        !cli_ok(&hub.grpc, &["get", "clustersets"]).contains("ok-set"),
        "a bad batch applies nothing"
    );

    // The hub's own validation: wrong selector type.
    let wrong = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata:\n  name: weird\nspec:\n  clusterSelector:\n    selectorType: Bogus\n";
    let (ok, _, err) = cli_with_stdin(&hub.grpc, &["apply", "-f", "-"], wrong);
    assert!(!ok);
    assert!(
        err.contains("invalid") && err.contains("spec.clusterSelector.selectorType"),
        "{err}"
    );

    // Unknown cluster.
    let (ok, _, err) = cli(&hub.grpc, &["accept", "nope"]);
    assert!(!ok && err.contains("not found"), "{err}");

    // Delete: the hub forgets it; the agent registers again as a pending cluster.
    cli_ok(&hub.grpc, &["delete", "cluster", "cluster1"]);
    wait_for("cluster1 back as pending", &[&hub.proc, &agent], || {
        let items = clusters_json(&hub.grpc)?;
        let c = items.iter().find(|c| c["metadata"]["name"] == "cluster1")?;
        (c["spec"]["hubAcceptsClient"] == false && c["metadata"]["labels"].get("env").is_none())
            .then_some(())
    });
}

#[test]
fn hub_kill_9_and_restart_loses_nothing_and_clusters_do_not_flap() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut hub = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    let sim = start_sim(&nats, dir.path(), 20, "edge", &[]);
    let all_available = |items: &[Value]| items.len() == 20 && items.iter().all(available);
    wait_for("20 clusters Available", &[&hub.proc, &sim], || {
        clusters_json(&hub.grpc).filter(|items| all_available(items))
    });
    cli_ok(&hub.grpc, &["label", "edge-0003", "marked=yes"]);

    hub.proc.kill(); // SIGKILL
    let hub2 = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    let items = wait_for("hub back", &[&hub2.proc], || clusters_json(&hub2.grpc));
    assert_eq!(items.len(), 20, "every cluster survived the kill");
    let marked = items
        .iter()
        .find(|c| c["metadata"]["name"] == "edge-0003")
        .unwrap();
    assert_eq!(marked["metadata"]["labels"]["marked"], "yes");
    // For longer than the grace (3 s), every cluster stays accepted and Available.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let items = clusters_json(&hub2.grpc).expect("hub answers");
        assert!(
            all_available(&items),
            "a cluster flapped after the restart: {}",
            serde_json::to_string_pretty(&items).unwrap()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(sim);
}

#[test]
fn binaries_refuse_bad_flags_with_exit_64() {
    let out = Command::new(binary("flotilla-agent"))
        .args([
            "--cluster-name",
            "Bad.Name",
            "--state-dir",
            "/tmp/x",
            "--label",
            "novalue",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cluster-name") && err.contains("--label"),
        "every problem is listed: {err}"
    );

    let out = Command::new(binary("flotilla-hub"))
        .args([
            "--default-lease-duration-seconds",
            "0",
            "--lease-grace-multiplier",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--default-lease-duration-seconds")
            && err.contains("--lease-grace-multiplier"),
        "{err}"
    );

    let (ok, _, err) = cli("http://127.0.0.1:1", &["get", "clusters"]);
    assert!(!ok && err.contains("cannot reach the hub"), "{err}");
}

#[test]
fn a_lost_hub_is_one_error_line_naming_the_hub() {
    let hub = format!("http://127.0.0.1:{}", free_port());
    let out = run_cli(&hub, &["get", "clusters"], None);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stderr.matches("error:").count(), 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with(&format!("error: cannot reach the hub at {hub}: ")),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

const HELLO_WORK: &str = r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: CLUSTER
  name: NAME
spec:
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: NAME
          namespace: default
        spec:
          replicas: 2
          selector:
            matchLabels:
              app: hello
          template:
            metadata:
              labels:
                app: hello
            spec:
              containers:
                - name: hello
                  image: quay.io/asmacdo/busybox
  manifestConfigs:
    - resourceIdentifier:
        group: apps
        resource: deployments
        namespace: default
        name: NAME
      feedbackRules:
        - type: WellKnownStatus
"#;

fn work_yaml(cluster: &str, name: &str) -> String {
    HELLO_WORK.replace("CLUSTER", cluster).replace("NAME", name)
}

fn works_json(hub: &str, cluster: &str) -> Option<Vec<Value>> {
    let (ok, out, _) = cli(hub, &["get", "works", "--cluster", cluster, "-o", "json"]);
    if !ok {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    v["items"].as_array().cloned()
}

fn work_converged(w: &Value) -> bool {
    condition(w, "Applied").as_deref() == Some("True")
        && condition(w, "Available").as_deref() == Some("True")
}

#[test]
fn works_roll_out_through_the_cli_and_survive_a_hub_kill_9_mid_delivery() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut hub = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    let agent = AgentBuilder::new(&nats, dir.path(), "spoke1")
        .flag("--work-status-interval-seconds", "1")
        .flag("--resync-interval-seconds", "2")
        .flag("--sim-ready-delay-ms", "300")
        .start();
    wait_for("spoke1 Available", &[&hub.proc, &agent], || {
        let items = clusters_json(&hub.grpc)?;
        let c = items.iter().find(|c| c["metadata"]["name"] == "spoke1")?;
        available(c).then_some(())
    });

    // Five works in one multi-document apply, then kill -9 the hub right away.
    let docs: Vec<String> = (1..=5)
        .map(|i| work_yaml("spoke1", &format!("app{i}")))
        .collect();
    let (ok, out, err) = cli_with_stdin(&hub.grpc, &["apply", "-f", "-"], &docs.join("---\n"));
    assert!(ok, "{err}");
    assert_eq!(out.matches("applied").count(), 5, "{out}");
    hub.proc.kill();
    let hub2 = HubBuilder::new(&nats, dir.path())
        .port(port)
        .auto_accept()
        .start();
    let items = wait_for(
        "all five works Applied and Available after the restart",
        &[&hub2.proc, &agent],
        || {
            works_json(&hub2.grpc, "spoke1")
                .filter(|items| items.len() == 5 && items.iter().all(work_converged))
        },
    );
    assert_eq!(items[0]["kind"], "ManifestWork");
    let fb = &items[0]["status"]["resourceStatus"]["manifests"][0]["statusFeedback"]["values"];
    assert!(
        fb.as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "ReadyReplicas" && v["fieldValue"]["integer"] == 2),
        "{fb}"
    );

    // Table, describe and proxy.
    let table = cli_ok(&hub2.grpc, &["get", "works", "--cluster", "spoke1"]);
    let header = table.lines().next().unwrap();
    for col in [
        "NAME",
        "CLUSTER",
        "NUMBER OF MANIFESTS",
        "APPLIED",
        "AVAILABLE",
    ] {
        assert!(header.contains(col), "{header}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("app1") && l.contains("True")),
        "{table}"
    );
    let described = cli_ok(
        &hub2.grpc,
        &["describe", "work", "app1", "--cluster", "spoke1"],
    );
    assert!(
        described.contains("feedback ReadyReplicas = 2 (Integer)"),
        "{described}"
    );
    let proxied = cli_ok(&hub2.grpc, &["proxy", "spoke1", "get", "deployments"]);
    assert_eq!(
        proxied.lines().filter(|l| l.contains("2/2 ready")).count(),
        5,
        "{proxied}"
    );

    // Delete through the CLI: the Deployment goes away on the spoke.
    cli_ok(
        &hub2.grpc,
        &["delete", "work", "app3", "--cluster", "spoke1"],
    );
    wait_for("app3 gone", &[&hub2.proc, &agent], || {
        let (ok, _, err) = cli(
            &hub2.grpc,
            &[
                "proxy",
                "spoke1",
                "get",
                "deployment",
                "app3",
                "-n",
                "default",
            ],
        );
        (!ok && err.contains("not found")).then_some(())
    });
    wait_for("app3 work removed", &[&hub2.proc], || {
        works_json(&hub2.grpc, "spoke1").filter(|items| items.len() == 4)
    });

    // Bad input from the CLI: invalid YAML and a manifest without a kind; nothing applied.
    let (ok, _, err) = cli_with_stdin(&hub2.grpc, &["apply", "-f", "-"], "apiVersion: [unclosed\n");
    assert!(!ok && err.contains("invalid YAML"), "{err}");
    let bad = work_yaml("spoke1", "broken").replace("kind: Deployment", "kind: ''");
    let (ok, _, err) = cli_with_stdin(&hub2.grpc, &["apply", "-f", "-"], &bad);
    assert!(
        !ok && err.contains("spec.workload.manifests[0].kind"),
        "{err}"
    );
    assert_eq!(works_json(&hub2.grpc, "spoke1").unwrap().len(), 4);
}

/// Issue 16: a 10 MB `apply -f` failed with the transport's "decoded message length too large";
/// it is refused by the API's own size rule, naming the document, before anything is sent.
#[test]
fn an_oversized_work_is_refused_by_the_size_rule_naming_the_document() {
    let big = "x".repeat(10 * 1024 * 1024);
    let doc = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{namespace: c1, name: big}}\nspec:\n  workload:\n    manifests:\n      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: big, namespace: default}}, data: {{k: {big}}}}}\n"
    );
    let hub = format!("http://127.0.0.1:{}", free_port());
    let out = run_cli(&hub, &["apply", "-f", "-"], Some(&doc));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("document 1 (ManifestWork c1/big)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("over the 512000-byte limit"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("decoded message"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("cannot reach"),
        "nothing is sent: {}",
        out.stderr
    );
}

/// Secure mode of the API, with the real binaries: TLS with the operator's CA, bearer tokens,
/// an admin that changes things and a read-only identity that cannot; no token in the hub's
/// log.
#[test]
fn a_secured_hub_takes_tokens_over_tls_and_read_only_cannot_write() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file, ca_file) = self_signed_tls(dir.path());
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "# name and role per token\nadm1n-token-e2e-0001,alice,admin\nv1ew-token-e2e-00002,bob,read-only\n",
    )
    .unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--api-token-file", &tokens.display().to_string())
        .tls(&cert_file, &key_file)
        .start();
    let ca = ca_file.display().to_string();
    let as_admin = ["--ca", ca.as_str(), "--token", "adm1n-token-e2e-0001"];
    let as_viewer = ["--ca", ca.as_str(), "--token", "v1ew-token-e2e-00002"];
    let with = |who: &[&str], args: &[&str]| {
        let all: Vec<&str> = who.iter().chain(args).copied().collect();
        cli(&hub.grpc, &all)
    };
    wait_for("the secured hub answers", &[&hub.proc], || {
        with(&as_admin, &["get", "clusters"]).0.then_some(())
    });

    let set = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata: {name: secured}\n";
    let set_file = dir.path().join("set.yaml");
    std::fs::write(&set_file, set).unwrap();
    let set_path = set_file.display().to_string();
    let (ok, _, err) = with(&as_admin, &["apply", "-f", &set_path]);
    assert!(ok, "{err}");
    let (ok, out, err) = with(&as_viewer, &["get", "clustersets"]);
    assert!(ok && out.contains("secured"), "{out}{err}");
    let (ok, _, err) = with(&as_viewer, &["delete", "clusterset", "secured"]);
    assert!(!ok);
    assert!(
        err.contains("forbidden: bob (read-only) may not call"),
        "{err}"
    );
    // No token, or no CA to trust the hub's certificate: refused.
    let (ok, _, err) = with(&["--ca", ca.as_str()], &["get", "clusters"]);
    assert!(!ok && err.contains("forbidden: no bearer token"), "{err}");
    let (ok, _, err) = cli(
        &hub.grpc,
        &["--token", "adm1n-token-e2e-0001", "get", "clusters"],
    );
    assert!(!ok && err.contains("cannot reach the hub"), "{err}");
    let log = hub.proc.output();
    assert!(log.contains("api call") && log.contains("alice"), "{log}");
    assert!(
        !log.contains("adm1n-token") && !log.contains("v1ew-token"),
        "{log}"
    );
}

#[test]
fn simulated_clusters_behind_a_slow_link_register_and_take_works_no_faster_than_the_link() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    // Every agent reaches NATS through the simulator's relay, 600 ms per round trip.
    let sim = start_sim(&nats, dir.path(), 2, "far", &["--link-latency-ms", "600"]);
    wait_available(&hub, &[&hub.proc, &sim], "far-", 2);
    let file = dir.path().join("work.yaml");
    std::fs::write(&file, work_yaml("far-0001", "hello")).unwrap();
    let applied = Instant::now();
    cli_ok(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
    wait_for(
        "the work Applied over the slow link",
        &[&hub.proc, &sim],
        || {
            let works = works_json(&hub.grpc, "far-0001")?;
            (works.len() == 1 && condition(&works[0], "Applied").as_deref() == Some("True"))
                .then_some(())
        },
    );
    // The spec goes down and the status comes back: one round trip at least.
    let took = applied.elapsed();
    assert!(
        took >= Duration::from_millis(600),
        "a work over a 600 ms link was Applied after {took:?}"
    );
    drop(sim);
}

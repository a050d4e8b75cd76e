//! End-to-end: the real binaries (nats-server, flotilla-hub, flotilla-agent, flotilla-sim,
//! flotilla) as separate processes, driven the way an operator would.
//!
//! The binaries must be built first (`cargo build --workspace --bins`; `scripts/test.sh` does).

use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const SOON: Duration = Duration::from_secs(30);

struct HubProc {
    proc: Proc,
    grpc: String,
}

fn start_hub(nats: &NatsServer, dir: &std::path::Path, grpc_port: u16, extra: &[&str]) -> HubProc {
    let mut cmd = Command::new(binary("flotilla-hub"));
    cmd.args(["--nats-url", &nats.url()])
        .args(["--grpc-listen", &format!("127.0.0.1:{grpc_port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
        .args([
            "--default-lease-duration-seconds",
            "1",
            "--lease-grace-multiplier",
            "3",
        ])
        .args(extra)
        .env("RUST_LOG", "info");
    HubProc {
        proc: Proc::spawn(
            "flotilla-hub",
            cmd,
            dir.join(format!("hub-{grpc_port}-{}.log", rand_suffix())),
        ),
        grpc: format!("http://127.0.0.1:{grpc_port}"),
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Runs the CLI; returns (success, stdout, stderr).
fn cli(hub: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(binary("flotilla"))
        .args(["--hub", hub])
        .args(args)
        .output()
        .expect("run flotilla");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn cli_ok(hub: &str, args: &[&str]) -> String {
    let (ok, out, err) = cli(hub, args);
    assert!(ok, "flotilla {args:?} failed: {err}\n{out}");
    out
}

fn cli_with_stdin(hub: &str, args: &[&str], input: &str) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(binary("flotilla"))
        .args(["--hub", hub])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run flotilla");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_for<T>(what: &str, logs: &[&Proc], mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = logs.iter().map(|p| p.output()).collect();
            panic!("timed out waiting for {what}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn clusters_json(hub: &str) -> Option<Vec<Value>> {
    let (ok, out, _) = cli(hub, &["get", "clusters", "-o", "json"]);
    if !ok {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    assert_eq!(v["kind"], "List");
    v["items"].as_array().cloned()
}

fn condition(c: &Value, ty: &str) -> Option<String> {
    c["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == ty)
        .and_then(|x| x["status"].as_str().map(str::to_string))
}

#[test]
fn operator_registers_accepts_labels_taints_applies_sets_and_deletes() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&nats, dir.path(), free_port(), &[]);
    let mut agent_cmd = Command::new(binary("flotilla-agent"));
    agent_cmd
        .args(["--cluster-name", "cluster1", "--nats-url", &nats.url()])
        .arg("--state-dir")
        .arg(dir.path().join("agent-state"))
        .args([
            "--label",
            "purpose=test",
            "--claim",
            "team.example.com=edge",
        ])
        .args([
            "--sim-platform",
            "AWS",
            "--pending-poll-seconds",
            "1",
            "--status-interval-seconds",
            "1",
        ]);
    let agent = Proc::spawn("flotilla-agent", agent_cmd, dir.path().join("agent.log"));

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
        (condition(c, "ManagedClusterConditionAvailable").as_deref() == Some("True")).then_some(())
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
    let sets = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: prod
spec:
  clusterSelector:
    selectorType: LabelSelector
    labelSelector:
      matchLabels:
        env: prod
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: prod
  namespace: default
spec:
  clusterSet: prod
"#;
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
    let mut hub = start_hub(&nats, dir.path(), port, &["--auto-accept"]);
    let mut sim_cmd = Command::new(binary("flotilla-sim"));
    sim_cmd.args([
        "--nats-url",
        &nats.url(),
        "--clusters",
        "20",
        "--name-prefix",
        "edge",
        "--pending-poll-seconds",
        "1",
    ]);
    let sim = Proc::spawn("flotilla-sim", sim_cmd, dir.path().join("sim.log"));
    let all_available = |items: &[Value]| {
        items.len() == 20
            && items.iter().all(|c| {
                condition(c, "ManagedClusterConditionAvailable").as_deref() == Some("True")
            })
    };
    wait_for("20 clusters Available", &[&hub.proc, &sim], || {
        clusters_json(&hub.grpc).filter(|items| all_available(items))
    });
    cli_ok(&hub.grpc, &["label", "edge-0003", "marked=yes"]);

    hub.proc.kill(); // SIGKILL
    let hub2 = start_hub(&nats, dir.path(), port, &["--auto-accept"]);
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
    let mut hub = start_hub(&nats, dir.path(), port, &["--auto-accept"]);
    let mut agent_cmd = Command::new(binary("flotilla-agent"));
    agent_cmd
        .args(["--cluster-name", "spoke1", "--nats-url", &nats.url()])
        .arg("--state-dir")
        .arg(dir.path().join("spoke1"))
        .args([
            "--pending-poll-seconds",
            "1",
            "--work-status-interval-seconds",
            "1",
            "--resync-interval-seconds",
            "2",
        ])
        .args(["--sim-ready-delay-ms", "300"]);
    let agent = Proc::spawn("flotilla-agent", agent_cmd, dir.path().join("agent.log"));
    wait_for("spoke1 Available", &[&hub.proc, &agent], || {
        let items = clusters_json(&hub.grpc)?;
        let c = items.iter().find(|c| c["metadata"]["name"] == "spoke1")?;
        (condition(c, "ManagedClusterConditionAvailable").as_deref() == Some("True")).then_some(())
    });

    // Five works in one multi-document apply, then kill -9 the hub right away.
    let docs: Vec<String> = (1..=5)
        .map(|i| work_yaml("spoke1", &format!("app{i}")))
        .collect();
    let (ok, out, err) = cli_with_stdin(&hub.grpc, &["apply", "-f", "-"], &docs.join("---\n"));
    assert!(ok, "{err}");
    assert_eq!(out.matches("applied").count(), 5, "{out}");
    hub.proc.kill();
    let hub2 = start_hub(&nats, dir.path(), port, &["--auto-accept"]);
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

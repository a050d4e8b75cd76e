//! An agent with several independent hubs (OCM's MultipleHubs) with the real binaries: two
//! nats-servers, two `flotilla-hub`s, one `flotilla-agent --hubs`; the spoke seen through each
//! hub's cluster proxy with the real kubectl. The agent's connection timeout is shortened with
//! the hidden test flag (OCM's minimum is 180 s).

mod common;

use common::*;
use flotilla_testkit::{NatsServer, free_port};
use std::path::Path;
use std::time::{Duration, Instant};

const TIMEOUT_SECONDS: u64 = 8;

/// A ConfigMap work for `edge-1`.
fn work(name: &str, cm: &str) -> String {
    format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{name: {name}, namespace: edge-1}}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {{name: {cm}, namespace: default}}
        data: {{from: {cm}}}
"#
    )
}

fn apply(hub: &Hub, dir: &Path, name: &str, yaml: &str) {
    let file = dir.join(name);
    std::fs::write(&file, yaml).unwrap();
    cli_ok(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
}

fn edge_available(hub: &Hub) -> Option<()> {
    clusters_json(&hub.grpc)?
        .iter()
        .any(|c| c["metadata"]["name"] == "edge-1" && available(c))
        .then_some(())
}

/// Whether kubectl through this hub's proxy sees ConfigMap `cm` on edge-1 (the call reaches
/// the agent only while it is connected to this hub).
fn sees(kubectl: &Kubectl, cm: &str) -> bool {
    let out = kubectl.try_run(&["get", "configmap", cm, "-o", "name"]);
    out.is_some_and(|o| o.trim() == format!("configmap/{cm}"))
}

/// The agent's counter of hub switches for `reason`.
fn switches(metrics_port: u16, reason: &str) -> u64 {
    let text = scrape(metrics_port).unwrap_or_default();
    let needle = format!("flotilla_agent_hub_switches_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_agent_fails_over_to_the_next_hub_keeps_the_workloads_and_leaves_a_hub_that_denies_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let mut nats_a = NatsServer::start();
    let nats_b = NatsServer::start();
    let (proxy_a, proxy_b) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let hub_a = HubBuilder::new(&nats_a, &a_dir)
        .auto_accept()
        .flag("--cluster-proxy-listen", &proxy_a)
        .start();
    let hub_b = HubBuilder::new(&nats_b, &b_dir)
        .auto_accept()
        .flag("--cluster-proxy-listen", &proxy_b)
        .start();
    let hubs = dir.path().join("hubs.yaml");
    std::fs::write(
        &hubs,
        format!(
            "hubs:\n  - {{name: hub-a, natsUrl: '{}'}}\n  - {{name: hub-b, natsUrl: '{}'}}\n",
            nats_a.url(),
            nats_b.url()
        ),
    )
    .unwrap();
    let metrics_port = free_port();
    let agent = AgentBuilder::with_hubs(&hubs, dir.path(), "edge-1")
        .flag(
            "--unsafe-hub-connection-timeout-seconds",
            &TIMEOUT_SECONDS.to_string(),
        )
        .flag("--metrics-listen", &format!("127.0.0.1:{metrics_port}"))
        .start();
    let logs = [&hub_a.proc, &hub_b.proc, &agent];

    // On hub A first; hub A puts a ConfigMap on the cluster.
    wait_for("edge-1 Available on hub A", &logs, || {
        edge_available(&hub_a)
    });
    apply(&hub_a, dir.path(), "a.yaml", &work("web", "from-a"));
    let kubectl_a = Kubectl::new(&hub_a, &a_dir, "edge-1", &proxy_a);
    wait_for("hub A's ConfigMap on the spoke", &logs, || {
        sees(&kubectl_a, "from-a").then_some(())
    });

    // Hub A's NATS goes away: Available on hub B within the timeout + 30 s, and hub A's
    // ConfigMap is still on the spoke (seen through hub B's proxy).
    nats_a.stop();
    let stopped = Instant::now();
    let kubectl_b = Kubectl::new(&hub_b, &b_dir, "edge-1", &proxy_b);
    let limit = Duration::from_secs(TIMEOUT_SECONDS + 30);
    loop {
        if edge_available(&hub_b).is_some() && sees(&kubectl_b, "from-a") {
            break;
        }
        assert!(
            stopped.elapsed() < limit,
            "not on hub B within {limit:?}\n{}",
            agent.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Several of hub B's resyncs later, A's ConfigMap is still there: B never knew A's works.
    apply(&hub_b, dir.path(), "b.yaml", &work("web", "from-b"));
    wait_for("hub B's ConfigMap", &logs, || {
        sees(&kubectl_b, "from-b").then_some(())
    });
    std::thread::sleep(Duration::from_secs(TIMEOUT_SECONDS / 2));
    assert!(
        sees(&kubectl_b, "from-a"),
        "a switch must not wipe the previous hub's workloads"
    );
    assert_eq!(switches(metrics_port, "unanswered"), 1);

    // Hub A is back and hub B denies the cluster: the agent leaves B for A.
    nats_a.start_again();
    cli_ok(&hub_b.grpc, &["deny", "edge-1"]);
    wait_for("the agent back on hub A", &logs, || {
        sees(&kubectl_a, "from-b").then_some(())
    });
    assert!(switches(metrics_port, "denied") >= 1);
    let selection =
        std::fs::read_to_string(dir.path().join("state-edge-1").join("hubs.json")).unwrap();
    assert!(selection.contains("\"current\": \"hub-a\""), "{selection}");
    assert!(
        selection.contains("\"hub-b\""),
        "hub B is remembered as denied: {selection}"
    );
}

#[test]
fn each_hub_has_its_own_ca_and_bootstrap_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let init = |name: &str| {
        let secure = dir.path().join(name);
        let (nats, _) = secure_nats(&secure);
        (secure, nats)
    };
    let (secure_a, mut nats_a) = init("secure-a");
    let (secure_b, nats_b) = init("secure-b");
    let tls = |n: &NatsServer| n.url().replace("nats://", "tls://");
    let hub = |nats: &NatsServer, secure: &Path, sub: &str| {
        let d = dir.path().join(sub);
        std::fs::create_dir_all(&d).unwrap();
        HubBuilder::new(nats, &d)
            .nats_url(&tls(nats))
            .auto_accept()
            .flag("--secure-dir", &secure.display().to_string())
            .start()
    };
    let hub_a = hub(&nats_a, &secure_a, "a");
    let hub_b = hub(&nats_b, &secure_b, "b");
    // Each hub's CA and bootstrap credentials, paths relative to the hubs file.
    let hubs = dir.path().join("hubs.yaml");
    std::fs::write(
        &hubs,
        format!(
            "hubs:\n\
             - {{name: hub-a, natsUrl: '{}', ca: secure-a/tls/ca.pem, bootstrapCreds: secure-a/bootstrap.creds}}\n\
             - {{name: hub-b, natsUrl: '{}', ca: secure-b/tls/ca.pem, bootstrapCreds: secure-b/bootstrap.creds}}\n",
            tls(&nats_a),
            tls(&nats_b)
        ),
    )
    .unwrap();
    let agent = AgentBuilder::with_hubs(&hubs, dir.path(), "edge-1")
        .flag(
            "--unsafe-hub-connection-timeout-seconds",
            &TIMEOUT_SECONDS.to_string(),
        )
        .start();
    let logs = [&hub_a.proc, &hub_b.proc, &agent];
    wait_for("edge-1 Available on hub A", &logs, || {
        edge_available(&hub_a)
    });
    let state = dir.path().join("state-edge-1").join("hubs");
    assert!(
        state.join("hub-a").join("cluster.creds").is_file(),
        "hub A's own credentials"
    );
    nats_a.stop();
    let stopped = Instant::now();
    let limit = Duration::from_secs(TIMEOUT_SECONDS + 30);
    while edge_available(&hub_b).is_none() {
        assert!(
            stopped.elapsed() < limit,
            "not on hub B within {limit:?}\n{}",
            agent.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Enrolled on hub B with B's bootstrap credentials over B's CA; A's stay where they were.
    assert!(state.join("hub-b").join("cluster.creds").is_file());
    assert!(state.join("hub-a").join("cluster.creds").is_file());
    let a = std::fs::read(state.join("hub-a").join("cluster.creds")).unwrap();
    let b = std::fs::read(state.join("hub-b").join("cluster.creds")).unwrap();
    assert_ne!(a, b, "a key and credentials per hub");
}

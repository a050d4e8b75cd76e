//! The agent's and the simulator's Prometheus endpoints, scraped from real processes: what they
//! count moves when a work is applied.

mod common;

use common::{HubBuilder, run_cli, scrape, wait_for};
use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use std::process::Command;

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

const WORK: &str = r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: CLUSTER, name: metrics}
spec:
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: m, namespace: default}, data: {a: b}}
"#;

#[test]
fn the_simulator_reports_its_whole_fleet() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let port = free_port();
    let sim = common::start_sim(
        &nats,
        dir.path(),
        3,
        "met",
        &["--metrics-listen", &format!("127.0.0.1:{port}")],
    );
    wait_for("3 agents connected", &[&hub.proc, &sim], || {
        let text = scrape(port)?;
        (value(&text, "flotilla_agent_connected")? == 3.0).then_some(())
    });
    common::wait_available(&hub, &[&hub.proc, &sim], "met-", 3);
    let out = run_cli(
        &hub.grpc,
        &["apply", "-f", "-"],
        Some(&WORK.replace("CLUSTER", "met-0001")),
    );
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let text = wait_for(
        "the apply and its status counted",
        &[&hub.proc, &sim],
        || {
            let text = scrape(port)?;
            let applied = value(&text, "flotilla_agent_applies_total{result=\"ok\"}")?;
            let status = value(&text, "flotilla_agent_status_events_total{result=\"ok\"}")?;
            (applied >= 1.0 && status >= 1.0).then_some(text)
        },
    );
    assert_eq!(value(&text, "flotilla_agent_works"), Some(1.0), "{text}");
    assert!(
        value(&text, "flotilla_agent_spec_events_total").unwrap() >= 1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "flotilla_sim_agent_starts_total"),
        Some(3.0),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn an_agent_serves_its_metrics_and_counts_a_lost_link() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let port = free_port();
    let mut cmd = Command::new(binary("flotilla-agent"));
    cmd.args(["--cluster-name", "m1", "--nats-url", &nats.url()])
        .args(["--state-dir", dir.path().join("m1").to_str().unwrap()])
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")]);
    let agent = Proc::spawn("flotilla-agent", cmd, dir.path().join("agent.log"));
    wait_for("the agent connected", &[&hub.proc, &agent], || {
        (value(&scrape(port)?, "flotilla_agent_connected")? == 1.0).then_some(())
    });
    common::wait_available(&hub, &[&hub.proc, &agent], "m1", 1);
    let mut nats = nats;
    nats.restart();
    let text = wait_for(
        "the lost link counted and the agent back",
        &[&hub.proc, &agent],
        || {
            let text = scrape(port)?;
            (value(&text, "flotilla_agent_disconnections_total")? >= 1.0
                && value(&text, "flotilla_agent_connected")? == 1.0)
                .then_some(text)
        },
    );
    assert!(
        value(&text, "flotilla_agent_connections_total").unwrap() >= 2.0,
        "{text}"
    );
}

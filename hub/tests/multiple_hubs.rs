//! An agent with several independent hubs (OCM's MultipleHubs), in process: two NATS servers,
//! two hubs, one agent supervised over both with a 3 s connection timeout.

mod common;

use common::work::*;
use common::*;
use flotilla_agent::StateConfig;
use flotilla_agent::backend::Backend;
use flotilla_agent::hubs::cleanup::Cleanup;
use flotilla_agent::hubs::{HubEndpoint, MultipleHubs, Supervisor};
use flotilla_api::v1::ClusterNamesRequest;
use flotilla_api::work::ManifestId;
use flotilla_testkit::NatsServer;
use std::time::Duration;
use tokio::sync::oneshot;

const TIMEOUT: Duration = Duration::from_secs(3);

fn hub_endpoint(name: &str, nats: &NatsServer) -> HubEndpoint {
    HubEndpoint {
        name: name.into(),
        nats_url: nats.url(),
        ca: None,
        bootstrap_creds: None,
        tls_first: false,
    }
}

/// A hub accepting every cluster.
async fn open_hub(nats: &NatsServer) -> flotilla_hub::Hub {
    let mut config = hub_config(&nats.url());
    config.cluster.auto_accept.enabled = true;
    start_hub(config).await
}

/// Agent `edge-1` supervised over hub A then hub B, its state in `state`; its metrics.
fn supervised(
    state: &std::path::Path,
    [nats_a, nats_b]: [&NatsServer; 2],
    cleanup: Cleanup,
) -> (
    TestAgent,
    std::sync::Arc<flotilla_agent::metrics::AgentMetrics>,
) {
    let mut config = agent_config("edge-1", &nats_a.url());
    config.state = StateConfig::Dir(state.to_path_buf());
    let metrics = config.metrics.clone();
    let multi = MultipleHubs {
        hubs: vec![hub_endpoint("hub-a", nats_a), hub_endpoint("hub-b", nats_b)],
        timeout: TIMEOUT,
        cleanup,
    };
    let backend = sim_backend();
    let supervisor = Supervisor::new(config, multi, backend.clone()).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        supervisor
            .run(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (TestAgent::from_parts(backend, stop, task), metrics)
}

/// A work putting ConfigMaps `cm` and `shared` in `default`.
fn configmap_work(name: &str, cm: &str) -> flotilla_api::v1::ManifestWork {
    work(&format!(
        r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{name: {name}, namespace: edge-1}}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {{name: {cm}, namespace: default}}
        data: {{from: {cm}}}
      - apiVersion: v1
        kind: ConfigMap
        metadata: {{name: shared, namespace: default}}
        data: {{from: both}}
"#
    ))
}

fn configmap(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "default".into(),
        name: name.into(),
    }
}

async fn has(agent: &TestAgent, cm: &str) -> bool {
    agent.backend.get(&configmap(cm)).await.unwrap().is_some()
}

#[tokio::test]
async fn the_agent_fails_over_keeps_the_previous_hubs_workloads_and_leaves_a_hub_that_denies_it() {
    let mut nats_a = NatsServer::start();
    let nats_b = NatsServer::start();
    let hub_a = open_hub(&nats_a).await;
    let hub_b = open_hub(&nats_b).await;
    let state = tempfile::tempdir().unwrap();
    let (agent, metrics) = supervised(state.path(), [&nats_a, &nats_b], Cleanup::Keep);

    // On hub A first (the first listed), which puts a ConfigMap on the cluster.
    let mut api_a = clusters_client(&hub_a).await;
    wait_available(&mut api_a, "edge-1").await;
    works_client(&hub_a)
        .await
        .apply_work(configmap_work("web", "from-a"))
        .await
        .unwrap();
    wait_for("hub A's ConfigMap", || async {
        has(&agent, "from-a").await.then_some(())
    })
    .await;

    // Hub A's NATS goes away: within the timeout (and a little) the agent is on hub B.
    nats_a.stop();
    let mut api_b = clusters_client(&hub_b).await;
    wait_available(&mut api_b, "edge-1").await;
    // Hub B has a same-named work of its own; several of its resyncs go by (a sixth of the
    // timeout apart) and hub A's ConfigMap is still there: B never knew A's works.
    works_client(&hub_b)
        .await
        .apply_work(configmap_work("web", "from-b"))
        .await
        .unwrap();
    wait_for("hub B's ConfigMap", || async {
        has(&agent, "from-b").await.then_some(())
    })
    .await;
    tokio::time::sleep(TIMEOUT).await;
    assert!(
        has(&agent, "from-a").await,
        "a switch must not wipe the previous hub's workloads"
    );
    // Hub B deletes its work: its own ConfigMap goes, the one hub A's parked work declares too
    // stays (as between two works of one hub).
    works_client(&hub_b)
        .await
        .delete_work(flotilla_api::v1::DeleteWorkRequest {
            cluster: "edge-1".into(),
            name: "web".into(),
        })
        .await
        .unwrap();
    wait_for("hub B's ConfigMap deleted", || async {
        (!has(&agent, "from-b").await).then_some(())
    })
    .await;
    assert!(
        has(&agent, "shared").await,
        "hub A's parked work still declares it"
    );
    assert!(has(&agent, "from-a").await);
    let dirs = |hub: &str| state.path().join("hubs").join(hub).join("agent-state.json");
    assert!(
        dirs("hub-a").is_file() && dirs("hub-b").is_file(),
        "state per hub"
    );

    // Hub A is back, and hub B denies the cluster: the agent leaves B at once for A.
    nats_a.start_again();
    let before = renewals(&hub_a);
    api_b
        .deny_clusters(ClusterNamesRequest {
            names: vec!["edge-1".into()],
            key: String::new(),
        })
        .await
        .unwrap();
    wait_for("the agent renewing its lease on hub A again", || async {
        on_hub(&hub_a, state.path(), "hub-a", before).then_some(())
    })
    .await;
    // Hub A may take a few timeouts to answer again after its NATS came back: meanwhile the
    // agent tries B again when A times out, and B's denial sends it back at once.
    let switches = |reason: &str| {
        let text = metrics.render();
        let needle = format!("flotilla_agent_hub_switches_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&needle))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        switches("unanswered") >= 1 && switches("denied") >= 1,
        "{}",
        metrics.render()
    );
    // Back on A, with A's work and its ConfigMaps.
    tokio::time::sleep(TIMEOUT).await;
    assert!(has(&agent, "from-a").await && has(&agent, "shared").await);
    let selection = std::fs::read_to_string(state.path().join("hubs.json")).unwrap();
    assert!(
        selection.contains("\"current\": \"hub-a\"") && selection.contains("hub-b"),
        "the denied hub is remembered: {selection}"
    );
    agent.stop().await;
    hub_a.stop().await;
    hub_b.stop().await;
}

#[tokio::test]
async fn with_cleanup_delete_a_switch_removes_the_previous_hubs_works() {
    let mut nats_a = NatsServer::start();
    let nats_b = NatsServer::start();
    let hub_a = open_hub(&nats_a).await;
    let hub_b = open_hub(&nats_b).await;
    let state = tempfile::tempdir().unwrap();
    let (agent, _) = supervised(state.path(), [&nats_a, &nats_b], Cleanup::Delete);
    wait_available(&mut clusters_client(&hub_a).await, "edge-1").await;
    works_client(&hub_a)
        .await
        .apply_work(configmap_work("web", "from-a"))
        .await
        .unwrap();
    wait_for("hub A's ConfigMap", || async {
        has(&agent, "from-a").await.then_some(())
    })
    .await;
    nats_a.stop();
    wait_available(&mut clusters_client(&hub_b).await, "edge-1").await;
    wait_for("hub A's ConfigMaps deleted after the switch", || async {
        (!has(&agent, "from-a").await && !has(&agent, "shared").await).then_some(())
    })
    .await;
    let works = state.path().join("hubs/hub-a/works");
    let left = std::fs::read_dir(&works).map(|d| d.count()).unwrap_or(0);
    assert_eq!(
        left, 0,
        "hub A's work records go too (its resync sends them again)"
    );
    agent.stop().await;
    hub_a.stop().await;
    hub_b.stop().await;
}

/// Lease renewals `hub` received.
fn renewals(hub: &flotilla_hub::Hub) -> u64 {
    hub.metrics
        .render(&hub.inventory)
        .lines()
        .filter(|l| l.starts_with("flotilla_hub_events_received_total") && l.contains("lease"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Whether the agent's selection is `name` and `hub` received more than `since` + 2 lease
/// renewals (a hub whose NATS was away still shows the cluster Available: it judges no lease
/// while blind, so Available alone does not say the agent is back).
fn on_hub(hub: &flotilla_hub::Hub, state: &std::path::Path, name: &str, since: u64) -> bool {
    let selection = std::fs::read_to_string(state.join("hubs.json")).unwrap_or_default();
    selection.contains(&format!("\"current\": \"{name}\"")) && renewals(hub) > since + 2
}

/// Polls `f` until it answers `Some`, for at most 20 s.
async fn wait_for<F, Fut>(what: &str, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    flotilla_testkit::eventually(SOON, what, f).await;
}

//! A rolling restart of the hubs (issue 49 §6.7), as a Deployment rolls them, with real
//! processes over a three-node clustered JetStream: hubs a and b run, simulated agents are
//! Available; a fanout of works starts; hub c starts and a is stopped (SIGTERM: it drains and
//! releases its shards), then d starts and b is stopped. What must hold:
//! - every work of the fanout converges, seen through the last hub;
//! - no cluster is ever shown not Available by a watcher on a hub that lives through the roll,
//!   and no lease expires on the hubs left (`flotilla_hub_lease_expired_total` 0);
//! - each stopped hub exits on its own, within its grace, having released its shards — no hub
//!   ever loses a shard (no `lost` in any `/debug/shards` log), and the last two hold all 33.

mod common;
#[path = "upgrade/previous.rs"]
mod previous;
#[path = "upgrade/skew.rs"]
mod skew;
#[path = "upgrade/store.rs"]
mod store;

use common::hubproc::{HubProc, PATIENCE, watch_for_unavailable};
use common::work::*;
use common::*;
use flotilla_api::v1::GetWorkRequest;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_testkit::{NatsCluster, NatsClusterOptions};
use std::collections::BTreeSet;
use std::time::Duration;
use tonic::transport::Channel;

/// Clusters of the fleet.
const CLUSTERS: usize = 8;
/// Works per cluster in the fanout.
const WORKS: usize = 3;
/// How long a stopped hub may take to hand its shards over and exit (the Deployment's
/// `terminationGracePeriodSeconds` is 60).
const GRACE: Duration = Duration::from_secs(40);

/// Applies every work through the first of `hubs` that takes it, retrying while hubs come
/// and go (a call cut by a stopping hub is made again: applying is idempotent).
async fn fanout(hubs: Vec<String>, works: Vec<(String, String)>) {
    for (cluster, name) in works {
        let w = config_map_work(&cluster, &name);
        let what = format!("applying {cluster}/{name} through any hub");
        flotilla_testkit::eventually(PATIENCE, &what, || {
            let (w, hubs) = (w.clone(), hubs.clone());
            async move {
                for grpc in hubs {
                    let Ok(ch) = Channel::from_shared(grpc).unwrap().connect().await else {
                        continue;
                    };
                    if WorkServiceClient::new(ch)
                        .apply_work(w.clone())
                        .await
                        .is_ok()
                    {
                        return Some(());
                    }
                }
                None
            }
        })
        .await;
    }
}

/// Stops `hub` as Kubernetes does (SIGTERM) and waits for it to exit on its own.
async fn terminate(hub: &mut HubProc) {
    hub.signal("-TERM");
    let deadline = tokio::time::Instant::now() + GRACE;
    while hub.proc.is_running() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "hub {} still running {GRACE:?} after SIGTERM",
            hub.id
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(&hub.proc.log).unwrap();
    assert!(
        !log.contains("handing the shards over took too long"),
        "hub {} did not hand its shards over in time",
        hub.id
    );
}

/// Waits until `hubs` hold every unit between them, each some.
async fn holding_all(hubs: &[&HubProc]) {
    flotilla_testkit::eventually(PATIENCE, "every unit held, every hub some", || async {
        let mut all = BTreeSet::new();
        for h in hubs {
            let held = h.held().await?;
            if held.is_empty() {
                return None;
            }
            for u in held {
                if !all.insert(u) {
                    return None;
                }
            }
        }
        (all.len() == 33).then_some(())
    })
    .await;
}

/// No `lost` event in `hub`'s ownership log: it only ever acquired and released.
async fn never_lost(hub: &HubProc) {
    let log = hub.shards().await.expect("the hub's shard log");
    let lost: Vec<_> = log["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["event"] == "lost")
        .collect();
    assert!(lost.is_empty(), "hub {} lost shards: {lost:?}", hub.id);
}

async fn lease_expiries(hub: &HubProc) -> String {
    let (_, body) = flotilla_testkit::http_get(&hub.metrics_addr(), "/metrics")
        .await
        .expect("metrics");
    body.lines()
        .find(|l| l.starts_with("flotilla_hub_lease_expired_total "))
        .unwrap_or("no flotilla_hub_lease_expired_total")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_two_hubs_during_a_fanout_converges_with_no_cluster_unavailable() {
    let nats = NatsCluster::start(
        flotilla_testkit::nats_server_binary(),
        NatsClusterOptions::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    let mut a = HubProc::start_short_leases(&urls, dir.path(), "a");
    let mut b = HubProc::start_short_leases(&urls, dir.path(), "b");
    let names: Vec<String> = (1..=CLUSTERS).map(|i| format!("edge-{i}")).collect();
    let _agents: Vec<_> = names
        .iter()
        .map(|n| start_agent(agent_config(n, &urls)))
        .collect();
    let api = a.clusters().await;
    for n in &names {
        flotilla_testkit::eventually(PATIENCE, &format!("{n} Available"), || {
            let mut api = api.clone();
            async move { (available(&get(&mut api, n).await?)? == "True").then_some(()) }
        })
        .await;
    }
    holding_all(&[&a, &b]).await;

    // The first new hub; the watcher lives on it through the roll.
    let c = HubProc::start_short_leases(&urls, dir.path(), "c");
    holding_all(&[&a, &b, &c]).await;
    let unavailable = watch_for_unavailable(c.clusters().await);
    let works: Vec<(String, String)> = names
        .iter()
        .flat_map(|n| (0..WORKS).map(move |k| (n.clone(), format!("roll-{k}"))))
        .collect();
    let targets = vec![c.grpc.clone(), b.grpc.clone(), a.grpc.clone()];
    let applying = tokio::spawn(fanout(targets, works.clone()));

    never_lost(&a).await;
    terminate(&mut a).await;
    let d = HubProc::start_short_leases(&urls, dir.path(), "d");
    holding_all(&[&b, &c, &d]).await;
    never_lost(&b).await;
    terminate(&mut b).await;
    holding_all(&[&c, &d]).await;
    tokio::time::timeout(PATIENCE, applying)
        .await
        .expect("the fanout finished")
        .unwrap();

    for (cluster, name) in &works {
        flotilla_testkit::eventually(PATIENCE, &format!("{cluster}/{name} converged"), || async {
            let mut api = d.works().await;
            let w = api
                .get_work(GetWorkRequest {
                    cluster: cluster.clone(),
                    name: name.clone(),
                })
                .await
                .ok()?
                .into_inner();
            converged_at(&w, 1).then_some(())
        })
        .await;
    }
    for hub in [&c, &d] {
        never_lost(hub).await;
        assert_eq!(
            lease_expiries(hub).await,
            "flotilla_hub_lease_expired_total 0",
            "hub {}",
            hub.id
        );
    }
    let seen = unavailable.lock().unwrap().clone();
    assert!(
        seen.is_empty(),
        "clusters not Available during the roll: {seen:?}"
    );
}

//! Faults a real fleet meets, against real processes: NATS killed (SIGKILL) in the middle of a
//! batch of writes, writes that time out but land anyway. The assertions are about convergence
//! and nothing lost — every acknowledged write visible, every failed one either absent or
//! visible, never stuck — not about timing.

mod common;

use common::work::*;
use common::*;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{ListWorksRequest, ManifestWork};
use flotilla_bus::connect::{NatsConfig, connect};
use flotilla_hub::keys::ObjectRef;
use flotilla_hub::store::{Bucket, WORKS};
use flotilla_testkit::NatsServer;
use std::collections::BTreeSet;
use std::time::Duration;
use tonic::transport::Channel;

/// The works bucket as the hub stores it, opened on a connection of the test's own.
async fn works_bucket(nats: &NatsServer) -> Bucket<ManifestWork> {
    let client = connect(&NatsConfig::new(nats.url(), "chaos-test"), None)
        .await
        .expect("connect");
    let js = async_nats::jetstream::new(client);
    Bucket::open(&js, WORKS, Default::default())
        .await
        .expect("works bucket")
}

/// Names of the works the API lists for `cluster`.
async fn listed(api: &mut WorkServiceClient<Channel>, cluster: &str) -> BTreeSet<String> {
    api.list_works(ListWorksRequest {
        cluster: cluster.into(),
        ..Default::default()
    })
    .await
    .expect("list works")
    .into_inner()
    .items
    .iter()
    .filter_map(|w| w.metadata.as_ref().map(|m| m.name.clone()))
    .collect()
}

/// The defect of issue 16: a create that timed out at the hub but was written to KV anyway
/// (the publish sat in the client's buffer across a NATS restart) made every later apply of the
/// same document fail with a conflict, and the work was invisible until a hub restart. Here the
/// late write is made directly, exactly as it lands: the hub must adopt it, the apply must
/// succeed, and the agent must get the work.
#[tokio::test]
async fn a_create_that_landed_after_the_hub_gave_up_is_adopted_not_stuck() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agent = accepted_cluster(&mut clusters_client(&hub).await, &nats.url(), "edge-1").await;
    let mut api = works_client(&hub).await;

    // What the hub would have written for the create it then reported as failed.
    let mut late = config_map_work("edge-1", "late");
    let m = late.metadata.as_mut().unwrap();
    m.uid = "0f2c6f4e-2a3e-4c1e-9a53-6d1f0f1d2b11".into();
    m.generation = 1;
    late.hub = Some(flotilla_api::v1::HubWorkState {
        resource_id: flotilla_bus::works::resource_id("edge-1", "late"),
        ..Default::default()
    });
    works_bucket(&nats)
        .await
        .write(&ObjectRef::new("edge-1", "late").store_key(), &late, 0)
        .await
        .expect("late write");

    let applied = api
        .apply_work(config_map_work("edge-1", "late"))
        .await
        .expect("applying the same document again succeeds")
        .into_inner();
    assert_eq!(applied.metadata.as_ref().unwrap().generation, 1);
    assert!(listed(&mut api, "edge-1").await.contains("late"));
    wait_work(&mut api, "edge-1", "late", "delivered and applied", |w| {
        converged_at(w, 1)
    })
    .await;
    agent.stop().await;
    hub.stop().await;
}

/// NATS is killed (SIGKILL) while 16 callers apply 240 works, and comes back a second later.
/// Afterwards every work whose apply was acknowledged is listed, every failed one can be applied
/// again, the API and the store hold the same works, and the agent gets them all.
#[tokio::test]
async fn nats_killed_during_a_batch_of_creates_loses_nothing_and_sticks_nothing() {
    const WORKS_N: usize = 240;
    const CALLERS: usize = 16;
    let mut nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.cluster.default_lease_duration_seconds = 5;
    let hub = start_hub(config).await;
    let agent = accepted_cluster(&mut clusters_client(&hub).await, &nats.url(), "edge-1").await;
    let api = works_client(&hub).await;
    let names: Vec<String> = (0..WORKS_N).map(|i| format!("w-{i:04}")).collect();

    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut callers = tokio::task::JoinSet::new();
    for chunk in names.chunks(WORKS_N / CALLERS) {
        let (mut api, chunk, done) = (api.clone(), chunk.to_vec(), done_tx.clone());
        callers.spawn(async move {
            let mut failed = Vec::new();
            for name in chunk {
                let call = api.apply_work(config_map_work("edge-1", &name));
                match tokio::time::timeout(Duration::from_secs(10), call).await {
                    Ok(Ok(_)) => {
                        let _ = done.send(());
                    }
                    _ => failed.push(name),
                }
            }
            failed
        });
    }
    drop(done_tx);
    // Kill NATS once a quarter of the batch is acknowledged, while the rest is in flight.
    for _ in 0..WORKS_N / 4 {
        done_rx
            .recv()
            .await
            .expect("a quarter of the applies succeed");
    }
    nats.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    nats.start_again();
    let mut failed = Vec::new();
    while let Some(r) = callers.join_next().await {
        failed.extend(r.expect("caller task"));
    }

    // Every failed apply succeeds when tried again once NATS is back: nothing is stuck.
    let mut api = api.clone();
    for name in &failed {
        flotilla_testkit::eventually(SOON, &format!("re-applying {name}"), || {
            let mut api = api.clone();
            let w = config_map_work("edge-1", name);
            async move { api.apply_work(w).await.ok().map(|_| ()) }
        })
        .await;
    }
    let all: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(
        listed(&mut api, "edge-1").await,
        all,
        "the API lists every work"
    );
    let stored: BTreeSet<String> = works_bucket(&nats)
        .await
        .load_all()
        .await
        .expect("load the works bucket")
        .into_iter()
        .map(|(_, w, _)| w.metadata.unwrap().name)
        .collect();
    assert_eq!(stored, all, "the store holds exactly what the API lists");
    for name in &names {
        wait_work(&mut api, "edge-1", name, "delivered and applied", |w| {
            converged_at(w, 1)
        })
        .await;
    }
    agent.stop().await;
    hub.stop().await;
}

/// NATS restarts (SIGKILL, then back on the same port and store) while the fleet is idle: no
/// cluster is ever shown Unknown — the outage is shorter than the lease grace, and the hub
/// judges leases by renewals, not by its own connection.
#[tokio::test]
async fn a_nats_restart_while_idle_marks_no_cluster_unknown() {
    let mut nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.cluster.default_lease_duration_seconds = 2;
    config.cluster.lease_grace_multiplier = 5;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let names = ["idle-1", "idle-2", "idle-3"];
    let agents = accepted_fleet(&mut api, &nats.url(), &names).await;
    let mut watch = api
        .watch_clusters(flotilla_api::v1::WatchClustersRequest::default())
        .await
        .unwrap()
        .into_inner();

    nats.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    nats.start_again();
    // Watch for longer than the outage plus a lease grace (10 s): every change a watcher sees
    // must still say Available=True.
    let until = tokio::time::Instant::now() + Duration::from_secs(12);
    while let Ok(Ok(Some(ev))) = tokio::time::timeout_at(until, watch.message()).await {
        let c = ev.cluster.unwrap();
        assert_eq!(
            available(&c).as_deref(),
            Some("True"),
            "a cluster left Available during the NATS restart: {c:#?}"
        );
    }
    for n in names {
        assert_eq!(
            available(&get(&mut api, n).await.unwrap()).as_deref(),
            Some("True")
        );
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// A hub whose clusters turn Unknown 3 s after their last renewal (1 s leases, a grace of
/// three), for links cut longer than that.
fn short_grace(nats: &NatsServer) -> flotilla_hub::Config {
    let mut config = hub_config(&nats.url());
    config.cluster.default_lease_duration_seconds = 1;
    config.cluster.lease_grace_multiplier = 3;
    config
}

/// An edge link that drops for longer than the lease grace: the cluster turns Unknown (with
/// the `unreachable` taint) no earlier than the grace allows, and Available again once the
/// link returns — with no operator action.
#[tokio::test]
async fn a_link_down_past_the_grace_turns_unknown_then_available_when_it_returns() {
    let nats = NatsServer::start();
    let link = flotilla_testkit::LinkProxy::start(nats.port()).await;
    let hub = start_hub(short_grace(&nats)).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &link.url(), "flaky").await;

    link.cut();
    let cut_at = tokio::time::Instant::now();
    let c = wait_cluster(&mut api, "flaky", "Unknown", |c| {
        available(c).as_deref() == Some("Unknown")
    })
    .await;
    // The last renewal can be up to one lease before the cut: the grace runs from there.
    let earliest = Duration::from_secs(3 - 1);
    assert!(
        cut_at.elapsed() >= earliest,
        "Unknown after {:?}, before the grace allows ({earliest:?})",
        cut_at.elapsed()
    );
    assert!(taints(&c).contains(&"cluster.open-cluster-management.io/unreachable".to_string()));

    link.restore();
    wait_available(&mut api, "flaky").await;
    agent.stop().await;
    hub.stop().await;
}

/// A cluster back from an outage longer than its lease is sent what it missed once, through
/// its agent's resync as it reconnects — not also, at the same moment, by the hub's check for
/// specs the agent has not confirmed (a fleet returning at once otherwise got every missed
/// spec twice). The spec is overdue by then: it was sent into the outage longer ago than the
/// resend back-off.
#[tokio::test]
async fn a_cluster_back_from_an_outage_gets_what_it_missed_once() {
    let nats = NatsServer::start();
    let link = flotilla_testkit::LinkProxy::start(nats.port()).await;
    let mut config = short_grace(&nats);
    let backoff = Duration::from_secs(12);
    config.cluster.work_resend_after = backoff;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let mut works = works_client(&hub).await;
    let agent = accepted_cluster(&mut api, &link.url(), "away").await;

    link.cut();
    wait_cluster(&mut api, "away", "Unknown", |c| {
        available(c).as_deref() == Some("Unknown")
    })
    .await;
    works
        .apply_work(config_map_work("away", "missed"))
        .await
        .expect("a work for a cluster that is away is accepted");
    tokio::time::sleep(backoff + Duration::from_secs(1)).await;

    link.restore();
    wait_available(&mut api, "away").await;
    let back = tokio::time::Instant::now();
    wait_work(&mut works, "away", "missed", "applied", |w| {
        converged_at(w, 1)
    })
    .await;
    let took = back.elapsed();
    assert!(
        took < backoff,
        "the resync took {took:?} to deliver the missed spec, longer than the back-off"
    );
    let text = metrics_text(&hub).await;
    let resends = text
        .lines()
        .find_map(|l| l.strip_prefix("flotilla_hub_work_resends_total "))
        .expect("the resend counter is exported");
    assert_eq!(resends.trim(), "0", "specs re-sent on return:\n{text}");
    agent.stop().await;
    hub.stop().await;
}

/// One write of the mixed batch: what it does and to which object.
#[derive(Debug, Clone)]
enum Write {
    UpdateWork(String),
    DeleteWork(String),
    Placement(String),
    Set(String),
}

/// NATS is killed while 16 callers update and delete works and create placements and sets.
/// Afterwards every failed write can be done again, and for each kind the API and the store
/// hold the same objects: acknowledged writes are visible, nothing is stuck.
#[tokio::test]
async fn nats_killed_during_updates_deletes_placements_and_sets_leaves_api_and_store_agreeing() {
    use flotilla_api::v1::placement_service_client::PlacementServiceClient;
    use flotilla_api::v1::{
        DeleteWorkRequest, ListClusterSetsRequest, ListPlacementsRequest, ManagedClusterSet,
        ObjectMeta, Placement, PlacementSpec,
    };
    const N: usize = 40;
    let mut nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agent = accepted_cluster(&mut clusters_client(&hub).await, &nats.url(), "edge-1").await;
    let mut works = works_client(&hub).await;
    for i in 0..2 * N {
        works
            .apply_work(config_map_work("edge-1", &format!("w-{i:03}")))
            .await
            .unwrap();
    }
    let placements = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let sets = sets_client(&hub).await;
    let meta = |name: &str, namespace: &str| {
        Some(ObjectMeta {
            name: name.into(),
            namespace: namespace.into(),
            ..Default::default()
        })
    };
    let mut batch = Vec::new();
    for i in 0..N {
        batch.push(Write::UpdateWork(format!("w-{i:03}")));
        batch.push(Write::DeleteWork(format!("w-{:03}", N + i)));
        batch.push(Write::Placement(format!("p-{i:03}")));
        batch.push(Write::Set(format!("s-{i:03}")));
    }
    let apply = {
        let (works, placements, sets) = (works.clone(), placements.clone(), sets.clone());
        move |w: Write| {
            let (mut works, mut placements, mut sets) =
                (works.clone(), placements.clone(), sets.clone());
            async move {
                let r = match &w {
                    Write::UpdateWork(name) => {
                        let doc = config_map_work_with("edge-1", name, "updated");
                        works.apply_work(doc).await.map(|_| ())
                    }
                    Write::DeleteWork(name) => works
                        .delete_work(DeleteWorkRequest {
                            cluster: "edge-1".into(),
                            name: name.clone(),
                        })
                        .await
                        .map(|_| ())
                        // Gone already: a retried delete is done.
                        .or_else(|e| (e.code() == tonic::Code::NotFound).then_some(()).ok_or(e)),
                    Write::Placement(name) => placements
                        .apply_placement(Placement {
                            metadata: meta(name, "apps"),
                            spec: Some(PlacementSpec::default()),
                            status: None,
                        })
                        .await
                        .map(|_| ()),
                    Write::Set(name) => sets
                        .apply_cluster_set(ManagedClusterSet {
                            metadata: meta(name, ""),
                            spec: None,
                            status: None,
                        })
                        .await
                        .map(|_| ()),
                };
                r.is_ok()
            }
        }
    };
    let mut callers = tokio::task::JoinSet::new();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for chunk in batch.chunks(batch.len() / 16) {
        let (chunk, apply, done) = (chunk.to_vec(), apply.clone(), done_tx.clone());
        callers.spawn(async move {
            let mut failed = Vec::new();
            for w in chunk {
                match tokio::time::timeout(Duration::from_secs(10), apply(w.clone())).await {
                    Ok(true) => {
                        let _ = done.send(());
                    }
                    _ => failed.push(w),
                }
            }
            failed
        });
    }
    drop(done_tx);
    for _ in 0..batch.len() / 4 {
        done_rx
            .recv()
            .await
            .expect("a quarter of the writes succeed");
    }
    nats.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    nats.start_again();
    let mut failed = Vec::new();
    while let Some(r) = callers.join_next().await {
        failed.extend(r.expect("caller task"));
    }
    for w in &failed {
        flotilla_testkit::eventually(SOON, &format!("redoing {w:?}"), || {
            let (apply, w) = (apply.clone(), w.clone());
            async move { apply(w).await.then_some(()) }
        })
        .await;
    }

    // Works: the deleted half goes (once the agent confirms), the updated half stays.
    let kept: BTreeSet<String> = (0..N).map(|i| format!("w-{i:03}")).collect();
    flotilla_testkit::eventually(SOON, "deleted works gone", || {
        let mut works = works.clone();
        let kept = kept.clone();
        async move { (listed(&mut works, "edge-1").await == kept).then_some(()) }
    })
    .await;
    let client = connect(&NatsConfig::new(nats.url(), "chaos-test"), None)
        .await
        .unwrap();
    let js = async_nats::jetstream::new(client);
    let stored_names = |items: Vec<(String, String)>| -> BTreeSet<String> {
        items.into_iter().map(|(_, name)| name).collect()
    };
    let stored_works = Bucket::<ManifestWork>::open(&js, WORKS, Default::default())
        .await
        .unwrap()
        .load_all()
        .await
        .unwrap();
    assert_eq!(
        stored_names(
            stored_works
                .into_iter()
                .map(|(k, w, _)| (k, w.metadata.unwrap().name))
                .collect()
        ),
        kept
    );
    // Placements and sets: every one listed is stored and every one stored is listed.
    let listed_placements: BTreeSet<String> = placements
        .clone()
        .list_placements(ListPlacementsRequest {
            namespace: "apps".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .items
        .into_iter()
        .map(|p| p.metadata.unwrap().name)
        .collect();
    let stored_placements = Bucket::<Placement>::open(
        &js,
        flotilla_hub::placement::PLACEMENTS_BUCKET,
        Default::default(),
    )
    .await
    .unwrap()
    .load_all()
    .await
    .unwrap();
    let want: BTreeSet<String> = (0..N).map(|i| format!("p-{i:03}")).collect();
    assert_eq!(listed_placements, want);
    assert_eq!(
        stored_names(
            stored_placements
                .into_iter()
                .map(|(k, p, _)| (k, p.metadata.unwrap().name))
                .collect()
        ),
        want
    );
    let listed_sets: BTreeSet<String> = sets
        .clone()
        .list_cluster_sets(ListClusterSetsRequest {})
        .await
        .unwrap()
        .into_inner()
        .items
        .into_iter()
        .filter_map(|s| s.set.and_then(|s| s.metadata).map(|m| m.name))
        .filter(|n| n.starts_with("s-"))
        .collect();
    let stored_sets: BTreeSet<String> = Bucket::<ManagedClusterSet>::open(
        &js,
        flotilla_hub::store::CLUSTERSETS,
        Default::default(),
    )
    .await
    .unwrap()
    .load_all()
    .await
    .unwrap()
    .into_iter()
    .map(|(k, _, _)| k)
    .filter(|n| n.starts_with("s-"))
    .collect();
    let want: BTreeSet<String> = (0..N).map(|i| format!("s-{i:03}")).collect();
    assert_eq!(listed_sets, want);
    assert_eq!(stored_sets, want);
    agent.stop().await;
    hub.stop().await;
}

/// `flotilla-sim --state-dir`: a restarted simulator comes back as the same agents — same
/// NKeys, same works — instead of fresh agents that must be accepted and fed again.
#[tokio::test]
async fn a_restarted_simulator_with_a_state_dir_keeps_its_agents() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let mut fleet_cfg = flotilla_sim::FleetConfig::new(&nats.url(), 2);
    fleet_cfg.state_dir = Some(state.path().to_path_buf());
    fleet_cfg.pending_poll = Duration::from_millis(200);
    fleet_cfg.ready_delay = Duration::from_millis(100);
    let fleet = flotilla_sim::Fleet::start(&fleet_cfg).await.unwrap();
    for n in ["sim-0001", "sim-0002"] {
        wait_cluster(&mut clusters, n, "registered", |_| true).await;
        accept(&mut clusters, n).await;
        wait_available(&mut clusters, n).await;
    }
    let key = |c: &flotilla_api::v1::ManagedCluster| c.hub.clone().unwrap().agent_public_key;
    let before = key(&get(&mut clusters, "sim-0001").await.unwrap());
    let mut works = works_client(&hub).await;
    works
        .apply_work(config_map_work("sim-0001", "kept"))
        .await
        .unwrap();
    wait_work(&mut works, "sim-0001", "kept", "applied", |w| {
        converged_at(w, 1)
    })
    .await;
    fleet.stop().await;

    let fleet = flotilla_sim::Fleet::start(&fleet_cfg).await.unwrap();
    // Once the restarted agent answers, the spoke still has the work's ConfigMap: the
    // simulated cluster was kept too.
    let found = flotilla_testkit::eventually(SOON, "the restarted agent answers", || {
        let mut works = works.clone();
        async move {
            works
                .proxy(flotilla_api::v1::ProxyGetRequest {
                    cluster: "sim-0001".into(),
                    kind: "configmaps".into(),
                    namespace: "default".into(),
                    name: "kept".into(),
                })
                .await
                .ok()
                .map(|r| r.into_inner())
        }
    })
    .await;
    assert_eq!(found.objects.len(), 1, "{found:?}");
    // It registered again with the same key and is still accepted and Available.
    let c = wait_available(&mut clusters, "sim-0001").await;
    assert_eq!(key(&c), before, "the agent came back with a new NKey");
    assert!(accepted(&c));
    fleet.stop().await;
    hub.stop().await;
}

/// Edge sites attach through NATS leaf nodes (DESIGN §10): agents connected to a leaf server
/// register, renew, get works and answer proxy queries exactly as on the hub's server, and a
/// site whose leaf link drops comes back by itself.
#[tokio::test]
async fn agents_behind_a_leaf_node_register_get_works_and_survive_a_leaf_restart() {
    let hub_nats = NatsServer::start_leaf_hub();
    let mut leaf = hub_nats.start_leaf();
    let hub = start_hub(hub_config(&hub_nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &leaf.url(), "site-1").await;
    let mut works = works_client(&hub).await;
    works
        .apply_work(config_map_work("site-1", "through-leaf"))
        .await
        .unwrap();
    wait_work(&mut works, "site-1", "through-leaf", "applied", |w| {
        converged_at(w, 1)
    })
    .await;

    // The site's server restarts: its agent reconnects through it and keeps its cluster.
    leaf.restart();
    works
        .apply_work(config_map_work_with("site-1", "through-leaf", "v2"))
        .await
        .unwrap();
    wait_work(
        &mut works,
        "site-1",
        "through-leaf",
        "updated after the leaf restart",
        |w| converged_at(w, 2),
    )
    .await;
    wait_available(&mut clusters, "site-1").await;
    agent.stop().await;
    hub.stop().await;
}

/// The NATS client drops messages of a subscription whose owner does not keep up (a slow
/// consumer); a spec is sent once over core NATS, so a dropped one would wait for the next
/// periodic resync (5 minutes by default). An agent told of a drop resyncs at once.
#[tokio::test]
async fn an_agent_whose_client_dropped_messages_resyncs_at_once() {
    use futures::StreamExt;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut config = agent_config("slow-1", &nats.url());
    // No periodic resync during the test: any resync after the flood is the drop's.
    config.resync_interval = Duration::from_secs(3600);
    config.nats.subscription_capacity = 8;
    let metrics = config.metrics.clone();
    let agent = accepted_agent(&mut api, config).await;

    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut resyncs = client
        .subscribe(flotilla_bus::subjects::sync("slow-1"))
        .await
        .unwrap();
    client.flush().await.unwrap();
    // Whatever the agent asked while joining is not what this test waits for.
    tokio::time::sleep(Duration::from_secs(1)).await;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), resyncs.next()).await {}
    // Far more than the agent's 8-message buffer, faster than it reads them.
    for _ in 0..50_000 {
        client
            .publish(
                flotilla_bus::subjects::to_spec("slow-1"),
                bytes::Bytes::from_static(b"noise"),
            )
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    flotilla_testkit::eventually(SOON, "the client's drop counted", || {
        let n = metrics.slow_consumer.get();
        async move { (n > 0).then_some(()) }
    })
    .await;
    let asked = tokio::time::timeout(SOON, resyncs.next()).await;
    assert!(
        matches!(asked, Ok(Some(_))),
        "no resync after the client dropped messages"
    );
    agent.stop().await;
    hub.stop().await;
}

//! Several hubs, one control plane, against real processes: three `flotilla-hub` processes over
//! a three-node clustered JetStream (R3 streams and buckets), simulated agents in the test.
//! Faults: a hub `kill -9`ed during a fanout, a hub paused (`SIGSTOP`) for twice the shard lease
//! TTL, a NATS node killed during applies, a hub cut from every NATS node by a silent partition
//! (its buffered writes delivered when it heals). After each, what must hold — never timings:
//! - every work converges, seen through a surviving hub;
//! - no cluster is ever shown Unknown by a watcher on a surviving hub;
//! - per KV key, the writers' epochs never go back (a late write of an old owner never lands
//!   after a newer owner's), read by an observer that saw every write as it happened;
//! - for every unit, the hubs' acting intervals (from their `/debug/shards` logs) never overlap;
//! - after healing, every unit is held and every hub holds some.

mod common;

use common::hubproc::HubProc;
use common::work::*;
use common::*;
use flotilla_api::v1::ManifestWork;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_testkit::{NatsCluster, NatsClusterOptions};
use futures::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

use common::hubproc::{PATIENCE, SHORT_LEASE_TTL as TTL, watch_for_unavailable};

/// Records, for every message written to the `KV_clusters` and `KV_works` streams, its key and
/// `Flotilla-Epoch` header, as it is written (the buckets keep only the latest).
async fn observe_epochs(urls: &str) -> Arc<Mutex<Vec<(String, String)>>> {
    let client = flotilla_bus::connect::connect(
        &flotilla_bus::connect::NatsConfig::new(urls, "ha-observer"),
        None,
    )
    .await
    .expect("observer connects");
    let js = async_nats::jetstream::new(client);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for stream in ["KV_clusters", "KV_works"] {
        let s = flotilla_testkit::eventually(PATIENCE, stream, || {
            let js = js.clone();
            async move { js.get_stream(stream).await.ok() }
        })
        .await;
        let consumer = s
            .create_consumer(async_nats::jetstream::consumer::push::OrderedConfig {
                deliver_subject: format!("_INBOX.observer.{stream}"),
                ..Default::default()
            })
            .await
            .expect("ordered consumer");
        let out = seen.clone();
        tokio::spawn(async move {
            let Ok(mut messages) = consumer.messages().await else {
                return;
            };
            while let Some(Ok(m)) = messages.next().await {
                let epoch = m
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Flotilla-Epoch"))
                    .map(|v| v.as_str().to_string());
                if let Some(e) = epoch {
                    out.lock().unwrap().push((m.subject.to_string(), e));
                }
            }
        });
    }
    seen
}

/// Per key, the epochs in write order never go back.
fn assert_epochs_never_go_back(seen: &[(String, String)]) {
    let mut last: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (key, header) in seen {
        let (unit, epoch) = header
            .split_once('.')
            .and_then(|(u, e)| Some((u.parse::<u64>().ok()?, e.parse::<u64>().ok()?)))
            .unwrap_or_else(|| panic!("bad epoch header {header:?} on {key}"));
        if let Some((u0, e0)) = last.get(key.as_str()) {
            assert_eq!(*u0, unit, "{key} written under two units");
            assert!(
                epoch >= *e0,
                "{key}: a write of epoch {epoch} landed after one of epoch {e0}"
            );
        }
        last.insert(key, (unit, epoch));
    }
}

/// An acting interval: `(unit, epoch, start ms, end ms)`.
type Interval = (u64, u64, u64, u64);

/// One hub's acting intervals; `end_if_open` closes the
/// ones still open (a killed hub stopped at its death).
fn intervals(log: &Value, end_if_open: u64) -> Vec<Interval> {
    let mut open: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut out = Vec::new();
    for e in log["events"].as_array().into_iter().flatten() {
        let (unit, epoch, at) = (
            e["unit"].as_u64().unwrap(),
            e["epoch"].as_u64().unwrap(),
            e["at_ms"].as_u64().unwrap(),
        );
        match e["event"].as_str() {
            Some("acquired") => {
                open.insert((unit, epoch), at);
            }
            _ => {
                if let Some(start) = open.remove(&(unit, epoch)) {
                    out.push((unit, epoch, start, at));
                }
            }
        }
    }
    out.extend(
        open.into_iter()
            .map(|((unit, epoch), start)| (unit, epoch, start, end_if_open)),
    );
    out
}

/// No two hubs ever acted for one unit at once.
fn assert_no_overlap(all: &[(String, Vec<Interval>)]) {
    let mut by_unit: BTreeMap<u64, Vec<(u64, u64, u64, &str)>> = BTreeMap::new();
    for (hub, ivs) in all {
        for &(unit, epoch, start, end) in ivs {
            by_unit
                .entry(unit)
                .or_default()
                .push((epoch, start, end, hub.as_str()));
        }
    }
    for (unit, mut ivs) in by_unit {
        ivs.sort();
        for pair in ivs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(
                a.2 <= b.1,
                "unit {unit}: {} (epoch {}) acted until {} but {} (epoch {}) from {}",
                a.3,
                a.0,
                a.2,
                b.3,
                b.0,
                b.1
            );
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Applies `work` through `hub`, retrying while shards change hands.
async fn apply(hub: &HubProc, w: ManifestWork) {
    let what = format!(
        "applying {} through hub {}",
        w.metadata.as_ref().unwrap().name,
        hub.id
    );
    flotilla_testkit::eventually(PATIENCE, &what, || {
        let w = w.clone();
        async move {
            let mut api = hub.works().await;
            api.apply_work(w).await.ok().map(|_| ())
        }
    })
    .await;
}

/// Waits until every `(cluster, work)` converged, seen through `hub`.
async fn converged(hub: &HubProc, works: &[(String, String)]) {
    for (cluster, name) in works {
        flotilla_testkit::eventually(PATIENCE, &format!("{cluster}/{name} converged"), || async {
            let mut api = hub.works().await;
            let w = api
                .get_work(flotilla_api::v1::GetWorkRequest {
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
}

/// Waits until every unit is held by one of `hubs` and each holds some.
async fn balanced(hubs: &[&HubProc]) {
    flotilla_testkit::eventually(
        PATIENCE,
        "every unit held, every hub holding some",
        || async {
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
        },
    )
    .await;
}

/// The controllers run on one hub; a set applied through the other is forwarded there, and
/// both list it. A watch of sets through the other hub is refused, naming why.
///
/// The hubs may still be moving units between them (`balanced` asks only that each holds
/// some), so the controllers may change hands during a check: a check whose holder was not the
/// same before and after it is made again.
async fn controllers_answer_through_any_hub(a: &HubProc, b: &HubProc) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let before = controllers_holder(a, b).await;
        let checked = check_controllers_through(before.0, before.1).await;
        let after = controllers_holder(a, b).await;
        if before.0.id == after.0.id {
            if let Err(e) = checked {
                panic!("controllers held by hub {} throughout: {e}", before.0.id);
            }
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the controllers kept changing hands for {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The hub holding the controllers' unit and the other one.
async fn controllers_holder<'h>(a: &'h HubProc, b: &'h HubProc) -> (&'h HubProc, &'h HubProc) {
    if a.held().await.unwrap().contains(&32) {
        (a, b)
    } else {
        (b, a)
    }
}

/// Applies a set through `other` and reads it through both, then watches placements through
/// `other`: what went wrong, if anything.
async fn check_controllers_through(holder: &HubProc, other: &HubProc) -> Result<(), String> {
    use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
    let set = flotilla_api::v1::ManagedClusterSet {
        metadata: Some(flotilla_api::v1::ObjectMeta {
            name: "forwarded".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut through_other = ClusterSetServiceClient::new(other.channel().await.unwrap());
    through_other
        .apply_cluster_set(set)
        .await
        .map_err(|e| format!("a set applied through the hub without the controllers: {e}"))?;
    for hub in [holder, other] {
        let mut api = ClusterSetServiceClient::new(hub.channel().await.unwrap());
        let listed = api
            .list_cluster_sets(flotilla_api::v1::ListClusterSetsRequest {})
            .await
            .map_err(|e| format!("listing sets through hub {}: {e}", hub.id))?
            .into_inner();
        let lists = listed.items.iter().any(|v| {
            v.set
                .as_ref()
                .and_then(|s| s.metadata.as_ref())
                .is_some_and(|m| m.name == "forwarded")
        });
        if !lists {
            return Err(format!("hub {} does not list the set", hub.id));
        }
    }
    let mut placements = flotilla_api::v1::placement_service_client::PlacementServiceClient::new(
        other.channel().await.unwrap(),
    );
    match placements
        .watch_placements(flotilla_api::v1::WatchPlacementsRequest::default())
        .await
    {
        Ok(_) => Err(format!(
            "a watch of placements through hub {} was served",
            other.id
        )),
        Err(refused)
            if refused.code() == tonic::Code::Unavailable
                && refused.message().contains("holding the controllers") =>
        {
            Ok(())
        }
        Err(refused) => Err(format!("the watch was refused otherwise: {refused:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hubs_survive_a_killed_hub_during_a_fanout_and_a_paused_hub() {
    let nats = NatsCluster::start(
        flotilla_testkit::nats_server_binary(),
        NatsClusterOptions::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    let mut a = HubProc::start_short_leases(&urls, dir.path(), "a");
    let b = HubProc::start_short_leases(&urls, dir.path(), "b");
    let c = HubProc::start_short_leases(&urls, dir.path(), "c");
    let names: Vec<String> = (1..=6).map(|i| format!("edge-{i}")).collect();
    let _agents: Vec<_> = names
        .iter()
        .map(|n| start_agent(agent_config(n, &urls)))
        .collect();
    let api_c = c.clusters().await;
    for n in &names {
        flotilla_testkit::eventually(PATIENCE, &format!("{n} Available through c"), || {
            let mut api = api_c.clone();
            async move { (available(&get(&mut api, n).await?)? == "True").then_some(()) }
        })
        .await;
    }
    balanced(&[&a, &b, &c]).await;
    let epochs = observe_epochs(&urls).await;
    let unknown = watch_for_unavailable(api_c.clone());

    // A fanout through a; a dies in the middle of it. Whatever a did not confirm is applied
    // again through b.
    let mut works = Vec::new();
    let mut fanout = tokio::task::JoinSet::new();
    for (i, n) in names.iter().enumerate() {
        for k in 0..2 {
            let name = format!("fan-{i}-{k}");
            works.push((n.clone(), name.clone()));
            let w = config_map_work(n, &name);
            let grpc = a.grpc.clone();
            fanout.spawn(async move {
                let ch = Channel::from_shared(grpc).ok()?.connect().await.ok()?;
                WorkServiceClient::new(ch)
                    .apply_work(w.clone())
                    .await
                    .ok()?;
                Some(())
            });
        }
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let a_log = a.shards().await.expect("a's shard log");
    let killed_at = now_ms();
    a.proc.kill();
    while fanout.join_next().await.is_some() {}
    for (cluster, name) in &works {
        apply(&b, config_map_work(cluster, name)).await;
    }
    converged(&b, &works).await;
    balanced(&[&b, &c]).await;

    // b paused for twice the lease TTL; works applied through c meanwhile (c takes b's
    // shards once their leases expire).
    b.signal("-STOP");
    let mut more = Vec::new();
    for n in &names {
        let name = format!("paused-{n}");
        more.push((n.clone(), name.clone()));
        apply(&c, config_map_work(n, &name)).await;
    }
    tokio::time::sleep(TTL * 2).await;
    b.signal("-CONT");
    works.extend(more);
    converged(&c, &works).await;
    converged(&b, &works).await;
    balanced(&[&b, &c]).await;

    let seen = unknown.lock().unwrap().clone();
    assert!(seen.is_empty(), "a watcher on c saw: {seen:?}");
    assert_epochs_never_go_back(&epochs.lock().unwrap());
    let now = now_ms();
    assert_no_overlap(&[
        ("a".into(), intervals(&a_log, killed_at)),
        ("b".into(), intervals(&b.shards().await.unwrap(), now)),
        ("c".into(), intervals(&c.shards().await.unwrap(), now)),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hubs_survive_the_loss_of_a_nats_node_during_applies() {
    let mut nats = NatsCluster::start(
        flotilla_testkit::nats_server_binary(),
        NatsClusterOptions::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    let a = HubProc::start_short_leases(&urls, dir.path(), "a");
    let b = HubProc::start_short_leases(&urls, dir.path(), "b");
    let names: Vec<String> = (1..=4).map(|i| format!("node-{i}")).collect();
    let _agents: Vec<_> = names
        .iter()
        .map(|n| start_agent(agent_config(n, &urls)))
        .collect();
    let api_b = b.clusters().await;
    for n in &names {
        flotilla_testkit::eventually(PATIENCE, &format!("{n} Available through b"), || {
            let mut api = api_b.clone();
            async move { (available(&get(&mut api, n).await?)? == "True").then_some(()) }
        })
        .await;
    }
    balanced(&[&a, &b]).await;
    controllers_answer_through_any_hub(&a, &b).await;
    let epochs = observe_epochs(&urls).await;
    let unknown = watch_for_unavailable(api_b.clone());

    // The node leading the works bucket dies while works are being applied.
    let leader = nats.leader_of("KV_works").unwrap_or(0);
    let mut works = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if i == 1 {
            nats.stop(leader);
        }
        for k in 0..3 {
            let name = format!("w-{i}-{k}");
            works.push((n.clone(), name.clone()));
            let through = if k % 2 == 0 { &a } else { &b };
            apply(through, config_map_work(n, &name)).await;
        }
    }
    converged(&a, &works).await;
    converged(&b, &works).await;
    nats.start_again(leader);
    balanced(&[&a, &b]).await;

    let seen = unknown.lock().unwrap().clone();
    assert!(seen.is_empty(), "a watcher on b saw: {seen:?}");
    assert_epochs_never_go_back(&epochs.lock().unwrap());
    let now = now_ms();
    assert_no_overlap(&[
        ("a".into(), intervals(&a.shards().await.unwrap(), now)),
        ("b".into(), intervals(&b.shards().await.unwrap(), now)),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hubs_survive_a_hub_cut_from_nats() {
    let nats = NatsCluster::start(
        flotilla_testkit::nats_server_binary(),
        NatsClusterOptions::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    // b reaches every NATS node through a proxy: one silent partition cuts it off entirely.
    let mut proxies = Vec::new();
    for i in 0..nats.len() {
        proxies.push(flotilla_testkit::LinkProxy::start(nats.node(i).port()).await);
    }
    let b_urls = proxies
        .iter()
        .map(flotilla_testkit::LinkProxy::url)
        .collect::<Vec<_>>()
        .join(",");
    let a = HubProc::start_short_leases(&urls, dir.path(), "a");
    let b = HubProc::start_short_leases(&b_urls, dir.path(), "b");
    let names: Vec<String> = (1..=4).map(|i| format!("cut-{i}")).collect();
    let _agents: Vec<_> = names
        .iter()
        .map(|n| start_agent(agent_config(n, &urls)))
        .collect();
    let api_a = a.clusters().await;
    for n in &names {
        flotilla_testkit::eventually(PATIENCE, &format!("{n} Available through a"), || {
            let mut api = api_a.clone();
            async move { (available(&get(&mut api, n).await?)? == "True").then_some(()) }
        })
        .await;
    }
    balanced(&[&a, &b]).await;
    let epochs = observe_epochs(&urls).await;
    let unknown = watch_for_unavailable(api_a.clone());

    // b is partitioned from NATS for twice the lease TTL: it must stop acting by its own
    // deadline, and a takes its shards. Everything b had buffered is delivered when the
    // partition heals — as late writes of an old owner, which the store must refuse.
    for p in &proxies {
        p.blackhole();
    }
    let mut works = Vec::new();
    for n in &names {
        let name = format!("during-{n}");
        works.push((n.clone(), name.clone()));
        apply(&a, config_map_work(n, &name)).await;
    }
    tokio::time::sleep(TTL * 2).await;
    for p in &proxies {
        p.restore();
    }
    for n in &names {
        let name = format!("after-{n}");
        works.push((n.clone(), name.clone()));
        apply(&b, config_map_work(n, &name)).await;
    }
    converged(&a, &works).await;
    converged(&b, &works).await;
    balanced(&[&a, &b]).await;

    let seen = unknown.lock().unwrap().clone();
    assert!(seen.is_empty(), "a watcher on a saw: {seen:?}");
    assert_epochs_never_go_back(&epochs.lock().unwrap());
    let now = now_ms();
    assert_no_overlap(&[
        ("a".into(), intervals(&a.shards().await.unwrap(), now)),
        ("b".into(), intervals(&b.shards().await.unwrap(), now)),
    ]);
}

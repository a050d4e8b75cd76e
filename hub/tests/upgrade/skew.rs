//! A hub more than one minor line below the newest live hub waits (issue 49 §6.3,
//! `ha::skew::waits`), with real hub processes over a three-node clustered JetStream. The newer
//! hub is a heartbeat the test writes into `hubmembers` every second, as a hub of that release
//! would (this build has one version):
//! - hub a, holding every unit, keeps them all while it waits (it hands over only when it
//!   leaves: the heartbeat's hub never takes a lease, so a hand-over would leave units unheld);
//! - hub b, started meanwhile, takes none, says `waiting` on `/debug/shards` and still serves
//!   the API;
//! - once the newer heartbeat stops, b takes its share and a and b hold every unit between them.

use super::holding_all;
use crate::common::hubproc::{HubProc, PATIENCE, SHORT_LEASE_TTL};
use flotilla_api::v1::ListClustersRequest;
use flotilla_api::version::{VERSION, Version};
use flotilla_testkit::{NatsCluster, NatsClusterOptions};
use std::time::Duration;

/// Units of the hubs: 32 shards and the controllers.
const UNITS: usize = 33;

/// A version two minor lines above this build's: this build's hubs wait beside it.
fn newer() -> String {
    let v = Version::parse(VERSION).expect("this build's version parses");
    format!("{}.{}.0", v.major, v.minor + 2)
}

/// `hub`'s `/debug/shards` `waiting` (the newest live version it waits for), `None` when it
/// does not wait or did not answer.
async fn waiting(hub: &HubProc) -> Option<String> {
    hub.shards().await?["waiting"].as_str().map(str::to_string)
}

/// Writes the newer hub's heartbeat every second until the task is aborted.
fn beat_newer(urls: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let servers: Vec<async_nats::ServerAddr> = urls
            .split(',')
            .map(|u| u.parse().expect("a NATS URL"))
            .collect();
        let client = async_nats::connect(servers).await.expect("NATS");
        let js = async_nats::jetstream::new(client);
        let info = serde_json::json!({
            "hub": "newer", "incarnation": "newer-1", "grpc": "", "metrics": "",
            "draining": false, "version": newer(),
        })
        .to_string();
        loop {
            // The bucket exists once a hub started; a put lost to an election is made again.
            if let Ok(members) = js
                .get_key_value(flotilla_hub_core::ha::lease::MEMBERS)
                .await
            {
                let _ = members.put("newer", info.clone().into()).await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_two_minor_lines_below_a_live_hub_takes_no_units_and_keeps_its_own() {
    let nats = NatsCluster::start(
        flotilla_testkit::nats_server_binary(),
        NatsClusterOptions::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    let a = HubProc::start_short_leases(&urls, dir.path(), "a");
    holding_all(&[&a]).await;

    let beat = beat_newer(urls.clone());
    let want = newer();
    flotilla_testkit::eventually(PATIENCE, "hub a waiting for the newer hub", || async {
        (waiting(&a).await.as_deref() == Some(want.as_str())).then_some(())
    })
    .await;
    let b = HubProc::start_short_leases(&urls, dir.path(), "b");
    flotilla_testkit::eventually(PATIENCE, "hub b waiting for the newer hub", || async {
        (waiting(&b).await.as_deref() == Some(want.as_str())).then_some(())
    })
    .await;
    // Two lease TTLs: long past a balancing round, a takeover and a TTL's expiry.
    let until = tokio::time::Instant::now() + SHORT_LEASE_TTL * 2;
    while tokio::time::Instant::now() < until {
        let (held_a, held_b) = (a.held().await, b.held().await);
        assert_eq!(
            held_a.as_ref().map(Vec::len),
            Some(UNITS),
            "hub a, waiting, keeps every unit it held: {held_a:?}"
        );
        assert_eq!(
            held_b,
            Some(Vec::new()),
            "hub b, waiting, takes no unit: {}",
            b.proc.tail(25, &["async_nats"])
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    b.clusters()
        .await
        .list_clusters(ListClustersRequest::default())
        .await
        .expect("a waiting hub serves the API");

    // The newer hub goes (its heartbeat ages out): neither waits, b takes its share.
    beat.abort();
    flotilla_testkit::eventually(PATIENCE, "neither hub waiting", || async {
        (a.shards().await?["waiting"].is_null() && b.shards().await?["waiting"].is_null())
            .then_some(())
    })
    .await;
    holding_all(&[&a, &b]).await;
    for hub in [&a, &b] {
        super::never_lost(hub).await;
    }
}

//! `flotilla-sim --share-connections`: several simulated agents on one NATS connection behave
//! as agents with their own — they register, renew, take works — while the server holds one
//! connection per group; an agent whose link goes down leaves the others on its connection
//! alone.

use crate::common;

use common::work::{converged_at, hello, wait_work, works_client};
use common::{SOON, clusters_client, hub_config, start_hub, wait_available};
use flotilla_testkit::{NatsOptions, NatsServer, free_port};
use std::io::{Read, Write};
use std::time::Duration;

/// `connections` from the server's `/varz`.
fn connections(monitor: u16) -> u64 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", monitor)).expect("monitor port");
    s.write_all(b"GET /varz HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").expect("HTTP body").1;
    let v: serde_json::Value = serde_json::from_str(body).expect("varz is JSON");
    v["connections"].as_u64().expect("connections")
}

async fn wait_connections(monitor: u16, want: u64) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let now = connections(monitor);
        if now == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{now} connections, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn six_agents_on_two_connections_register_take_works_and_drop_links_alone() {
    let monitor = free_port();
    let nats = NatsServer::start_with(NatsOptions {
        jetstream: true,
        extra: format!("http: 127.0.0.1:{monitor}\n"),
        ..NatsOptions::default()
    });
    let mut cfg = hub_config(&nats.url());
    cfg.cluster.auto_accept.enabled = true;
    let hub = start_hub(cfg).await;
    let hub_connections = connections(monitor);

    let mut fleet_cfg = flotilla_sim::FleetConfig::new(&nats.url(), 6);
    fleet_cfg.pending_poll = Duration::from_millis(300);
    fleet_cfg.status_interval = Duration::from_millis(300);
    fleet_cfg.share_connections = 3;
    let fleet = flotilla_sim::Fleet::start(&fleet_cfg)
        .await
        .expect("fleet started");
    let mut clusters = clusters_client(&hub).await;
    for n in 0..6 {
        wait_available(&mut clusters, fleet.name(n)).await;
    }
    wait_connections(monitor, hub_connections + 2).await;

    // sim-0001's link goes down; sim-0002 shares its connection and still takes a work.
    fleet.link_down(0).await;
    let mut works = works_client(&hub).await;
    works.apply_work(hello("sim-0002", 2)).await.expect("apply");
    wait_work(
        &mut works,
        "sim-0002",
        "hello-work-demo",
        "converged",
        |w| converged_at(w, 1),
    )
    .await;
    assert_eq!(
        connections(monitor),
        hub_connections + 2,
        "an agent's link going down closes no shared connection"
    );

    // Back up, sim-0001 takes a work too.
    fleet.link_up(0).await;
    works.apply_work(hello("sim-0001", 1)).await.expect("apply");
    wait_work(
        &mut works,
        "sim-0001",
        "hello-work-demo",
        "converged",
        |w| converged_at(w, 1),
    )
    .await;
    fleet.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn sharing_connections_is_refused_in_secure_mode() {
    let mut cfg = flotilla_sim::FleetConfig::new("nats://127.0.0.1:1", 2);
    cfg.share_connections = 2;
    cfg.bootstrap_creds = Some("bootstrap.creds".into());
    let err = flotilla_sim::Fleet::start(&cfg)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("--share-connections") && err.contains("secure mode"),
        "{err}"
    );
}

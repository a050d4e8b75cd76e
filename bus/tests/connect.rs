//! NATS URL lists against real servers: a dead entry is skipped, a lost node is failed over,
//! and a silent partition is noticed by the configured ping interval.

use flotilla_bus::connect::{NatsConfig, connect};
use flotilla_testkit::{
    LinkProxy, NatsCluster, NatsClusterOptions, NatsServer, eventually, free_port,
    nats_server_binaries,
};
use futures::StreamExt;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn config(urls: String) -> NatsConfig {
    let mut cfg = NatsConfig::new(urls, "connect-test");
    cfg.max_reconnect_delay = Duration::from_millis(500);
    cfg
}

/// Waits until `client` is connected to the server on `port` and a message goes round trip.
async fn connected_to(client: &async_nats::Client, port: u16, what: &str) {
    eventually(T, what, || async {
        if client.server_info().port != port
            || client.connection_state() != async_nats::connection::State::Connected
        {
            return None;
        }
        let subject = client.new_inbox();
        let mut sub = client.subscribe(subject.clone()).await.ok()?;
        client.publish(subject, "ping".into()).await.ok()?;
        client.flush().await.ok()?;
        tokio::time::timeout(Duration::from_secs(1), sub.next())
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await
}

#[tokio::test]
async fn a_dead_url_in_the_list_is_skipped() {
    let live = NatsServer::start();
    let dead = free_port();
    let client = connect(
        &config(format!("nats://127.0.0.1:{dead}, {}", live.url())),
        None,
    )
    .await
    .expect("a list with a dead entry is accepted");
    connected_to(&client, live.port(), "connected to the live server").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fails_over_when_its_cluster_node_stops() {
    for (label, binary) in nats_server_binaries() {
        let mut cluster = NatsCluster::start(binary, NatsClusterOptions::default());
        let client = connect(&config(cluster.urls()), None).await.unwrap();
        let first = eventually(T, "connected to some node", || async {
            client.flush().await.ok()?;
            let port = client.server_info().port;
            (0..cluster.len()).find(|&i| cluster.node(i).port() == port)
        })
        .await;
        let mut sub = client.subscribe("failover.>").await.unwrap();
        cluster.stop(first);
        let second = eventually(T, "connected to another node", || async {
            client.flush().await.ok()?;
            let port = client.server_info().port;
            (0..cluster.len()).find(|&i| i != first && cluster.node(i).port() == port)
        })
        .await;
        connected_to(&client, cluster.node(second).port(), label).await;
        // Subscriptions are carried over to the new node.
        client.publish("failover.x", "after".into()).await.unwrap();
        let msg = tokio::time::timeout(T, sub.next())
            .await
            .expect(label)
            .unwrap();
        assert_eq!(msg.payload.as_ref(), b"after", "{label}");
    }
}

#[tokio::test]
async fn a_silent_partition_is_noticed_by_the_ping_interval() {
    let behind_proxy = NatsServer::start();
    let proxy = LinkProxy::start(behind_proxy.port()).await;
    let mut other = NatsServer::start();
    other.stop();
    let mut cfg = config(format!("{},{}", proxy.url(), other.url()));
    cfg.ping_interval = Duration::from_millis(200);
    let client = connect(&cfg, None).await.unwrap();
    connected_to(&client, behind_proxy.port(), "connected through the proxy").await;

    other.start_again();
    proxy.blackhole();
    // With the default 60 s ping interval this would take minutes: nothing is refused.
    connected_to(
        &client,
        other.port(),
        "failed over after the silent partition",
    )
    .await;
}

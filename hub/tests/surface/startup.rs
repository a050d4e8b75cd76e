//! How the hub starts against a NATS server that cannot hold what it asks for.

use crate::common;

use common::*;
use flotilla_hub::HubError;
use flotilla_testkit::{NatsOptions, NatsServer};
use std::time::{Duration, Instant};

/// A JetStream server with 32 MiB of storage.
fn small_server() -> NatsServer {
    NatsServer::start_with(NatsOptions {
        jetstream: true,
        max_file_store: Some(32 << 20),
        ..NatsOptions::default()
    })
}

#[tokio::test]
async fn a_server_without_room_for_the_status_stream_is_refused_at_once_with_what_to_change() {
    let nats = small_server();
    let mut config = hub_config(&nats.url());
    config.limits.stream.max_bytes = 1 << 30;
    let started = Instant::now();
    let err = match tokio::time::timeout(SOON, flotilla_hub::start(config)).await {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => panic!("a hub started with a 1 GiB status stream on 32 MiB of storage"),
        Err(_) => panic!("the hub waited for storage that will not come"),
    };
    // Not the four minutes a NATS that is still starting is waited for.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(&err, HubError::NoStorage { stream, max_bytes, .. }
            if stream == "FLOTILLA_STATUS" && *max_bytes == 1 << 30),
        "{err:?}"
    );
    let message = err.to_string();
    for hint in ["--status-stream-max-bytes", "max_file_store", "1073741824"] {
        assert!(message.contains(hint), "{hint} missing from: {message}");
    }

    // The same server takes a hub that asks for less, and keeps nothing from the refusal.
    let mut config = hub_config(&nats.url());
    config.limits.stream.max_bytes = 16 << 20;
    let hub = start_hub(config).await;
    hub.stop().await;
}

#[tokio::test]
async fn a_hub_waits_for_jetstream_saying_so_and_gives_up_after_its_store_wait() {
    // A server without JetStream: as a cluster without a quorum, it never answers the store.
    let nats = NatsServer::start_with(NatsOptions {
        jetstream: false,
        ..NatsOptions::default()
    });
    let port = flotilla_testkit::free_port();
    let mut config = hub_config(&nats.url());
    config.metrics_listen = format!("127.0.0.1:{port}").parse().unwrap();
    config.store.wait = Some(Duration::from_secs(6));
    let started = Instant::now();
    let start = tokio::spawn(flotilla_hub::start(config));

    // Meanwhile it is alive, says what it waits for, and is not ready.
    let addr = format!("127.0.0.1:{port}");
    let said = flotilla_testkit::eventually(SOON, "/healthz saying what the hub waits for", || {
        let addr = addr.clone();
        async move {
            let (status, body) = flotilla_testkit::http_get(&addr, "/healthz").await.ok()?;
            assert_eq!(status, 200, "{body}");
            body.contains("waiting for the store").then_some(body)
        }
    })
    .await;
    assert!(
        said.starts_with("starting: waiting for the store ("),
        "{said}"
    );
    let (status, _) = flotilla_testkit::http_get(&addr, "/readyz").await.unwrap();
    assert_eq!(status, 503);

    // It gives up once it has waited --store-wait-seconds, not before.
    let err = match tokio::time::timeout(SOON, start).await {
        Ok(Ok(Err(e))) => e,
        Ok(Ok(Ok(_))) => panic!("a hub started without JetStream"),
        Ok(Err(e)) => panic!("the start panicked: {e}"),
        Err(_) => panic!("the hub waited past its --store-wait-seconds"),
    };
    assert!(started.elapsed() >= Duration::from_secs(6), "{err}");
}

//! How the hub starts against a NATS server that cannot hold what it asks for.

mod common;

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

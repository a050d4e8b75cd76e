use super::*;
use flotilla_bus::jetstream::{StatusLimits, StreamOptions, ensure_kv, ensure_status_stream};
use flotilla_testkit::NatsServer;

const SOON: Duration = Duration::from_secs(10);

/// A server with the status stream (limited to `max_bytes`) holding one status, and a bucket.
async fn store(server: &NatsServer, max_bytes: i64) -> jetstream::Context {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let limits = StatusLimits {
        max_bytes,
        ..StatusLimits::default()
    };
    ensure_status_stream(&js, StreamOptions::default(), limits)
        .await
        .unwrap();
    ensure_kv(&js, "works", 1, StreamOptions::default())
        .await
        .unwrap();
    js.publish("flotilla.status.c1.work.w1", vec![7u8; 1000].into())
        .await
        .unwrap()
        .await
        .unwrap();
    js
}

fn fill_of<'a>(fills: &'a [Fill], stream: &str) -> &'a Fill {
    fills
        .iter()
        .find(|f| f.stream == stream)
        .unwrap_or_else(|| panic!("no {stream} in {fills:?}"))
}

#[tokio::test]
async fn every_stream_is_listed_with_its_bytes_limit_and_messages() {
    let server = NatsServer::start();
    let js = store(&server, 1 << 20).await;
    let fills = tokio::time::timeout(SOON, list(&js))
        .await
        .unwrap()
        .unwrap();
    let status = fill_of(&fills, flotilla_bus::jetstream::STATUS_STREAM);
    assert_eq!(status.messages, 1);
    assert!(status.bytes > 1000, "{status:?}");
    assert_eq!(status.max_bytes, 1 << 20);
    // A bucket has no byte limit: 0, not JetStream's -1.
    let works = fill_of(&fills, "KV_works");
    assert_eq!((works.max_bytes, works.messages), (0, 0));

    let metrics = FillMetrics::default();
    metrics.set(fills);
    let mut registry = prometheus_client::registry::Registry::with_prefix("flotilla_hub");
    registry.register_collector(Box::new(metrics));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("flotilla_hub_stream_max_bytes{stream=\"FLOTILLA_STATUS\"} 1048576"),
        "{text}"
    );
    assert!(
        text.contains("flotilla_hub_stream_messages{stream=\"FLOTILLA_STATUS\"} 1"),
        "{text}"
    );
}

/// Waits until the poller's metrics satisfy `ok`.
async fn until(metrics: &FillMetrics, ok: impl Fn(&[Fill]) -> bool) {
    tokio::time::timeout(SOON, async {
        while !ok(&metrics.get()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("fills stayed {:?}", metrics.get()));
}

#[tokio::test]
async fn only_the_holder_lists_the_streams_and_a_hub_that_lets_go_exports_none() {
    let server = NatsServer::start();
    let js = store(&server, -1).await;
    let metrics = FillMetrics::default();
    let (hold, holder) = watch::channel(false);
    let (stop, shutdown) = watch::channel(false);
    let task = spawn(
        js.clone(),
        holder,
        |h: &bool| *h,
        metrics.clone(),
        Duration::from_millis(100),
        shutdown,
    );
    // Not holding: nothing listed (a listing would have landed within a few periods).
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(metrics.get().is_empty(), "{:?}", metrics.get());

    hold.send_replace(true);
    until(&metrics, |f| {
        f.iter().any(|f| f.stream == "FLOTILLA_STATUS")
    })
    .await;
    assert_eq!(fill_of(&metrics.get(), "FLOTILLA_STATUS").max_bytes, 0);
    // Polled again every period: a second status shows up.
    js.publish("flotilla.status.c2.work.w1", vec![1u8; 10].into())
        .await
        .unwrap()
        .await
        .unwrap();
    until(&metrics, |f| {
        f.iter()
            .any(|f| f.stream == "FLOTILLA_STATUS" && f.messages == 2)
    })
    .await;

    hold.send_replace(false);
    until(&metrics, <[Fill]>::is_empty).await;
    stop.send_replace(true);
    tokio::time::timeout(SOON, task).await.unwrap().unwrap();
}

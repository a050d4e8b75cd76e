//! JetStream helpers against a real nats-server (2.9.10 from Debian in CI).

use async_nats::jetstream;
use bytes::Bytes;
use flotilla_bus::jetstream::{
    STATUS_STREAM, StreamOptions, ensure_expiring_kv, ensure_kv, ensure_status_stream, load_all,
};
use flotilla_bus::{connect, subjects};
use flotilla_testkit::{NatsCluster, NatsClusterOptions, NatsServer, eventually};
use futures::StreamExt;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

async fn js(server: &NatsServer) -> jetstream::Context {
    let client = connect::connect(&connect::NatsConfig::new(server.url(), "test"), None)
        .await
        .unwrap();
    jetstream::new(client)
}

#[tokio::test]
async fn kv_buckets_work_on_this_server_with_cas_and_bulk_load() {
    let server = NatsServer::start();
    let js = js(&server).await;
    let kv = tokio::time::timeout(T, ensure_kv(&js, "clusters", 1, StreamOptions::default()))
        .await
        .unwrap()
        .unwrap();
    // Opening again is idempotent.
    ensure_kv(&js, "clusters", 1, StreamOptions::default())
        .await
        .unwrap();

    assert!(load_all(&kv).await.unwrap().is_empty());
    let r1 = kv.create("c1", Bytes::from_static(b"one")).await.unwrap();
    assert!(
        kv.create("c1", Bytes::from_static(b"dup")).await.is_err(),
        "create must not overwrite"
    );
    let r2 = kv
        .update("c1", Bytes::from_static(b"two"), r1)
        .await
        .unwrap();
    assert!(r2 > r1);
    assert!(
        kv.update("c1", Bytes::from_static(b"stale"), r1)
            .await
            .is_err(),
        "a stale revision must be refused"
    );
    for i in 0..50 {
        kv.put(format!("k{i}"), Bytes::from(format!("v{i}")))
            .await
            .unwrap();
    }
    kv.delete("k7").await.unwrap();
    let items = load_all(&kv).await.unwrap();
    assert_eq!(items.len(), 50, "c1 + 49 live keys");
    let c1 = items.iter().find(|i| i.key == "c1").unwrap();
    assert_eq!(c1.value.as_ref(), b"two");
    assert_eq!(c1.revision, r2);
    assert!(items.iter().all(|i| i.key != "k7"));
    let mut keys: Vec<String> = kv.keys().await.unwrap().map(|k| k.unwrap()).collect().await;
    keys.sort();
    assert_eq!(keys.len(), 50);
}

#[tokio::test]
async fn status_stream_keeps_only_the_latest_message_per_subject() {
    let server = NatsServer::start();
    let js = js(&server).await;
    let mut stream = ensure_status_stream(&js, StreamOptions::default(), Default::default())
        .await
        .unwrap();
    let subject = subjects::status("c1", subjects::KIND_LEASE, None);
    for i in 0..5 {
        js.publish(subject.clone(), Bytes::from(format!("{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    js.publish(
        subjects::status("c2", subjects::KIND_LEASE, None),
        Bytes::from_static(b"x"),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 2);
    let last = stream
        .get_last_raw_message_by_subject(&subject)
        .await
        .unwrap();
    assert_eq!(last.payload.as_ref(), b"4");
}

#[tokio::test]
async fn jetstream_state_survives_a_server_restart() {
    let mut server = NatsServer::start();
    {
        let js = js(&server).await;
        let kv = ensure_kv(&js, "sets", 1, StreamOptions::default())
            .await
            .unwrap();
        kv.put("default", Bytes::from_static(b"d")).await.unwrap();
    }
    server.restart();
    let js = js(&server).await;
    let kv = tokio::time::timeout(T, async {
        loop {
            match ensure_kv(&js, "sets", 1, StreamOptions::default()).await {
                Ok(kv) => break kv,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .unwrap();
    let items = load_all(&kv).await.unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].key, "default");
}

fn replicated(replicas: usize) -> StreamOptions {
    StreamOptions {
        replicas,
        ..StreamOptions::default()
    }
}

/// Whether every replica of `stream` is current (the leader plus `replicas - 1` followers).
async fn all_current(js: &jetstream::Context, stream: &str, replicas: usize) -> Option<()> {
    let mut s = js.get_stream(stream).await.ok()?;
    let info = s.info().await.ok()?;
    let cluster = info.cluster.as_ref()?;
    let followers = &cluster.replicas;
    (info.config.num_replicas == replicas
        && cluster.leader.is_some()
        && followers.len() == replicas - 1
        && followers.iter().all(|r| r.current))
    .then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_3_on_the_debian_server() {
    let (label, binary) = flotilla_testkit::nats_server_binaries().remove(0);
    replicas_3_creates_r3_streams_and_upgrades_r1_buckets_keeping_their_data(label, binary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_3_on_the_current_server() {
    let (label, binary) = flotilla_testkit::nats_server_binaries().remove(1);
    replicas_3_creates_r3_streams_and_upgrades_r1_buckets_keeping_their_data(label, binary).await;
}

async fn replicas_3_creates_r3_streams_and_upgrades_r1_buckets_keeping_their_data(
    label: &str,
    binary: std::path::PathBuf,
) {
    const LONG: Duration = Duration::from_secs(30);
    {
        let mut cluster = NatsCluster::start(binary, NatsClusterOptions::default());
        let client = connect::connect(&connect::NatsConfig::new(cluster.urls(), "test"), None)
            .await
            .unwrap();
        let js = jetstream::new(client);
        // The first JetStream call right after formation may time out on a busy machine.
        eventually(LONG, "a new R3 bucket", || async {
            ensure_kv(&js, "clusters", 1, replicated(3)).await.ok()
        })
        .await;
        eventually(LONG, "the new bucket is R3", || {
            all_current(&js, "KV_clusters", 3)
        })
        .await;
        ensure_status_stream(&js, replicated(3), Default::default())
            .await
            .unwrap();
        eventually(LONG, "the status stream is R3", || {
            all_current(&js, STATUS_STREAM, 3)
        })
        .await;

        let old = ensure_kv(&js, "old", 1, replicated(1)).await.unwrap();
        // A stream just made on a cluster takes a moment to be known to the server the client
        // publishes through: until then a put is answered "no responders" (StreamNotFound) —
        // seen on a busy machine. The first put is tried until it lands; the rest follow it.
        eventually(LONG, "the new R1 bucket takes a put", || async {
            old.put("k0", Bytes::from("v0")).await.ok()
        })
        .await;
        for i in 1..20 {
            old.put(format!("k{i}"), Bytes::from(format!("v{i}")))
                .await
                .unwrap();
        }
        let kv = ensure_kv(&js, "old", 1, replicated(3)).await.unwrap();
        eventually(LONG, "the R1 bucket became R3", || {
            all_current(&js, "KV_old", 3)
        })
        .await;
        ensure_kv(&js, "old", 1, replicated(1)).await.unwrap();
        assert_eq!(
            js.get_stream("KV_old")
                .await
                .unwrap()
                .info()
                .await
                .unwrap()
                .config
                .num_replicas,
            3,
            "{label}: opening with fewer replicas must not scale down"
        );
        assert_eq!(load_all(&kv).await.unwrap().len(), 20, "{label}");

        // The data is really replicated: it outlives the node that held the R1 copy.
        let leader = cluster.leader_of("KV_old").expect("a leader");
        cluster.stop(leader);
        let items = eventually(
            LONG,
            "the bucket read after its leader was killed",
            || async { load_all(&kv).await.ok().filter(|items| items.len() == 20) },
        )
        .await;
        assert!(
            items
                .iter()
                .any(|i| i.key == "k7" && i.value.as_ref() == b"v7"),
            "{label}"
        );
        eventually(LONG, "a write after the leader was killed", || async {
            kv.put("after", Bytes::from_static(b"x")).await.ok()
        })
        .await;
    }
}

/// A bucket is opened right after its stream is created, through every node of a 3-node
/// cluster in turn (the node answering the stream-info request may not know a stream the meta
/// leader has just made): every create-and-open must succeed at its first call, never
/// "stream not found" — the helpers wait for the new stream to be known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_opens_right_after_its_stream_is_created_through_any_node_of_a_cluster() {
    const LONG: Duration = Duration::from_secs(30);
    let (label, binary) = flotilla_testkit::nats_server_binaries().remove(0);
    let cluster = NatsCluster::start(binary, NatsClusterOptions::default());
    let mut contexts = Vec::new();
    for i in 0..cluster.len() {
        let url = cluster.node(i).url();
        let client = connect::connect(&connect::NatsConfig::new(url, "test"), None)
            .await
            .unwrap();
        contexts.push(jetstream::new(client));
    }
    // JetStream answers at all: the first call after formation may time out on a busy machine.
    eventually(LONG, "the cluster's JetStream answers", || async {
        ensure_kv(&contexts[0], "ready", 1, replicated(3))
            .await
            .ok()
    })
    .await;
    for round in 0..4 {
        for (node, js) in contexts.iter().enumerate() {
            let bucket = format!("fresh_{round}_{node}");
            let replicas = if round % 2 == 0 { 1 } else { 3 };
            let kv = tokio::time::timeout(LONG, ensure_kv(js, &bucket, 1, replicated(replicas)))
                .await
                .unwrap_or_else(|_| panic!("{label}: opening {bucket} timed out"))
                .unwrap_or_else(|e| panic!("{label}: {bucket} through node {node}: {e}"));
            assert_eq!(kv.name, bucket);
            let lease = format!("lease_{round}_{node}");
            let opened =
                ensure_expiring_kv(js, &lease, Duration::from_secs(30), replicated(replicas));
            let (kv, ttl) = tokio::time::timeout(LONG, opened)
                .await
                .unwrap_or_else(|_| panic!("{label}: opening {lease} timed out"))
                .unwrap_or_else(|e| panic!("{label}: {lease} through node {node}: {e}"));
            assert_eq!(
                (kv.name.as_str(), ttl),
                (lease.as_str(), Duration::from_secs(30))
            );
        }
    }
}

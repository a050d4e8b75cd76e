//! The snapshot client against real servers — Debian's nats-server 2.9 and the current
//! release: a bucket larger than the server's flow-control window is snapshotted and restored
//! into a fresh server of the same version with every key, value and revision; a stream that
//! exists is not restored over; a missing stream is the server's error, named.

use async_nats::jetstream;
use bytes::Bytes;
use flotilla_bus::connect;
use flotilla_bus::jetstream::{StreamOptions, ensure_kv, load_all};
use flotilla_bus::snapshot::manifest::check_request;
use flotilla_bus::snapshot::{SnapshotError, SnapshotOptions, restore, snapshot};
use flotilla_testkit::{NatsServer, free_port, nats_server_binaries};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A JetStream server of `binary` on a free port, its store in `dir`.
fn server(binary: &Path, dir: &Path) -> NatsServer {
    let port = free_port();
    let config = dir.join("nats-server.conf");
    let store = dir.join("js");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n",
            store.display().to_string()
        ),
    )
    .unwrap();
    NatsServer::start_from_config_with(binary, config, port)
}

async fn client(server: &NatsServer) -> async_nats::Client {
    let client = connect::connect(&connect::NatsConfig::new(server.url(), "test"), None)
        .await
        .unwrap();
    tokio::time::timeout(T, client.flush())
        .await
        .unwrap()
        .unwrap();
    client
}

/// Bytes that do not compress (xorshift), so the archive is as large as the data.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_is_snapshotted_and_restored_with_its_revisions_on_the_debian_server() {
    let (label, binary) = nats_server_binaries().remove(0);
    round_trip(label, &binary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_is_snapshotted_and_restored_with_its_revisions_on_the_current_server() {
    let (label, binary) = nats_server_binaries().remove(1);
    round_trip(label, &binary).await;
}

async fn round_trip(label: &str, binary: &Path) {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let source = server(binary, dirs.0.path());
    let source_client = client(&source).await;
    let js = jetstream::new(source_client.clone());
    let kv = ensure_kv(&js, "works", 1, StreamOptions::default())
        .await
        .unwrap();
    // 40 values of 256 KiB: 10 MiB, over the 8 MiB window a server sends without acks.
    for i in 0..40u64 {
        kv.put(format!("w{i}"), Bytes::from(noise(i, 256 << 10)))
            .await
            .unwrap();
    }
    kv.put("w7", Bytes::from_static(b"rewritten"))
        .await
        .unwrap();
    kv.delete("w8").await.unwrap();
    let before = load_all(&kv).await.unwrap();

    let mut data = Vec::new();
    let taken = tokio::time::timeout(
        T,
        snapshot(
            &source_client,
            "KV_works",
            &mut data,
            SnapshotOptions { check: true },
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("{label}: the snapshot timed out"))
    .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(taken.bytes, data.len() as u64, "{label}");
    assert!(taken.chunks > 64, "{label}: {} chunks", taken.chunks);
    assert_eq!(
        taken.sha256,
        flotilla_bus::snapshot::manifest::hex(&Sha256::digest(&data)),
        "{label}"
    );
    assert_eq!(taken.state("last_seq"), 42, "{label}: 41 puts and a delete");
    check_request("KV_works", &taken.request).unwrap_or_else(|e| panic!("{label}: {e}"));

    let target = server(binary, dirs.1.path());
    let target_client = client(&target).await;
    let restored = tokio::time::timeout(
        T,
        restore(
            &target_client,
            "KV_works",
            &taken.request,
            &mut data.as_slice(),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("{label}: the restore timed out"))
    .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(restored.bytes, data.len() as u64, "{label}");
    assert_eq!(restored.last_seq, 42, "{label}");
    let kv = jetstream::new(target_client.clone())
        .get_key_value("works")
        .await
        .unwrap();
    let after = load_all(&kv).await.unwrap();
    let summary = |items: &[flotilla_bus::jetstream::KvItem]| {
        let mut v: Vec<(String, u64, Vec<u8>)> = items
            .iter()
            .map(|i| (i.key.clone(), i.revision, i.value.to_vec()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(summary(&after), summary(&before), "{label}");
    assert_eq!(after.len(), 39, "{label}");

    // Restoring over a stream that exists is the server's refusal, named.
    let err = restore(
        &target_client,
        "KV_works",
        &taken.request,
        &mut data.as_slice(),
    )
    .await
    .unwrap_err();
    match &err {
        SnapshotError::Api { stream, error } => {
            assert_eq!(stream, "KV_works", "{label}");
            assert_eq!(error.err_code, 10130, "{label}: {err}");
        }
        other => panic!("{label}: {other}"),
    }
    assert!(err.to_string().contains("empty JetStream account"), "{err}");

    // A stream that does not exist.
    let err = snapshot(
        &source_client,
        "KV_nothing",
        &mut Vec::<u8>::new(),
        SnapshotOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, SnapshotError::Api { error, .. } if error.err_code == 10059),
        "{label}: {err}"
    );
    assert!(err.to_string().starts_with("KV_nothing: "), "{err}");
}

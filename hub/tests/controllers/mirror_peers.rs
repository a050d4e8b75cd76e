//! MirrorPeers end to end on a real nats-server: a hub and two agents on simulated clusters
//! exchange their Secrets sealed from agent to agent; neither the KV buckets nor the
//! nats-server's store on disk ever hold the plaintext; a rotation reaches the other side; an
//! agent stopped is named offline and completes the exchange when it comes back; a deletion
//! removes the GREEN copies on both sides and the records. Hostile spokes and plain mode:
//! `mirror_peers/hostile.rs`.

use crate::common;
#[path = "mirror_peers/hostile.rs"]
mod hostile;

use common::*;
use flotilla_agent::backend::sim::SimBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_agent::peersecrets::rules::green_data;
use flotilla_api::mirrorpeer::{self as mp, exchange, phase};
use flotilla_api::v1::MirrorPeer;
use flotilla_api::work::ManifestId;
use flotilla_testkit::NatsServer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS: &str = "openshift-storage";

fn mirror_peer(yaml: &str) -> MirrorPeer {
    match flotilla_api::ocm::parse_documents(yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::MirrorPeer(p)) => p,
        other => panic!("not a MirrorPeer: {other:?}"),
    }
}

const DR: &str = "apiVersion: multicluster.odf.openshift.io/v1alpha1
kind: MirrorPeer
metadata:
  name: dr
spec:
  items:
  - clusterName: east
    storageClusterRef: {name: ocs-storagecluster, namespace: openshift-storage}
  - clusterName: west
    storageClusterRef: {name: ocs-storagecluster, namespace: openshift-storage}
    secretName: west-source
    generate: true
  type: async
";

fn secret_id(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: NS.into(),
        name: name.into(),
    }
}

async fn namespace(b: &SimBackend) {
    let id = ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        namespace: String::new(),
        name: NS.into(),
    };
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    b.apply(&id, &ns, &Strategy::Update).await.unwrap();
}

/// East's and west's simulated clusters, each with the MirrorPeer namespace.
async fn spokes() -> (Arc<SimBackend>, Arc<SimBackend>) {
    let (east, west) = (sim_backend(), sim_backend());
    namespace(&east).await;
    namespace(&west).await;
    (east, west)
}

/// A peer's agent keeping its state in `store` across restarts, as one with a state directory.
fn stateful(
    name: &str,
    nats: &NatsServer,
    store: &Arc<flotilla_agent::store::LocalStore>,
) -> flotilla_agent::AgentConfig {
    let mut c = peer_config(name, nats);
    c.state = flotilla_agent::StateConfig::Shared(store.clone());
    c
}

/// Writes east's source Secret holding `marker`.
async fn source(b: &SimBackend, marker: &str) {
    let s = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ocs-storagecluster-peer-secret", "namespace": NS},
        "stringData": {"token": marker},
    });
    b.apply(
        &secret_id("ocs-storagecluster-peer-secret"),
        &s,
        &Strategy::Update,
    )
    .await
    .unwrap();
}

async fn data_of(b: &SimBackend, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    let s = b.get(&secret_id(name)).await.unwrap()?;
    if name.starts_with("dr-") {
        green_data(&s)
    } else {
        flotilla_agent::peersecrets::rules::source_data(&s).ok()
    }
}

/// Waits until `b` holds `name` with `pred` true of its data; the time it took.
async fn wait_secret(
    b: &SimBackend,
    name: &str,
    within: Duration,
    pred: impl Fn(&BTreeMap<String, Vec<u8>>) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        if let Some(d) = data_of(b, name).await
            && pred(&d)
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{name} not as expected within {within:?}: {:?}",
            data_of(b, name).await
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn wait_status(
    hub: &flotilla_hub::Hub,
    what: &str,
    pred: impl Fn(&flotilla_api::v1::MirrorPeerStatus) -> bool,
) -> flotilla_api::v1::MirrorPeerStatus {
    let deadline = Instant::now() + SOON;
    loop {
        let s = hub
            .mirror_peers()
            .get("dr")
            .and_then(|p| p.status)
            .unwrap_or_default();
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "MirrorPeer dr not {what}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn reachable(s: &flotilla_api::v1::MirrorPeerStatus) -> Option<&flotilla_api::v1::Condition> {
    s.conditions
        .iter()
        .find(|c| c.r#type == mp::CONDITION_PEERS_REACHABLE)
}

/// The marker raw, and base64 (standard and URL-safe) at each of the three alignments it can
/// start at in an encoded stream.
fn needles(marker: &[u8]) -> Vec<Vec<u8>> {
    use data_encoding::{BASE64, BASE64URL};
    let mut out = vec![marker.to_vec()];
    for shift in 0..3 {
        let mut bytes = vec![0u8; shift];
        bytes.extend_from_slice(marker);
        for enc in [BASE64.encode(&bytes), BASE64URL.encode(&bytes)] {
            // Only the characters that depend on the marker's bytes alone.
            let first = (shift * 8).div_ceil(6);
            out.push(enc.as_bytes()[first..enc.len() - 4].to_vec());
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every KV value and every file of the nats-server's store is free of `marker` in any form.
async fn assert_no_plaintext(nats: &NatsServer, marker: &str) {
    let needles = needles(marker.as_bytes());
    for bucket in [
        flotilla_hub::mirrorpeer::PEERS,
        flotilla_hub::mirrorpeer::SECRETS,
        flotilla_hub::mirrorpeer::KEYS,
    ] {
        for (k, v) in raw_values(nats, bucket).await {
            for n in &needles {
                assert!(!contains(&v, n), "{bucket}/{k} holds the marker");
            }
        }
    }
    let mut all = Vec::new();
    files(&nats.store_dir(), &mut all);
    assert!(!all.is_empty(), "the store directory holds files");
    let mut scanned = 0;
    for f in all {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        scanned += bytes.len();
        for n in &needles {
            assert!(!contains(&bytes, n), "{} holds the marker", f.display());
        }
    }
    assert!(scanned > 0);
}

async fn ask(
    client: &async_nats::Client,
    subject_cluster: &str,
    envelope_cluster: &str,
    request: &flotilla_api::v1::PeerSyncRequest,
) -> flotilla_api::v1::PeerSyncResponse {
    use flotilla_bus::peersecrets;
    let ev = flotilla_bus::Event::new(
        peersecrets::request_type(),
        "mallory",
        envelope_cluster,
        request,
    );
    flotilla_bus::publish::Publisher::new(client.clone(), 1 << 20, Duration::from_secs(5))
        .request(
            peersecrets::subject(subject_cluster),
            &ev,
            "PeerSyncResponse",
        )
        .await
        .expect("the hub answers")
}

/// Requests on east's subject from someone else: each refused, naming what was wrong, and
/// what was stored stays.
async fn forged_requests_are_refused_and_change_nothing(
    nats: &NatsServer,
    hub: &flotilla_hub::Hub,
) {
    use flotilla_api::v1::{PeerKeyRecord, PeerSyncRequest, SealedPeerSecret};
    use prost::Message;
    let before = raw_values(nats, flotilla_hub::mirrorpeer::SECRETS).await;
    let keys: BTreeMap<String, String> = raw_values(nats, flotilla_hub::mirrorpeer::KEYS)
        .await
        .into_iter()
        .map(|(k, v)| (k, PeerKeyRecord::decode(v.as_slice()).unwrap().xkey))
        .collect();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let honest = PeerSyncRequest {
        cluster_name: "east".into(),
        xkey: keys["east"].clone(),
        ..Default::default()
    };
    let r = ask(&client, "east", "west", &honest).await;
    assert!(r.error.contains("clustername \"west\""), "{r:?}");
    let r = ask(
        &client,
        "east",
        "east",
        &PeerSyncRequest {
            cluster_name: "west".into(),
            ..honest.clone()
        },
    )
    .await;
    assert!(r.error.contains("clusterName \"west\""), "{r:?}");
    let r = ask(
        &client,
        "ghost",
        "ghost",
        &PeerSyncRequest {
            cluster_name: "ghost".into(),
            ..honest.clone()
        },
    )
    .await;
    assert!(r.error.contains("not an accepted ManagedCluster"), "{r:?}");
    let r = ask(
        &client,
        "east",
        "east",
        &PeerSyncRequest {
            xkey: "not-a-key".into(),
            ..honest.clone()
        },
    )
    .await;
    assert!(r.error.contains("xkey"), "{r:?}");
    // A box claiming to be west's, and one to a cluster in no exchange with east.
    let forged = SealedPeerSecret {
        mirror_peer: "dr".into(),
        from: "west".into(),
        to: "east".into(),
        sender_xkey: keys["west"].clone(),
        recipient_xkey: keys["east"].clone(),
        revision: 99,
        sealed: vec![1; 64],
        ..Default::default()
    };
    let stray = SealedPeerSecret {
        from: "east".into(),
        to: "ghost".into(),
        sender_xkey: keys["east"].clone(),
        ..forged.clone()
    };
    let r = ask(
        &client,
        "east",
        "east",
        &PeerSyncRequest {
            outbound: vec![forged, stray],
            ..honest.clone()
        },
    )
    .await;
    assert!(r.error.is_empty(), "{r:?}");
    let refused = r.refused.join("\n");
    assert!(
        refused.contains("outbound[0] (dr: west → east): from must be the asking cluster"),
        "{refused}"
    );
    assert!(
        refused.contains("outbound[1] (dr: east → ghost)"),
        "{refused}"
    );
    assert_eq!(
        raw_values(nats, flotilla_hub::mirrorpeer::SECRETS).await,
        before,
        "nothing stored changed"
    );
    assert_eq!(
        hub.mirror_peers().get("dr").unwrap().status.unwrap().phase,
        phase::EXCHANGED
    );
}

fn peer_config(name: &str, nats: &NatsServer) -> flotilla_agent::AgentConfig {
    agent_config(name, &nats.url())
}

/// A plain-mode hub that serves MirrorPeers (`--allow-insecure-mirrorpeers`): these tests
/// run without secure mode.
fn peers_hub_config(nats: &NatsServer) -> flotilla_hub::Config {
    let mut c = hub_config(&nats.url());
    c.families.mirror_peers.allow_insecure = true;
    c
}

#[tokio::test]
async fn two_peers_exchange_sealed_secrets_rotate_survive_an_outage_and_clean_up() {
    let nats = NatsServer::start();
    let hub = start_hub(peers_hub_config(&nats)).await;
    let mut api = clusters_client(&hub).await;
    let (east_b, west_b): (Arc<SimBackend>, Arc<SimBackend>) = (sim_backend(), sim_backend());
    namespace(&east_b).await;
    namespace(&west_b).await;
    let marker = format!("MARKER-{}", uuid::Uuid::new_v4().simple());
    source(&east_b, &marker).await;
    let _east = accepted_agent_on(&mut api, peer_config("east", &nats), east_b.clone()).await;
    let west = accepted_agent_on(&mut api, peer_config("west", &nats), west_b.clone()).await;

    let applied = hub.mirror_peers().apply(mirror_peer(DR)).await.unwrap();
    assert_eq!(applied.spec.as_ref().unwrap().scheduling_intervals, ["5m"]);
    // Each peer holds the other's secret within 10 s: west's generated 32 bytes on east too.
    let m = marker.clone();
    let took = wait_secret(&west_b, "dr-east", Duration::from_secs(10), move |d| {
        d.get("token").map(Vec::as_slice) == Some(m.as_bytes())
    })
    .await;
    let generated = data_of(&west_b, "west-source")
        .await
        .expect("west's source generated");
    assert_eq!(generated["key"].len(), 32);
    let g = generated.clone();
    let took_back = wait_secret(&east_b, "dr-west", Duration::from_secs(10), move |d| {
        *d == g
    })
    .await;
    eprintln!("exchange: east → west {took:?}, west → east {took_back:?}");
    let green = west_b.get(&secret_id("dr-east")).await.unwrap().unwrap();
    assert_eq!(green["metadata"]["labels"][mp::SECRET_TYPE_LABEL], "GREEN");
    assert_eq!(green["metadata"]["labels"][mp::MIRROR_PEER_LABEL], "dr");
    let s = wait_status(&hub, "exchanged", |s| s.phase == phase::EXCHANGED).await;
    assert_eq!(s.exchanges.len(), 2);
    assert!(
        s.exchanges
            .iter()
            .all(|e| e.phase == exchange::APPLIED && e.revision >= 1)
    );
    assert_eq!(reachable(&s).unwrap().status, "True");
    assert_no_plaintext(&nats, &marker).await;
    forged_requests_are_refused_and_change_nothing(&nats, &hub).await;

    // A rotation on east reaches west.
    let rotated = format!("ROTATED-{}", uuid::Uuid::new_v4().simple());
    source(&east_b, &rotated).await;
    let r = rotated.clone();
    wait_secret(&west_b, "dr-east", Duration::from_secs(10), move |d| {
        d.get("token").map(Vec::as_slice) == Some(r.as_bytes())
    })
    .await;
    assert_no_plaintext(&nats, &rotated).await;

    // West's agent stops: the status names it offline. A rotation meanwhile waits for it.
    west.stop().await;
    let s = wait_status(&hub, "naming west offline", |s| {
        reachable(s).is_some_and(|c| c.status == "False" && c.message.contains("west"))
    })
    .await;
    assert_eq!(reachable(&s).unwrap().reason, "PeerOffline");
    let while_away = format!("AWAY-{}", uuid::Uuid::new_v4().simple());
    source(&east_b, &while_away).await;
    wait_status(&hub, "exchanging while west is away", |s| {
        s.phase == phase::EXCHANGING
    })
    .await;
    // Back (a fresh agent state: a new curve key, which east seals to again).
    let _west = start_agent_on(peer_config("west", &nats), west_b.clone());
    let w = while_away.clone();
    wait_secret(&west_b, "dr-east", SOON, move |d| {
        d.get("token").map(Vec::as_slice) == Some(w.as_bytes())
    })
    .await;
    let s = wait_status(&hub, "exchanged again with west back", |s| {
        s.phase == phase::EXCHANGED && reachable(s).is_some_and(|c| c.status == "True")
    })
    .await;
    assert!(s.exchanges.iter().all(|e| e.phase == exchange::APPLIED));
    assert_no_plaintext(&nats, &while_away).await;

    // Deleted: the GREEN copies go on both sides, and the records with them.
    hub.mirror_peers().delete("dr").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let east_left = east_b.get(&secret_id("dr-west")).await.unwrap();
        let west_left = west_b.get(&secret_id("dr-east")).await.unwrap();
        if east_left.is_none() && west_left.is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "GREEN Secrets left after the delete"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        east_b
            .get(&secret_id("ocs-storagecluster-peer-secret"))
            .await
            .unwrap()
            .is_some(),
        "sources stay"
    );
    assert!(
        raw_values(&nats, flotilla_hub::mirrorpeer::SECRETS)
            .await
            .is_empty()
    );
    assert!(
        raw_values(&nats, flotilla_hub::mirrorpeer::PEERS)
            .await
            .is_empty()
    );
    assert!(hub.mirror_peers().get("dr").is_none());
}

#[tokio::test]
async fn odfs_webhook_rules_are_kept_on_update() {
    let nats = NatsServer::start();
    let hub = start_hub(peers_hub_config(&nats)).await;
    let peers = hub.mirror_peers();
    let first = peers.apply(mirror_peer(DR)).await.unwrap();
    assert_eq!(first.metadata.as_ref().unwrap().generation, 1);
    let mut changed = mirror_peer(&DR.replace("type: async", "type: sync"));
    changed.spec.as_mut().unwrap().items.pop();
    let e = peers.apply(changed).await.unwrap_err().to_string();
    assert!(e.contains("spec.type") && e.contains("spec.items"), "{e}");
    let interval = mirror_peer(&DR.replace(
        "type: async",
        "type: async\n  schedulingIntervals: [\"1h\"]",
    ));
    let second = peers.apply(interval).await.unwrap();
    assert_eq!(second.metadata.as_ref().unwrap().generation, 2);
    let s3 = mirror_peer(&DR.replace("type: async", "type: async\n  manageS3: true"));
    peers.apply(s3).await.unwrap();
    let deadline = Instant::now() + SOON;
    loop {
        let p = peers.get("dr").unwrap();
        let unsupported = p.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.r#type == mp::CONDITION_S3 && c.reason == "Unsupported")
        });
        if unsupported {
            break;
        }
        assert!(Instant::now() < deadline, "manageS3 not reported: {p:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(
        peers.delete("nope").await,
        Err(flotilla_hub::mirrorpeer::MirrorPeerError::NotFound(_))
    ));
}

#[test]
fn the_scan_finds_a_marker_base64_encoded_at_any_alignment() {
    use data_encoding::{BASE64, BASE64URL};
    let marker = b"MARKER-0123456789abcdef";
    let needles = needles(marker);
    for prefix in 0..6 {
        for enc in [BASE64, BASE64URL] {
            let mut bytes = vec![b'x'; prefix];
            bytes.extend_from_slice(marker);
            bytes.extend_from_slice(b"trailing");
            let encoded = enc.encode(&bytes);
            assert!(
                needles.iter().any(|n| contains(encoded.as_bytes(), n)),
                "prefix {prefix}: {encoded}"
            );
        }
    }
}

/// The key stored for `cluster` in `peerkeys`.
async fn stored_key(nats: &NatsServer, cluster: &str) -> Option<String> {
    use prost::Message;
    raw_values(nats, flotilla_hub::mirrorpeer::KEYS)
        .await
        .into_iter()
        .find(|(k, _)| k == cluster)
        .map(|(_, v)| {
            flotilla_api::v1::PeerKeyRecord::decode(v.as_slice())
                .unwrap()
                .xkey
        })
}

#[tokio::test]
async fn a_peer_away_when_its_mirror_peer_is_deleted_removes_its_copy_when_it_returns() {
    let nats = NatsServer::start();
    let hub = start_hub(peers_hub_config(&nats)).await;
    let mut api = clusters_client(&hub).await;
    let (east_b, west_b) = spokes().await;
    source(&east_b, "kept-on-the-spoke").await;
    // West keeps its state across the restart, as an agent with a state directory does.
    let west_store = Arc::new(flotilla_agent::store::LocalStore::memory("west"));
    let west_config = || stateful("west", &nats, &west_store);
    let _east = accepted_agent_on(&mut api, peer_config("east", &nats), east_b.clone()).await;
    let west = accepted_agent_on(&mut api, west_config(), west_b.clone()).await;
    hub.mirror_peers().apply(mirror_peer(DR)).await.unwrap();
    wait_secret(&west_b, "dr-east", Duration::from_secs(10), |_| true).await;
    wait_secret(&east_b, "dr-west", Duration::from_secs(10), |_| true).await;
    let key = stored_key(&nats, "west")
        .await
        .expect("west presented a key");

    west.stop().await;
    hub.mirror_peers().delete("dr").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while east_b.get(&secret_id("dr-west")).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "east kept its GREEN copy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        west_b.get(&secret_id("dr-east")).await.unwrap().is_some(),
        "west was away"
    );
    // Back with its state: it asks at start, learns the MirrorPeer is gone and removes its copy.
    let _west = start_agent_on(west_config(), west_b.clone());
    let deadline = Instant::now() + SOON;
    while west_b.get(&secret_id("dr-east")).await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "west kept its GREEN copy after coming back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        stored_key(&nats, "west").await,
        Some(key),
        "the curve key survives a restart with the agent's state"
    );
    assert!(west_store.get().mirror_peers.is_empty());
    // A deleted cluster's key is forgotten: no peer seals to it any more.
    assert!(stored_key(&nats, "east").await.is_some());
    api.delete_cluster(flotilla_api::v1::DeleteClusterRequest {
        name: "east".into(),
    })
    .await
    .unwrap();
    let deadline = Instant::now() + SOON;
    while stored_key(&nats, "east").await.is_some() {
        assert!(
            Instant::now() < deadline,
            "the deleted cluster's key is still held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

//! MirrorPeers against hostile spokes and outside secure mode, on a real nats-server: a deleted
//! cluster's boxes and key are purged; a new curve key drops the boxes sealed with or to the
//! old one and the pair waits for a fresh box; a cluster asking past its rate is told to ask
//! again later while the others are served (and agents under a tight limit still complete
//! their exchange); a cluster deleted and accepted again with its agent's state takes its
//! restarted peer's next box; a plain-mode hub refuses MirrorPeers unless allowed, and then says the keys
//! are not authenticated.

use super::*;
use flotilla_api::v1::{PeerSyncRequest, SealedPeerSecret};
use prost::Message;

/// The boxes the hub stores, by key.
async fn boxes(nats: &NatsServer) -> BTreeMap<String, SealedPeerSecret> {
    raw_values(nats, flotilla_hub::mirrorpeer::SECRETS)
        .await
        .into_iter()
        .map(|(k, v)| (k, SealedPeerSecret::decode(v.as_slice()).unwrap()))
        .collect()
}

/// East and west, accepted, have exchanged their Secrets under MirrorPeer dr.
async fn exchanged(
    nats: &NatsServer,
    hub: &flotilla_hub::Hub,
) -> (common::TestAgent, common::TestAgent) {
    let mut api = clusters_client(hub).await;
    let (east_b, west_b) = spokes().await;
    source(&east_b, "east-secret").await;
    let east = accepted_agent_on(&mut api, peer_config("east", nats), east_b).await;
    let west = accepted_agent_on(&mut api, peer_config("west", nats), west_b).await;
    hub.mirror_peers().apply(mirror_peer(DR)).await.unwrap();
    wait_status(hub, "exchanged", |s| s.phase == phase::EXCHANGED).await;
    let held = boxes(nats).await;
    assert!(
        held.contains_key("dr.east.west") && held.contains_key("dr.west.east"),
        "{:?}",
        held.keys()
    );
    (east, west)
}

fn exchange_of<'a>(
    s: &'a flotilla_api::v1::MirrorPeerStatus,
    from: &str,
) -> &'a flotilla_api::v1::PeerExchange {
    s.exchanges.iter().find(|e| e.from == from).unwrap()
}

#[tokio::test]
async fn a_deleted_clusters_boxes_and_key_are_purged_and_its_peer_waits_for_a_fresh_box() {
    let nats = NatsServer::start();
    let hub = start_hub(peers_hub_config(&nats)).await;
    let (east, _west) = exchanged(&nats, &hub).await;
    east.stop().await;
    let mut api = clusters_client(&hub).await;
    api.delete_cluster(flotilla_api::v1::DeleteClusterRequest {
        name: "east".into(),
    })
    .await
    .unwrap();
    let deadline = Instant::now() + SOON;
    loop {
        let held = boxes(&nats).await;
        if held.is_empty() && stored_key(&nats, "east").await.is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deleted cluster's boxes or key are still held: {:?}",
            held.keys()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        stored_key(&nats, "west").await.is_some(),
        "west's key stays"
    );
    // Each way the pair waits for a fresh box: no revision, nothing stale.
    let s = wait_status(&hub, "waiting for east", |s| {
        s.exchanges
            .iter()
            .all(|e| e.phase == exchange::PENDING && e.revision == 0)
    })
    .await;
    assert!(
        exchange_of(&s, "west")
            .message
            .contains("waiting for east's agent to present its key"),
        "{s:#?}"
    );
    assert!(
        exchange_of(&s, "east")
            .message
            .contains("waiting for east's agent to ask"),
        "{s:#?}"
    );
}

/// A cluster deleted and accepted again with its agent's state — so with its curve key — takes
/// its peer's next box even though the peer restarted meanwhile: what the cluster reports
/// applied is kept as the pair's floor, and the peer counts on from it. (Without it the peer,
/// holding no count after its restart and finding no box at the hub, starts again at 1, and the
/// cluster refuses every box as older than the copy it holds.)
#[tokio::test]
async fn a_cluster_accepted_again_takes_its_restarted_peers_next_box() {
    use flotilla_agent::store::LocalStore;
    let nats = NatsServer::start();
    let hub = start_hub(peers_hub_config(&nats)).await;
    let mut api = clusters_client(&hub).await;
    let (east_b, west_b) = spokes().await;
    let (east_store, west_store) = (
        Arc::new(LocalStore::memory("east")),
        Arc::new(LocalStore::memory("west")),
    );
    let config = |name: &str, store: &Arc<LocalStore>| stateful(name, &nats, store);
    let token = |marker: &'static str| {
        move |d: &BTreeMap<String, Vec<u8>>| {
            d.get("token").map(Vec::as_slice) == Some(marker.as_bytes())
        }
    };
    source(&east_b, "first").await;
    let east = accepted_agent_on(&mut api, config("east", &east_store), east_b.clone()).await;
    let west = accepted_agent_on(&mut api, config("west", &west_store), west_b.clone()).await;
    hub.mirror_peers().apply(mirror_peer(DR)).await.unwrap();
    wait_secret(&west_b, "dr-east", SOON, token("first")).await;
    for marker in ["second", "third"] {
        source(&east_b, marker).await;
        wait_secret(&west_b, "dr-east", SOON, token(marker)).await;
    }
    let held = boxes(&nats).await["dr.east.west"].revision;
    assert!(held >= 3, "west holds east's revision {held}");

    // West is deleted while its agent is away (its boxes and key purged); east restarts, its
    // count of what it sent gone with its process.
    west.stop().await;
    api.delete_cluster(flotilla_api::v1::DeleteClusterRequest {
        name: "west".into(),
    })
    .await
    .unwrap();
    let deadline = Instant::now() + SOON;
    while boxes(&nats).await.keys().any(|k| k.contains("west")) {
        assert!(Instant::now() < deadline, "west's boxes are still held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    east.stop().await;
    let _east = start_agent_on(config("east", &east_store), east_b.clone());
    // West comes back with its state and is accepted again; east's next Secret reaches it.
    let _west = accepted_agent_on(&mut api, config("west", &west_store), west_b.clone()).await;
    source(&east_b, "fourth").await;
    wait_secret(&west_b, "dr-east", SOON, token("fourth")).await;
    let now = boxes(&nats).await["dr.east.west"].revision;
    assert!(
        now > held,
        "east counted on from west's floor: {now} after {held}"
    );
    wait_status(&hub, "exchanged again", |s| s.phase == phase::EXCHANGED).await;
}

#[tokio::test]
async fn a_new_key_drops_the_boxes_sealed_with_or_to_the_old_one() {
    let nats = NatsServer::start();
    let hub = start_hub(peers_hub_config(&nats)).await;
    let (_east, west) = exchanged(&nats, &hub).await;
    let old = stored_key(&nats, "west").await.unwrap();
    let east_key = stored_key(&nats, "east").await.unwrap();
    west.stop().await;
    // West's name presents a new key (its agent's state lost — or, in plain mode, anyone).
    let new = nkeys::XKey::new().public_key();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let request = PeerSyncRequest {
        cluster_name: "west".into(),
        xkey: new.clone(),
        ..Default::default()
    };
    let r = ask(&client, "west", "west", &request).await;
    assert!(r.error.is_empty() && r.refused.is_empty(), "{r:?}");
    let d = &r.deliveries[0];
    assert!(d.stored.is_empty(), "west's boxes under its old key: {d:?}");
    assert!(
        d.inbound.is_empty(),
        "boxes sealed to west's old key: {d:?}"
    );
    for (k, b) in boxes(&nats).await {
        assert!(
            b.sender_xkey != old && b.recipient_xkey != old,
            "{k} is sealed with or to west's old key"
        );
    }
    let s = wait_status(&hub, "waiting for west's fresh box", |s| {
        let e = exchange_of(s, "west");
        e.phase == exchange::PENDING && e.revision == 0
    })
    .await;
    assert!(
        exchange_of(&s, "west")
            .message
            .contains("waiting for west to seal its Secret"),
        "{s:#?}"
    );
    // The new key counts its revisions afresh: revision 1 is newer than nothing.
    let fresh = SealedPeerSecret {
        mirror_peer: "dr".into(),
        from: "west".into(),
        to: "east".into(),
        sender_xkey: new.clone(),
        recipient_xkey: east_key,
        revision: 1,
        sealed: vec![9; 64],
        ..Default::default()
    };
    let r = ask(
        &client,
        "west",
        "west",
        &PeerSyncRequest {
            outbound: vec![fresh],
            ..request
        },
    )
    .await;
    assert!(r.error.is_empty() && r.refused.is_empty(), "{r:?}");
    assert_eq!(boxes(&nats).await["dr.west.east"].revision, 1);
}

#[tokio::test]
async fn requests_past_a_clusters_rate_are_told_to_ask_again_later() {
    let nats = NatsServer::start();
    let mut config = peers_hub_config(&nats);
    config.families.mirror_peers.requests.per_second = 2.0;
    config.families.mirror_peers.requests.burst = 3;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let (east_b, west_b) = spokes().await;
    source(&east_b, "east-secret").await;
    // In no MirrorPeer yet: the agents do not ask.
    let _east = accepted_agent_on(&mut api, peer_config("east", &nats), east_b.clone()).await;
    let _west = accepted_agent_on(&mut api, peer_config("west", &nats), west_b.clone()).await;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let request = |cluster: &str| PeerSyncRequest {
        cluster_name: cluster.into(),
        xkey: nkeys::XKey::new().public_key(),
        ..Default::default()
    };
    let started = Instant::now();
    for _ in 0..3 {
        let r = ask(&client, "east", "east", &request("east")).await;
        assert!(r.error.is_empty(), "{r:?}");
    }
    let r = ask(&client, "east", "east", &request("east")).await;
    assert!(
        r.error
            .contains("\"east\" is over the hub's MirrorPeer request limit")
            && r.error.contains("ask again later"),
        "{r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "the bucket refilled meanwhile"
    );
    // Garbage counts too, and west is served on its own bucket.
    let r = ask(&client, "west", "east", &request("west")).await;
    assert!(r.error.contains("clustername \"east\""), "{r:?}");
    let r = ask(&client, "west", "west", &request("west")).await;
    assert!(r.error.is_empty(), "{r:?}");
    // Half a second later east may ask once more.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = ask(&client, "east", "east", &request("east")).await;
    assert!(r.error.is_empty(), "{r:?}");
    let metrics = hub.metrics.render(&hub.inventory);
    assert!(
        metrics.contains("limit=\"mirrorpeer_requests\""),
        "the refusal is counted"
    );
    // Agents refused at this tight limit back off, ask again, and complete the exchange.
    hub.mirror_peers().apply(mirror_peer(DR)).await.unwrap();
    wait_secret(&west_b, "dr-east", SOON, |_| true).await;
    wait_secret(&east_b, "dr-west", SOON, |_| true).await;
    wait_status(&hub, "exchanged under the limit", |s| {
        s.phase == phase::EXCHANGED
    })
    .await;
}

#[tokio::test]
async fn a_plain_mode_hub_refuses_mirror_peers_unless_allowed_and_then_says_so() {
    use flotilla_api::v1::mirror_peer_service_client::MirrorPeerServiceClient;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let e = hub
        .mirror_peers()
        .apply(mirror_peer(DR))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("MirrorPeer dr: refused because the hub is not in secure mode")
            && e.contains("--allow-insecure-mirrorpeers"),
        "{e}"
    );
    let mut grpc = MirrorPeerServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let status = grpc.apply_mirror_peer(mirror_peer(DR)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert!(hub.mirror_peers().get("dr").is_none(), "nothing stored");
    hub.stop().await;

    let hub = start_hub(peers_hub_config(&nats)).await;
    hub.mirror_peers().apply(mirror_peer(DR)).await.unwrap();
    let s = wait_status(&hub, "saying its keys are not authenticated", |s| {
        s.conditions
            .iter()
            .any(|c| c.r#type == mp::CONDITION_KEYS_AUTHENTICATED)
    })
    .await;
    let c = s
        .conditions
        .iter()
        .find(|c| c.r#type == mp::CONDITION_KEYS_AUTHENTICATED)
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "InsecureMode")
    );
    assert!(c.message.contains("not in secure mode"), "{}", c.message);
}

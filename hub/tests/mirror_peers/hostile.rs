//! MirrorPeers outside secure mode, on a real nats-server: a plain-mode hub refuses
//! MirrorPeers unless allowed, and then says the keys are not authenticated.

use super::*;

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

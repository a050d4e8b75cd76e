//! Identities from OIDC (issue 48) on a real hub: a nats-server, the hub in process with
//! `--oidc-issuer-url` pointing at the testkit's issuer over real HTTP, the API over gRPC. The
//! issuer's tokens are accepted with their user and groups (which the grants file gives roles),
//! a rotated key is fetched when its first token comes, and expired, foreign, wrong-audience,
//! unsigned and forged tokens are refused `UNAUTHENTICATED` with the reason.

use crate::common;

use common::tokens::*;
use common::*;
use flotilla_api::v1::ListClustersRequest;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_testkit::NatsServer;
use flotilla_testkit::oidc::{CLIENT_ID, Claims, TestIssuer};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

const GRANTS: &[u8] = b"apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    admin: { groups: [team-a-sre] }
";

/// A hub with the CSV token file, the grants above and `issuer` as its OIDC issuer.
async fn hub_trusting(
    nats: &NatsServer,
    issuer: &TestIssuer,
) -> (flotilla_hub::Hub, tonic::transport::Channel) {
    let grants = flotilla_hub::grants::file::parse("grants.yaml", GRANTS).unwrap();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens().with_grants(Arc::new(grants)));
    let mut oidc = flotilla_oidc::Config::new(issuer.url(), &[CLIENT_ID]);
    oidc.groups_claim = Some("groups".into());
    config.api.oidc = Some(oidc);
    let hub = start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (hub, channel)
}

/// `ListClusters` with `token`: its answer's status code and message.
async fn list_as(
    channel: &tonic::transport::Channel,
    token: String,
) -> Result<usize, (Code, String)> {
    let mut client = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(token.leak()));
    tokio::time::timeout(SOON, client.list_clusters(ListClustersRequest::default()))
        .await
        .expect("an answer in time")
        .map(|r| r.into_inner().items.len())
        .map_err(|s| (s.code(), s.message().to_string()))
}

/// Retries `ListClusters` while the hub has not fetched the issuer's keys yet.
async fn list_when_ready(
    channel: &tonic::transport::Channel,
    token: &str,
) -> Result<usize, (Code, String)> {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let answer = list_as(channel, token.to_string()).await;
        match &answer {
            Err((Code::Unauthenticated, why))
                if (why.contains("keys are not available") || why.contains("does not publish"))
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            _ => return answer,
        }
    }
}

#[tokio::test]
async fn tokens_of_the_issuer_are_accepted_with_their_groups_and_others_refused_with_the_reason() {
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let (_hub, channel) = hub_trusting(&nats, &issuer).await;

    // ana's groups give her admin on team-a: the list is hers (filtered: nothing in team-a yet).
    let ana = issuer.token("ana", &["team-a-sre"]);
    assert_eq!(list_when_ready(&channel, &ana).await, Ok(0));
    // Authenticated, but with no grant: its list is empty, and a write is refused to a person
    // the hub knows, by the issuer-prefixed name.
    let zed = issuer.token("zed", &["other"]);
    assert_eq!(list_as(&channel, zed.clone()).await, Ok(0));
    let mut client = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(zed.leak()));
    let cluster = flotilla_api::v1::ManagedCluster {
        metadata: Some(flotilla_api::v1::ObjectMeta {
            name: "by-zed".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let refused = tokio::time::timeout(SOON, client.apply_cluster(cluster))
        .await
        .expect("an answer in time")
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    assert!(
        refused
            .message()
            .contains(&format!("{}#zed (member) may not call", issuer.url())),
        "{refused}"
    );
    // The CSV tokens still work beside the issuer's.
    assert_eq!(list_as(&channel, ADMIN.into()).await, Ok(0));

    let refused = |token: String, want: &'static str| {
        let channel = channel.clone();
        async move {
            let (code, why) = list_as(&channel, token).await.unwrap_err();
            assert_eq!(code, Code::Unauthenticated, "{why}");
            assert!(why.contains(want), "want {want:?} in {why:?}");
        }
    };
    refused(
        issuer.mint(Claims::user("ana", &["team-a-sre"]).with("exp", 1_700_000_000)),
        "the bearer token expired at 2023-11-14T22:13:20Z (clock skew allowed 60s)",
    )
    .await;
    refused(
        issuer.mint(Claims::user("ana", &["team-a-sre"]).with("aud", "grafana")),
        "the bearer token's audience is [\"grafana\"], not \"flotilla\"",
    )
    .await;
    refused(
        issuer.unsigned(Claims::user("ana", &["team-a-sre"])),
        "the bearer token is signed with none; this hub accepts RS256",
    )
    .await;
    refused(
        issuer.mint(Claims::user("ana", &[]).hs256(issuer.public_jwk_text().as_bytes())),
        "signed with HS256",
    )
    .await;
    refused(
        issuer.mint(Claims::user("ana", &["team-a-sre"]).signed_by("forged")),
        "the bearer token is signed with a key the issuer does not publish (kid \"forged\")",
    )
    .await;
    // Another issuer's token is not this hub's: unknown, as any stranger's token.
    let other = TestIssuer::start().await;
    refused(
        other.token("ana", &["team-a-sre"]),
        "the bearer token is not known to this hub",
    )
    .await;
}

#[tokio::test]
async fn a_rotated_key_is_fetched_when_its_first_token_comes() {
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let (_hub, channel) = hub_trusting(&nats, &issuer).await;
    let before = issuer.token("ana", &["team-a-sre"]);
    assert_eq!(list_when_ready(&channel, &before).await, Ok(0));

    issuer.rotate();
    let after = issuer.token("ana", &["team-a-sre"]);
    // The hub fetches the keys again on the unknown kid (at most once per 10 s): retried, the
    // new key's token is accepted; the old key is still published, so its tokens still pass.
    assert_eq!(list_when_ready(&channel, &after).await, Ok(0));
    assert_eq!(list_as(&channel, before).await, Ok(0));
}

/// A hub of a two-hub control plane on `nats` sharing the sealing key in `dir`: `tokens` as its
/// token file, the grants of the teams below, `issuer` trusted with unprefixed usernames (so an
/// issuer's user can be named like a token).
async fn control_plane_hub(
    nats: &NatsServer,
    issuer: &TestIssuer,
    dir: &std::path::Path,
    tokens: flotilla_hub::grpc::auth::Tokens,
) -> (flotilla_hub::Hub, tonic::transport::Channel) {
    const TEAMS: &[u8] = b"apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    view: { groups: [team-a-sre] }
  team-b:
    view: { groups: [team-b-sre] }
";
    let grants = flotilla_hub::grants::file::parse("grants.yaml", TEAMS).unwrap();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens.with_grants(Arc::new(grants)));
    config.families.service_accounts.key =
        flotilla_hub::serviceaccount::key::SealingKey::from_file(&dir.join("sealing.xk")).unwrap();
    let mut oidc = flotilla_oidc::Config::new(issuer.url(), &[CLIENT_ID]);
    oidc.groups_claim = Some("groups".into());
    oidc.username_prefix = flotilla_oidc::Prefix::None;
    config.api.oidc = Some(oidc);
    let hub = start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (hub, channel)
}

/// The cluster sets `token` lists through `channel`, retried while the hub has not fetched
/// the issuer's keys or cannot forward yet.
async fn sets_seen(
    channel: &tonic::transport::Channel,
    token: &str,
) -> Result<Vec<String>, (Code, String)> {
    use flotilla_api::v1::ListClusterSetsRequest;
    use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let mut sets = ClusterSetServiceClient::with_interceptor(
            channel.clone(),
            Bearer(token.to_string().leak()),
        );
        let answer = tokio::time::timeout(
            SOON,
            sets.list_cluster_sets(ListClusterSetsRequest::default()),
        )
        .await
        .expect("an answer in time")
        .map(|r| {
            let mut names: Vec<String> = (r.into_inner().items.into_iter())
                .filter_map(|v| v.set?.metadata.map(|m| m.name))
                .collect();
            names.sort();
            names
        })
        .map_err(|s| (s.code(), s.message().to_string()));
        let early = matches!(&answer, Err((Code::Unauthenticated, why))
            if why.contains("keys are not available") || why.contains("does not publish"))
            || matches!(&answer, Err((Code::Unavailable, _)));
        if !early || tokio::time::Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_issuers_user_forwarded_between_hubs_keeps_its_groups_and_never_becomes_a_token() {
    // Review r3 §1: a call forwarded to the hub holding the controllers lost the caller's
    // groups and via, and the holder took an issuer's user for its token file's user of the
    // same name (and that token's role).
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The holder's token file has alice (admin); the edge's does not know her.
    let (holder, to_holder) = control_plane_hub(&nats, &issuer, dir.path(), tokens()).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while holder.controllers().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first hub holds the controllers"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let edge_tokens = flotilla_hub::grpc::auth::Tokens::parse(
        "edge.csv",
        "s3cr3t-edge-operator-01,operator,admin\n",
    )
    .unwrap();
    let (edge, to_edge) = control_plane_hub(&nats, &issuer, dir.path(), edge_tokens).await;
    assert!(edge.controllers().is_none(), "the second hub forwards");

    let mut sets =
        flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient::with_interceptor(
            to_holder.clone(),
            Bearer(ADMIN),
        );
    for name in ["team-a", "team-b"] {
        let set = flotilla_api::v1::ManagedClusterSet {
            metadata: Some(flotilla_api::v1::ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        };
        sets.apply_cluster_set(set).await.unwrap();
    }

    // ana's groups cross to the holder: she sees her team's set, through either hub.
    let ana = issuer.token("ana", &["team-a-sre"]);
    assert_eq!(
        sets_seen(&to_holder, &ana).await,
        Ok(vec!["team-a".to_string()])
    );
    assert_eq!(
        sets_seen(&to_edge, &ana).await,
        Ok(vec!["team-a".to_string()])
    );
    let ben = issuer.token("ben", &["team-b-sre"]);
    assert_eq!(
        sets_seen(&to_edge, &ben).await,
        Ok(vec!["team-b".to_string()])
    );

    // An issuer's user named like the holder's admin token: the edge (which has no such token)
    // vouches for the issuer's alice; the holder refuses her rather than take her for its
    // token's alice — she saw every team's sets as that admin before.
    let alice = issuer.token("alice", &[]);
    let (code, why) = sets_seen(&to_edge, &alice).await.unwrap_err();
    assert_eq!(code, Code::Unauthenticated, "{why}");
    assert!(
        why.contains("the OIDC user \"alice\" has the name of one of this hub's tokens"),
        "{why}"
    );
    // ... and the holder refuses her token too.
    let (code, _) = sets_seen(&to_holder, &alice).await.unwrap_err();
    assert_eq!(code, Code::Unauthenticated);

    // A token's caller forwarded keeps working: the edge's admin, unknown to the holder's
    // file, is taken with the token role the edge's file gives it (every set, the built-in
    // ones too).
    let all = sets_seen(&to_edge, "s3cr3t-edge-operator-01")
        .await
        .unwrap();
    assert!(
        all.contains(&"team-a".to_string()) && all.contains(&"team-b".to_string()),
        "{all:?}"
    );
    edge.stop().await;
    holder.stop().await;
}

//! The gRPC surface beyond clusters: sets and bindings, health, reflection.

use crate::common;

use common::work::works_client;
use common::*;
use flotilla_api::v1::{
    DeleteBindingRequest, GetClusterSetRequest, LabelSelector, ListBindingsRequest,
    ListClusterSetsRequest, ManagedClusterSelector, ManagedClusterSet, ManagedClusterSetBinding,
    ManagedClusterSetBindingSpec, ManagedClusterSetSpec, ObjectMeta,
};
use flotilla_testkit::NatsServer;

fn set(name: &str, ty: &str, selector: Option<LabelSelector>) -> ManagedClusterSet {
    ManagedClusterSet {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetSpec {
            cluster_selector: Some(ManagedClusterSelector {
                selector_type: ty.into(),
                label_selector: selector,
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn binding(ns: &str, name: &str, set: &str) -> ManagedClusterSetBinding {
    ManagedClusterSetBinding {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: ns.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetBindingSpec {
            cluster_set: set.into(),
        }),
        status: None,
    }
}

#[tokio::test]
async fn sets_and_bindings_select_members_and_survive_a_restart() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut sets = sets_client(&hub).await;
    let mut eu = agent_config("eu-1", &nats.url());
    eu.labels.insert("region".into(), "eu".into());
    let mut us = agent_config("us-1", &nats.url());
    us.labels.insert("region".into(), "us".into());
    let (a, b) = (start_agent(eu), start_agent(us));
    wait_cluster(&mut api, "eu-1", "registered", |_| true).await;
    wait_cluster(&mut api, "us-1", "registered", |_| true).await;

    // Built-in sets.
    let all = sets
        .list_cluster_sets(ListClusterSetsRequest {})
        .await
        .unwrap()
        .into_inner()
        .items;
    let names: Vec<_> = all
        .iter()
        .map(|v| {
            v.set
                .as_ref()
                .unwrap()
                .metadata
                .as_ref()
                .unwrap()
                .name
                .clone()
        })
        .collect();
    assert_eq!(names, vec!["default", "global"]);
    assert!(all.iter().all(|v| v.members.len() == 2));

    // A LabelSelector set and an exclusive set.
    let sel = flotilla_api::selector::parse("region=eu").unwrap();
    let created = sets
        .apply_cluster_set(set("europe", "LabelSelector", Some(sel)))
        .await
        .unwrap()
        .into_inner();
    let rv = created.metadata.as_ref().unwrap().resource_version;
    assert!(rv > 0);
    sets.apply_cluster_set(set("edge", "", None)).await.unwrap();
    api.label_cluster(flotilla_api::v1::LabelClusterRequest {
        name: "us-1".into(),
        set: [(
            flotilla_api::meta::CLUSTERSET_LABEL.to_string(),
            "edge".to_string(),
        )]
        .into(),
        remove: vec![],
    })
    .await
    .unwrap();
    let europe = sets
        .get_cluster_set(GetClusterSetRequest {
            name: "europe".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(europe.members, vec!["eu-1"]);
    let cond = &europe.set.unwrap().status.unwrap().conditions[0];
    assert_eq!(cond.message, "1 ManagedClusters selected");
    let edge = sets
        .get_cluster_set(GetClusterSetRequest {
            name: "edge".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(edge.members, vec!["us-1"]);
    let default = sets
        .get_cluster_set(GetClusterSetRequest {
            name: "default".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        default.members,
        vec!["eu-1"],
        "the exclusive label moved us-1 out of default"
    );

    // Stale resourceVersion → ABORTED; invalid → INVALID_ARGUMENT naming the field.
    let mut stale = set("europe", "LabelSelector", Some(LabelSelector::default()));
    stale.metadata.as_mut().unwrap().resource_version = rv + 100;
    let err = sets.apply_cluster_set(stale).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Aborted);
    let err = sets
        .apply_cluster_set(set("weird", "Bogus", None))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("spec.clusterSelector.selectorType"),
        "{}",
        err.message()
    );
    let err = sets
        .delete_cluster_set(GetClusterSetRequest {
            name: "global".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);

    // Bindings.
    let b1 = sets
        .apply_binding(binding("apps", "europe", "europe"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b1.status.unwrap().conditions[0].status, "True");
    let err = sets
        .apply_binding(binding("apps", "europe", "edge"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("spec.clusterSet"),
        "{}",
        err.message()
    );
    let dangling = sets
        .apply_binding(binding("apps", "ghost", "ghost"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        dangling.status.unwrap().conditions[0].reason,
        "ClusterSetNotFound"
    );
    let europe = sets
        .get_cluster_set(GetClusterSetRequest {
            name: "europe".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(europe.bound_namespaces, vec!["apps"]);

    // Everything is still there after a hub restart.
    hub.stop().await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut sets = sets_client(&hub).await;
    let europe = sets
        .get_cluster_set(GetClusterSetRequest {
            name: "europe".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(europe.bound_namespaces, vec!["apps"]);
    let bindings = sets
        .list_bindings(ListBindingsRequest {
            namespace: "apps".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(bindings.len(), 2);
    sets.delete_binding(DeleteBindingRequest {
        namespace: "apps".into(),
        name: "ghost".into(),
    })
    .await
    .unwrap();
    let err = sets
        .delete_binding(DeleteBindingRequest {
            namespace: "apps".into(),
            name: "ghost".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    a.stop().await;
    b.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn health_and_reflection_answer_like_grpcurl_expects() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let url = format!("http://{}", hub.grpc_addr);
    let channel = tonic::transport::Endpoint::from_shared(url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    let resp = health
        .check(HealthCheckRequest {
            service: "flotilla.v1.ClusterService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, ServingStatus::Serving as i32);

    let mut refl = ServerReflectionClient::new(channel);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = refl
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let msg = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = msg.message_response else {
        panic!("unexpected reflection answer: {msg:?}")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    for want in [
        "flotilla.v1.ClusterService",
        "flotilla.v1.ClusterSetService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    hub.stop().await;
}

/// Issue 16: `!!!==` listed every cluster and `!env=prod` was read as "has no label named
/// `env=prod`". A selector that does not parse is INVALID_ARGUMENT naming the term, never a
/// selection of everything.
#[tokio::test]
async fn invalid_label_selectors_are_rejected_naming_the_term() {
    use flotilla_api::v1::{ListClustersRequest, ListWorksRequest, WatchClustersRequest};
    use tonic::Code;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &nats.url(), "edge-1").await;
    let mut works = works_client(&hub).await;
    for bad in ["!!!==", "!env=prod", "env=prod,", "a b=c"] {
        let err = clusters
            .list_clusters(ListClustersRequest {
                label_selector: bad.into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}: {err:?}");
        assert!(err.message().contains("labelSelector"), "{}", err.message());
        let err = clusters
            .watch_clusters(WatchClustersRequest {
                label_selector: bad.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        let err = works
            .list_works(ListWorksRequest {
                label_selector: bad.into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
    }
    agent.stop().await;
    hub.stop().await;
}

/// A name that cannot exist is INVALID_ARGUMENT naming the rule, not NOT_FOUND (issue 16:
/// `delete work 'bad name'` said `managed cluster "ManifestWork b-0001/bad name" not found`),
/// and every rejected call is counted by method and code.
#[tokio::test]
async fn impossible_names_are_invalid_argument_and_rejected_calls_are_counted() {
    use flotilla_api::v1::{DeleteWorkRequest, GetClusterRequest, GetWorkRequest};
    use tonic::Code;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &nats.url(), "edge-1").await;
    let mut works = works_client(&hub).await;
    let err = works
        .delete_work(DeleteWorkRequest {
            cluster: "edge-1".into(),
            name: "bad name".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().starts_with("name:"), "{}", err.message());
    let err = works
        .get_work(GetWorkRequest {
            cluster: "Edge_1".into(),
            name: "w".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().starts_with("cluster:"), "{}", err.message());
    // A valid name that does not exist is still NOT_FOUND, and says what is missing.
    let err = works
        .delete_work(DeleteWorkRequest {
            cluster: "edge-1".into(),
            name: "absent".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), "ManifestWork edge-1/absent not found");
    let err = clusters
        .get_cluster(GetClusterRequest {
            name: "no such".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let metrics = metrics_text(&hub).await;
    for line in [
        r#"flotilla_hub_api_rejected_total{method="/flotilla.v1.WorkService/DeleteWork",code="InvalidArgument"} 1"#,
        r#"flotilla_hub_api_rejected_total{method="/flotilla.v1.WorkService/DeleteWork",code="NotFound"} 1"#,
        r#"flotilla_hub_api_rejected_total{method="/flotilla.v1.ClusterService/GetCluster",code="InvalidArgument"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    agent.stop().await;
    hub.stop().await;
}

/// With a token file, every call but health checks needs a bearer token; a read-only identity
/// reads and cannot change anything; refusals are counted; no token reaches the log.
#[tokio::test]
async fn api_tokens_authenticate_and_roles_authorize() {
    use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
    use flotilla_api::v1::{ClusterNamesRequest, ListClustersRequest};
    use tonic::Code;
    use tonic::metadata::MetadataValue;
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(
        flotilla_hub::grpc::auth::Tokens::parse(
            "tokens.csv",
            "s3cr3t-admin-token-0001,alice,admin\ns3cr3t-view-token-00002,bob,read-only\n",
        )
        .unwrap(),
    );
    let hub = start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let with_token = |token: Option<&'static str>| {
        ClusterServiceClient::with_interceptor(
            channel.clone(),
            move |mut req: tonic::Request<()>| {
                if let Some(t) = token {
                    let value: MetadataValue<_> = format!("Bearer {t}").parse().unwrap();
                    req.metadata_mut().insert("authorization", value);
                }
                Ok(req)
            },
        )
    };
    let list = ListClustersRequest::default();
    let accept = ClusterNamesRequest {
        names: vec!["edge-1".into()],
        key: String::new(),
    };
    let err = with_token(None)
        .list_clusters(list.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = with_token(Some("not-a-known-token-at-all"))
        .list_clusters(list.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let mut viewer = with_token(Some("s3cr3t-view-token-00002"));
    viewer
        .list_clusters(list.clone())
        .await
        .expect("read-only reads");
    let err = viewer.accept_clusters(accept.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(
        err.message().contains("bob (read-only)"),
        "{}",
        err.message()
    );
    let mut admin = with_token(Some("s3cr3t-admin-token-0001"));
    admin.list_clusters(list).await.expect("admin reads");
    // Past authorization: the cluster does not exist.
    let err = admin.accept_clusters(accept).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    // Health needs no token.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health without a token");
    let metrics = metrics_text(&hub).await;
    assert!(
        metrics.contains(r#"flotilla_hub_api_rejected_total{method="/flotilla.v1.ClusterService/ListClusters",code="Unauthenticated"} 2"#),
        "{metrics}"
    );
    assert!(!metrics.contains("s3cr3t"));
    hub.stop().await;
}

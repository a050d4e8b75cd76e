//! Bad input from the wire is rejected with a reason that names the field, counted, logged, and
//! changes nothing that was stored.

use crate::common;

use async_nats::jetstream;
use bytes::Bytes;
use common::*;
use flotilla_api::v1::{
    ClusterStatusReport, LeaseRenewal, RegistrationRequest, RegistrationResponse, RegistrationState,
};
use flotilla_bus::envelope::{Action, Direction, Event, EventType, headers, types};
use flotilla_bus::subjects;
use flotilla_testkit::NatsServer;
use std::time::Duration;

async fn request(
    client: &async_nats::Client,
    subject: String,
    payload: Bytes,
) -> RegistrationResponse {
    let reply = tokio::time::timeout(SOON, client.request(subject, payload))
        .await
        .expect("reply in time")
        .expect("reply");
    Event::decode(&reply.payload, 1 << 20)
        .unwrap()
        .decode_data::<RegistrationResponse>("RegistrationResponse")
        .unwrap()
}

#[tokio::test]
async fn malformed_oversized_unknown_and_forged_events_change_nothing() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    // Long lease: nothing should write to the cluster during the test but the bad input.
    config.cluster.default_lease_duration_seconds = 60;
    config.router.max_event_bytes = 8 * 1024;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let mut cfg = agent_config("victim", &nats.url());
    cfg.status_interval = Duration::from_secs(3600);
    let agent = accepted_agent(&mut api, cfg).await;
    let before = wait_cluster(&mut api, "victim", "Available", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    // Let the first status report land too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = get(&mut api, "victim").await.unwrap_or(before);
    let rv = before.metadata.as_ref().unwrap().resource_version;

    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let lease_subject = subjects::status("victim", subjects::KIND_LEASE, None);
    let cluster_subject = subjects::status("victim", subjects::KIND_CLUSTER, None);
    let publish = |subject: String, payload: Bytes| {
        let js = js.clone();
        async move { js.publish(subject, payload).await.unwrap().await.unwrap() }
    };

    // 1. Bytes that are not a CloudEvent.
    publish(
        cluster_subject.clone(),
        Bytes::from_static(b"\xff\xff\xff not protobuf"),
    )
    .await;
    wait_metric(&hub, "reason=\"decode\"").await;

    // 2. Oversized event (over the hub's 8 KiB limit).
    let mut big = ClusterStatusReport {
        cluster_name: "victim".into(),
        healthy: false,
        ..Default::default()
    };
    big.health_message = "x".repeat(16 * 1024);
    let ev =
        Event::new(types::cluster_status(), "attacker", "victim", &big).with_sequence(u64::MAX - 1);
    publish(cluster_subject.clone(), ev.encode(1 << 20).unwrap()).await;
    wait_metric(&hub, "reason=\"too_large\"").await;

    // 3. Unknown event type.
    let gizmo = EventType::new(
        "cluster",
        "v1",
        "gizmo",
        Direction::Status,
        Action::UpdateRequest,
    );
    let ev = Event::new(gizmo, "attacker", "victim", &LeaseRenewal::default());
    publish(lease_subject.clone(), ev.encode(1 << 20).unwrap()).await;
    wait_metric(&hub, "reason=\"unknown_type\"").await;

    // 4. A status whose clustername does not match its subject.
    let forged = ClusterStatusReport {
        cluster_name: "other".into(),
        healthy: false,
        ..Default::default()
    };
    let ev = Event::new(types::cluster_status(), "attacker", "other", &forged)
        .with_sequence(u64::MAX - 1);
    publish(cluster_subject.clone(), ev.encode(1 << 20).unwrap()).await;
    wait_metric(&hub, "reason=\"clustername_mismatch\"").await;

    // 5. A forged shard token.
    let wrong = (subjects::shard("victim") + 1) % subjects::SHARDS;
    let ev = Event::new(types::cluster_status(), "attacker", "victim", &forged);
    publish(
        format!("flotilla.status.{wrong}.victim.cluster"),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    wait_metric(&hub, "reason=\"bad_subject\"").await;

    // 6. Invalid claims in a status report.
    let bad_claims = ClusterStatusReport {
        cluster_name: "victim".into(),
        healthy: false,
        claims: vec![flotilla_api::v1::ClusterClaim {
            name: "x".into(),
            value: String::new(),
        }],
        ..Default::default()
    };
    let ev = Event::new(types::cluster_status(), "attacker", "victim", &bad_claims)
        .with_sequence(u64::MAX - 1);
    publish(cluster_subject.clone(), ev.encode(1 << 20).unwrap()).await;
    wait_metric(&hub, "reason=\"invalid_status\"").await;

    // 7. Add-on health with a reason OCM never pairs with its status.
    let bad_health = ClusterStatusReport {
        cluster_name: "victim".into(),
        healthy: false,
        addon_health: vec![flotilla_api::v1::AddOnHealth {
            addon: "helloworld".into(),
            install_namespace: "default".into(),
            status: "True".into(),
            reason: "Trust me".into(),
            message: String::new(),
        }],
        ..Default::default()
    };
    let ev = Event::new(types::cluster_status(), "attacker", "victim", &bad_health)
        .with_sequence(u64::MAX - 1);
    publish(cluster_subject.clone(), ev.encode(1 << 20).unwrap()).await;
    wait_metric(&hub, "reason=\"invalid_status\"} 2").await;

    // Nothing was stored: same revision, still healthy and available.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = get(&mut api, "victim").await.unwrap();
    assert_eq!(
        after.metadata.as_ref().unwrap().resource_version,
        rv,
        "bad input changed the stored cluster"
    );
    assert_eq!(available(&after).as_deref(), Some("True"));
    agent.stop().await;
    hub.stop().await;
}

/// Every request subject answers bad input at once, saying what was wrong, instead of leaving
/// the agent to wait for its timeout.
#[tokio::test]
async fn malformed_spec_resync_requests_are_answered_with_the_reason() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let resync_answer = |subject: &'static str, payload: Bytes| {
        let client = client.clone();
        async move {
            let reply = tokio::time::timeout(SOON, client.request(subject, payload))
                .await
                .expect("answered in time, not left to time out")
                .expect("reply");
            Event::decode(&reply.payload, 1 << 20)
                .unwrap()
                .decode_data::<flotilla_api::v1::SpecResyncResponse>("SpecResyncResponse")
                .unwrap()
        }
    };
    let r = resync_answer("flotilla.sync.edge-1", Bytes::from_static(b"\x00garbage")).await;
    assert!(!r.error.is_empty(), "{r:?}");
    let req = flotilla_api::v1::SpecResyncRequest {
        cluster_name: "edge-2".into(),
        ..Default::default()
    };
    let forged = Event::new(
        flotilla_bus::works::resync_request_type(),
        "x",
        "edge-2",
        &req,
    );
    let r = resync_answer("flotilla.sync.edge-1", forged.encode(1 << 20).unwrap()).await;
    assert!(r.error.contains("does not match the subject"), "{r:?}");
    let unknown = Event::new(
        flotilla_bus::works::resync_request_type(),
        "x",
        "edge-1",
        &req,
    );
    let r = resync_answer("flotilla.sync.edge-1", unknown.encode(1 << 20).unwrap()).await;
    assert!(r.error.contains("not registered"), "{r:?}");
    hub.stop().await;
}

#[tokio::test]
async fn bad_registrations_are_answered_with_the_field_at_fault() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let client = async_nats::connect(nats.url()).await.unwrap();

    // Invalid cluster name in the event.
    let req = RegistrationRequest {
        cluster_name: "Bad_Name".into(),
        agent_version: flotilla_api::version::VERSION.into(),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "x", "Bad_Name", &req);
    let resp = request(
        &client,
        "flotilla.register.Bad_Name".into(),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Rejected as i32);
    assert!(resp.message.contains("clustername"), "{}", resp.message);

    // Valid envelope, but the subject names another cluster.
    let req = RegistrationRequest {
        cluster_name: "a".into(),
        agent_version: flotilla_api::version::VERSION.into(),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "x", "a", &req);
    let resp = request(
        &client,
        subjects::register("b"),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Rejected as i32);
    assert!(
        resp.message.contains("does not match subject"),
        "{}",
        resp.message
    );

    // Too many custom claims.
    let req = RegistrationRequest {
        cluster_name: "c".into(),
        agent_version: flotilla_api::version::VERSION.into(),
        claims: (0..25)
            .map(|i| flotilla_api::v1::ClusterClaim {
                name: format!("claim{i}"),
                value: "v".into(),
            })
            .collect(),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "x", "c", &req);
    let resp = request(
        &client,
        subjects::register("c"),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Rejected as i32);
    assert!(resp.message.contains("claims"), "{}", resp.message);

    // No agent version: every Flotilla agent states one.
    let req = RegistrationRequest {
        cluster_name: "f".into(),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "x", "f", &req);
    let resp = request(
        &client,
        subjects::register("f"),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Rejected as i32);
    assert!(
        resp.message
            .starts_with("the registration states no agent version"),
        "{}",
        resp.message
    );

    // Garbage.
    let resp = request(
        &client,
        subjects::register("d"),
        Bytes::from_static(b"garbage"),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Rejected as i32);

    // Wrong event type on the registration subject.
    let ev = Event::new(types::lease_renewal(), "x", "e", &LeaseRenewal::default());
    let resp = request(
        &client,
        subjects::register("e"),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Rejected as i32);
    assert!(resp.message.contains("not accepted"), "{}", resp.message);

    let list = api
        .list_clusters(flotilla_api::v1::ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        list.items.is_empty(),
        "no rejected registration created a cluster: {:?}",
        list.items
    );
    hub.stop().await;
}

#[tokio::test]
async fn status_from_an_unaccepted_cluster_is_not_stored() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let req = RegistrationRequest {
        cluster_name: "pending-1".into(),
        agent_version: flotilla_api::version::VERSION.into(),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "x", "pending-1", &req);
    let resp = request(
        &client,
        subjects::register("pending-1"),
        ev.encode(1 << 20).unwrap(),
    )
    .await;
    assert_eq!(resp.state, RegistrationState::Pending as i32);
    let before = get(&mut api, "pending-1").await.unwrap();

    let js = jetstream::new(client.clone());
    let report = ClusterStatusReport {
        cluster_name: "pending-1".into(),
        healthy: true,
        capacity: [("cpu".to_string(), "999".to_string())].into(),
        ..Default::default()
    };
    let ev = Event::new(types::cluster_status(), "x", "pending-1", &report).with_sequence(1);
    js.publish_with_headers(
        subjects::status("pending-1", subjects::KIND_CLUSTER, None),
        headers(&ev),
        ev.encode(1 << 20).unwrap(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    wait_metric(&hub, "reason=\"not_accepted\"").await;
    let after = get(&mut api, "pending-1").await.unwrap();
    assert_eq!(after, before);
    hub.stop().await;
}

/// A ManifestWork whose feedback rule has a broken JSONPath is refused by the API, naming the
/// manifest, the rule and the position, and the work already stored under that name is kept.
#[tokio::test]
async fn a_work_with_a_broken_jsonpath_is_refused_and_the_stored_work_kept() {
    use common::work::{get_work, hello, works_client};
    use flotilla_api::v1::{FeedbackRule, JsonPath, ManifestConfigOption, ResourceIdentifier};
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &nats.url(), "edge-1").await;
    let mut works = works_client(&hub).await;
    let good = hello("edge-1", 1);
    works.apply_work(good.clone()).await.expect("valid work");

    let mut bad = hello("edge-1", 2);
    let spec = bad.spec.as_mut().expect("hello has a spec");
    spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: Some(ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "default".into(),
            name: "hello-work-demo".into(),
        }),
        feedback_rules: vec![FeedbackRule {
            r#type: "JSONPaths".into(),
            json_paths: vec![JsonPath {
                name: "available".into(),
                path: r#".status.conditions[?(@.type=="Available""#.into(),
                ..Default::default()
            }],
        }],
        ..Default::default()
    }];
    let err = works
        .apply_work(bad)
        .await
        .expect_err("broken path accepted");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    for part in [
        "spec.manifestConfigs[0].feedbackRules[0].jsonPaths[0].path",
        "deployments.apps default/hello-work-demo",
        "\"available\"",
        "at position 19",
    ] {
        assert!(
            err.message().contains(part),
            "{part} missing: {}",
            err.message()
        );
    }
    let stored = get_work(&mut works, "edge-1", "hello-work-demo")
        .await
        .expect("the accepted work is still there");
    assert_eq!(
        stored.spec, good.spec,
        "the refused update changed the stored work"
    );
    agent.stop().await;
}

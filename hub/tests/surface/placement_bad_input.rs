//! Bad placement and score input: the API answers `INVALID_ARGUMENT` naming the field, or
//! accepts what OCM accepts and reports `PlacementMisconfigured` naming the field (keeping the
//! existing decisions); bad score reports from the wire are rejected, counted, and stored nowhere.

use crate::common;

use async_nats::jetstream;
use bytes::Bytes;
use common::*;
use flotilla_api::meta;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ClusterPredicate,
    ClusterSelector, LabelSelector, LabelSelectorRequirement, ListScoresRequest, ObjectMeta,
    Placement, PlacementRef, PlacementSpec, PrioritizerConfig, PrioritizerPolicy, ScoreCoordinate,
    Toleration,
};
use flotilla_bus::envelope::headers;
use flotilla_bus::scores;
use flotilla_testkit::{NatsServer, eventually};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};
use tonic::Code;
use tonic::transport::Channel;

const NS: &str = "apps";

fn placement(name: &str, spec: PlacementSpec) -> Placement {
    Placement {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: NS.into(),
            ..Default::default()
        }),
        spec: Some(spec),
        status: None,
    }
}

fn prioritizer(built_in: &str, weight: i32) -> PlacementSpec {
    PlacementSpec {
        prioritizer_policy: Some(PrioritizerPolicy {
            mode: String::new(),
            configurations: vec![PrioritizerConfig {
                score_coordinate: Some(ScoreCoordinate {
                    r#type: "BuiltIn".into(),
                    built_in: built_in.into(),
                    add_on: None,
                }),
                weight: Some(weight),
            }],
        }),
        ..Default::default()
    }
}

fn misconfigured(p: &Placement) -> Option<String> {
    p.status
        .as_ref()
        .and_then(|s| meta::find_condition(&s.conditions, "PlacementMisconfigured"))
        .filter(|c| c.status == "True")
        .map(|c| c.message.clone())
}

async fn decided(client: &mut PlacementServiceClient<Channel>, name: &str) -> BTreeSet<String> {
    decided_clusters(client, NS, name).await
}

#[tokio::test]
async fn invalid_specs_are_rejected_naming_the_field_and_misconfigured_ones_keep_decisions() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.families.placement.debounce = Duration::from_millis(20);
    let hub = start_hub(config).await;
    let mut api = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();

    // Rejected outright (OCM's schema rejects these too).
    let rejected = [
        (
            prioritizer("Balance", 11),
            "spec.prioritizerPolicy.configurations[0].weight",
        ),
        (
            prioritizer("Balance", -11),
            "spec.prioritizerPolicy.configurations[0].weight",
        ),
        (
            PlacementSpec {
                tolerations: vec![Toleration {
                    key: "gpu".into(),
                    effect: "Sometimes".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            "spec.tolerations[0].effect",
        ),
        (
            PlacementSpec {
                tolerations: vec![Toleration {
                    key: "Bad Key".into(),
                    operator: "Exists".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            "spec.tolerations[0].key",
        ),
    ];
    for (spec, field) in rejected {
        let err = api
            .apply_placement(placement("bad", spec))
            .await
            .expect_err("rejected");
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(err.message().contains(field), "{field}: {}", err.message());
    }
    let mut bad_name = placement("Bad_Name", PlacementSpec::default());
    let err = api.apply_placement(bad_name.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("metadata.name"), "{}", err.message());
    bad_name.metadata.as_mut().unwrap().name = "ok".into();
    bad_name.metadata.as_mut().unwrap().namespace = String::new();
    let err = api.apply_placement(bad_name).await.unwrap_err();
    assert!(
        err.message().contains("metadata.namespace"),
        "{}",
        err.message()
    );
    let err = api
        .get_placement(PlacementRef {
            namespace: NS.into(),
            name: "bad".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "nothing rejected was stored");

    // Accepted and reported as PlacementMisconfigured, as OCM does.
    let bad_operator = PlacementSpec {
        predicates: vec![ClusterPredicate {
            required_cluster_selector: Some(ClusterSelector {
                label_selector: Some(LabelSelector {
                    match_labels: Default::default(),
                    match_expressions: vec![LabelSelectorRequirement {
                        key: "env".into(),
                        operator: "Like".into(),
                        values: vec!["prod".into()],
                    }],
                }),
                claim_selector: None,
            }),
        }],
        ..Default::default()
    };
    let exists_with_value = PlacementSpec {
        tolerations: vec![Toleration {
            key: "gpu".into(),
            operator: "Exists".into(),
            value: "true".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let misconfigured_specs = [
        (
            prioritizer("Cheapest", 1),
            "spec.prioritizerPolicy.configurations[0].scoreCoordinate.builtIn",
        ),
        (
            PlacementSpec {
                prioritizer_policy: Some(PrioritizerPolicy {
                    mode: "Sometimes".into(),
                    configurations: vec![],
                }),
                ..Default::default()
            },
            "spec.prioritizerPolicy.mode",
        ),
        (
            // OCM's CRD sets no minimum (and OCM's scheduler then fails on every run).
            PlacementSpec {
                number_of_clusters: Some(-1),
                ..Default::default()
            },
            "spec.numberOfClusters",
        ),
        (
            bad_operator,
            "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[0].operator",
        ),
        (exists_with_value, "spec.tolerations[0].value"),
    ];
    for (i, (spec, field)) in misconfigured_specs.into_iter().enumerate() {
        let p = api
            .apply_placement(placement(&format!("odd-{i}"), spec))
            .await
            .expect("accepted like OCM does")
            .into_inner();
        let message = misconfigured(&p).unwrap_or_else(|| panic!("{field}: {p:#?}"));
        assert!(message.contains(field), "{field}: {message}");
    }

    // A working placement that becomes misconfigured keeps its decisions.
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &nats.url(), "c1").await;
    bind_set(&hub, NS, "default").await;
    let good = api
        .apply_placement(placement("keep", PlacementSpec::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        decided(&mut api, "keep").await,
        BTreeSet::from(["c1".to_string()])
    );
    let stale_rv = good.metadata.as_ref().unwrap().resource_version;
    let p = api
        .apply_placement(placement("keep", prioritizer("Cheapest", 1)))
        .await
        .unwrap()
        .into_inner();
    assert!(misconfigured(&p).is_some());
    assert_eq!(
        decided(&mut api, "keep").await,
        BTreeSet::from(["c1".to_string()]),
        "a misconfigured spec keeps the existing decisions"
    );
    // A stale resourceVersion is ABORTED.
    let mut stale = placement("keep", PlacementSpec::default());
    stale.metadata.as_mut().unwrap().resource_version = stale_rv;
    let err = api.apply_placement(stale).await.unwrap_err();
    assert_eq!(err.code(), Code::Aborted, "{err:?}");
    let err = api
        .delete_placement(PlacementRef {
            namespace: NS.into(),
            name: "ghost".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    agent.stop().await;
    hub.stop().await;
}

/// OCM YAML as users write it: OCM's CRD accepts a string `clustersPerDecisionGroup` that is not
/// a percentage and any prioritizer mode, and its scheduler then reports the placement
/// misconfigured naming the field; a string off the CRD's pattern is rejected at the API.
const OCM_ODDITIES: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: quoted-count, namespace: apps}
spec:
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: "3"
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: fancy-mode, namespace: apps}
spec:
  prioritizerPolicy:
    mode: Fancy
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: number-count, namespace: apps}
spec:
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: 3
  tolerations:
    - key: gpu
      operator: Like
      tolerationSeconds: -5
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: off-pattern, namespace: apps}
spec:
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: "0%"
"#;

#[tokio::test]
async fn ocm_yaml_string_group_count_and_unknown_mode_are_accepted_and_misconfigured() {
    use flotilla_api::ocm::{Document, parse_documents};
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let docs: Vec<Placement> = parse_documents(OCM_ODDITIES)
        .into_iter()
        .map(|d| match d {
            Ok(Document::Placement(p)) => p,
            other => panic!("{other:?}"),
        })
        .collect();
    let mut applied = Vec::new();
    for p in &docs[..3] {
        let p = tokio::time::timeout(SOON, api.apply_placement(p.clone()))
            .await
            .unwrap()
            .expect("accepted like OCM does")
            .into_inner();
        applied.push(p);
    }
    let message = misconfigured(&applied[0]).expect("quoted count is misconfigured");
    assert!(
        message.contains("spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup")
            && message.contains("\"3\" is a string but not a percentage"),
        "{message}"
    );
    let message = misconfigured(&applied[1]).expect("unknown mode is misconfigured");
    assert!(
        message.contains("spec.prioritizerPolicy.mode: unknown mode \"Fancy\""),
        "{message}"
    );
    assert_eq!(
        misconfigured(&applied[2]),
        None,
        "a number is a count; an unknown toleration operator and negative seconds are accepted"
    );
    // The stored placement still knows "3" was a string.
    let stored = api
        .get_placement(PlacementRef {
            namespace: NS.into(),
            name: "quoted-count".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let groups = stored
        .spec
        .unwrap()
        .decision_strategy
        .unwrap()
        .group_strategy
        .unwrap();
    assert!(groups.clusters_per_decision_group_is_string);

    let err = api.apply_placement(docs[3].clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup"),
        "{}",
        err.message()
    );
    hub.stop().await;
}

fn score(cluster: &str, value: i32) -> AddOnPlacementScore {
    AddOnPlacementScore {
        metadata: Some(ObjectMeta {
            name: "usage".into(),
            namespace: cluster.into(),
            ..Default::default()
        }),
        status: Some(AddOnPlacementScoreStatus {
            conditions: vec![],
            scores: vec![AddOnPlacementScoreItem {
                name: "cpu".into(),
                value,
            }],
            valid_until: None,
        }),
    }
}

#[tokio::test]
async fn bad_scores_from_the_api_and_the_wire_are_rejected_counted_and_not_stored() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let mut clusters = clusters_client(&hub).await;
    let agent = start_agent(agent_config("c1", &nats.url()));
    let pending = start_agent(agent_config("pending", &nats.url()));
    wait_cluster(&mut clusters, "c1", "registered", |_| true).await;
    wait_cluster(&mut clusters, "pending", "registered", |_| true).await;
    accept(&mut clusters, "c1").await;
    wait_cluster(&mut clusters, "c1", "Available", |c| taints(c).is_empty()).await;

    // API: out-of-range value, unknown cluster.
    let err = api.apply_score(score("c1", 150)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("status.scores[0].value"),
        "{}",
        err.message()
    );
    let err = api.apply_score(score("ghost", 5)).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    // Wire: forged, invalid and unaccepted reports.
    let js = jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let item = |v: i32| AddOnPlacementScoreItem {
        name: "cpuAvailable".into(),
        value: v,
    };
    let until = SystemTime::now() + Duration::from_secs(600);
    let send = |subject: String, ev: flotilla_bus::Event| {
        let js = js.clone();
        async move {
            let bytes = ev.encode(1 << 20).unwrap();
            js.publish_with_headers(subject, headers(&ev), bytes)
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    let ty = scores::report_type().to_string();
    // 1. c2 claims to be c1: clustername does not match the subject's cluster.
    let forged = flotilla_sim::scores::report_event("c2", vec![item(10)], until, 1);
    send(flotilla_sim::scores::report_subject("c1"), forged).await;
    wait_metric(
        &hub,
        &format!(r#"type="{ty}",reason="clustername_mismatch""#),
    )
    .await;
    // 2. Value outside [-100, 100].
    let out_of_range = flotilla_sim::scores::report_event("c1", vec![item(500)], until, 2);
    send(flotilla_sim::scores::report_subject("c1"), out_of_range).await;
    wait_metric(&hub, &format!(r#"type="{ty}",reason="invalid_status""#)).await;
    // 3. A cluster the admin has not accepted.
    let unaccepted = flotilla_sim::scores::report_event("pending", vec![item(10)], until, 3);
    send(flotilla_sim::scores::report_subject("pending"), unaccepted).await;
    wait_metric(&hub, &format!(r#"type="{ty}",reason="not_accepted""#)).await;
    // 4. Not a score report at all on a score subject.
    js.publish(
        flotilla_sim::scores::report_subject("c1"),
        Bytes::from_static(b"junk"),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    wait_metric(&hub, r#"type="unknown",reason="decode""#).await;

    let stored = api
        .list_scores(ListScoresRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items;
    assert!(stored.is_empty(), "nothing bad was stored: {stored:#?}");

    // A good report after all that is stored.
    let good = flotilla_sim::scores::report_event("c1", vec![item(42)], until, 4);
    send(flotilla_sim::scores::report_subject("c1"), good).await;
    let stored = eventually(SOON, "the good report stored", || {
        let mut c = api.clone();
        async move {
            let items = c
                .list_scores(ListScoresRequest::default())
                .await
                .ok()?
                .into_inner()
                .items;
            (!items.is_empty()).then_some(items)
        }
    })
    .await;
    assert_eq!(stored[0].status.as_ref().unwrap().scores[0].value, 42);
    // An older report (lower sequenceid) does not overwrite it.
    let old = flotilla_sim::scores::report_event("c1", vec![item(-42)], until, 3);
    send(flotilla_sim::scores::report_subject("c1"), old).await;
    let newer = flotilla_sim::scores::report_event("c1", vec![item(7)], until, 5);
    send(flotilla_sim::scores::report_subject("c1"), newer).await;
    eventually(SOON, "the newest report stored", || {
        let mut c = api.clone();
        async move {
            let items = c
                .list_scores(ListScoresRequest::default())
                .await
                .ok()?
                .into_inner()
                .items;
            (items[0].status.as_ref()?.scores[0].value == 7).then_some(())
        }
    })
    .await;
    agent.stop().await;
    pending.stop().await;
    hub.stop().await;
}

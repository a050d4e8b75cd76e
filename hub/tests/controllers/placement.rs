//! Placement against a real nats-server, an in-process hub and in-process agents: decisions
//! follow label changes, unreachable clusters are dropped unless tolerated (and exactly when a
//! toleration runs out), scores steer and expire, a hub restart keeps decisions, simulated
//! clusters report scores over NATS.

use crate::common;

use common::*;
use flotilla_api::meta::{self, TAINT_UNREACHABLE};
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, AddOnScoreCoordinate,
    ClusterPredicate, ClusterSelector, EventType, LabelSelector, ListScoresRequest,
    ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ObjectMeta, Placement, PlacementRef,
    PlacementSpec, PrioritizerConfig, PrioritizerPolicy, ScoreCoordinate, Toleration,
    WatchPlacementsRequest,
};
use flotilla_hub::Hub;
use flotilla_testkit::{NatsServer, eventually};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};
use tonic::transport::Channel;

const NS: &str = "apps";

fn config(nats: &NatsServer) -> flotilla_hub::Config {
    let mut c = hub_config(&nats.url());
    c.families.placement.debounce = Duration::from_millis(20);
    c
}

async fn placements_client(hub: &Hub) -> PlacementServiceClient<Channel> {
    PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .expect("connect to the hub's gRPC API")
}

async fn bind(hub: &Hub, namespace: &str, set: &str) {
    sets_client(hub)
        .await
        .apply_binding(ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: set.into(),
                namespace: namespace.into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetBindingSpec {
                cluster_set: set.into(),
            }),
            status: None,
        })
        .await
        .expect("bind the set");
}

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

fn labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        match_expressions: vec![],
    }
}

fn predicate(sel: LabelSelector) -> ClusterPredicate {
    ClusterPredicate {
        required_cluster_selector: Some(ClusterSelector {
            label_selector: Some(sel),
            claim_selector: None,
        }),
    }
}

fn unreachable_toleration(seconds: Option<i64>) -> Toleration {
    Toleration {
        key: TAINT_UNREACHABLE.into(),
        operator: "Exists".into(),
        toleration_seconds: seconds,
        ..Default::default()
    }
}

async fn decided(client: &mut PlacementServiceClient<Channel>, name: &str) -> BTreeSet<String> {
    decided_clusters(client, NS, name).await
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

async fn wait_decided(
    client: &mut PlacementServiceClient<Channel>,
    name: &str,
    want: &[&str],
) -> SystemTime {
    let want = set(want);
    eventually(SOON, &format!("{name} to decide {want:?}"), || {
        let mut c = client.clone();
        let want = want.clone();
        async move { (decided(&mut c, name).await == want).then(SystemTime::now) }
    })
    .await
}

/// Agents for `names`, accepted and Available.
async fn fleet(hub: &Hub, nats: &NatsServer, names: &[&str]) -> Vec<TestAgent> {
    accepted_fleet(&mut clusters_client(hub).await, &nats.url(), names).await
}

fn condition(p: &Placement, ty: &str) -> Option<(String, String)> {
    p.status
        .as_ref()
        .and_then(|s| meta::find_condition(&s.conditions, ty))
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test]
async fn a_cluster_gaining_a_label_joins_the_decisions_and_watchers_see_it() {
    let nats = NatsServer::start();
    let hub = start_hub(config(&nats)).await;
    let agents = fleet(&hub, &nats, &["c1", "c2", "c3"]).await;
    bind(&hub, NS, "default").await;
    let mut api = placements_client(&hub).await;
    let mut internal = hub.placements().subscribe();

    let applied = api
        .apply_placement(placement(
            "web",
            PlacementSpec {
                predicates: vec![predicate(labels(&[("env", "prod")]))],
                ..Default::default()
            },
        ))
        .await
        .expect("apply")
        .into_inner();
    // Scheduled before the answer: nothing matches yet.
    assert_eq!(
        condition(&applied, "PlacementSatisfied"),
        Some(("False".into(), "NoManagedClusterMatched".into()))
    );
    assert_eq!(
        condition(&applied, "PlacementMisconfigured"),
        Some(("False".into(), "Succeedconfigured".into()))
    );
    let mut watch = api
        .watch_placements(WatchPlacementsRequest {
            namespace: NS.into(),
            name: "web".into(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = tokio::time::timeout(SOON, watch.message())
        .await
        .expect("initial watch event in time")
        .expect("watch stream")
        .expect("an event");
    assert_eq!(first.r#type, EventType::Added as i32);

    label(&hub, "c2", &[("env", "prod")], &[]).await;
    wait_decided(&mut api, "web", &["c2"]).await;
    label(&hub, "c3", &[("env", "prod")], &[]).await;
    wait_decided(&mut api, "web", &["c2", "c3"]).await;
    label(&hub, "c2", &[], &["env"]).await;
    wait_decided(&mut api, "web", &["c3"]).await;

    // The watch saw the decisions change, in order.
    let mut seen = vec![BTreeSet::new()];
    assert!(
        first
            .decisions
            .iter()
            .all(|d| d.status.clone().unwrap_or_default().decisions.is_empty())
    );
    while seen.last() != Some(&set(&["c3"])) {
        let ev = tokio::time::timeout(SOON, watch.message())
            .await
            .expect("watch event in time")
            .expect("watch stream")
            .expect("an event");
        let clusters: BTreeSet<String> = ev
            .decisions
            .iter()
            .flat_map(|d| d.status.clone().unwrap_or_default().decisions)
            .map(|c| c.cluster_name)
            .collect();
        if seen.last() != Some(&clusters) {
            seen.push(clusters);
        }
    }
    assert_eq!(
        seen,
        vec![set(&[]), set(&["c2"]), set(&["c2", "c3"]), set(&["c3"])]
    );
    // Internal subscribers (replica sets, next) get the same changes.
    let mut internal_saw_c3 = false;
    while let Ok(change) = internal.try_recv() {
        internal_saw_c3 |= change.object.clusters() == set(&["c3"]);
    }
    assert!(internal_saw_c3, "internal subscribers see decision changes");

    let p = api
        .get_placement(PlacementRef {
            namespace: NS.into(),
            name: "web".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p.status.as_ref().unwrap().number_of_selected_clusters, 1);
    assert_eq!(
        condition(&p, "PlacementSatisfied"),
        Some(("True".into(), "AllDecisionsScheduled".into()))
    );
    let pages = api
        .list_decisions(PlacementRef {
            namespace: NS.into(),
            name: "web".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    let m = pages[0].metadata.as_ref().unwrap();
    assert_eq!(m.name, "web-decision-1");
    assert_eq!(
        m.labels["cluster.open-cluster-management.io/placement"],
        "web"
    );
    assert_eq!(
        m.labels["cluster.open-cluster-management.io/decision-group-index"],
        "0"
    );
    let text = metrics_text(&hub).await;
    assert!(
        text.contains("flotilla_hub_placement_schedules_total"),
        "{text}"
    );
    assert!(
        text.contains("flotilla_hub_placement_schedule_seconds"),
        "{text}"
    );
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn an_unreachable_cluster_is_dropped_unless_tolerated_and_when_its_toleration_runs_out() {
    let nats = NatsServer::start();
    let hub = start_hub(config(&nats)).await;
    let mut agents = fleet(&hub, &nats, &["c1", "c2"]).await;
    bind(&hub, NS, "default").await;
    let mut api = placements_client(&hub).await;
    const TOLERATION: i64 = 4;
    for (name, tolerations) in [
        ("plain", vec![]),
        ("tolerant", vec![unreachable_toleration(None)]),
        ("timed", vec![unreachable_toleration(Some(TOLERATION))]),
    ] {
        api.apply_placement(placement(
            name,
            PlacementSpec {
                tolerations,
                ..Default::default()
            },
        ))
        .await
        .expect("apply");
        wait_decided(&mut api, name, &["c1", "c2"]).await;
    }

    // c2's agent stops: after 3 lease periods the hub taints it unreachable.
    let c2 = agents.pop().unwrap();
    c2.stop().await;
    let mut clusters = clusters_client(&hub).await;
    let tainted = wait_cluster(&mut clusters, "c2", "unreachable", |c| {
        taints(c).iter().any(|t| t == TAINT_UNREACHABLE)
    })
    .await;
    let added = tainted
        .spec
        .as_ref()
        .unwrap()
        .taints
        .iter()
        .find(|t| t.key == TAINT_UNREACHABLE)
        .and_then(|t| t.time_added.as_ref())
        .map(meta::system_time)
        .expect("the hub stamps timeAdded");

    wait_decided(&mut api, "plain", &["c1"]).await;
    // Within the toleration both tolerating placements keep c2.
    assert_eq!(decided(&mut api, "tolerant").await, set(&["c1", "c2"]));
    assert_eq!(decided(&mut api, "timed").await, set(&["c1", "c2"]));

    let dropped = wait_decided(&mut api, "timed", &["c1"]).await;
    let expiry = added + Duration::from_secs(TOLERATION as u64);
    assert!(
        dropped >= expiry,
        "dropped {:?} before the toleration expired",
        expiry.duration_since(dropped).unwrap_or_default()
    );
    assert!(
        dropped <= expiry + Duration::from_secs(2),
        "dropped {:?} after the toleration expired: not re-evaluated on time",
        dropped.duration_since(expiry).unwrap_or_default()
    );
    assert_eq!(
        decided(&mut api, "tolerant").await,
        set(&["c1", "c2"]),
        "a toleration without tolerationSeconds holds forever"
    );
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn a_hub_restart_keeps_every_decision_unchanged() {
    let nats = NatsServer::start();
    let hub = start_hub(config(&nats)).await;
    let agents = fleet(&hub, &nats, &["c1", "c2", "c3"]).await;
    bind(&hub, NS, "default").await;
    let mut api = placements_client(&hub).await;
    api.apply_placement(placement(
        "two",
        PlacementSpec {
            number_of_clusters: Some(2),
            ..Default::default()
        },
    ))
    .await
    .expect("apply");
    api.apply_placement(placement("all", PlacementSpec::default()))
        .await
        .expect("apply");
    wait_decided(&mut api, "all", &["c1", "c2", "c3"]).await;
    let before_two = decided(&mut api, "two").await;
    assert_eq!(before_two.len(), 2);
    let pages_before = |name: &'static str| {
        let mut c = api.clone();
        async move {
            c.list_decisions(PlacementRef {
                namespace: NS.into(),
                name: name.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .items
        }
    };
    let two_pages = pages_before("two").await;
    let all_pages = pages_before("all").await;
    hub.stop().await;

    let hub = start_hub(config(&nats)).await;
    let mut api = placements_client(&hub).await;
    // Both actors reconcile once at start; nothing is rewritten.
    eventually(
        SOON,
        "both placements to reconcile after the restart",
        || {
            let m = hub.placements().metrics().clone();
            async move { (m.schedule_count() >= 2).then_some(()) }
        },
    )
    .await;
    let get_pages = |name: &'static str| {
        let mut c = api.clone();
        async move {
            c.list_decisions(PlacementRef {
                namespace: NS.into(),
                name: name.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .items
        }
    };
    assert_eq!(
        get_pages("two").await,
        two_pages,
        "pages and their revisions unchanged"
    );
    assert_eq!(get_pages("all").await, all_pages);
    assert_eq!(hub.placements().metrics().outcome_count("changed"), 0);
    assert_eq!(decided(&mut api, "two").await, before_two);
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

fn score(cluster: &str, value: i32, valid_until: Option<SystemTime>) -> AddOnPlacementScore {
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
            valid_until: valid_until.map(meta::timestamp),
        }),
    }
}

#[tokio::test]
async fn addon_scores_steer_decisions_and_expire_at_valid_until() {
    let nats = NatsServer::start();
    let hub = start_hub(config(&nats)).await;
    let agents = fleet(&hub, &nats, &["c1", "c2", "c3"]).await;
    bind(&hub, NS, "default").await;
    let mut api = placements_client(&hub).await;
    let expires = SystemTime::now() + Duration::from_secs(3);
    for (c, v, until) in [
        ("c1", 10, None),
        ("c2", 90, Some(expires)),
        ("c3", 50, None),
    ] {
        api.apply_score(score(c, v, until))
            .await
            .expect("apply score");
    }
    api.apply_placement(placement(
        "best",
        PlacementSpec {
            number_of_clusters: Some(1),
            prioritizer_policy: Some(PrioritizerPolicy {
                mode: "Exact".into(),
                configurations: vec![PrioritizerConfig {
                    score_coordinate: Some(ScoreCoordinate {
                        r#type: "AddOn".into(),
                        built_in: String::new(),
                        add_on: Some(AddOnScoreCoordinate {
                            resource_name: "usage".into(),
                            score_name: "cpu".into(),
                        }),
                    }),
                    weight: Some(1),
                }],
            }),
            ..Default::default()
        },
    ))
    .await
    .expect("apply");
    wait_decided(&mut api, "best", &["c2"]).await;
    // c2's score expires: it counts as 0, c3 (50) wins — exactly then, by the requeue timer.
    let moved = wait_decided(&mut api, "best", &["c3"]).await;
    assert!(moved >= expires, "moved before validUntil");
    assert!(
        moved <= expires + Duration::from_secs(2),
        "moved long after validUntil"
    );
    // A score change reschedules the placements that use it.
    api.apply_score(score("c1", 100, None))
        .await
        .expect("apply score");
    wait_decided(&mut api, "best", &["c1"]).await;
    let listed = api
        .list_scores(ListScoresRequest {
            cluster: "c1".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status.as_ref().unwrap().scores[0].value, 100);
    // The debug view shows the AddOn scores per cluster.
    let debug = api
        .debug_placement(PlacementRef {
            namespace: NS.into(),
            name: "best".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let c3 = debug.clusters.iter().find(|c| c.name == "c3").unwrap();
    assert_eq!(c3.scores[0].prioritizer, "AddOn/usage/cpu");
    assert_eq!(c3.scores[0].score, 50);
    assert!(c3.filters.iter().all(|f| f.passed));
    assert!(
        debug
            .clusters
            .iter()
            .find(|c| c.name == "c1")
            .unwrap()
            .selected
    );
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn simulated_clusters_report_cpu_and_memory_scores_over_nats() {
    let nats = NatsServer::start();
    let mut cfg = config(&nats);
    cfg.cluster.auto_accept.enabled = true;
    let hub = start_hub(cfg).await;
    let mut fleet_cfg = flotilla_sim::FleetConfig::new(&nats.url(), 2);
    fleet_cfg.pending_poll = Duration::from_millis(300);
    fleet_cfg.status_interval = Duration::from_millis(300);
    fleet_cfg.scores = Some(flotilla_sim::scores::ScoreConfig::every(
        Duration::from_millis(300),
    ));
    let sims = flotilla_sim::Fleet::start(&fleet_cfg)
        .await
        .expect("fleet started");
    let api = placements_client(&hub).await;
    let scores = eventually(SOON, "both simulated clusters' scores", || {
        let mut c = api.clone();
        async move {
            let items = c
                .list_scores(ListScoresRequest::default())
                .await
                .ok()?
                .into_inner()
                .items;
            (items.len() == 2).then_some(items)
        }
    })
    .await;
    for s in &scores {
        let m = s.metadata.as_ref().unwrap();
        assert_eq!(m.name, flotilla_sim::scores::RESOURCE_NAME);
        let st = s.status.as_ref().unwrap();
        let names: Vec<&str> = st.scores.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["cpuAvailable", "memAvailable"]);
        assert!(st.scores.iter().all(|i| (-100..=100).contains(&i.value)));
        assert!(
            st.valid_until.as_ref().map(meta::system_time).unwrap() > SystemTime::now(),
            "validUntil lies ahead"
        );
    }
    sims.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn placement_service_answers_health_checks_and_reflection() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let nats = NatsServer::start();
    let hub = start_hub(config(&nats)).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let status = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "flotilla.v1.PlacementService".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::Serving as i32);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(
            "flotilla.v1.PlacementService".into(),
        )),
    };
    let msg = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap()
        .unwrap();
    let Some(MessageResponse::FileDescriptorResponse(files)) = msg.message_response else {
        panic!("unexpected reflection answer: {msg:?}")
    };
    assert!(
        !files.file_descriptor_proto.is_empty(),
        "grpcurl can describe PlacementService"
    );
    hub.stop().await;
}

/// OCM's CEL predicate as its documentation writes it (plus the Kubernetes version).
const CEL_YAML: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: cel
  namespace: apps
spec:
  predicates:
    - requiredClusterSelector:
        celSelector:
          celExpressions:
            - managedCluster.metadata.labels["version"].matches('^1\\.(14|15)\\.\\d+$')
            - managedCluster.scores("resource-usage-score").filter(s, s.name == 'memNodeAvailable').all(e, e.value > 0)
            - managedCluster.status.version.kubernetes == "v1.30.2"
"#;

fn usage_score(cluster: &str, mem: i32) -> AddOnPlacementScore {
    AddOnPlacementScore {
        metadata: Some(ObjectMeta {
            name: "resource-usage-score".into(),
            namespace: cluster.into(),
            ..Default::default()
        }),
        status: Some(AddOnPlacementScoreStatus {
            conditions: vec![],
            scores: vec![AddOnPlacementScoreItem {
                name: "memNodeAvailable".into(),
                value: mem,
            }],
            valid_until: None,
        }),
    }
}

fn parse_placement(yaml: &str) -> Placement {
    use flotilla_api::ocm::{Document, parse_documents};
    match parse_documents(yaml).remove(0) {
        Ok(Document::Placement(p)) => p,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn cel_selectors_from_ocm_yaml_select_clusters_and_a_bad_expression_is_misconfigured() {
    let nats = NatsServer::start();
    let hub = start_hub(config(&nats)).await;
    let agents = fleet(&hub, &nats, &["c1", "c2", "c3"]).await;
    bind(&hub, NS, "default").await;
    label(&hub, "c1", &[("version", "1.14.3")], &[]).await;
    label(&hub, "c2", &[("version", "1.16.0")], &[]).await;
    label(&hub, "c3", &[("version", "1.15.1")], &[]).await;
    let mut api = placements_client(&hub).await;
    for (c, mem) in [("c1", 40), ("c2", 40), ("c3", -10)] {
        api.apply_score(usage_score(c, mem))
            .await
            .expect("apply score");
    }
    let applied = api
        .apply_placement(parse_placement(CEL_YAML))
        .await
        .expect("a CEL placement is accepted")
        .into_inner();
    assert_eq!(
        condition(&applied, "PlacementMisconfigured").map(|c| c.0),
        Some("False".into())
    );
    // c2's version label does not match, c3's memory score is not positive.
    wait_decided(&mut api, "cel", &["c1"]).await;
    // A CEL placement reads every label: relabelling c2 brings it in.
    label(&hub, "c2", &[("version", "1.15.0")], &[]).await;
    wait_decided(&mut api, "cel", &["c1", "c2"]).await;
    // And the scores it names: c3's memory recovering brings it in too.
    api.apply_score(usage_score("c3", 5)).await.unwrap();
    wait_decided(&mut api, "cel", &["c1", "c2", "c3"]).await;

    let bad = CEL_YAML.replace("name: cel", "name: cel-bad").replace(
        r#"labels["version"].matches"#,
        r#"labels["version"].matches("#,
    );
    let p = api
        .apply_placement(parse_placement(&bad))
        .await
        .expect("accepted like OCM does")
        .into_inner();
    let mis = p
        .status
        .as_ref()
        .and_then(|s| meta::find_condition(&s.conditions, "PlacementMisconfigured"))
        .cloned()
        .unwrap();
    assert_eq!(mis.status, "True", "{mis:?}");
    assert!(
        mis.message.contains(
            "spec.predicates[0].requiredClusterSelector.celSelector.celExpressions[0]: \
             compilation failed"
        ),
        "{}",
        mis.message
    );
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

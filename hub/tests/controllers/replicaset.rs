//! ManifestWorkReplicaSets over simulated clusters: progressive rollout one cluster at a time,
//! status summary, clusters leaving the decisions, template updates, bad input.

use crate::common;

use common::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient;
use flotilla_api::v1::{
    GetReplicaSetRequest, LocalPlacementReference, Manifest, ManifestWork, ManifestWorkReplicaSet,
    ManifestWorkReplicaSetSpec, ManifestWorkSpec, ManifestsTemplate, ObjectMeta, RolloutConfig,
    RolloutStrategy,
};
use flotilla_hub::Hub;
use flotilla_hub::replicaset::rules::owner::GITREPO_LABEL;
use flotilla_hub::replicaset::rules::{REPLICASET_LABEL, TEMPLATE_HASH_ANNOTATION};
use flotilla_testkit::NatsServer;
use std::time::Duration;

const PLACEMENT: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: default}
spec:
  clusterSets: [default]
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels: {rollout: "yes"}
"#;

fn replica_set(value: &str, strategy: RolloutStrategy) -> ManifestWorkReplicaSet {
    let cm = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"settings","namespace":"default"}},"data":{{"v":"{value}"}}}}"#
    );
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: "settings".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: vec![Manifest {
                        raw: cm.into_bytes(),
                    }],
                }),
                ..Default::default()
            }),
            placement_refs: vec![LocalPlacementReference {
                name: "edge".into(),
                rollout_strategy: Some(strategy),
            }],
            cascade_deletion_policy: String::new(),
        }),
        status: None,
        hub: None,
    }
}

fn one_at_a_time() -> RolloutStrategy {
    RolloutStrategy {
        r#type: "Progressive".into(),
        progressive: Some(RolloutConfig {
            max_concurrency: "1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn replica_sets(hub: &Hub) -> ReplicaSetServiceClient<tonic::transport::Channel> {
    ReplicaSetServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
}

/// The "settings" replica set as the hub shows it.
async fn settings(
    api: &mut ReplicaSetServiceClient<tonic::transport::Channel>,
) -> ManifestWorkReplicaSet {
    api.get_replica_set(GetReplicaSetRequest {
        namespace: "default".into(),
        name: "settings".into(),
    })
    .await
    .unwrap()
    .into_inner()
}

async fn setup(hub: &Hub, nats: &NatsServer, names: &[&str]) -> Vec<TestAgent> {
    let mut clusters = clusters_client(hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), names).await;
    for n in names {
        label(hub, n, &[("rollout", "yes")], &[]).await;
    }
    bind_set(hub, "default", "default").await;
    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
        .apply_placement(p)
        .await
        .unwrap();
    agents
}

fn my_works(hub: &Hub) -> Vec<std::sync::Arc<ManifestWork>> {
    hub.works
        .snapshot()
        .into_iter()
        .filter(|w| {
            w.metadata.as_ref().is_some_and(|m| {
                m.labels.get(REPLICASET_LABEL).map(String::as_str) == Some("default.settings")
            })
        })
        .map(|w| std::sync::Arc::new(w.to_work()))
        .collect()
}

fn converged(w: &ManifestWork) -> bool {
    common::work::converged_at(w, w.metadata.as_ref().map(|m| m.generation).unwrap_or(0))
}

fn hash(w: &ManifestWork) -> String {
    w.metadata.as_ref().unwrap().annotations[TEMPLATE_HASH_ANNOTATION].clone()
}

#[tokio::test]
async fn a_progressive_rollout_goes_one_cluster_at_a_time_and_follows_the_decisions() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let names = ["edge-1", "edge-2", "edge-3", "edge-4", "edge-5"];
    let agents = setup(&hub, &nats, &names).await;
    let mut api = replica_sets(&hub).await;
    api.apply_replica_set(replica_set("one", one_at_a_time()))
        .await
        .unwrap();

    // Never more than one work in flight (created and not yet converged).
    let deadline = tokio::time::Instant::now() + SOON * 2;
    loop {
        let works = my_works(&hub);
        let in_flight = works.iter().filter(|w| !converged(w)).count();
        assert!(in_flight <= 1, "{in_flight} works in flight at once");
        if works.len() == names.len() && in_flight == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish: {works:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_hash = hash(&my_works(&hub)[0]);

    // The status summarises it as OCM does.
    let deadline = tokio::time::Instant::now() + SOON;
    let rs = loop {
        let rs = settings(&mut api).await;
        let st = rs.status.clone().unwrap_or_default();
        let s = st.summary.unwrap_or_default();
        let rolled_out = flotilla_api::meta::condition_status(&st.conditions, "PlacementRolledOut")
            == Some("True");
        if s.total == 5 && s.available == 5 && rolled_out {
            break rs;
        }
        assert!(tokio::time::Instant::now() < deadline, "status: {st:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let st = rs.status.unwrap();
    assert_eq!(
        flotilla_api::meta::condition_status(&st.conditions, "PlacementVerified"),
        Some("True")
    );
    assert_eq!(st.placement_summaries[0].name, "edge");

    // A cluster leaving the decisions loses its work.
    label(&hub, "edge-4", &[], &["rollout"]).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while my_works(&hub)
        .iter()
        .any(|w| w.metadata.as_ref().unwrap().namespace == "edge-4")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "edge-4 kept its work"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Back in the decisions, it gets the work again.
    label(&hub, "edge-4", &[("rollout", "yes")], &[]).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while !my_works(&hub)
        .iter()
        .any(|w| w.metadata.as_ref().unwrap().namespace == "edge-4" && converged(w))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "edge-4 did not get its work back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    label(&hub, "edge-4", &[], &["rollout"]).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while my_works(&hub)
        .iter()
        .any(|w| w.metadata.as_ref().unwrap().namespace == "edge-4")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "edge-4 kept its work"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Watchers see the replica set with its status.
    let mut watch = api
        .watch_replica_sets(flotilla_api::v1::ListReplicaSetsRequest {
            namespace: "default".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first_event = watch.message().await.unwrap().unwrap();
    let seen = first_event.replica_set.unwrap();
    assert_eq!(seen.metadata.unwrap().name, "settings");
    assert!(seen.status.is_some());

    // A template change rolls out again, one at a time.
    api.apply_replica_set(replica_set("two", one_at_a_time()))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + SOON * 2;
    loop {
        let works = my_works(&hub);
        let new: Vec<_> = works.iter().filter(|w| hash(w) != first_hash).collect();
        let in_flight = works.iter().filter(|w| !converged(w)).count();
        assert!(in_flight <= 1, "{in_flight} works in flight at once");
        if new.len() == 4 && in_flight == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "second rollout did not finish"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Deleting the replica set deletes its works.
    api.delete_replica_set(GetReplicaSetRequest {
        namespace: "default".into(),
        name: "settings".into(),
    })
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    while !my_works(&hub).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "works outlived their replica set"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn bad_replica_sets_are_refused_naming_the_field() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = replica_sets(&hub).await;
    let mut bad = replica_set(
        "x",
        RolloutStrategy {
            r#type: "Progressive".into(),
            progressive: Some(RolloutConfig {
                max_concurrency: "0".into(),
                max_failures: "many".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    bad.spec.as_mut().unwrap().cascade_deletion_policy = "Sometimes".into();
    let err = api.apply_replica_set(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    for field in [
        "spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency",
        "spec.placementRefs[0].rolloutStrategy.progressive.maxFailures",
        "spec.cascadeDeletionPolicy",
    ] {
        assert!(err.message().contains(field), "{field}: {}", err.message());
    }
    // A missing placement is a condition naming it, not a silent nothing.
    api.apply_replica_set(replica_set("x", one_at_a_time()))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let rs = settings(&mut api).await;
        let conds = rs.status.map(|s| s.conditions).unwrap_or_default();
        if let Some(c) = conds.iter().find(|c| c.r#type == "PlacementVerified") {
            assert_eq!(c.status, "False");
            assert!(c.message.contains("edge"), "{c:?}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no PlacementVerified condition"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn pause_resume_and_undo_a_rollout() {
    use flotilla_api::v1::RolloutRequest;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let names = ["edge-1", "edge-2", "edge-3"];
    let agents = setup(&hub, &nats, &names).await;
    let mut api = replica_sets(&hub).await;
    let action = |a: &str| RolloutRequest {
        namespace: "default".into(),
        name: "settings".into(),
        action: a.into(),
    };
    api.apply_replica_set(replica_set("one", one_at_a_time()))
        .await
        .unwrap();
    // Undo with nothing to go back to is refused, naming why.
    let err = api.rollout(action("undo")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("no previous template"),
        "{}",
        err.message()
    );
    let wait_all = |want: usize| {
        let hub = &hub;
        async move {
            let deadline = tokio::time::Instant::now() + SOON * 2;
            loop {
                let works = my_works(hub);
                if works.len() == want && works.iter().all(|w| converged(w)) {
                    return works;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not converged: {works:#?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let first = hash(&wait_all(3).await[0]);

    // A new template, paused at once: no cluster starts it.
    api.apply_replica_set(replica_set("two", one_at_a_time()))
        .await
        .unwrap();
    api.rollout(action("pause")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = my_works(&hub).iter().filter(|w| hash(w) != first).count();
    assert!(started <= 1, "{started} clusters started while paused");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        my_works(&hub).iter().filter(|w| hash(w) != first).count(),
        started,
        "a paused rollout went on"
    );
    // Resume: it completes.
    api.rollout(action("resume")).await.unwrap();
    let deadline = tokio::time::Instant::now() + SOON * 2;
    while !my_works(&hub)
        .iter()
        .all(|w| hash(w) != first && converged(w))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "resumed rollout did not finish"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Undo: back to the first template, everywhere.
    api.rollout(action("undo")).await.unwrap();
    let deadline = tokio::time::Instant::now() + SOON * 2;
    while !my_works(&hub)
        .iter()
        .all(|w| hash(w) == first && converged(w))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "undo did not roll back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn the_canary_group_rolls_out_first() {
    use flotilla_api::v1::MandatoryDecisionGroup;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let names = ["edge-1", "edge-2", "edge-3"];
    let agents = setup(&hub, &nats, &names).await;
    label(&hub, "edge-2", &[("canary", "true")], &[]).await;
    let grouped = PLACEMENT.replace(
        "  predicates:",
        "  decisionStrategy:\n    groupStrategy:\n      decisionGroups:\n        - groupName: canary\n          groupClusterSelector:\n            labelSelector:\n              matchLabels: {canary: \"true\"}\n  predicates:",
    );
    let Ok(Document::Placement(p)) = parse_documents(&grouped).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
        .apply_placement(p)
        .await
        .unwrap();
    let per_group = RolloutStrategy {
        r#type: "ProgressivePerGroup".into(),
        progressive_per_group: Some(RolloutConfig {
            mandatory_decision_groups: vec![MandatoryDecisionGroup {
                group_name: "canary".into(),
                group_index: 0,
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut api = replica_sets(&hub).await;
    api.apply_replica_set(replica_set("one", per_group))
        .await
        .unwrap();
    // The canary alone first; the others only once the canary's work converged.
    let deadline = tokio::time::Instant::now() + SOON * 2;
    loop {
        let works = my_works(&hub);
        let canary = works
            .iter()
            .find(|w| w.metadata.as_ref().unwrap().namespace == "edge-2");
        let others = works.len() - usize::from(canary.is_some());
        if others > 0 {
            assert!(
                canary.is_some_and(|w| converged(w)),
                "another cluster started before the canary converged: {works:#?}"
            );
        }
        if works.len() == 3 && works.iter().all(|w| converged(w)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish: {works:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The per-placement summary counts each decision group.
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let rs = settings(&mut api).await;
        let groups = rs
            .status
            .and_then(|s| s.placement_summaries.first().cloned())
            .map(|p| p.decision_groups)
            .unwrap_or_default();
        if groups.len() == 2 && groups.iter().all(|g| g.available == g.total) {
            assert_eq!((groups[0].name.as_str(), groups[0].total), ("canary", 1));
            assert_eq!(groups[1].total, 2);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "groups: {groups:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn settings_that_do_not_fit_are_noted_and_orphan_keeps_works() {
    use flotilla_api::v1::MandatoryDecisionGroup;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let names = ["edge-1", "edge-2"];
    let agents = setup(&hub, &nats, &names).await;
    let strategy = RolloutStrategy {
        r#type: "Progressive".into(),
        progressive: Some(RolloutConfig {
            max_failures: "10".into(),
            mandatory_decision_groups: vec![MandatoryDecisionGroup {
                group_name: "nosuch".into(),
                group_index: 0,
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut rs = replica_set("one", strategy);
    rs.spec.as_mut().unwrap().cascade_deletion_policy = "Orphan".into();
    let mut api = replica_sets(&hub).await;
    api.apply_replica_set(rs).await.unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    let notes = loop {
        let rs = settings(&mut api).await;
        let notes = rs
            .status
            .and_then(|s| s.placement_summaries.first().cloned())
            .map(|p| p.notes)
            .unwrap_or_default();
        if !notes.is_empty() {
            break notes.join("\n");
        }
        assert!(tokio::time::Instant::now() < deadline, "no notes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        notes.contains("spec.placementRefs[0].rolloutStrategy: mandatoryDecisionGroups")
            && notes.contains("nosuch"),
        "{notes}"
    );
    // Orphan: deleting the replica set leaves its works.
    let deadline = tokio::time::Instant::now() + SOON;
    while my_works(&hub).len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "works not created");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.delete_replica_set(GetReplicaSetRequest {
        namespace: "default".into(),
        name: "settings".into(),
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(my_works(&hub).len(), 2, "orphaned works were deleted");
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// Each converged work of replica set `default/<name>`: its cluster and template hash.
fn hashes_of(hub: &Hub, name: &str) -> std::collections::BTreeMap<String, String> {
    let owner = format!("default.{name}");
    hub.works
        .snapshot()
        .into_iter()
        .map(|w| w.to_work())
        .filter(|w| {
            w.metadata
                .as_ref()
                .is_some_and(|m| m.labels.get(REPLICASET_LABEL) == Some(&owner))
                && converged(w)
        })
        .map(|w| (w.metadata.as_ref().unwrap().namespace.clone(), hash(&w)))
        .collect()
}

/// Waits until `check` holds, saying `what` when it does not in time.
async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + SOON;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Session-15 review B.12: a replica set follows the fleet's cluster writes only while it has
/// per-target variants — a plain one holds no subscription to them, so 10,000 reconnecting
/// clusters do not wake 1,000 sets — and with variants a relabelled cluster still moves.
#[tokio::test]
async fn only_a_set_with_variants_follows_cluster_changes() {
    use flotilla_api::v1::{LabelSelector, ReplicaSetHubState, TemplateVariant};
    use flotilla_hub::replicaset::Writer;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agents = setup(&hub, &nats, &["edge-1", "edge-2"]).await;
    let all_at_once = RolloutStrategy {
        r#type: "All".into(),
        ..Default::default()
    };
    let followers = hub.inventory.subscribers();
    let mut api = replica_sets(&hub).await;
    api.apply_replica_set(replica_set("plain", all_at_once.clone()))
        .await
        .unwrap();
    wait_for("the plain set did not converge", || {
        hashes_of(&hub, "settings").len() == 2
    })
    .await;
    assert_eq!(
        hub.inventory.subscribers(),
        followers,
        "a set without variants follows no cluster change"
    );

    // A GitRepo's set whose variant selects `size=big`.
    let mut custom = replica_set("base", all_at_once.clone());
    let m = custom.metadata.as_mut().unwrap();
    m.name = "custom".into();
    m.labels
        .insert(GITREPO_LABEL.to_string(), "shop".to_string());
    let big = replica_set("big", all_at_once)
        .spec
        .unwrap()
        .manifest_work_template;
    custom.hub = Some(ReplicaSetHubState {
        variants: vec![TemplateVariant {
            name: "big".into(),
            cluster_selector: Some(LabelSelector {
                match_labels: [("size".to_string(), "big".to_string())].into(),
                ..Default::default()
            }),
            template: big,
            content: "ab".repeat(32),
            ..Default::default()
        }],
        ..Default::default()
    });
    let sets = hub.replicasets();
    sets.apply_as(custom.clone(), Writer::GitRepo("shop"))
        .await
        .unwrap();
    wait_for("the set with variants did not converge", || {
        hashes_of(&hub, "custom").len() == 2
    })
    .await;
    assert_eq!(hub.inventory.subscribers(), followers + 1);
    let base = hashes_of(&hub, "custom")["edge-1"].clone();
    label(&hub, "edge-2", &[("size", "big")], &[]).await;
    wait_for("the relabelled cluster did not move to its variant", || {
        let now = hashes_of(&hub, "custom");
        now.get("edge-2").map(String::as_str) == Some("abababababababab")
            && now.get("edge-1") == Some(&base)
    })
    .await;

    // The variants gone: it lets the cluster changes go, and edge-2 is back on the base.
    custom.hub = None;
    sets.apply_as(custom, Writer::GitRepo("shop"))
        .await
        .unwrap();
    wait_for("the set still follows cluster changes", || {
        hub.inventory.subscribers() == followers
    })
    .await;
    wait_for("edge-2 did not go back to the base", || {
        hashes_of(&hub, "custom").get("edge-2") == Some(&base)
    })
    .await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

//! ManifestWork delivery against a real nats-server: API → hub → agent → simulated spoke →
//! status, feedback, updates, delete options, shared resources, link drops and restarts.

use crate::common;

use common::work::*;
use common::*;
use flotilla_agent::backend::Backend;
use flotilla_api::meta;
use flotilla_api::v1::DeleteWorkRequest;
use flotilla_api::work::conditions::APPLIED;
use flotilla_testkit::{LinkProxy, NatsServer};
use serde_json::Value;
use std::time::Duration;

/// Hub + one accepted agent.
async fn fleet(nats: &NatsServer, cluster: &str) -> (flotilla_hub::Hub, TestAgent) {
    let hub = start_hub(hub_config(&nats.url())).await;
    let agent = accepted_cluster(&mut clusters_client(&hub).await, &nats.url(), cluster).await;
    (hub, agent)
}

#[tokio::test]
async fn hello_work_demo_becomes_applied_and_available_with_feedback_and_updates() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    let created = api
        .apply_work(hello("cluster1", 1))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.metadata.as_ref().unwrap().generation, 1);

    let w = wait_work(
        &mut api,
        "cluster1",
        "hello-work-demo",
        "Applied and Available",
        |w| converged_at(w, 1),
    )
    .await;
    assert_eq!(feedback(&w, "ReadyReplicas").unwrap().integer, Some(1));
    assert_eq!(feedback(&w, "Replicas").unwrap().integer, Some(1));
    let is_available = feedback(&w, "isAvailable").unwrap();
    assert_eq!(
        (is_available.r#type.as_str(), is_available.string.as_deref()),
        ("String", Some("True"))
    );
    let manifest = &manifests(&w)[0];
    let rm = manifest.resource_meta.as_ref().unwrap();
    assert_eq!(
        (rm.group.as_str(), rm.kind.as_str(), rm.resource.as_str()),
        ("apps", "Deployment", "deployments")
    );
    assert_eq!(
        meta::condition_status(&manifest.conditions, "StatusFeedbackSynced"),
        Some("True")
    );

    // Update: a new generation is applied and observed.
    let mut update = hello("cluster1", 3);
    update.metadata.as_mut().unwrap().resource_version =
        w.metadata.as_ref().unwrap().resource_version;
    let updated = api.apply_work(update).await.unwrap().into_inner();
    assert_eq!(updated.metadata.as_ref().unwrap().generation, 2);
    let w = wait_work(
        &mut api,
        "cluster1",
        "hello-work-demo",
        "generation 2 converged",
        |w| {
            converged_at(w, 2) && feedback(w, "ReadyReplicas").is_some_and(|v| v.integer == Some(3))
        },
    )
    .await;
    let deployed = proxy(&mut api, "cluster1", "deployments", "hello")
        .await
        .unwrap();
    assert_eq!(deployed[0]["spec"]["replicas"], 3);

    // A stale resourceVersion is refused.
    let mut stale = hello("cluster1", 5);
    stale.metadata.as_mut().unwrap().resource_version = 1;
    let err = api.apply_work(stale).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Aborted);
    // Re-applying the same spec is not a new generation.
    let same = api
        .apply_work(hello("cluster1", 3))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(same.metadata.as_ref().unwrap().generation, 2);

    // Foreground delete removes the Deployment, then the work.
    api.delete_work(DeleteWorkRequest {
        cluster: "cluster1".into(),
        name: "hello-work-demo".into(),
    })
    .await
    .unwrap();
    wait_gone(&mut api, "cluster1", "hello-work-demo").await;
    let err = proxy(&mut api, "cluster1", "deployments", "hello")
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let latency = metrics_text(&hub).await;
    assert!(
        latency.contains("flotilla_hub_work_latency_seconds_count 2"),
        "{latency}"
    );
    let _ = w;
    agent.stop().await;
    hub.stop().await;
}

const TWO: &str = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: cluster1
  name: NAME
spec:
  deleteOption:
    propagationPolicy: POLICY
    selectivelyOrphans:
      orphaningRules:
        - group: ""
          resource: configmaps
          namespace: shop
          name: keep-me
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: keep-me, namespace: shop}
        data: {a: "1"}
      - apiVersion: v1
        kind: Namespace
        metadata: {name: shop}
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: drop-me, namespace: shop}
        data: {b: "2"}
"#;

#[tokio::test]
async fn delete_options_foreground_orphan_and_selectively_orphan() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    let names = |objs: Vec<Value>| -> Vec<String> {
        let mut v: Vec<String> = objs
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };

    // Namespace listed after the ConfigMaps still comes first (dependency order).
    let w = work(
        &TWO.replace("NAME", "selective")
            .replace("POLICY", "SelectivelyOrphan"),
    );
    api.apply_work(w).await.unwrap();
    wait_work(&mut api, "cluster1", "selective", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    assert_eq!(
        names(proxy(&mut api, "cluster1", "cm", "").await.unwrap()),
        vec!["drop-me", "keep-me"]
    );
    api.delete_work(DeleteWorkRequest {
        cluster: "cluster1".into(),
        name: "selective".into(),
    })
    .await
    .unwrap();
    wait_gone(&mut api, "cluster1", "selective").await;
    // SelectivelyOrphan deleted the Namespace too — which takes its content with it, like a
    // real cluster. The orphaning rule therefore only protects the ConfigMap from the work.
    let left = proxy(&mut api, "cluster1", "configmaps", "").await.unwrap();
    assert!(left.is_empty(), "namespace deletion cascades: {left:?}");

    // Orphan keeps everything.
    let w = work(&TWO.replace("NAME", "orphan").replace("POLICY", "Orphan"));
    api.apply_work(w).await.unwrap();
    wait_work(&mut api, "cluster1", "orphan", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    api.delete_work(DeleteWorkRequest {
        cluster: "cluster1".into(),
        name: "orphan".into(),
    })
    .await
    .unwrap();
    wait_gone(&mut api, "cluster1", "orphan").await;
    assert_eq!(
        names(proxy(&mut api, "cluster1", "cm", "").await.unwrap()),
        vec!["drop-me", "keep-me"]
    );
    assert_eq!(
        proxy(&mut api, "cluster1", "ns", "shop")
            .await
            .unwrap()
            .len(),
        1
    );

    agent.stop().await;
    hub.stop().await;
}

const SELECTIVE_DEFAULT_NS: &str = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: cluster1, name: sel}
spec:
  deleteOption:
    propagationPolicy: SelectivelyOrphan
    selectivelyOrphans:
      orphaningRules:
        - {group: "", resource: configmaps, namespace: default, name: keep-me}
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: keep-me, namespace: default}, data: {a: "1"}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: drop-me, namespace: default}, data: {b: "2"}}
"#;

#[tokio::test]
async fn a_finished_work_is_deleted_its_ttl_after_it_completed_while_its_actor_idles() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    api.apply_work(work(
        r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: cluster1, name: migrate}
spec:
  deleteOption:
    propagationPolicy: Foreground
    ttlSecondsAfterFinished: 2
  manifestConfigs:
    - resourceIdentifier: {group: batch, resource: jobs, namespace: default, name: migrate}
      conditionRules:
        - {condition: Complete, type: WellKnownConditions}
  workload:
    manifests:
      - apiVersion: batch/v1
        kind: Job
        metadata: {name: migrate, namespace: default}
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{name: m, image: busybox}]
"#,
    ))
    .await
    .unwrap();
    wait_work(&mut api, "cluster1", "migrate", "Complete", |w| {
        cond(w, "Complete").as_deref() == Some("True")
    })
    .await;
    let complete = tokio::time::Instant::now();
    // The actor has nothing to do until the TTL runs out: it parks, and its alarm (the TTL's
    // deadline) runs the expiry.
    wait_gone(&mut api, "cluster1", "migrate").await;
    assert!(
        complete.elapsed() >= Duration::from_millis(1500),
        "deleted {:?} after Complete, before its 2 s TTL",
        complete.elapsed()
    );
    let jobs = proxy(&mut api, "cluster1", "jobs", "").await.unwrap();
    assert!(
        jobs.is_empty(),
        "the work's Job is deleted with it: {jobs:?}"
    );
    drop(agent);
    hub.stop().await;
}

#[tokio::test]
async fn selectively_orphan_keeps_only_the_named_resource() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    api.apply_work(work(SELECTIVE_DEFAULT_NS)).await.unwrap();
    wait_work(&mut api, "cluster1", "sel", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    api.delete_work(DeleteWorkRequest {
        cluster: "cluster1".into(),
        name: "sel".into(),
    })
    .await
    .unwrap();
    wait_gone(&mut api, "cluster1", "sel").await;
    let left = proxy(&mut api, "cluster1", "configmaps", "").await.unwrap();
    let names: Vec<_> = left
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["keep-me"]);
    agent.stop().await;
    hub.stop().await;
}

const SHARED: &str = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: cluster1, name: NAME}
spec:
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: shared, namespace: default}, data: {k: v}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: own-NAME, namespace: default}, data: {k: v}}
"#;

#[tokio::test]
async fn a_resource_two_works_declare_survives_the_deletion_of_one() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    for n in ["a", "b"] {
        api.apply_work(work(&SHARED.replace("NAME", n)))
            .await
            .unwrap();
    }
    for n in ["a", "b"] {
        wait_work(&mut api, "cluster1", n, "converged", |w| converged_at(w, 1)).await;
    }
    api.delete_work(DeleteWorkRequest {
        cluster: "cluster1".into(),
        name: "a".into(),
    })
    .await
    .unwrap();
    wait_gone(&mut api, "cluster1", "a").await;
    assert_eq!(
        proxy(&mut api, "cluster1", "cm", "shared")
            .await
            .unwrap()
            .len(),
        1,
        "b still declares it"
    );
    assert!(proxy(&mut api, "cluster1", "cm", "own-a").await.is_err());
    api.delete_work(DeleteWorkRequest {
        cluster: "cluster1".into(),
        name: "b".into(),
    })
    .await
    .unwrap();
    wait_gone(&mut api, "cluster1", "b").await;
    assert!(
        proxy(&mut api, "cluster1", "cm", "shared").await.is_err(),
        "nobody declares it any more"
    );
    agent.stop().await;
    hub.stop().await;
}

const SSA: &str = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: cluster1, name: NAME}
spec:
  workload:
    manifests:
      - {apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: default}, spec: {replicas: REPLICAS}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg-NAME, namespace: default}, data: {k: v}}
  manifestConfigs:
    - resourceIdentifier: {group: apps, resource: deployments, namespace: default, name: web}
      updateStrategy:
        type: STRATEGY
        serverSideApply: {force: FORCE, fieldManager: NAME-manager}
"#;

#[tokio::test]
async fn server_side_apply_conflicts_fail_alone_and_force_wins() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    let ssa = |name: &str, replicas: i64, strategy: &str, force: bool| {
        work(
            &SSA.replace("NAME", name)
                .replace("REPLICAS", &replicas.to_string())
                .replace("STRATEGY", strategy)
                .replace("FORCE", &force.to_string()),
        )
    };
    api.apply_work(ssa("owner", 1, "ServerSideApply", false))
        .await
        .unwrap();
    wait_work(&mut api, "cluster1", "owner", "converged", |w| {
        converged_at(w, 1)
    })
    .await;

    api.apply_work(ssa("rival", 4, "ServerSideApply", false))
        .await
        .unwrap();
    let w = wait_work(&mut api, "cluster1", "rival", "conflicted", |w| {
        cond(w, APPLIED).as_deref() == Some("False")
    })
    .await;
    let manifests = manifests(&w);
    let dep = meta::find_condition(&manifests[0].conditions, APPLIED).unwrap();
    assert_eq!(
        (dep.status.as_str(), dep.reason.as_str()),
        ("False", "ApplyConflict")
    );
    assert!(dep.message.contains("spec.replicas"), "{}", dep.message);
    // The other manifest of the same work was applied.
    assert_eq!(
        meta::condition_status(&manifests[1].conditions, APPLIED),
        Some("True")
    );

    let mut forced = ssa("rival", 4, "ServerSideApply", true);
    forced.metadata.as_mut().unwrap().resource_version = 0;
    api.apply_work(forced).await.unwrap();
    wait_work(&mut api, "cluster1", "rival", "applied with force", |w| {
        converged_at(w, 2)
    })
    .await;
    assert_eq!(
        proxy(&mut api, "cluster1", "deploy", "web").await.unwrap()[0]["spec"]["replicas"],
        4
    );

    // CreateOnly never changes an existing object; ReadOnly only observes.
    api.apply_work(ssa("creator", 9, "CreateOnly", false))
        .await
        .unwrap();
    wait_work(&mut api, "cluster1", "creator", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    api.apply_work(ssa("reader", 7, "ReadOnly", false))
        .await
        .unwrap();
    wait_work(&mut api, "cluster1", "reader", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    assert_eq!(
        proxy(&mut api, "cluster1", "deploy", "web").await.unwrap()[0]["spec"]["replicas"],
        4
    );
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn a_manifest_the_spoke_refuses_fails_alone() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    let yaml = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: cluster1, name: partial}
spec:
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: fine, namespace: default}, data: {k: v}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: lost, namespace: nowhere}, data: {k: v}}
"#;
    api.apply_work(work(yaml)).await.unwrap();
    let w = wait_work(&mut api, "cluster1", "partial", "reported", |w| {
        cond(w, APPLIED).as_deref() == Some("False")
    })
    .await;
    let m = manifests(&w);
    assert_eq!(
        meta::condition_status(&m[0].conditions, APPLIED),
        Some("True")
    );
    let lost = meta::find_condition(&m[1].conditions, APPLIED).unwrap();
    assert_eq!(lost.reason, "AppliedManifestFailed");
    assert!(
        lost.message.contains("namespaces \"nowhere\" not found"),
        "{}",
        lost.message
    );
    assert_eq!(cond(&w, "Degraded").as_deref(), Some("True"));
    assert_eq!(
        proxy(&mut api, "cluster1", "cm", "fine")
            .await
            .unwrap()
            .len(),
        1
    );
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn bad_works_are_rejected_at_the_api_and_nothing_is_stored() {
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    let cases = [
        (
            "manifests:\n      - {kind: ConfigMap, metadata: {name: a}}",
            "spec.workload.manifests[0].apiVersion: required",
        ),
        (
            "manifests:\n      - {apiVersion: v1, metadata: {name: a}}",
            "spec.workload.manifests[0].kind: required",
        ),
        (
            "manifests:\n      - {apiVersion: v1, kind: ConfigMap}",
            "spec.workload.manifests[0].metadata.name: required",
        ),
        (
            "manifests:\n      - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n      - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}",
            "spec.workload.manifests[1]: duplicate resource v1 ConfigMap default/a (also manifests[0])",
        ),
    ];
    for (manifests, want) in cases {
        let yaml = format!(
            "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{namespace: cluster1, name: bad}}\nspec:\n  workload:\n    {manifests}\n"
        );
        let err = api.apply_work(work(&yaml)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{yaml}");
        assert!(
            err.message().contains(want),
            "{} does not contain {want}",
            err.message()
        );
    }
    let big = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{namespace: cluster1, name: big}}\nspec:\n  workload:\n    manifests:\n      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: a}}, data: {{x: '{}'}}}}\n",
        "y".repeat(600 * 1024)
    );
    let mut client = api.clone().max_encoding_message_size(8 << 20);
    let err = client.apply_work(work(&big)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("over the 512000-byte limit"),
        "{}",
        err.message()
    );
    let unknown_rule = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: cluster1, name: rules}
spec:
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  manifestConfigs:
    - resourceIdentifier: {group: "", resource: configmaps, namespace: default, name: a}
      feedbackRules:
        - type: Telepathy
"#;
    let err = api.apply_work(work(unknown_rule)).await.unwrap_err();
    assert!(
        err.message()
            .contains("spec.manifestConfigs[0].feedbackRules[0].type"),
        "{}",
        err.message()
    );
    let mut nowhere = hello("no-such-cluster", 1);
    nowhere.metadata.as_mut().unwrap().namespace = "no-such-cluster".into();
    assert_eq!(
        api.apply_work(nowhere).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let list = api
        .list_works(flotilla_api::v1::ListWorksRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(list.items.is_empty(), "nothing stored: {:?}", list.items);
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn works_changed_while_the_link_is_down_converge_after_reconnect() {
    let nats = NatsServer::start();
    let link = LinkProxy::start(nats.port()).await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &link.url(), "edge-1").await;
    let mut api = works_client(&hub).await;
    api.apply_work(hello("edge-1", 1)).await.unwrap();
    api.apply_work(work(
        &SHARED
            .replace("cluster1", "edge-1")
            .replace("NAME", "doomed"),
    ))
    .await
    .unwrap();
    wait_work(&mut api, "edge-1", "hello-work-demo", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    wait_work(&mut api, "edge-1", "doomed", "converged", |w| {
        converged_at(w, 1)
    })
    .await;

    link.cut();
    // While the spoke is unreachable: create, update and delete.
    api.apply_work(work(
        &SHARED
            .replace("cluster1", "edge-1")
            .replace("NAME", "newcomer"),
    ))
    .await
    .unwrap();
    api.apply_work(hello("edge-1", 2)).await.unwrap();
    api.delete_work(DeleteWorkRequest {
        cluster: "edge-1".into(),
        name: "doomed".into(),
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The spoke keeps running what it had (edge autonomy).
    assert_eq!(agent.backend.list("cm", None).await.unwrap().len(), 2);

    link.restore();
    wait_work(
        &mut api,
        "edge-1",
        "newcomer",
        "converged after reconnect",
        |w| converged_at(w, 1),
    )
    .await;
    wait_work(
        &mut api,
        "edge-1",
        "hello-work-demo",
        "generation 2 after reconnect",
        |w| converged_at(w, 2),
    )
    .await;
    wait_gone(&mut api, "edge-1", "doomed").await;
    let cms: Vec<String> = agent
        .backend
        .list("cm", None)
        .await
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        cms.contains(&"shared".to_string()) && cms.contains(&"own-newcomer".to_string()),
        "{cms:?}"
    );
    assert!(!cms.contains(&"own-doomed".to_string()), "{cms:?}");
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn an_agent_restarted_offline_keeps_its_works_and_reports_when_the_link_returns() {
    let nats = NatsServer::start();
    let link = LinkProxy::start(nats.port()).await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let mut cfg = agent_config("edge-2", &link.url());
    cfg.state = flotilla_agent::StateConfig::Dir(state.path().to_path_buf());
    let backend = sim_backend();
    let agent = accepted_agent_on(&mut clusters, cfg.clone(), backend.clone()).await;
    let mut api = works_client(&hub).await;
    api.apply_work(hello("edge-2", 2)).await.unwrap();
    wait_work(&mut api, "edge-2", "hello-work-demo", "converged", |w| {
        converged_at(w, 1)
    })
    .await;

    link.cut();
    agent.stop().await;
    let agent = start_agent_on(cfg, backend.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Offline and restarted: the Deployment is still there and still managed.
    assert_eq!(backend.list("deploy", None).await.unwrap().len(), 1);
    api.apply_work(hello("edge-2", 4)).await.unwrap();
    link.restore();
    wait_work(
        &mut api,
        "edge-2",
        "hello-work-demo",
        "generation 2 after the link returns",
        |w| {
            converged_at(w, 2) && feedback(w, "ReadyReplicas").is_some_and(|v| v.integer == Some(4))
        },
    )
    .await;
    wait_cluster(&mut clusters, "edge-2", "Available", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn spec_events_for_another_cluster_are_ignored_by_the_agent() {
    use flotilla_bus::envelope::{Action, headers};
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let client = async_nats::connect(nats.url()).await.unwrap();
    // A work for cluster2 pushed onto cluster1's spec subject.
    let mut foreign = hello("cluster2", 1);
    foreign.metadata.as_mut().unwrap().generation = 1;
    let ev = flotilla_bus::Event::new(
        flotilla_bus::works::spec_type(Action::CreateRequest),
        "attacker",
        "cluster1",
        &foreign,
    )
    .with_resource_id(flotilla_hub::cluster::work_rules::resource_id(&foreign))
    .with_resource_version(1);
    client
        .publish_with_headers(
            flotilla_bus::subjects::to_spec("cluster1"),
            headers(&ev),
            ev.encode(1 << 20).unwrap(),
        )
        .await
        .unwrap();
    client.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        agent.backend.list("deploy", None).await.unwrap().is_empty(),
        "a foreign work was applied"
    );
    agent.stop().await;
    hub.stop().await;
}

/// A reconnecting agent whose works did not change resyncs with one digest message; a digest
/// that differs makes the hub ask for the full map (issue 16: resync storms at scale).
#[tokio::test]
async fn spec_resync_is_one_digest_message_when_nothing_changed() {
    use flotilla_api::v1::{SpecResyncRequest, SpecResyncResponse};
    use flotilla_bus::envelope::Event;
    let nats = NatsServer::start();
    let (hub, agent) = fleet(&nats, "cluster1").await;
    let mut api = works_client(&hub).await;
    api.apply_work(hello("cluster1", 1)).await.unwrap();
    wait_work(&mut api, "cluster1", "hello-work-demo", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let ask = |req: SpecResyncRequest| {
        let client = client.clone();
        async move {
            let ev = Event::new(
                flotilla_bus::works::resync_request_type(),
                "test",
                "cluster1",
                &req,
            );
            let reply = client
                .request("flotilla.sync.cluster1", ev.encode(1 << 20).unwrap())
                .await
                .unwrap();
            Event::decode(&reply.payload, 1 << 20)
                .unwrap()
                .decode_data::<SpecResyncResponse>("SpecResyncResponse")
                .unwrap()
        }
    };
    let digest = |digest: String| SpecResyncRequest {
        cluster_name: "cluster1".into(),
        digest,
        ..Default::default()
    };
    let rid = flotilla_bus::works::resource_id("cluster1", "hello-work-demo");
    let same = flotilla_bus::works::versions_digest([(rid.as_str(), 1)]);
    let r = ask(digest(same)).await;
    assert!(!r.send_versions && r.error.is_empty(), "{r:?}");
    let stale = flotilla_bus::works::versions_digest([(rid.as_str(), 0)]);
    assert!(ask(digest(stale)).await.send_versions);

    // The full map of an agent holding nothing: the spec comes in the answer when the agent
    // takes it there, as a spec event for an agent from before (which leaves the flag unset).
    let full = |takes_specs: bool| SpecResyncRequest {
        cluster_name: "cluster1".into(),
        takes_specs,
        ..Default::default()
    };
    let r = ask(full(true)).await;
    assert_eq!((r.resent, r.specs.len()), (1, 1), "{r:?}");
    let spec = Event::decode(&r.specs[0], 1 << 20).unwrap();
    assert_eq!(spec.resource_id.as_deref(), Some(rid.as_str()));
    let r = ask(full(false)).await;
    assert_eq!((r.resent, r.specs.len()), (1, 0), "{r:?}");
    agent.stop().await;
    hub.stop().await;
}

/// An agent whose spec subject delivers nothing — its edge site's leaf server is configured to
/// drop it, as a full subscription buffer or a lossy link drops a spec sent once over core NATS —
/// still gets its work: the resync answer carries the spec.
#[tokio::test]
async fn a_spec_the_spec_subject_never_delivers_comes_in_the_resync_answer() {
    let nats = NatsServer::start_leaf_hub();
    let site = NatsServer::start_with(flotilla_testkit::NatsOptions {
        extra: format!(
            "leafnodes {{ reconnect: 1, remotes [ {{ url: \"nats-leaf://127.0.0.1:{}\", deny_imports: [\"flotilla.to.lossy-1.spec\"] }} ] }}\n",
            nats.leaf_port().unwrap()
        ),
        ..Default::default()
    });
    flotilla_testkit::eventually(SOON, "the site's leaf connection", || {
        let up = site.log().contains("Leafnode connection created");
        async move { up.then_some(()) }
    })
    .await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_agent(&mut clusters, agent_config("lossy-1", &site.url())).await;
    let mut api = works_client(&hub).await;
    api.apply_work(hello("lossy-1", 1)).await.unwrap();
    wait_work(&mut api, "lossy-1", "hello-work-demo", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    agent.stop().await;
    hub.stop().await;
}

/// Feedback rules whose paths select several values and a list (the simulated Deployment reports
/// the conditions Available and Progressing).
const FEEDBACK_SHAPES: &str = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: CLUSTER
  name: feedback-shapes
spec:
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {name: shapes, namespace: default}
        spec:
          replicas: 1
          selector: {matchLabels: {app: shapes}}
          template:
            metadata: {labels: {app: shapes}}
            spec:
              containers: [{name: c, image: busybox}]
  manifestConfigs:
    - resourceIdentifier: {group: apps, resource: deployments, namespace: default, name: shapes}
      feedbackRules:
        - type: WellKnownStatus
        - type: JSONPaths
          jsonPaths:
            - {name: conditionTypes, path: ".status.conditions[*].type"}
            - {name: conditions, path: ".status.conditions"}
"#;

/// OCM's default (RawFeedbackJsonString off): several matches report the first, a list is no
/// value and StatusFeedbackSynced=False while the other values are still reported. An agent
/// started with the gate on reports both as JSON text.
#[tokio::test]
async fn feedback_keeps_the_first_match_and_reports_lists_only_with_the_raw_json_gate() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let plain = accepted_cluster(&mut clusters, &nats.url(), "cluster1").await;
    let mut gated = agent_config("cluster2", &nats.url());
    gated.feature_gates =
        flotilla_agent::features::FeatureGates::parse(&["RawFeedbackJsonString=true"]).unwrap();
    let raw = accepted_agent(&mut clusters, gated).await;
    let mut api = works_client(&hub).await;
    for cluster in ["cluster1", "cluster2"] {
        api.apply_work(work(&FEEDBACK_SHAPES.replace("CLUSTER", cluster)))
            .await
            .unwrap();
    }
    let ready = |w: &flotilla_api::v1::ManifestWork| {
        converged_at(w, 1) && feedback(w, "ReadyReplicas").is_some_and(|v| v.integer == Some(1))
    };
    let synced = |w: &flotilla_api::v1::ManifestWork| {
        manifests(w)[0]
            .conditions
            .iter()
            .find(|c| c.r#type == "StatusFeedbackSynced")
            .cloned()
            .unwrap()
    };

    let w = wait_work(&mut api, "cluster1", "feedback-shapes", "ready", ready).await;
    let first = feedback(&w, "conditionTypes").unwrap();
    assert_eq!(
        (first.r#type.as_str(), first.string.as_deref()),
        ("String", Some("Available"))
    );
    assert_eq!(feedback(&w, "conditions"), None);
    let c = synced(&w);
    assert_eq!(c.status, "False", "{c:?}");
    assert!(
        c.message.contains("value of rule conditions is a list")
            && c.message.contains("RawFeedbackJsonString=true"),
        "{c:?}"
    );

    let w = wait_work(&mut api, "cluster2", "feedback-shapes", "ready", ready).await;
    let all = feedback(&w, "conditionTypes").unwrap();
    assert_eq!(
        (all.r#type.as_str(), all.json_raw.as_deref()),
        ("JsonRaw", Some(r#"["Available","Progressing"]"#))
    );
    let list = feedback(&w, "conditions").unwrap();
    assert_eq!(list.r#type, "JsonRaw");
    let parsed: Value = serde_json::from_str(list.json_raw.as_deref().unwrap()).unwrap();
    assert_eq!(parsed[1]["type"], "Progressing");
    assert_eq!(synced(&w).status, "True", "{:?}", synced(&w));

    plain.stop().await;
    raw.stop().await;
    hub.stop().await;
}

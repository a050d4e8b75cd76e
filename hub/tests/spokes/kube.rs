//! The agent's Kubernetes backend end to end: hub, a real nats-server, an agent with
//! `KubeBackend`, and the testkit's Kubernetes API server speaking the real wire format — or a
//! real cluster when `FLOTILLA_TEST_KUBECONFIG` names its kubeconfig (kind, k3s: see the README).
//! Everything the tests check on the cluster goes through the Kubernetes API; only the request
//! log and the fake's node inventory are checked on the fake alone.

use crate::common;
use crate::kube_fixture;

use common::work::{cond, feedback_of, get_work, proxy, wait_work, work, works_client};
use common::*;
use flotilla_api::meta;
use flotilla_testkit::NatsServer;
use kube_fixture::*;
use serde_json::json;
use std::time::Duration;

const WORK: &str = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: edge-1
  name: web
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: Namespace
        metadata:
          name: NS
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: web-config
          namespace: NS
        data:
          greeting: hello
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: web
          namespace: NS
        spec:
          replicas: 2
          selector:
            matchLabels: {app: web}
          template:
            metadata:
              labels: {app: web}
            spec:
              containers:
                - name: web
                  image: nginx:1.27
  manifestConfigs:
    - resourceIdentifier:
        group: apps
        resource: deployments
        namespace: NS
        name: web
      feedbackRules:
        - type: WellKnownStatus
        - type: JSONPaths
          jsonPaths:
            - name: image
              path: '.spec.template.spec.containers[0].image'
"#;

#[tokio::test]
async fn a_work_reaches_the_kubernetes_api_reports_real_status_and_deletes() {
    let nats = NatsServer::start();
    let cluster = Cluster::start().await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = kube_agent(&nats, &cluster, "edge-1").await;
    wait_cluster(&mut clusters, "edge-1", "registered", |_| true).await;
    accept(&mut clusters, "edge-1").await;
    let c = wait_available(&mut clusters, "edge-1").await;

    // The cluster's facts come from the cluster.
    let st = c.status.as_ref().unwrap();
    let claim = |n: &str| {
        st.cluster_claims
            .iter()
            .find(|c| c.name == n)
            .map(|c| c.value.clone())
    };
    let kube_system =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}});
    let uid = cluster.get(&kube_system).await.unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(claim(meta::CLAIM_ID), Some(uid));
    assert!(st.version.as_ref().unwrap().kubernetes.starts_with('v'));
    assert!(st.capacity.contains_key("cpu") && st.allocatable.contains_key("memory"));
    if cluster.fake().is_some() {
        // Two nodes of 4 CPUs and 16Gi on AWS, k3s (the fake's inventory).
        assert_eq!(st.version.as_ref().unwrap().kubernetes, "v1.30.2+k3s1");
        assert_eq!(st.capacity["cpu"], "8");
        assert_eq!(st.capacity["memory"], "32Gi");
        assert_eq!(claim(meta::CLAIM_PLATFORM).as_deref(), Some("AWS"));
        assert_eq!(claim(meta::CLAIM_PRODUCT).as_deref(), Some("K3s"));
        assert_eq!(claim(meta::CLAIM_NODES).as_deref(), Some("2"));
    }

    // Apply: the objects are created through the API; status and feedback come from them.
    let ns = unique("shop");
    let mut works = works_client(&hub).await;
    works
        .apply_work(work(&WORK.replace("NS", &ns)))
        .await
        .unwrap();
    let w = wait_work(&mut works, "edge-1", "web", "Available", |w| {
        cond(w, "Available").as_deref() == Some("True")
    })
    .await;
    assert_eq!(cond(&w, "Applied").as_deref(), Some("True"));
    let live = cluster
        .get(&deployment(&ns))
        .await
        .expect("the Deployment exists");
    assert_eq!(live["spec"]["replicas"], 2);
    let anchors = cluster.owners(&deployment(&ns)).await;
    assert_eq!(anchors.len(), 1, "{live:#}");
    let web_anchor = anchor(&anchors[0]);
    assert_eq!(
        cluster.get(&web_anchor).await.unwrap()["spec"]["manifestWorkName"],
        "web"
    );
    assert!(cluster.get(&config_map(&ns, "web-config")).await.is_some());
    if let Some(fake) = cluster.fake() {
        let requests = fake.requests();
        assert!(
            requests
                .iter()
                .any(|r| r.starts_with(&format!("POST /apis/apps/v1/namespaces/{ns}/deployments"))),
            "{requests:#?}"
        );
    }
    let w = wait_work(&mut works, "edge-1", "web", "fed back", |w| {
        feedback_of(w, 2, "ReadyReplicas").is_some() && feedback_of(w, 2, "image").is_some()
    })
    .await;
    assert_eq!(
        feedback_of(&w, 2, "ReadyReplicas").unwrap().integer,
        Some(2),
        "{w:#?}"
    );
    assert_eq!(
        feedback_of(&w, 2, "image").unwrap().string.as_deref(),
        Some("nginx:1.27")
    );

    // Observation reads the watch cache, not the API server: no GET of the Deployment while
    // the agent keeps observing it (every 200 ms here).
    if let Some(fake) = cluster.fake() {
        let item = format!("GET /apis/apps/v1/namespaces/{ns}/deployments/web");
        let before = fake
            .requests()
            .iter()
            .filter(|r| r.starts_with(&item))
            .count();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = fake
            .requests()
            .iter()
            .filter(|r| r.starts_with(&item))
            .count();
        assert_eq!(after, before, "observation polled the API server");
        assert!(
            fake.requests()
                .iter()
                .any(|r| r.contains(&format!("namespaces/{ns}/deployments?"))
                    && r.contains("watch=true")),
            "no watch on the Deployments"
        );
    }

    // Proxy reads the real cluster.
    let listed = proxy(&mut works, "edge-1", "deployments", "")
        .await
        .unwrap();
    assert!(listed.iter().any(|d| d["metadata"]["name"] == "web"));

    // Drift: someone deletes the Deployment; the agent puts it back.
    cluster.remove(&deployment(&ns)).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while cluster.get(&deployment(&ns)).await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "drift not repaired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Delete (Foreground by default): the resources go from the cluster, then the work.
    delete_work_and_wait(&mut works, "web").await;
    assert!(cluster.get(&deployment(&ns)).await.is_none());
    assert!(cluster.get(&config_map(&ns, "web-config")).await.is_none());
    if let Some(fake) = cluster.fake() {
        let deletes: Vec<String> = fake
            .requests()
            .into_iter()
            .filter(|r| r.starts_with("DELETE "))
            .collect();
        assert!(
            deletes.iter().any(|r| r.starts_with(&format!(
                "DELETE /apis/apps/v1/namespaces/{ns}/deployments/web"
            ))),
            "{deletes:#?}"
        );
    }
    assert!(get_work(&mut works, "edge-1", "web").await.is_none());
    assert!(
        cluster.get(&web_anchor).await.is_none(),
        "the anchor outlived its work"
    );
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn server_side_apply_conflicts_name_fields_and_managers_and_orphan_keeps_resources() {
    let Setup {
        nats: _nats,
        cluster,
        hub,
        agent,
        mut works,
    } = setup().await;

    // A ConfigMap the work applies with server-side apply, and keeps on deletion (Orphan).
    let name = unique("shared");
    let ssa_work = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: edge-1, name: ssa}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: NAME, namespace: default}
        data: {greeting: from-work}
  manifestConfigs:
    - resourceIdentifier: {resource: configmaps, namespace: default, name: NAME}
      updateStrategy:
        type: ServerSideApply
        serverSideApply: {fieldManager: work-agent, force: false}
  deleteOption:
    propagationPolicy: Orphan
"#
    .replace("NAME", &name);
    works.apply_work(work(&ssa_work)).await.unwrap();
    wait_applied(&mut works, "ssa").await;
    let cm = config_map("default", &name);
    let live = cluster.get(&cm).await.unwrap();
    assert_eq!(live["data"]["greeting"], "from-work");
    assert!(
        live["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "work-agent" && m["operation"] == "Apply")
    );
    // Another manager takes the field; the work's next apply conflicts and says with whom.
    let mut edited = cm.clone();
    edited["data"] = json!({"greeting": "edited"});
    cluster.take_fields(&edited, "intruder").await;
    let w = wait_work(&mut works, "edge-1", "ssa", "conflicting", |w| {
        cond(w, "Applied").as_deref() == Some("False")
    })
    .await;
    let text = format!("{w:?}");
    assert!(
        text.contains(".data.greeting") && text.contains("intruder"),
        "{text}"
    );

    // Orphan: deleting the work leaves the ConfigMap on the cluster.
    delete_work_and_wait(&mut works, "ssa").await;
    assert!(
        cluster.get(&cm).await.is_some(),
        "an orphaned resource was deleted"
    );
    cluster.remove(&cm).await;
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn update_strategies_and_shared_resources_on_kubernetes() {
    let Setup {
        nats: _nats,
        cluster,
        hub,
        agent,
        mut works,
    } = setup().await;
    let (kept, watched, shared) = (unique("kept"), unique("watched"), unique("shared"));

    // Existing objects: one CreateOnly must not change, one ReadOnly is only observed.
    let mut existing = config_map("default", &kept);
    existing["data"] = json!({"v": "original"});
    cluster.take_fields(&existing, "someone").await;
    let mut observed = config_map("default", &watched);
    observed["data"] = json!({"v": "theirs"});
    cluster.take_fields(&observed, "someone").await;

    let doc = |name: &str, body: &str| {
        format!(
            "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{namespace: edge-1, name: {name}}}\n{body}"
        )
    };
    let strategies = doc(
        "strategies",
        &format!(
            r#"spec:
  workload:
    manifests:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {kept}, namespace: default}}, data: {{v: from-work}}}}
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {watched}, namespace: default}}, data: {{v: ours}}}}
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {shared}, namespace: default}}, data: {{v: one}}}}
  manifestConfigs:
    - resourceIdentifier: {{resource: configmaps, namespace: default, name: {kept}}}
      updateStrategy: {{type: CreateOnly}}
    - resourceIdentifier: {{resource: configmaps, namespace: default, name: {watched}}}
      updateStrategy: {{type: ReadOnly}}
      feedbackRules:
        - type: JSONPaths
          jsonPaths: [{{name: v, path: .data.v}}]
"#
        ),
    );
    works.apply_work(work(&strategies)).await.unwrap();
    let w = wait_work(&mut works, "edge-1", "strategies", "fed back", |w| {
        feedback_of(w, 1, "v").is_some()
    })
    .await;
    assert_eq!(
        feedback_of(&w, 1, "v").unwrap().string.as_deref(),
        Some("theirs")
    );
    assert_eq!(
        cluster.get(&existing).await.unwrap()["data"]["v"],
        "original"
    );
    assert_eq!(cluster.get(&observed).await.unwrap()["data"]["v"], "theirs");
    let shared_cm = config_map("default", &shared);
    assert_eq!(cluster.get(&shared_cm).await.unwrap()["data"]["v"], "one");

    // Update (the default) replaces what the work declares.
    works
        .apply_work(work(
            &strategies.replace("data: {v: one}", "data: {v: two}"),
        ))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    while cluster.get(&shared_cm).await.unwrap()["data"]["v"] != "two" {
        assert!(tokio::time::Instant::now() < deadline, "Update not applied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A second work declares the shared ConfigMap: deleting the first keeps it.
    let second = doc(
        "second",
        &format!(
            "spec:\n  workload:\n    manifests:\n      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {shared}, namespace: default}}, data: {{v: two}}}}\n"
        ),
    );
    works.apply_work(work(&second)).await.unwrap();
    wait_applied(&mut works, "second").await;
    assert_eq!(
        cluster.owners(&shared_cm).await.len(),
        2,
        "both works own it"
    );
    assert!(
        cluster.owners(&observed).await.is_empty(),
        "a ReadOnly resource got an owner"
    );
    delete_work_and_wait(&mut works, "strategies").await;
    assert!(
        cluster.get(&shared_cm).await.is_some(),
        "a resource another work declares was deleted"
    );
    assert!(
        cluster.get(&observed).await.is_some(),
        "a ReadOnly resource was deleted"
    );
    delete_work_and_wait(&mut works, "second").await;
    assert!(cluster.get(&shared_cm).await.is_none());
    for leftover in [&existing, &observed] {
        if cluster.get(leftover).await.is_some() {
            cluster.remove(leftover).await;
        }
    }
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn deleting_a_works_anchor_lets_the_cluster_collect_its_resources() {
    let Setup {
        nats: _nats,
        cluster,
        hub,
        agent,
        mut works,
    } = setup().await;
    let name = unique("leftover");
    let doc = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{namespace: edge-1, name: gc}}\nspec:\n  workload:\n    manifests:\n      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}, namespace: default}}, data: {{a: b}}}}\n"
    );
    works.apply_work(work(&doc)).await.unwrap();
    wait_applied(&mut works, "gc").await;
    let cm = config_map("default", &name);
    let anchors = cluster.owners(&cm).await;
    assert_eq!(anchors.len(), 1);
    // The agent is gone for good (uninstalled): the operator deletes the anchors, and the
    // cluster's garbage collector removes what the works left.
    agent.stop().await;
    cluster.remove(&anchor(&anchors[0])).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while cluster.get(&cm).await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ConfigMap was not collected"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn selectively_orphaned_resources_stay_and_an_offline_agent_catches_up() {
    let nats = NatsServer::start();
    let cluster = Cluster::start().await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = agent_config("edge-1", &nats.url());
    config.state = flotilla_agent::StateConfig::Dir(state.path().to_path_buf());
    let agent = kube_agent_with(config.clone(), &cluster).await;
    wait_cluster(&mut clusters, "edge-1", "registered", |_| true).await;
    accept(&mut clusters, "edge-1").await;
    wait_available(&mut clusters, "edge-1").await;
    let mut works = works_client(&hub).await;
    let (keep, drop_) = (unique("keep"), unique("drop"));
    let doc = |value: &str| {
        format!(
            r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: edge-1, name: selective}}
spec:
  workload:
    manifests:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {keep}, namespace: default}}, data: {{v: "{value}"}}}}
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {drop_}, namespace: default}}, data: {{v: "{value}"}}}}
  deleteOption:
    propagationPolicy: SelectivelyOrphan
    selectivelyOrphans:
      orphaningRules:
        - {{resource: configmaps, namespace: default, name: {keep}}}
"#
        )
    };
    works.apply_work(work(&doc("one"))).await.unwrap();
    wait_applied(&mut works, "selective").await;
    let (kept, dropped) = (config_map("default", &keep), config_map("default", &drop_));
    assert!(
        cluster.owners(&kept).await.is_empty(),
        "an orphan-listed resource got an owner"
    );
    assert_eq!(cluster.owners(&dropped).await.len(), 1);

    // The agent is offline while the work changes; back, it applies the new generation.
    agent.stop().await;
    works.apply_work(work(&doc("two"))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(cluster.get(&dropped).await.unwrap()["data"]["v"], "one");
    let agent = kube_agent_with(config.clone(), &cluster).await;
    let deadline = tokio::time::Instant::now() + SOON;
    while cluster.get(&dropped).await.unwrap()["data"]["v"] != "two" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the offline agent did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // SelectivelyOrphan: deleting the work deletes one ConfigMap and keeps the listed one.
    delete_work_and_wait(&mut works, "selective").await;
    assert!(cluster.get(&dropped).await.is_none());
    assert_eq!(cluster.get(&kept).await.unwrap()["data"]["v"], "two");
    cluster.remove(&kept).await;
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn a_crd_and_its_custom_resources_in_one_work() {
    let Setup {
        nats: _nats,
        cluster,
        hub,
        agent,
        mut works,
    } = setup().await;
    // The custom resource comes first in the work: CRDs are applied first anyway, and the kind
    // is discovered once the server serves it.
    let doc = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: edge-1, name: crd}
spec:
  workload:
    manifests:
      - apiVersion: example.flotilla.io/v1
        kind: Widget
        metadata: {name: first, namespace: default}
        spec: {size: 3}
      - apiVersion: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        metadata: {name: widgets.example.flotilla.io}
        spec:
          group: example.flotilla.io
          names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
          scope: Namespaced
          versions:
            - name: v1
              served: true
              storage: true
              schema:
                openAPIV3Schema:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
"#;
    works.apply_work(work(doc)).await.unwrap();
    wait_applied(&mut works, "crd").await;
    let widget = json!({"apiVersion": "example.flotilla.io/v1", "kind": "Widget", "metadata": {"name": "first", "namespace": "default"}});
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        if let Some(w) = cluster.get(&widget).await {
            assert_eq!(w["spec"]["size"], 3);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Widget was not created"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    delete_work_and_wait(&mut works, "crd").await;
    agent.stop().await;
    hub.stop().await;
}

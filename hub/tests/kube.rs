//! The agent's Kubernetes backend end to end: hub, a real nats-server, an agent with
//! `KubeBackend`, and the testkit's Kubernetes API server speaking the real wire format.

mod common;

use common::work::{cond, feedback_of, get_work, proxy, wait_gone, wait_work, work, works_client};
use common::*;
use flotilla_agent::backend::kube::KubeBackend;
use flotilla_api::meta;
use flotilla_testkit::NatsServer;
use flotilla_testkit::kube::{FakeKube, ObjectKey};
use serde_json::json;
use std::sync::Arc;
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
          name: shop
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: web-config
          namespace: shop
        data:
          greeting: hello
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: web
          namespace: shop
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
        namespace: shop
        name: web
      feedbackRules:
        - type: WellKnownStatus
        - type: JSONPaths
          jsonPaths:
            - name: image
              path: '.spec.template.spec.containers[0].image'
"#;

fn deployment_key() -> ObjectKey {
    ObjectKey::new("apps", "deployments", "shop", "web")
}

async fn kube_agent(nats: &NatsServer, fake: &FakeKube, name: &str) -> TestAgent {
    let backend = KubeBackend::connect(Some(&fake.kubeconfig()))
        .await
        .expect("connect to the fake API server");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = agent_config(name, &nats.url());
    let b: Arc<dyn flotilla_agent::backend::Backend> = Arc::new(backend);
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = rx.await;
        };
        if let Err(e) = flotilla_agent::run(config, b, shutdown).await {
            panic!("agent failed: {e}");
        }
    });
    TestAgent::from_parts(sim_backend(), tx, task)
}

#[tokio::test]
async fn a_work_reaches_the_kubernetes_api_reports_real_status_and_deletes() {
    let nats = NatsServer::start();
    let fake = FakeKube::start().await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = kube_agent(&nats, &fake, "edge-1").await;
    wait_cluster(&mut clusters, "edge-1", "registered", |_| true).await;
    accept(&mut clusters, "edge-1").await;
    let c = wait_available(&mut clusters, "edge-1").await;

    // The cluster's facts come from the cluster.
    let st = c.status.as_ref().unwrap();
    assert_eq!(st.version.as_ref().unwrap().kubernetes, "v1.30.2+k3s1");
    assert_eq!(st.capacity["cpu"], "8");
    assert_eq!(st.capacity["memory"], "32Gi");
    let claim = |n: &str| {
        st.cluster_claims
            .iter()
            .find(|c| c.name == n)
            .map(|c| c.value.clone())
    };
    let kube_system_uid = fake
        .get(&ObjectKey::new("", "namespaces", "", "kube-system"))
        .unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(claim(meta::CLAIM_ID), Some(kube_system_uid));
    assert_eq!(claim(meta::CLAIM_PLATFORM).as_deref(), Some("AWS"));
    assert_eq!(claim(meta::CLAIM_PRODUCT).as_deref(), Some("K3s"));

    // Apply: real API calls create the objects; status and feedback come from the live objects.
    let mut works = works_client(&hub).await;
    works.apply_work(work(WORK)).await.unwrap();
    let w = wait_work(&mut works, "edge-1", "web", "Available", |w| {
        cond(w, "Available").as_deref() == Some("True")
    })
    .await;
    assert_eq!(cond(&w, "Applied").as_deref(), Some("True"));
    let deployment = fake.get(&deployment_key()).expect("the Deployment exists");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert!(
        fake.get(&ObjectKey::new("", "configmaps", "shop", "web-config"))
            .is_some()
    );
    let requests = fake.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("POST /apis/apps/v1/namespaces/shop/deployments")),
        "{requests:#?}"
    );
    let w = wait_work(&mut works, "edge-1", "web", "fed back", |w| {
        feedback_of(w, 2, "ReadyReplicas").is_some() && feedback_of(w, 2, "image").is_some()
    })
    .await;
    assert_eq!(
        feedback_of(&w, 2, "ReadyReplicas").unwrap().integer,
        Some(2),
        "{w:#?}"
    );

    // Proxy reads the real cluster.
    let listed = proxy(&mut works, "edge-1", "deployments", "")
        .await
        .unwrap();
    assert!(listed.iter().any(|d| d["metadata"]["name"] == "web"));

    // Drift: someone deletes the Deployment; the agent puts it back.
    assert!(fake.remove(&deployment_key()));
    let deadline = tokio::time::Instant::now() + SOON;
    while fake.get(&deployment_key()).is_none() {
        assert!(tokio::time::Instant::now() < deadline, "drift not repaired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Delete: the resources go from the cluster, then the work.
    works
        .delete_work(flotilla_api::v1::DeleteWorkRequest {
            cluster: "edge-1".into(),
            name: "web".into(),
        })
        .await
        .unwrap();
    wait_gone(&mut works, "edge-1", "web").await;
    assert!(fake.get(&deployment_key()).is_none());
    assert!(
        fake.get(&ObjectKey::new("", "configmaps", "shop", "web-config"))
            .is_none()
    );
    let deletes: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("DELETE "))
        .collect();
    assert!(
        deletes.iter().any(|r| r
            .starts_with("DELETE /api/v1/namespaces/shop/configmaps/web-config")
            || r.starts_with("DELETE /apis/apps/v1/namespaces/shop/deployments/web")),
        "{deletes:#?}"
    );
    assert!(get_work(&mut works, "edge-1", "web").await.is_none());
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn server_side_apply_conflicts_name_fields_and_managers_and_orphan_keeps_resources() {
    let nats = NatsServer::start();
    let fake = FakeKube::start().await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = kube_agent(&nats, &fake, "edge-1").await;
    wait_cluster(&mut clusters, "edge-1", "registered", |_| true).await;
    accept(&mut clusters, "edge-1").await;
    wait_available(&mut clusters, "edge-1").await;
    let mut works = works_client(&hub).await;

    // A ConfigMap the work applies with server-side apply.
    let cm = ObjectKey::new("", "configmaps", "default", "shared");
    let ssa_work = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: edge-1, name: ssa}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: shared, namespace: default}
        data: {greeting: from-work}
  manifestConfigs:
    - resourceIdentifier: {resource: configmaps, namespace: default, name: shared}
      updateStrategy:
        type: ServerSideApply
        serverSideApply: {fieldManager: work-agent, force: false}
  deleteOption:
    propagationPolicy: Orphan
"#;
    works.apply_work(work(ssa_work)).await.unwrap();
    wait_work(&mut works, "edge-1", "ssa", "applied", |w| {
        cond(w, "Applied").as_deref() == Some("True")
    })
    .await;
    let live = fake.get(&cm).unwrap();
    assert_eq!(live["data"]["greeting"], "from-work");
    assert!(
        live["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "work-agent" && m["operation"] == "Apply")
    );
    // Someone else takes the field; the work's next apply conflicts and says with whom.
    assert!(fake.merge(&cm, &json!({"data": {"greeting": "edited"}})));
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
    works
        .delete_work(flotilla_api::v1::DeleteWorkRequest {
            cluster: "edge-1".into(),
            name: "ssa".into(),
        })
        .await
        .unwrap();
    wait_gone(&mut works, "edge-1", "ssa").await;
    assert!(fake.get(&cm).is_some(), "an orphaned resource was deleted");
    agent.stop().await;
    hub.stop().await;
}

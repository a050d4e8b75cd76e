//! ManifestWork fixtures for hub integration tests: documents, the gRPC client, waits.

use super::SOON;
use flotilla_api::meta;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{GetWorkRequest, ManifestWork, ProxyGetRequest};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE};
use serde_json::Value;
use std::time::Duration;
use tonic::transport::Channel;

/// OCM's hello-work-demo, as the README's example ships it (`CLUSTER` is the placeholder).
pub const HELLO: &str = include_str!("../../../examples/hello-work.yaml");

pub fn work(yaml: &str) -> ManifestWork {
    match parse_documents(yaml).remove(0) {
        Ok(Document::Work(w)) => w,
        other => panic!("not a work: {other:?}"),
    }
}

/// A ConfigMap work `name` on `cluster` (ConfigMap `default/<name>`, data `k: v`).
pub fn config_map_work(cluster: &str, name: &str) -> ManifestWork {
    config_map_work_with(cluster, name, "v")
}

/// A ConfigMap work whose data holds `value`.
pub fn config_map_work_with(cluster: &str, name: &str, value: &str) -> ManifestWork {
    work(&format!(
        r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: {cluster}, name: {name}}}
spec:
  workload:
    manifests:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}, namespace: default}}, data: {{k: {value}}}}}
"#
    ))
}

pub fn hello(cluster: &str, replicas: i64) -> ManifestWork {
    let spec = "        spec:\n          selector:";
    assert!(
        HELLO.contains(spec),
        "examples/hello-work.yaml changed shape"
    );
    let with_replicas = HELLO.replace(
        spec,
        &format!("        spec:\n          replicas: {replicas}\n          selector:"),
    );
    work(&with_replicas.replace("CLUSTER", cluster))
}

pub async fn works_client(hub: &flotilla_hub::Hub) -> WorkServiceClient<Channel> {
    WorkServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
}

pub async fn get_work(
    api: &mut WorkServiceClient<Channel>,
    cluster: &str,
    name: &str,
) -> Option<ManifestWork> {
    api.get_work(GetWorkRequest {
        cluster: cluster.into(),
        name: name.into(),
    })
    .await
    .ok()
    .map(|r| r.into_inner())
}

pub fn cond(w: &ManifestWork, t: &str) -> Option<String> {
    w.status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, t))
        .map(str::to_string)
}

pub fn converged_at(w: &ManifestWork, generation: i64) -> bool {
    w.metadata
        .as_ref()
        .is_some_and(|m| m.generation == generation)
        && w.hub
            .as_ref()
            .is_some_and(|h| h.observed_generation == generation)
        && cond(w, APPLIED).as_deref() == Some("True")
        && cond(w, AVAILABLE).as_deref() == Some("True")
}

pub async fn wait_work(
    api: &mut WorkServiceClient<Channel>,
    cluster: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&ManifestWork) -> bool,
) -> ManifestWork {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let w = get_work(api, cluster, name).await;
        if let Some(w) = &w
            && pred(w)
        {
            return w.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for work {name} to be {what}; last: {w:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn wait_gone(api: &mut WorkServiceClient<Channel>, cluster: &str, name: &str) {
    flotilla_testkit::eventually(SOON, &format!("work {name} gone"), || {
        let mut api = api.clone();
        let (c, n) = (cluster.to_string(), name.to_string());
        async move { get_work(&mut api, &c, &n).await.is_none().then_some(()) }
    })
    .await;
}

pub async fn proxy(
    api: &mut WorkServiceClient<Channel>,
    cluster: &str,
    kind: &str,
    name: &str,
) -> Result<Vec<Value>, tonic::Status> {
    api.proxy(ProxyGetRequest {
        cluster: cluster.into(),
        kind: kind.into(),
        namespace: String::new(),
        name: name.into(),
    })
    .await
    .map(|r| {
        r.into_inner()
            .objects
            .iter()
            .map(|o| serde_json::from_str(o).unwrap())
            .collect()
    })
}

/// The per-manifest status the agent reported (empty before the first report).
pub fn manifests(w: &ManifestWork) -> &[flotilla_api::v1::ManifestCondition] {
    w.status
        .as_ref()
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default()
}

pub fn feedback(w: &ManifestWork, name: &str) -> Option<flotilla_api::v1::FieldValue> {
    feedback_of(w, 0, name)
}

/// A feedback value of the manifest at `ordinal`.
pub fn feedback_of(
    w: &ManifestWork,
    ordinal: i32,
    name: &str,
) -> Option<flotilla_api::v1::FieldValue> {
    manifests(w)
        .iter()
        .find(|m| {
            m.resource_meta
                .as_ref()
                .is_some_and(|r| r.ordinal == ordinal)
        })?
        .status_feedback
        .as_ref()?
        .values
        .iter()
        .find(|v| v.name == name)
        .and_then(|v| v.field_value.clone())
}

//! Fixtures of the add-on tests over simulated clusters: a placement with a canary group, a
//! template add-on and its config, a fleet labelled for it, and readers of what was installed.

use super::addon::apply;
use super::*;
use flotilla_api::meta::condition_status;
use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
use flotilla_api::v1::{ManagedClusterAddOn, ManifestWork};
use flotilla_hub::Hub;
use flotilla_testkit::NatsServer;
use std::time::Duration;
use tonic::transport::Channel;

pub const PLACEMENT: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: default}
spec:
  clusterSets: [default]
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels: {rollout: "yes"}
  decisionStrategy:
    groupStrategy:
      decisionGroups:
        - groupName: canary
          groupClusterSelector:
            labelSelector:
              matchLabels: {canary: "yes"}
"#;

/// A template: a ConfigMap carrying `{{LEVEL}}` and the cluster's name, and a Deployment.
pub fn template(name: &str, extra_annotations: &str) -> String {
    format!(
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {{name: {name}}}
spec:
  addonName: probe
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: probe-settings
            namespace: open-cluster-management-agent-addon
            annotations: {{{extra_annotations}}}
          data:
            level: "{{{{LEVEL}}}}"
            cluster: "{{{{CLUSTER_NAME}}}}"
        - apiVersion: apps/v1
          kind: Deployment
          metadata:
            name: probe-agent
            namespace: open-cluster-management-agent-addon
          spec:
            replicas: 1
            selector: {{matchLabels: {{app: probe}}}}
            template:
              metadata: {{labels: {{app: probe}}}}
              spec:
                containers:
                  - name: agent
                    image: example.com/probe:1
"#
    )
}

pub fn deployment_config(name: &str, level: &str) -> String {
    format!(
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnDeploymentConfig
metadata: {{name: {name}, namespace: default}}
spec:
  customizedVariables:
    - {{name: LEVEL, value: "{level}"}}
"#
    )
}

/// The add-on, installed by placement `edge` with `strategy` (YAML under rolloutStrategy).
pub fn addon_yaml(placement_configs: &str, strategy: &str) -> String {
    format!(
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {{name: probe}}
spec:
  addOnMeta: {{displayName: Probe, description: a test add-on}}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {{name: probe-v1}}
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
      defaultConfig: {{name: probe-config, namespace: default}}
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: edge
        configs: [{placement_configs}]
        rolloutStrategy:
{strategy}
"#
    )
}

pub const ALL: &str = "          type: All";

pub async fn api(hub: &Hub) -> AddOnServiceClient<Channel> {
    AddOnServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
}

/// Accepted clusters `names`, those in `selected` labelled for the placement (the first one
/// also as the canary), the default set bound, the placement and the add-on's configs applied.
pub async fn setup(
    hub: &Hub,
    nats: &NatsServer,
    names: &[&str],
    selected: &[&str],
) -> Vec<TestAgent> {
    let mut clusters = clusters_client(hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), names).await;
    for (i, n) in selected.iter().enumerate() {
        label(hub, n, &[("rollout", "yes")], &[]).await;
        if i == 0 {
            label(hub, n, &[("canary", "yes")], &[]).await;
        }
    }
    bind_set(hub, "default", "default").await;
    apply(hub, PLACEMENT).await.unwrap();
    apply(hub, &template("probe-v1", "")).await.unwrap();
    apply(hub, &deployment_config("probe-config", "1"))
        .await
        .unwrap();
    agents
}

pub fn installed(hub: &Hub) -> Vec<String> {
    let mut v: Vec<String> = hub
        .addons()
        .list_cluster_addons("", "probe")
        .iter()
        .map(|m| m.metadata.as_ref().unwrap().namespace.clone())
        .collect();
    v.sort();
    v
}

pub fn work_of(hub: &Hub, cluster: &str) -> Option<std::sync::Arc<ManifestWork>> {
    hub.works
        .get(&format!(
            "{cluster}/{}",
            flotilla_api::addon::work_name("probe", 0)
        ))
        .map(|w| std::sync::Arc::new(w.to_work()))
}

/// The ConfigMap of a cluster's add-on work.
pub fn config_map(w: &ManifestWork) -> Option<serde_json::Value> {
    w.spec
        .as_ref()?
        .workload
        .as_ref()?
        .manifests
        .iter()
        .filter_map(|m| serde_json::from_slice::<serde_json::Value>(&m.raw).ok())
        .find(|v| v["kind"] == "ConfigMap")
}

/// The LEVEL a cluster's work was rendered with.
pub fn level(hub: &Hub, cluster: &str) -> Option<String> {
    let w = work_of(hub, cluster)?;
    let v = config_map(&w)?;
    v["data"]["level"].as_str().map(str::to_string)
}

pub fn mca_condition(m: &ManagedClusterAddOn, t: &str) -> Option<String> {
    condition_status(&m.status.as_ref()?.conditions, t).map(str::to_string)
}

pub async fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + SOON * 2;
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

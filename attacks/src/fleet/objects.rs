//! OCM objects as `flotilla get … -o json` shows them (conditions, acceptance, generations),
//! and the YAML the attacks apply.

use serde_json::Value;

/// The status of condition `ty` of an OCM-shaped object.
pub fn condition(object: &Value, ty: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

/// `spec.hubAcceptsClient`.
pub fn accepted(cluster: &Value) -> bool {
    cluster["spec"]["hubAcceptsClient"] == true
}

/// `ManagedClusterConditionAvailable=True`.
pub fn available(cluster: &Value) -> bool {
    condition(cluster, "ManagedClusterConditionAvailable").as_deref() == Some("True")
}

/// `metadata.generation` of a work.
pub fn generation(work: &Value) -> i64 {
    work["metadata"]["generation"].as_i64().unwrap_or(0)
}

/// Applied=True, observed at the work's current generation.
pub fn applied(work: &Value) -> bool {
    work["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| {
            c["type"] == "Applied"
                && c["status"] == "True"
                && c["observedGeneration"].as_i64().unwrap_or(0) == generation(work)
        })
    })
}

/// A ManifestWork for `cluster` holding one ConfigMap whose data is `value`.
pub fn work_yaml(cluster: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: {cluster}
  name: {name}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {name}
          namespace: default
        data:
          value: \"{value}\"
"
    )
}

/// An OCM ManagedCluster created ahead of its agent, already accepted.
pub fn precreated_cluster_yaml(name: &str) -> String {
    format!(
        "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: {name}
spec:
  hubAcceptsClient: true
"
    )
}

//! The Kubernetes backend (kube-rs): applies, reads, deletes and lists any kind through the
//! cluster's API, found by discovery, and reports the cluster's facts from the cluster itself.
//!
//! - Kinds are resolved per group/version/kind with a one-group discovery request, cached, and
//!   looked up again when unknown, so a CRD applied earlier in the same work is usable at once.
//! - `ServerSideApply` is an apply patch with the strategy's field manager and `force`; a
//!   conflict is reported with the fields and managers the server names. `Update` reads and
//!   creates or replaces with the live `resourceVersion` (unchanged objects are not written);
//!   `CreateOnly` creates when absent; `ReadOnly` never writes.
//! - Deletes use `Foreground` propagation, so a resource stays visible until its own dependents
//!   are gone and the work's Foreground deletion waits for all of it.
//! - Cluster facts: `/version`, capacity and allocatable summed over nodes, the `id.k8s.io`
//!   claim from the kube-system namespace's UID, platform from the nodes' provider IDs, product
//!   from the version string and node labels, health from `/readyz`.

use super::{ApplyOutcome, Backend, BackendError, ClusterInfo, Strategy};
use flotilla_api::work::ManifestId;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Client, Config};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Group, version and kind.
type KindKey = (String, String, String);

/// A cluster reached through its Kubernetes API.
pub struct KubeBackend {
    client: Client,
    kinds: Mutex<HashMap<KindKey, (ApiResource, ApiCapabilities)>>,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend").finish_non_exhaustive()
    }
}

fn unavailable(e: impl std::fmt::Display) -> BackendError {
    BackendError::Unavailable(e.to_string())
}

impl KubeBackend {
    /// Connects with `kubeconfig`, or `KUBECONFIG`/`~/.kube/config`/in-cluster config when
    /// `None`.
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, String> {
        // rustls needs one process-wide crypto provider; the agent uses ring everywhere.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
                Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                    .await
                    .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
            }
            None => Config::infer().await.map_err(|e| {
                format!(
                    "no Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster): {e}"
                )
            })?,
        };
        let client = Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))?;
        Ok(Self {
            client,
            kinds: Mutex::new(HashMap::new()),
        })
    }

    /// The API resource of a group/version/kind: cached, or discovered now.
    async fn resolve(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), BackendError> {
        let key = (group.to_string(), version.to_string(), kind.to_string());
        if let Some(found) = self.kinds.lock().expect("kinds lock").get(&key) {
            return Ok(found.clone());
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        match discovery::pinned_kind(&self.client, &gvk).await {
            Ok(found) => {
                self.kinds
                    .lock()
                    .expect("kinds lock")
                    .insert(key, found.clone());
                Ok(found)
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Err(BackendError::Invalid(format!(
                "the cluster serves no {kind} in {}",
                if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                }
            ))),
            Err(kube::Error::Discovery(e)) => Err(BackendError::Invalid(format!(
                "the cluster serves no {kind} in {}: {e}",
                if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                }
            ))),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn api(&self, id: &ManifestId) -> Result<Api<DynamicObject>, BackendError> {
        let (ar, caps) = self.resolve(&id.group, &id.version, &id.kind).await?;
        Ok(match caps.scope {
            Scope::Namespaced => {
                let ns = if id.namespace.is_empty() {
                    "default"
                } else {
                    &id.namespace
                };
                Api::namespaced_with(self.client.clone(), ns, &ar)
            }
            Scope::Cluster => Api::all_with(self.client.clone(), &ar),
        })
    }

    async fn get_object(&self, id: &ManifestId) -> Result<Option<Value>, BackendError> {
        let api = self.api(id).await?;
        match api.get_opt(&id.name).await {
            Ok(Some(o)) => serde_json::to_value(o)
                .map(Some)
                .map_err(|e| BackendError::Invalid(e.to_string())),
            Ok(None) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }
}

fn map_error(e: kube::Error) -> BackendError {
    match e {
        kube::Error::Api(r) if r.code == 404 => BackendError::NotFound(r.message),
        kube::Error::Api(r) if r.code == 409 && r.message.contains("conflict with") => {
            let (fields, managers) = parse_conflicts(&r.message);
            BackendError::Conflict {
                fields,
                manager: managers.join(", "),
            }
        }
        kube::Error::Api(r) if (400..500).contains(&r.code) => {
            BackendError::Invalid(format!("{} ({})", r.message, r.reason))
        }
        other => unavailable(other),
    }
}

/// Fields and managers of an apply conflict, from the API server's message:
/// `Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas`, or
/// for several, `conflicts with "m" using apps/v1:` followed by `- .field` lines.
pub fn parse_conflicts(message: &str) -> (Vec<String>, Vec<String>) {
    let mut fields = Vec::new();
    let mut managers: Vec<String> = Vec::new();
    let add_manager = |m: &str, managers: &mut Vec<String>| {
        if !managers.iter().any(|x| x == m) {
            managers.push(m.to_string());
        }
    };
    for line in message.lines() {
        let line = line.trim();
        if let Some(field) = line.strip_prefix("- ") {
            fields.push(field.trim().to_string());
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("conflict") {
            rest = &rest[at..];
            let Some(open) = rest.find('"') else { break };
            let Some(len) = rest[open + 1..].find('"') else {
                break;
            };
            add_manager(&rest[open + 1..open + 1 + len], &mut managers);
            rest = &rest[open + 1 + len + 1..];
            // `using apps/v1: .spec.replicas` or `: .spec.replicas`
            if let Some(colon) = rest.find(": ") {
                let after = &rest[colon + 2..];
                let end = after.find([',', '\n']).unwrap_or(after.len());
                let field = after[..end].trim();
                if field.starts_with('.') {
                    fields.push(field.to_string());
                }
            }
        }
    }
    (fields, managers)
}

/// Whether every field `declared` sets has the same value in `live` (status and server-set
/// metadata ignored).
fn declared_matches(declared: &Value, live: &Value) -> bool {
    match (declared, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, v)| {
            if matches!(k.as_str(), "status") {
                return true;
            }
            l.get(k).is_some_and(|lv| declared_matches(v, lv))
        }),
        (d, l) => d == l,
    }
}

/// Sums quantities (`4`, `500m`, `16Gi`) as Kubernetes would print a total.
fn sum_quantities(values: &[&str], memory: bool) -> String {
    let total: f64 = values
        .iter()
        .filter_map(|v| flotilla_placement::quantity::parse_quantity(v).ok())
        .sum();
    if memory {
        let bytes = total.round() as u64;
        if bytes.is_multiple_of(1024 * 1024 * 1024) {
            format!("{}Gi", bytes / (1024 * 1024 * 1024))
        } else if bytes.is_multiple_of(1024 * 1024) {
            format!("{}Mi", bytes / (1024 * 1024))
        } else if bytes.is_multiple_of(1024) {
            format!("{}Ki", bytes / 1024)
        } else {
            bytes.to_string()
        }
    } else if (total - total.round()).abs() < 1e-9 {
        format!("{}", total.round() as i64)
    } else {
        format!("{}m", (total * 1000.0).round() as i64)
    }
}

/// The platform claim from a node's `spec.providerID`.
fn platform(provider_id: &str) -> &'static str {
    match provider_id.split("://").next().unwrap_or_default() {
        "aws" => "AWS",
        "gce" => "GCP",
        "azure" => "Azure",
        "openstack" => "OpenStack",
        "vsphere" => "VSphere",
        "ibm" => "IBM",
        "alicloud" => "AliCloud",
        "" => "Other",
        _ => "Other",
    }
}

/// The product claim from the version string and node labels.
fn product(git_version: &str, node_labels: &[&serde_json::Map<String, Value>]) -> &'static str {
    let v = git_version.to_ascii_lowercase();
    if node_labels
        .iter()
        .any(|l| l.contains_key("node.openshift.io/os_id"))
    {
        return "OpenShift";
    }
    if v.contains("+k3s") {
        "K3s"
    } else if v.contains("+rke2") {
        "RKE2"
    } else if v.contains("+k0s") {
        "k0s"
    } else if v.contains("-eks") {
        "EKS"
    } else if v.contains("-gke") {
        "GKE"
    } else {
        "Other"
    }
}

#[async_trait::async_trait]
impl Backend for KubeBackend {
    async fn info(&self) -> ClusterInfo {
        let mut info = ClusterInfo {
            healthy: true,
            ..ClusterInfo::default()
        };
        match self.client.apiserver_version().await {
            Ok(v) => info.kubernetes_version = v.git_version,
            Err(e) => {
                info.healthy = false;
                info.health_message = format!("the API server does not answer: {e}");
                return info;
            }
        }
        let ready = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| e.to_string());
        match ready {
            Ok(req) => match self.client.request_text(req).await {
                Ok(body) if body.trim() == "ok" || body.contains("passed") => {}
                Ok(body) => {
                    info.healthy = false;
                    info.health_message = format!("/readyz: {}", body.trim());
                }
                Err(e) => {
                    info.healthy = false;
                    info.health_message = format!("/readyz: {e}");
                }
            },
            Err(e) => info.health_message = e,
        }
        let nodes: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
        );
        if let Ok(list) = nodes.list(&ListParams::default()).await {
            let objects: Vec<Value> = list
                .items
                .into_iter()
                .filter_map(|n| serde_json::to_value(n).ok())
                .collect();
            for (field, into) in [
                ("capacity", &mut info.capacity),
                ("allocatable", &mut info.allocatable),
            ] {
                for resource in ["cpu", "memory", "pods", "ephemeral-storage"] {
                    let values: Vec<&str> = objects
                        .iter()
                        .filter_map(|n| n["status"][field][resource].as_str())
                        .collect();
                    if !values.is_empty() {
                        into.insert(
                            resource.to_string(),
                            sum_quantities(
                                &values,
                                resource == "memory" || resource == "ephemeral-storage",
                            ),
                        );
                    }
                }
            }
            info.platform = objects
                .iter()
                .filter_map(|n| n["spec"]["providerID"].as_str())
                .map(platform)
                .next()
                .unwrap_or("Other")
                .to_string();
            let labels: Vec<&serde_json::Map<String, Value>> = objects
                .iter()
                .filter_map(|n| n["metadata"]["labels"].as_object())
                .collect();
            info.product = product(&info.kubernetes_version, &labels).to_string();
        }
        let namespaces: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        );
        if let Ok(ns) = namespaces.get("kube-system").await
            && let Some(uid) = ns.metadata.uid
        {
            info.cluster_id = uid;
        }
        info
    }

    async fn apply(
        &self,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        let api = self.api(id).await?;
        match strategy {
            Strategy::ReadOnly => Ok(ApplyOutcome::Skipped),
            Strategy::ServerSideApply {
                force,
                field_manager,
            } => {
                let before = self.get_object(id).await?;
                let mut params = PatchParams::apply(field_manager);
                params.force = *force;
                let after = api
                    .patch(&id.name, &params, &Patch::Apply(object))
                    .await
                    .map_err(map_error)?;
                let after = serde_json::to_value(after).unwrap_or_default();
                Ok(match before {
                    None => ApplyOutcome::Created,
                    Some(b)
                        if b["metadata"]["resourceVersion"]
                            == after["metadata"]["resourceVersion"] =>
                    {
                        ApplyOutcome::Unchanged
                    }
                    Some(_) => ApplyOutcome::Updated,
                })
            }
            Strategy::CreateOnly | Strategy::Update => {
                let live = self.get_object(id).await?;
                let typed: DynamicObject = serde_json::from_value(object.clone())
                    .map_err(|e| BackendError::Invalid(e.to_string()))?;
                match live {
                    None => {
                        api.create(&PostParams::default(), &typed)
                            .await
                            .map_err(map_error)?;
                        Ok(ApplyOutcome::Created)
                    }
                    Some(_) if *strategy == Strategy::CreateOnly => Ok(ApplyOutcome::Skipped),
                    Some(live) if declared_matches(object, &live) => Ok(ApplyOutcome::Unchanged),
                    Some(live) => {
                        let mut next = typed;
                        next.metadata.resource_version = live["metadata"]["resourceVersion"]
                            .as_str()
                            .map(str::to_string);
                        api.replace(&id.name, &PostParams::default(), &next)
                            .await
                            .map_err(map_error)?;
                        Ok(ApplyOutcome::Updated)
                    }
                }
            }
        }
    }

    async fn get(&self, id: &ManifestId) -> Result<Option<Value>, BackendError> {
        self.get_object(id).await
    }

    async fn delete(&self, id: &ManifestId) -> Result<bool, BackendError> {
        let api = self.api(id).await?;
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..DeleteParams::default()
        };
        match api.delete(&id.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(r)) if r.code == 404 => Ok(false),
            Err(e) => Err(map_error(e)),
        }
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>, BackendError> {
        let discovery = discovery::Discovery::new(self.client.clone())
            .run()
            .await
            .map_err(unavailable)?;
        let found = discovery.groups().find_map(|g| {
            g.recommended_resources().into_iter().find(|(ar, _)| {
                super::kind_matches(kind, &ar.kind) || ar.plural.eq_ignore_ascii_case(kind)
            })
        });
        let Some((ar, caps)) = found else {
            return Err(BackendError::NotFound(format!(
                "the cluster serves no kind or resource named {kind:?}"
            )));
        };
        let api: Api<DynamicObject> = match (caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        };
        let list = api.list(&ListParams::default()).await.map_err(map_error)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| {
                let mut v = serde_json::to_value(o).ok()?;
                v["apiVersion"] = Value::String(ar.api_version.clone());
                v["kind"] = Value::String(ar.kind.clone());
                Some(v)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_name_their_fields_and_managers() {
        let one = r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas"#;
        assert_eq!(
            parse_conflicts(one),
            (vec![".spec.replicas".into()], vec!["kubectl-edit".into()])
        );
        let many = "Apply failed with 2 conflicts: conflicts with \"helm\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"web\"].image";
        let (fields, managers) = parse_conflicts(many);
        assert_eq!(managers, ["helm"]);
        assert_eq!(fields.len(), 2, "{fields:?}");
    }

    #[test]
    fn quantities_sum_like_kubernetes_prints_them() {
        assert_eq!(sum_quantities(&["4", "4"], false), "8");
        assert_eq!(sum_quantities(&["500m", "1"], false), "1500m");
        assert_eq!(sum_quantities(&["16Gi", "16Gi"], true), "32Gi");
        assert_eq!(sum_quantities(&["512Mi", "1Gi"], true), "1536Mi");
    }

    #[test]
    fn platform_and_product_are_detected() {
        assert_eq!(platform("aws:///eu-west-1a/i-123"), "AWS");
        assert_eq!(platform("gce://p/z/n"), "GCP");
        assert_eq!(platform("kind://docker/x"), "Other");
        assert_eq!(product("v1.30.2+k3s1", &[]), "K3s");
        assert_eq!(product("v1.29.3-eks-adc7111", &[]), "EKS");
        assert_eq!(product("v1.30.2", &[]), "Other");
    }

    #[test]
    fn update_skips_objects_that_already_match() {
        let declared = serde_json::json!({"spec": {"replicas": 2}, "metadata": {"name": "a"}});
        let live = serde_json::json!({"spec": {"replicas": 2, "paused": false}, "metadata": {"name": "a", "uid": "x"}, "status": {}});
        assert!(declared_matches(&declared, &live));
        let changed = serde_json::json!({"spec": {"replicas": 3}, "metadata": {"name": "a"}});
        assert!(!declared_matches(&changed, &live));
    }
}

//! ManifestWork rules shared by hub, agent and CLI: manifest identity, kind → resource names,
//! the OCM limits, and validation with errors that name the manifest index and field.

use crate::v1::{ManifestWork, ResourceIdentifier};
use serde_json::Value;
use std::collections::HashMap;

/// Largest total size of a work's manifests (OCM: 500 KiB).
pub const MAX_MANIFESTS_BYTES: usize = 500 * 1024;
/// Update strategies.
pub const UPDATE_STRATEGIES: [&str; 4] = ["Update", "CreateOnly", "ServerSideApply", "ReadOnly"];
/// Delete propagation policies.
pub const PROPAGATION_POLICIES: [&str; 3] = ["Foreground", "Orphan", "SelectivelyOrphan"];
/// Feedback rule types.
pub const FEEDBACK_RULE_TYPES: [&str; 2] = ["WellKnownStatus", "JSONPaths"];
/// Condition types of works and manifests.
pub mod conditions {
    /// Every manifest applied.
    pub const APPLIED: &str = "Applied";
    /// Every resource available.
    pub const AVAILABLE: &str = "Available";
    /// Some resource is still converging.
    pub const PROGRESSING: &str = "Progressing";
    /// Some resource failed.
    pub const DEGRADED: &str = "Degraded";
    /// Feedback values were scraped.
    pub const FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";
    /// The work is being deleted.
    pub const DELETING: &str = "Deleting";
}

/// The identity of one manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManifestId {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ManifestId {
    /// `group/version Kind namespace/name`, for messages.
    pub fn describe(&self) -> String {
        let gv = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        if self.namespace.is_empty() {
            format!("{gv} {} {}", self.kind, self.name)
        } else {
            format!("{gv} {} {}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// The lower-case plural resource name of the kind.
    pub fn resource(&self) -> String {
        kind_to_resource(&self.kind)
    }

    /// Whether a manifest config's resource identifier selects this manifest.
    pub fn matches(&self, r: &ResourceIdentifier) -> bool {
        r.group == self.group
            && r.resource.eq_ignore_ascii_case(&self.resource())
            && r.name == self.name
            && (r.namespace == self.namespace || (r.namespace == "*"))
    }
}

/// Kinds that are cluster-scoped (everything else is namespaced; its namespace defaults to
/// `default`).
pub fn is_cluster_scoped(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("", "Namespace")
            | ("", "Node")
            | ("", "PersistentVolume")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("rbac.authorization.k8s.io", "ClusterRole")
            | ("rbac.authorization.k8s.io", "ClusterRoleBinding")
            | ("storage.k8s.io", "StorageClass")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("admissionregistration.k8s.io", _)
    )
}

/// The plural resource of a kind, as the API server names it (`Deployment` → `deployments`,
/// `Ingress` → `ingresses`, `NetworkPolicy` → `networkpolicies`).
pub fn kind_to_resource(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if k == "endpoints" {
        return k;
    }
    if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else if k.ends_with('y') && !k.ends_with("ay") && !k.ends_with("ey") && !k.ends_with("oy") {
        format!("{}ies", &k[..k.len() - 1])
    } else {
        format!("{k}s")
    }
}

/// Reads a manifest's identity, naming the missing field.
pub fn manifest_id(obj: &Value) -> Result<ManifestId, String> {
    let Some(map) = obj.as_object() else {
        return Err("must be a Kubernetes object (a map), not a list or scalar".into());
    };
    let api_version = match map.get("apiVersion") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("apiVersion: must be a non-empty string".into()),
        None => return Err("apiVersion: required".into()),
    };
    let kind = match map.get("kind") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("kind: must be a non-empty string".into()),
        None => return Err("kind: required".into()),
    };
    let meta = map.get("metadata").and_then(Value::as_object);
    let name = match meta.and_then(|m| m.get("name")) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("metadata.name: must be a non-empty string".into()),
        None => return Err("metadata.name: required".into()),
    };
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.clone()),
    };
    let namespace = if is_cluster_scoped(&group, &kind) {
        String::new()
    } else {
        match meta.and_then(|m| m.get("namespace")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) | None => "default".to_string(),
            Some(_) => return Err("metadata.namespace: must be a string".into()),
        }
    };
    Ok(ManifestId {
        group,
        version,
        kind,
        namespace,
        name,
    })
}

/// Validates a work: names, manifests (each an object with apiVersion, kind and name; no
/// duplicates; total size within [`MAX_MANIFESTS_BYTES`]), update strategies, feedback rule
/// types, delete options. Returns every problem, each naming its field.
pub fn validate(work: &ManifestWork) -> Vec<String> {
    let mut errors = Vec::new();
    let meta = work.metadata.clone().unwrap_or_default();
    if let Err(e) = crate::names::validate_dns1123_label("metadata.namespace", &meta.namespace) {
        errors.push(format!(
            "{e} (the namespace of a ManifestWork is its cluster's name)"
        ));
    }
    if let Err(e) = crate::names::validate_dns1123_subdomain("metadata.name", &meta.name) {
        errors.push(e.to_string());
    }
    let spec = work.spec.clone().unwrap_or_default();
    let manifests = spec.workload.map(|w| w.manifests).unwrap_or_default();
    if manifests.is_empty() {
        errors.push("spec.workload.manifests: at least one manifest is required".into());
    }
    let total: usize = manifests.iter().map(|m| m.raw.len()).sum();
    if total > MAX_MANIFESTS_BYTES {
        errors.push(format!(
            "spec.workload.manifests: {total} bytes in total, over the {MAX_MANIFESTS_BYTES}-byte limit; split the work"
        ));
    }
    let mut seen: HashMap<ManifestId, usize> = HashMap::new();
    for (i, m) in manifests.iter().enumerate() {
        let field = format!("spec.workload.manifests[{i}]");
        let obj: Value = match serde_json::from_slice(&m.raw) {
            Ok(v) => v,
            Err(e) => {
                errors.push(format!("{field}: not valid JSON: {e}"));
                continue;
            }
        };
        match manifest_id(&obj) {
            Ok(id) => {
                if let Some(first) = seen.insert(id.clone(), i) {
                    errors.push(format!(
                        "{field}: duplicate resource {} (also manifests[{first}])",
                        id.describe()
                    ));
                }
            }
            Err(e) => errors.push(format!("{field}.{e}")),
        }
    }
    for (i, c) in spec.manifest_configs.iter().enumerate() {
        let field = format!("spec.manifestConfigs[{i}]");
        let rid = c.resource_identifier.clone().unwrap_or_default();
        if rid.resource.is_empty() {
            errors.push(format!("{field}.resourceIdentifier.resource: required"));
        }
        if rid.name.is_empty() {
            errors.push(format!("{field}.resourceIdentifier.name: required"));
        }
        if let Some(us) = &c.update_strategy
            && !UPDATE_STRATEGIES.contains(&us.r#type.as_str())
        {
            errors.push(format!(
                "{field}.updateStrategy.type: {:?} is not one of {}",
                us.r#type,
                UPDATE_STRATEGIES.join(", ")
            ));
        }
        for (j, r) in c.feedback_rules.iter().enumerate() {
            let rf = format!("{field}.feedbackRules[{j}]");
            match r.r#type.as_str() {
                "WellKnownStatus" => {}
                "JSONPaths" => {
                    if r.json_paths.is_empty() {
                        errors.push(format!("{rf}.jsonPaths: at least one path is required for type JSONPaths"));
                    }
                    let mut names = std::collections::HashSet::new();
                    for (k, p) in r.json_paths.iter().enumerate() {
                        if p.name.is_empty() {
                            errors.push(format!("{rf}.jsonPaths[{k}].name: required"));
                        } else if !names.insert(p.name.as_str()) {
                            errors.push(format!("{rf}.jsonPaths[{k}].name: duplicate {:?}", p.name));
                        }
                        if p.path.is_empty() {
                            errors.push(format!("{rf}.jsonPaths[{k}].path: required"));
                        }
                    }
                }
                other => errors.push(format!(
                    "{rf}.type: unknown feedback rule type {other:?} (want WellKnownStatus or JSONPaths)"
                )),
            }
        }
    }
    if let Some(d) = &spec.delete_option {
        if !d.propagation_policy.is_empty()
            && !PROPAGATION_POLICIES.contains(&d.propagation_policy.as_str())
        {
            errors.push(format!(
                "spec.deleteOption.propagationPolicy: {:?} is not one of {}",
                d.propagation_policy,
                PROPAGATION_POLICIES.join(", ")
            ));
        }
        if let Some(so) = &d.selectively_orphans {
            for (i, r) in so.orphaning_rules.iter().enumerate() {
                if r.resource.is_empty() || r.name.is_empty() {
                    errors.push(format!(
                        "spec.deleteOption.selectivelyOrphans.orphaningRules[{i}]: resource and name are required"
                    ));
                }
            }
        }
        if d.ttl_seconds_after_finished.is_some_and(|t| t < 0) {
            errors.push("spec.deleteOption.ttlSecondsAfterFinished: must not be negative".into());
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{
        FeedbackRule, Manifest, ManifestConfigOption, ManifestWorkSpec, ManifestsTemplate,
        ObjectMeta,
    };
    use serde_json::json;

    fn work(manifests: Vec<Value>) -> ManifestWork {
        ManifestWork {
            metadata: Some(ObjectMeta {
                name: "w".into(),
                namespace: "cluster1".into(),
                ..Default::default()
            }),
            spec: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: manifests
                        .into_iter()
                        .map(|v| Manifest {
                            raw: serde_json::to_vec(&v).unwrap(),
                        })
                        .collect(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn deploy(name: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn kinds_map_to_api_server_resource_names() {
        assert_eq!(kind_to_resource("Deployment"), "deployments");
        assert_eq!(kind_to_resource("Ingress"), "ingresses");
        assert_eq!(kind_to_resource("NetworkPolicy"), "networkpolicies");
        assert_eq!(kind_to_resource("Endpoints"), "endpoints");
        assert_eq!(kind_to_resource("Gateway"), "gateways");
    }

    #[test]
    fn identity_defaults_namespace_and_knows_cluster_scoped_kinds() {
        let id = manifest_id(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        )
        .unwrap();
        assert_eq!((id.group.as_str(), id.namespace.as_str()), ("", "default"));
        let id = manifest_id(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "namespace": "x"}})).unwrap();
        assert_eq!(id.namespace, "");
        assert_eq!(
            manifest_id(&json!({"kind": "X", "metadata": {"name": "n"}})).unwrap_err(),
            "apiVersion: required"
        );
        assert_eq!(
            manifest_id(&json!({"apiVersion": "v1", "metadata": {"name": "n"}})).unwrap_err(),
            "kind: required"
        );
        assert_eq!(
            manifest_id(&json!({"apiVersion": "v1", "kind": "X"})).unwrap_err(),
            "metadata.name: required"
        );
    }

    #[test]
    fn validation_names_manifest_index_and_field() {
        let errs = validate(&work(vec![
            deploy("a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            deploy("a"),
        ]));
        assert!(
            errs.iter()
                .any(|e| e == "spec.workload.manifests[1].metadata.name: required"),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.starts_with("spec.workload.manifests[2]: duplicate resource apps/v1 Deployment default/a (also manifests[0])")), "{errs:?}");
        assert!(validate(&work(vec![deploy("a")])).is_empty());
        assert!(!validate(&work(vec![])).is_empty());
    }

    #[test]
    fn oversized_works_and_unknown_rules_are_rejected() {
        let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": "y".repeat(MAX_MANIFESTS_BYTES)}});
        let errs = validate(&work(vec![big]));
        assert!(
            errs.iter()
                .any(|e| e.contains("over the 512000-byte limit")),
            "{errs:?}"
        );
        let mut w = work(vec![deploy("a")]);
        w.spec
            .as_mut()
            .unwrap()
            .manifest_configs
            .push(ManifestConfigOption {
                resource_identifier: Some(ResourceIdentifier {
                    group: "apps".into(),
                    resource: "deployments".into(),
                    namespace: "default".into(),
                    name: "a".into(),
                }),
                feedback_rules: vec![FeedbackRule {
                    r#type: "Magic".into(),
                    json_paths: vec![],
                }],
                update_strategy: None,
            });
        let errs = validate(&w);
        assert_eq!(
            errs,
            vec![
                "spec.manifestConfigs[0].feedbackRules[0].type: unknown feedback rule type \"Magic\" (want WellKnownStatus or JSONPaths)"
            ]
        );
    }

    #[test]
    fn resource_identifiers_select_manifests() {
        let id = manifest_id(&deploy("hello")).unwrap();
        let r = ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "default".into(),
            name: "hello".into(),
        };
        assert!(id.matches(&r));
        assert!(!id.matches(&ResourceIdentifier {
            name: "other".into(),
            ..r
        }));
    }
}

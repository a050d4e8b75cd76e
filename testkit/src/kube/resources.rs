//! API resources the fake server serves: a built-in table of the common kinds, plus whatever
//! CustomResourceDefinitions add once they are created (as a real server's discovery does).

use serde_json::{Value, json};

/// One API resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name (`deployments`).
    pub plural: String,
    /// Kind (`Deployment`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
}

impl Resource {
    fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            namespaced,
            short_names: Vec::new(),
        }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The `APIResource` entry of discovery.
    pub fn discovery(&self) -> Value {
        json!({
            "name": self.plural,
            "singularName": self.kind.to_ascii_lowercase(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortNames": self.short_names,
        })
    }

    fn status_subresource(&self) -> Value {
        json!({
            "name": format!("{}/status", self.plural),
            "singularName": "",
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["get", "patch", "update"],
        })
    }
}

/// The built-in resources.
pub fn builtin() -> Vec<Resource> {
    let mut r = vec![
        Resource::new("", "v1", "namespaces", "Namespace", false),
        Resource::new("", "v1", "nodes", "Node", false),
        Resource::new("", "v1", "configmaps", "ConfigMap", true),
        Resource::new("", "v1", "secrets", "Secret", true),
        Resource::new("", "v1", "services", "Service", true),
        Resource::new("", "v1", "serviceaccounts", "ServiceAccount", true),
        Resource::new("", "v1", "pods", "Pod", true),
        Resource::new(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
        ),
        Resource::new("apps", "v1", "deployments", "Deployment", true),
        Resource::new("apps", "v1", "statefulsets", "StatefulSet", true),
        Resource::new("apps", "v1", "daemonsets", "DaemonSet", true),
        Resource::new("apps", "v1", "replicasets", "ReplicaSet", true),
        Resource::new("batch", "v1", "jobs", "Job", true),
        Resource::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
        ),
        Resource::new("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
        Resource::new(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
        ),
        Resource::new(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
        ),
        Resource::new(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
        ),
    ];
    for (plural, short) in [
        ("namespaces", "ns"),
        ("configmaps", "cm"),
        ("services", "svc"),
        ("deployments", "deploy"),
        ("statefulsets", "sts"),
        ("daemonsets", "ds"),
        ("serviceaccounts", "sa"),
        ("persistentvolumeclaims", "pvc"),
        ("customresourcedefinitions", "crd"),
    ] {
        if let Some(res) = r.iter_mut().find(|x| x.plural == plural) {
            res.short_names.push(short.into());
        }
    }
    r
}

/// The resources a CRD object serves (one per served version).
pub fn from_crd(crd: &Value) -> Vec<Resource> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Vec::new();
    }
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| v["name"].as_str())
        .map(|version| Resource::new(group, version, plural, kind, namespaced))
        .collect()
}

/// The `APIResourceList` of one group version.
pub fn resource_list(group_version: &str, resources: &[Resource]) -> Value {
    let mut entries = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.group_version() == group_version)
    {
        entries.push(r.discovery());
        entries.push(r.status_subresource());
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    })
}

/// The `APIGroupList` of `/apis`.
pub fn group_list(resources: &[Resource]) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for r in resources.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => {
                versions.push(r.version.clone())
            }
            Some(_) => {}
            None => groups.push((r.group.clone(), vec![r.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({
                "name": name,
                "versions": vs,
                "preferredVersion": vs[0].clone(),
            })
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

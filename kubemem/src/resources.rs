//! The API resources an in-memory cluster serves (pure): a built-in table of the common kinds,
//! plus those its CustomResourceDefinitions define (as a real API server's discovery does), and
//! the discovery documents (`/apis`, `/api/v1`, `/apis/<group>/<version>`) built from them.

use serde_json::{Value, json};

/// One API resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural name (`deployments`).
    pub plural: String,
    /// Kind (`Deployment`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
}

impl Resource {
    fn new(group: &str, plural: &str, kind: &str, namespaced: bool, short: &[&str]) -> Self {
        Self {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            kind: kind.into(),
            namespaced,
            short_names: short.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployments.apps`, or `pods` in the core group (as Kubernetes names them in errors).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The `APIResource` entries of discovery (the resource and its status subresource).
    pub fn discovery(&self) -> [Value; 2] {
        [
            json!({
                "name": self.plural,
                "singularName": self.kind.to_ascii_lowercase(),
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                "shortNames": self.short_names,
            }),
            json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }),
        ]
    }
}

/// The built-in resources (served by every in-memory cluster, whether or not it stores
/// objects of them).
pub fn builtin() -> Vec<Resource> {
    vec![
        Resource::new("", "namespaces", "Namespace", false, &["ns"]),
        Resource::new("", "nodes", "Node", false, &["no"]),
        Resource::new("", "configmaps", "ConfigMap", true, &["cm"]),
        Resource::new("", "secrets", "Secret", true, &[]),
        Resource::new("", "services", "Service", true, &["svc"]),
        Resource::new("", "serviceaccounts", "ServiceAccount", true, &["sa"]),
        Resource::new("", "pods", "Pod", true, &["po"]),
        Resource::new(
            "",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            &["pvc"],
        ),
        Resource::new("apps", "deployments", "Deployment", true, &["deploy"]),
        Resource::new("apps", "statefulsets", "StatefulSet", true, &["sts"]),
        Resource::new("apps", "daemonsets", "DaemonSet", true, &["ds"]),
        Resource::new("apps", "replicasets", "ReplicaSet", true, &["rs"]),
        Resource::new("batch", "jobs", "Job", true, &[]),
        Resource::new("batch", "cronjobs", "CronJob", true, &["cj"]),
        Resource::new("coordination.k8s.io", "leases", "Lease", true, &[]),
        Resource::new("rbac.authorization.k8s.io", "roles", "Role", true, &[]),
        Resource::new(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
        ),
        Resource::new(
            "rbac.authorization.k8s.io",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
        ),
        Resource::new(
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
        ),
        Resource::new("networking.k8s.io", "ingresses", "Ingress", true, &["ing"]),
        Resource::new(
            "networking.k8s.io",
            "networkpolicies",
            "NetworkPolicy",
            true,
            &["netpol"],
        ),
        Resource::new(
            "policy",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
        ),
        Resource::new(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
        ),
    ]
}

/// The resources a CustomResourceDefinition object defines (one per served version).
pub fn from_crd(crd: &Value) -> Vec<Resource> {
    let spec = &crd["spec"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        spec["names"]["plural"].as_str(),
        spec["names"]["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let short_names: Vec<String> = spec["names"]["shortNames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| v["name"].as_str())
        .map(|version| Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            namespaced,
            short_names: short_names.clone(),
        })
        .collect()
}

/// The `APIGroupList` of `/apis` (every group but the core one).
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
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({"name": name, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// The `APIResourceList` of one group version (`v1` or `apps/v1`); `None` when no resource
/// has it.
pub fn resource_list(api_version: &str, resources: &[Resource]) -> Option<Value> {
    let list: Vec<Value> = resources
        .iter()
        .filter(|r| r.api_version() == api_version)
        .flat_map(Resource::discovery)
        .collect();
    (!list.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": list})
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_add_their_served_versions() {
        let crd = json!({"spec": {"group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}]}});
        let r = from_crd(&crd);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].qualified(), "widgets.example.io");
        assert!(r[0].namespaced);
        let mut all = builtin();
        all.extend(r);
        let groups = group_list(&all);
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "example.io")
        );
        let list = resource_list("example.io/v1", &all).unwrap();
        assert_eq!(list["resources"][0]["name"], "widgets");
        assert!(resource_list("example.io/v0", &all).is_none());
        assert!(resource_list("v1", &all).is_some());
    }
}

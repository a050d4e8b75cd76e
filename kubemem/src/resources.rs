//! The API resources an in-memory cluster serves (pure): a built-in table of the common kinds
//! with the Kubernetes versions serving each group version (`batch/v1beta1` CronJob until 1.24,
//! `batch/v1` from 1.21: [`builtin_for`]), plus those its CustomResourceDefinitions define (as a
//! real API server's discovery does), and the discovery documents (`/apis`, `/api/v1`,
//! `/apis/<group>/<version>`) built from them.

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

/// The Kubernetes minor versions (`30` for 1.30) in which a built-in resource is served, both
/// ends inclusive: the deprecated API migration guide's removals (`batch/v1beta1` CronJob until
/// 1.24) and GA arrivals (`batch/v1` CronJob from 1.21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedIn {
    /// The first minor serving it (`0`: every version simulated).
    pub since: u32,
    /// The last minor serving it (`None`: still served).
    pub until: Option<u32>,
}

impl ServedIn {
    /// Served in every version simulated.
    pub const ALWAYS: Self = Self {
        since: 0,
        until: None,
    };

    /// Served from minor `since` on.
    const fn starting(since: u32) -> Self {
        Self { since, until: None }
    }

    /// Served up to minor `until`, then removed.
    const fn until(until: u32) -> Self {
        Self {
            since: 0,
            until: Some(until),
        }
    }

    /// Whether minor `minor` serves it.
    pub fn contains(self, minor: u32) -> bool {
        minor >= self.since && self.until.is_none_or(|u| minor <= u)
    }
}

/// The newest Kubernetes minor the built-in table describes (the simulated range is 1.20–1.34);
/// a version that cannot be read is taken as this one.
pub const NEWEST_MINOR: u32 = 34;

/// One row of the built-in table.
struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    served: ServedIn,
}

const fn row(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    served: ServedIn,
) -> Builtin {
    Builtin {
        group,
        version,
        plural,
        kind,
        namespaced,
        short,
        served,
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";
const ALWAYS: ServedIn = ServedIn::ALWAYS;

/// The built-in resources by Kubernetes version. Within a group the preferred (GA) version
/// comes first: discovery names the first version of a group its preferred one.
#[rustfmt::skip]
const BUILTIN: &[Builtin] = &[
    row("", "v1", "namespaces", "Namespace", false, &["ns"], ALWAYS),
    row("", "v1", "nodes", "Node", false, &["no"], ALWAYS),
    row("", "v1", "configmaps", "ConfigMap", true, &["cm"], ALWAYS),
    row("", "v1", "secrets", "Secret", true, &[], ALWAYS),
    row("", "v1", "services", "Service", true, &["svc"], ALWAYS),
    row("", "v1", "serviceaccounts", "ServiceAccount", true, &["sa"], ALWAYS),
    row("", "v1", "pods", "Pod", true, &["po"], ALWAYS),
    row("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, &["pvc"], ALWAYS),
    row("", "v1", "persistentvolumes", "PersistentVolume", false, &["pv"], ALWAYS),
    row("", "v1", "limitranges", "LimitRange", true, &["limits"], ALWAYS),
    row("", "v1", "resourcequotas", "ResourceQuota", true, &["quota"], ALWAYS),
    row("", "v1", "endpoints", "Endpoints", true, &["ep"], ALWAYS),
    row("", "v1", "events", "Event", true, &["ev"], ALWAYS),
    row("apps", "v1", "deployments", "Deployment", true, &["deploy"], ALWAYS),
    row("apps", "v1", "statefulsets", "StatefulSet", true, &["sts"], ALWAYS),
    row("apps", "v1", "daemonsets", "DaemonSet", true, &["ds"], ALWAYS),
    row("apps", "v1", "replicasets", "ReplicaSet", true, &["rs"], ALWAYS),
    row("batch", "v1", "jobs", "Job", true, &[], ALWAYS),
    row("batch", "v1", "cronjobs", "CronJob", true, &["cj"], ServedIn::starting(21)),
    row("batch", "v1beta1", "cronjobs", "CronJob", true, &["cj"], ServedIn::until(24)),
    row("coordination.k8s.io", "v1", "leases", "Lease", true, &[], ALWAYS),
    row("coordination.k8s.io", "v1beta1", "leases", "Lease", true, &[], ServedIn::until(21)),
    row(RBAC, "v1", "roles", "Role", true, &[], ALWAYS),
    row(RBAC, "v1", "rolebindings", "RoleBinding", true, &[], ALWAYS),
    row(RBAC, "v1", "clusterroles", "ClusterRole", false, &[], ALWAYS),
    row(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", false, &[], ALWAYS),
    row(RBAC, "v1beta1", "roles", "Role", true, &[], ServedIn::until(21)),
    row(RBAC, "v1beta1", "rolebindings", "RoleBinding", true, &[], ServedIn::until(21)),
    row(RBAC, "v1beta1", "clusterroles", "ClusterRole", false, &[], ServedIn::until(21)),
    row(RBAC, "v1beta1", "clusterrolebindings", "ClusterRoleBinding", false, &[], ServedIn::until(21)),
    row("networking.k8s.io", "v1", "ingresses", "Ingress", true, &["ing"], ALWAYS),
    row("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true, &["netpol"], ALWAYS),
    row("networking.k8s.io", "v1beta1", "ingresses", "Ingress", true, &["ing"], ServedIn::until(21)),
    row("extensions", "v1beta1", "ingresses", "Ingress", true, &["ing"], ServedIn::until(21)),
    row("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, &["pdb"], ServedIn::starting(21)),
    row("policy", "v1beta1", "poddisruptionbudgets", "PodDisruptionBudget", true, &["pdb"], ServedIn::until(24)),
    row("policy", "v1beta1", "podsecuritypolicies", "PodSecurityPolicy", false, &["psp"], ServedIn::until(24)),
    row("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, &["hpa"], ServedIn::starting(23)),
    row("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, &["hpa"], ALWAYS),
    row("autoscaling", "v2beta2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, &["hpa"], ServedIn::until(25)),
    row("autoscaling", "v2beta1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, &["hpa"], ServedIn::until(24)),
    row("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, &[], ServedIn::starting(21)),
    row("discovery.k8s.io", "v1beta1", "endpointslices", "EndpointSlice", true, &[], ServedIn::until(24)),
    row("events.k8s.io", "v1", "events", "Event", true, &["ev"], ALWAYS),
    row("events.k8s.io", "v1beta1", "events", "Event", true, &["ev"], ServedIn::until(24)),
    row("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false, &["crd", "crds"], ALWAYS),
    row("apiextensions.k8s.io", "v1beta1", "customresourcedefinitions", "CustomResourceDefinition", false, &["crd", "crds"], ServedIn::until(21)),
];

/// The built-in resources a cluster of Kubernetes minor version `minor` serves (whether or not
/// it stores objects of them).
pub fn builtin_for(minor: u32) -> Vec<Resource> {
    BUILTIN
        .iter()
        .filter(|b| b.served.contains(minor))
        .map(|b| Resource {
            group: b.group.into(),
            version: b.version.into(),
            plural: b.plural.into(),
            kind: b.kind.into(),
            namespaced: b.namespaced,
            short_names: b.short.iter().map(|s| s.to_string()).collect(),
        })
        .collect()
}

/// The built-in resources of the newest version described ([`NEWEST_MINOR`]).
pub fn builtin() -> Vec<Resource> {
    builtin_for(NEWEST_MINOR)
}

/// The versions in which the built-in `kind` of `api_version` (`batch/v1beta1`) is served;
/// `None` when it is no built-in resource at all.
pub fn builtin_served(api_version: &str, kind: &str) -> Option<ServedIn> {
    BUILTIN
        .iter()
        .find(|b| {
            b.kind == kind
                && match api_version.split_once('/') {
                    Some((g, v)) => b.group == g && b.version == v,
                    None => b.group.is_empty() && b.version == api_version,
                }
        })
        .map(|b| b.served)
}

/// The minor version of a Kubernetes `gitVersion` (`v1.30.2+k3s1` → 30, `v1.24.17-eks-…` →
/// 24); `None` when it is not a 1.x version.
pub fn minor_of(git_version: &str) -> Option<u32> {
    let mut parts = git_version.trim().trim_start_matches('v').split('.');
    if parts.next()? != "1" {
        return None;
    }
    let minor = parts.next()?;
    let digits = minor.bytes().take_while(u8::is_ascii_digit).count();
    minor[..digits].parse().ok()
}

/// [`minor_of`], or [`NEWEST_MINOR`] for a version that cannot be read.
pub fn minor_or_newest(git_version: &str) -> u32 {
    minor_of(git_version).unwrap_or(NEWEST_MINOR)
}

/// The built-in resources of a cluster reporting `git_version` ([`minor_or_newest`]).
pub fn builtin_of(git_version: &str) -> Vec<Resource> {
    builtin_for(minor_or_newest(git_version))
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

    fn serves(resources: &[Resource], api_version: &str, kind: &str) -> bool {
        resources
            .iter()
            .any(|r| r.api_version() == api_version && r.kind == kind)
    }

    #[test]
    fn served_kinds_follow_the_kubernetes_version() {
        let v130 = builtin_of("v1.30.2+k3s1");
        assert!(serves(&v130, "batch/v1", "CronJob"));
        assert!(!serves(&v130, "batch/v1beta1", "CronJob"));
        assert!(!serves(&v130, "policy/v1beta1", "PodDisruptionBudget"));
        assert!(serves(&v130, "autoscaling/v2", "HorizontalPodAutoscaler"));
        let v124 = builtin_of("v1.24.17");
        assert!(serves(&v124, "batch/v1", "CronJob"));
        assert!(serves(&v124, "batch/v1beta1", "CronJob"));
        assert!(serves(&v124, "policy/v1beta1", "PodSecurityPolicy"));
        assert!(!serves(&v124, "networking.k8s.io/v1beta1", "Ingress"));
        let v120 = builtin_for(20);
        assert!(!serves(&v120, "batch/v1", "CronJob"));
        assert!(serves(&v120, "extensions/v1beta1", "Ingress"));
        assert!(serves(&v120, "rbac.authorization.k8s.io/v1beta1", "Role"));
        // 1.25 removed batch/v1beta1 but still served autoscaling/v2beta2; 1.26 removed it.
        assert!(!serves(&builtin_for(25), "batch/v1beta1", "CronJob"));
        assert!(serves(
            &builtin_for(25),
            "autoscaling/v2beta2",
            "HorizontalPodAutoscaler"
        ));
        assert!(!serves(
            &builtin_for(26),
            "autoscaling/v2beta2",
            "HorizontalPodAutoscaler"
        ));
        assert_eq!(
            builtin_served("batch/v1beta1", "CronJob"),
            Some(ServedIn {
                since: 0,
                until: Some(24)
            })
        );
        assert_eq!(builtin_served("v1", "ConfigMap"), Some(ServedIn::ALWAYS));
        assert_eq!(builtin_served("example.io/v1", "Widget"), None);
    }

    #[test]
    fn discovery_prefers_the_ga_version_and_lists_the_old_one_where_served() {
        let groups = group_list(&builtin_for(24));
        let batch = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "batch")
            .unwrap()
            .clone();
        assert_eq!(batch["preferredVersion"]["version"], "v1");
        assert_eq!(batch["versions"].as_array().unwrap().len(), 2);
        assert!(resource_list("batch/v1beta1", &builtin_for(24)).is_some());
        assert!(resource_list("batch/v1beta1", &builtin_for(30)).is_none());
        let groups = group_list(&builtin_for(30));
        let autoscaling = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "autoscaling")
            .unwrap()
            .clone();
        assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
    }

    #[test]
    fn versions_are_read_from_git_versions() {
        assert_eq!(minor_of("v1.30.2+k3s1"), Some(30));
        assert_eq!(minor_of("v1.24.17-eks-5e0fdde"), Some(24));
        assert_eq!(minor_of("1.28"), Some(28));
        assert_eq!(minor_of("v1.29+"), Some(29));
        assert_eq!(minor_of("v2.0.0"), None);
        assert_eq!(minor_of("unknown"), None);
        assert_eq!(minor_or_newest("nonsense"), NEWEST_MINOR);
    }
}

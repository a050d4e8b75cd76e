//! Metadata helpers: well-known names, timestamps and conditions.

use crate::v1::{Condition, ObjectMeta};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Label that puts a cluster in an `ExclusiveClusterSetLabel` set.
pub const CLUSTERSET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
/// The built-in set every new cluster joins.
pub const DEFAULT_CLUSTERSET: &str = "default";
/// Label naming the ManifestWorkReplicaSet a work belongs to (`<namespace>.<name>`, as OCM
/// writes it): the hub's replica sets set it, and the cluster actors read it.
pub const REPLICASET_LABEL: &str = "work.open-cluster-management.io/manifestworkreplicaset";
/// Request header (value `true`) that forces a write the hub refuses by default: applying,
/// deleting or undoing a ManifestWorkReplicaSet a GitRepo writes (`flotilla apply --force`).
pub const FORCE_HEADER: &str = "flotilla-force";

/// DNS domains whose label keys (`<domain>/<name>` and `<sub>.<domain>/<name>`) belong to the
/// hub and its admin, never to a registering agent: Open Cluster Management's (the cluster set
/// label, `feature.open-cluster-management.io/addon-*`, …), Flotilla's own, and Kubernetes'
/// (reserved for its core components).
pub const RESERVED_LABEL_DOMAINS: [&str; 4] = [
    "open-cluster-management.io",
    "flotilla.io",
    "kubernetes.io",
    "k8s.io",
];
/// Label keys without a domain a registering agent may not set: `name` is the cluster's name
/// by Red Hat ACM's convention, and placements select clusters by it.
pub const RESERVED_LABEL_NAMES: [&str; 1] = ["name"];

/// Whether a registering agent may not set the label `key` ([`RESERVED_LABEL_DOMAINS`],
/// [`RESERVED_LABEL_NAMES`]): only the hub admin (label edits, accept, ManagedCluster
/// documents), a join credential naming the set, and import policy templates set these.
pub fn is_reserved_label(key: &str) -> bool {
    match key.rsplit_once('/') {
        Some((domain, _)) => {
            let domain = domain.to_ascii_lowercase();
            RESERVED_LABEL_DOMAINS
                .iter()
                .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
        }
        None => RESERVED_LABEL_NAMES
            .iter()
            .any(|n| key.eq_ignore_ascii_case(n)),
    }
}
/// The built-in set that selects every cluster.
pub const GLOBAL_CLUSTERSET: &str = "global";

/// Condition: the hub admin (or policy) accepted the cluster.
pub const COND_HUB_ACCEPTED: &str = "HubAcceptedManagedCluster";
/// Condition: the hub admin denied the cluster.
pub const COND_HUB_DENIED: &str = "HubDeniedManagedCluster";
/// Condition: the agent joined after acceptance.
pub const COND_JOINED: &str = "ManagedClusterJoined";
/// Condition: the cluster is available (lease renewed and spoke healthy).
pub const COND_AVAILABLE: &str = "ManagedClusterConditionAvailable";
/// Condition: the agent's clock agrees with the hub's.
pub const COND_CLOCK_SYNCED: &str = "ManagedClusterConditionClockSynced";
/// Condition (a Flotilla extension): whether the hub accepts the version the cluster's agent
/// reports — False with the refusal's text when it does not, so the cluster says why it goes
/// Unknown.
pub const COND_AGENT_VERSION_ACCEPTED: &str = "AgentVersionAccepted";
/// Condition of a set: whether it selects any cluster.
pub const COND_CLUSTERSET_EMPTY: &str = "ClusterSetEmpty";
/// Condition of a binding: the set exists and the binding is usable.
pub const COND_BOUND: &str = "Bound";
/// Condition of a managed namespace (ManagedCluster `status.managedNamespaces[].conditions`):
/// the agent applied the namespace on the spoke.
pub const COND_NAMESPACE_AVAILABLE: &str = "NamespaceAvailable";
/// Reason of `NamespaceAvailable=True`.
pub const REASON_NAMESPACE_APPLIED: &str = "NamespaceApplied";
/// Reason of `NamespaceAvailable=False`.
pub const REASON_NAMESPACE_APPLY_FAILED: &str = "NamespaceApplyFailed";
/// Prefix of the label the agent puts on the namespaces a hub manages
/// (`clusterset.open-cluster-management.io/<hub hash>`, value `"true"`, `"false"` once the hub
/// no longer manages it), as OCM's registration agent does.
pub const MANAGED_NAMESPACE_LABEL_PREFIX: &str = "clusterset.open-cluster-management.io/";

/// Hub-maintained taint while Available=False.
pub const TAINT_UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";
/// Hub-maintained taint while Available is Unknown or missing.
pub const TAINT_UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
/// Taint effects.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSelect", "PreferNoSelect", "NoSelectIfNew"];

/// Reserved claim: the cluster's unique id.
pub const CLAIM_ID: &str = "id.k8s.io";
/// Reserved claim: the Kubernetes version.
pub const CLAIM_KUBEVERSION: &str = "kubeversion.open-cluster-management.io";
/// Reserved claim: the platform (AWS, GCP, Other, …).
pub const CLAIM_PLATFORM: &str = "platform.open-cluster-management.io";
/// Reserved claim: the product (OpenShift, K3s, Other, …).
pub const CLAIM_PRODUCT: &str = "product.open-cluster-management.io";
/// Number of nodes of the cluster (Flotilla's; reported by backends that know it).
pub const CLAIM_NODES: &str = "nodes.flotilla.io";
/// The agent's public curve key (an NKeys xkey, `X…`; Flotilla's): the hub seals the values
/// hub templates `protect` to it, so only that cluster's agent opens them.
pub const CLAIM_CURVE_KEY: &str = "curvekey.flotilla.io";
/// Claims the agent reports itself; a spoke admin's `--claim` may not use these names.
pub const RESERVED_CLAIMS: [&str; 6] = [
    CLAIM_ID,
    CLAIM_KUBEVERSION,
    CLAIM_PLATFORM,
    CLAIM_PRODUCT,
    CLAIM_NODES,
    CLAIM_CURVE_KEY,
];
/// Most custom (non-reserved) claims an agent may report (OCM default).
pub const MAX_CUSTOM_CLAIMS: usize = 20;

/// `"True"`, `"False"` and `"Unknown"` condition statuses.
pub mod status {
    /// The condition holds.
    pub const TRUE: &str = "True";
    /// The condition does not hold.
    pub const FALSE: &str = "False";
    /// The hub cannot tell.
    pub const UNKNOWN: &str = "Unknown";
}

/// Converts a `SystemTime` into a protobuf timestamp.
pub fn timestamp(t: SystemTime) -> prost_types::Timestamp {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// The current time as a protobuf timestamp.
pub fn now() -> prost_types::Timestamp {
    timestamp(SystemTime::now())
}

/// Converts a protobuf timestamp into a `SystemTime` (negative times clamp to the epoch).
pub fn system_time(ts: &prost_types::Timestamp) -> SystemTime {
    if ts.seconds < 0 {
        return UNIX_EPOCH;
    }
    UNIX_EPOCH + Duration::new(ts.seconds as u64, ts.nanos.clamp(0, 999_999_999) as u32)
}

/// Formats a timestamp as RFC 3339 (`2024-05-01T10:00:00Z`), seconds precision like Kubernetes.
pub fn rfc3339(ts: &prost_types::Timestamp) -> String {
    time::OffsetDateTime::from_unix_timestamp(ts.seconds)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Parses an RFC 3339 timestamp.
pub fn parse_rfc3339(s: &str) -> Option<prost_types::Timestamp> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: t.nanosecond() as i32,
    })
}

/// Finds a condition by type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.r#type == type_)
}

/// The status of a condition, or `None` when it is missing.
pub fn condition_status<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a str> {
    find_condition(conditions, type_).map(|c| c.status.as_str())
}

/// Sets a condition like `meta.SetStatusCondition`: `last_transition_time` changes only when the
/// status changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> bool {
    match conditions.iter_mut().find(|c| c.r#type == type_) {
        Some(c) => {
            let mut changed = false;
            if c.status != status {
                c.status = status.to_string();
                c.last_transition_time = Some(now());
                changed = true;
            }
            if c.reason != reason {
                c.reason = reason.to_string();
                changed = true;
            }
            if c.message != message {
                c.message = message.to_string();
                changed = true;
            }
            changed
        }
        None => {
            // One slot more, not double: a condition list is short and long-lived (the hub
            // keeps one per cluster and object), and doubling left up to three slots of 128
            // bytes unused in each.
            conditions.reserve_exact(1);
            conditions.push(Condition {
                r#type: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: Some(now()),
                observed_generation: 0,
            });
            true
        }
    }
}

/// Removes a condition; returns whether it was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.r#type != type_);
    before != conditions.len()
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_key(meta: &ObjectMeta) -> String {
    if meta.namespace.is_empty() {
        meta.name.clone()
    } else {
        format!("{}/{}", meta.namespace, meta.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_labels_are_the_hubs_domains_and_their_subdomains_and_name() {
        for key in [
            CLUSTERSET_LABEL,
            "feature.open-cluster-management.io/addon-foo",
            "open-cluster-management.io/anything",
            "Cluster.Open-Cluster-Management.IO/clusterset",
            "flotilla.io/mirror-peer",
            "cluster.flotilla.io/env",
            "node-role.kubernetes.io/control-plane",
            "k8s.io/x",
            "name",
            "Name",
        ] {
            assert!(is_reserved_label(key), "{key} must be reserved");
        }
        for key in [
            "env",
            "region",
            "names",
            "example.com/name",
            "notopen-cluster-management.io/x",
            "flotilla.io.example.com/x",
            "myk8s.io/x",
            "clusterset",
        ] {
            assert!(!is_reserved_label(key), "{key} must not be reserved");
        }
    }

    #[test]
    fn set_condition_keeps_transition_time_when_status_is_unchanged() {
        let mut conds = Vec::new();
        assert!(set_condition(
            &mut conds,
            COND_AVAILABLE,
            status::TRUE,
            "A",
            ""
        ));
        let first = conds[0].last_transition_time;
        assert!(!set_condition(
            &mut conds,
            COND_AVAILABLE,
            status::TRUE,
            "A",
            ""
        ));
        assert!(set_condition(
            &mut conds,
            COND_AVAILABLE,
            status::TRUE,
            "B",
            "m"
        ));
        assert_eq!(conds[0].last_transition_time, first);
        assert_eq!(conds[0].reason, "B");
    }

    #[test]
    fn set_condition_grows_a_list_by_exactly_the_condition_it_adds() {
        let mut conds = Vec::new();
        for (i, ty) in ["A", "B", "C", "D", "E"].into_iter().enumerate() {
            set_condition(&mut conds, ty, status::TRUE, "R", "");
            assert_eq!(conds.capacity(), i + 1, "after {ty}");
        }
    }

    #[test]
    fn rfc3339_round_trips_seconds() {
        let ts = prost_types::Timestamp {
            seconds: 1_645_431_066,
            nanos: 0,
        };
        assert_eq!(rfc3339(&ts), "2022-02-21T08:11:06Z");
        assert_eq!(parse_rfc3339("2022-02-21T08:11:06Z"), Some(ts));
    }
}

//! ManagedClusterSet rules shared by the hub (validation, what a cluster's status lists) and the
//! agent (the label it puts on the namespaces it manages).
//!
//! `spec.managedNamespaces` follows OCM (`cluster/v1beta2` ManagedClusterSet, `cluster/v1`
//! ManagedNamespaceConfig): every member cluster gets each listed namespace; the cluster's
//! `status.managedNamespaces` lists `{name, clusterSet, conditions}` for every set it belongs
//! to, sorted by set then name.

use crate::meta::{CLUSTERSET_LABEL, GLOBAL_CLUSTERSET, MANAGED_NAMESPACE_LABEL_PREFIX};
use crate::names::{self, NameError};
use crate::v1::{
    ClusterSetManagedNamespaceConfig, LabelSelector, ManagedCluster, ManagedClusterSelector,
    ManagedClusterSet, ManagedClusterSetSpec, ManagedNamespaceConfig,
};
use std::collections::HashMap;

/// Selector type: membership by the clusterset label (OCM's default).
pub const EXCLUSIVE: &str = "ExclusiveClusterSetLabel";
/// Selector type: membership by a label selector.
pub const LABEL_SELECTOR: &str = "LabelSelector";

/// Whether `cluster` is a member of `set`, as OCM decides it: a `LabelSelector` set holds the
/// clusters its selector matches (the `global` set's empty selector: every cluster); any other
/// set holds the clusters whose `cluster.open-cluster-management.io/clusterset` label names it.
/// The one rule the set family and every hub's set index use.
pub fn is_member(set: &ManagedClusterSet, cluster: &ManagedCluster) -> bool {
    let name = set.metadata.as_ref().map_or("", |m| m.name.as_str());
    is_member_by(name, set.spec.as_ref(), cluster)
}

/// [`is_member`] for a set named `name` with `spec`.
pub fn is_member_by(
    name: &str,
    spec: Option<&ManagedClusterSetSpec>,
    cluster: &ManagedCluster,
) -> bool {
    let labels = cluster.metadata.as_ref().map(|m| &m.labels);
    let sel = spec.and_then(|s| s.cluster_selector.as_ref());
    match sel.map(|s| s.selector_type.as_str()) {
        Some(LABEL_SELECTOR) => {
            let empty = LabelSelector::default();
            let ls = sel
                .and_then(|s| s.label_selector.as_ref())
                .unwrap_or(&empty);
            match labels {
                Some(l) => crate::selector::matches_labels(ls, l),
                None => crate::selector::matches_labels(ls, &HashMap::new()),
            }
        }
        _ => {
            labels
                .and_then(|l| l.get(CLUSTERSET_LABEL))
                .map(String::as_str)
                == Some(name)
        }
    }
}

/// The spec of a set the hub makes itself: `global` selects every cluster (an empty label
/// selector), `default` (and any other) by the exclusive label.
pub fn builtin_spec(name: &str) -> ManagedClusterSetSpec {
    let cluster_selector = if name == GLOBAL_CLUSTERSET {
        ManagedClusterSelector {
            selector_type: LABEL_SELECTOR.into(),
            label_selector: Some(LabelSelector::default()),
        }
    } else {
        ManagedClusterSelector {
            selector_type: EXCLUSIVE.into(),
            label_selector: None,
        }
    };
    ManagedClusterSetSpec {
        cluster_selector: Some(cluster_selector),
        managed_namespaces: Vec::new(),
    }
}

/// Checks `spec.managedNamespaces` as OCM's CRD does (name required, a DNS-1123 label of at most
/// 63 characters) plus its list-map key (names unique). Every problem is returned, each naming
/// its field (`spec.managedNamespaces[1].name`).
pub fn validate_managed_namespaces(list: &[ManagedNamespaceConfig]) -> Vec<NameError> {
    let mut errors = Vec::new();
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, ns) in list.iter().enumerate() {
        let field = format!("spec.managedNamespaces[{i}].name");
        if let Err(e) = names::validate_dns1123_label(&field, &ns.name) {
            errors.push(e);
            continue;
        }
        if let Some(j) = first.get(ns.name.as_str()) {
            errors.push(NameError {
                field,
                reason: format!(
                    "{:?} is already listed at spec.managedNamespaces[{j}]; names must be unique",
                    ns.name
                ),
            });
        } else {
            first.insert(&ns.name, i);
        }
    }
    errors
}

/// The key of the label the agent puts on the namespaces a hub manages:
/// `clusterset.open-cluster-management.io/<hub hash>`, the hash cut to 63 characters (the limit
/// of a label name), as OCM's `GetHubClusterSetLabel`.
pub fn hub_namespace_label(hub_hash: &str) -> String {
    let cut = hub_hash
        .char_indices()
        .nth(63)
        .map_or(hub_hash, |(i, _)| &hub_hash[..i]);
    format!("{MANAGED_NAMESPACE_LABEL_PREFIX}{cut}")
}

/// Orders managed namespaces as OCM's hub controller writes them: by set, then by name.
pub fn sort_managed_namespaces(list: &mut [ClusterSetManagedNamespaceConfig]) {
    list.sort_by(|a, b| {
        (a.cluster_set.as_str(), a.name.as_str()).cmp(&(b.cluster_set.as_str(), b.name.as_str()))
    });
}

/// The `(set, name)` pairs of a list, sorted: what the hub compares to decide whether the agent
/// manages what the cluster's sets ask for (conditions aside).
pub fn managed_namespace_keys(list: &[ClusterSetManagedNamespaceConfig]) -> Vec<(&str, &str)> {
    let mut keys: Vec<_> = list
        .iter()
        .map(|n| (n.cluster_set.as_str(), n.name.as_str()))
        .collect();
    keys.sort_unstable();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> ManagedNamespaceConfig {
        ManagedNamespaceConfig { name: name.into() }
    }

    #[test]
    fn managed_namespace_errors_name_every_bad_entry_by_index() {
        let long = "a".repeat(64);
        let errors = validate_managed_namespaces(&[
            ns("app-ns"),
            ns("Bad_Name"),
            ns(""),
            ns(&long),
            ns("app-ns"),
            ns("-x"),
        ]);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.managedNamespaces[1].name",
                "spec.managedNamespaces[2].name",
                "spec.managedNamespaces[3].name",
                "spec.managedNamespaces[4].name",
                "spec.managedNamespaces[5].name",
            ]
        );
        assert!(errors[2].reason.contains("at most 63"), "{}", errors[2]);
        assert!(
            errors[3]
                .reason
                .contains("already listed at spec.managedNamespaces[0]"),
            "{}",
            errors[3]
        );
        assert!(validate_managed_namespaces(&[ns("a"), ns("b-1"), ns(&"b".repeat(63))]).is_empty());
    }

    #[test]
    fn hub_label_is_cut_to_the_label_name_limit() {
        assert_eq!(
            hub_namespace_label("abcd1234"),
            "clusterset.open-cluster-management.io/abcd1234"
        );
        let long = "f".repeat(80);
        let label = hub_namespace_label(&long);
        assert_eq!(label.len(), MANAGED_NAMESPACE_LABEL_PREFIX.len() + 63);
    }

    #[test]
    fn managed_namespaces_sort_by_set_then_name() {
        let entry = |set: &str, name: &str| ClusterSetManagedNamespaceConfig {
            name: name.into(),
            cluster_set: set.into(),
            conditions: Vec::new(),
        };
        let mut list = vec![entry("b", "x"), entry("a", "z"), entry("a", "y")];
        sort_managed_namespaces(&mut list);
        assert_eq!(
            managed_namespace_keys(&list),
            [("a", "y"), ("a", "z"), ("b", "x")]
        );
        assert_eq!(list[0].name, "y");
    }
}

//! ManagedClusterSets, ManagedClusterSetBindings and which sets a placement may draw from.

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::labels::CLUSTERSET_LABEL;
use crate::selector::{CompiledSelector, LabelSelector};

/// Name of the built-in set that selects every cluster.
pub const GLOBAL_SET: &str = "global";

/// Name of the built-in exclusive set new clusters join.
pub const DEFAULT_SET: &str = "default";

/// How a set picks its members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterSetSelector {
    /// Member iff label `cluster.open-cluster-management.io/clusterset` equals the set name
    /// (the OCM default).
    #[default]
    ExclusiveClusterSetLabel,
    /// Member iff the cluster's labels match the selector. A selector that fails validation
    /// selects no cluster.
    LabelSelector(LabelSelector),
}

/// A ManagedClusterSet (cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSet {
    /// Set name.
    pub name: String,
    /// Membership rule.
    #[serde(default)]
    pub selector: ClusterSetSelector,
}

impl ManagedClusterSet {
    /// An `ExclusiveClusterSetLabel` set.
    pub fn exclusive(name: impl Into<String>) -> Self {
        ManagedClusterSet {
            name: name.into(),
            selector: ClusterSetSelector::ExclusiveClusterSetLabel,
        }
    }

    /// A `LabelSelector` set.
    pub fn with_selector(name: impl Into<String>, selector: LabelSelector) -> Self {
        ManagedClusterSet {
            name: name.into(),
            selector: ClusterSetSelector::LabelSelector(selector),
        }
    }

    /// The built-in `global` set: LabelSelector `{}`, every cluster.
    pub fn global() -> Self {
        Self::with_selector(GLOBAL_SET, LabelSelector::everything())
    }

    /// Whether `cluster` is a member (deleting clusters included; the scheduler drops those).
    pub fn contains(&self, cluster: &Cluster) -> bool {
        SetMatcher::new(self).matches(cluster)
    }
}

/// A set's membership rule, compiled once per scheduling run.
#[derive(Debug, Clone)]
pub(crate) enum SetMatcher {
    Exclusive(String),
    Selector(CompiledSelector),
    Nothing,
}

impl SetMatcher {
    pub(crate) fn new(set: &ManagedClusterSet) -> Self {
        match &set.selector {
            ClusterSetSelector::ExclusiveClusterSetLabel => SetMatcher::Exclusive(set.name.clone()),
            ClusterSetSelector::LabelSelector(sel) => match sel.compile() {
                Ok(c) => SetMatcher::Selector(c),
                Err(_) => SetMatcher::Nothing,
            },
        }
    }

    pub(crate) fn matches(&self, cluster: &Cluster) -> bool {
        match self {
            SetMatcher::Exclusive(name) => {
                cluster.labels.get(CLUSTERSET_LABEL) == Some(name.as_str())
            }
            SetMatcher::Selector(sel) => sel.matches(&cluster.labels),
            SetMatcher::Nothing => false,
        }
    }
}

/// Makes a set usable by placements in `namespace` (OCM: the binding's name is the set name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetBinding {
    /// Namespace the binding lives in.
    pub namespace: String,
    /// The bound set.
    pub cluster_set: String,
}

impl ManagedClusterSetBinding {
    /// A binding of `cluster_set` into `namespace`.
    pub fn new(namespace: impl Into<String>, cluster_set: impl Into<String>) -> Self {
        ManagedClusterSetBinding {
            namespace: namespace.into(),
            cluster_set: cluster_set.into(),
        }
    }
}

/// The sets a placement may draw clusters from, with what the `PlacementSatisfied` condition
/// needs to explain an empty result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EligibleSets<'a> {
    /// Bindings in the placement's namespace that name an existing set.
    pub valid_bindings: usize,
    /// Bound sets ∩ `spec.clusterSets` (all bound sets when that is empty), sorted by name.
    pub sets: Vec<&'a ManagedClusterSet>,
}

/// Step 1 of the algorithm: bindings in the namespace (ignoring ones whose set does not exist),
/// intersected with `spec_cluster_sets` unless that is empty.
pub fn eligible_cluster_sets<'a>(
    namespace: &str,
    spec_cluster_sets: &[String],
    sets: &'a [ManagedClusterSet],
    bindings: &[ManagedClusterSetBinding],
) -> EligibleSets<'a> {
    let mut bound: Vec<&'a ManagedClusterSet> = bindings
        .iter()
        .filter(|b| b.namespace == namespace)
        .filter_map(|b| sets.iter().find(|s| s.name == b.cluster_set))
        .collect();
    bound.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    bound.dedup_by(|a, b| a.name == b.name);
    let valid_bindings = bound.len();
    if !spec_cluster_sets.is_empty() {
        bound.retain(|s| spec_cluster_sets.contains(&s.name));
    }
    EligibleSets {
        valid_bindings,
        sets: bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_set_matches_clusterset_label_only() {
        let prod = ManagedClusterSet::exclusive("prod");
        assert!(prod.contains(&Cluster::new("a").in_set("prod")));
        assert!(!prod.contains(&Cluster::new("b").in_set("dev")));
        assert!(!prod.contains(&Cluster::new("c")));
    }

    #[test]
    fn global_set_contains_every_cluster() {
        assert!(ManagedClusterSet::global().contains(&Cluster::new("x")));
        assert!(ManagedClusterSet::global().contains(&Cluster::new("y").in_set("prod")));
    }

    #[test]
    fn label_selector_set_uses_the_selector() {
        let eu =
            ManagedClusterSet::with_selector("eu", LabelSelector::default().label("region", "eu"));
        assert!(eu.contains(&Cluster::new("a").label("region", "eu")));
        assert!(!eu.contains(&Cluster::new("b").label("region", "us")));
    }

    #[test]
    fn invalid_selector_set_contains_nothing() {
        let bad = ManagedClusterSet::with_selector(
            "bad",
            LabelSelector::default().in_values("k", Vec::<String>::new()),
        );
        assert!(!bad.contains(&Cluster::new("a").label("k", "v")));
    }

    fn sets() -> Vec<ManagedClusterSet> {
        vec![
            ManagedClusterSet::exclusive("prod"),
            ManagedClusterSet::exclusive("dev"),
            ManagedClusterSet::global(),
        ]
    }

    #[test]
    fn eligible_sets_are_bindings_in_namespace_intersected_with_spec() {
        let sets = sets();
        let bindings = vec![
            ManagedClusterSetBinding::new("ns", "prod"),
            ManagedClusterSetBinding::new("ns", "dev"),
            ManagedClusterSetBinding::new("other", "global"),
        ];
        let all = eligible_cluster_sets("ns", &[], &sets, &bindings);
        assert_eq!(all.valid_bindings, 2);
        let names: Vec<_> = all.sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["dev", "prod"]);

        let only = eligible_cluster_sets("ns", &["prod".into(), "global".into()], &sets, &bindings);
        let names: Vec<_> = only.sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["prod"], "global is not bound in ns");
    }

    #[test]
    fn bindings_to_missing_sets_are_ignored() {
        let sets = sets();
        let bindings = vec![ManagedClusterSetBinding::new("ns", "ghost")];
        let e = eligible_cluster_sets("ns", &[], &sets, &bindings);
        assert_eq!(e.valid_bindings, 0);
        assert!(e.sets.is_empty());
    }
}

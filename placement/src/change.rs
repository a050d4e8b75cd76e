//! What changed, and which placements a change can affect — so the hub reschedules only the
//! placements that matter.
//!
//! The scheduler computes every score from the feasible clusters alone (see
//! [`crate::schedule`]), so a cluster change can move a placement's decisions only if the
//! cluster was or is decided for it, or the old or the new version of the cluster reaches the
//! placement: member of an eligible set, not being deleted, passing the predicates. Taints are
//! deliberately not looked at: a tainted cluster that reaches the placement still counts, which
//! keeps the check conservative (false positives possible, false negatives never).

use std::collections::BTreeSet;

use crate::cluster::Cluster;
use crate::clusterset::{
    ManagedClusterSet, ManagedClusterSetBinding, SetMatcher, eligible_cluster_sets,
};
use crate::placement::{Placement, ScoreCoordinateType};
use crate::selector::CompiledSelector;

/// Clusters added to and removed from a placement's decisions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionDiff {
    /// In the new decisions only, sorted.
    pub added: Vec<String>,
    /// In the old decisions only, sorted.
    pub removed: Vec<String>,
}

impl DecisionDiff {
    /// The difference between two decision sets.
    pub fn between(old: &BTreeSet<String>, new: &BTreeSet<String>) -> Self {
        DecisionDiff {
            added: new.difference(old).cloned().collect(),
            removed: old.difference(new).cloned().collect(),
        }
    }

    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// Whether the set of decided clusters changed.
pub fn decisions_changed(old: &BTreeSet<String>, new: &BTreeSet<String>) -> bool {
    old != new
}

/// A placement's set and predicate filters, compiled once to test many cluster events.
#[derive(Debug, Clone)]
pub struct ChangeFilter {
    sets: Vec<SetMatcher>,
    /// `None` when a predicate does not compile: every cluster then counts as reaching.
    predicates: Option<Vec<(CompiledSelector, CompiledSelector)>>,
    addon_resources: Vec<String>,
}

impl ChangeFilter {
    /// Compiles the filter of `placement` against the current sets and bindings. Rebuild it
    /// when a set, a binding or the placement changes (those changes reschedule the placement
    /// anyway).
    pub fn new(
        placement: &Placement,
        sets: &[ManagedClusterSet],
        bindings: &[ManagedClusterSetBinding],
    ) -> Self {
        let eligible = eligible_cluster_sets(
            &placement.namespace,
            &placement.cluster_sets,
            sets,
            bindings,
        );
        let predicates = placement
            .predicates
            .iter()
            .map(|p| {
                let s = &p.required_cluster_selector;
                Some((
                    s.label_selector.compile().ok()?,
                    s.claim_selector.compile().ok()?,
                ))
            })
            .collect();
        let addon_resources = placement
            .prioritizer_policy
            .configurations
            .iter()
            .filter(|c| c.score_coordinate.type_ == ScoreCoordinateType::AddOn)
            .filter_map(|c| c.score_coordinate.add_on.as_ref())
            .map(|a| a.resource_name.clone())
            .collect();
        ChangeFilter {
            sets: eligible.sets.into_iter().map(SetMatcher::new).collect(),
            predicates,
            addon_resources,
        }
    }

    /// Whether `cluster` reaches the placement: in an eligible set, not being deleted, and
    /// passing the predicates (taints not considered).
    pub fn reaches(&self, cluster: &Cluster) -> bool {
        if cluster.deleting || !self.sets.iter().any(|s| s.matches(cluster)) {
            return false;
        }
        match &self.predicates {
            None => true,
            Some(ps) => {
                ps.is_empty()
                    || ps
                        .iter()
                        .any(|(l, c)| l.matches(&cluster.labels) && c.matches(&cluster.claims))
            }
        }
    }

    /// Whether a cluster event (`old` → `new`; `None` for add or delete) can change the
    /// placement's decisions or status. `decided` says whether the cluster is in the
    /// placement's current decisions.
    pub fn may_be_affected(
        &self,
        decided: bool,
        old: Option<&Cluster>,
        new: Option<&Cluster>,
    ) -> bool {
        if old == new {
            return false;
        }
        decided || old.is_some_and(|c| self.reaches(c)) || new.is_some_and(|c| self.reaches(c))
    }

    /// Whether a change to the AddOnPlacementScore `resource_name` of `cluster` can change the
    /// placement: it must use that resource, and the cluster must be decided or reach it.
    pub fn score_change_may_affect(
        &self,
        resource_name: &str,
        cluster: &Cluster,
        decided: bool,
    ) -> bool {
        self.addon_resources.iter().any(|r| r == resource_name)
            && (decided || self.reaches(cluster))
    }
}

/// One-shot form of [`ChangeFilter::may_be_affected`].
pub fn placement_may_be_affected(
    placement: &Placement,
    sets: &[ManagedClusterSet],
    bindings: &[ManagedClusterSetBinding],
    decided: bool,
    old: Option<&Cluster>,
    new: Option<&Cluster>,
) -> bool {
    ChangeFilter::new(placement, sets, bindings).may_be_affected(decided, old, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::ScoreCoordinate;
    use crate::selector::LabelSelector;

    fn world() -> (
        Placement,
        Vec<ManagedClusterSet>,
        Vec<ManagedClusterSetBinding>,
    ) {
        let p = Placement::new("ns", "p")
            .predicate(
                LabelSelector::default().label("env", "prod"),
                LabelSelector::default(),
            )
            .prioritizer(ScoreCoordinate::add_on("load", "cpu"), 1);
        (
            p,
            vec![
                ManagedClusterSet::exclusive("fleet"),
                ManagedClusterSet::exclusive("other"),
            ],
            vec![ManagedClusterSetBinding::new("ns", "fleet")],
        )
    }

    #[test]
    fn diff_lists_added_and_removed() {
        let old: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let new: BTreeSet<String> = ["b", "c"].map(String::from).into();
        let d = DecisionDiff::between(&old, &new);
        assert_eq!(d.added, ["c"]);
        assert_eq!(d.removed, ["a"]);
        assert!(decisions_changed(&old, &new));
        assert!(!decisions_changed(&old, &old.clone()));
        assert!(DecisionDiff::between(&old, &old).is_empty());
    }

    #[test]
    fn unchanged_cluster_affects_nothing() {
        let (p, s, b) = world();
        let c = Cluster::new("c").in_set("fleet").label("env", "prod");
        assert!(!placement_may_be_affected(
            &p,
            &s,
            &b,
            true,
            Some(&c),
            Some(&c)
        ));
    }

    #[test]
    fn decided_cluster_change_always_matters() {
        let (p, s, b) = world();
        let old = Cluster::new("c").in_set("other");
        let new = old.clone().label("x", "y");
        assert!(placement_may_be_affected(
            &p,
            &s,
            &b,
            true,
            Some(&old),
            Some(&new)
        ));
    }

    #[test]
    fn cluster_entering_or_leaving_the_filters_matters() {
        let (p, s, b) = world();
        let outside = Cluster::new("c").in_set("fleet").label("env", "dev");
        let inside = outside.clone().label("env", "prod");
        assert!(placement_may_be_affected(
            &p,
            &s,
            &b,
            false,
            Some(&outside),
            Some(&inside)
        ));
        assert!(placement_may_be_affected(
            &p,
            &s,
            &b,
            false,
            Some(&inside),
            Some(&outside)
        ));
        assert!(
            placement_may_be_affected(&p, &s, &b, false, None, Some(&inside)),
            "added"
        );
        assert!(
            placement_may_be_affected(&p, &s, &b, false, Some(&inside), None),
            "deleted"
        );
    }

    #[test]
    fn cluster_outside_the_placement_does_not_matter() {
        let (p, s, b) = world();
        let a = Cluster::new("c").in_set("other").label("env", "prod");
        let a2 = a.clone().cpu(8.0);
        assert!(
            !placement_may_be_affected(&p, &s, &b, false, Some(&a), Some(&a2)),
            "unbound set"
        );
        let d = Cluster::new("d").in_set("fleet").label("env", "dev");
        let d2 = d.clone().cpu(8.0);
        assert!(
            !placement_may_be_affected(&p, &s, &b, false, Some(&d), Some(&d2)),
            "predicate"
        );
        let g = Cluster::new("g")
            .in_set("fleet")
            .label("env", "prod")
            .deleting(true);
        let g2 = g.clone().cpu(1.0);
        assert!(
            !placement_may_be_affected(&p, &s, &b, false, Some(&g), Some(&g2)),
            "deleting"
        );
    }

    #[test]
    fn score_change_matters_only_for_used_resources_on_reaching_clusters() {
        let (p, s, b) = world();
        let f = ChangeFilter::new(&p, &s, &b);
        let c = Cluster::new("c").in_set("fleet").label("env", "prod");
        assert!(f.score_change_may_affect("load", &c, false));
        assert!(!f.score_change_may_affect("other", &c, true));
        let out = Cluster::new("o").in_set("other");
        assert!(!f.score_change_may_affect("load", &out, false));
        assert!(f.score_change_may_affect("load", &out, true));
    }
}

//! What changed, and which placements a change can affect — so the hub reschedules only the
//! placements that matter.
//!
//! Two questions, both answered conservatively (false positives possible, false negatives never):
//!
//! 1. **Does the placement see the change at all?** A placement reads only some of a cluster:
//!    the label and claim keys its eligible sets, predicates, decision groups and spread
//!    constraints name, its taints, whether it is being deleted, and allocatable CPU / memory only
//!    when ResourceAllocatableCPU / Memory has a non-zero weight; with CEL predicates, every
//!    label and claim and the Kubernetes version (and the AddOnPlacementScores their `scores(..)`
//!    calls name). A change outside that projection (a label nobody selects on, a capacity
//!    nobody ranks by) cannot move anything. CEL expressions are not evaluated here: a cluster
//!    they reject still counts as reaching the placement.
//! 2. **Can the changed cluster matter?** The scheduler computes every score from the feasible
//!    clusters and from decision counts that cluster data does not touch (see
//!    [`crate::schedule`]), so a cluster change can move a placement's
//!    decisions only if the cluster was or is decided for it, or the old or the new version of
//!    the cluster reaches the placement: member of an eligible set, not being deleted, passing the
//!    predicates. Taints are deliberately not looked at here: a tainted cluster that reaches the
//!    placement still counts. The status also depends on whether the eligible sets have any
//!    candidate at all (`AllManagedClusterSetsEmpty`), so a cluster that becomes or stops being a
//!    candidate (joins or leaves an eligible set, starts being deleted, is added or removed)
//!    matters even when it fails the predicates.

use std::collections::BTreeSet;

use crate::cel::ScoreUse;
use crate::cluster::Cluster;
use crate::clusterset::{
    ManagedClusterSet, ManagedClusterSetBinding, SetMatcher, eligible_cluster_sets,
};
use crate::pairs::Pairs;
use crate::placement::{ClusterSelector, Placement, ScoreCoordinateType, TopologyKeyType};
use crate::score::{BuiltIn, Prioritizer, effective_weights};
use crate::selector::{CompiledSelector, LabelSelector};

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

/// Keys of a label or claim map that a placement reads; `None` = all of them (a selector that
/// cannot be analysed).
type Keys = Option<BTreeSet<String>>;

/// The part of a cluster a placement reads.
#[derive(Debug, Clone, Default)]
struct Reads {
    labels: Keys,
    claims: Keys,
    cpu: bool,
    memory: bool,
    /// `status.version.kubernetes` (CEL selectors only).
    kubernetes_version: bool,
}

fn add_keys(keys: &mut Keys, sel: &LabelSelector) {
    if let Some(k) = keys {
        match sel.compile() {
            Ok(c) => k.extend(c.keys().map(str::to_owned)),
            Err(_) => *keys = None,
        }
    }
}

fn add_selector(reads: &mut Reads, sel: &ClusterSelector) {
    add_keys(&mut reads.labels, &sel.label_selector);
    add_keys(&mut reads.claims, &sel.claim_selector);
}

fn differ_on(a: &Pairs, b: &Pairs, keys: &Keys) -> bool {
    match keys {
        None => a != b,
        Some(keys) => keys.iter().any(|k| a.get(k) != b.get(k)),
    }
}

impl Reads {
    fn of(placement: &Placement, sets: &[SetMatcher]) -> Self {
        let mut r = Reads {
            labels: Some(BTreeSet::new()),
            claims: Some(BTreeSet::new()),
            cpu: false,
            memory: false,
            kubernetes_version: false,
        };
        for s in sets {
            match s {
                SetMatcher::Exclusive(_) => {
                    if let Some(k) = &mut r.labels {
                        k.insert(crate::labels::CLUSTERSET_LABEL.to_owned());
                    }
                }
                SetMatcher::Selector(c) => {
                    if let Some(k) = &mut r.labels {
                        k.extend(c.keys().map(str::to_owned));
                    }
                }
                SetMatcher::Nothing => {}
            }
        }
        for p in &placement.predicates {
            add_selector(&mut r, &p.required_cluster_selector);
            // A CEL expression may read any label or claim, and the Kubernetes version.
            if !p.required_cluster_selector.cel_expressions.is_empty() {
                r.labels = None;
                r.claims = None;
                r.kubernetes_version = true;
            }
        }
        for g in &placement.decision_strategy.group_strategy.decision_groups {
            add_selector(&mut r, &g.group_cluster_selector);
        }
        for c in &placement.spread_policy.spread_constraints {
            let keys = match c.topology_key_type {
                TopologyKeyType::Label => &mut r.labels,
                TopologyKeyType::Claim => &mut r.claims,
            };
            if let Some(k) = keys {
                k.insert(c.topology_key.clone());
            }
        }
        for w in effective_weights(&placement.prioritizer_policy) {
            match w.prioritizer {
                Prioritizer::BuiltIn(BuiltIn::ResourceAllocatableCPU) => r.cpu = true,
                Prioritizer::BuiltIn(BuiltIn::ResourceAllocatableMemory) => r.memory = true,
                _ => {}
            }
        }
        r
    }

    /// Whether the placement can tell `a` and `b` apart.
    fn differ(&self, a: &Cluster, b: &Cluster) -> bool {
        a.name != b.name
            || a.deleting != b.deleting
            || a.taints != b.taints
            || (self.cpu && a.allocatable.cpu != b.allocatable.cpu)
            || (self.memory && a.allocatable.memory != b.allocatable.memory)
            || (self.kubernetes_version && a.kubernetes_version != b.kubernetes_version)
            || differ_on(&a.labels, &b.labels, &self.labels)
            || differ_on(&a.claims, &b.claims, &self.claims)
    }
}

/// A placement's set and predicate filters, compiled once to test many cluster events.
#[derive(Debug, Clone)]
pub struct ChangeFilter {
    sets: Vec<SetMatcher>,
    /// `None` when a predicate does not compile: every cluster then counts as reaching. CEL
    /// expressions are left out (a cluster they reject still counts as reaching).
    predicates: Option<Vec<(CompiledSelector, CompiledSelector)>>,
    addon_resources: Vec<String>,
    /// The AddOnPlacementScores CEL expressions read through `scores(..)`.
    cel_scores: ScoreUse,
    reads: Reads,
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
        let sets: Vec<SetMatcher> = eligible.sets.into_iter().map(SetMatcher::new).collect();
        let reads = Reads::of(placement, &sets);
        let mut cel_scores = ScoreUse::Nothing;
        for p in &placement.predicates {
            let cel = &p.required_cluster_selector.cel_expressions;
            if cel.is_empty() {
                continue;
            }
            // One that does not compile is not scheduled; count it as reading every score.
            cel_scores.add(
                cel.compiled()
                    .map_or(ScoreUse::Any, |c| c.score_use().clone()),
            );
        }
        ChangeFilter {
            sets,
            predicates,
            addon_resources,
            cel_scores,
            reads,
        }
    }

    /// Whether `cluster` is a candidate: in an eligible set and not being deleted.
    fn candidate(&self, cluster: &Cluster) -> bool {
        !cluster.deleting && self.sets.iter().any(|s| s.matches(cluster))
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
        match (old, new) {
            (Some(o), Some(n)) if !self.reads.differ(o, n) => return false,
            (None, None) => return false,
            _ => {}
        }
        decided
            || old.is_some_and(|c| self.reaches(c))
            || new.is_some_and(|c| self.reaches(c))
            || old.is_some_and(|c| self.candidate(c)) != new.is_some_and(|c| self.candidate(c))
    }

    /// Whether a change to the AddOnPlacementScore `resource_name` of `cluster` can change the
    /// placement: it must use that resource, and the cluster must be decided or reach it.
    pub fn score_change_may_affect(
        &self,
        resource_name: &str,
        cluster: &Cluster,
        decided: bool,
    ) -> bool {
        (self.addon_resources.iter().any(|r| r == resource_name)
            || self.cel_scores.reads(resource_name))
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
    fn a_cel_predicate_reads_every_label_claim_the_version_and_its_scores() {
        let sets = vec![ManagedClusterSet::exclusive("fleet")];
        let bindings = vec![ManagedClusterSetBinding::new("ns", "fleet")];
        let p = Placement::new("ns", "p").predicate_selector(
            crate::placement::ClusterSelector::default()
                .cel(["managedCluster.scores('load').size() > 0"]),
        );
        let f = ChangeFilter::new(&p, &sets, &bindings);
        let c = Cluster::new("c1").in_set("fleet");
        for changed in [
            c.clone().label("anything", "x"),
            c.clone().claim("anything", "x"),
            c.clone().kubernetes_version("v1.31.0"),
        ] {
            assert!(
                f.may_be_affected(false, Some(&c), Some(&changed)),
                "{changed:?}"
            );
        }
        assert!(f.score_change_may_affect("load", &c, false));
        assert!(!f.score_change_may_affect("other", &c, false));
        let plain = ChangeFilter::new(&Placement::new("ns", "p"), &sets, &bindings);
        let newer = c.clone().kubernetes_version("v1.31.0");
        assert!(!plain.may_be_affected(false, Some(&c), Some(&newer)));
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
    fn decided_cluster_change_it_can_see_always_matters() {
        let (p, s, b) = world();
        let old = Cluster::new("c").in_set("other");
        let new = old.clone().label("env", "dev");
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
        let a2 = a.clone().label("env", "dev");
        assert!(
            !placement_may_be_affected(&p, &s, &b, false, Some(&a), Some(&a2)),
            "unbound set"
        );
        let d = Cluster::new("d").in_set("fleet").label("env", "dev");
        let d2 = d.clone().label("env", "staging");
        assert!(
            !placement_may_be_affected(&p, &s, &b, false, Some(&d), Some(&d2)),
            "predicate"
        );
        let g = Cluster::new("g")
            .in_set("fleet")
            .label("env", "prod")
            .deleting(true);
        let g2 = g.clone().label("env", "dev");
        assert!(
            !placement_may_be_affected(&p, &s, &b, false, Some(&g), Some(&g2)),
            "deleting"
        );
    }

    #[test]
    fn a_cluster_becoming_or_stopping_being_a_candidate_matters_for_the_status() {
        let (p, s, b) = world();
        // Fails the predicates, but the number of candidates decides AllManagedClusterSetsEmpty.
        let d = Cluster::new("d").in_set("fleet").label("env", "dev");
        assert!(placement_may_be_affected(
            &p,
            &s,
            &b,
            false,
            Some(&d),
            Some(&d.clone().deleting(true))
        ));
        assert!(placement_may_be_affected(&p, &s, &b, false, None, Some(&d)));
        assert!(placement_may_be_affected(&p, &s, &b, false, Some(&d), None));
        assert!(placement_may_be_affected(
            &p,
            &s,
            &b,
            false,
            Some(&d),
            Some(&d.clone().in_set("other"))
        ));
    }

    #[test]
    fn changes_the_placement_cannot_see_affect_nothing() {
        let (p, s, b) = world();
        let c = Cluster::new("c")
            .in_set("fleet")
            .label("env", "prod")
            .cpu(4.0);
        let relabelled = c.clone().label("team", "a");
        assert!(
            !placement_may_be_affected(&p, &s, &b, true, Some(&c), Some(&relabelled)),
            "nobody selects on team"
        );
        assert!(
            !placement_may_be_affected(&p, &s, &b, true, Some(&c), Some(&c.clone().cpu(64.0))),
            "no resource prioritizer"
        );
        let p_cpu = p
            .clone()
            .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), 1);
        assert!(placement_may_be_affected(
            &p_cpu,
            &s,
            &b,
            false,
            Some(&c),
            Some(&c.clone().cpu(64.0))
        ));
        let tainted = c.clone().taint(crate::cluster::Taint::new(
            "gpu",
            "",
            crate::cluster::TaintEffect::NoSelect,
            std::time::SystemTime::UNIX_EPOCH,
        ));
        assert!(placement_may_be_affected(
            &p,
            &s,
            &b,
            false,
            Some(&c),
            Some(&tainted)
        ));
        let moved = c.clone().in_set("other");
        assert!(
            placement_may_be_affected(&p, &s, &b, false, Some(&c), Some(&moved)),
            "leaving the eligible set"
        );
        let spread = p.clone().spread(crate::placement::SpreadConstraint::claim(
            "zone",
            1,
            crate::placement::WhenUnsatisfiable::DoNotSchedule,
        ));
        assert!(placement_may_be_affected(
            &spread,
            &s,
            &b,
            false,
            Some(&c),
            Some(&c.clone().claim("zone", "a"))
        ));
        let grouped = p.clone().decision_group(
            "canary",
            ClusterSelector::labels(LabelSelector::default().exists("canary")),
        );
        assert!(placement_may_be_affected(
            &grouped,
            &s,
            &b,
            false,
            Some(&c),
            Some(&c.clone().label("canary", "true"))
        ));
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

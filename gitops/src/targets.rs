//! A GitRepo's targets as Placements, pure: the Placement each target's bundles go to, and the
//! Placement an inline target (`targets[].placement`) becomes — named `<gitrepo>-<target>` in
//! the GitRepo's namespace and labelled `apps.flotilla.io/gitrepo: <gitrepo>`, which is how the
//! hub knows it owns it (docs/notes/issue-50-design.md §3.3).
//!
//! The inline fields map onto the Placement's own: `clusterSets`, `numberOfClusters`,
//! `tolerations` and `decisionStrategy` copy across; `clusterSelector`, `claimSelector` and
//! `clusterName` become its one predicate (`clusterName` as the CEL expression
//! `managedCluster.metadata.name == "<name>"` — cluster names are DNS-1123 labels, so nothing
//! needs quoting). No selector and no name: no predicate, every cluster of the bound sets.

use flotilla_api::v1::{
    CelSelector, ClusterPredicate, ClusterSelector, GitRepo, GitTarget, GitTargetPlacement,
    ObjectMeta, Placement, PlacementSpec,
};

use crate::source::GITREPO_LABEL;

/// The Placement target `t` of GitRepo `gitrepo` delivers over: its `placementRef`, or the
/// owned `<gitrepo>-<target>` of an inline target.
pub fn placement_name(gitrepo: &str, t: &GitTarget) -> String {
    if t.placement.is_some() {
        owned_name(gitrepo, &t.name)
    } else {
        t.placement_ref.clone()
    }
}

/// The name of the Placement GitRepo `gitrepo` owns for its inline target `target`.
pub fn owned_name(gitrepo: &str, target: &str) -> String {
    format!("{gitrepo}-{target}")
}

/// Whether Placement `p` belongs to GitRepo `gitrepo` (its label; both are in one namespace).
pub fn owned_by(p: &Placement, gitrepo: &str) -> bool {
    owner(p) == Some(gitrepo)
}

/// The GitRepo that writes Placement `p` (its label), if any.
pub fn owner(p: &Placement) -> Option<&str> {
    p.metadata
        .as_ref()?
        .labels
        .get(GITREPO_LABEL)
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// A user's write of a Placement refused: it is a GitRepo's, or claims to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A user's apply or delete of a Placement a GitRepo writes (an inline target's).
    #[error(
        "Placement {namespace}/{name} belongs to GitRepo {namespace}/{gitrepo} (an inline \
         target's): {}",
        hint(verb)
    )]
    Owned {
        /// The Placement's namespace (the GitRepo's too).
        namespace: String,
        /// The Placement.
        name: String,
        /// The GitRepo writing it.
        gitrepo: String,
        /// "writes" or "deletes".
        verb: &'static str,
    },
    /// A user's Placement carrying the label that marks a GitRepo's: the GitRepo would take
    /// it for its own, and delete it when no target wants it.
    #[error(
        "Placement {namespace}/{name}: metadata.labels.{label} ({gitrepo}) marks the Placements a \
         GitRepo writes for its inline targets (the GitRepo would take it for its own, and \
         delete it); remove the label (copied from an inline target's Placement?)",
        label = GITREPO_LABEL
    )]
    Marked {
        /// The Placement's namespace.
        namespace: String,
        /// The Placement.
        name: String,
        /// The GitRepo the label names.
        gitrepo: String,
    },
}

fn hint(verb: &str) -> &'static str {
    if verb == "deletes" {
        "remove the target from the GitRepo (its Placement goes once no replica set names it), \
         or delete the GitRepo"
    } else {
        "change the target in the GitRepo; `flotilla apply --force` writes it anyway (the \
         GitRepo puts it back at its next refresh, within seconds)"
    }
}

/// Whether a user may write `incoming` over `stored` (`None`: a new Placement, or, for
/// `incoming`, a delete): never a GitRepo's Placement unless `forced`, and never — forced or
/// not — a Placement claiming to be a GitRepo's it is not (a forced edit of an owned one may
/// keep its own owner's label).
pub fn user_may_write(
    stored: Option<&Placement>,
    incoming: Option<&Placement>,
    forced: bool,
) -> Result<(), Refusal> {
    let names = |p: &Placement| {
        let m = p.metadata.clone().unwrap_or_default();
        (m.namespace, m.name)
    };
    let stored_owner = stored.and_then(owner);
    if let (Some(p), Some(gitrepo), false) = (stored, stored_owner, forced) {
        let (namespace, name) = names(p);
        return Err(Refusal::Owned {
            namespace,
            name,
            gitrepo: gitrepo.to_owned(),
            verb: if incoming.is_some() {
                "writes"
            } else {
                "deletes"
            },
        });
    }
    if let Some((p, gitrepo)) = incoming.and_then(|p| Some((p, owner(p)?)))
        && stored_owner != Some(gitrepo)
    {
        let (namespace, name) = names(p);
        return Err(Refusal::Marked {
            namespace,
            name,
            gitrepo: gitrepo.to_owned(),
        });
    }
    Ok(())
}

/// Every inline target of `r` with the Placement it becomes, in target order (the index is the
/// target's, for naming its fields in errors).
pub fn owned_placements(r: &GitRepo) -> Vec<(usize, &GitTarget, Placement)> {
    let m = r.metadata.clone().unwrap_or_default();
    let Some(spec) = &r.spec else {
        return Vec::new();
    };
    spec.targets
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let inline = t.placement.as_ref()?;
            Some((i, t, placement(&m.namespace, &m.name, &t.name, inline)))
        })
        .collect()
}

/// The Placement inline target `target` of GitRepo `namespace/gitrepo` becomes.
pub fn placement(
    namespace: &str,
    gitrepo: &str,
    target: &str,
    inline: &GitTargetPlacement,
) -> Placement {
    let selects = inline.cluster_selector.is_some()
        || inline.claim_selector.is_some()
        || !inline.cluster_name.is_empty();
    let predicates = if selects {
        vec![ClusterPredicate {
            required_cluster_selector: Some(ClusterSelector {
                label_selector: inline.cluster_selector.clone(),
                claim_selector: inline.claim_selector.clone(),
            }),
        }]
    } else {
        Vec::new()
    };
    let predicate_cel_selectors = if inline.cluster_name.is_empty() {
        Vec::new()
    } else {
        vec![CelSelector {
            cel_expressions: vec![format!(
                "managedCluster.metadata.name == \"{}\"",
                inline.cluster_name
            )],
        }]
    };
    Placement {
        metadata: Some(ObjectMeta {
            name: owned_name(gitrepo, target),
            namespace: namespace.to_owned(),
            labels: [(GITREPO_LABEL.to_owned(), gitrepo.to_owned())].into(),
            ..Default::default()
        }),
        spec: Some(PlacementSpec {
            cluster_sets: inline.cluster_sets.clone(),
            number_of_clusters: inline.number_of_clusters,
            predicates,
            tolerations: inline.tolerations.clone(),
            decision_strategy: inline.decision_strategy.clone(),
            predicate_cel_selectors,
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests;

//! Inline targets' Placements: a GitRepo target with `placement:` (not `placementRef:`) is
//! delivered over a Placement the GitRepo writes and owns, `<gitrepo>-<target>` in its
//! namespace, labelled `apps.flotilla.io/gitrepo: <gitrepo>`
//! ([`flotilla_gitops::targets::placement`]).
//!
//! [`plan`] (pure) says which owned Placements to write (new, or their spec changed: the
//! target changed, or someone edited it) and which to delete (no inline target wants it and
//! no replica set of the namespace still names it — a removed target's Placement goes once
//! the bundles moved off it, so their works are not left without a placement first, and one
//! another set was pointed at stays). A user's write or delete of an owned Placement, or of
//! one carrying the owner label, is refused unless forced
//! ([`flotilla_gitops::targets::user_may_write`], in the Placement API). A
//! Placement of that name the GitRepo does not own is never overwritten: the target is refused
//! and the status says so. [`reconcile`] carries a plan out through the placements family's
//! handle, which validates each one exactly as a user's Placement; [`validate`] runs that
//! validation when the GitRepo is applied, each error renamed to the target's field. A refusal
//! that clears ([`cleared`]: the other Placement removed) renders the held-back commit again.

use crate::placement::{PlacementError, Placements};
use flotilla_api::meta::{self, status as cstatus};
use flotilla_api::v1::{GitRepo, GitRepoStatus, ManifestWorkReplicaSet, Placement};
use flotilla_gitops::source::GITREPO_LABEL;
use flotilla_gitops::targets::{self, owned_by};
use std::collections::BTreeSet;

/// Condition: every inline target's Placement is written (False: which target and why).
/// Absent when the GitRepo has no inline target.
pub const PLACED: &str = "TargetsPlaced";

/// What one GitRepo's owned Placements need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Placements to write (new, or their spec or owner label differ from the target's).
    pub apply: Vec<Placement>,
    /// Owned Placements (by name, in the GitRepo's namespace) to delete.
    pub delete: Vec<String>,
    /// Inline targets refused: their Placement's name is taken by one the GitRepo does not own.
    pub problems: Vec<String>,
    /// Inline targets the GitRepo has.
    pub inline: usize,
}

/// The plan for `repo` over the Placements of its namespace (`existing`), given the Placements
/// the namespace's replica sets name now (`referenced`).
pub fn plan(repo: &GitRepo, existing: &[&Placement], referenced: &BTreeSet<&str>) -> Plan {
    let m = repo.metadata.clone().unwrap_or_default();
    let by_name = |name: &str| {
        existing
            .iter()
            .find(|p| p.metadata.as_ref().is_some_and(|pm| pm.name == name))
            .copied()
    };
    let owned = targets::owned_placements(repo);
    let mut out = Plan {
        inline: owned.len(),
        ..Plan::default()
    };
    for (i, t, want) in &owned {
        let name = targets::owned_name(&m.name, &t.name);
        match by_name(&name) {
            Some(old) if !owned_by(old, &m.name) => out.problems.push(format!(
                "spec.targets[{i}] ({}): Placement {}/{name} exists and does not belong to this \
                 GitRepo (no label {}={}); rename the target or remove that Placement",
                t.name,
                m.namespace,
                flotilla_gitops::source::GITREPO_LABEL,
                m.name
            )),
            Some(old) if old.spec == want.spec => {}
            _ => out.apply.push(want.clone()),
        }
    }
    let wanted: BTreeSet<String> = owned
        .iter()
        .map(|(_, t, _)| targets::owned_name(&m.name, &t.name))
        .collect();
    for p in existing {
        let name = p.metadata.as_ref().map_or("", |pm| pm.name.as_str());
        if owned_by(p, &m.name) && !wanted.contains(name) && !referenced.contains(name) {
            out.delete.push(name.to_owned());
        }
    }
    out
}

/// The Placements `sets` name.
pub fn referenced<'a>(sets: &[&'a ManifestWorkReplicaSet]) -> BTreeSet<&'a str> {
    sets.iter()
        .filter_map(|rs| rs.spec.as_ref())
        .flat_map(|s| s.placement_refs.iter().map(|p| p.name.as_str()))
        .collect()
}

/// Every problem of `repo`'s inline targets' Placements under the placements family's own
/// validation (what it would refuse of a user's Placement), each at the target's field.
pub fn validate(repo: &GitRepo) -> Vec<String> {
    targets::owned_placements(repo)
        .into_iter()
        .filter_map(|(i, t, p)| {
            let (invalid, _) = Placements::field_errors(&p);
            let problems: Vec<String> = invalid
                .iter()
                .map(|e| format!("{}: {}", target_path(i, &t.name, &e.path), e.message))
                .collect();
            (!problems.is_empty()).then(|| problems.join("; "))
        })
        .collect()
}

/// The path in inline target `i` (named `target`) of the field at `path` in the Placement it
/// becomes ([`flotilla_gitops::targets::placement`] says which field comes from which).
fn target_path(i: usize, target: &str, path: &str) -> String {
    let at = format!("spec.targets[{i}].placement");
    let predicate = "spec.predicates[0].requiredClusterSelector";
    // (the Placement's path, the target's, whether what follows the prefix is kept): the
    // CEL expression a `clusterName` becomes is that one field, whatever its index.
    let table = [
        (
            format!("{predicate}.labelSelector"),
            format!("{at}.clusterSelector"),
            true,
        ),
        (
            format!("{predicate}.claimSelector"),
            format!("{at}.claimSelector"),
            true,
        ),
        (
            format!("{predicate}.celSelector"),
            format!("{at}.clusterName"),
            false,
        ),
        (
            "spec.predicates".to_owned(),
            format!("{at}.clusterName"),
            false,
        ),
        (
            "metadata.name".to_owned(),
            format!(
                "spec.targets[{i}].name ({target}: the Placement's name is <gitrepo>-<target>)"
            ),
            false,
        ),
        ("spec".to_owned(), at.clone(), true),
    ];
    table
        .iter()
        .find_map(|(from, to, keep)| {
            path.strip_prefix(from.as_str())
                .filter(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
                .map(|rest| {
                    if *keep {
                        format!("{to}{rest}")
                    } else {
                        to.clone()
                    }
                })
        })
        .unwrap_or_else(|| path.to_owned())
}

/// The `TargetsPlaced` condition after a reconcile with `problems` over `inline` inline
/// targets; whether it changed.
pub fn condition(status: &mut GitRepoStatus, inline: usize, problems: &[String]) -> bool {
    if inline == 0 && problems.is_empty() {
        return meta::remove_condition(&mut status.conditions, PLACED);
    }
    if problems.is_empty() {
        let message = format!("{inline} inline targets' Placements written");
        meta::set_condition(
            &mut status.conditions,
            PLACED,
            cstatus::TRUE,
            "Placed",
            &message,
        )
    } else {
        let message = problems.join("; ");
        meta::set_condition(
            &mut status.conditions,
            PLACED,
            cstatus::FALSE,
            "Refused",
            &message,
        )
    }
}

/// Whether a reconcile with no `problems` clears a refusal the status `before` it recorded (a
/// Placement name taken, then freed): the commit it held back is rendered again.
pub fn cleared(before: &GitRepoStatus, problems: &[String]) -> bool {
    problems.is_empty()
        && meta::condition_status(&before.conditions, PLACED) == Some(cstatus::FALSE)
}

/// What a reconcile of one GitRepo's owned Placements came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reconciled {
    /// Inline targets the GitRepo has.
    pub inline: usize,
    /// Every problem: a name taken, a write refused, failed or timed out.
    pub problems: Vec<String>,
    /// Placements the GitRepo still owns after it (a removed target's, still referenced, or a
    /// delete that failed, included): none and no inline target, and the next refresh skips it.
    pub owned: usize,
    /// A write or delete was cut at the deadline (the placements family busy): retried, not a
    /// problem of the GitRepo's.
    pub timed_out: bool,
}

/// How long the writes and deletes through the placements family may take, for one GitRepo
/// on delivery or for every GitRepo of one refresh, before the task moves on (what is left is
/// done at the next refresh): the GitRepo actor's mailbox is not read meanwhile.
pub const WRITE_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Carries out `repo`'s plan over the Placements of its namespace now; `sets` are the replica
/// sets of the namespace (every one, not only the GitRepo's: a Placement another set still
/// delivers over is not deleted).
pub async fn reconcile(
    placements: &Placements,
    repo: &GitRepo,
    sets: &[&ManifestWorkReplicaSet],
    deadline: tokio::time::Instant,
) -> Reconciled {
    let m = repo.metadata.clone().unwrap_or_default();
    let namespace = m.namespace.as_str();
    let views = placements.list(namespace);
    let existing: Vec<&Placement> = views.iter().map(|v| &v.placement).collect();
    let plan = plan(repo, &existing, &referenced(sets));
    let mut owned = existing.iter().filter(|p| owned_by(p, &m.name)).count();
    let mut problems = plan.problems;
    let mut timed_out = false;
    for p in plan.apply {
        let name = p
            .metadata
            .as_ref()
            .map_or(String::new(), |m| m.name.clone());
        let new = placements.get(namespace, &name).is_none();
        match tokio::time::timeout_at(deadline, placements.apply(p)).await {
            Ok(Ok(_)) => {
                owned += usize::from(new);
                tracing::info!(placement = %name, "inline target's Placement written")
            }
            Ok(Err(e)) => problems.push(format!("Placement {namespace}/{name}: {e}")),
            Err(_) => {
                timed_out = true;
                problems.push(format!(
                    "Placement {namespace}/{name}: not written in time (the placements family \
                     is busy); retried at the next refresh"
                ))
            }
        }
    }
    for name in plan.delete {
        match tokio::time::timeout_at(deadline, placements.delete(namespace, &name)).await {
            Ok(Ok(()) | Err(PlacementError::NotFound(_))) => {
                owned = owned.saturating_sub(1);
                tracing::info!(placement = %name, "inline target's Placement deleted")
            }
            Ok(Err(e)) => problems.push(format!(
                "Placement {namespace}/{name} (its target is gone): {e}"
            )),
            Err(_) => {
                timed_out = true;
                problems.push(format!(
                    "Placement {namespace}/{name} (its target is gone): not deleted in time; \
                     retried at the next refresh"
                ))
            }
        }
    }
    Reconciled {
        inline: plan.inline,
        problems,
        owned,
        timed_out,
    }
}

/// Deletes every Placement GitRepo `namespace/name` owns (it is being deleted; its replica
/// sets went first) but those a replica set of the namespace (`sets`) still delivers over:
/// those stay, handed over to the namespace (the owner label removed, so users may edit or
/// delete them); their names.
pub async fn remove_all(
    placements: &Placements,
    namespace: &str,
    name: &str,
    sets: &[&ManifestWorkReplicaSet],
) -> Result<Vec<String>, (String, PlacementError)> {
    let referenced = referenced(sets);
    let (kept, owned): (Vec<String>, Vec<String>) = placements
        .list(namespace)
        .iter()
        .filter(|v| owned_by(&v.placement, name))
        .filter_map(|v| v.placement.metadata.as_ref().map(|m| m.name.clone()))
        .partition(|p| referenced.contains(p.as_str()));
    let busy = || PlacementError::Unavailable("the placements family is busy".into());
    for p in owned {
        match tokio::time::timeout(WRITE_TIME, placements.delete(namespace, &p)).await {
            Ok(Ok(()) | Err(PlacementError::NotFound(_))) => {}
            Ok(Err(e)) => return Err((p, e)),
            Err(_) => return Err((p, busy())),
        }
    }
    for p in &kept {
        // Handed over to the namespace: the owner label goes, so its users manage it.
        let Some(view) = placements.get(namespace, p) else {
            continue;
        };
        let mut left = view.placement.clone();
        let m = left.metadata.get_or_insert_default();
        m.labels.remove(GITREPO_LABEL);
        left.status = None;
        match tokio::time::timeout(WRITE_TIME, placements.apply(left)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err((p.clone(), e)),
            Err(_) => return Err((p.clone(), busy())),
        }
        tracing::warn!(
            placement = %format!("{namespace}/{p}"),
            gitrepo = %name,
            "an inline target's Placement is kept, its owner label removed: another replica set \
             still delivers over it"
        );
    }
    Ok(kept)
}

#[cfg(test)]
mod tests;

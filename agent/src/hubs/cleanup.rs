//! `--hub-switch-cleanup delete`: after a switch, the previous hub's works are deleted from the
//! spoke — what OCM does — for operators who do not want a hub's workloads to outlive the agent's
//! registration with it. The default keeps them parked.
//!
//! Each work's resources go as its delete option says (`Orphan` and the orphaning rules of
//! `SelectivelyOrphan` keep theirs), written as the work's executor, except a resource another
//! hub's work also declares (as between two works of one hub). Then the works' anchors and
//! records go: if the agent comes back to that hub, its resync sends them again.

use crate::backend::Backend;
use crate::store::LocalStore;
use flotilla_api::v1::AppliedManifestWork;
use flotilla_api::work::{Executor, ManifestId};
use std::collections::HashSet;
use std::path::Path;

/// Whether the previous hub's works stay on the spoke after a switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Cleanup {
    /// Parked: resources stay, nothing reconciles or deletes them (the default).
    #[default]
    Keep,
    /// Deleted per each work's delete option.
    Delete,
}

/// One resource to delete: the work's resource id, its executor and the resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Removal {
    /// The work's resource id.
    pub work: String,
    /// The work's executor.
    pub executor: Option<Executor>,
    /// The resource.
    pub id: ManifestId,
}

/// What deleting the works in `leaving` removes from the spoke, in reverse order of
/// application per work (contents before their Namespace): every applied resource that its
/// work's delete option does not orphan and no work of another hub (`kept`) declares.
pub fn plan(leaving: &[AppliedManifestWork], kept: &HashSet<ManifestId>) -> Vec<Removal> {
    let mut out = Vec::new();
    for w in leaving {
        let work = w.work.clone().unwrap_or_default();
        let policy = work.spec.as_ref().and_then(|s| s.delete_option.clone());
        let executor = Executor::of_work(&work);
        for id in w.applied.iter().rev().map(crate::work::actor::applied_id) {
            if kept.contains(&id) || crate::work::actor::orphaned(&id, policy.as_ref()) {
                continue;
            }
            out.push(Removal {
                work: w.resource_id.clone(),
                executor: executor.clone(),
                id,
            });
        }
    }
    out
}

/// Deletes the works of the hub whose state is `dir` from the spoke, keeping what the works
/// in `kept` declare; returns how many resources went. A resource that cannot be deleted is
/// logged and its work's record kept, so a later switch tries again.
pub async fn delete_works(
    backend: &dyn Backend,
    dir: &Path,
    cluster: &str,
    anchor_scope: &str,
    kept: &HashSet<ManifestId>,
) -> Result<usize, crate::store::StoreError> {
    let store = LocalStore::open(dir, cluster)?;
    let works = store.load_works()?;
    let mut failed = HashSet::new();
    let mut removed = 0;
    for r in plan(&works, kept) {
        match backend.delete_as(r.executor.as_ref(), &r.id).await {
            Ok(_) => removed += 1,
            Err(e) => {
                tracing::warn!(resource = %r.id.describe(), error = %e, "deleting a previous hub's resource failed");
                failed.insert(r.work);
            }
        }
    }
    for w in works.iter().filter(|w| !failed.contains(&w.resource_id)) {
        let anchor = format!("{anchor_scope}-{}", w.resource_id);
        if let Err(e) = backend.delete_anchor(&anchor, false).await {
            tracing::warn!(error = %e, "deleting a previous hub's work anchor failed");
        }
        store.remove_work(&w.resource_id)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{
        AppliedResource, DeleteOption, ManifestWork, ManifestWorkSpec, OrphaningRule,
        SelectivelyOrphan,
    };

    fn cm(name: &str) -> AppliedResource {
        AppliedResource {
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn applied(rid: &str, names: &[&str], option: Option<DeleteOption>) -> AppliedManifestWork {
        AppliedManifestWork {
            resource_id: rid.into(),
            work: Some(ManifestWork {
                spec: Some(ManifestWorkSpec {
                    delete_option: option,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            applied: names.iter().map(|n| cm(n)).collect(),
            ..Default::default()
        }
    }

    fn names(plan: &[Removal]) -> Vec<&str> {
        plan.iter().map(|r| r.id.name.as_str()).collect()
    }

    #[test]
    fn a_previous_hubs_works_go_as_their_delete_options_say_keeping_what_others_declare() {
        let kept: HashSet<ManifestId> = [crate::work::actor::applied_id(&cm("shared"))].into();
        let selective = DeleteOption {
            propagation_policy: "SelectivelyOrphan".into(),
            selectively_orphans: Some(SelectivelyOrphan {
                orphaning_rules: vec![OrphaningRule {
                    group: String::new(),
                    resource: "configmaps".into(),
                    namespace: "default".into(),
                    name: "keep-me".into(),
                }],
            }),
            ..Default::default()
        };
        let orphan = DeleteOption {
            propagation_policy: "Orphan".into(),
            ..Default::default()
        };
        let plan = plan(
            &[
                applied("w1", &["a", "b", "shared"], None),
                applied("w2", &["keep-me", "c"], Some(selective)),
                applied("w3", &["d"], Some(orphan)),
            ],
            &kept,
        );
        assert_eq!(
            names(&plan),
            ["b", "a", "c"],
            "reverse order, orphans and shared kept"
        );
        assert_eq!(plan[0].work, "w1");
    }
}

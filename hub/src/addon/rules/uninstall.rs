//! Removing an installed add-on from a cluster, step by step (OCM's pre-delete hooks,
//! `agentdeploy/default_hook_sync.go`): an add-on whose template has pre-delete hooks (Jobs or
//! Pods marked `addon.open-cluster-management.io/addon-pre-delete`) gets them applied in their
//! own work (`addon-<name>-pre-delete`) and keeps its agent works until they complete; then every
//! work of the add-on goes, and the installation is forgotten. Until then the
//! ManagedClusterAddOn stays, marked deleted, with a `HookManifestCompleted` condition saying what
//! it waits for — as OCM's finalizer keeps it, for as long as it takes.
//!
//! Where Flotilla differs from OCM: a cluster that is gone (deleted) skips the wait — nothing
//! can run there any more; a hook that failed is not re-created (newer OCM deletes the hook work
//! to retry): removal waits, saying which Job failed and why, until the hook is fixed in the
//! template or the cluster is deleted; a hook that cannot be rendered waits, saying why.

use flotilla_api::meta::{self, status};
use flotilla_api::v1::{FieldValue, ManifestWork};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE};

/// `HookManifestCompleted` reason while the hook runs (OCM's).
pub const REASON_NOT_COMPLETED: &str = "HookManifestIsNotCompleted";
/// `HookManifestCompleted` reason once the hook completed (OCM's).
pub const REASON_COMPLETED: &str = "HookManifestIsCompleted";
/// `HookManifestCompleted` reason when a hook failed or cannot be rendered or applied
/// (Flotilla's).
pub const REASON_FAILED: &str = "HookManifestFailed";

/// What removing an add-on from a cluster depends on.
#[derive(Debug, Clone, Copy)]
pub struct UninstallView<'a> {
    /// The cluster still exists (a deleted cluster took its works with it: nothing waits).
    pub cluster_exists: bool,
    /// The pre-delete hook work the template renders for the cluster (`Ok(None)`: no hooks), or
    /// why it cannot be rendered.
    pub hook: Result<Option<&'a ManifestWork>, &'a str>,
    /// The hook work on the cluster now.
    pub applied_hook: Option<&'a ManifestWork>,
    /// The hook completed before (recorded on the ManagedClusterAddOn, so it never runs twice).
    pub hook_completed: bool,
    /// Some work of the add-on is still on the cluster and not on its way out.
    pub works_left: bool,
}

/// The next step of a removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UninstallStep {
    /// Apply the hook work (first, or again after the template changed it).
    ApplyHook,
    /// Wait for the hook: the ManagedClusterAddOn's `HookManifestCompleted` is False with this
    /// reason and message.
    WaitHook {
        /// [`REASON_NOT_COMPLETED`] or [`REASON_FAILED`].
        reason: &'static str,
        /// What it waits for, naming the hook's Jobs and Pods.
        message: String,
    },
    /// Delete every work of the add-on on the cluster (recording first that the hook completed,
    /// when it just did), then forget the installation.
    DeleteWorks {
        /// The hook completed this round: record it before its work goes.
        record_hook: bool,
    },
    /// Nothing left on the cluster: forget the installation (stored object, lease, credentials).
    Done,
}

/// The next step of removing an add-on from a cluster (see the module documentation).
pub fn step(v: &UninstallView<'_>) -> UninstallStep {
    if !v.cluster_exists {
        return UninstallStep::Done;
    }
    if !v.hook_completed {
        let hook = match v.hook {
            Err(why) => {
                return wait(
                    REASON_FAILED,
                    format!("the pre-delete hook cannot be rendered: {why}"),
                );
            }
            Ok(hook) => hook,
        };
        if let Some(hook) = hook {
            match v.applied_hook {
                Some(w) if is_deleting(w) => {
                    return wait(
                        REASON_NOT_COMPLETED,
                        format!("the previous hook work {} is being deleted", name_of(w)),
                    );
                }
                Some(w) if w.spec == hook.spec => match hook_state(w) {
                    HookState::Completed => {
                        return UninstallStep::DeleteWorks { record_hook: true };
                    }
                    HookState::Waiting(m) => return wait(REASON_NOT_COMPLETED, m),
                    HookState::Failed(m) => return wait(REASON_FAILED, m),
                },
                _ => return UninstallStep::ApplyHook,
            }
        }
    }
    if v.works_left {
        UninstallStep::DeleteWorks { record_hook: false }
    } else {
        UninstallStep::Done
    }
}

fn wait(reason: &'static str, message: String) -> UninstallStep {
    UninstallStep::WaitHook { reason, message }
}

/// Where an applied hook work stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookState {
    /// Every Job completed and every Pod succeeded.
    Completed,
    /// Still running (what it waits for).
    Waiting(String),
    /// Something failed (what, and why); removal waits until it is fixed.
    Failed(String),
}

/// Whether a hook work completed (OCM's `hookWorkIsCompleted`: the work Available, every Job's
/// `JobComplete` feedback `True`, every Pod's `PodPhase` `Succeeded`), and if not, why: the work
/// not applied, a Job failed (its `Failed` condition, [`flotilla_api::addon::render`] asks for
/// it), a Pod failed, or still running — each naming the Job or Pod. A failure is told as soon
/// as it is reported (the agent reports the work of a failed Job not Available).
pub fn hook_state(w: &ManifestWork) -> HookState {
    let name = name_of(w);
    let conditions = w
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    if let Some(c) = meta::find_condition(conditions, APPLIED)
        && c.status == status::FALSE
    {
        return HookState::Failed(format!(
            "the hook work {name} cannot be applied: {}",
            c.message
        ));
    }
    let configs = w
        .spec
        .as_ref()
        .map(|s| s.manifest_configs.as_slice())
        .unwrap_or_default();
    let (mut failed, mut waiting) = (Vec::new(), Vec::new());
    for rid in configs
        .iter()
        .filter_map(|c| c.resource_identifier.as_ref())
    {
        match manifest_state(w, rid) {
            HookState::Completed => {}
            HookState::Waiting(m) => waiting.push(m),
            HookState::Failed(m) => failed.push(m),
        }
    }
    if !failed.is_empty() {
        return HookState::Failed(format!(
            "the pre-delete hook failed: {}; the add-on is removed once it completes (fix the hook \
             in the AddOnTemplate, or delete the cluster)",
            failed.join("; ")
        ));
    }
    if !waiting.is_empty() {
        return HookState::Waiting(format!(
            "waiting for the pre-delete hook: {}",
            waiting.join("; ")
        ));
    }
    if meta::find_condition(conditions, AVAILABLE).is_none_or(|c| c.status != status::TRUE) {
        return HookState::Waiting(format!("the hook work {name} is not available yet"));
    }
    if configs.is_empty() {
        return HookState::Waiting(format!("the hook work {name} asks for no feedback"));
    }
    HookState::Completed
}

/// Where one Job or Pod of a hook work stands, from its feedback.
fn manifest_state(w: &ManifestWork, rid: &flotilla_api::v1::ResourceIdentifier) -> HookState {
    let value = |name: &str| feedback(w, rid, name).and_then(|v| v.string);
    let what = describe(rid);
    match rid.resource.as_str() {
        "jobs" if value("JobComplete").as_deref() == Some("True") => HookState::Completed,
        "jobs" if value("JobFailed").as_deref() == Some("True") => {
            let reason = value("JobFailedReason").unwrap_or_else(|| "no reason given".into());
            HookState::Failed(format!("Job {what} failed ({reason})"))
        }
        "jobs" => HookState::Waiting(format!("Job {what} has not completed")),
        "pods" => match value("PodPhase").as_deref() {
            Some("Succeeded") => HookState::Completed,
            Some("Failed") => HookState::Failed(format!("Pod {what} failed")),
            phase => HookState::Waiting(format!(
                "Pod {what} has not succeeded (phase {})",
                phase.unwrap_or("unknown")
            )),
        },
        other => HookState::Failed(format!(
            "{other} {what} is not a Job or a Pod: it cannot complete"
        )),
    }
}

/// The Jobs and Pods a hook work runs (`Job ns/cleanup, Pod ns/report`).
pub fn hooks_named(w: &ManifestWork) -> String {
    w.spec
        .iter()
        .flat_map(|s| s.manifest_configs.iter())
        .filter_map(|c| c.resource_identifier.as_ref())
        .map(|r| {
            let kind = match r.resource.as_str() {
                "jobs" => "Job",
                "pods" => "Pod",
                other => other,
            };
            format!("{kind} {}", describe(r))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(rid: &flotilla_api::v1::ResourceIdentifier) -> String {
    if rid.namespace.is_empty() {
        rid.name.clone()
    } else {
        format!("{}/{}", rid.namespace, rid.name)
    }
}

/// The feedback value `name` of the manifest `rid` names.
fn feedback(
    w: &ManifestWork,
    rid: &flotilla_api::v1::ResourceIdentifier,
    name: &str,
) -> Option<FieldValue> {
    let manifests = &w.status.as_ref()?.resource_status.as_ref()?.manifests;
    manifests
        .iter()
        .filter(|m| {
            m.resource_meta.as_ref().is_some_and(|r| {
                r.group == rid.group
                    && r.resource == rid.resource
                    && r.namespace == rid.namespace
                    && r.name == rid.name
            })
        })
        .flat_map(|m| m.status_feedback.iter().flat_map(|f| f.values.iter()))
        .find(|v| v.name == name)
        .and_then(|v| v.field_value.clone())
}

fn is_deleting(w: &ManifestWork) -> bool {
    w.metadata
        .as_ref()
        .is_some_and(|m| m.deletion_timestamp.is_some())
}

fn name_of(w: &ManifestWork) -> &str {
    w.metadata.as_ref().map_or("", |m| m.name.as_str())
}

#[cfg(test)]
mod tests;

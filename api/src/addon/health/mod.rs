//! Health of an installed add-on: its `Available` condition from a lease or from its works'
//! status, `Degraded` from its works, and `Unknown` while its cluster is.
//!
//! An AddOnTemplate chooses its check with the [`HEALTH_CHECK_ANNOTATION`] ([`mode_of`]):
//!
//! - `Lease` ([`lease`]): OCM's spoke lease controller
//!   (`pkg/registration/spoke/addon/lease_controller.go`). The add-on agent renews a lease (over
//!   NATS in Flotilla); renewed less than the grace period ago (OCM: 5 × 60 s) → True
//!   `ManagedClusterAddOnLeaseUpdated`; older → False `ManagedClusterAddOnLeaseUpdateStopped`;
//!   never renewed → Unknown `ManagedClusterAddOnLeaseNotFound`.
//! - `WorkStatus` (the default; [`work`]): OCM's `WorkloadAvailability` prober, the one every
//!   AddOnTemplate add-on gets (`pkg/addon/templateagent/template_agent.go`), evaluated as
//!   `probeAddonStatusByWorks` does (`agentdeploy/healthcheck_sync.go`, `utils/probe_helper.go`):
//!   the work must be Available, then every Deployment (except those with `replicas: 0`) and
//!   DaemonSet of the work is probed through its `WellKnownStatus` feedback. A Deployment is
//!   healthy when `Replicas == 0 || ReadyReplicas >= 1`, a DaemonSet when `NumberReady ==
//!   DesiredNumberScheduled`. As in OCM, workloads that report no feedback yet are skipped as
//!   long as one reports (Unknown `NoProbeResult` only when none does), and a work without
//!   workloads is available as soon as it is Available. The renderer asks for that feedback
//!   ([`crate::addon::render`]).
//! - `Customized` (Flotilla): the feedback value named by [`HEALTH_PROBE_FIELD_ANNOTATION`],
//!   which the template's own `manifestConfigs` must produce (e.g. a `JSONPaths` rule).
//!
//! OCM's `status.healthCheck.mode` knows only `Lease` and `Customized` ([`ocm_mode`]): the
//! work-based checks are all reported as `Customized`.
//!
//! Deviations from OCM:
//! - `Customized` with a probe field is Flotilla's; OCM's equivalent is a Go `HealthChecker`
//!   compiled into an add-on manager. Every manifest reporting the field must report true
//!   (Boolean `true` or String `"true"`/`"True"`); one that reports anything else makes the
//!   add-on unavailable, naming the manifest and the value.
//! - `Degraded` ([`degraded`]): OCM leaves it to the add-on agent; Flotilla mirrors the work's
//!   `Degraded` condition.
//! - Verdict reasons are `&'static str`: [`cluster_unknown`] keeps the cluster's reason when it
//!   is one Flotilla or OCM sets for a cluster's Available condition, and otherwise reports
//!   `ManagedClusterAvailabilityUnknown` with the cluster's reason leading the message.
//! - OCM probes only after the ManagedClusterAddOn has a `ManifestApplied` condition and skips
//!   probing while the cluster is Unknown; those checks are the caller's.

use crate::addon::{HEALTH_CHECK_ANNOTATION, HEALTH_PROBE_FIELD_ANNOTATION};
use crate::meta::{self, status};
use crate::v1;
use crate::work::conditions::{AVAILABLE, DEGRADED};
use std::time::{Duration, SystemTime};

/// How long a renewed lease keeps an add-on available (OCM: 5 × the 60 s lease duration).
pub const DEFAULT_LEASE_GRACE: Duration = Duration::from_secs(5 * 60);

/// Reasons of the `Available` condition (OCM's constants).
pub mod reasons {
    /// No work of the add-on.
    pub const WORK_NOT_FOUND: &str = "WorkNotFound";
    /// The work is not (yet) Available.
    pub const WORK_NOT_APPLIED: &str = "WorkNotApplied";
    /// The work is applied (Lease mode without a lease check).
    pub const WORK_APPLIED: &str = "WorkApplied";
    /// No probed resource reported feedback yet.
    pub const NO_PROBE_RESULT: &str = "NoProbeResult";
    /// A probe failed.
    pub const PROBE_UNAVAILABLE: &str = "ProbeUnavailable";
    /// Every probe passed.
    pub const PROBE_AVAILABLE: &str = "ProbeAvailable";
    /// The lease is renewed.
    pub const LEASE_UPDATED: &str = "ManagedClusterAddOnLeaseUpdated";
    /// The lease is older than the grace period.
    pub const LEASE_UPDATE_STOPPED: &str = "ManagedClusterAddOnLeaseUpdateStopped";
    /// The add-on never renewed its lease.
    pub const LEASE_NOT_FOUND: &str = "ManagedClusterAddOnLeaseNotFound";
    /// Flotilla: the cluster is Unknown for a reason outside the known set.
    pub const CLUSTER_UNKNOWN: &str = "ManagedClusterAvailabilityUnknown";
    /// Flotilla (`Degraded`): the work is degraded.
    pub const WORK_DEGRADED: &str = "WorkDegraded";
    /// Flotilla (`Degraded`): the work is not degraded.
    pub const WORK_NOT_DEGRADED: &str = "WorkNotDegraded";
    /// Flotilla (`Degraded`): the work cannot tell.
    pub const WORK_DEGRADED_UNKNOWN: &str = "WorkDegradedUnknown";
}

/// The value of a health condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// [`status::TRUE`], [`status::FALSE`] or [`status::UNKNOWN`].
    pub status: &'static str,
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message.
    pub message: String,
}

impl Verdict {
    fn new(status: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            reason,
            message: message.into(),
        }
    }
}

/// How an add-on's health is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The add-on agent renews a lease.
    Lease,
    /// OCM's WorkloadAvailability prober over the work's Deployments and DaemonSets.
    WorkStatus,
    /// A feedback value (its name) of some manifest must be true.
    Customized(String),
}

/// The health check an AddOnTemplate asks for with [`HEALTH_CHECK_ANNOTATION`] (`Lease`,
/// `WorkStatus` — the default when absent or empty — or `Customized` with the feedback value
/// named by [`HEALTH_PROBE_FIELD_ANNOTATION`]). Errors name the annotation.
pub fn mode_of(template: &v1::AddOnTemplate) -> Result<Mode, String> {
    let annotations = template.metadata.as_ref().map(|m| &m.annotations);
    let get = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .map(String::as_str)
            .unwrap_or_default()
    };
    let mode = get(HEALTH_CHECK_ANNOTATION);
    let field = get(HEALTH_PROBE_FIELD_ANNOTATION);
    match mode {
        "Customized" if field.trim().is_empty() => Err(format!(
            "metadata.annotations[{HEALTH_PROBE_FIELD_ANNOTATION}]: required with \
             {HEALTH_CHECK_ANNOTATION}: Customized (the feedback value that must be true)"
        )),
        "Customized" => Ok(Mode::Customized(field.to_string())),
        "Lease" | "WorkStatus" | "" if !field.is_empty() => Err(format!(
            "metadata.annotations[{HEALTH_PROBE_FIELD_ANNOTATION}]: only used with \
             {HEALTH_CHECK_ANNOTATION}: Customized, not {}",
            if mode.is_empty() {
                "WorkStatus (the default)"
            } else {
                mode
            }
        )),
        "Lease" => Ok(Mode::Lease),
        "WorkStatus" | "" => Ok(Mode::WorkStatus),
        other => Err(format!(
            "metadata.annotations[{HEALTH_CHECK_ANNOTATION}]: {other:?} is not one of Lease, \
             WorkStatus, Customized"
        )),
    }
}

/// OCM's `status.healthCheck.mode`: `Lease` for [`Mode::Lease`], `Customized` otherwise.
pub fn ocm_mode(mode: &Mode) -> &'static str {
    match mode {
        Mode::Lease => "Lease",
        Mode::WorkStatus | Mode::Customized(_) => "Customized",
    }
}

/// `Available` from the add-on's lease: True while `now < renewed + grace`, False after, Unknown
/// when it was never renewed (OCM's messages).
pub fn lease(
    renewed: Option<SystemTime>,
    now: SystemTime,
    grace: Duration,
    addon: &str,
) -> Verdict {
    match renewed {
        None => Verdict::new(
            status::UNKNOWN,
            reasons::LEASE_NOT_FOUND,
            format!("The status of {addon} add-on is unknown."),
        ),
        Some(t) if now < lease_expires(t, grace) => Verdict::new(
            status::TRUE,
            reasons::LEASE_UPDATED,
            format!("{addon} add-on is available."),
        ),
        Some(_) => Verdict::new(
            status::FALSE,
            reasons::LEASE_UPDATE_STOPPED,
            format!("{addon} add-on is not available."),
        ),
    }
}

/// A lease verdict judged elsewhere (the agent judges the spoke's Lease on the spoke's clock and
/// reports status and message): the status names the reason, as [`lease`] pairs them. `None`
/// for a status that is not `True`, `False` or `Unknown`.
pub fn lease_reported(lease_status: &str, message: &str) -> Option<Verdict> {
    let (st, reason) = match lease_status {
        status::TRUE => (status::TRUE, reasons::LEASE_UPDATED),
        status::FALSE => (status::FALSE, reasons::LEASE_UPDATE_STOPPED),
        status::UNKNOWN => (status::UNKNOWN, reasons::LEASE_NOT_FOUND),
        _ => return None,
    };
    Some(Verdict::new(st, reason, message))
}

/// When a lease renewed at `renewed` stops making the add-on available.
pub fn lease_expires(renewed: SystemTime, grace: Duration) -> SystemTime {
    renewed.checked_add(grace).unwrap_or(renewed)
}

/// `Available` from the add-on's works (OCM's `probeAddonStatusByWorks`; see the module
/// documentation): every work must be Available, then the workloads of all of them are probed
/// together, as OCM gathers the manifest statuses of all the add-on's works. With
/// [`Mode::Lease`] only the works themselves are judged (True `WorkApplied` once they are
/// Available, as OCM's work prober without probe fields); the lease is [`lease`]'s.
pub fn work(works: &[&v1::ManifestWork], mode: &Mode, addon: &str) -> Verdict {
    if works.is_empty() {
        return Verdict::new(
            status::UNKNOWN,
            reasons::WORK_NOT_FOUND,
            "Addon manifestWork is not found",
        );
    }
    for w in works {
        let conditions = w
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        match meta::find_condition(conditions, AVAILABLE) {
            None => {
                return Verdict::new(
                    status::UNKNOWN,
                    reasons::WORK_NOT_APPLIED,
                    "Addon manifestWork is not applied yet",
                );
            }
            Some(c) if c.status == status::FALSE => {
                return Verdict::new(status::FALSE, reasons::WORK_NOT_APPLIED, c.message.clone());
            }
            Some(_) => {}
        }
    }
    let manifests: Vec<&v1::ManifestCondition> = works
        .iter()
        .filter_map(|w| w.status.as_ref()?.resource_status.as_ref())
        .flat_map(|r| r.manifests.iter())
        .collect();
    match mode {
        Mode::Lease => Verdict::new(
            status::TRUE,
            reasons::WORK_APPLIED,
            "Addon manifestWork is applied",
        ),
        Mode::WorkStatus => workloads(works, &manifests, addon),
        Mode::Customized(field) => customized(&manifests, field, addon),
    }
}

/// A probed workload: `apps` Deployment or DaemonSet of the work's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Workload {
    /// `deployments` or `daemonsets`.
    pub resource: &'static str,
    /// Namespace (Flotilla's default `default` when the manifest names none).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.replicas` of a Deployment (default 1); `None` for a DaemonSet.
    pub replicas: Option<i64>,
}

/// The Deployments and DaemonSets (group `apps`) among manifests, in order (OCM's
/// `FilterWorkloads`).
pub(crate) fn workloads_of(manifests: &[v1::Manifest]) -> Vec<Workload> {
    manifests
        .iter()
        .filter_map(|m| {
            let obj: serde_json::Value = serde_json::from_slice(&m.raw).ok()?;
            let id = crate::work::manifest_id(&obj).ok()?;
            let (resource, replicas) = match (id.group.as_str(), id.kind.as_str()) {
                ("apps", "Deployment") => (
                    "deployments",
                    Some(obj["spec"]["replicas"].as_i64().unwrap_or(1)),
                ),
                ("apps", "DaemonSet") => ("daemonsets", None),
                _ => return None,
            };
            Some(Workload {
                resource,
                namespace: id.namespace,
                name: id.name,
                replicas,
            })
        })
        .collect()
}

fn workloads(
    works: &[&v1::ManifestWork],
    manifests: &[&v1::ManifestCondition],
    addon: &str,
) -> Verdict {
    let spec_manifests: Vec<v1::Manifest> = works
        .iter()
        .filter_map(|w| w.spec.as_ref()?.workload.as_ref())
        .flat_map(|t| t.manifests.iter().cloned())
        .collect();
    // OCM does not probe Deployments scaled to zero.
    let probes: Vec<Workload> = workloads_of(&spec_manifests)
        .into_iter()
        .filter(|p| p.replicas != Some(0))
        .collect();
    let results: Vec<(&Workload, &v1::ResourceMeta, &[v1::FeedbackValue])> = probes
        .iter()
        .flat_map(|p| {
            manifests.iter().filter_map(move |m| {
                let rm = m.resource_meta.as_ref()?;
                let values = m.status_feedback.as_ref().map(|f| f.values.as_slice())?;
                (rm.group == "apps"
                    && rm.resource == p.resource
                    && rm.namespace == p.namespace
                    && rm.name == p.name
                    && !values.is_empty())
                .then_some((p, rm, values))
            })
        })
        .collect();
    if !probes.is_empty() && results.is_empty() {
        return Verdict::new(
            status::UNKNOWN,
            reasons::NO_PROBE_RESULT,
            "Probe results are not returned",
        );
    }
    for (p, rm, values) in results {
        if let Err(e) = check_workload(p.resource, rm, values) {
            return Verdict::new(
                status::FALSE,
                reasons::PROBE_UNAVAILABLE,
                format!("Probe addon unavailable with err {e}"),
            );
        }
    }
    Verdict::new(
        status::TRUE,
        reasons::PROBE_AVAILABLE,
        format!("{addon} add-on is available."),
    )
}

/// OCM's `checkWorkloadAvailabilityHealth` (same messages).
fn check_workload(
    resource: &str,
    rm: &v1::ResourceMeta,
    values: &[v1::FeedbackValue],
) -> Result<(), String> {
    let (ready_name, desired_name) = match resource {
        "deployments" => ("ReadyReplicas", "Replicas"),
        _ => ("NumberReady", "DesiredNumberScheduled"),
    };
    let integer = |name: &str| {
        values
            .iter()
            .filter(|v| v.name == name)
            .filter_map(|v| v.field_value.as_ref().and_then(|f| f.integer))
            .next_back()
    };
    let Some(ready) = integer(ready_name) else {
        return Err("readyReplica is not probed".into());
    };
    let Some(desired) = integer(desired_name) else {
        return Err("desiredNumberReplicas is not probed".into());
    };
    let healthy = match resource {
        "deployments" => desired == 0 || ready >= 1,
        _ => ready == desired,
    };
    if healthy {
        Ok(())
    } else {
        Err(format!(
            "desiredNumberReplicas is {desired} but readyReplica is {ready} for {resource} {}/{}",
            rm.namespace, rm.name
        ))
    }
}

fn customized(manifests: &[&v1::ManifestCondition], field: &str, addon: &str) -> Verdict {
    let mut seen = false;
    for m in manifests {
        let values = m
            .status_feedback
            .as_ref()
            .map(|f| f.values.as_slice())
            .unwrap_or_default();
        for v in values.iter().filter(|v| v.name == field) {
            seen = true;
            let fv = v.field_value.clone().unwrap_or_default();
            let is_true =
                fv.boolean == Some(true) || matches!(fv.string.as_deref(), Some("true" | "True"));
            if !is_true {
                return Verdict::new(
                    status::FALSE,
                    reasons::PROBE_UNAVAILABLE,
                    format!(
                        "Probe addon unavailable: {field} of {} is {}, not true",
                        describe(m.resource_meta.as_ref()),
                        show(&fv)
                    ),
                );
            }
        }
    }
    if seen {
        Verdict::new(
            status::TRUE,
            reasons::PROBE_AVAILABLE,
            format!("{addon} add-on is available."),
        )
    } else {
        Verdict::new(
            status::UNKNOWN,
            reasons::NO_PROBE_RESULT,
            format!("Probe results are not returned (no manifest reports {field})"),
        )
    }
}

/// `deployments.apps ns/name` of a manifest's status.
fn describe(rm: Option<&v1::ResourceMeta>) -> String {
    let Some(rm) = rm else {
        return "a manifest".into();
    };
    let resource = if rm.group.is_empty() {
        rm.resource.clone()
    } else {
        format!("{}.{}", rm.resource, rm.group)
    };
    if rm.namespace.is_empty() {
        format!("{resource} {}", rm.name)
    } else {
        format!("{resource} {}/{}", rm.namespace, rm.name)
    }
}

fn show(fv: &v1::FieldValue) -> String {
    if let Some(b) = fv.boolean {
        b.to_string()
    } else if let Some(i) = fv.integer {
        i.to_string()
    } else if let Some(s) = &fv.string {
        format!("{s:?}")
    } else if let Some(j) = &fv.json_raw {
        j.clone()
    } else {
        "empty".into()
    }
}

/// `Degraded` from the works' `Degraded` conditions, when one has one: True when any work is
/// degraded (the messages of the degraded ones, or their degraded manifests), else Unknown when
/// any cannot tell, else False; reasons `WorkDegraded` / `WorkDegradedUnknown` /
/// `WorkNotDegraded`.
pub fn degraded(works: &[&v1::ManifestWork]) -> Option<Verdict> {
    let verdicts: Vec<Verdict> = works.iter().filter_map(|w| degraded_one(w)).collect();
    let first = |s: &str| verdicts.iter().find(|v| v.status == s).cloned();
    let degraded: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.status == status::TRUE)
        .map(|v| v.message.as_str())
        .collect();
    if !degraded.is_empty() {
        let message = degraded.join("; ");
        return Some(Verdict::new(status::TRUE, reasons::WORK_DEGRADED, message));
    }
    first(status::UNKNOWN).or_else(|| first(status::FALSE))
}

/// `Degraded` of one work, from its `Degraded` condition.
fn degraded_one(work: &v1::ManifestWork) -> Option<Verdict> {
    let st = work.status.as_ref()?;
    let c = meta::find_condition(&st.conditions, DEGRADED)?;
    let (status, reason) = match c.status.as_str() {
        "True" => (status::TRUE, reasons::WORK_DEGRADED),
        "False" => (status::FALSE, reasons::WORK_NOT_DEGRADED),
        _ => (status::UNKNOWN, reasons::WORK_DEGRADED_UNKNOWN),
    };
    let mut message = c.message.clone();
    if message.is_empty() && status == status::TRUE {
        let parts: Vec<String> = st
            .resource_status
            .iter()
            .flat_map(|r| &r.manifests)
            .filter_map(|m| {
                let d = meta::find_condition(&m.conditions, DEGRADED)?;
                (d.status == status::TRUE).then(|| {
                    let what = describe(m.resource_meta.as_ref());
                    if d.message.is_empty() {
                        what
                    } else {
                        format!("{what}: {}", d.message)
                    }
                })
            })
            .collect();
        message = if parts.is_empty() {
            "the add-on's work is degraded".into()
        } else {
            format!("degraded: {}", parts.join("; "))
        };
    }
    Some(Verdict::new(status, reason, message))
}

/// Reasons of a cluster's Available condition that [`cluster_unknown`] keeps as they are.
const CLUSTER_REASONS: [&str; 6] = [
    "ManagedClusterLeaseUpdateStopped",
    "ManagedClusterAvailable",
    "ManagedClusterUnhealthy",
    "ManagedClusterKubeAPIServerUnavailable",
    "ManagedClusterClockOutOfSync",
    "ManagedClusterConditionAvailableUnknown",
];

/// `Available` of every add-on of a cluster whose own Available is Unknown (OCM's hub
/// `healthcheck_controller`): Unknown with the cluster's reason and message. A reason outside
/// the known set becomes `ManagedClusterAvailabilityUnknown`, the cluster's reason leading the
/// message.
pub fn cluster_unknown(cluster_reason: &str, cluster_message: &str) -> Verdict {
    match CLUSTER_REASONS.iter().find(|r| **r == cluster_reason) {
        Some(r) => Verdict::new(status::UNKNOWN, r, cluster_message),
        None if cluster_reason.is_empty() => {
            Verdict::new(status::UNKNOWN, reasons::CLUSTER_UNKNOWN, cluster_message)
        }
        None => Verdict::new(
            status::UNKNOWN,
            reasons::CLUSTER_UNKNOWN,
            if cluster_message.is_empty() {
                cluster_reason.to_string()
            } else {
                format!("{cluster_reason}: {cluster_message}")
            },
        ),
    }
}

#[cfg(test)]
mod tests;

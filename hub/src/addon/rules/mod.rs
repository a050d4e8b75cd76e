//! Pure rules of the add-on actors: which clusters an add-on belongs on, where each cluster
//! stands in the rollout of its configs, and the status of every ManagedClusterAddOn and of the
//! ClusterManagementAddOn. No I/O, time passed in.
//!
//! The rollout position is never stored: a cluster's work carries the config spec hashes it was
//! rendered from (OCM's `open-cluster-management.io/config-spec-hash` annotation), so after a
//! hub restart each cluster is `ToApply` (older hashes), `Progressing`, `Succeeded` or `Failed`
//! exactly as before and the rollout resumes where it was.
//!
//! Where Flotilla differs from OCM (on purpose):
//! - a listed placement that does not exist or is not scheduled yet removes nothing: OCM skips
//!   it, so a placement deleted and re-created would uninstall and reinstall the add-on on every
//!   cluster it selects;
//! - a cluster selected by several placements belongs to the last one listed (its configs win,
//!   as in OCM) and is rolled out once, with that placement's strategy.

use flotilla_api::addon::{self, conditions as cond, health};
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{
    AddOnConfig, ClusterManagementAddOn, ConfigGroupResource, ConfigReference, ConfigSpecHash,
    HealthCheck, ManagedCluster, ManagedClusterAddOn, ManagedClusterAddOnStatus, ManifestWork,
};
use flotilla_rollout::Status;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Config spec hashes by config key (`<resource>.<group>/<namespace>/<name>`).
pub type Hashes = BTreeMap<String, String>;

/// One effective config of an installed add-on, resolved to its stored object.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The config reference.
    pub config: AddOnConfig,
    /// OCM's spec hash of the stored object.
    pub hash: String,
    /// The stored object's generation.
    pub generation: i64,
}

/// The annotation value recording `hashes` on a work (a JSON object, sorted keys).
pub fn annotation(hashes: &Hashes) -> String {
    serde_json::to_string(hashes).unwrap_or_default()
}

/// The hashes a work was rendered from (`None` without the annotation, or when it is unreadable).
pub fn released(work: Option<&ManifestWork>) -> Option<Hashes> {
    let value = work?
        .metadata
        .as_ref()?
        .annotations
        .get(addon::CONFIG_SPEC_HASH_ANNOTATION)?;
    serde_json::from_str(value).ok()
}

/// The hashes of resolved configs, by config key.
pub fn hashes(resolved: &[Resolved]) -> Hashes {
    resolved
        .iter()
        .map(|r| {
            let c = &r.config;
            (
                addon::hash::config_key(&c.group, &c.resource, &c.namespace, &c.name),
                r.hash.clone(),
            )
        })
        .collect()
}

/// A config key split into (group, resource, namespace, name).
pub fn parse_config_key(key: &str) -> Option<(String, String, String, String)> {
    let mut parts = key.splitn(3, '/');
    let gr = parts.next()?;
    let namespace = parts.next()?;
    let name = parts.next()?;
    let (resource, group) = gr.split_once('.').unwrap_or((gr, ""));
    Some((
        group.to_string(),
        resource.to_string(),
        namespace.to_string(),
        name.to_string(),
    ))
}

/// The cluster a ManagedClusterAddOn lives on and the add-on's name.
pub fn key_of(mca: &ManagedClusterAddOn) -> (String, String) {
    let m = mca.metadata.clone().unwrap_or_default();
    (m.namespace, m.name)
}

/// The cluster a ManagedClusterAddOn lives on (borrowed: [`key_of`] copies).
pub fn cluster_of(mca: &ManagedClusterAddOn) -> &str {
    mca.metadata.as_ref().map_or("", |m| m.namespace.as_str())
}

/// Whether the cluster's Available condition is Unknown, with its reason and message.
pub fn cluster_unknown(cluster: Option<&ManagedCluster>) -> Option<(String, String)> {
    let c = cluster?
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == meta::COND_AVAILABLE)?;
    (c.status == status::UNKNOWN).then(|| (c.reason.clone(), c.message.clone()))
}

/// Everything the status of one ManagedClusterAddOn depends on.
pub struct StatusInput<'a> {
    /// The add-on.
    pub cma: &'a ClusterManagementAddOn,
    /// The installed add-on as stored.
    pub mca: &'a ManagedClusterAddOn,
    /// Its agent works, by index (none before the first is applied).
    pub works: Vec<&'a ManifestWork>,
    /// Its cluster.
    pub cluster: Option<&'a ManagedCluster>,
    /// Its effective configs, or why they cannot be resolved (each naming the field).
    pub configs: &'a Result<Vec<Resolved>, Vec<String>>,
    /// The health check, or why the template's annotation is wrong.
    pub mode: &'a Result<health::Mode, String>,
    /// Why the template could not be rendered for this cluster, when it could not.
    pub render_error: Option<&'a str>,
    /// Where the cluster stands in the rollout.
    pub rollout: Status,
    /// The cluster's turn has not come yet (the rollout holds it back).
    pub waiting: bool,
    /// The add-on agent's last lease renewal.
    pub lease: Option<SystemTime>,
    /// How long a lease stays fresh.
    pub grace: Duration,
    /// The namespace the agent runs in.
    pub install_namespace: String,
    /// Whether the template asks for hub access (registrations).
    pub registrations: Vec<flotilla_api::v1::RegistrationConfig>,
    /// Now.
    pub now: SystemTime,
}

fn set(st: &mut ManagedClusterAddOnStatus, t: &str, s: &str, reason: &str, message: &str) {
    meta::set_condition(&mut st.conditions, t, s, reason, message);
}

/// The status of one ManagedClusterAddOn. Conditions keep their transition times when their
/// status does not change (`meta::set_condition`).
pub fn status(input: &StatusInput<'_>) -> ManagedClusterAddOnStatus {
    let (_, name) = key_of(input.mca);
    let mut st = input.mca.status.clone().unwrap_or_default();
    describe(&mut st, input);
    configured(&mut st, input);
    progressing(&mut st, input);
    manifest_applied(&mut st, input);
    registration_applied(&mut st, input, &name);
    available(&mut st, input, &name);
    st
}

/// What the add-on is: its metadata and supported configs (from the ClusterManagementAddOn),
/// install namespace, registrations and health check mode.
fn describe(st: &mut ManagedClusterAddOnStatus, input: &StatusInput<'_>) {
    let spec = input.cma.spec.clone().unwrap_or_default();
    st.add_on_meta = spec.add_on_meta.clone();
    st.supported_configs = spec
        .supported_configs
        .iter()
        .map(|c| ConfigGroupResource {
            group: c.group.clone(),
            resource: c.resource.clone(),
        })
        .collect();
    st.namespace.clone_from(&input.install_namespace);
    st.registrations.clone_from(&input.registrations);
    st.health_check = Some(HealthCheck {
        mode: match input.mode {
            Ok(m) => health::ocm_mode(m).to_string(),
            Err(_) => "Customized".to_string(),
        },
    });
}

/// Configured, and the config references: desired = what the work was rendered from (what
/// the rollout released to this cluster), last applied = the same once the work is applied
/// and available (OCM's meaning of both).
fn configured(st: &mut ManagedClusterAddOnStatus, input: &StatusInput<'_>) {
    match input.configs {
        Ok(resolved) => {
            set(
                st,
                cond::CONFIGURED,
                status::TRUE,
                "ConfigurationsConfigured",
                "Configurations configured",
            );
            let released = released(input.works.first().copied()).unwrap_or_default();
            let done = input.rollout == Status::Succeeded;
            let previous = std::mem::take(&mut st.config_references);
            st.config_references = resolved
                .iter()
                .map(|r| {
                    let c = &r.config;
                    let key = addon::hash::config_key(&c.group, &c.resource, &c.namespace, &c.name);
                    let spec_hash = |hash: &str| ConfigSpecHash {
                        namespace: c.namespace.clone(),
                        name: c.name.clone(),
                        spec_hash: hash.to_string(),
                    };
                    let desired = released.get(&key).map(|h| spec_hash(h));
                    let last_applied = if done {
                        desired.clone()
                    } else {
                        previous
                            .iter()
                            .find(|p| p.group == c.group && p.resource == c.resource)
                            .and_then(|p| p.last_applied_config.clone())
                    };
                    ConfigReference {
                        group: c.group.clone(),
                        resource: c.resource.clone(),
                        namespace: c.namespace.clone(),
                        name: c.name.clone(),
                        last_observed_generation: r.generation,
                        desired_config: desired,
                        last_applied_config: last_applied,
                    }
                })
                .collect();
        }
        Err(errors) => set(
            st,
            cond::CONFIGURED,
            status::FALSE,
            "ConfigurationsNotConfigured",
            &errors.join("; "),
        ),
    }
}

/// Progressing: the configs, the render and the health check must be right, then where the
/// cluster stands in the rollout.
fn progressing(st: &mut ManagedClusterAddOnStatus, input: &StatusInput<'_>) {
    match (input.configs, input.render_error, input.mode) {
        (Err(errors), _, _) => set(
            st,
            cond::PROGRESSING,
            status::FALSE,
            "ConfigurationUnsupported",
            &errors.join("; "),
        ),
        (_, Some(e), _) => set(st, cond::PROGRESSING, status::FALSE, "Failed", e),
        (_, _, Err(e)) => set(st, cond::PROGRESSING, status::FALSE, "Failed", e),
        _ => match input.rollout {
            Status::Succeeded => set(
                st,
                cond::PROGRESSING,
                status::FALSE,
                "Completed",
                "completed with no errors.",
            ),
            Status::Failed => set(
                st,
                cond::PROGRESSING,
                status::FALSE,
                "Failed",
                "the add-on's work failed to apply or is degraded",
            ),
            Status::ToApply if input.waiting => set(
                st,
                cond::PROGRESSING,
                status::FALSE,
                "WaitingForRollout",
                "waiting for its turn in the rollout",
            ),
            _ => set(
                st,
                cond::PROGRESSING,
                status::TRUE,
                "Progressing",
                "applying the add-on's configs",
            ),
        },
    }
}

/// ManifestApplied: the works' Applied conditions.
fn manifest_applied(st: &mut ManagedClusterAddOnStatus, input: &StatusInput<'_>) {
    if let Some(e) = input.render_error {
        set(
            st,
            cond::MANIFEST_APPLIED,
            status::FALSE,
            "ManifestWorkApplyFailed",
            e,
        );
    } else if let Some(failed) = not_applied(&input.works) {
        set(
            st,
            cond::MANIFEST_APPLIED,
            status::FALSE,
            "AddonManifestAppliedFailed",
            &failed,
        );
    } else if !input.works.is_empty() && input.works.iter().all(|w| applied_condition(w).is_some())
    {
        set(
            st,
            cond::MANIFEST_APPLIED,
            status::TRUE,
            "AddonManifestApplied",
            "the add-on's manifests are applied",
        );
    }
}

/// RegistrationApplied: Flotilla issues NATS credentials to the add-on agent on request, so
/// the permission is set as soon as the add-on is installed.
fn registration_applied(st: &mut ManagedClusterAddOnStatus, input: &StatusInput<'_>, name: &str) {
    if input.registrations.is_empty() {
        st.conditions
            .retain(|c| c.r#type != cond::REGISTRATION_APPLIED);
    } else {
        set(
            st,
            cond::REGISTRATION_APPLIED,
            status::TRUE,
            "SetPermissionApplied",
            &format!(
                "the add-on agent may use {}",
                flotilla_bus::addons::all_of(name, &key_of(input.mca).0)
            ),
        );
    }
}

/// Available: the cluster's own Unknown wins; otherwise the health check. Degraded: the works'
/// workloads.
fn available(st: &mut ManagedClusterAddOnStatus, input: &StatusInput<'_>, name: &str) {
    let verdict = if let Some((reason, message)) = cluster_unknown(input.cluster) {
        Some(health::cluster_unknown(&reason, &message))
    } else {
        match input.mode {
            Ok(health::Mode::Lease) => {
                Some(health::lease(input.lease, input.now, input.grace, name))
            }
            Ok(mode) => Some(health::work(&input.works, mode, name)),
            Err(_) => None,
        }
    };
    if let Some(v) = verdict {
        set(st, cond::AVAILABLE, v.status, v.reason, &v.message);
    }
    match health::degraded(&input.works) {
        Some(v) => set(st, cond::DEGRADED, v.status, v.reason, &v.message),
        None => st.conditions.retain(|c| c.r#type != cond::DEGRADED),
    }
}

fn applied_condition(w: &ManifestWork) -> Option<&flotilla_api::v1::Condition> {
    let conditions = &w.status.as_ref()?.conditions;
    meta::find_condition(conditions, flotilla_api::work::conditions::APPLIED)
}

/// Why the works are not applied, when one reports Applied other than True: its message (with
/// its name when the add-on has several works).
fn not_applied(works: &[&ManifestWork]) -> Option<String> {
    let failed: Vec<String> = works
        .iter()
        .filter_map(|w| {
            let c = applied_condition(w).filter(|c| c.status != status::TRUE)?;
            Some(if works.len() > 1 {
                let name = w.metadata.as_ref().map_or("", |m| m.name.as_str());
                format!("{name}: {}", c.message)
            } else {
                c.message.clone()
            })
        })
        .collect();
    (!failed.is_empty()).then(|| failed.join("; "))
}

/// What the hub checks of a ClusterManagementAddOn beyond the CRD's rules, each naming its
/// field: the name is a NATS subject token (no dots) and every rollout strategy parses. An
/// add-on without an AddOnTemplate is accepted: it is managed by someone else
/// ([`external`]).
pub fn hub_checks(cma: &ClusterManagementAddOn) -> Vec<String> {
    let mut errors = Vec::new();
    let name = cma.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or("");
    if name.contains('.') {
        errors.push(format!(
            "metadata.name: {name:?}: add-on names travel as NATS subject tokens and may not contain dots"
        ));
    }
    let spec = cma.spec.clone().unwrap_or_default();
    for (i, p) in spec
        .install_strategy
        .iter()
        .flat_map(|s| s.placements.iter())
        .enumerate()
    {
        if let Err(e) = crate::rollout::strategy(
            p.rollout_strategy.as_ref(),
            &format!("spec.installStrategy.placements[{i}].rolloutStrategy"),
        ) {
            errors.extend(e);
        }
    }
    errors
}

/// When a lease-checked add-on's Available must be looked at again (its lease goes stale).
pub fn lease_recheck(
    lease: Option<SystemTime>,
    now: SystemTime,
    grace: Duration,
) -> Option<Duration> {
    let expires = health::lease_expires(lease?, grace);
    expires
        .duration_since(now)
        .ok()
        .map(|d| d + Duration::from_millis(50))
}

pub mod external;
pub mod plan;
pub mod uninstall;
pub mod works;

pub use external::{ExternalInput, external_status, install_namespace};
pub use flotilla_api::addon::manager::{AddOnKind, Lifecycle, kind_of, lifecycle_of};
pub use works::rollout_status;

#[cfg(test)]
mod tests;

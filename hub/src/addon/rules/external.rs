//! Add-ons that are not AddOnTemplates (`flotilla_api::addon::manager::kind_of`): an add-on
//! "installed and managed by someone else" (OCM's helloworld shape), whose own manager deploys
//! its agent. The hub renders and applies nothing for them; it creates and removes their
//! ManagedClusterAddOns as the install strategy says (unless their lifecycle is `self`) and
//! reports `Available` from the add-on agent's lease, with OCM's grace and reasons. Two leases
//! count: Flotilla's NATS lease renewals (`flotilla.addon.<addon>.<cluster>.lease`) and, as
//! OCM's registration agent watches it, the spoke's `coordination.k8s.io/v1` Lease named after
//! the add-on in its install namespace — judged on the spoke by the Flotilla agent (told which
//! add-ons to watch through the cluster's registration answers) and reported with the cluster
//! status. A fresh lease of either kind makes the add-on Available; otherwise the NATS lease's
//! verdict (for an add-on agent that speaks NATS), else the spoke's, else
//! `ManagedClusterAddOnLeaseNotFound`. `ManifestApplied`, `Configured` and `Progressing` are
//! not set: the hub has no work and no rollout to judge them by.

use super::{cluster_unknown, key_of};
use flotilla_api::addon::{self, conditions as cond, health};
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{
    AddOnHealth, ClusterManagementAddOn, ConfigGroupResource, HealthCheck, ManagedCluster,
    ManagedClusterAddOn, ManagedClusterAddOnStatus,
};
use std::time::{Duration, SystemTime};

/// Everything the status of an external add-on's installation depends on.
pub struct ExternalInput<'a> {
    /// The add-on.
    pub cma: &'a ClusterManagementAddOn,
    /// The installation as stored.
    pub mca: &'a ManagedClusterAddOn,
    /// Its cluster.
    pub cluster: Option<&'a ManagedCluster>,
    /// The add-on agent's last NATS lease renewal.
    pub lease: Option<SystemTime>,
    /// The spoke Lease as the cluster's agent last judged it.
    pub spoke: Option<&'a AddOnHealth>,
    /// How long a lease stays fresh.
    pub grace: Duration,
    /// Now.
    pub now: SystemTime,
}

/// The status of an external add-on's installation: the add-on's meta and supported configs,
/// its install namespace (the ManagedClusterAddOn's, else OCM's default), health mode `Lease`,
/// and `Available` — the cluster's own Unknown wins, else the lease. Every other condition is
/// dropped (left over from when the add-on was a template add-on).
pub fn external_status(input: &ExternalInput<'_>) -> ManagedClusterAddOnStatus {
    let (_, name) = key_of(input.mca);
    let mut st = input.mca.status.clone().unwrap_or_default();
    let spec = input.cma.spec.clone().unwrap_or_default();
    st.add_on_meta = spec.add_on_meta;
    st.supported_configs = spec
        .supported_configs
        .iter()
        .map(|c| ConfigGroupResource {
            group: c.group.clone(),
            resource: c.resource.clone(),
        })
        .collect();
    st.namespace = install_namespace(input.mca);
    st.registrations.clear();
    st.config_references.clear();
    st.health_check = Some(HealthCheck {
        mode: health::ocm_mode(&health::Mode::Lease).to_string(),
    });
    st.conditions.retain(|c| c.r#type == cond::AVAILABLE);
    let v = match cluster_unknown(input.cluster) {
        Some((reason, message)) => health::cluster_unknown(&reason, &message),
        None => lease_verdict(input, &name),
    };
    meta::set_condition(
        &mut st.conditions,
        cond::AVAILABLE,
        v.status,
        v.reason,
        &v.message,
    );
    st
}

/// Where an external add-on runs on its cluster (and where its spoke Lease is): the
/// ManagedClusterAddOn's install namespace, else OCM's default.
pub fn install_namespace(mca: &ManagedClusterAddOn) -> String {
    mca.spec
        .as_ref()
        .map(|s| s.install_namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| addon::DEFAULT_INSTALL_NAMESPACE.to_string())
}

/// `Available` from the two leases: a fresh one of either kind wins; then the NATS lease's
/// verdict if the add-on agent ever renewed one, then the spoke's, then "not found".
fn lease_verdict(input: &ExternalInput<'_>, name: &str) -> health::Verdict {
    let nats = input
        .lease
        .map(|_| health::lease(input.lease, input.now, input.grace, name));
    let spoke = input
        .spoke
        .and_then(|h| health::lease_reported(&h.status, &h.message));
    let fresh = |v: &health::Verdict| v.status == status::TRUE;
    match (nats, spoke) {
        (Some(n), _) if fresh(&n) => n,
        (_, Some(s)) if fresh(&s) => s,
        (Some(n), _) => n,
        (None, Some(s)) => s,
        (None, None) => health::lease(None, input.now, input.grace, name),
    }
}

//! Add-ons that are not AddOnTemplates (`flotilla_api::addon::manager::kind_of`): an add-on
//! "installed and managed by someone else" (OCM's helloworld shape), whose own manager deploys
//! its agent. The hub renders and applies nothing for them; it creates and removes their
//! ManagedClusterAddOns as the install strategy says (unless their lifecycle is `self`) and
//! reports `Available` from the add-on agent's lease — Flotilla's NATS lease renewals
//! (`flotilla.addon.<addon>.<cluster>.lease`), with OCM's grace and reasons. `ManifestApplied`,
//! `Configured` and `Progressing` are not set: the hub has no work and no rollout to judge
//! them by.
//!
//! Not built yet: the spoke's `coordination.k8s.io/v1 Lease` named after the add-on in its
//! install namespace, which OCM's registration agent watches; an add-on agent that does not
//! speak NATS stays `Unknown` (`ManagedClusterAddOnLeaseNotFound`).

use super::{cluster_unknown, key_of};
use flotilla_api::addon::{self, conditions as cond, health};
use flotilla_api::meta;
use flotilla_api::v1::{
    ClusterManagementAddOn, ConfigGroupResource, HealthCheck, ManagedCluster, ManagedClusterAddOn,
    ManagedClusterAddOnStatus,
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
    /// The add-on agent's last lease renewal.
    pub lease: Option<SystemTime>,
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
    st.namespace = input
        .mca
        .spec
        .as_ref()
        .map(|s| s.install_namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| addon::DEFAULT_INSTALL_NAMESPACE.to_string());
    st.registrations.clear();
    st.config_references.clear();
    st.health_check = Some(HealthCheck {
        mode: health::ocm_mode(&health::Mode::Lease).to_string(),
    });
    st.conditions.retain(|c| c.r#type == cond::AVAILABLE);
    let v = match cluster_unknown(input.cluster) {
        Some((reason, message)) => health::cluster_unknown(&reason, &message),
        None => health::lease(input.lease, input.now, input.grace, &name),
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

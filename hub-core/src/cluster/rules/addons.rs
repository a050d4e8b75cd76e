//! External add-ons on a cluster ("installed and managed by someone else", not AddOnTemplates):
//! which spoke Leases the agent is told to watch, and what it reports of them.
//!
//! The add-on controllers say, one add-on at a time, which of them are installed on a cluster
//! ([`set_external_addon`]); the list is kept in the cluster's hub state and sent in full in every
//! Accepted registration answer ([`external_addons_for_agent`]). The agent reads each add-on's
//! `coordination.k8s.io/v1` Lease on the spoke and reports its health in the cluster status
//! report; the hub keeps only entries for add-ons it asked about ([`apply_addon_health`]), so a
//! spoke cannot invent health for an add-on it was not told of, and it tells an agent whose
//! report names another list again.

use flotilla_api::addon::health::reasons;
use flotilla_api::meta::status;
use flotilla_api::names;
use flotilla_api::v1::{AddOnHealth, ExternalAddOn, ManagedCluster};

/// At most this many add-on health entries in one report.
pub const MAX_ADDON_HEALTH: usize = 256;
/// At most this many bytes in one entry's message.
pub const MAX_ADDON_HEALTH_MESSAGE: usize = 1024;

/// What is wrong with the add-on health an agent reports; every message names the entry and
/// the field (`addonHealth[1].reason`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthError {
    /// More entries than [`MAX_ADDON_HEALTH`].
    #[error("addonHealth: {0} entries, at most {MAX_ADDON_HEALTH} allowed")]
    TooMany(usize),
    /// An add-on or namespace name that is not a DNS-1123 label.
    #[error(transparent)]
    Name(#[from] names::NameError),
    /// A status other than True, False or Unknown.
    #[error("addonHealth[{index}].status: {status:?} is not True, False or Unknown")]
    Status {
        /// The entry.
        index: usize,
        /// The status reported.
        status: String,
    },
    /// A reason that is not OCM's for the status.
    #[error("addonHealth[{index}].reason: {reason:?} with status {status}; expected {expected}")]
    Reason {
        /// The entry.
        index: usize,
        /// The reason reported.
        reason: String,
        /// The status reported.
        status: String,
        /// OCM's reason for that status.
        expected: &'static str,
    },
    /// A message longer than [`MAX_ADDON_HEALTH_MESSAGE`].
    #[error(
        "addonHealth[{index}].message: {bytes} bytes, at most {MAX_ADDON_HEALTH_MESSAGE} allowed"
    )]
    MessageTooLong {
        /// The entry.
        index: usize,
        /// The message's length.
        bytes: usize,
    },
    /// An add-on reported in two entries.
    #[error("addonHealth[{index}].addon: {addon:?} reported twice")]
    Twice {
        /// The second entry.
        index: usize,
        /// The add-on.
        addon: String,
    },
}

/// Validates the add-on health an agent reports: DNS-1123 names, OCM's lease statuses and
/// reasons, bounded sizes, one entry per add-on. The error ([`HealthError`]) names the entry and
/// the field; it is a [`RuleError`](super::RuleError) as the status report's other checks are.
pub fn validate_addon_health(list: &[AddOnHealth]) -> Result<(), super::RuleError> {
    Ok(check_addon_health(list)?)
}

fn check_addon_health(list: &[AddOnHealth]) -> Result<(), HealthError> {
    if list.len() > MAX_ADDON_HEALTH {
        return Err(HealthError::TooMany(list.len()));
    }
    for (i, h) in list.iter().enumerate() {
        names::validate_dns1123_label(&format!("addonHealth[{i}].addon"), &h.addon)?;
        names::validate_dns1123_label(
            &format!("addonHealth[{i}].installNamespace"),
            &h.install_namespace,
        )?;
        let expected = match h.status.as_str() {
            status::TRUE => reasons::LEASE_UPDATED,
            status::FALSE => reasons::LEASE_UPDATE_STOPPED,
            status::UNKNOWN => reasons::LEASE_NOT_FOUND,
            other => {
                return Err(HealthError::Status {
                    index: i,
                    status: other.into(),
                });
            }
        };
        if h.reason != expected {
            return Err(HealthError::Reason {
                index: i,
                reason: h.reason.clone(),
                status: h.status.clone(),
                expected,
            });
        }
        if h.message.len() > MAX_ADDON_HEALTH_MESSAGE {
            return Err(HealthError::MessageTooLong {
                index: i,
                bytes: h.message.len(),
            });
        }
        if list[..i].iter().any(|o| o.addon == h.addon) {
            return Err(HealthError::Twice {
                index: i,
                addon: h.addon.clone(),
            });
        }
    }
    Ok(())
}

/// Records that `addon` is installed on the cluster by someone else with its Lease in
/// `install_namespace` (`None`: it is not, or no longer, such an add-on here; its reported
/// health goes too). Returns whether the list changed, i.e. whether the agent must be told.
pub fn set_external_addon(
    c: &mut ManagedCluster,
    addon: &str,
    install_namespace: Option<&str>,
) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    let at = hub.external_addons.iter().position(|a| a.name == addon);
    match (at, install_namespace) {
        (Some(i), Some(ns)) if hub.external_addons[i].install_namespace == ns => false,
        (Some(i), Some(ns)) => {
            hub.external_addons[i].install_namespace = ns.to_string();
            hub.addon_health.retain(|h| h.addon != addon);
            true
        }
        (None, Some(ns)) => {
            hub.external_addons.push(ExternalAddOn {
                name: addon.to_string(),
                install_namespace: ns.to_string(),
            });
            hub.external_addons.sort_by(|a, b| a.name.cmp(&b.name));
            true
        }
        (Some(i), None) => {
            hub.external_addons.remove(i);
            hub.addon_health.retain(|h| h.addon != addon);
            true
        }
        (None, None) => false,
    }
}

/// The external add-ons the agent is told to watch (sorted by name).
pub fn external_addons_for_agent(c: &ManagedCluster) -> Vec<ExternalAddOn> {
    c.hub
        .as_ref()
        .map(|h| h.external_addons.clone())
        .unwrap_or_default()
}

/// Takes the agent's report of its external add-ons' health: keeps the entries for add-ons
/// the hub asked about (in the namespace it named), drops the rest. Returns whether the agent
/// watches something else than the hub's list (it missed an update and must be told again).
pub fn apply_addon_health(c: &mut ManagedCluster, reported: &[AddOnHealth]) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    let asked = |h: &AddOnHealth| {
        hub.external_addons
            .iter()
            .any(|a| a.name == h.addon && a.install_namespace == h.install_namespace)
    };
    let kept: Vec<AddOnHealth> = reported.iter().filter(|h| asked(h)).cloned().collect();
    let behind = kept.len() != reported.len() || kept.len() != hub.external_addons.len();
    let mut kept = kept;
    kept.sort_by(|a, b| a.addon.cmp(&b.addon));
    hub.addon_health = kept;
    behind
}

/// What the agent last reported of `addon`'s spoke Lease on this cluster.
pub fn addon_health<'a>(c: &'a ManagedCluster, addon: &str) -> Option<&'a AddOnHealth> {
    c.hub
        .as_ref()?
        .addon_health
        .iter()
        .find(|h| h.addon == addon)
}

#[cfg(test)]
mod tests;

//! The spoke Leases of add-ons installed by someone else.
//!
//! An add-on whose own manager deploys its agent (OCM's helloworld shape, not an AddOnTemplate)
//! proves it runs by renewing a `coordination.k8s.io/v1` Lease named after the add-on in its
//! install namespace on the spoke. OCM's registration agent reads it and sets the
//! ManagedClusterAddOn's `Available`; Flotilla's agent does the same for the add-ons the hub
//! names in its registration answers ([`crate::store::State::external_addons`]): on every
//! status tick it reads each Lease and judges it on the spoke's own clock (no skew between
//! spoke and hub counts), with OCM's grace (5 × 60 s) and reasons, and the verdicts travel in
//! the cluster status report. The report is sent only when it changed, so a Lease renewed every
//! few seconds costs the hub nothing until its add-on stops or starts.

use crate::backend::Backend;
use crate::store::WatchedAddOn;
use flotilla_api::addon::health;
use flotilla_api::meta;
use flotilla_api::v1::AddOnHealth;
use flotilla_api::work::ManifestId;
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// How long after its last renewal a Lease keeps its add-on available (OCM: five lease
/// durations of 60 s).
pub const GRACE: Duration = health::DEFAULT_LEASE_GRACE;
/// Longest message sent for one add-on (the hub refuses longer ones).
pub const MAX_MESSAGE: usize = 1024;

/// The identity of `addon`'s Lease.
pub fn lease_id(addon: &WatchedAddOn) -> ManifestId {
    ManifestId {
        group: "coordination.k8s.io".into(),
        version: "v1".into(),
        kind: "Lease".into(),
        namespace: addon.install_namespace.clone(),
        name: addon.name.clone(),
    }
}

/// Reads and judges the Lease of every watched add-on.
pub async fn judge_all(
    backend: &dyn Backend,
    watched: &[WatchedAddOn],
    now: SystemTime,
) -> Vec<AddOnHealth> {
    let mut out = Vec::with_capacity(watched.len());
    for addon in watched {
        let lease = backend
            .get(&lease_id(addon))
            .await
            .map_err(|e| e.to_string());
        out.push(judge(addon, lease, now));
    }
    out
}

/// The health of `addon` from its Lease as read (`Ok(None)`: there is none), at `now` on the
/// spoke's clock.
pub fn judge(
    addon: &WatchedAddOn,
    lease: Result<Option<Value>, String>,
    now: SystemTime,
) -> AddOnHealth {
    let verdict = match &lease {
        Ok(Some(l)) => match renewed(l) {
            Some(t) => health::lease(Some(t), now, GRACE, &addon.name),
            None => stopped(format!(
                "{} add-on is not available: its lease has no spec.renewTime.",
                addon.name
            )),
        },
        Ok(None) => health::lease(None, now, GRACE, &addon.name),
        Err(e) => unknown(format!(
            "The status of {} add-on is unknown: reading its lease {}/{} failed: {e}",
            addon.name, addon.install_namespace, addon.name
        )),
    };
    AddOnHealth {
        addon: addon.name.clone(),
        install_namespace: addon.install_namespace.clone(),
        status: verdict.status.to_string(),
        reason: verdict.reason.to_string(),
        message: truncate(verdict.message, MAX_MESSAGE),
    }
}

/// The Lease's `spec.renewTime` (a MicroTime: RFC 3339 with fractional seconds).
fn renewed(lease: &Value) -> Option<SystemTime> {
    let ts = meta::parse_rfc3339(lease["spec"]["renewTime"].as_str()?)?;
    Some(meta::system_time(&ts))
}

fn stopped(message: String) -> health::Verdict {
    let stale = SystemTime::UNIX_EPOCH;
    let mut v = health::lease(Some(stale), SystemTime::now(), GRACE, "");
    v.message = message;
    v
}

fn unknown(message: String) -> health::Verdict {
    let mut v = health::lease(None, SystemTime::now(), GRACE, "");
    v.message = message;
    v
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests;

//! What one reconcile of a policy does for its clusters, decided from plain values (pure): the
//! clusters decided now, their records, each cluster's replicated spec hash (one of two, by
//! the override, unless hub templates make each cluster's its own) and the re-send back-off.
//! The executor in [`super`] publishes, writes the records and forgets.

use crate::backoff::Backoff;
use flotilla_api::v1::PolicyClusterRecord;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// First re-send of a spec a cluster has not confirmed; doubles up to [`RESEND_MAX`].
pub const RESEND_AFTER: Duration = Duration::from_secs(30);
/// The longest wait between re-sends (16 × [`RESEND_AFTER`]).
pub const RESEND_MAX: Duration = Duration::from_secs(30 * 16);

/// The re-send back-off of a policy's clusters.
pub fn resend_backoff() -> Backoff<String> {
    Backoff::new(RESEND_AFTER, RESEND_MAX)
}

/// A cluster to send the spec to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    /// The cluster.
    pub cluster: String,
    /// A binding overrides the remediation to enforce there.
    pub enforce: bool,
    /// The generation the copy carries.
    pub generation: i64,
}

/// What a reconcile does.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Clusters whose replicated spec changed (or that never had one): delivered at the next
    /// generation, their record written with `spec_hash`, the back-off started over.
    pub deliver: Vec<(Send, String)>,
    /// Clusters that have not confirmed the generation delivered and whose wait is over: sent
    /// the same generation again.
    pub resend: Vec<Send>,
    /// Of `resend`, the clusters whose earlier sends this hub does not know (it restarted):
    /// they wait the longest before the next.
    pub resumed: Vec<String>,
    /// Clusters that confirmed the generation delivered: their back-off goes.
    pub confirmed: Vec<String>,
    /// Clusters no longer decided that exist: their copy is deleted, and asked again after
    /// [`RESEND_AFTER`] until they confirm.
    pub delete: Vec<String>,
    /// Clusters no longer decided that are gone: their record is forgotten.
    pub forget: Vec<String>,
}

/// The hash of each cluster's copy when it depends only on the override (a policy without hub
/// templates): `hashes` without and with it.
pub fn by_override(hashes: [String; 2]) -> impl Fn(&str, bool) -> String {
    move |_, enforce| hashes[usize::from(enforce)].clone()
}

/// Decides the reconcile. `targets`: the clusters decided now and whether a binding enforces
/// there; `hash_of`: the hash of a cluster's replicated spec (given the override); `exists`:
/// whether a cluster is in the inventory.
pub fn plan(
    targets: &BTreeMap<String, bool>,
    records: &BTreeMap<String, PolicyClusterRecord>,
    hash_of: impl Fn(&str, bool) -> String,
    resend: &Backoff<String>,
    exists: impl Fn(&str) -> bool,
    now: Instant,
) -> Plan {
    let mut plan = Plan::default();
    for (cluster, &enforce) in targets {
        let record = records.get(cluster);
        let generation = record.map_or(0, |r| r.generation);
        let hash = hash_of(cluster, enforce);
        if record.is_none_or(|r| r.spec_hash != hash) {
            let send = Send {
                cluster: cluster.clone(),
                enforce,
                generation: generation + 1,
            };
            plan.deliver.push((send, hash));
            continue;
        }
        // Delivered before: sent again while the cluster has not reported this generation.
        let confirmed = record
            .and_then(|r| r.report.as_ref())
            .is_some_and(|r| r.observed_generation == generation);
        if confirmed {
            plan.confirmed.push(cluster.clone());
            continue;
        }
        let at = resend.at(cluster);
        if at.is_none_or(|at| at <= now) {
            if at.is_none() {
                plan.resumed.push(cluster.clone());
            }
            plan.resend.push(Send {
                cluster: cluster.clone(),
                enforce,
                generation,
            });
        }
    }
    for cluster in records.keys().filter(|c| !targets.contains_key(*c)) {
        if exists(cluster) {
            plan.delete.push(cluster.clone());
        } else {
            plan.forget.push(cluster.clone());
        }
    }
    plan
}

#[cfg(test)]
mod tests;

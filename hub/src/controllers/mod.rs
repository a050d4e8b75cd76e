//! The hub's controller families, in start order: the one list from which the controllers'
//! gRPC services, forwarding, report sinks, start, stop and the subscriptions waited for all
//! follow ([`crate::controller`]). Adding a family is a line here and a folder of its own.
//!
//! They run on the one hub holding the controllers' unit, start when it takes the unit
//! (loading their state from the store) and stop when it gives it up or loses it; every write
//! they make is stamped with the unit's epoch and refused once its fence is gone.

use crate::Config;
use crate::controller::Family;
use crate::serviceaccount;
use crate::{addon, clusterset, importpolicy, mirrorpeer, placement, policy, replicaset};

/// Every family, each after the ones whose handles it needs (stopped in reverse).
pub fn families(config: &Config) -> Vec<Box<dyn Family>> {
    vec![
        Box::new(clusterset::family::Sets::default()),
        Box::new(placement::family::PlacementFamily::new(
            config.placement.clone(),
        )),
        Box::new(replicaset::family::ReplicaSetFamily::default()),
        Box::new(addon::family::AddOnFamily::new(config.addons.clone())),
        Box::new(policy::family::PolicyFamily::default()),
        Box::new(serviceaccount::family::AccountFamily::new(
            config.service_accounts.clone(),
        )),
        Box::new(importpolicy::family::ImportFamily::new(
            config.import_policies.clone(),
        )),
        Box::new(mirrorpeer::family::PeerFamily::new(
            config.mirror_peers.clone(),
        )),
    ]
}

#[cfg(test)]
mod tests;

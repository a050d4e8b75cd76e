//! Which subjects each cluster's agent listens on ([`flotilla_bus::subjects::Wire`]): the rule
//! [`of`] (pure) reads a cluster's stored record — its agent's last trusted registration said
//! whether it listens under `flotilla.to.<cluster>.` — and [`ClusterInventory::wire`] asks the
//! inventory, which holds every cluster's record (loaded at start, replaced after each persisted
//! change), so every hub → agent publisher asks one place. A cluster the hub has no record of,
//! or whose record predates the field, is on the previous wire.

use crate::inventory::ClusterInventory;
use flotilla_api::v1::ManagedCluster;
pub use flotilla_bus::subjects::Wire;

/// The wire of a cluster from its stored record (none: the previous wire).
pub fn of(cluster: Option<&ManagedCluster>) -> Wire {
    Wire::announced(
        cluster
            .and_then(|c| c.hub.as_ref())
            .is_some_and(|h| h.agent_listens_under_prefix),
    )
}

impl ClusterInventory {
    /// The wire `cluster`'s agent listens on, from its record in the inventory.
    pub fn wire(&self, cluster: &str) -> Wire {
        of(self.get(cluster).as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::HubClusterState;

    #[test]
    fn a_cluster_is_on_the_prefix_wire_only_once_its_record_says_so() {
        assert_eq!(of(None), Wire::Previous);
        let mut c = ManagedCluster::default();
        assert_eq!(of(Some(&c)), Wire::Previous);
        c.hub = Some(HubClusterState::default());
        assert_eq!(of(Some(&c)), Wire::Previous);
        c.hub.as_mut().unwrap().agent_listens_under_prefix = true;
        assert_eq!(of(Some(&c)), Wire::Prefix);
    }
}

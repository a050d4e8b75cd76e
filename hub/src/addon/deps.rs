//! What the add-on handle and actors work with (pure data): their settings and the hub's other
//! parts they reach — cluster actors, inventories, placements, secure mode.

use crate::cluster::Clusters;
use crate::inventory::{ClusterInventory, WorkInventory};
use crate::placement::Placements;
use std::time::Duration;

/// Add-on settings.
#[derive(Debug, Clone)]
pub struct AddOnConfig {
    /// How long an add-on agent's lease stays fresh (OCM: 5 × 60 s).
    pub lease_grace: Duration,
    /// The value of the `HUB_URL` template variable (the NATS URL agents use); empty leaves it
    /// undefined.
    pub hub_url: String,
}

impl Default for AddOnConfig {
    fn default() -> Self {
        Self {
            lease_grace: flotilla_api::addon::health::DEFAULT_LEASE_GRACE,
            hub_url: String::new(),
        }
    }
}

/// What the add-on actors work with.
#[derive(Clone)]
pub struct Deps {
    /// Cluster actors (they own works).
    pub clusters: Clusters,
    /// Every cluster (Available, existence).
    pub inventory: ClusterInventory,
    /// Every work.
    pub works: WorkInventory,
    /// Placements and their decisions.
    pub placements: Placements,
    /// Secure mode: issues and revokes add-on agents' credentials.
    pub security: Option<crate::security::Security>,
    /// Settings.
    pub config: AddOnConfig,
}

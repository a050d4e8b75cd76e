//! The local cluster an agent manages. [`sim::SimBackend`] simulates one in memory for the
//! simulator and tests; a Kubernetes backend (kube-rs) implements the same trait for real spokes.

pub mod sim;

use std::collections::HashMap;

/// What the agent reports about its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterInfo {
    /// Capacity (`cpu`, `memory`, `pods`, …) in Kubernetes quantities.
    pub capacity: HashMap<String, String>,
    /// Allocatable resources.
    pub allocatable: HashMap<String, String>,
    /// Kubernetes version (`v1.30.2`).
    pub kubernetes_version: String,
    /// Value of the `platform.open-cluster-management.io` claim.
    pub platform: String,
    /// Value of the `product.open-cluster-management.io` claim.
    pub product: String,
    /// Whether the cluster's control plane is healthy.
    pub healthy: bool,
    /// Why it is unhealthy.
    pub health_message: String,
}

/// A cluster the agent can observe (and, later, apply work to).
pub trait Backend: Send + Sync + 'static {
    /// The cluster's current facts.
    fn info(&self) -> ClusterInfo;
}

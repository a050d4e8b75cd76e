//! Conversion between Flotilla's protobuf types and the YAML/JSON shapes OCM users read and
//! write (`cluster.open-cluster-management.io/v1 ManagedCluster`, `v1beta2 ManagedClusterSet`,
//! …), so that OCM YAML applies unchanged and `-o yaml` prints what `kubectl get -o yaml` would.
//!
//! - [`addon`]: ClusterManagementAddOn, ManagedClusterAddOn, AddOnTemplate,
//!   AddOnDeploymentConfig.
//! - [`meta`]: object metadata, conditions, label selectors.
//! - [`cluster`]: the ManagedCluster shape.
//! - [`clusterset`]: ManagedClusterSet and ManagedClusterSetBinding.
//! - [`work`]: the ManifestWork shape.
//! - [`placement`]: Placement, PlacementDecision, AddOnPlacementScore.
//! - [`replicaset`]: the ManifestWorkReplicaSet shape.
//! - [`policy`]: Policy, PlacementBinding, PolicySet and the legacy PlacementRule.
//! - [`serviceaccount`]: ManagedServiceAccount (`authentication.open-cluster-management.io`).
//! - [`gitrepo`]: GitRepo (`apps.flotilla.io/v1alpha1`), a Git repository followed into
//!   replica sets (the shape; its rules are `flotilla-gitops`'s).
//! - [`document`]: apply documents (multi-document YAML) parsed into typed objects.

pub mod addon;
pub mod cluster;
pub mod clusterset;
pub mod document;
pub mod gitrepo;
pub mod hubdata;
pub mod importpolicy;
pub mod meta;
pub mod mirrorpeer;
pub mod placement;
pub mod policy;
pub mod replicaset;
pub mod serviceaccount;
pub mod work;

pub use addon::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn,
};
pub use cluster::*;
pub use clusterset::*;
pub use document::{DocError, Document, parse_documents};
pub use meta::*;
pub use placement::{AddOnPlacementScore, Placement, PlacementDecision};
pub use replicaset::ManifestWorkReplicaSet;
pub use serviceaccount::ManagedServiceAccount;
pub use work::*;

use serde::Serialize;

/// API group/version of clusters.
pub const CLUSTER_V1: &str = "cluster.open-cluster-management.io/v1";
/// API group/version of sets and bindings.
pub const CLUSTER_V1BETA2: &str = "cluster.open-cluster-management.io/v1beta2";

/// A `kind: List` like kubectl prints for several objects.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    /// `v1`.
    pub api_version: &'static str,
    /// `List`.
    pub kind: &'static str,
    /// The objects.
    pub items: Vec<T>,
}

impl<T> List<T> {
    /// Wraps items in a List.
    pub fn new(items: Vec<T>) -> Self {
        Self {
            api_version: "v1",
            kind: "List",
            items,
        }
    }
}

#[cfg(test)]
mod tests;

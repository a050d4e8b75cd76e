//! What the CLI knows about each resource kind: its table columns, one row per object, and its
//! OCM shape for `-o json|yaml`, behind one trait so every verb renders every kind the same way.
//!
//! A new kind is one module here implementing [`Kind`] for the hub's type, plus its rows in the
//! subcommand tables of the verbs that take it (`cmd::get::GetWhat`, `cmd::delete::DeleteWhat`).
//!
//! - [`cluster`]: ManagedClusters (`get clusters` in clusteradm's columns, `describe cluster`).
//! - [`clusterset`]: ManagedClusterSets with the namespaces bound to them.
//! - [`binding`]: ManagedClusterSetBindings (which namespace may place onto which set).
//! - [`work`]: ManifestWorks (`describe work` with per-manifest conditions and feedback).
//! - [`placement`]: Placements and `describe placement` (the scheduler's per-cluster filter
//!   verdicts and scores).
//! - [`policy`]: governance — Policies, PlacementBindings, PolicySets, PlacementRules, and
//!   `describe policy`.
//! - [`importpolicy`]: ClusterImportPolicies (source, imported and adopted counts).
//! - [`mirrorpeer`]: MirrorPeers (peers, ODF's phase, applied exchanges).
//! - [`decision`]: PlacementDecisions (the pages of clusters a placement selected).
//! - [`replicaset`]: ManifestWorkReplicaSets (placements, works, rollout state).
//! - [`score`]: AddOnPlacementScores (a provider's scores for one cluster).
//! - [`serviceaccount`]: ManagedServiceAccounts (per cluster, with their token's state).
//! - [`addon`]: the add-on kinds: ClusterManagementAddOns (install strategy and the placements'
//!   rollout progress), ManagedClusterAddOns (per cluster, in kubectl's columns), AddOnTemplates
//!   and AddOnDeploymentConfigs. `cmd::addon` renders an add-on's rollout.

use flotilla_api::v1::ObjectMeta;
use serde::Serialize;

pub mod addon;
pub mod binding;
pub mod cluster;
pub mod clusterset;
pub mod decision;
pub mod importpolicy;
pub mod mirrorpeer;
pub mod placement;
pub mod policy;
pub mod replicaset;
pub mod score;
pub mod serviceaccount;
pub mod work;

#[cfg(test)]
mod tests;

/// A resource kind as the CLI shows it, implemented by the hub's (protobuf) type.
pub trait Kind {
    /// The OCM shape printed by `-o json` and `-o yaml`.
    type Ocm: Serialize;
    /// Table header, in the order [`Kind::row`] fills it.
    const COLUMNS: &'static [&'static str];

    /// The object's metadata, when it has any.
    fn metadata(&self) -> Option<&ObjectMeta>;
    /// One table row.
    fn row(&self) -> Vec<String>;
    /// Extra columns of `-o wide`, after [`Kind::COLUMNS`].
    const WIDE_COLUMNS: &'static [&'static str] = &[];
    /// The extra cells of `-o wide`, in the order of [`Kind::WIDE_COLUMNS`].
    fn wide_row(&self) -> Vec<String> {
        Vec::new()
    }
    /// The OCM shape.
    fn to_ocm(&self) -> Self::Ocm;

    /// The object's name ("" without metadata).
    fn name(&self) -> String {
        self.metadata().map(|m| m.name.clone()).unwrap_or_default()
    }

    /// The object's namespace ("" for cluster-scoped kinds).
    fn namespace(&self) -> String {
        self.metadata()
            .map(|m| m.namespace.clone())
            .unwrap_or_default()
    }
}

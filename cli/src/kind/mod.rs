//! What the CLI knows about each resource kind: its table columns, one row per object, its
//! OCM shape for `-o json|yaml`, and how `get` fetches it from the hub ([`Kind::fetch`] for a
//! [`Query`]), behind one trait so every verb renders every kind the same way and `get` is one
//! generic path.
//!
//! A new kind is one module here implementing [`Kind`] for the hub's type (and [`Delete`] when
//! `delete` removes it), plus its rows in the subcommand tables of the verbs that take it
//! (`cmd::get::GetWhat`, `cmd::delete::DeleteWhat`).
//!
//! - [`cluster`]: ManagedClusters (`get clusters` in clusteradm's columns, `describe cluster`).
//! - [`clusterset`]: ManagedClusterSets with the namespaces bound to them.
//! - [`binding`]: ManagedClusterSetBindings (which namespace may place onto which set).
//! - [`work`]: ManifestWorks (`describe work` with per-manifest conditions and feedback).
//! - [`placement`]: Placements and `describe placement` (the scheduler's per-cluster filter
//!   verdicts and scores).
//! - [`policy`]: governance — Policies, PlacementBindings, PolicySets, PlacementRules, and
//!   `describe policy`.
//! - [`hubdata`]: the hub's ConfigMaps and Secrets that hub templates read (a Secret without
//!   its values).
//! - [`importpolicy`]: ClusterImportPolicies (source, imported and adopted counts).
//! - [`gitrepo`]: GitRepos (repository, commit delivered, bundles ready, fetch and render
//!   state; `describe gitrepo`).
//! - [`mirrorpeer`]: MirrorPeers (peers, ODF's phase, applied exchanges).
//! - [`orphan`]: orphans of a recovery window (works spokes hold that a restored store lacks).
//! - [`decision`]: PlacementDecisions (the pages of clusters a placement selected).
//! - [`replicaset`]: ManifestWorkReplicaSets (placements, works, rollout state).
//! - [`score`]: AddOnPlacementScores (a provider's scores for one cluster).
//! - [`serviceaccount`]: ManagedServiceAccounts (per cluster, with their token's state).
//! - [`addon`]: the add-on kinds: ClusterManagementAddOns (install strategy and the placements'
//!   rollout progress), ManagedClusterAddOns (per cluster, in kubectl's columns), AddOnTemplates
//!   and AddOnDeploymentConfigs. `cmd::addon` renders an add-on's rollout.

use crate::hub::{Deleted, Hub};
use anyhow::{Result, bail};
use flotilla_api::v1::ObjectMeta;
use serde::Serialize;
use std::future::Future;

pub mod addon;
pub mod binding;
pub mod cluster;
pub mod clusterset;
pub mod decision;
pub mod gitrepo;
pub mod hubdata;
pub mod importpolicy;
pub mod mirrorpeer;
pub mod orphan;
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

    /// Whether a table of every namespace (no `--namespace`) gets a NAMESPACE column.
    const ACROSS_NAMESPACES: bool = false;

    /// The objects `get` shows for `query`, as the hub has them.
    fn fetch(hub: &Hub, query: &Query) -> impl Future<Output = Result<Vec<Self>>>
    where
        Self: Sized;

    /// What an empty table prints on stderr instead of a bare header (`None`: the header);
    /// `endpoint` is the hub's.
    fn none(_query: &Query, _endpoint: &str) -> Option<String> {
        None
    }

    /// Whether `query` names one object (printed as that object, not as a list).
    fn single(query: &Query) -> bool {
        query.names.len() == 1
    }
}

/// A kind `delete` removes, implemented by the hub's type: its service's delete call, retried
/// as [`Hub::delete`] retries, and the line saying what went.
pub trait Delete {
    /// Deletes the object `target` names.
    fn delete(hub: &Hub, target: Target) -> impl Future<Output = Result<Gone>>;
}

/// The object `delete` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// Its name.
    pub name: String,
    /// Its namespace: the cluster's name for per-cluster kinds, `""` for cluster-scoped ones.
    pub namespace: String,
}

/// What a delete came to.
#[derive(Debug)]
pub struct Gone {
    /// What went (`managedcluster/c1 deleted`).
    pub line: String,
    /// Deleted by this attempt, or found gone by a retry.
    pub deleted: Deleted<()>,
}

impl Gone {
    /// The hub's answer `deleted` to a delete, said as `line`.
    pub fn new<T>(deleted: Deleted<T>, line: String) -> Self {
        Self {
            line,
            deleted: deleted.map(drop),
        }
    }
}

/// What `get` asks for, from its arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Only these objects (every one when empty); a placement's name for its decisions, an
    /// add-on's for ManagedClusterAddOns.
    pub names: Vec<String>,
    /// Only this namespace (every namespace when `None`): a cluster's for per-cluster kinds.
    pub namespace: Option<String>,
    /// Label selector (`""`: none).
    pub selector: String,
    /// Only registrations waiting for an admin (`get clusters --pending`).
    pub pending: bool,
    /// Only objects of these clusters (ManagedClusterAddOns; every cluster when empty).
    pub clusters: Vec<String>,
}

/// Only the objects named (all when `names` is empty); naming one that is not there fails.
pub fn named<K: Kind>(mut items: Vec<K>, names: &[String], kind: &str) -> Result<Vec<K>> {
    if names.is_empty() {
        return Ok(items);
    }
    items.retain(|i| names.contains(&i.name()));
    for n in names {
        if !items.iter().any(|i| &i.name() == n) {
            bail!("{kind} {n} not found");
        }
    }
    Ok(items)
}

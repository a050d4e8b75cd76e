//! What changed since the add-on actor's last round, by installation. A round gathers again only
//! the installations whose inputs changed and keeps the others' entries as they were
//! (`actor/mod.rs`): at 10,000 clusters, rebuilding every entry on every round was most of the
//! hub's CPU during an upgrade. Pure: the actor hands it the changes its feeds announce.
//!
//! An installation's entry is gathered from these inputs, each with what makes it stale:
//! - its ManagedClusterAddOn: compared by identity every round (its view publishes a new `Arc`
//!   on every change, its status writes included);
//! - its placement and decision group: compared every round with the placements' decisions;
//! - its cluster, existence and what its status reads of it (Available, with the reason and
//!   message when Unknown; the add-on's spoke lease health): [`Dirty::cluster_changed`];
//! - its agent works, found by name (`addon-<name>-deploy-<i>`): [`Dirty::work`];
//! - the configs it resolved, found or not (its AddOnTemplate, its AddOnDeploymentConfig, the
//!   defaults among them): [`Dirty::template`], [`Dirty::config`];
//! - the ClusterManagementAddOn's spec (defaults, the placements' configs, what every status
//!   says of the add-on): [`Dirty::everything`];
//! - what the round itself did to it (a render that failed, works applied): the actor marks
//!   every installation it started ([`Dirty::cluster`]);
//! - its agent's lease: renewals are not announced (only the first after none or a stale one
//!   is, [`Dirty::cluster`]), so a lease-checked add-on's lease is read again every round, as
//!   time makes it stale anyway.
//!
//! Time enters only through the lease and the rollout plan, which every round computes anew.
//! A feed that lagged (notifications lost) makes everything stale.

use crate::inventory::ChangeKind;
use crate::keys::ObjectRef;
use flotilla_api::addon;
use flotilla_api::v1::{AddOnConfig, ManagedCluster, ObjectMeta};
use std::collections::HashSet;

/// A config an installation's entry read (found or not), by its key in the add-on store's views.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Read {
    /// An AddOnTemplate, by name.
    Template(String),
    /// An AddOnDeploymentConfig, by `<namespace>/<name>`.
    Config(String),
}

impl Read {
    /// What resolving `c` reads; `None` for a kind the hub never resolves (it stays not found).
    pub fn of(c: &AddOnConfig) -> Option<Self> {
        match (c.group.as_str(), c.resource.as_str()) {
            (addon::GROUP, addon::TEMPLATES) => Some(Self::Template(c.name.clone())),
            (addon::GROUP, addon::DEPLOYMENT_CONFIGS) => Some(Self::Config(
                ObjectRef::new(&c.namespace, &c.name).inventory_key(),
            )),
            _ => None,
        }
    }
}

/// The installations to gather again at the next round.
#[derive(Debug, Default)]
pub(super) struct Dirty {
    /// Every one (a new spec, a lagging feed, the periodic full round).
    everything: bool,
    /// These clusters' installations.
    clusters: HashSet<String>,
    /// The installations that read one of these.
    reads: HashSet<Read>,
}

impl Dirty {
    /// Every installation is stale.
    pub fn everything(&mut self) {
        self.everything = true;
    }

    /// The installation on `cluster` is stale.
    pub fn cluster(&mut self, cluster: &str) {
        if !self.everything && !self.clusters.contains(cluster) {
            self.clusters.insert(cluster.to_string());
        }
    }

    /// A cluster was added, deleted or changed; `availability_changed`: what an installation
    /// reads of it changed ([`cluster_view`]). Whether it made the installation stale.
    pub fn cluster_changed(
        &mut self,
        kind: ChangeKind,
        cluster: &str,
        availability_changed: bool,
    ) -> bool {
        let stale = kind != ChangeKind::Modified || availability_changed;
        if stale {
            self.cluster(cluster);
        }
        stale
    }

    /// A work changed (`key`: `<cluster>/<work>`, `meta`: its metadata): one of add-on
    /// `addon`'s, by its label or its name, makes its cluster's installation stale. Whether it did.
    pub fn work(&mut self, addon: &str, key: &str, meta: Option<&ObjectMeta>) -> bool {
        let Some((cluster, name)) = key.split_once('/') else {
            return false;
        };
        let labelled = meta
            .and_then(|m| m.labels.get(addon::ADDON_NAME_LABEL))
            .is_some_and(|n| n == addon);
        let ours = labelled || addon::work_index(addon, name).is_some();
        if ours {
            self.cluster(cluster);
        }
        ours
    }

    /// The AddOnTemplate `name` changed: the installations that read it are stale.
    pub fn template(&mut self, name: &str) {
        self.reads.insert(Read::Template(name.to_string()));
    }

    /// The AddOnDeploymentConfig `key` (`<namespace>/<name>`) changed: the installations that
    /// read it are stale.
    pub fn config(&mut self, key: &str) {
        self.reads.insert(Read::Config(key.to_string()));
    }

    /// Whether the installation on `cluster`, gathered from `reads`, is stale.
    pub fn touches(&self, cluster: &str, reads: &[Read]) -> bool {
        self.everything
            || self.clusters.contains(cluster)
            || reads.iter().any(|r| self.reads.contains(r))
    }

    /// Whether every installation is stale.
    pub fn is_everything(&self) -> bool {
        self.everything
    }
}

/// What an installation's status reads of its cluster, and what the add-on's external round
/// reacts to: its Available status (with the reason and message when it is Unknown, which the
/// installations then repeat) and the add-on's spoke lease health as its agent reports it.
pub(super) fn cluster_view(c: &ManagedCluster, addon: &str) -> String {
    let available = c
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|x| x.r#type == flotilla_api::meta::COND_AVAILABLE)
        })
        .map(|x| x.status.as_str())
        .unwrap_or_default();
    let unknown = super::rules::cluster_unknown(Some(c))
        .map(|(reason, message)| format!(" ({reason}: {message})"))
        .unwrap_or_default();
    let spoke = crate::cluster::rules::addons::addon_health(c, addon)
        .map(|h| format!("{}/{}", h.status, h.message))
        .unwrap_or_default();
    format!("{available}{unknown} {spoke}")
}

#[cfg(test)]
mod tests;

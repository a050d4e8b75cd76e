//! The add-on kinds' stored objects (I/O: opens and loads their KV buckets): a bucket and an
//! in-memory view per kind, and the agents' lease renewals (memory only).

use super::meta::{name_of, ns_key, with_rev};
use crate::inventory::Inventory;
use crate::store::{Bucket, StoreError};
use dashmap::DashMap;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn,
};
use std::sync::Arc;
use std::time::SystemTime;

/// KV bucket of ClusterManagementAddOns (`<name>`).
pub const BUCKET_ADDONS: &str = "addons";
/// KV bucket of ManagedClusterAddOns (`<cluster>.<name>`).
pub const BUCKET_CLUSTER_ADDONS: &str = "clusteraddons";
/// KV bucket of AddOnTemplates (`<name>`).
pub const BUCKET_TEMPLATES: &str = "addontemplates";
/// KV bucket of AddOnDeploymentConfigs (`<namespace>.<name>`).
pub const BUCKET_CONFIGS: &str = "addonconfigs";

/// The stored objects of every add-on kind, shared by the handle and the actors.
pub struct Store {
    /// ClusterManagementAddOns.
    pub addons: Bucket<ClusterManagementAddOn>,
    /// ManagedClusterAddOns.
    pub cluster_addons: Bucket<ManagedClusterAddOn>,
    /// AddOnTemplates.
    pub templates: Bucket<AddOnTemplate>,
    /// AddOnDeploymentConfigs.
    pub configs: Bucket<AddOnDeploymentConfig>,
    /// ClusterManagementAddOns by name.
    pub addon_views: Inventory<ClusterManagementAddOn>,
    /// ManagedClusterAddOns by `<cluster>/<name>`.
    pub cluster_addon_views: Inventory<ManagedClusterAddOn>,
    /// AddOnTemplates by name.
    pub template_views: Inventory<AddOnTemplate>,
    /// AddOnDeploymentConfigs by `<namespace>/<name>`.
    pub config_views: Inventory<AddOnDeploymentConfig>,
    /// Lease renewals by `<cluster>/<addon>` (memory only: a restarted hub gives every agent a
    /// fresh grace from its start).
    pub leases: DashMap<String, SystemTime>,
    /// When this hub started (the grace of leases not seen since).
    pub started: SystemTime,
}

impl Store {
    /// Opens the buckets and loads every object.
    pub async fn open(
        jetstream: &async_nats::jetstream::Context,
        opts: flotilla_bus::jetstream::StreamOptions,
    ) -> Result<Self, StoreError> {
        let store = Self {
            addons: Bucket::open(jetstream, BUCKET_ADDONS, opts).await?,
            cluster_addons: Bucket::open(jetstream, BUCKET_CLUSTER_ADDONS, opts).await?,
            templates: Bucket::open(jetstream, BUCKET_TEMPLATES, opts).await?,
            configs: Bucket::open(jetstream, BUCKET_CONFIGS, opts).await?,
            addon_views: Inventory::new(1024),
            cluster_addon_views: Inventory::new(8192),
            template_views: Inventory::new(1024),
            config_views: Inventory::new(1024),
            leases: DashMap::new(),
            started: SystemTime::now(),
        };
        for (_, x, rev) in store.templates.load_all().await? {
            let key = name_of(&x.metadata);
            store.template_views.upsert(&key, with_rev(x, rev));
        }
        for (_, x, rev) in store.configs.load_all().await? {
            let key = ns_key(&x.metadata).inventory_key();
            store.config_views.upsert(&key, with_rev(x, rev));
        }
        for (_, x, rev) in store.cluster_addons.load_all().await? {
            let key = ns_key(&x.metadata).inventory_key();
            store.cluster_addon_views.upsert(&key, with_rev(x, rev));
        }
        Ok(store)
    }

    /// The lease renewal of `addon` on `cluster`, if seen since this hub started.
    pub fn lease(&self, cluster: &str, addon: &str) -> Option<SystemTime> {
        self.leases.get(&lease_key(cluster, addon)).map(|t| *t)
    }

    /// Every ManagedClusterAddOn of `addon`.
    pub fn installed(&self, addon: &str) -> Vec<Arc<ManagedClusterAddOn>> {
        self.cluster_addon_views
            .snapshot()
            .into_iter()
            .filter(|m| m.metadata.as_ref().is_some_and(|m| m.name == addon))
            .collect()
    }
}

pub(super) fn lease_key(cluster: &str, addon: &str) -> String {
    format!("{cluster}/{addon}")
}

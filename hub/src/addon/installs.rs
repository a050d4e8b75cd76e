//! ManagedClusterAddOns — an add-on installed on one cluster — through the handle (I/O): apply
//! one once its cluster and add-on exist, read them, remove one (its pre-delete hook first).

use super::error::AddOnError;
use super::handle::AddOns;
use super::meta::{check_version, is_deleted, ns_key, stamp, with_rev};
use crate::keys::ObjectRef;
use flotilla_api::addon::validate;
use flotilla_api::v1::ManagedClusterAddOn;
use std::sync::Arc;

impl AddOns {
    /// Installs (or updates) an add-on on one cluster. The cluster and the add-on must exist.
    pub async fn apply_cluster_addon(
        &self,
        mut mca: ManagedClusterAddOn,
    ) -> Result<ManagedClusterAddOn, AddOnError> {
        let key = ns_key(&mca.metadata);
        let errors = self.check_cluster_addon(&mca);
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let what = format!("ManagedClusterAddOn {key}");
        let stored = self
            .inner
            .store
            .cluster_addons
            .get(&key.store_key())
            .await?;
        check_version(&mca.metadata, stored.as_ref().map(|s| s.1), &what)?;
        if let Some((s, _)) = &stored
            && is_deleted(&s.metadata)
        {
            return Err(AddOnError::Deleting(format!(
                "{what} is being deleted (it waits for its pre-delete hook: see its \
                 HookManifestCompleted condition); apply it again once it is gone"
            )));
        }
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != mca.spec);
        stamp(&mut mca, stored.as_ref().map(|s| &s.0), spec_changed);
        if let Some((s, _)) = stored {
            mca.status = s.status;
            mca.hub = s.hub;
        } else {
            mca.status = None;
            mca.hub = None;
        }
        let rev = self
            .inner
            .store
            .cluster_addons
            .put(&key.store_key(), &mca)
            .await?;
        let mca = with_rev(mca, rev);
        self.inner
            .store
            .cluster_addon_views
            .upsert(&key.inventory_key(), mca.clone());
        Ok(mca)
    }

    /// Every problem of `mca`: its fields, then (when they are well-formed) its cluster and its
    /// add-on, which must exist, and its configs, which the add-on must support.
    fn check_cluster_addon(&self, mca: &ManagedClusterAddOn) -> Vec<String> {
        let key = ns_key(&mca.metadata);
        let mut errors = validate::managed_cluster_addon(mca);
        if errors.is_empty() {
            if self.inner.deps.inventory.get(&key.namespace).is_none() {
                errors.push(format!(
                    "metadata.namespace: no ManagedCluster {:?} (a ManagedClusterAddOn lives in its cluster's namespace)",
                    key.namespace
                ));
            }
            match self.get_addon(&key.name) {
                None => errors.push(format!(
                    "metadata.name: no ClusterManagementAddOn {:?} (apply the add-on first)",
                    key.name
                )),
                Some(cma) if is_deleted(&cma.metadata) => errors.push(format!(
                    "metadata.name: ClusterManagementAddOn {:?} is being deleted",
                    key.name
                )),
                Some(cma) => {
                    let spec = mca.spec.clone().unwrap_or_default();
                    for (i, c) in spec.configs.iter().enumerate() {
                        if !flotilla_api::addon::configs::supported(&cma, &c.group, &c.resource) {
                            errors.push(format!(
                                "spec.configs[{i}]: group/resource {}/{} is not among add-on {}'s supportedConfigs",
                                c.group, c.resource, key.name
                            ));
                        }
                    }
                }
            }
        }
        errors
    }

    /// One installed add-on.
    pub fn get_cluster_addon(&self, cluster: &str, name: &str) -> Option<Arc<ManagedClusterAddOn>> {
        self.inner
            .store
            .cluster_addon_views
            .get(&ObjectRef::new(cluster, name).inventory_key())
    }

    /// Installed add-ons of a cluster (every cluster when empty), of one add-on when `name` is
    /// set.
    pub fn list_cluster_addons(&self, cluster: &str, name: &str) -> Vec<Arc<ManagedClusterAddOn>> {
        let views = &self.inner.store.cluster_addon_views;
        let all = if cluster.is_empty() {
            views.snapshot()
        } else {
            views
                .with_prefix(&ObjectRef::prefix(cluster))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        let mut out: Vec<_> = all
            .into_iter()
            .filter(|m| name.is_empty() || m.metadata.as_ref().is_some_and(|m| m.name == name))
            .collect();
        out.sort_by_key(|m| ns_key(&m.metadata));
        out
    }

    /// Add-on `name` on the clusters `admit` keeps, by cluster: a test per cluster holding any
    /// add-on and a lookup each, not a copy of every installation of every add-on (a team's
    /// `/rollouts` at 10,000 clusters, issue 48 review r4 §7).
    pub fn installed_on(
        &self,
        name: &str,
        admit: impl FnMut(&str) -> bool,
    ) -> Vec<Arc<ManagedClusterAddOn>> {
        let views = &self.inner.store.cluster_addon_views;
        (views.namespaces_where(admit).iter())
            .filter_map(|cluster| views.get(&ObjectRef::new(&**cluster, name).inventory_key()))
            .collect()
    }

    /// Removes an add-on from a cluster (its works go with it). An add-on with a pre-delete
    /// hook runs it first: the ManagedClusterAddOn stays, marked deleted, until it completes
    /// (its `HookManifestCompleted` condition says what it waits for). With `Placements`, a
    /// cluster a placement still selects gets it back once it is gone, as in OCM.
    pub async fn delete_cluster_addon(&self, cluster: &str, name: &str) -> Result<(), AddOnError> {
        let key = ObjectRef::new(cluster, name);
        if self.get_cluster_addon(cluster, name).is_none() {
            return Err(AddOnError::NotFound(format!("ManagedClusterAddOn {key}")));
        }
        self.remove_from(cluster, name).await.map(|_| ())
    }
}

//! ClusterManagementAddOns through the handle (I/O): apply one (its actor started, or told of
//! the new spec), read them, delete one through its actor.

use super::actor;
use super::effects;
use super::error::AddOnError;
use super::handle::AddOns;
use super::meta::{check_version, is_deleted, name_of, stamp, with_rev};
use super::rules;
use flotilla_api::addon::validate;
use flotilla_api::v1::ClusterManagementAddOn;
use std::sync::Arc;

impl AddOns {
    /// Creates or updates an add-on.
    pub async fn apply_addon(
        &self,
        mut cma: ClusterManagementAddOn,
    ) -> Result<ClusterManagementAddOn, AddOnError> {
        let mut errors = validate::cluster_management_addon(&cma);
        errors.extend(rules::hub_checks(&cma));
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let name = name_of(&cma.metadata);
        let what = format!("ClusterManagementAddOn {name}");
        let stored = self.inner.store.addons.get(&name).await?;
        check_version(&cma.metadata, stored.as_ref().map(|s| s.1), &what)?;
        if let Some((s, _)) = &stored
            && is_deleted(&s.metadata)
        {
            return Err(AddOnError::Deleting(format!(
                "{what} is being deleted: its installations wait for their pre-delete hooks; \
                 apply it again once it is gone"
            )));
        }
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != cma.spec);
        stamp(&mut cma, stored.as_ref().map(|s| &s.0), spec_changed);
        cma.status = stored.and_then(|(s, _)| s.status);
        let rev = self.inner.store.addons.put(&name, &cma).await?;
        let cma = with_rev(cma, rev);
        match self.live_actor(&name) {
            Some(tx) => {
                self.inner.store.addon_views.upsert(&name, cma.clone());
                let _ = tx.send(actor::Msg::Spec(Box::new(cma.clone()))).await;
            }
            None => self.spawn(cma.clone()),
        }
        Ok(cma)
    }

    /// One add-on with its status.
    pub fn get_addon(&self, name: &str) -> Option<Arc<ClusterManagementAddOn>> {
        self.inner.store.addon_views.get(name)
    }

    /// Every add-on.
    pub fn list_addons(&self) -> Vec<Arc<ClusterManagementAddOn>> {
        self.inner.store.addon_views.snapshot()
    }

    /// Deletes an add-on with every ManagedClusterAddOn of its name and their works. Those
    /// with a pre-delete hook run it first: the add-on then stays, marked deleted, until the
    /// last of them is gone (its actor purges it).
    pub async fn delete_addon(&self, name: &str) -> Result<effects::Removal, AddOnError> {
        let Some(tx) = self.live_actor(name) else {
            return Err(AddOnError::NotFound(format!(
                "ClusterManagementAddOn {name}"
            )));
        };
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let sent = tx.send(actor::Msg::Delete(done_tx)).await;
        let removal = match (sent, done.await) {
            (Ok(()), Ok(removal)) => removal,
            // The actor ended meanwhile: nothing runs hooks any more.
            _ => {
                self.inner.store.addons.purge(name).await?;
                self.inner.store.addon_views.remove(name);
                effects::Removal::Removed
            }
        };
        if removal == effects::Removal::Removed {
            self.inner.actors.remove(name);
        }
        Ok(removal)
    }
}

//! Removing the add-on from clusters, and deleting the add-on: each installation step by step
//! ([`rules::uninstall`], its pre-delete hook first, executed by [`uninstall`]), and the add-on
//! itself once the last installation is gone.

use super::{Actor, Recheck};
use crate::addon::effects::{Removal, uninstall};
use crate::addon::error::AddOnError;
use crate::addon::rules::{self, AddOnKind};
use crate::keys::ObjectRef;
use flotilla_api::addon::render;
use flotilla_api::v1::{ManagedClusterAddOn, ManifestWork};
use std::time::Duration;

impl Actor {
    /// Starts deleting the add-on: removes every ManagedClusterAddOn of it (hooks first).
    /// `Removed` when nothing waits (the add-on is gone and the actor ends), else what waits;
    /// the rounds carry on ([`Self::reconcile_deleting`]).
    pub(super) async fn cascade(&mut self) -> Removal {
        self.deleting = true;
        let mut recheck = Recheck::default();
        match self.reconcile_deleting_once(&mut recheck).await {
            0 if self.gone => Removal::Removed,
            0 => Removal::Waiting("the add-on is purged at the next round".into()),
            n => Removal::Waiting(format!(
                "{n} installation(s) wait for their pre-delete hook; the add-on is deleted after them"
            )),
        }
    }

    /// A round of a deleted add-on: every installation removed (step by step); once none is
    /// left the add-on itself is purged and the actor ends.
    pub(super) async fn reconcile_deleting(&mut self) -> Option<Duration> {
        let mut recheck = Recheck::default();
        self.reconcile_deleting_once(&mut recheck).await;
        recheck.0
    }

    /// Removes every installation a step further; purges the add-on when none is left. Returns
    /// how many are left.
    async fn reconcile_deleting_once(&mut self, recheck: &mut Recheck) -> usize {
        for mca in self.store.installed(&self.name) {
            let (cluster, _) = rules::key_of(&mca);
            if let Err(e) = self.uninstall(&cluster).await {
                tracing::warn!(cluster = %cluster, error = %e, "removing the add-on failed");
                recheck.at(Duration::from_secs(2));
            }
        }
        let left = self.store.installed(&self.name).len();
        if left > 0 {
            self.mark_deleting().await;
            return left;
        }
        match self.store.addons.purge(&self.name).await {
            Ok(()) => {
                self.store.addon_views.remove(&self.name);
                self.gone = true;
            }
            Err(e) => {
                tracing::warn!(error = %e, "purging the deleted add-on failed; retrying");
                recheck.at(Duration::from_secs(2));
            }
        }
        0
    }

    /// Records on the stored add-on that it is being deleted (once).
    async fn mark_deleting(&mut self) {
        if self
            .cma
            .metadata
            .as_ref()
            .is_some_and(|m| m.deletion_timestamp.is_some())
        {
            return;
        }
        let Ok(Some((mut stored, revision))) = self.store.addons.get(&self.name).await else {
            return;
        };
        stored
            .metadata
            .get_or_insert_with(Default::default)
            .deletion_timestamp = Some(flotilla_api::meta::now());
        match self.store.addons.write(&self.name, &stored, revision).await {
            Ok(rev) => {
                if let Some(m) = stored.metadata.as_mut() {
                    m.resource_version = rev;
                }
                self.cma = stored.clone();
                self.store.addon_views.upsert(&self.name, stored);
            }
            Err(e) => tracing::debug!(error = %e, "the add-on's deletion not recorded this time"),
        }
    }

    /// Carries on removing the installations marked deleted (their hooks may have completed).
    pub(super) async fn finish_removals(&mut self, recheck: &mut Recheck) {
        for mca in self.store.installed(&self.name) {
            if !is_deleting(&mca) {
                continue;
            }
            let (cluster, _) = rules::key_of(&mca);
            if let Err(e) = self.uninstall(&cluster).await {
                tracing::warn!(cluster = %cluster, error = %e, "removing the add-on failed");
                recheck.at(Duration::from_secs(2));
            }
        }
    }

    /// One step of removing the add-on from `cluster` ([`uninstall`]), with the pre-delete hook
    /// its template renders there.
    pub(super) async fn uninstall(&mut self, cluster: &str) -> Result<Removal, AddOnError> {
        let key = ObjectRef::new(cluster, &self.name).inventory_key();
        let Some(mca) = self.store.cluster_addon_views.get(&key) else {
            return Ok(Removal::Removed);
        };
        let hook = self.hook_of(&mca);
        let removal = uninstall(&self.store, &self.deps, cluster, &self.name, hook).await?;
        if let Removal::Waiting(why) = &removal {
            tracing::debug!(cluster = %cluster, waiting = %why, "removal waits for the pre-delete hook");
        }
        Ok(removal)
    }

    /// The pre-delete hook work the add-on's template renders on the installation's cluster
    /// (`Ok(None)`: no hooks, or no template to render them from), or why it cannot be rendered
    /// when the template may have hooks.
    fn hook_of(
        &mut self,
        mca: &ManagedClusterAddOn,
    ) -> Result<Option<ManifestWork>, render::RenderError> {
        if rules::kind_of(&self.cma) == AddOnKind::External {
            return Ok(None);
        }
        let placement = self.placement_of(mca);
        let Ok(resolved) = self.resolved(mca, placement) else {
            return Ok(None); // never rendered at these configs: nothing to undo
        };
        let Some(template) = self.template_of(&resolved) else {
            return Ok(None);
        };
        let config = self.deployment_config_of(&resolved);
        let (cluster, _) = rules::key_of(mca);
        let no_hashes = rules::Hashes::new();
        let input = self.render_input(&cluster, mca, &template, config.as_deref(), &no_hashes);
        match render::pre_delete(&input) {
            Ok(hook) => Ok(hook),
            Err(e) if render::may_have_pre_delete_hooks(&template) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// The index of the placement that installed `mca` (its hub state), if still listed.
    fn placement_of(&self, mca: &ManagedClusterAddOn) -> Option<usize> {
        let by = mca.hub.as_ref().map(|h| h.placement.as_str())?;
        self.spec()
            .install_strategy?
            .placements
            .iter()
            .position(|p| ObjectRef::new(&p.namespace, &p.name).to_string() == by)
    }
}

/// Whether an installation is being removed (it waits for its pre-delete hook).
pub(super) fn is_deleting(mca: &ManagedClusterAddOn) -> bool {
    mca.metadata
        .as_ref()
        .is_some_and(|m| m.deletion_timestamp.is_some())
}

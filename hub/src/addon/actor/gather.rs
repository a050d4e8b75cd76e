//! A round's installations: each kept from the last round while nothing it was gathered from
//! changed ([`Dirty`]), gathered again otherwise — its configs resolved, its works and their
//! rollout status.

use super::removal::is_deleting;
use super::{Actor, Entry};
use crate::addon::dirty::Dirty;
use crate::addon::rules;
use crate::keys::ObjectRef;
use flotilla_api::addon::{self, health};
use flotilla_api::v1::{ManagedClusterAddOn, ManifestWork};
use flotilla_rollout::{GroupKey, Status};
use std::collections::BTreeMap;
use std::sync::Arc;

impl Actor {
    /// Every installed add-on, its configs resolved and its work's rollout status: the entry
    /// the last round left when nothing it was gathered from changed since (`dirty`), gathered
    /// again otherwise. The add-ons of deleted clusters are removed.
    pub(super) async fn gather(
        &mut self,
        installed: &[Arc<ManagedClusterAddOn>],
        owner: &BTreeMap<String, (usize, GroupKey)>,
        dirty: &Dirty,
    ) -> Vec<Entry> {
        let mut kept = std::mem::take(&mut self.entries);
        let mut entries = Vec::with_capacity(installed.len());
        for mca in installed {
            if is_deleting(mca) {
                continue; // being removed: `finish_removals`
            }
            let cluster = rules::cluster_of(mca);
            let decided = owner.get(cluster).map(|(i, g)| (*i, g));
            if let Some(e) = kept.remove(cluster)
                && e.gathered_from(mca, decided)
                && !dirty.touches(cluster, &e.reads)
            {
                entries.push(e);
                continue;
            }
            if self.deps.inventory.get(cluster).is_none() {
                // The cluster was deleted: its works went with it.
                if let Err(e) = self.uninstall(cluster).await {
                    tracing::warn!(cluster = %cluster, error = %e, "removing the add-on of a deleted cluster failed");
                }
                continue;
            }
            let entry = self.entry(mca.clone(), cluster, decided);
            entries.push(entry);
        }
        tracing::debug!(
            installations = entries.len(),
            everything = dirty.is_everything(),
            "gathered"
        );
        entries
    }

    /// One installation gathered: its configs resolved, its works and their rollout status.
    fn entry(
        &mut self,
        mca: Arc<ManagedClusterAddOn>,
        cluster: &str,
        decided: Option<(usize, &GroupKey)>,
    ) -> Entry {
        let (placement, group) = match decided {
            Some((i, g)) => (Some(i), g.clone()),
            None => (None, GroupKey::default()),
        };
        let works = self.works_of(cluster);
        let refs: Vec<&ManifestWork> = works.iter().map(|w| &**w).collect();
        let mut reads = Vec::new();
        let resolved = self.resolved_reading(&mca, placement, &mut reads);
        let target = resolved
            .as_ref()
            .map(|r| rules::hashes(r))
            .unwrap_or_default();
        let (mut status, mut since) = match &resolved {
            Ok(_) => rules::rollout_status(&refs, &target),
            Err(_) => (Status::Skip, None),
        };
        let unfinished = resolved.is_ok() && rules::works::unfinished(&refs, &target);
        let mut render_error = None;
        if (status == Status::ToApply || unfinished)
            && let Some((t, at, why)) = self.render_failed.get(cluster)
            && *t == target
        {
            (status, since) = (Status::Failed, Some(*at));
            render_error = Some(why.clone());
        }
        let template = resolved.as_ref().ok().and_then(|r| self.template_of(r));
        let config = resolved
            .as_ref()
            .ok()
            .and_then(|r| self.deployment_config_of(r));
        let mode = match &template {
            Some(t) => health::mode_of(t),
            None => Ok(health::Mode::WorkStatus),
        };
        Entry {
            mca,
            cluster: cluster.into(),
            works,
            unfinished,
            placement,
            group,
            resolved,
            reads,
            template,
            config,
            mode,
            target,
            status,
            since,
            render_error,
            waiting: false,
            settled: None,
        }
    }

    /// The add-on's agent works on `cluster`, by index.
    fn works_of(&self, cluster: &str) -> Vec<Arc<ManifestWork>> {
        let all = self.deps.works.with_prefix(&ObjectRef::prefix(cluster));
        // Statuses are held encoded: only this add-on's works (by name) are decoded.
        let mine = all
            .into_iter()
            .filter(|(key, _)| {
                key.split_once('/')
                    .is_some_and(|(_, n)| addon::work_index(&self.name, n).is_some())
            })
            .map(|(_, w)| Arc::new(w.to_work()));
        rules::works::deploy_works(&self.name, mine)
    }
}

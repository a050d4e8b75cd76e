//! What the actor writes back: each installation's status (from its works, its lease, its
//! cluster) and the add-on's own (its defaults' spec hashes, its install progressions).

use super::{Actor, Entry, PARALLEL, Recheck};
use crate::addon::effects::{registrations, write_status};
use crate::addon::rules::{self, StatusInput};
use crate::addon::settled::Settled;
use flotilla_api::addon::{self, health, render};
use flotilla_api::v1::{
    AddOnConfig, ClusterManagementAddOnStatus, ConfigSpecHash, DefaultConfigReference,
    InstallProgression, ManagedClusterAddOn,
};
use futures::StreamExt;
use std::time::{Duration, SystemTime};

impl Actor {
    /// The add-on agent's last lease renewal on `cluster`. Not renewed since this hub started:
    /// an add-on that was available gets a fresh grace from the start instead of flapping to
    /// Unknown.
    pub(super) fn lease_of(&self, cluster: &str, mca: &ManagedClusterAddOn) -> Option<SystemTime> {
        self.store.lease(cluster, &self.name).or_else(|| {
            let was = mca.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.r#type == addon::conditions::AVAILABLE
                        && c.status == flotilla_api::meta::status::TRUE
                })
            });
            was.then_some(self.store.started)
        })
    }

    /// The statuses that need writing: each installation's, computed unless its entry was
    /// kept and its status was settled from the same rollout verdict and lease.
    pub(super) fn statuses(
        &self,
        entries: &mut [Entry],
        now: SystemTime,
        recheck: &mut Recheck,
    ) -> Vec<(String, flotilla_api::v1::ManagedClusterAddOnStatus)> {
        let grace = self.deps.config.lease_grace;
        let mut writes = Vec::new();
        for e in entries {
            let rollout = (e.status, e.since, e.waiting);
            // Time makes a lease stale: read at every round, kept entry or not.
            let lease = matches!(e.mode, Ok(health::Mode::Lease)).then(|| {
                let lease = self.lease_of(&e.cluster, &e.mca);
                let fresh = rules::lease_recheck(lease, now, grace);
                recheck.merge(fresh);
                (lease, fresh.is_some())
            });
            if e.settled
                .as_ref()
                .is_some_and(|s| s.holds(rollout, e.render_error.as_deref(), lease))
            {
                continue;
            }
            let st = self.status_of(e, now);
            if e.mca.status.as_ref() != Some(&st) {
                // Written (or retried) until the stored add-on carries it; then settled.
                e.settled = None;
                writes.push((e.cluster.to_string(), st));
            } else {
                e.settled = Some(Settled {
                    rollout,
                    render_error: e.render_error.clone(),
                    lease,
                });
            }
        }
        writes
    }

    /// An installation's status.
    pub(super) fn status_of(
        &self,
        e: &Entry,
        now: SystemTime,
    ) -> flotilla_api::v1::ManagedClusterAddOnStatus {
        let grace = self.deps.config.lease_grace;
        let template = &e.template;
        let lease = self.lease_of(&e.cluster, &e.mca);
        let cluster = self.deps.inventory.get(&e.cluster);
        let registrations = template
            .as_ref()
            .map(|t| registrations(t, &e.cluster, &self.name))
            .unwrap_or_default();
        let install_namespace = match (&e.resolved, template) {
            (Ok(_), Some(t)) => render::install_namespace(&self.render_input(
                &e.cluster,
                &e.mca,
                t,
                e.config.as_deref(),
                &Default::default(),
            )),
            _ => e
                .mca
                .spec
                .as_ref()
                .map(|s| s.install_namespace.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| addon::DEFAULT_INSTALL_NAMESPACE.to_string()),
        };
        rules::status(&StatusInput {
            cma: &self.cma,
            mca: &e.mca,
            works: e.works.iter().map(|w| &**w).collect(),
            cluster: cluster.as_deref(),
            configs: &e.resolved,
            mode: &e.mode,
            render_error: e.render_error.as_deref(),
            rollout: e.status,
            waiting: e.waiting,
            lease,
            grace,
            install_namespace,
            registrations,
            now,
        })
    }

    /// Writes the statuses, [`PARALLEL`] at once.
    pub(super) async fn write_statuses(
        &self,
        writes: Vec<(String, flotilla_api::v1::ManagedClusterAddOnStatus)>,
        recheck: &mut Recheck,
    ) {
        let store = self.store.clone();
        let name = self.name.clone();
        let failed: usize = futures::stream::iter(writes.into_iter().map(|(cluster, st)| {
            let store = store.clone();
            let name = name.clone();
            async move { write_status(&store, &cluster, &name, st).await.is_err() as usize }
        }))
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .sum();
        if failed > 0 {
            recheck.at(Duration::from_secs(1));
        }
    }

    pub(super) fn default_refs(&self) -> Vec<DefaultConfigReference> {
        let spec = self.spec();
        spec.supported_configs
            .iter()
            .filter_map(|c| {
                let d = c.default_config.as_ref()?;
                let hash = self.config_hash(&c.resource, &d.namespace, &d.name);
                Some(DefaultConfigReference {
                    group: c.group.clone(),
                    resource: c.resource.clone(),
                    desired_config: Some(ConfigSpecHash {
                        namespace: d.namespace.clone(),
                        name: d.name.clone(),
                        spec_hash: hash,
                    }),
                })
            })
            .collect()
    }

    pub(super) async fn write_own_status(&mut self, progressions: Vec<InstallProgression>) {
        // Hash the defaults even when nothing is installed yet.
        let spec = self.spec();
        for c in &spec.supported_configs {
            if let Some(d) = &c.default_config {
                self.resolve(&AddOnConfig {
                    group: c.group.clone(),
                    resource: c.resource.clone(),
                    namespace: d.namespace.clone(),
                    name: d.name.clone(),
                });
            }
        }
        let st = ClusterManagementAddOnStatus {
            default_config_references: self.default_refs(),
            install_progressions: progressions,
        };
        if self.cma.status.as_ref() == Some(&st) {
            return;
        }
        self.cma.status = Some(st);
        if let Ok(Some((stored, revision))) = self.store.addons.get(&self.name).await {
            let mut next = stored;
            next.status = self.cma.status.clone();
            match self.store.addons.write(&self.name, &next, revision).await {
                Ok(rev) => {
                    if let Some(m) = self.cma.metadata.as_mut() {
                        m.resource_version = rev;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "add-on status not saved this time"),
            }
        }
        self.store.addon_views.upsert(&self.name, self.cma.clone());
    }
}

//! What the actor writes back: each installation's status (from its works, its lease, its
//! cluster) and the add-on's own (its defaults' spec hashes, its install progressions).

use super::{Actor, Entry, PARALLEL, Recheck};
use crate::addon::effects::{registrations, write_status};
use crate::addon::rules::{self, StatusInput};
use crate::addon::settled::StatusKey;
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

    /// The statuses that need writing: each installation's, computed unless its inputs are the
    /// ones its stored status was settled from.
    pub(super) fn statuses(
        &mut self,
        entries: &[Entry],
        now: SystemTime,
        recheck: &mut Recheck,
    ) -> Vec<(String, flotilla_api::v1::ManagedClusterAddOnStatus)> {
        let installed: std::collections::HashSet<&str> =
            entries.iter().map(|e| e.cluster.as_str()).collect();
        self.settled
            .retain(|cluster, _| installed.contains(cluster.as_str()));
        let mut writes = Vec::new();
        for e in entries {
            let Some((key, st)) = self.status_of(e, now, recheck) else {
                continue;
            };
            if e.mca.status.as_ref() != Some(&st) {
                // Written (or retried) until the stored add-on carries it; then settled.
                self.settled.remove(&e.cluster);
                writes.push((e.cluster.clone(), st));
            } else {
                self.settled.insert(e.cluster.clone(), key);
            }
        }
        writes
    }

    /// An installation's status and what it was computed from; `None` when its inputs are
    /// the ones its stored status was settled from.
    pub(super) fn status_of(
        &self,
        e: &Entry,
        now: SystemTime,
        recheck: &mut Recheck,
    ) -> Option<(StatusKey, flotilla_api::v1::ManagedClusterAddOnStatus)> {
        let grace = self.deps.config.lease_grace;
        let cma_version = self
            .cma
            .metadata
            .as_ref()
            .map_or((0, 0), |m| (m.resource_version, m.generation));
        let template = e.resolved.as_ref().ok().and_then(|r| self.template_of(r));
        let config = e
            .resolved
            .as_ref()
            .ok()
            .and_then(|r| self.deployment_config_of(r));
        let mode = match &template {
            Some(t) => health::mode_of(t),
            None => Ok(health::Mode::WorkStatus),
        };
        let lease = self.lease_of(&e.cluster, &e.mca);
        let fresh = rules::lease_recheck(lease, now, grace);
        if matches!(mode, Ok(health::Mode::Lease))
            && let Some(d) = fresh
        {
            recheck.at(d);
        }
        let cluster = self.deps.inventory.get(&e.cluster);
        let key = StatusKey {
            cma: cma_version,
            mca: e.mca.clone(),
            works: e.works.clone(),
            cluster: cluster.clone(),
            template: template.clone(),
            config: config.clone(),
            target: e.target.clone(),
            rollout: (e.status, e.since, e.waiting),
            render_error: e.render_error.clone(),
            lease: (lease, fresh.is_some()),
        };
        if self.settled.get(&e.cluster) == Some(&key) {
            return None;
        }
        let registrations = template
            .as_ref()
            .map(|t| registrations(t, &e.cluster, &self.name))
            .unwrap_or_default();
        let install_namespace = match (&e.resolved, &template) {
            (Ok(_), Some(t)) => render::install_namespace(&self.render_input(
                &e.cluster,
                &e.mca,
                t,
                config.as_deref(),
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
        let st = rules::status(&StatusInput {
            cma: &self.cma,
            mca: &e.mca,
            works: e.works.iter().map(|w| &**w).collect(),
            cluster: cluster.as_deref(),
            configs: &e.resolved,
            mode: &mode,
            render_error: e.render_error.as_deref(),
            rollout: e.status,
            waiting: e.waiting,
            lease,
            grace,
            install_namespace,
            registrations,
            now,
        });
        Some((key, st))
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

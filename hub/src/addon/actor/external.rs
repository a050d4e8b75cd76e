//! The round of an add-on managed by someone else ([`rules::external`]) and the spoke Lease
//! watches it asks the clusters' agents for.

use super::removal::is_deleting;
use super::{Actor, Recheck};
use crate::addon::effects::{remove_works, watch_lease};
use crate::addon::rules::{self, ExternalInput};
use flotilla_api::v1::{ManagedCluster, ManagedClusterAddOn, ManagedClusterAddOnStatus};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

impl Actor {
    /// The round of an add-on managed by someone else ([`rules::external`]): nothing is
    /// rendered, applied or rolled out; each installation's status says where it runs and
    /// whether its agent's lease is fresh, the add-on's its default configs' hashes. The add-ons
    /// of deleted clusters are removed.
    pub(super) async fn reconcile_external(
        &mut self,
        now: SystemTime,
        mut recheck: Recheck,
    ) -> Option<Duration> {
        let mut writes = Vec::new();
        for mca in self.store.installed(&self.name) {
            let (cluster, _) = rules::key_of(&mca);
            if is_deleting(&mca) {
                continue;
            }
            let Some(c) = self.deps.inventory.get(&cluster) else {
                if let Err(e) = self.uninstall(&cluster).await {
                    tracing::warn!(cluster = %cluster, error = %e, "removing the add-on of a deleted cluster failed");
                }
                continue;
            };
            let st = self
                .external_installation(&cluster, &c, &mca, now, &mut recheck)
                .await;
            if mca.status.as_ref() != Some(&st) {
                writes.push((cluster, st));
            }
        }
        self.write_statuses(writes, &mut recheck).await;
        // Its defaults with their spec hashes, as for any add-on; no rollout, so no progressions.
        self.write_own_status(Vec::new()).await;
        recheck.0
    }

    /// A template add-on's agent is deployed by the hub, whose work status tells its health: no
    /// agent watches a spoke Lease for it (left from when it had no template).
    pub(super) async fn unwatch_leases(&self, installed: &[Arc<ManagedClusterAddOn>]) {
        for mca in installed {
            let cluster = rules::cluster_of(mca);
            if let Err(e) = watch_lease(&self.deps, cluster, &self.name, None).await {
                tracing::warn!(cluster = %cluster, error = %e, "telling the agent to stop watching the add-on's lease failed");
            }
        }
    }

    /// One installation of an external add-on: no work of its own (one left from when it had a
    /// template goes), its agent told where the spoke Lease is, its status from the two leases.
    async fn external_installation(
        &self,
        cluster: &str,
        c: &ManagedCluster,
        mca: &ManagedClusterAddOn,
        now: SystemTime,
        recheck: &mut Recheck,
    ) -> ManagedClusterAddOnStatus {
        let grace = self.deps.config.lease_grace;
        // Rendered when the add-on had a template: someone else deploys its agent now.
        if let Err(e) = remove_works(&self.deps, cluster, &self.name).await {
            tracing::warn!(cluster = %cluster, error = %e, "removing the work of an add-on without a template failed");
            recheck.at(Duration::from_secs(1));
        }
        // The agent reads the add-on's Lease on the spoke once told where it is.
        let ns = rules::install_namespace(mca);
        if let Err(e) = watch_lease(&self.deps, cluster, &self.name, Some(&ns)).await {
            tracing::warn!(cluster = %cluster, error = %e, "asking the agent to watch the add-on's lease failed");
            recheck.at(Duration::from_secs(1));
        }
        // A Lease on the spoke says all; without one, an add-on that was available keeps
        // a grace from the hub's start until its agent renews over NATS again.
        let spoke = crate::cluster::rules::addons::addon_health(c, &self.name);
        let lease = if spoke.is_some_and(|h| h.status != flotilla_api::meta::status::UNKNOWN) {
            self.store.lease(cluster, &self.name)
        } else {
            self.lease_of(cluster, mca)
        };
        recheck.merge(rules::lease_recheck(lease, now, grace));
        rules::external_status(&ExternalInput {
            cma: &self.cma,
            mca,
            cluster: Some(c),
            lease,
            spoke,
            grace,
            now,
        })
    }
}

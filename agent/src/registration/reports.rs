//! What the agent reports on its own schedule: its lease renewals, its cluster status (with
//! the managed namespaces it keeps, repaired on every report), its AddOnPlacementScores, and
//! the claims it reports.

use super::*;

impl RegistrationActor {
    /// Reports the backend's AddOnPlacementScores, valid for three intervals.
    pub(super) async fn report_scores(&mut self) {
        let Some(interval) = self.config.score_interval.filter(|_| self.accepted()) else {
            self.next_score = None;
            return;
        };
        self.next_score = Some(Instant::now() + jitter(interval, 0.9));
        let valid_until = std::time::SystemTime::now() + interval * 3;
        for (resource_name, items) in self.backend.scores() {
            let seq = match self.store.next_sequence() {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "saving the sequence counter failed");
                    return;
                }
            };
            let ev = crate::scores::report_event(
                &self.source,
                self.name(),
                &resource_name,
                items,
                valid_until,
                seq,
            );
            let subject = flotilla_bus::scores::subject(self.name(), &resource_name);
            if !self
                .publish_to(subject, flotilla_bus::scores::KIND_SCORE, ev)
                .await
            {
                // Offline: try again soon rather than a whole interval later.
                self.next_score =
                    Some(Instant::now() + jitter(interval.min(Duration::from_secs(5)), 0.5));
            }
        }
    }

    pub(super) async fn renew(&mut self) {
        if !self.accepted() {
            self.next_lease = None;
            return;
        }
        let period = self.lease_period();
        self.next_lease = Some(Instant::now() + jitter(period, 0.75));
        let seq = match self.store.next_sequence() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "saving the sequence counter failed");
                return;
            }
        };
        let renewal = LeaseRenewal {
            cluster_name: self.name().to_string(),
            renew_time: Some(meta::now()),
        };
        let ev = Event::new(
            types::lease_renewal(),
            self.source.clone(),
            self.name(),
            &renewal,
        )
        .with_sequence(seq);
        if !self.publish(subjects::KIND_LEASE, ev).await {
            // Try again soon rather than a whole period later: the hub's grace is 5 periods.
            self.next_lease =
                Some(Instant::now() + jitter(period.min(Duration::from_secs(5)), 0.5));
        } else if self.last_status_hash.is_none() {
            self.report_status(true).await;
        }
    }

    /// Applies the managed namespaces the hub last asked for (kept in the local store, so this
    /// works without the hub) and keeps their conditions for the next status report.
    pub(super) async fn reconcile_namespaces(&mut self, unmanage: bool) {
        let wanted: Vec<ClusterSetManagedNamespaceConfig> = self
            .store
            .get()
            .managed_namespaces
            .into_iter()
            .map(|n| ClusterSetManagedNamespaceConfig {
                name: n.name,
                cluster_set: n.cluster_set,
                conditions: Vec::new(),
            })
            .collect();
        let unmanage = unmanage || self.unmanage_pending;
        if wanted.is_empty() && !unmanage {
            self.namespace_status.clear();
            return;
        }
        let done = self
            .namespaces
            .reconcile(&wanted, &self.namespace_status, unmanage)
            .await;
        self.namespace_status = done.namespaces;
        self.unmanage_pending = done.unmanage_pending;
    }

    pub(super) async fn report_status(&mut self, force: bool) {
        // Periodic repair: a managed namespace deleted on the spoke comes back.
        self.reconcile_namespaces(false).await;
        let info = self.backend.info().await;
        let report = ClusterStatusReport {
            cluster_name: self.name().to_string(),
            claims: claims(&self.config, &self.store, &info),
            capacity: info.capacity,
            allocatable: info.allocatable,
            kubernetes_version: info.kubernetes_version,
            healthy: info.healthy,
            health_message: info.health_message,
            conditions: Vec::new(),
            managed_namespaces: self.namespace_status.clone(),
            addon_health: crate::addons::leases::judge_all(
                self.backend.as_ref(),
                &self.store.get().external_addons,
                std::time::SystemTime::now(),
            )
            .await,
        };
        let probe = Event::new(
            types::cluster_status(),
            self.source.clone(),
            self.name(),
            &report,
        )
        .with_status_hash();
        if !force && probe.status_hash == self.last_status_hash {
            return;
        }
        let seq = match self.store.next_sequence() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "saving the sequence counter failed");
                return;
            }
        };
        let hash = probe.status_hash.clone();
        if self
            .publish(subjects::KIND_CLUSTER, probe.with_sequence(seq))
            .await
        {
            self.last_status_hash = hash;
        }
    }
}

/// The claims the agent reports: the reserved ones from the cluster, then the configured ones.
pub(super) fn claims(
    config: &AgentConfig,
    store: &LocalStore,
    info: &ClusterInfo,
) -> Vec<ClusterClaim> {
    let mut claims = crate::claims::reserved(store, info);
    claims.extend(config.claims.iter().cloned());
    claims
}

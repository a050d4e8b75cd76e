//! What leaves a cluster with a work (I/O but for [`orphaned`], a pure rule): what a new spec
//! no longer declares, collected after each apply; one resource removed unless another work
//! declares it or the delete option keeps it; and the work's own deletion, confirmed to the hub
//! once every resource it deletes is gone.

use super::{WorkActor, applied_id, applied_resource, generation_of};
use flotilla_api::v1::{ManifestWork, WorkStatusReport};
use flotilla_api::work::ManifestId;
use std::sync::atomic::Ordering;

impl WorkActor {
    /// Claims what the work declares, removes what it applied before and no longer declares
    /// ([`Self::remove_resource`]), and saves the work's record.
    pub(super) async fn collect_garbage(&mut self, declared: Vec<ManifestId>) {
        // Garbage: what this work applied before and no longer declares.
        let removed: Vec<ManifestId> = self
            .record
            .applied
            .iter()
            .map(applied_id)
            .filter(|id| !declared.contains(id))
            .collect();
        {
            let mut own = self.ownership.lock().expect("ownership lock");
            for id in &declared {
                own.add(id, &self.rid);
            }
        }
        let policy = self.work().spec.and_then(|s| s.delete_option);
        for id in removed {
            self.shared.progress();
            self.remove_resource(&id, policy.as_ref()).await;
        }
        self.record.applied = declared.iter().map(applied_resource).collect();
        if let Err(e) = self.store.save_work(&self.record) {
            tracing::error!(error = %e, "saving the work record failed");
        }
    }

    /// Releases this work's claim on a resource and deletes it (as the work's executor) unless
    /// another work declares it or the delete option keeps it. Returns whether the resource is
    /// (or will be) gone.
    pub(super) async fn remove_resource(
        &self,
        id: &ManifestId,
        policy: Option<&flotilla_api::v1::DeleteOption>,
    ) -> bool {
        let shared = self
            .ownership
            .lock()
            .expect("ownership lock")
            .release(id, &self.rid);
        if shared {
            tracing::info!(resource = %id.describe(), "kept: another work declares it");
            return false;
        }
        if orphaned(id, policy) {
            tracing::info!(resource = %id.describe(), "orphaned per the delete option");
            return false;
        }
        let executor = flotilla_api::work::Executor::of_work(&self.work());
        match self.backend.delete_as(executor.as_ref(), id).await {
            Ok(_) => {
                tracing::info!(resource = %id.describe(), "deleted");
                true
            }
            Err(e) => {
                tracing::warn!(resource = %id.describe(), error = %e, "delete failed");
                true
            }
        }
    }

    /// Deletes the work's resources per its delete option, then confirms to the hub (retrying
    /// on every tick until the confirmation is acknowledged) and forgets the work.
    pub(super) async fn delete(&mut self, work: Option<ManifestWork>) {
        if !self.record.deleting {
            tracing::info!("deleting the work");
            if let Some(w) = work
                && let Some(spec) = w.spec
            {
                // The hub's copy carries the delete option in force.
                let mut held = self.work();
                if let Some(s) = held.spec.as_mut() {
                    s.delete_option = spec.delete_option;
                }
                self.record.work = Some(held);
            }
            // Saved before touching resources: a crash from here on resumes the deletion.
            self.record.deleting = true;
            if let Err(e) = self.store.save_work(&self.record) {
                tracing::error!(error = %e, "saving the work record failed");
            }
        }
        // Idempotent, so it also repairs a deletion a crash interrupted, and (Foreground) the
        // work stays until every resource it deletes is really gone.
        let policy = self.work().spec.and_then(|s| s.delete_option);
        let executor = flotilla_api::work::Executor::of_work(&self.work());
        let executor = executor.as_ref();
        let mut waiting = Vec::new();
        // In reverse order of application: contents before their Namespace (applied first).
        for id in self.record.applied.iter().rev().map(applied_id) {
            self.shared.progress();
            if self
                .backend
                .get_as(executor, &id)
                .await
                .ok()
                .flatten()
                .is_none()
            {
                self.ownership
                    .lock()
                    .expect("ownership lock")
                    .release(&id, &self.rid);
                continue;
            }
            if self.remove_resource(&id, policy.as_ref()).await
                && self
                    .backend
                    .get_as(executor, &id)
                    .await
                    .ok()
                    .flatten()
                    .is_some()
            {
                waiting.push(id.describe());
            }
        }
        if !waiting.is_empty() {
            tracing::info!(?waiting, "waiting for resources to be deleted");
            return;
        }
        // What the work still owns is shared with another work (which owns it too) or orphaned
        // (never owned): the collector may take the anchor's references away.
        if let Err(e) = self.backend.delete_anchor(&self.anchor_key(), false).await {
            tracing::warn!(error = %e, "deleting the work's anchor failed; retrying");
            return;
        }
        let report = WorkStatusReport {
            cluster_name: self.cluster.clone(),
            work_name: self.name.clone(),
            resource_id: self.rid.clone(),
            observed_generation: generation_of(self.record.work.as_ref()),
            status: None,
            deleted: true,
            received_generation: 0,
        };
        let sent = self.publisher.publish(&report).await;
        self.note_sent(&sent);
        if sent.is_ok() {
            if let Err(e) = self.store.remove_work(&self.rid) {
                tracing::error!(error = %e, "removing the work record failed");
            }
            tracing::info!("work deleted and confirmed to the hub");
            self.shared.finished.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether the delete option keeps `id` on the cluster when the work goes.
pub(crate) fn orphaned(id: &ManifestId, policy: Option<&flotilla_api::v1::DeleteOption>) -> bool {
    match policy.map(|p| p.propagation_policy.as_str()) {
        Some("Orphan") => true,
        Some("SelectivelyOrphan") => policy
            .and_then(|p| p.selectively_orphans.as_ref())
            .is_some_and(|so| {
                so.orphaning_rules.iter().any(|r| {
                    r.group == id.group
                        && r.resource.eq_ignore_ascii_case(&id.resource())
                        && r.namespace == id.namespace
                        && r.name == id.name
                })
            }),
        _ => false,
    }
}

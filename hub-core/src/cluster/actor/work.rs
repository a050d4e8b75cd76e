//! The ManifestWork lifecycle of a cluster actor: apply (generation, resourceVersion), delete
//! (held until the agent confirms), status from the agent (in `sequenceid` order, de-duplicated
//! by `statushash`), spec resync, and re-sending specs the agent has not confirmed — once the
//! cluster has been heard from since the send, under the hub-wide budget, and later for a spec
//! the agent acknowledged receiving (the rule: [`crate::cluster::resend`]).

use super::{Actor, ack_message};
use crate::cluster::handle::{ClusterError, SOURCE, WorkStatusEvent};
use crate::cluster::resend::Delivery;
use crate::cluster::{StoredWork, rules, work_rules};
use crate::keys::ObjectRef;
use crate::store::StoreError;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{
    HubWorkState, ManifestWork, SpecResyncRequest, SpecResyncResponse, WorkStatusReport,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long after a hub restart a loaded work whose spec the agent has not confirmed is sent
/// again (then the normal back-off applies).
const RESEND_AFTER_RESTART: Duration = Duration::from_secs(3);

/// A work and its delivery bookkeeping.
pub(super) struct WorkEntry {
    /// The stored work, shared with the works inventory (one copy per work on the hub; its
    /// status held encoded).
    pub(super) work: Arc<StoredWork>,
    pub(super) revision: u64,
    /// When the spec was sent, heard of since and acknowledged, and the re-send back-off.
    pub(super) delivery: Delivery,
    /// The trace of the apply that produced the current spec (re-sends carry it too).
    traceparent: Option<String>,
}

impl WorkEntry {
    /// The generation of the current spec.
    fn generation(&self) -> i64 {
        self.work.metadata.as_ref().map_or(0, |m| m.generation)
    }

    /// Whether the agent has not confirmed the current spec (or the deletion).
    pub(super) fn unconfirmed(&self) -> bool {
        let observed = self.work.hub.as_ref().map_or(0, |h| h.observed_generation);
        observed < self.generation()
            || self
                .work
                .metadata
                .as_ref()
                .is_some_and(|m| m.deletion_timestamp.is_some())
    }
}

impl Actor {
    /// The key of this cluster's work `name`.
    pub(super) fn work_ref(&self, name: &str) -> ObjectRef {
        ObjectRef::new(self.name.as_str(), name)
    }

    /// Adopts the works loaded from the store at start.
    pub(super) fn load_works(&mut self, works: Vec<(StoredWork, u64)>) {
        for (mut w, rev) in works {
            if let Some(m) = w.metadata.as_mut() {
                m.resource_version = rev;
            }
            let wname = w
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            let w = Arc::new(w);
            self.shared
                .works
                .upsert_shared(&self.work_ref(&wname).inventory_key(), w.clone());
            self.works.insert(
                wname,
                WorkEntry {
                    work: w,
                    revision: rev,
                    // Unconfirmed specs are re-sent soon after a restart: the agent may never
                    // have received a spec published just before the old hub died. Not at once —
                    // statuses already in the stream confirm most of them within moments.
                    delivery: Delivery::resumed(
                        Instant::now(),
                        self.shared.config.work_resend_after,
                        RESEND_AFTER_RESTART,
                    ),
                    traceparent: None,
                },
            );
        }
    }

    /// Creates or updates a work. When the write loses a race against the store — a write of
    /// this actor's own that was reported failed but landed — the stored work has been adopted
    /// meanwhile, and the apply is decided once more against it: applying the same document
    /// again then succeeds (idempotent apply) instead of failing forever.
    pub(super) async fn apply_work(
        &mut self,
        work: ManifestWork,
        only_new: bool,
    ) -> Result<ManifestWork, ClusterError> {
        let name = work
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        if only_new && self.works.contains_key(&name) {
            return Err(ClusterError::Conflict(format!(
                "ManifestWork {}/{name} was created meanwhile; its executor is checked on retry",
                self.name
            )));
        }
        let before = self.works.get(&name).map(|e| e.revision);
        match self.apply_work_once(work.clone()).await {
            Err(ClusterError::Conflict(_))
                if self.works.get(&name).map(|e| e.revision) != before =>
            {
                self.apply_work_once(work).await
            }
            result => result,
        }
    }

    async fn apply_work_once(
        &mut self,
        mut work: ManifestWork,
    ) -> Result<ManifestWork, ClusterError> {
        if self.cluster.is_none() {
            return Err(ClusterError::NotFound(format!(
                "managed cluster {:?}",
                self.name
            )));
        }
        let mut meta = work.metadata.take().unwrap_or_default();
        let name = meta.name.clone();
        let existing = self.works.get(&name);
        let (expected, next) = match existing {
            Some(e) => {
                let old = e.work.metadata.clone().unwrap_or_default();
                if old.deletion_timestamp.is_some() {
                    return Err(ClusterError::Precondition(format!(
                        "ManifestWork {}/{name} is being deleted; wait until it is gone",
                        self.name
                    )));
                }
                if meta.resource_version != 0 && meta.resource_version != e.revision {
                    return Err(ClusterError::Conflict(format!(
                        "ManifestWork {}/{name}: resourceVersion {} is stale (stored {}); get it again and retry",
                        self.name, meta.resource_version, e.revision
                    )));
                }
                // The stored work with the new spec (its status kept); an equal spec keeps the
                // shared one.
                let mut next = (*e.work).clone();
                let spec_changed = next.replace_spec(work.spec.as_ref());
                if !spec_changed && old.labels == meta.labels && old.annotations == meta.annotations
                {
                    return Ok(e.work.to_work());
                }
                crate::identity::keep(&mut meta, &old, spec_changed);
                if spec_changed {
                    meta.generation = self.next_generation(&name, meta.generation);
                }
                let hub = next.hub.get_or_insert_with(Default::default);
                if spec_changed {
                    hub.accepted_at = Some(meta::now());
                    hub.latency_recorded = false;
                }
                next.metadata = Some(meta);
                (e.revision, next)
            }
            None => {
                if meta.resource_version != 0 {
                    return Err(ClusterError::NotFound(format!(
                        "ManifestWork {}/{name}",
                        self.name
                    )));
                }
                crate::identity::create(&mut meta);
                // Above what the spoke holds of an orphan of this name (adopting it).
                meta.generation = self.next_generation(&name, meta.generation);
                let mut w = ManifestWork {
                    metadata: Some(meta),
                    spec: work.spec,
                    status: None,
                    hub: None,
                };
                w.hub = Some(HubWorkState {
                    accepted_at: Some(meta::now()),
                    resource_id: work_rules::resource_id(&w),
                    ..Default::default()
                });
                (0, StoredWork::from(w))
            }
        };
        let stored = self.persist_work(&name, next, expected).await?;
        if let Some(e) = self.works.get_mut(&name) {
            e.delivery.restart(self.shared.config.work_resend_after);
        }
        self.publish_work(&name).await;
        Ok(stored.to_work())
    }

    /// Writes a work with compare-and-set and publishes it to the works inventory.
    ///
    /// On a lost race the stored work is adopted before answering; when the outcome is unknown
    /// (an outage) the key is read again once the store answers ([`Actor::verify_works`]), so
    /// this actor, the API and the store never disagree for longer than the outage.
    pub(super) async fn persist_work(
        &mut self,
        name: &str,
        mut work: StoredWork,
        expected: u64,
    ) -> Result<Arc<StoredWork>, ClusterError> {
        if let Some(m) = work.metadata.as_mut() {
            m.resource_version = 0;
        }
        let written = self
            .work_bucket
            .write(&self.work_ref(name).store_key(), &work, expected)
            .await;
        let rev = match written {
            Ok(rev) => rev,
            Err(e) if e.is_conflict() => {
                // Boxed, as every rare path: actors awaiting a write keep a small future.
                if let Err(e) = Box::pin(self.adopt_stored_work(name)).await
                    && !e.is_corrupt()
                {
                    tracing::warn!(error = %e, work = %name, "re-reading a work after a lost race failed");
                    self.unsettled_works.note(name.to_string());
                }
                return Err(ClusterError::Conflict(format!(
                    "ManifestWork {}/{name} changed meanwhile; retry",
                    self.name
                )));
            }
            Err(e) => {
                self.unsettled_works.note(name.to_string());
                return Err(ClusterError::Unavailable(e.to_string()));
            }
        };
        if let Some(m) = work.metadata.as_mut() {
            m.resource_version = rev;
        }
        Ok(self.adopt(name, work, rev))
    }

    /// Takes `work` at revision `rev` as this cluster's work `name`, in the actor and the
    /// inventory. A work new to the actor has never been sent: the re-send timer sends it.
    fn adopt(&mut self, name: &str, work: StoredWork, rev: u64) -> Arc<StoredWork> {
        let work = Arc::new(work);
        self.shared
            .works
            .upsert_shared(&self.work_ref(name).inventory_key(), work.clone());
        let backoff = self.shared.config.work_resend_after;
        let entry = self.works.get_or_insert_with(name, || WorkEntry {
            work: work.clone(),
            revision: rev,
            delivery: Delivery::unsent(backoff),
            traceparent: None,
        });
        let generation = |w: &StoredWork| w.metadata.as_ref().map_or(0, |m| m.generation);
        if generation(&entry.work) != generation(&work) {
            // A spec this actor has not sent (the shard's previous holder stored it): sent on
            // the re-send timer's next tick. An apply sends at once after adopting.
            entry.delivery = Delivery::unsent(backoff);
        }
        entry.work = work.clone();
        entry.revision = rev;
        work
    }

    /// Reads a work's key again (from the stream's leader) and adopts what is stored when it is
    /// newer than this actor's: after a write whose outcome this actor did not see, or one the
    /// shard's previous holder made, the store is the truth. A work found only in the store is
    /// published to the agent by the re-send timer (it has never been sent).
    pub(super) async fn adopt_stored_work(&mut self, name: &str) -> Result<(), StoreError> {
        let key = self.work_ref(name);
        match self.work_bucket.get_latest(&key.store_key()).await? {
            Some((mut work, rev)) => {
                if self.works.get(name).is_some_and(|e| e.revision >= rev) {
                    return Ok(());
                }
                tracing::warn!(work = %name, revision = rev, "adopting the stored work: written by a write whose outcome was unknown, or by the shard's previous holder");
                if let Some(m) = work.metadata.as_mut() {
                    m.resource_version = rev;
                }
                self.adopt(name, work, rev);
            }
            None => {
                if self.works.remove(name).is_some() {
                    tracing::warn!(work = %name, "dropping a work the store does not hold");
                    self.shared.works.remove(&key.inventory_key());
                }
            }
        }
        Ok(())
    }

    /// Reads again every work whose last write had an unknown outcome, once the store answers.
    pub(super) async fn verify_works(&mut self) {
        for name in self.unsettled_works.take() {
            match self.adopt_stored_work(&name).await {
                Ok(()) => {}
                // Quarantined (said once): reading it again every second would find it again.
                Err(e) if e.is_corrupt() => {}
                Err(e) => {
                    tracing::debug!(error = %e, work = %name, "store still unavailable; will read the work again");
                    self.unsettled_works.note(name);
                }
            }
        }
    }

    /// A work's spec (or deletion) event, noted as sent now.
    fn spec_event_to_send(&mut self, name: &str) -> Option<flotilla_bus::Event> {
        let entry = self.works.get_mut(name)?;
        entry.delivery.sent(Instant::now());
        if let Some(tp) = flotilla_bus::trace::traceparent() {
            entry.traceparent = Some(tp);
        }
        let mut ev = work_rules::spec_event(&self.name, &entry.work, SOURCE);
        ev.traceparent = entry.traceparent.clone();
        Some(ev)
    }

    /// A work's spec event encoded for a resync answer, noted as sent now; None when the work is
    /// gone or its event exceeds the event limit (then it goes, and fails, as a spec event).
    fn spec_bytes(&mut self, name: &str) -> Option<bytes::Bytes> {
        let max = self.shared.config.max_event_bytes;
        self.spec_event_to_send(name)?.encode(max).ok()
    }

    /// Publishes a work's spec (or deletion) to the agent.
    pub(super) async fn publish_work(&mut self, name: &str) {
        let Some(ev) = self.spec_event_to_send(name) else {
            return;
        };
        match self
            .shared
            .publisher
            .publish(
                crate::wire::of(self.cluster.as_deref()).spec(&self.name),
                &ev,
            )
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_permanent() => {
                tracing::error!(error = %e, work = %name, "work spec cannot be sent");
            }
            Err(e) => {
                tracing::warn!(error = %e, work = %name, "publishing a work spec failed; it will be re-sent");
            }
        }
    }

    pub(super) async fn delete_work(&mut self, name: &str) -> Result<ManifestWork, ClusterError> {
        let Some(e) = self.works.get(name) else {
            return Err(ClusterError::NotFound(format!(
                "ManifestWork {}/{name}",
                self.name
            )));
        };
        let mut next = (*e.work).clone();
        let expected = e.revision;
        let m = next.metadata.get_or_insert_with(Default::default);
        if m.deletion_timestamp.is_none() {
            m.deletion_timestamp = Some(meta::now());
            mark_deleting(&mut next);
            next = Arc::unwrap_or_clone(self.persist_work(name, next, expected).await?);
        }
        if let Some(e) = self.works.get_mut(name) {
            e.delivery.restart(self.shared.config.work_resend_after);
        }
        self.publish_work(name).await;
        Ok(next.into_work())
    }

    pub(super) async fn work_status(&mut self, ev: WorkStatusEvent) {
        let WorkStatusEvent {
            report,
            resource_id,
            sequence,
            hash,
            server_time,
            ack,
            traceparent: _,
        } = ev;
        let ty = flotilla_bus::works::status_type().to_string();
        let name = report.work_name.clone();
        if !self.cluster.as_deref().is_some_and(rules::accepted) {
            self.shared.metrics.rejected(&ty, "not_accepted");
            self.purge_refused(ack).await;
            return;
        }
        let Some(entry) = self.works.get(&name) else {
            // Not (or no longer) known: the agent's next resync deletes it.
            self.shared.metrics.rejected(&ty, "unknown_work");
            self.purge_refused(ack).await;
            return;
        };
        if work_rules::resource_id_of(entry.work.metadata.as_ref()) != resource_id {
            self.shared.metrics.rejected(&ty, "resourceid_mismatch");
            self.purge_refused(ack).await;
            return;
        }
        let at = super::server_instant(server_time);
        self.heard_from(at);
        if self.receipt_only(&name, &report, at) {
            ack_message(ack).await;
            return;
        }
        let Some(entry) = self.works.get(&name) else {
            ack_message(ack).await;
            return;
        };
        // Its status is replaced below (or nothing is written).
        let mut next = entry.work.without_status();
        let expected = entry.revision;
        let hub = next.hub.get_or_insert_with(Default::default);
        if let Some(seq) = sequence {
            if seq <= hub.last_sequence {
                self.shared.metrics.rejected(&ty, "stale_sequence");
                ack_message(ack).await;
                return;
            }
            hub.last_sequence = seq;
        }
        if let Some(h) = &hash {
            if *h == hub.last_status_hash {
                ack_message(ack).await;
                return;
            }
            hub.last_status_hash = h.clone();
        }
        let deleting = next
            .metadata
            .as_ref()
            .is_some_and(|m| m.deletion_timestamp.is_some());
        if report.deleted && deleting {
            match Box::pin(self.work_bucket.purge(&self.work_ref(&name).store_key())).await {
                Ok(()) => {
                    self.works.remove(&name);
                    self.shared
                        .works
                        .remove(&self.work_ref(&name).inventory_key());
                    tracing::info!(work = %name, "work deleted");
                    ack_message(ack).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, work = %name, "removing a deleted work failed; JetStream will redeliver the report");
                }
            }
            return;
        }
        if let Some(latency) = work_rules::apply_status(&mut next, &report) {
            self.shared
                .metrics
                .work_latency_seconds
                .observe(latency.as_secs_f64());
        }
        if deleting {
            mark_deleting(&mut next);
        }
        match self.persist_work(&name, next, expected).await {
            Ok(_) => {
                if let Some(e) = self.works.get_mut(&name) {
                    e.delivery.restart(self.shared.config.work_resend_after);
                }
                ack_message(ack).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, work = %name, "work status not persisted; JetStream will redeliver it")
            }
        }
    }

    /// Takes the receipt `report` carries, if it is one (`received_generation` newer than the
    /// status it carries): the agent has the current spec and is applying it. Whether the report
    /// is only that, so nothing is written: the status it carries is the one stored, or older
    /// (an agent that lost its state acknowledges with none; storing it would wipe the status
    /// until the real one comes).
    fn receipt_only(&mut self, name: &str, report: &WorkStatusReport, at: Instant) -> bool {
        let Some(e) = self.works.get_mut(name) else {
            return false;
        };
        if report.received_generation <= report.observed_generation {
            return false;
        }
        if report.received_generation >= e.generation() {
            e.delivery.received(at);
        }
        let stored = e.work.hub.as_ref().map_or(0, |h| h.observed_generation);
        report.observed_generation < stored
            || (report.observed_generation == stored && e.work.status_is(report.status.as_ref()))
    }

    pub(super) async fn resync(
        &mut self,
        request: SpecResyncRequest,
        reply: Option<flotilla_bus::reply::ReplyTo>,
    ) {
        self.heard_from(Instant::now());
        let hub: BTreeMap<String, work_rules::HubVersion> = self
            .works
            .values()
            .map(|e| {
                let m = e.work.metadata.clone().unwrap_or_default();
                (
                    work_rules::resource_id_of(e.work.metadata.as_ref()),
                    work_rules::HubVersion {
                        generation: m.generation,
                        deleting: m.deletion_timestamp.is_some(),
                    },
                )
            })
            .collect();
        if !request.digest.is_empty() && request.versions.is_empty() {
            // Digest first: with nothing being deleted, equal digests mean equal generations.
            // The cluster's first resync since a recovery always sends its map: the digest
            // does not cover uids, and the spoke may hold another incarnation of a work at the
            // restored generation.
            let deleting = hub.values().any(|v| v.deleting);
            let in_sync = !deleting
                && self.unseen_recovery().is_none()
                && self.digest_matches(&hub, &request.digest);
            let resp = SpecResyncResponse {
                send_versions: !in_sync,
                resync_period_seconds: self.resync_period_seconds(),
                ..Default::default()
            };
            self.answer_resync(reply, &resp).await;
            return;
        }
        // Works whose stored record does not decode are unknown here, not gone.
        let held_back: std::collections::BTreeSet<String> =
            crate::store::quarantine::under(self.work_bucket.name(), &self.name)
                .iter()
                .map(|work| flotilla_bus::works::resource_id(&self.name, work))
                .collect();
        let (mut resend, strangers) = work_rules::resync_diff(&hub, &request.versions, &held_back);
        let (deleted, republish) = self
            .withhold(
                strangers,
                &mut resend,
                &request.versions,
                &request.uids,
                &hub,
            )
            .await;
        let by_id = self.names_by_id();
        // An agent that takes them gets the specs in the answer, up to a budget that keeps the
        // answer well inside the event limit of both sides (agents read answers up to the
        // default); the rest (and every spec of an older agent) go as spec events.
        let mut budget = self
            .shared
            .config
            .max_event_bytes
            .min(flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES)
            / 2;
        let mut specs = Vec::new();
        for id in &resend {
            let Some(name) = by_id.get(id).cloned() else {
                continue;
            };
            let in_answer = request
                .takes_specs
                .then(|| self.spec_bytes(&name))
                .flatten()
                .filter(|bytes| bytes.len() <= budget);
            match in_answer {
                Some(bytes) => {
                    budget -= bytes.len();
                    specs.push(bytes.to_vec());
                }
                None => self.publish_work(&name).await,
            }
        }
        tracing::debug!(
            resent = resend.len(),
            in_answer = specs.len(),
            deleted = deleted.len(),
            "spec resync answered"
        );
        let resp = SpecResyncResponse {
            deleted,
            republish,
            resent: resend.len() as u32,
            specs,
            resync_period_seconds: self.resync_period_seconds(),
            ..Default::default()
        };
        self.answer_resync(reply, &resp).await;
    }
    /// The periodic resync period this hub asks of the agent, from the fleet's size.
    fn resync_period_seconds(&self) -> u32 {
        crate::cluster::resync_period::answer_seconds(
            self.shared.inventory.len(),
            self.shared.config.periodic_resyncs_per_second,
        )
    }

    async fn answer_resync(
        &self,
        reply: Option<flotilla_bus::reply::ReplyTo>,
        resp: &SpecResyncResponse,
    ) {
        let Some(reply) = reply else { return };
        let ev = flotilla_bus::Event::new(
            flotilla_bus::works::resync_response_type(),
            SOURCE,
            self.name.clone(),
            resp,
        );
        reply.answer(&self.shared.publisher, &ev).await;
    }

    /// Whether some spec is unconfirmed and the agent is reachable (an unreachable agent resyncs
    /// when it comes back; re-sending into the void is waste, and idle actors must not tick).
    pub(super) fn resend_wanted(&self) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|c| rules::available(c) == Some(status::TRUE))
            && self.works.values().any(WorkEntry::unconfirmed)
    }

    /// The cluster was heard from at `at` (a renewal, a status, a resync or a registration
    /// reached the actor): the unconfirmed specs sent before it may be re-sent.
    pub(super) fn heard_from(&mut self, at: Instant) {
        for e in self.works.values_mut().filter(|e| e.unconfirmed()) {
            e.delivery.heard(at);
        }
    }

    /// Re-sends the unconfirmed specs whose time has come ([`Delivery::due`]), as far as the
    /// hub-wide budget allows; the rest wait for the next tick.
    ///
    /// Under a recovery window nothing goes to a cluster before its agent's first full resync
    /// since (the restored spec may be older than what the spoke runs: that answer decides),
    /// and never a spec an orphan record holds ([`crate::recovery::rules::held_from_resend`]).
    pub(super) async fn resend_unconfirmed(&mut self) {
        if self.unseen_recovery().is_some() {
            return;
        }
        let held = if self.shared.recovery.has_orphans(&self.name) {
            crate::recovery::rules::held_from_resend(&self.shared.recovery.known(&self.name))
        } else {
            std::collections::BTreeSet::new()
        };
        let longest = self.shared.config.work_resend_after * 16;
        let now = Instant::now();
        let due: Vec<(String, &'static str)> = self
            .works
            .iter()
            .filter(|(_, e)| e.unconfirmed())
            .filter(|(_, e)| {
                held.is_empty()
                    || !held.contains(&work_rules::resource_id_of(e.work.metadata.as_ref()))
            })
            .filter_map(|(n, e)| Some((n.clone(), e.delivery.due(now, longest)?.label())))
            .collect();
        let share = self.resend_budget.share();
        for (i, (name, reason)) in due.into_iter().enumerate() {
            // Past this cluster's share of the tick, or the budget spent: the next tick.
            if i >= share || !self.resend_budget.take(now) {
                self.shared.metrics.work_resends_deferred.inc();
                break;
            }
            self.shared.metrics.work_resent(reason);
            tracing::debug!(work = %name, reason, "re-sending an unconfirmed work spec");
            self.publish_work(&name).await;
            if let Some(e) = self.works.get_mut(&name) {
                e.delivery.resent(Instant::now(), longest);
                if e.delivery.suspect() {
                    tracing::warn!(
                        cluster = %self.name,
                        work = %name,
                        resends = e.delivery.resends(),
                        received = e.delivery.is_received(),
                        wire = ?crate::wire::of(self.cluster.as_deref()),
                        "a work's spec was re-sent again and again to a cluster that is heard from, with no status back; its agent does not get it, or its reports do not reach the hub"
                    );
                }
            }
        }
    }
}

impl Actor {
    /// The earliest instant a finished work's TTL runs out (the actor's timer); none while a
    /// recovery window covers the cluster (the restored work may be an older incarnation of
    /// what the spoke runs: its TTL waits until the agent's first resync since).
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        if self.recovery_covers() {
            return None;
        }
        let now = std::time::SystemTime::now();
        self.works
            .values()
            .filter_map(|e| work_rules::ttl_deadline(&e.work))
            .min()
            // Past deadlines (a delete that failed) are retried every half second, not in a spin.
            .map(|d| Instant::now() + d.duration_since(now).unwrap_or(Duration::from_millis(500)))
    }

    /// Deletes every finished work whose TTL ran out, as a `flotilla delete work` would.
    pub(super) async fn expire_works(&mut self) {
        if self.recovery_covers() {
            return;
        }
        let now = std::time::SystemTime::now();
        let due: Vec<String> = self
            .works
            .iter()
            .filter(|(_, e)| work_rules::ttl_deadline(&e.work).is_some_and(|d| d <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            match self.delete_work(&name).await {
                Ok(_) => tracing::info!(work = %name, "deleted after ttlSecondsAfterFinished"),
                Err(e) => {
                    tracing::warn!(work = %name, error = %e, "deleting a finished work failed; retrying")
                }
            }
        }
    }
}

fn mark_deleting(work: &mut StoredWork) {
    let mut st = work.status().unwrap_or_default();
    meta::set_condition(
        &mut st.conditions,
        flotilla_api::work::conditions::DELETING,
        status::TRUE,
        "Deleting",
        "Waiting for the agent to remove the work's resources",
    );
    work.set_status(Some(&st));
}

//! The WorkActor: one task per ManifestWork on the spoke.

use super::conditions::{self, ApplyResult, Health};
use super::drift::Drift;
use super::health::{Held, Shared};
use super::parsed::Parsed;
use super::{Ownership, Publisher, WorkConfig};
use crate::backend::{ApplyOutcome, Backend, BackendError, DriftSignal, Strategy};
use crate::store::LocalStore;
use flotilla_api::v1::{
    AppliedManifestWork, AppliedResource, Condition, ManifestCondition, ManifestResourceStatus,
    ManifestWork, ManifestWorkStatus, StatusFeedbackResult, WorkStatusReport,
};
use flotilla_api::work::ManifestId;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::Instrument;

mod handle;
mod removal;

pub use handle::WorkHandle;
pub(crate) use removal::orphaned;

/// How often a work with a `feedbackScrapeType: Watch` manifest is observed.
const WATCH_PERIOD: Duration = Duration::from_secs(1);

/// An observation ticker of `period`, its immediate first tick consumed.
async fn observer(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    tick
}

pub use super::parsed::DEFAULT_FIELD_MANAGER;
/// Every this many status ticks, manifests are applied again to repair drift.
const REAPPLY_EVERY: u32 = 30;
/// Status publishes in a row that fail before the work says so.
const UNSENT_WARN_AFTER: u32 = 3;
/// A new spec whose apply has not finished after this long is acknowledged to the hub
/// (`WorkStatusReport.received_generation`), so the hub does not take a slow apply for a lost
/// spec and re-send it. A quicker apply's status is its acknowledgement: the common case sends
/// nothing more than before.
const RECEIPT_AFTER: Duration = Duration::from_secs(2);
/// Then it says so again every this many failures.
const UNSENT_WARN_EVERY: u32 = 30;

enum WorkMsg {
    /// A new spec, with the hub's trace of it.
    Update(Box<ManifestWork>, Option<String>),
    Delete(Option<Box<ManifestWork>>),
    Republish,
}

/// The identity of an applied resource.
pub fn applied_id(a: &AppliedResource) -> ManifestId {
    ManifestId {
        group: a.group.clone(),
        version: a.version.clone(),
        kind: a.kind.clone(),
        namespace: a.namespace.clone(),
        name: a.name.clone(),
    }
}

fn applied_resource(id: &ManifestId) -> AppliedResource {
    AppliedResource {
        group: id.group.clone(),
        version: id.version.clone(),
        kind: id.kind.clone(),
        namespace: id.namespace.clone(),
        name: id.name.clone(),
    }
}

/// What a work actor starts from: its record, and the hub's trace of the spec when one just
/// arrived (none for works resumed from local state).
pub(super) struct Start {
    pub(super) record: AppliedManifestWork,
    pub(super) traceparent: Option<String>,
    /// The record's spec just arrived from the hub (not resumed from local state): its first
    /// apply acknowledges it when slow ([`RECEIPT_AFTER`]).
    pub(super) received: bool,
}

/// What every work actor of an agent shares (the manager holds one and hands each new actor
/// a copy): the cluster's name, the backend applying the manifests, the local store, the
/// status publisher, which work owns which resource, and the configuration.
#[derive(Clone)]
pub(super) struct Context {
    pub(super) cluster: String,
    pub(super) backend: Arc<dyn Backend>,
    pub(super) store: Arc<LocalStore>,
    pub(super) publisher: Publisher,
    pub(super) ownership: Arc<Mutex<Ownership>>,
    pub(super) config: WorkConfig,
}

/// Spawns the actor of a work.
pub(super) fn spawn(
    Start {
        record,
        traceparent,
        received,
    }: Start,
    Context {
        cluster,
        backend,
        store,
        publisher,
        ownership,
        config,
    }: Context,
) -> WorkHandle {
    let (tx, rx) = mpsc::channel(16);
    let shared = Arc::new(Shared::default());
    shared.hold(record.work.as_ref());
    let name = record
        .work
        .as_ref()
        .and_then(|w| w.metadata.as_ref())
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let span = tracing::info_span!("work", cluster.name = %cluster, work.name = %name);
    let (drift_signal, drift_rx) = DriftSignal::new();
    let actor = WorkActor {
        drift: Drift::new(config.drift),
        drift_signal,
        drift_rx,
        rid: record.resource_id.clone(),
        name,
        cluster,
        record,
        backend,
        store,
        publisher,
        ownership,
        config,
        traceparent,
        received,
        last_applied: HashMap::new(),
        manifests: Vec::new(),
        apply_results: Vec::new(),
        status: ManifestWorkStatus::default(),
        published_hash: None,
        unsent: 0,
        shared: shared.clone(),
        rx,
    };
    let task = tokio::spawn(actor.run().instrument(span)).abort_handle();
    WorkHandle { tx, shared, task }
}

fn generation_of(w: Option<&ManifestWork>) -> i64 {
    w.and_then(|w| w.metadata.as_ref())
        .map_or(0, |m| m.generation)
}

struct WorkActor {
    /// Drift repair's timing.
    drift: Drift,
    /// Bumped by the backend when someone else changes what this work applied.
    drift_signal: DriftSignal,
    drift_rx: tokio::sync::watch::Receiver<u64>,
    rid: String,
    name: String,
    cluster: String,
    record: AppliedManifestWork,
    backend: Arc<dyn Backend>,
    store: Arc<LocalStore>,
    publisher: Publisher,
    ownership: Arc<Mutex<Ownership>>,
    config: WorkConfig,
    /// The hub's trace of the spec this actor starts with.
    traceparent: Option<String>,
    /// The spec this actor starts with just arrived from the hub (see [`Start::received`]).
    received: bool,
    /// Per manifest ordinal: the values of ignoreFields paths this agent last applied.
    last_applied: HashMap<usize, HashMap<Vec<String>, Value>>,
    manifests: Vec<Parsed>,
    apply_results: Vec<ApplyResult>,
    status: ManifestWorkStatus,
    /// Hash of the last report the stream acknowledged.
    published_hash: Option<String>,
    /// Status publishes in a row the stream did not take.
    unsent: u32,
    shared: Arc<Shared>,
    rx: mpsc::Receiver<WorkMsg>,
}

impl WorkActor {
    /// The key of the work's anchor on the spoke: its resource id, scoped by the hub when the
    /// agent has several ([`super::WorkConfig::anchor_scope`]).
    fn anchor_key(&self) -> String {
        match &self.config.anchor_scope {
            Some(hub) => format!("{hub}-{}", self.rid),
            None => self.rid.clone(),
        }
    }

    async fn run(mut self) {
        let _held = Held::count(&self.config.metrics);
        self.serve().await;
    }

    /// The actor's loop. Every handler runs boxed, so the task of an idle work keeps only the
    /// loop's state, not the largest handler's (a fleet's agents hold thousands of idle works;
    /// a simulator, a work per agent).
    async fn serve(&mut self) {
        let shared = self.shared.clone();
        if self.record.deleting {
            shared.enter("delete");
            Box::pin(self.delete(None)).await;
        } else {
            shared.enter("apply");
            let span = apply_span(
                &self.cluster,
                &self.name,
                self.traceparent.take().as_deref(),
            );
            Box::pin(
                async {
                    self.parse();
                    if std::mem::take(&mut self.received) {
                        let receipt = self.receipt(generation_of(self.record.work.as_ref()), 0);
                        self.apply_acknowledged(receipt).await;
                    } else {
                        self.apply().await;
                    }
                    self.refresh_and_publish(false).await;
                }
                .instrument(span),
            )
            .await;
        }
        shared.leave();
        let mut period = self.observe_period();
        let mut tick = observer(period).await;
        let mut ticks: u32 = 0;
        while !shared.finished.load(Ordering::Relaxed) {
            let repair_due = self.drift.due();
            let repair_ends = self.drift.repair_ends();
            tokio::select! {
                Ok(()) = self.drift_rx.changed() => {
                    if !self.record.deleting {
                        self.drift.changed(std::time::Instant::now());
                    }
                }
                () = async {
                    if let Some(at) = repair_due {
                        tokio::time::sleep_until(at.into()).await;
                    }
                }, if repair_due.is_some() => {
                    shared.enter("repair");
                    Box::pin(self.repair()).await;
                }
                () = async {
                    if let Some(at) = repair_ends {
                        tokio::time::sleep_until(at.into()).await;
                    }
                }, if repair_ends.is_some() => {
                    // The last repair left the window: the work is no longer `Repaired`.
                    shared.enter("observe");
                    self.drift.forget(std::time::Instant::now());
                    Box::pin(self.refresh_and_publish(false)).await;
                }
                msg = self.rx.recv() => match msg {
                    None => break,
                    Some(WorkMsg::Update(work, traceparent)) => {
                        shared.enter("update");
                        let span = apply_span(&self.cluster, &self.name, traceparent.as_deref());
                        Box::pin(self.update(*work).instrument(span)).await;
                        // A new spec may start or stop watching its feedback.
                        if self.observe_period() != period {
                            period = self.observe_period();
                            tick = observer(period).await;
                        }
                    }
                    Some(WorkMsg::Delete(work)) => {
                        shared.enter("delete");
                        Box::pin(self.delete(work.map(|w| *w))).await;
                    }
                    Some(WorkMsg::Republish) => {
                        shared.enter("republish");
                        Box::pin(self.republish()).await;
                    }
                },
                _ = tick.tick() => {
                    shared.enter("observe");
                    ticks = ticks.wrapping_add(1);
                    Box::pin(self.observe(ticks, period)).await;
                }
            }
            shared.leave();
        }
    }

    /// The hub asked for the work's status again.
    async fn republish(&mut self) {
        if self.record.deleting {
            self.delete(None).await;
        } else {
            self.refresh_and_publish(true).await;
        }
    }

    /// A status tick: the status refreshed and published, and the manifests applied again when
    /// one failed or every [`Self::reapply_every`] ticks (the backstop of drift repair).
    async fn observe(&mut self, ticks: u32, period: Duration) {
        if self.record.deleting {
            self.delete(None).await;
            return;
        }
        let failed = self.apply_results.iter().any(|r| !r.applied);
        if failed || ticks.is_multiple_of(self.reapply_every(period)) {
            let written = self.apply().await;
            if !failed && !written.is_empty() {
                // Drift no watch reported, found by the periodic pass.
                self.config
                    .metrics
                    .drift_repairs
                    .inc_by(written.len() as u64);
                self.drift.put_back(std::time::Instant::now(), &written);
            }
        }
        self.drift.forget(std::time::Instant::now());
        self.refresh_and_publish(false).await;
    }

    fn work(&self) -> ManifestWork {
        self.record.work.clone().unwrap_or_default()
    }

    /// Applies again after someone else changed what this work applied, and reports it.
    async fn repair(&mut self) {
        let written = self.apply().await;
        let was_fighting = self.drift.fight().is_some();
        self.drift.repaired(std::time::Instant::now(), &written);
        if !written.is_empty() {
            self.config
                .metrics
                .drift_repairs
                .inc_by(written.len() as u64);
            tracing::info!(
                resources = written.len(),
                "repaired drift: resources changed on the cluster by someone else were applied again"
            );
        }
        if let (false, Some(fight)) = (was_fighting, self.drift.fight()) {
            self.config.metrics.drift_fights.inc();
            tracing::warn!(
                repairs = fight.repairs,
                backoff_seconds = fight.backoff.as_secs(),
                "someone keeps changing this work's resources back; repairs back off"
            );
        }
        self.refresh_and_publish(false).await;
    }

    async fn update(&mut self, work: ManifestWork) {
        if self.record.deleting {
            return;
        }
        let held = generation_of(self.record.work.as_ref());
        let incoming = generation_of(Some(&work));
        if incoming <= held {
            // A re-send: the hub has not seen our status for this generation.
            self.refresh_and_publish(true).await;
            return;
        }
        tracing::info!(generation = incoming, "applying a new generation");
        let receipt = self.receipt(incoming, held);
        super::condition_rules::clear(&mut self.status);
        self.shared.hold(Some(&work));
        self.record.work = Some(work);
        self.parse();
        self.apply_acknowledged(receipt).await;
        self.refresh_and_publish(false).await;
    }

    /// The acknowledgement of spec generation `received`: the status last published (of
    /// generation `held`; none before the first) with `received_generation` set.
    fn receipt(&self, received: i64, held: i64) -> WorkStatusReport {
        let status = (held > 0).then(|| self.status.clone());
        WorkStatusReport {
            cluster_name: self.cluster.clone(),
            work_name: self.name.clone(),
            resource_id: self.rid.clone(),
            observed_generation: held,
            status,
            deleted: false,
            received_generation: received,
        }
    }

    /// Applies the manifests; when that takes longer than [`RECEIPT_AFTER`], `receipt` is
    /// published meanwhile (once; a failure is left to the hub's re-send, as before).
    async fn apply_acknowledged(&mut self, receipt: WorkStatusReport) -> Vec<ManifestId> {
        let publisher = self.publisher.clone();
        let acknowledge = async move {
            tokio::time::sleep(RECEIPT_AFTER).await;
            publisher.publish(&receipt).await
        };
        let apply = self.apply();
        tokio::pin!(apply);
        tokio::select! {
            biased;
            writes = &mut apply => writes,
            sent = acknowledge => {
                match sent {
                    Ok(()) => tracing::debug!("slow apply: the spec's receipt acknowledged to the hub"),
                    Err(e) => tracing::debug!(error = %e, "acknowledging the spec's receipt failed"),
                }
                apply.await
            }
        }
    }

    /// Reads the held generation's manifests into their identities and options.
    fn parse(&mut self) {
        let spec = self.work().spec.unwrap_or_default();
        self.manifests = super::parsed::parse(&spec, self.config.raw_json);
    }

    /// Applies every manifest (Namespaces and CRDs first), then removes what the work no longer
    /// declares, and saves the record.
    /// Applies every manifest; returns the resources it wrote (created or changed).
    async fn apply(&mut self) -> Vec<ManifestId> {
        let mut written = Vec::new();
        let order = self.apply_order();
        let mut results =
            vec![apply_result(false, "NotApplied", String::new()); self.manifests.len()];
        let mut declared = Vec::new();
        let run = ApplyRun {
            anchor: self.anchor().await,
            policy: self.work().spec.and_then(|s| s.delete_option),
            // OCM's executor: every manifest is checked against its rights before it is
            // applied, and is written as the executor.
            executor: flotilla_api::work::Executor::of_work(&self.work()),
        };
        let complete = self.complete_manifests();
        for i in order {
            self.shared.progress();
            let m = &self.manifests[i];
            if complete.contains(&i) {
                // OCM: a manifest whose Complete rule holds is no longer updated (until the
                // work's next generation clears its rule conditions).
                results[i] = apply_result(
                    true,
                    "AppliedManifestComplete",
                    "Manifest is Complete; it is no longer updated".into(),
                );
                if let Ok(id) = &m.id {
                    declared.push(id.clone());
                }
                continue;
            }
            let id = match &m.id {
                Ok(id) => id.clone(),
                Err(e) => {
                    results[i] = apply_result(false, "InvalidManifest", e.clone());
                    continue;
                }
            };
            if m.strategy != Strategy::ReadOnly {
                declared.push(id.clone());
            }
            let (result, wrote) = self.apply_manifest(i, &id, &run).await;
            if wrote {
                written.push(id);
            }
            results[i] = result;
        }
        for r in &results {
            self.config.metrics.apply(r.applied);
        }
        self.apply_results = results;
        self.collect_garbage(declared).await;
        written
    }

    /// Manifest `i` of the held generation, parsed from the work's bytes (`null` when it is not
    /// JSON: its identity then failed in [`Self::parse`] and it is never applied).
    fn manifest_object(&self, i: usize) -> Value {
        self.record
            .work
            .as_ref()
            .and_then(|w| w.spec.as_ref())
            .and_then(|s| s.workload.as_ref())
            .and_then(|w| w.manifests.get(i))
            .and_then(|m| serde_json::from_slice(&m.raw).ok())
            .unwrap_or(Value::Null)
    }

    /// The order manifests are applied in: Namespaces and CustomResourceDefinitions first (what
    /// the others may need), then the rest in manifest order.
    fn apply_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.manifests.len()).collect();
        order.sort_by_key(|i| match &self.manifests[*i].id {
            Ok(id) if id.kind == "Namespace" || id.kind == "CustomResourceDefinition" => 0,
            _ => 1,
        });
        order
    }

    /// The work's anchor on the cluster (Kubernetes: an AppliedManifestWork), owner of every
    /// resource the delete option would delete, so the cluster's garbage collector removes what
    /// is left of the work when the anchor goes. `None` without one.
    async fn anchor(&self) -> Option<Value> {
        match self
            .backend
            .ensure_anchor(&self.anchor_key(), &self.name)
            .await
        {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "no anchor for the work's resources");
                None
            }
        }
    }

    /// Applies manifest `i` (its `id`) as the work's executor, when the executor may: owned by
    /// the anchor unless the delete option orphans it or it is read-only, its ignored fields
    /// shaped from what the cluster holds. Its result, and whether it wrote.
    async fn apply_manifest(
        &mut self,
        i: usize,
        id: &ManifestId,
        run: &ApplyRun,
    ) -> (ApplyResult, bool) {
        let manifest = self.manifest_object(i);
        let m = &self.manifests[i];
        let executor = run.executor.as_ref();
        let orphan = orphaned(id, run.policy.as_ref());
        let verbs = crate::backend::executor_verbs(&m.strategy, !orphan);
        if let Err(e) = self
            .backend
            .authorize(executor, id, &manifest, &verbs)
            .await
        {
            tracing::info!(resource = %id.describe(), error = %e, "not applied: the executor may not");
            let message = format!("{}: {e}", id.describe());
            return (apply_result(false, "AppliedManifestFailed", message), false);
        }
        let owned = match &run.anchor {
            Some(owner) if !orphan && m.strategy != Strategy::ReadOnly => {
                Some(with_owner(&manifest, owner))
            }
            _ => None,
        };
        let object = owned.as_ref().unwrap_or(&manifest);
        let shaped;
        let object = match &m.ignore {
            Some(ignore) => {
                let live = self.backend.get_as(executor, id).await.ok().flatten();
                let last = self.last_applied.entry(i).or_default();
                shaped = ignore.shape(object, live.as_ref(), last);
                &shaped
            }
            None => object,
        };
        match self
            .backend
            .apply_as(executor, id, object, &m.strategy)
            .await
        {
            Ok(outcome) => {
                let wrote = matches!(outcome, ApplyOutcome::Created | ApplyOutcome::Updated);
                if wrote {
                    tracing::debug!(resource = %id.describe(), ?outcome, "applied");
                }
                if m.strategy == Strategy::ReadOnly {
                    let message = "the resource is only observed".into();
                    return (apply_result(true, "ReadOnly", message), wrote);
                }
                self.backend.follow(executor, id, &self.drift_signal).await;
                let message = "Apply manifest complete".into();
                (
                    apply_result(true, "AppliedManifestComplete", message),
                    wrote,
                )
            }
            Err(e @ BackendError::Conflict { .. }) => {
                (apply_result(false, "ApplyConflict", e.to_string()), false)
            }
            Err(e) => {
                let message = format!("{}: {e}", id.describe());
                (apply_result(false, "AppliedManifestFailed", message), false)
            }
        }
    }

    /// How often resources are observed: every second when a manifest's `feedbackScrapeType`
    /// is `Watch` (OCM watches it; reads come from the backend's watch caches or memory, so a
    /// fast re-check is cheap), else the status interval (`Poll`).
    fn observe_period(&self) -> Duration {
        let watched = self.work().spec.is_some_and(|s| {
            s.manifest_configs
                .iter()
                .any(|c| c.feedback_scrape_type == "Watch")
        });
        if watched {
            self.config.status_interval.min(WATCH_PERIOD)
        } else {
            self.config.status_interval
        }
    }

    /// Observation ticks between re-applies, so that drift is corrected on the same schedule
    /// whatever the observation period.
    fn reapply_every(&self, period: Duration) -> u32 {
        let per_interval = self.config.status_interval.as_millis() / period.as_millis().max(1);
        REAPPLY_EVERY * u32::try_from(per_interval.max(1)).unwrap_or(1)
    }

    /// Ordinals of manifests whose `Complete` condition rule holds.
    fn complete_manifests(&self) -> Vec<usize> {
        self.status
            .resource_status
            .as_ref()
            .map(|rs| {
                rs.manifests
                    .iter()
                    .filter(|m| {
                        m.conditions.iter().any(|c| {
                            c.r#type == super::condition_rules::COMPLETE
                                && c.status == flotilla_api::meta::status::TRUE
                                && super::condition_rules::from_rule(c)
                        })
                    })
                    .filter_map(|m| m.resource_meta.as_ref().map(|r| r.ordinal as usize))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Observes every resource (as the work's executor), updates conditions and feedback, and
    /// publishes when changed.
    async fn refresh_and_publish(&mut self, force: bool) {
        let generation = generation_of(self.record.work.as_ref());
        let executor = flotilla_api::work::Executor::of_work(&self.work());
        let mut manifests: Vec<ManifestCondition> = Vec::with_capacity(self.manifests.len());
        let previous = self
            .status
            .resource_status
            .take()
            .map(|r| r.manifests)
            .unwrap_or_default();
        for (i, m) in self.manifests.iter().enumerate() {
            self.shared.progress();
            let mut conds: Vec<Condition> = previous
                .iter()
                .find(|p| {
                    p.resource_meta
                        .as_ref()
                        .is_some_and(|r| r.ordinal == i as i32)
                })
                .map(|p| p.conditions.clone())
                .unwrap_or_default();
            let apply = self.apply_results.get(i).cloned().unwrap_or(ApplyResult {
                applied: false,
                reason: "NotApplied".into(),
                message: String::new(),
            });
            let mut rule_conditions = Vec::new();
            let (meta, observed, feedback) = match &m.id {
                Ok(id) => {
                    let observed = self
                        .backend
                        .get_as(executor.as_ref(), id)
                        .await
                        .ok()
                        .flatten();
                    if let Some(rules) = &m.condition_rules {
                        rule_conditions = rules.evaluate(id, observed.as_ref());
                    }
                    let health: Option<Health> = observed
                        .as_ref()
                        .map(|o| conditions::health(&id.group, &id.kind, o));
                    let feedback = match (&m.rules, &observed) {
                        (Some(rules), Some(obj)) => Some(rules.evaluate(&id.group, &id.kind, obj)),
                        (Some(_), None) => Some(flotilla_api::feedback::FeedbackResult {
                            values: vec![],
                            errors: vec!["the resource does not exist".into()],
                        }),
                        (None, _) => None,
                    };
                    let meta = super::report::resource_meta(m.ordinal, Some(id));
                    (meta, health, feedback)
                }
                Err(_) => (super::report::resource_meta(m.ordinal, None), None, None),
            };
            conditions::manifest_conditions(
                &mut conds,
                &apply,
                observed.as_ref(),
                feedback.as_ref().map(|f| f.errors.as_slice()),
            );
            super::condition_rules::merge(&mut conds, &rule_conditions);
            let values = super::report::feedback_values(feedback);
            manifests.push(ManifestCondition {
                resource_meta: Some(meta),
                status_feedback: Some(StatusFeedbackResult { values }),
                conditions: conds,
            });
        }
        let refs: Vec<&[Condition]> = manifests.iter().map(|m| m.conditions.as_slice()).collect();
        super::condition_rules::aggregate(&mut self.status.conditions, &refs);
        conditions::work_conditions(&mut self.status.conditions, &refs, generation);
        let window = self.drift.rules().window;
        super::report::contested(&mut self.status.conditions, self.drift.fight(), window);
        super::report::repaired(&mut self.status.conditions, self.drift.last_repair());
        self.status.resource_status = Some(ManifestResourceStatus { manifests });
        let report = WorkStatusReport {
            cluster_name: self.cluster.clone(),
            work_name: self.name.clone(),
            resource_id: self.rid.clone(),
            observed_generation: generation,
            status: Some(self.status.clone()),
            deleted: false,
            received_generation: 0,
        };
        let hash = Publisher::hash(&report);
        if !force && self.published_hash.as_deref() == Some(hash.as_str()) {
            return;
        }
        let sent = self.publisher.publish(&report).await;
        self.note_sent(&sent);
        if sent.is_ok() {
            self.published_hash = Some(hash);
        }
    }

    /// Says when the work's status has not reached the hub's stream for a while (at the third
    /// failure in a row, then every [`UNSENT_WARN_EVERY`]th), and when it gets through again:
    /// retries are silent otherwise, and a work the hub never hears of looks applied here.
    fn note_sent(&mut self, sent: &Result<(), super::StatusNotSent>) {
        match sent {
            Ok(()) => {
                if self.unsent >= UNSENT_WARN_AFTER {
                    tracing::info!(
                        attempts = self.unsent + 1,
                        "work status taken by the hub's stream again"
                    );
                }
                self.unsent = 0;
            }
            Err(e) => {
                self.unsent = self.unsent.saturating_add(1);
                if self.unsent == UNSENT_WARN_AFTER || self.unsent.is_multiple_of(UNSENT_WARN_EVERY)
                {
                    tracing::warn!(
                        error = %e,
                        failures = self.unsent,
                        "work status not taken by the hub's stream; retrying on every status tick"
                    );
                }
            }
        }
    }
}

/// `object` with `owner` added to its ownerReferences (once).
fn with_owner(object: &serde_json::Value, owner: &serde_json::Value) -> serde_json::Value {
    let mut o = object.clone();
    let refs = o["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !refs.iter().any(|r| r["uid"] == owner["uid"]) {
        let mut refs = refs;
        refs.push(owner.clone());
        o["metadata"]["ownerReferences"] = serde_json::Value::Array(refs);
    }
    o
}

/// The span of applying a spec: a child of the hub's span when the spec event carried one, so
/// that the agent's status event (which carries this span's `traceparent`) continues the trace.
fn apply_span(cluster: &str, work: &str, traceparent: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!("work.apply", cluster.name = %cluster, work.name = %work);
    flotilla_bus::trace::follow(&span, traceparent);
    span
}

/// What every manifest of one apply shares.
struct ApplyRun {
    /// The work's anchor on the cluster ([`WorkActor::anchor`]).
    anchor: Option<Value>,
    /// The work's delete option.
    policy: Option<flotilla_api::v1::DeleteOption>,
    /// The work's executor (`None`: the agent itself).
    executor: Option<flotilla_api::work::Executor>,
}

fn apply_result(applied: bool, reason: &str, message: String) -> ApplyResult {
    ApplyResult {
        applied,
        reason: reason.into(),
        message,
    }
}

//! ManifestWork execution on the spoke.
//!
//! - [`WorkManager`]: receives work spec events, spawns one [`actor`] per ManifestWork, answers
//!   the hub's read-only proxy queries, builds spec resync requests and applies their answers.
//! - [`actor`]: one task per work — applies manifests in dependency order with their update
//!   strategy, garbage-collects what the work no longer declares (never a resource another work
//!   still declares), observes resources and their feedback, publishes status when it changes,
//!   acknowledges a new spec whose apply is slow (so the hub does not re-send it), and deletes
//!   per the delete option.
//! - [`conditions`]: manifest and work conditions with OCM's aggregation.
//! - `health`: what an actor shares with its handle for the manager's health check
//!   ([`WorkManager::check_actors`]): the step it runs and since when.
//!
//! Feedback rules and the JSONPath engine they use live in [`flotilla_api::feedback`], so the hub
//! checks rules with the same code the agent evaluates them with.

pub mod actor;
pub mod condition_rules;
pub mod conditions;
pub mod drift;
mod health;
pub mod ignore;
mod parsed;
mod report;

pub use health::Stall;

use crate::backend::Backend;
use crate::store::LocalStore;
use crate::warn_budget::{Allow, WarnBudget};
use flotilla_api::feedback::RawJson;
use flotilla_api::v1::{
    AppliedManifestWork, ManifestWork, ProxyRequest, ProxyResponse, WorkStatusReport,
};
use flotilla_api::work::ManifestId;
use flotilla_bus::envelope::{Action, Event, types};
use flotilla_bus::publish::{PublishError, Publisher as EventPublisher};
use flotilla_bus::works;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which works declare which resources: a resource is deleted only when no work declares it.
#[derive(Default, Debug)]
pub struct Ownership {
    owners: HashMap<ManifestId, BTreeSet<String>>,
}

impl Ownership {
    /// Records that work `rid` declares `id`.
    pub fn add(&mut self, id: &ManifestId, rid: &str) {
        self.owners
            .entry(id.clone())
            .or_default()
            .insert(rid.to_string());
    }

    /// Forgets that `rid` declares `id`; returns whether another work still declares it.
    pub fn release(&mut self, id: &ManifestId, rid: &str) -> bool {
        match self.owners.get_mut(id) {
            Some(set) => {
                set.remove(rid);
                let shared = !set.is_empty();
                if !shared {
                    self.owners.remove(id);
                }
                shared
            }
            None => false,
        }
    }

    /// Whether a work other than `rid` declares `id`.
    pub fn shared(&self, id: &ManifestId, rid: &str) -> bool {
        self.owners
            .get(id)
            .is_some_and(|s| s.iter().any(|o| o != rid))
    }
}

/// Work execution settings.
#[derive(Debug, Clone)]
pub struct WorkConfig {
    /// How often resources are observed (status, feedback).
    pub status_interval: Duration,
    /// Largest event.
    pub max_event_bytes: usize,
    /// How feedback values other than one integer, string or boolean are treated (the
    /// `RawFeedbackJsonString` feature gate).
    pub raw_json: RawJson,
    /// Where applies and works are counted.
    pub metrics: Arc<crate::metrics::AgentMetrics>,
    /// When drift seen by the backend's watches is repaired.
    pub drift: drift::DriftRules,
    /// With several hubs: the hub's name, which scopes the names of the works' anchors on
    /// the spoke (`flotilla-<hub>-<resourceid>`): a work's resource id is derived from the
    /// cluster and the work's name, so two hubs' same-named works would otherwise share one
    /// anchor, and one hub deleting its work would collect the other's resources.
    pub anchor_scope: Option<Arc<str>>,
    /// How long one step of a work's actor (applying, observing or deleting one resource, a
    /// publish) may run before it is reported stalled; [`STALL_RESTART_FACTOR`] times that,
    /// it is restarted. Each finished step starts the clock again, so a work of many resources
    /// on a slow API server is not taken for a stalled one.
    pub stall_after: Duration,
}

impl Default for WorkConfig {
    fn default() -> Self {
        Self {
            status_interval: Duration::from_secs(10),
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            raw_json: RawJson::Disabled,
            metrics: Arc::default(),
            anchor_scope: None,
            drift: drift::DriftRules::default(),
            stall_after: DEFAULT_STALL_AFTER,
        }
    }
}

/// How long one step of a work's actor may run before the manager reports it stalled.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(60);
/// A stalled actor is stopped and started again after this many times
/// [`WorkConfig::stall_after`].
pub const STALL_RESTART_FACTOR: u32 = 5;

/// How long a status publish waits for the stream's acknowledgement (and a proxy answer for
/// the client to take it).
const STATUS_PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// Publishes work status into the status stream.
#[derive(Clone)]
pub struct Publisher {
    events: EventPublisher,
    store: Arc<LocalStore>,
    cluster: String,
    source: String,
    metrics: Arc<crate::metrics::AgentMetrics>,
}

impl Publisher {
    /// A publisher for `cluster` (acknowledgements through `spoke` on the prefix wire).
    pub fn new(
        js: &async_nats::jetstream::Context,
        spoke: Option<flotilla_bus::spoke::Spoke>,
        store: Arc<LocalStore>,
        cluster: &str,
        max_event_bytes: usize,
        metrics: Arc<crate::metrics::AgentMetrics>,
    ) -> Self {
        Self {
            metrics,
            events: EventPublisher::over(js, max_event_bytes, STATUS_PUBLISH_TIMEOUT)
                .with_spoke(spoke),
            store,
            cluster: cluster.to_string(),
            source: format!("flotilla-agent/{cluster}"),
        }
    }

    /// The status hash of a report (what the hub de-duplicates on).
    pub fn hash(report: &WorkStatusReport) -> String {
        flotilla_bus::ids::status_hash(&prost::Message::encode_to_vec(report))
    }

    /// Publishes a report into the hub's stream; an error when the stream did not take it
    /// (offline, or no acknowledgement in time): the caller retries.
    pub async fn publish(&self, report: &WorkStatusReport) -> Result<(), StatusNotSent> {
        let seq = match self.store.next_sequence() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "saving the sequence counter failed");
                return Err(e.into());
            }
        };
        let mut ev = Event::new(
            works::status_type(),
            self.source.clone(),
            self.cluster.clone(),
            report,
        );
        // Inside an apply's span the status continues the work's trace at the hub.
        ev.traceparent = flotilla_bus::trace::traceparent();
        let ev = ev
            .with_sequence(seq)
            .with_status_hash()
            .with_resource_id(report.resource_id.clone())
            .with_resource_version(report.observed_generation);
        let subject = works::status_subject(&self.cluster, &report.resource_id);
        let sent = match self.events.publish_acked(subject, &ev).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_permanent() => {
                tracing::error!(error = %e, work = %report.work_name, "work status cannot be sent");
                return Err(e.into());
            }
            Err(e) => {
                tracing::debug!(error = %e, "work status publish failed; will retry");
                Err(e.into())
            }
        };
        self.metrics.status(sent.is_ok());
        sent
    }
}

/// Why a work status did not reach the hub's stream.
#[derive(Debug, thiserror::Error)]
pub enum StatusNotSent {
    /// The local store could not save the next sequence number.
    #[error("saving the sequence counter failed: {0}")]
    Sequence(#[from] crate::store::StoreError),
    /// The publish failed or was not acknowledged in time.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// All works on this cluster.
pub struct WorkManager {
    /// What every work actor shares.
    ctx: actor::Context,
    actors: HashMap<String, actor::WorkHandle>,
}

impl WorkManager {
    /// Loads the works kept in the local store and restarts their actors (edge autonomy: an
    /// agent restarted offline keeps managing what it applied).
    pub fn start(
        cluster: &str,
        backend: Arc<dyn Backend>,
        store: Arc<LocalStore>,
        publisher: Publisher,
        config: WorkConfig,
    ) -> Result<Self, crate::store::StoreError> {
        let records = store.load_works()?;
        let ownership = Arc::new(Mutex::new(Ownership::default()));
        {
            let mut own = ownership.lock().expect("ownership lock");
            for r in &records {
                for a in &r.applied {
                    own.add(&actor::applied_id(a), &r.resource_id);
                }
            }
        }
        let mut this = Self {
            ctx: actor::Context {
                cluster: cluster.to_string(),
                backend,
                store,
                publisher,
                ownership,
                config,
            },
            actors: HashMap::new(),
        };
        for r in records {
            tracing::info!(work = %r.work.as_ref().and_then(|w| w.metadata.as_ref()).map(|m| m.name.clone()).unwrap_or_default(), "resuming a work from local state");
            let rid = r.resource_id.clone();
            let handle = this.spawn(r);
            this.actors.insert(rid, handle);
        }
        Ok(this)
    }

    /// Keeps the resources other hubs' parked works declare (several hubs): a work of this
    /// hub that declares one too never deletes it, as if the parked work were one of ours.
    pub fn keep_parked(&self, parked: &[(ManifestId, String)]) {
        let mut own = self.ctx.ownership.lock().expect("ownership lock");
        for (id, owner) in parked {
            own.add(id, owner);
        }
    }

    /// Starts the actor of a work resumed from its record.
    fn spawn(&self, record: AppliedManifestWork) -> actor::WorkHandle {
        self.spawn_from(actor::Start {
            record,
            traceparent: None,
            received: false,
        })
    }

    fn spawn_from(&self, start: actor::Start) -> actor::WorkHandle {
        actor::spawn(start, self.ctx.clone())
    }

    /// `{resourceid: generation}` of every work held (for the spec resync). A work whose actor
    /// died is not held: the hub then re-sends it.
    pub fn versions(&self) -> HashMap<String, i64> {
        self.actors
            .iter()
            .filter(|(_, h)| !h.is_finished() && !h.is_dead())
            .map(|(rid, h)| (rid.clone(), h.generation()))
            .collect()
    }

    /// `{resourceid: uid}` of every work [`Self::versions`] holds whose uid is known (the spec
    /// resync's `uids`: which incarnation of each work this agent runs).
    pub fn uids(&self) -> HashMap<String, String> {
        self.actors
            .iter()
            .filter(|(_, h)| !h.is_finished() && !h.is_dead())
            .map(|(rid, h)| (rid.clone(), h.uid()))
            .filter(|(_, uid)| !uid.is_empty())
            .collect()
    }

    /// The health check of the works' actors (on the agent's status tick): an actor whose task
    /// ended without finishing its work (a panic) is started again from its saved record; one
    /// whose current step has run for over [`WorkConfig::stall_after`] is reported (once per stall),
    /// and stopped and started again from its record after [`STALL_RESTART_FACTOR`] times
    /// that. Either would otherwise leave a work whose status the hub never hears, with
    /// nothing said: the hub's re-sends and the resyncs reach the same actor.
    pub fn check_actors(&mut self) {
        let dead: Vec<String> = self
            .actors
            .iter()
            .filter(|(_, h)| h.is_dead())
            .map(|(rid, _)| rid.clone())
            .collect();
        for rid in dead {
            self.restart_dead(&rid);
        }
        let after = self.ctx.config.stall_after;
        let mut stuck = Vec::new();
        for (rid, h) in &self.actors {
            let Some(stall) = h.stall(after) else {
                continue;
            };
            if stall.first {
                self.ctx.config.metrics.work_actor_stalls.inc();
                // Every agent of a starved simulator says it at once: a process-wide budget.
                static STALLS: WarnBudget = WarnBudget::new();
                if let Allow::Say { left_out } = STALLS.allow() {
                    tracing::warn!(
                        resource_id = %rid,
                        doing = stall.doing,
                        seconds = stall.for_.as_secs(),
                        left_out,
                        "a work's actor has been busy with one step for too long; its status waits"
                    );
                }
            }
            if stall.for_ >= after * STALL_RESTART_FACTOR {
                tracing::error!(
                    resource_id = %rid,
                    doing = stall.doing,
                    seconds = stall.for_.as_secs(),
                    "a work's actor is still stuck: stopping it and starting it again from its record"
                );
                h.abort();
                stuck.push(rid.clone());
            }
        }
        for rid in stuck {
            self.restart_dead(&rid);
        }
    }

    /// Starts the actor of `rid` again from its saved record after its task ended without
    /// finishing; without a record (it died before its first apply saved one) the work is
    /// forgotten, and the next resync asks the hub for it.
    fn restart_dead(&mut self, rid: &str) {
        self.actors.remove(rid);
        self.ctx.config.metrics.work_actor_restarts.inc();
        match self.ctx.store.load_work(rid) {
            Ok(Some(record)) => {
                tracing::error!(resource_id = %rid, "a work's actor stopped without finishing its work; starting it again from its record");
                let handle = self.spawn(record);
                self.actors.insert(rid.to_string(), handle);
            }
            Ok(None) => {
                tracing::error!(resource_id = %rid, "a work's actor stopped before saving its record; the next resync asks the hub for the work");
            }
            Err(e) => {
                tracing::error!(resource_id = %rid, error = %e, "a work's actor stopped and its record cannot be read; the next resync asks the hub for the work");
            }
        }
    }

    /// Handles a work spec event from the hub.
    pub async fn on_spec(&mut self, event: &Event) {
        self.actors.retain(|_, h| !h.is_finished());
        let action = event.event_type.action;
        let work: ManifestWork = match event.decode_data("ManifestWork") {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "malformed work spec dropped");
                return;
            }
        };
        let meta = work.metadata.clone().unwrap_or_default();
        if meta.namespace != self.ctx.cluster {
            tracing::warn!(namespace = %meta.namespace, work = %meta.name, "work spec for another cluster rejected");
            return;
        }
        let rid = works::resource_id(&meta.namespace, &meta.name);
        if event.resource_id.as_deref() != Some(rid.as_str()) {
            tracing::warn!(work = %meta.name, "work spec whose resourceid does not match its name rejected");
            return;
        }
        if action == Action::DeleteRequest || meta.deletion_timestamp.is_some() {
            match self.actors.get(&rid) {
                Some(h) => h.delete(work).await,
                None => {
                    // Nothing here (already deleted, or never received): confirm at once.
                    let report = WorkStatusReport {
                        cluster_name: self.ctx.cluster.clone(),
                        work_name: meta.name.clone(),
                        resource_id: rid.clone(),
                        observed_generation: meta.generation,
                        status: None,
                        deleted: true,
                        received_generation: 0,
                    };
                    if let Err(e) = self.ctx.publisher.publish(&report).await {
                        tracing::debug!(error = %e, work = %meta.name, "confirming an unknown work's deletion failed; the hub asks again");
                    }
                }
            }
            return;
        }
        let errors = flotilla_api::work::validate(&work);
        if !errors.is_empty() {
            tracing::warn!(work = %meta.name, errors = ?errors, "invalid work spec rejected");
            return;
        }
        if self
            .actors
            .get(&rid)
            .is_some_and(actor::WorkHandle::is_dead)
        {
            self.restart_dead(&rid);
        }
        match self.actors.get(&rid) {
            Some(h) => h.update(work, event.traceparent.clone()).await,
            None => {
                let record = AppliedManifestWork {
                    resource_id: rid.clone(),
                    work: Some(work),
                    applied: Vec::new(),
                    deleting: false,
                };
                let handle = self.spawn_from(actor::Start {
                    record,
                    traceparent: event.traceparent.clone(),
                    received: true,
                });
                self.actors.insert(rid, handle);
            }
        }
    }

    /// Deletes works the hub no longer has (from a resync answer), per their delete options.
    pub async fn delete_unknown(&mut self, ids: &[String]) {
        for rid in ids {
            if let Some(h) = self.actors.get(rid) {
                tracing::info!(resource_id = %rid, "the hub no longer has this work: deleting it");
                h.delete_as_held().await;
            }
        }
    }

    /// Asks the works the hub names (by resource id, from a resync answer) to publish their
    /// status again; ids it does not hold are ignored.
    pub async fn republish(&self, ids: &[String]) {
        for rid in ids {
            if let Some(h) = self.actors.get(rid) {
                h.republish().await;
            }
        }
    }

    /// Asks every work to publish its status again (after a reconnect).
    pub async fn republish_all(&self) {
        for h in self.actors.values() {
            h.republish().await;
        }
    }

    /// Answers a proxy query from the hub.
    pub async fn proxy(&self, req: &ProxyRequest) -> ProxyResponse {
        let ns = (!req.namespace.is_empty()).then_some(req.namespace.as_str());
        let listed = if req.group_given || !req.group.is_empty() {
            self.ctx
                .backend
                .list_in_group(&req.group, &req.kind, ns)
                .await
        } else {
            self.ctx.backend.list(&req.kind, ns).await
        };
        match listed {
            Ok(objects) => {
                let objects: Vec<Vec<u8>> = objects
                    .into_iter()
                    .filter(|o| req.name.is_empty() || o["metadata"]["name"] == req.name.as_str())
                    .filter_map(|o| serde_json::to_vec(&o).ok())
                    .collect();
                if objects.is_empty() && !req.name.is_empty() {
                    return ProxyResponse {
                        objects: vec![],
                        error: format!(
                            "{} {:?} not found{}",
                            req.kind,
                            req.name,
                            ns.map(|n| format!(" in namespace {n:?}"))
                                .unwrap_or_default()
                        ),
                    };
                }
                ProxyResponse {
                    objects,
                    error: String::new(),
                }
            }
            Err(e) => ProxyResponse {
                objects: vec![],
                error: e.to_string(),
            },
        }
    }

    /// Handles a proxy request message and replies.
    pub async fn on_proxy(&self, client: &async_nats::Client, msg: async_nats::Message) {
        let Some(reply) = msg.reply.clone() else {
            return;
        };
        let response = match Event::decode(&msg.payload, self.ctx.config.max_event_bytes) {
            Ok(ev) if ev.cluster != self.ctx.cluster => ProxyResponse {
                objects: vec![],
                error: format!(
                    "this agent serves cluster {:?}, not {:?}",
                    self.ctx.cluster, ev.cluster
                ),
            },
            Ok(ev) if ev.event_type == types::proxy_request() => {
                match ev.decode_data::<ProxyRequest>("ProxyRequest") {
                    Ok(req) => self.proxy(&req).await,
                    Err(e) => ProxyResponse {
                        objects: vec![],
                        error: e.to_string(),
                    },
                }
            }
            Ok(ev) => ProxyResponse {
                objects: vec![],
                error: format!("unexpected event type {}", ev.event_type),
            },
            Err(e) => ProxyResponse {
                objects: vec![],
                error: e.to_string(),
            },
        };
        let ev = Event::new(
            types::proxy_response(),
            format!("flotilla-agent/{}", self.ctx.cluster),
            self.ctx.cluster.clone(),
            &response,
        );
        let answers = EventPublisher::new(
            client.clone(),
            self.ctx.config.max_event_bytes,
            STATUS_PUBLISH_TIMEOUT,
        );
        match answers.publish(reply.to_string(), &ev).await {
            Err(PublishError::TooLarge { size, max, .. }) => {
                // Too many objects for one message: say so instead of timing out.
                let short = ProxyResponse {
                    objects: vec![],
                    error: format!(
                        "answer too large (event is {size} bytes, over the {max}-byte limit); \
                         ask for one namespace or one name"
                    ),
                };
                let ev = Event::new(
                    types::proxy_response(),
                    format!("flotilla-agent/{}", self.ctx.cluster),
                    self.ctx.cluster.clone(),
                    &short,
                );
                if let Err(e) = answers.publish(reply.to_string(), &ev).await {
                    tracing::debug!(error = %e, "proxy answer not sent");
                }
            }
            Err(e) => tracing::debug!(error = %e, "proxy answer not sent"),
            Ok(()) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ManifestId {
        ManifestId {
            group: "".into(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_resource_declared_by_two_works_survives_one_release() {
        let mut o = Ownership::default();
        o.add(&id("shared"), "w1");
        o.add(&id("shared"), "w2");
        assert!(o.shared(&id("shared"), "w1"));
        assert!(o.release(&id("shared"), "w1"), "w2 still declares it");
        assert!(!o.release(&id("shared"), "w2"), "now nobody does");
        assert!(!o.shared(&id("shared"), "w2"));
    }
}

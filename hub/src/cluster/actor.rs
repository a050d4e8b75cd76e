//! The ClusterActor: the single owner and writer of one ManagedCluster.
//!
//! It handles registration, acceptance, lease renewals (a timer per cluster fires exactly at
//! `lastRenew + grace`), status reports (ordered by `sequenceid`, de-duplicated by
//! `statushash`), admin edits from the API and deletion. Every change is persisted to KV with the
//! revision it read (compare-and-set), then published to the inventory.

use super::works;
use super::{Shared, rules};
use crate::inventory::work_key;
use crate::store::StoreError;
use dashmap::DashMap;
use flotilla_api::meta::{self, COND_CLOCK_SYNCED, status};
use flotilla_api::v1::{
    ClusterStatusReport, HubWorkState, LeaseRenewal, ManagedCluster, ManifestWork,
    RegistrationRequest, RegistrationResponse, RegistrationState, SpecResyncRequest,
    SpecResyncResponse, Taint, TaintKey, WorkStatusReport,
};
use flotilla_bus::envelope::{Event, headers, types};
use flotilla_bus::subjects;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::Instrument;

/// The event source of everything the hub sends.
pub const SOURCE: &str = "flotilla-hub";
const PERSIST_RETRY: Duration = Duration::from_secs(1);
const RESEND_CHECK: Duration = Duration::from_secs(1);

/// Why a request to a cluster actor failed.
#[derive(Debug, Clone, Error)]
pub enum ClusterError {
    /// No such cluster.
    #[error("managed cluster {0:?} not found")]
    NotFound(String),
    /// The request is invalid; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// The store could not be written; nothing changed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The actor is gone (cluster deleted meanwhile).
    #[error("managed cluster {0:?} is being deleted")]
    Gone(String),
    /// A stale resourceVersion.
    #[error("{0}")]
    Conflict(String),
    /// The object is in a state that does not allow the request.
    #[error("{0}")]
    Precondition(String),
}

/// A lease renewal as received from the status stream.
#[derive(Debug)]
pub struct LeaseEvent {
    /// The payload.
    pub renewal: LeaseRenewal,
    /// `sequenceid`.
    pub sequence: Option<u64>,
    /// When the NATS server stored it (the hub's time base, not the agent's clock).
    pub server_time: SystemTime,
    /// The JetStream message, acknowledged once handled.
    pub ack: Option<async_nats::jetstream::Message>,
}

/// A cluster status report as received from the status stream.
#[derive(Debug)]
pub struct StatusEvent {
    /// The payload.
    pub report: ClusterStatusReport,
    /// `sequenceid`.
    pub sequence: Option<u64>,
    /// `statushash`.
    pub hash: Option<String>,
    /// The JetStream message, acknowledged once handled (persisted or discarded).
    pub ack: Option<async_nats::jetstream::Message>,
}

/// A work status report as received from the status stream.
#[derive(Debug)]
pub struct WorkStatusEvent {
    /// The payload.
    pub report: WorkStatusReport,
    /// `resourceid` from the subject.
    pub resource_id: String,
    /// `sequenceid`.
    pub sequence: Option<u64>,
    /// `statushash`.
    pub hash: Option<String>,
    /// The JetStream message, acknowledged once handled.
    pub ack: Option<async_nats::jetstream::Message>,
}

type Reply<T> = oneshot::Sender<Result<T, ClusterError>>;

/// Messages a cluster actor handles.
#[derive(Debug)]
pub enum Msg {
    /// An agent asks to join; the answer goes to the NATS reply subject.
    Register {
        /// The validated request.
        request: Box<RegistrationRequest>,
        /// Reply subject.
        reply: Option<async_nats::Subject>,
    },
    /// Lease renewal.
    Lease(Box<LeaseEvent>),
    /// Status report.
    Status(Box<StatusEvent>),
    /// Current object.
    Get(Reply<ManagedCluster>),
    /// Admin accepts.
    Accept(Reply<ManagedCluster>),
    /// Admin denies.
    Deny(Reply<ManagedCluster>),
    /// Label edit.
    Label {
        /// Labels to set.
        set: HashMap<String, String>,
        /// Keys to remove.
        remove: Vec<String>,
        /// Answer.
        respond_to: Reply<ManagedCluster>,
    },
    /// Taint edit.
    Taint {
        /// Taints to add.
        add: Vec<Taint>,
        /// Taints to remove.
        remove: Vec<TaintKey>,
        /// Answer.
        respond_to: Reply<ManagedCluster>,
    },
    /// Lease duration change.
    SetLease {
        /// New duration (0 = hub default).
        seconds: i32,
        /// Answer.
        respond_to: Reply<ManagedCluster>,
    },
    /// Delete the cluster and everything the hub keeps for it.
    Delete(Reply<()>),
    /// Create or update a work (validated by the API).
    ApplyWork {
        /// The work as submitted.
        work: Box<ManifestWork>,
        /// Answer.
        respond_to: Reply<ManifestWork>,
    },
    /// Start deleting a work.
    DeleteWork {
        /// Work name.
        name: String,
        /// Answer.
        respond_to: Reply<ManifestWork>,
    },
    /// Work status from the agent.
    WorkStatus(Box<WorkStatusEvent>),
    /// The agent's spec resync request; the answer goes to the reply subject.
    Resync {
        /// `{resourceid: version}` held by the agent.
        request: Box<SpecResyncRequest>,
        /// Reply subject.
        reply: Option<async_nats::Subject>,
    },
}

/// A cloneable handle to one cluster actor.
#[derive(Clone, Debug)]
pub struct ClusterHandle {
    tx: mpsc::Sender<Msg>,
    name: Arc<str>,
}

impl ClusterHandle {
    /// Sends without waiting; a full mailbox returns the message (the caller counts the drop).
    pub fn try_send(&self, msg: Msg) -> Result<(), Box<mpsc::error::TrySendError<Msg>>> {
        self.tx.try_send(msg).map_err(Box::new)
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T, ClusterError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| ClusterError::Gone(self.name.to_string()))?;
        rx.await
            .map_err(|_| ClusterError::Gone(self.name.to_string()))?
    }

    /// The current object.
    pub async fn get(&self) -> Result<ManagedCluster, ClusterError> {
        self.call(Msg::Get).await
    }

    /// Accepts the cluster.
    pub async fn accept(&self) -> Result<ManagedCluster, ClusterError> {
        self.call(Msg::Accept).await
    }

    /// Denies the cluster.
    pub async fn deny(&self) -> Result<ManagedCluster, ClusterError> {
        self.call(Msg::Deny).await
    }

    /// Edits labels.
    pub async fn label(
        &self,
        set: HashMap<String, String>,
        remove: Vec<String>,
    ) -> Result<ManagedCluster, ClusterError> {
        self.call(|respond_to| Msg::Label {
            set,
            remove,
            respond_to,
        })
        .await
    }

    /// Edits taints.
    pub async fn taint(
        &self,
        add: Vec<Taint>,
        remove: Vec<TaintKey>,
    ) -> Result<ManagedCluster, ClusterError> {
        self.call(|respond_to| Msg::Taint {
            add,
            remove,
            respond_to,
        })
        .await
    }

    /// Changes the lease duration.
    pub async fn set_lease(&self, seconds: i32) -> Result<ManagedCluster, ClusterError> {
        self.call(|respond_to| Msg::SetLease {
            seconds,
            respond_to,
        })
        .await
    }

    /// Deletes the cluster.
    pub async fn delete(&self) -> Result<(), ClusterError> {
        self.call(Msg::Delete).await
    }

    /// Creates or updates a work.
    pub async fn apply_work(&self, work: ManifestWork) -> Result<ManifestWork, ClusterError> {
        self.call(|respond_to| Msg::ApplyWork {
            work: Box::new(work),
            respond_to,
        })
        .await
    }

    /// Starts deleting a work.
    pub async fn delete_work(&self, name: String) -> Result<ManifestWork, ClusterError> {
        self.call(|respond_to| Msg::DeleteWork { name, respond_to })
            .await
    }
}

/// Spawns an actor; `loaded` is the stored object and revision (None for a first registration),
/// `works` its stored works.
pub(super) fn spawn(
    name: String,
    loaded: Option<(ManagedCluster, u64)>,
    works: Vec<(ManifestWork, u64)>,
    shared: Arc<Shared>,
    registry: Arc<DashMap<String, ClusterHandle>>,
) -> ClusterHandle {
    let (tx, rx) = mpsc::channel(shared.config.mailbox_capacity.max(1));
    let span = tracing::info_span!("cluster", cluster.name = %name);
    let mut actor = Actor {
        name: name.clone(),
        cluster: None,
        revision: 0,
        shared,
        registry,
        lease_deadline: None,
        lease_sequence: 0,
        dirty: false,
        works: BTreeMap::new(),
        rx,
    };
    for (mut w, rev) in works {
        if let Some(m) = w.metadata.as_mut() {
            m.resource_version = rev;
        }
        let wname = w
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        actor
            .shared
            .works
            .upsert(&work_key(&name, &wname), w.clone());
        actor.works.insert(
            wname,
            WorkEntry {
                work: w,
                revision: rev,
                // Unconfirmed specs are re-sent one period after a restart.
                last_sent: Some(Instant::now()),
                backoff: actor.shared.config.work_resend_after,
            },
        );
    }
    if let Some((mut c, rev)) = loaded {
        if let Some(m) = c.metadata.as_mut() {
            m.resource_version = rev;
        }
        actor.revision = rev;
        if rules::accepted(&c) {
            // A restarted hub gives every accepted cluster a full grace period.
            actor.lease_deadline = Some(Instant::now() + actor.grace(&c));
        }
        actor.shared.inventory.upsert(&actor.name, c.clone());
        actor.cluster = Some(c);
    }
    tokio::spawn(actor.run().instrument(span));
    ClusterHandle {
        tx,
        name: name.into(),
    }
}

struct Actor {
    name: String,
    cluster: Option<ManagedCluster>,
    revision: u64,
    shared: Arc<Shared>,
    registry: Arc<DashMap<String, ClusterHandle>>,
    lease_deadline: Option<Instant>,
    lease_sequence: u64,
    /// The in-memory state is newer than the store (a write failed); retried on a timer.
    dirty: bool,
    /// The cluster's works by name.
    works: BTreeMap<String, WorkEntry>,
    rx: mpsc::Receiver<Msg>,
}

/// A work and its delivery bookkeeping.
struct WorkEntry {
    work: ManifestWork,
    revision: u64,
    /// When the spec was last published (None = never since start).
    last_sent: Option<Instant>,
    /// Current re-send delay.
    backoff: Duration,
}

impl WorkEntry {
    /// Whether the agent has not confirmed the current spec (or the deletion).
    fn unconfirmed(&self) -> bool {
        let generation = self.work.metadata.as_ref().map_or(0, |m| m.generation);
        let observed = self.work.hub.as_ref().map_or(0, |h| h.observed_generation);
        observed < generation
            || self
                .work
                .metadata
                .as_ref()
                .is_some_and(|m| m.deletion_timestamp.is_some())
    }
}

enum Flow {
    Continue,
    Stop,
}

impl Actor {
    async fn run(mut self) {
        tracing::debug!("cluster actor started");
        let mut resend = tokio::time::interval(RESEND_CHECK);
        resend.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let deadline = self.lease_deadline;
            tokio::select! {
                // Only clusters with unconfirmed specs tick: 10,000 idle actors cost nothing.
                _ = resend.tick(), if self.resend_wanted() => self.resend_unconfirmed().await,
                msg = self.rx.recv() => {
                    let Some(msg) = msg else { break };
                    if let Flow::Stop = self.handle(msg).await {
                        break;
                    }
                }
                () = sleep_until_opt(deadline), if deadline.is_some() => self.lease_expired().await,
                () = tokio::time::sleep(PERSIST_RETRY), if self.dirty => self.flush().await,
            }
        }
        tracing::debug!("cluster actor stopped");
    }

    fn grace(&self, c: &ManagedCluster) -> Duration {
        let secs = c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds);
        let secs = if secs > 0 {
            secs
        } else {
            self.shared.config.default_lease_duration_seconds.max(1)
        };
        Duration::from_secs(
            secs as u64 * u64::from(self.shared.config.lease_grace_multiplier.max(1)),
        )
    }

    fn lease_seconds(&self, c: &ManagedCluster) -> i32 {
        match c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds) {
            0 => self.shared.config.default_lease_duration_seconds,
            n => n,
        }
    }

    async fn handle(&mut self, msg: Msg) -> Flow {
        match msg {
            Msg::Register { request, reply } => self.register(*request, reply).await,
            Msg::Lease(ev) => self.lease(*ev).await,
            Msg::Status(ev) => self.status(*ev).await,
            Msg::Get(tx) => {
                let _ = tx.send(self.current());
            }
            Msg::Accept(tx) => {
                let r = self
                    .edit(|c| {
                        Ok(rules::accept(
                            c,
                            "HubClusterAdminAccepted",
                            "Accepted by the hub cluster admin",
                        ))
                    })
                    .await;
                if let Ok(c) = &r {
                    self.lease_deadline = Some(Instant::now() + self.grace(c));
                    self.notify(
                        RegistrationState::Accepted,
                        "accepted by the hub cluster admin",
                    )
                    .await;
                }
                let _ = tx.send(r);
            }
            Msg::Deny(tx) => {
                let r = self.edit(|c| Ok(rules::deny(c))).await;
                if r.is_ok() {
                    self.lease_deadline = None;
                    self.notify(RegistrationState::Denied, "denied by the hub cluster admin")
                        .await;
                }
                let _ = tx.send(r);
            }
            Msg::Label {
                set,
                remove,
                respond_to,
            } => {
                let r = self.edit(|c| rules::apply_labels(c, &set, &remove)).await;
                let _ = respond_to.send(r);
            }
            Msg::Taint {
                add,
                remove,
                respond_to,
            } => {
                let r = self.edit(|c| rules::apply_taints(c, &add, &remove)).await;
                let _ = respond_to.send(r);
            }
            Msg::SetLease {
                seconds,
                respond_to,
            } => {
                let r = if !(0..=3600).contains(&seconds) {
                    Err(ClusterError::Invalid(format!(
                        "spec.leaseDurationSeconds: {seconds} is outside 0..=3600 (0 = hub default)"
                    )))
                } else {
                    let seconds = if seconds == 0 {
                        self.shared.config.default_lease_duration_seconds
                    } else {
                        seconds
                    };
                    self.edit(|c| {
                        let spec = c.spec.get_or_insert_with(Default::default);
                        let changed = spec.lease_duration_seconds != seconds;
                        spec.lease_duration_seconds = seconds;
                        if changed && let Some(m) = c.metadata.as_mut() {
                            m.generation += 1;
                        }
                        Ok(changed)
                    })
                    .await
                };
                if let Ok(c) = &r
                    && rules::accepted(c)
                {
                    self.lease_deadline = Some(Instant::now() + self.grace(c));
                    self.notify(RegistrationState::Accepted, "lease duration changed")
                        .await;
                }
                let _ = respond_to.send(r);
            }
            Msg::ApplyWork { work, respond_to } => {
                let r = self.apply_work(*work).await;
                let _ = respond_to.send(r);
            }
            Msg::DeleteWork { name, respond_to } => {
                let r = self.delete_work(&name).await;
                let _ = respond_to.send(r);
            }
            Msg::WorkStatus(ev) => self.work_status(*ev).await,
            Msg::Resync { request, reply } => self.resync(*request, reply).await,
            Msg::Delete(tx) => {
                let r = self.delete().await;
                let stop = r.is_ok();
                let _ = tx.send(r);
                if stop {
                    return Flow::Stop;
                }
            }
        }
        Flow::Continue
    }

    fn current(&self) -> Result<ManagedCluster, ClusterError> {
        self.cluster
            .clone()
            .ok_or_else(|| ClusterError::NotFound(self.name.clone()))
    }

    /// Applies an admin edit to a copy, persists it, and only then adopts it.
    async fn edit(
        &mut self,
        f: impl FnOnce(&mut ManagedCluster) -> Result<bool, String>,
    ) -> Result<ManagedCluster, ClusterError> {
        let mut next = self.current()?;
        let changed = f(&mut next).map_err(ClusterError::Invalid)?;
        if changed {
            self.persist(next)
                .await
                .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        }
        self.current()
    }

    /// Writes `next` with compare-and-set, adopting it and publishing it to the inventory.
    async fn persist(&mut self, mut next: ManagedCluster) -> Result<(), StoreError> {
        let start = std::time::Instant::now();
        let mut result = self
            .shared
            .bucket
            .write(&self.name, &next, self.revision)
            .await;
        if let Err(e) = &result
            && e.is_conflict()
        {
            // Someone else wrote (a previous incarnation of this actor, or an operator):
            // this actor owns the cluster, so take the stored revision and write again.
            tracing::warn!(error = %e, "revision conflict, rewriting over the stored revision");
            let stored = self.shared.bucket.get(&self.name).await?;
            let rev = stored.map_or(0, |(_, rev)| rev);
            result = self.shared.bucket.write(&self.name, &next, rev).await;
        }
        self.shared
            .metrics
            .kv_write_seconds
            .observe(start.elapsed().as_secs_f64());
        let rev = result?;
        if let Some(m) = next.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.revision = rev;
        self.dirty = false;
        self.shared.inventory.upsert(&self.name, next.clone());
        self.cluster = Some(next);
        Ok(())
    }

    /// Persists an agent- or timer-driven change; on failure keeps it in memory and retries.
    async fn persist_or_retry(&mut self, next: ManagedCluster) {
        if let Err(e) = self.persist(next.clone()).await {
            tracing::warn!(error = %e, "persisting cluster failed; will retry");
            self.shared.inventory.upsert(&self.name, next.clone());
            self.cluster = Some(next);
            self.dirty = true;
        }
    }

    async fn flush(&mut self) {
        if let Some(c) = self.cluster.clone()
            && self.persist(c).await.is_ok()
        {
            tracing::info!("pending cluster state persisted");
        }
    }

    async fn register(&mut self, request: RegistrationRequest, reply: Option<async_nats::Subject>) {
        let response = match self.cluster.clone() {
            Some(c) if rules::denied(&c) => {
                self.shared
                    .metrics
                    .rejected(&types::registration_request().to_string(), "denied");
                tracing::info!("registration refused: cluster is denied");
                response(
                    &self.name,
                    RegistrationState::Denied,
                    0,
                    "the hub cluster admin denied this cluster",
                )
            }
            Some(mut c) => {
                let mut changed = rules::apply_registration(&mut c, &request);
                if !rules::accepted(&c)
                    && self.shared.config.auto_accept.admits(
                        &c.metadata
                            .as_ref()
                            .map(|m| m.labels.clone())
                            .unwrap_or_default(),
                        &request.claims,
                    )
                {
                    changed |= rules::accept(
                        &mut c,
                        "AutoAccepted",
                        "Accepted by the hub's auto-accept policy",
                    );
                    self.lease_deadline = Some(Instant::now() + self.grace(&c));
                }
                if changed && let Err(e) = self.persist(c.clone()).await {
                    tracing::warn!(error = %e, "registration not persisted; the agent will retry");
                    return;
                }
                self.registration_response(&c)
            }
            None => {
                let c = rules::new_cluster(
                    &request,
                    &self.shared.config.auto_accept,
                    self.shared.config.default_lease_duration_seconds,
                );
                if let Err(e) = self.persist(c.clone()).await {
                    tracing::warn!(error = %e, "new cluster not persisted; the agent will retry");
                    return;
                }
                tracing::info!(accepted = rules::accepted(&c), "new cluster registered");
                if rules::accepted(&c) {
                    self.lease_deadline = Some(Instant::now() + self.grace(&c));
                }
                self.registration_response(&c)
            }
        };
        if let Some(reply) = reply {
            self.send(reply.to_string(), types::registration_response(), &response)
                .await;
        }
    }

    fn registration_response(&self, c: &ManagedCluster) -> RegistrationResponse {
        if rules::accepted(c) {
            response(
                &self.name,
                RegistrationState::Accepted,
                self.lease_seconds(c),
                "accepted",
            )
        } else {
            response(
                &self.name,
                RegistrationState::Pending,
                self.lease_seconds(c),
                "waiting for the hub cluster admin to accept (flotilla accept CLUSTER)",
            )
        }
    }

    async fn notify(&self, state: RegistrationState, message: &str) {
        let Some(c) = &self.cluster else { return };
        let r = response(&self.name, state, self.lease_seconds(c), message);
        self.send(
            subjects::spec(&self.name),
            types::registration_response(),
            &r,
        )
        .await;
    }

    async fn send(
        &self,
        subject: String,
        ty: flotilla_bus::EventType,
        payload: &RegistrationResponse,
    ) {
        let ev = Event::new(ty, SOURCE, self.name.clone(), payload);
        match ev.encode(self.shared.config.max_event_bytes) {
            Ok(bytes) => {
                if let Err(e) = self
                    .shared
                    .nats
                    .publish_with_headers(subject, headers(&ev), bytes)
                    .await
                {
                    tracing::warn!(error = %e, "publishing to the agent failed");
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot encode event for the agent"),
        }
    }

    async fn lease(&mut self, ev: LeaseEvent) {
        let LeaseEvent {
            renewal,
            sequence,
            server_time,
            ack,
        } = ev;
        self.lease_inner(renewal, sequence, server_time).await;
        ack_message(ack).await;
    }

    async fn lease_inner(
        &mut self,
        renewal: LeaseRenewal,
        sequence: Option<u64>,
        server_time: SystemTime,
    ) {
        let ty = types::lease_renewal().to_string();
        let Some(c) = self.cluster.clone().filter(rules::accepted) else {
            self.shared.metrics.rejected(&ty, "not_accepted");
            tracing::debug!("lease renewal from a cluster that is not accepted ignored");
            return;
        };
        if let Some(seq) = sequence {
            if seq <= self.lease_sequence {
                self.shared.metrics.rejected(&ty, "stale_sequence");
                return;
            }
            self.lease_sequence = seq;
        }
        let effective = server_time.max(self.shared.started);
        let age = SystemTime::now()
            .duration_since(effective)
            .unwrap_or_default();
        let grace = self.grace(&c);
        if age >= grace {
            // A renewal replayed from the stream after an outage: too old to prove liveness.
            return;
        }
        self.lease_deadline = Some(Instant::now() + (grace - age));
        let mut next = c;
        let mut changed = rules::join(&mut next);
        let healthy = next.hub.as_ref().is_none_or(|h| h.agent_healthy);
        changed |= if healthy {
            rules::set_available(
                &mut next,
                status::TRUE,
                "ManagedClusterAvailable",
                "Managed cluster is available",
            )
        } else {
            let msg = next
                .status
                .as_ref()
                .and_then(|s| meta::find_condition(&s.conditions, meta::COND_AVAILABLE))
                .map(|c| c.message.clone())
                .unwrap_or_default();
            rules::set_available(&mut next, status::FALSE, "ManagedClusterUnhealthy", &msg)
        };
        if let Some(agent_time) = renewal.renew_time.as_ref().map(meta::system_time) {
            let skew = agent_time
                .duration_since(server_time)
                .or_else(|e| Ok::<_, ()>(e.duration()))
                .unwrap_or_default();
            let st = next.status.get_or_insert_with(Default::default);
            changed |= if skew > self.shared.config.clock_skew_tolerance {
                meta::set_condition(
                    &mut st.conditions,
                    COND_CLOCK_SYNCED,
                    status::FALSE,
                    "ManagedClusterClockOutOfSync",
                    "The agent's clock differs from the hub's by more than the tolerance",
                )
            } else {
                meta::set_condition(
                    &mut st.conditions,
                    COND_CLOCK_SYNCED,
                    status::TRUE,
                    "ManagedClusterClockSynced",
                    "The clock of the managed cluster is synced with the hub.",
                )
            };
        }
        if changed {
            self.persist_or_retry(next).await;
        }
    }

    async fn status(&mut self, ev: StatusEvent) {
        let StatusEvent {
            report,
            sequence,
            hash,
            ack,
        } = ev;
        let ty = types::cluster_status().to_string();
        let Some(mut next) = self.cluster.clone().filter(rules::accepted) else {
            self.shared.metrics.rejected(&ty, "not_accepted");
            ack_message(ack).await;
            return;
        };
        let hub = next.hub.get_or_insert_with(Default::default);
        let last = hub
            .last_sequence
            .get(subjects::KIND_CLUSTER)
            .copied()
            .unwrap_or(0);
        if let Some(seq) = sequence {
            if seq <= last {
                self.shared.metrics.rejected(&ty, "stale_sequence");
                ack_message(ack).await;
                return;
            }
            hub.last_sequence.insert(subjects::KIND_CLUSTER.into(), seq);
        }
        if let Some(h) = &hash {
            if *h == hub.last_status_hash {
                ack_message(ack).await;
                return;
            }
            hub.last_status_hash = h.clone();
        }
        hub.agent_healthy = report.healthy;
        rules::apply_report(
            &mut next,
            &report.capacity,
            &report.allocatable,
            &report.kubernetes_version,
            &report.claims,
        );
        let lease_live = self.lease_deadline.is_some_and(|d| d > Instant::now());
        if lease_live {
            if report.healthy {
                rules::set_available(
                    &mut next,
                    status::TRUE,
                    "ManagedClusterAvailable",
                    "Managed cluster is available",
                );
            } else {
                rules::set_available(
                    &mut next,
                    status::FALSE,
                    "ManagedClusterUnhealthy",
                    &report.health_message,
                );
            }
        }
        self.persist_or_retry(next).await;
        ack_message(ack).await;
    }

    async fn lease_expired(&mut self) {
        self.lease_deadline = None;
        let Some(mut next) = self.cluster.clone().filter(rules::accepted) else {
            return;
        };
        if rules::set_available(
            &mut next,
            status::UNKNOWN,
            "ManagedClusterLeaseUpdateStopped",
            "Registration agent stopped updating its lease.",
        ) {
            tracing::warn!("lease expired: cluster is unreachable");
            self.shared.metrics.lease_expired.inc();
            self.persist_or_retry(next).await;
        }
    }

    async fn delete(&mut self) -> Result<(), ClusterError> {
        if self.cluster.is_none() {
            return Err(ClusterError::NotFound(self.name.clone()));
        }
        self.shared
            .bucket
            .purge(&self.name)
            .await
            .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        // Everything the agents sent about this cluster goes too.
        if let Err(e) = self
            .shared
            .status_stream
            .purge()
            .filter(subjects::status_of_cluster(&self.name))
            .await
        {
            tracing::warn!(error = %e, "purging the cluster's status subjects failed");
        }
        for (wname, _) in std::mem::take(&mut self.works) {
            if let Err(e) = self
                .shared
                .work_bucket
                .purge(&work_store_key(&self.name, &wname))
                .await
            {
                tracing::warn!(error = %e, work = %wname, "purging a work of a deleted cluster failed");
            }
            self.shared.works.remove(&work_key(&self.name, &wname));
        }
        self.notify_deleted().await;
        self.registry.remove(&self.name);
        self.shared.inventory.remove(&self.name);
        self.cluster = None;
        tracing::info!("cluster deleted");
        Ok(())
    }

    async fn notify_deleted(&self) {
        let r = response(
            &self.name,
            RegistrationState::Deleted,
            0,
            "the cluster was deleted on the hub",
        );
        self.send(subjects::spec(&self.name), types::cluster_deleted(), &r)
            .await;
    }
}

/// The KV key of a work: `<cluster>.<work>` (cluster names have no dots, so this is unique).
pub fn work_store_key(cluster: &str, work: &str) -> String {
    format!("{cluster}.{work}")
}

impl Actor {
    async fn apply_work(&mut self, mut work: ManifestWork) -> Result<ManifestWork, ClusterError> {
        if self.cluster.is_none() {
            return Err(ClusterError::NotFound(self.name.clone()));
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
                let spec_changed = e.work.spec != work.spec;
                if !spec_changed && old.labels == meta.labels && old.annotations == meta.annotations
                {
                    return Ok(e.work.clone());
                }
                meta.uid = old.uid;
                meta.creation_timestamp = old.creation_timestamp;
                meta.generation = if spec_changed {
                    old.generation + 1
                } else {
                    old.generation
                };
                let mut hub = e.work.hub.clone().unwrap_or_default();
                if spec_changed {
                    hub.accepted_at = Some(meta::now());
                    hub.latency_recorded = false;
                }
                (
                    e.revision,
                    ManifestWork {
                        metadata: Some(meta),
                        spec: work.spec,
                        status: e.work.status.clone(),
                        hub: Some(hub),
                    },
                )
            }
            None => {
                if meta.resource_version != 0 {
                    return Err(ClusterError::NotFound(format!(
                        "ManifestWork {}/{name}",
                        self.name
                    )));
                }
                meta.uid = uuid::Uuid::new_v4().to_string();
                meta.creation_timestamp = Some(meta::now());
                meta.generation = 1;
                let mut w = ManifestWork {
                    metadata: Some(meta),
                    spec: work.spec,
                    status: None,
                    hub: None,
                };
                w.hub = Some(HubWorkState {
                    accepted_at: Some(meta::now()),
                    resource_id: works::resource_id(&w),
                    ..Default::default()
                });
                (0, w)
            }
        };
        let stored = self.persist_work(&name, next, expected).await?;
        if let Some(e) = self.works.get_mut(&name) {
            e.backoff = self.shared.config.work_resend_after;
        }
        self.publish_work(&name).await;
        Ok(stored)
    }

    /// Writes a work with compare-and-set and publishes it to the works inventory.
    async fn persist_work(
        &mut self,
        name: &str,
        mut work: ManifestWork,
        expected: u64,
    ) -> Result<ManifestWork, ClusterError> {
        if let Some(m) = work.metadata.as_mut() {
            m.resource_version = 0;
        }
        let rev = self
            .shared
            .work_bucket
            .write(&work_store_key(&self.name, name), &work, expected)
            .await
            .map_err(|e| {
                if e.is_conflict() {
                    ClusterError::Conflict(format!(
                        "ManifestWork {}/{name} changed meanwhile; retry",
                        self.name
                    ))
                } else {
                    ClusterError::Unavailable(e.to_string())
                }
            })?;
        if let Some(m) = work.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.shared
            .works
            .upsert(&work_key(&self.name, name), work.clone());
        let backoff = self.shared.config.work_resend_after;
        let entry = self
            .works
            .entry(name.to_string())
            .or_insert_with(|| WorkEntry {
                work: work.clone(),
                revision: rev,
                last_sent: None,
                backoff,
            });
        entry.work = work.clone();
        entry.revision = rev;
        Ok(work)
    }

    /// Publishes a work's spec (or deletion) to the agent.
    async fn publish_work(&mut self, name: &str) {
        let Some(entry) = self.works.get_mut(name) else {
            return;
        };
        entry.last_sent = Some(Instant::now());
        let ev = works::spec_event(&self.name, &entry.work, SOURCE);
        match ev.encode(self.shared.config.max_event_bytes) {
            Ok(bytes) => {
                if let Err(e) = self
                    .shared
                    .nats
                    .publish_with_headers(subjects::spec(&self.name), headers(&ev), bytes)
                    .await
                {
                    tracing::warn!(error = %e, work = %name, "publishing a work spec failed; it will be re-sent");
                }
            }
            Err(e) => tracing::error!(error = %e, work = %name, "work spec cannot be encoded"),
        }
    }

    async fn delete_work(&mut self, name: &str) -> Result<ManifestWork, ClusterError> {
        let Some(e) = self.works.get(name) else {
            return Err(ClusterError::NotFound(format!(
                "ManifestWork {}/{name}",
                self.name
            )));
        };
        let mut next = e.work.clone();
        let expected = e.revision;
        let m = next.metadata.get_or_insert_with(Default::default);
        if m.deletion_timestamp.is_none() {
            m.deletion_timestamp = Some(meta::now());
            mark_deleting(&mut next);
            next = self.persist_work(name, next, expected).await?;
        }
        if let Some(e) = self.works.get_mut(name) {
            e.backoff = self.shared.config.work_resend_after;
        }
        self.publish_work(name).await;
        Ok(next)
    }

    async fn work_status(&mut self, ev: WorkStatusEvent) {
        let WorkStatusEvent {
            report,
            resource_id,
            sequence,
            hash,
            ack,
        } = ev;
        let ty = works::status_type().to_string();
        let name = report.work_name.clone();
        if !self.cluster.as_ref().is_some_and(rules::accepted) {
            self.shared.metrics.rejected(&ty, "not_accepted");
            ack_message(ack).await;
            return;
        }
        let Some(entry) = self.works.get(&name) else {
            // Not (or no longer) known: the agent's next resync deletes it.
            self.shared.metrics.rejected(&ty, "unknown_work");
            ack_message(ack).await;
            return;
        };
        if works::resource_id(&entry.work) != resource_id {
            self.shared.metrics.rejected(&ty, "resourceid_mismatch");
            ack_message(ack).await;
            return;
        }
        let mut next = entry.work.clone();
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
            match self
                .shared
                .work_bucket
                .purge(&work_store_key(&self.name, &name))
                .await
            {
                Ok(()) => {
                    self.works.remove(&name);
                    self.shared.works.remove(&work_key(&self.name, &name));
                    tracing::info!(work = %name, "work deleted");
                    ack_message(ack).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, work = %name, "removing a deleted work failed; JetStream will redeliver the report");
                }
            }
            return;
        }
        if let Some(latency) = works::apply_status(&mut next, &report) {
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
                    e.backoff = self.shared.config.work_resend_after;
                }
                ack_message(ack).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, work = %name, "work status not persisted; JetStream will redeliver it")
            }
        }
    }

    async fn resync(&mut self, request: SpecResyncRequest, reply: Option<async_nats::Subject>) {
        let hub: BTreeMap<String, works::HubVersion> = self
            .works
            .values()
            .map(|e| {
                let m = e.work.metadata.clone().unwrap_or_default();
                (
                    works::resource_id(&e.work),
                    works::HubVersion {
                        generation: m.generation,
                        deleting: m.deletion_timestamp.is_some(),
                    },
                )
            })
            .collect();
        let (resend, deleted) = works::resync_diff(&hub, &request.versions);
        let by_id: HashMap<String, String> = self
            .works
            .iter()
            .map(|(n, e)| (works::resource_id(&e.work), n.clone()))
            .collect();
        for id in &resend {
            if let Some(name) = by_id.get(id).cloned() {
                self.publish_work(&name).await;
            }
        }
        tracing::debug!(
            resent = resend.len(),
            deleted = deleted.len(),
            "spec resync answered"
        );
        if let Some(reply) = reply {
            let resp = SpecResyncResponse {
                deleted,
                resent: resend.len() as u32,
            };
            let ev = Event::new(
                works::resync_response_type(),
                SOURCE,
                self.name.clone(),
                &resp,
            );
            if let Ok(bytes) = ev.encode(self.shared.config.max_event_bytes) {
                let _ = self
                    .shared
                    .nats
                    .publish_with_headers(reply, headers(&ev), bytes)
                    .await;
            }
        }
    }

    /// Re-sends specs the agent has not confirmed within their back-off.
    /// Whether some spec is unconfirmed and the agent is reachable (an unreachable agent resyncs
    /// when it comes back; re-sending into the void is waste, and idle actors must not tick).
    fn resend_wanted(&self) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|c| rules::available(c) == Some(status::TRUE))
            && self.works.values().any(WorkEntry::unconfirmed)
    }

    async fn resend_unconfirmed(&mut self) {
        let max = self.shared.config.work_resend_after * 16;
        let due: Vec<String> = self
            .works
            .iter()
            .filter(|(_, e)| {
                e.unconfirmed() && e.last_sent.is_none_or(|t| t.elapsed() >= e.backoff)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            if let Some(e) = self.works.get_mut(&name) {
                e.backoff = (e.backoff * 2).min(max);
            }
            self.shared.metrics.work_resends.inc();
            tracing::debug!(work = %name, "re-sending an unconfirmed work spec");
            self.publish_work(&name).await;
        }
    }
}

fn mark_deleting(work: &mut ManifestWork) {
    let st = work.status.get_or_insert_with(Default::default);
    meta::set_condition(
        &mut st.conditions,
        flotilla_api::work::conditions::DELETING,
        status::TRUE,
        "Deleting",
        "Waiting for the agent to remove the work's resources",
    );
}

fn response(
    name: &str,
    state: RegistrationState,
    lease: i32,
    message: &str,
) -> RegistrationResponse {
    RegistrationResponse {
        cluster_name: name.to_string(),
        state: state as i32,
        lease_duration_seconds: lease,
        message: message.to_string(),
    }
}

async fn ack_message(ack: Option<async_nats::jetstream::Message>) {
    if let Some(m) = ack
        && let Err(e) = m.ack().await
    {
        tracing::debug!(error = %e, "ack failed; the message will be redelivered");
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_messages_stay_small_so_idle_actors_stay_cheap() {
        // tokio allocates mailbox slots in blocks of 32: every byte here costs 32 per cluster.
        assert!(
            std::mem::size_of::<Msg>() <= 96,
            "Msg is {} bytes",
            std::mem::size_of::<Msg>()
        );
    }
}

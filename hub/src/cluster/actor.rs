//! The ClusterActor: the single owner and writer of one ManagedCluster.
//!
//! It handles registration, acceptance, lease renewals (a timer per cluster fires exactly at
//! `lastRenew + grace`), status reports (ordered by `sequenceid`, de-duplicated by
//! `statushash`), admin edits from the API and deletion. Every change is persisted to KV with the
//! revision it read (compare-and-set), then published to the inventory.

use super::{Shared, rules};
use crate::store::StoreError;
use dashmap::DashMap;
use flotilla_api::meta::{self, COND_CLOCK_SYNCED, status};
use flotilla_api::v1::{
    ClusterStatusReport, LeaseRenewal, ManagedCluster, RegistrationRequest, RegistrationResponse,
    RegistrationState, Taint, TaintKey,
};
use flotilla_bus::envelope::{Event, headers, types};
use flotilla_bus::subjects;
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

type Reply<T> = oneshot::Sender<Result<T, ClusterError>>;

/// Messages a cluster actor handles.
#[derive(Debug)]
pub enum Msg {
    /// An agent asks to join; the answer goes to the NATS reply subject.
    Register {
        /// The validated request.
        request: RegistrationRequest,
        /// Reply subject.
        reply: Option<async_nats::Subject>,
    },
    /// Lease renewal.
    Lease(LeaseEvent),
    /// Status report.
    Status(StatusEvent),
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
}

/// Spawns an actor; `loaded` is the stored object and revision (None for a first registration).
pub(super) fn spawn(
    name: String,
    loaded: Option<(ManagedCluster, u64)>,
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
        rx,
    };
    if let Some((mut c, rev)) = loaded {
        if let Some(m) = c.metadata.as_mut() {
            m.resource_version = rev;
        }
        actor.revision = rev;
        if rules::accepted(&c) {
            // A restarted hub gives every accepted cluster a full grace period.
            actor.lease_deadline = Some(Instant::now() + actor.grace(&c));
        }
        actor.shared.inventory.upsert(c.clone());
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
    rx: mpsc::Receiver<Msg>,
}

enum Flow {
    Continue,
    Stop,
}

impl Actor {
    async fn run(mut self) {
        tracing::debug!("cluster actor started");
        loop {
            let deadline = self.lease_deadline;
            tokio::select! {
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
            Msg::Register { request, reply } => self.register(request, reply).await,
            Msg::Lease(ev) => self.lease(ev).await,
            Msg::Status(ev) => self.status(ev).await,
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
        self.shared.inventory.upsert(next.clone());
        self.cluster = Some(next);
        Ok(())
    }

    /// Persists an agent- or timer-driven change; on failure keeps it in memory and retries.
    async fn persist_or_retry(&mut self, next: ManagedCluster) {
        if let Err(e) = self.persist(next.clone()).await {
            tracing::warn!(error = %e, "persisting cluster failed; will retry");
            self.shared.inventory.upsert(next.clone());
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

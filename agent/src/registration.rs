//! The registration actor: the agent's side of the double opt-in and of cluster health.
//!
//! It asks to join on `flotilla.register.<cluster>` until the hub answers, waits while pending
//! (the hub's spec event or the next poll brings acceptance), then renews its lease every
//! `leaseDurationSeconds` (jittered) and reports cluster status when it changes — both into the
//! `FLOTILLA_STATUS` stream. On every reconnect it registers again (learning anything it missed)
//! and re-sends its lease and status. Nothing here needs an operator after a NATS or hub restart.

use crate::AgentConfig;
use crate::backend::{Backend, ClusterInfo};
use crate::credentials::AgentCredentials;
use crate::namespaces::{ManagedNamespaces, hub_hash};
use crate::spec;
use crate::store::{HubState, LocalStore, ManagedNamespace};
use crate::warn_budget::{Allow, WarnBudget};
use crate::work::WorkManager;
use flotilla_api::meta;
use flotilla_api::v1::{
    ClusterClaim, ClusterSetManagedNamespaceConfig, ClusterStatusReport, LeaseRenewal,
    RegistrationRequest, RegistrationResponse, RegistrationState, SpecResyncResponse,
};
use flotilla_bus::connect::ConnectionEvent;
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::Publisher;
use flotilla_bus::spoke::{Feeds, Spoke};
use flotilla_bus::subjects;
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

mod bounds;
mod calls;
mod health;
mod link;
mod reports;
mod timing;

use reports::claims;

use bounds::AnswerTimes;
pub use calls::{AskError, ask_hub};
use calls::{Call, ResyncCall, ResyncFailed, Timed, answer_of, ask_hub_within};
use health::{Finding, LoopHealth, Outcome, Report};
use link::Link;
pub(crate) use timing::busy_wait;
use timing::{first_resync_request, jitter, resync_wait};

const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);
const ACCEPTED_REFRESH: Duration = Duration::from_secs(600);
/// The least time between two resyncs made because the client dropped messages.
const DROP_RESYNC_SPACING: Duration = Duration::from_secs(5);

/// The agent's registration and health loop.
pub struct RegistrationActor {
    config: AgentConfig,
    client: async_nats::Client,
    /// Status events into the status stream, acknowledged within [`PUBLISH_TIMEOUT`].
    events: Publisher,
    /// Requests to the hub (spec resync), answered within the NATS request timeout.
    requests: Publisher,
    backend: Arc<dyn Backend>,
    store: Arc<LocalStore>,
    source: String,
    /// When to send the next registration request (None = not scheduled).
    next_register: Option<Instant>,
    register_failures: usize,
    /// The labels the hub last said it dropped (reserved for it), logged when they change.
    dropped_labels: Vec<String>,
    /// The registration request in flight.
    register_call: Option<Call<Timed<Result<RegistrationResponse, AskError>>>>,
    /// A registration notification came on the spec subject while the registration request
    /// was in flight: its answer, made before, is stale (asked again instead of applied).
    notified_while_registering: bool,
    /// The hub refused the last registration (`REJECTED`: this agent's version, or a request
    /// it could not take). Until an answer takes this agent again it is not accepted: no
    /// lease, resync, spec or status, so its cluster goes Unknown on the hub instead of
    /// working on under a version the hub refuses.
    refused: bool,
    /// The spec resync in flight.
    resync_call: Option<Call<Timed<Result<SpecResyncResponse, ResyncFailed>>>>,
    /// The hub's answer times, which bound the next request's wait.
    answer_times: AnswerTimes,
    /// The loop's own health report (resyncs unanswered, calls stuck).
    health: LoopHealth,
    /// Spec resyncs in a row the hub did not answer in time ([`resync_wait`]).
    resync_failures: u32,
    /// When the last resync made because the client dropped messages was due.
    drop_resync: Option<Instant>,
    next_lease: Option<Instant>,
    /// Hash of the last status the stream acknowledged.
    last_status_hash: Option<String>,
    /// The works on this cluster. Not one of the spec handlers: besides its specs, the work
    /// manager serves the cluster proxy's queries, the status tick's check of its actors and
    /// the spec resync (versions, deletions, the specs of the answer).
    works: WorkManager,
    /// Every other kind of spec (policies, ManagedServiceAccounts, MirrorPeers), in one list.
    specs: spec::Handlers,
    /// When to ask the hub for a spec resync (None = not scheduled).
    next_resync: Option<Instant>,
    /// The periodic resync the last resync scheduled when it was sent: its answer moves it by
    /// the period the hub asks, unless something else scheduled one since.
    periodic_resync: Option<Instant>,
    /// The period of periodic resyncs the hub asks (`resync_period_seconds` of its last
    /// answer): the fleet's size over its budget. The agent waits the longer of it and its own.
    hub_resync_period: Duration,
    /// When to publish every work's status again after a reconnect (None = not scheduled).
    next_republish: Option<Instant>,
    /// When to report AddOnPlacementScores next (None = not scheduled).
    next_score: Option<Instant>,
    /// Secure mode: the agent's credentials.
    credentials: Option<Arc<AgentCredentials>>,
    /// Secure mode: the bootstrap connection, open while the agent has no usable credentials.
    bootstrap: Option<async_nats::Client>,
    /// The agent's one subscription (prefix wire): answers to its requests come back through
    /// it. `None` on the previous wire.
    spoke: Option<Spoke>,
    /// The namespaces the cluster's sets manage here.
    namespaces: ManagedNamespaces,
    /// Their last reconciliation, with conditions (reported in the cluster status).
    namespace_status: Vec<ClusterSetManagedNamespaceConfig>,
    /// Namespaces no longer managed still wait for their `"false"` label (the last try failed).
    unmanage_pending: bool,
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl RegistrationActor {
    /// A new actor over a (possibly not yet connected) client.
    pub fn new(
        config: AgentConfig,
        js: &async_nats::jetstream::Context,
        backend: Arc<dyn Backend>,
        store: Arc<LocalStore>,
        works: WorkManager,
    ) -> Self {
        let client = js.client();
        let requests = Publisher::over(js, config.max_event_bytes, config.nats.request_timeout);
        let events = requests.with_timeout(PUBLISH_TIMEOUT);
        let source = format!("flotilla-agent/{}", config.cluster_name);
        let namespaces = ManagedNamespaces::new(backend.clone(), &hub_hash(&config.nats.url));
        let answer_times = AnswerTimes::new(config.nats.request_timeout);
        Self {
            health: LoopHealth::default(),
            config,
            client,
            events,
            requests,
            backend,
            store,
            source,
            next_register: Some(Instant::now()),
            register_failures: 0,
            dropped_labels: Vec::new(),
            resync_failures: 0,
            drop_resync: None,
            register_call: None,
            notified_while_registering: false,
            refused: false,
            resync_call: None,
            answer_times,
            next_lease: None,
            last_status_hash: None,
            works,
            specs: spec::handlers(None),
            next_resync: None,
            periodic_resync: None,
            hub_resync_period: Duration::ZERO,
            next_republish: None,
            next_score: None,
            credentials: None,
            bootstrap: None,
            spoke: None,
            namespaces,
            namespace_status: Vec::new(),
            unmanage_pending: false,
        }
    }

    /// Reads the answers to its requests and the acknowledgements of its status publishes
    /// through `spoke` (the agent's one subscription, prefix wire; `None`: the previous wire).
    pub fn with_spoke(mut self, spoke: Option<Spoke>) -> Self {
        self.requests = self.requests.with_spoke(spoke.clone());
        self.events = self.events.with_spoke(spoke.clone());
        self.spoke = spoke;
        self
    }

    /// Evaluates and enforces the policies the hub sends (governance). Before [`Self::run`]:
    /// the spec handlers are made again with them (none has started anything yet).
    pub fn with_policies(mut self, policies: crate::policy::PolicyManager) -> Self {
        self.specs = spec::handlers(Some(policies));
        self
    }

    /// Secure mode: registers over a bootstrap connection until the hub issues this agent's
    /// own credentials, and renews them before they expire.
    pub fn with_credentials(mut self, credentials: Arc<AgentCredentials>) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The client registration requests go over: the main one, or in secure mode without
    /// usable credentials a bootstrap connection (opened on first use).
    async fn registration_client(&mut self) -> Option<(async_nats::Client, Option<Spoke>)> {
        let own = Some((self.client.clone(), self.spoke.clone()));
        let Some(creds) = &self.credentials else {
            return own;
        };
        if creds.usable() {
            if let Some(boot) = self.bootstrap.take() {
                let _ = boot.drain().await;
            }
            return own;
        }
        if self.bootstrap.is_none() {
            let cfg = creds.bootstrap_config(&self.config.nats, self.name());
            match flotilla_bus::connect::connect(&cfg, None).await {
                Ok(c) => {
                    tracing::info!("registering with the bootstrap credentials");
                    self.bootstrap = Some(c);
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot use the bootstrap credentials");
                    return None;
                }
            }
        }
        // The bootstrap connection keeps its inbox (`_INBOX_bootstrap.<cluster>`): short-lived.
        self.bootstrap.clone().map(|boot| (boot, None))
    }

    /// Secure mode: takes the credentials a reply carries and reconnects with them.
    async fn take_credentials(&mut self, resp: &RegistrationResponse) {
        let Some(creds) = &self.credentials else {
            return;
        };
        if resp.user_jwt.is_empty() {
            return;
        }
        match creds.store(&resp.user_jwt) {
            Ok(()) => {
                tracing::info!(
                    renew_in_seconds = creds.renew_in(),
                    "cluster credentials received; reconnecting with them"
                );
                if let Some(boot) = self.bootstrap.take() {
                    let _ = boot.drain().await;
                }
                if let Err(e) = self.client.force_reconnect().await {
                    tracing::debug!(error = %e, "reconnect request not taken");
                }
            }
            Err(e) => tracing::error!(error = %e, "the hub's credentials are unusable"),
        }
    }

    fn name(&self) -> &str {
        &self.config.cluster_name
    }

    fn accepted(&self) -> bool {
        self.store.get().hub_state == HubState::Accepted && !self.refused
    }

    fn lease_period(&self) -> Duration {
        Duration::from_secs(self.store.get().lease_duration_seconds.max(1) as u64)
    }

    /// Runs until `shutdown` resolves, reading the hub's specs and proxied reads from `feeds`.
    pub fn run(
        self,
        feeds: Feeds,
        conn_events: mpsc::UnboundedReceiver<ConnectionEvent>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> impl std::future::Future<Output = ()> {
        // Not an `async fn` around an `async` block: that would keep the actor twice in the
        // agent's task (the function's moved-from argument and the block's capture).
        let span = tracing::info_span!("agent", cluster.name = %self.config.cluster_name);
        self.serve(feeds, conn_events, shutdown).instrument(span)
    }

    async fn serve(
        mut self,
        feeds: Feeds,
        mut conn_events: mpsc::UnboundedReceiver<ConnectionEvent>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        {
            tokio::pin!(shutdown);
            // The client connected before the actor started, and the feeds' subscriptions are
            // in place at the server.
            let mut link = Link::up(self.config.metrics.clone());
            let Feeds {
                mut spec,
                mut proxy,
                dropped,
                ..
            } = feeds;
            if self.accepted() {
                // Edge autonomy: an accepted agent keeps renewing even before the hub answers.
                self.next_lease = Some(Instant::now());
                self.next_resync = Some(Instant::now());
                self.next_score = Some(Instant::now());
                self.specs.resume(&spec::Parts {
                    config: &self.config,
                    backend: &self.backend,
                    store: &self.store,
                    client: &self.client,
                    spoke: self.spoke.as_ref(),
                });
            }
            let mut status_tick = tokio::time::interval(self.config.status_interval);
            status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Handlers run boxed: an idle agent's task then holds only this loop's state, not
            // the deepest handler's (16 KB per simulated agent before).
            loop {
                tokio::select! {
                    () = &mut shutdown => break,
                    () = sleep_until_opt(self.next_register), if self.register_call.is_none() => {
                        Box::pin(self.register()).await;
                    }
                    answer = answer_of(&mut self.register_call) => {
                        self.register_call = None;
                        Box::pin(self.on_register_answer(answer)).await;
                    }
                    () = sleep_until_opt(self.next_lease) => Box::pin(self.renew()).await,
                    () = sleep_until_opt(self.next_resync), if self.resync_call.is_none() => self.resync(),
                    () = sleep_until_opt(self.next_republish) => {
                        self.next_republish = None;
                        if self.accepted() {
                            Box::pin(self.works.republish_all()).await;
                        }
                    }
                    answer = answer_of(&mut self.resync_call) => {
                        self.resync_call = None;
                        Box::pin(self.on_resync_answer(answer)).await;
                    }
                    () = sleep_until_opt(self.next_score) => Box::pin(self.report_scores()).await,
                    msg = proxy.next() => {
                        if self.accepted() {
                            Box::pin(self.works.on_proxy(&self.client, msg)).await;
                        }
                    }
                    _ = status_tick.tick(), if self.accepted() => {
                        self.works.check_actors();
                        self.report_health();
                        Box::pin(self.report_status(false)).await;
                    }
                    // Spec events wait while a request to the hub is in flight whose answer,
                    // made before them, would undo them applied after them: a resync's (a work
                    // it calls unknown), a registration's of an agent not yet accepted (its
                    // acceptance). An accepted agent's re-registration holds nothing: a
                    // notification that comes meanwhile makes its answer stale, asked again.
                    msg = spec.next(), if self.reads_specs() => Box::pin(self.on_spec(msg)).await,
                    // The demux dropped a spec at a full channel: as a slow consumer below.
                    () = dropped.notified() => self.messages_dropped(),
                    ev = conn_events.recv() => match ev {
                        Some(ConnectionEvent::Connected) => {
                            link.connected();
                            self.on_connected();
                        }
                        Some(ConnectionEvent::Refused) => {
                            self.next_register = Some(Instant::now());
                        }
                        Some(ConnectionEvent::Disconnected) => link.disconnected(),
                        // The client dropped messages of a full subscription: one may have been
                        // a spec, sent once over core NATS. A resync asks the hub for anything
                        // this agent lacks, now rather than at the next periodic one.
                        Some(ConnectionEvent::SlowConsumer) => self.messages_dropped(),
                        None => {
                            // The client's event channel closed: only at drain/shutdown.
                            std::future::pending::<()>().await;
                        }
                    },
                }
            }
            self.specs.shutdown().await;
            tracing::info!("agent stopped");
        }
    }

    /// Whether spec events are read now (see the loop).
    fn reads_specs(&self) -> bool {
        self.resync_call.is_none() && (self.register_call.is_none() || self.accepted())
    }

    /// The link is back: calls sent over the old connection are moot. An accepted agent renews
    /// its lease now (its proof of life) and spreads the rest — registration, resync, the
    /// republish of every work's status — over [`bounds::reconnect_spread`]: a site's whole
    /// fleet reconnects at the same instant, and the hub would otherwise get it all at once.
    fn on_connected(&mut self) {
        tracing::info!("connected: re-registering and resending lease and status");
        self.register_failures = 0;
        self.register_call = None;
        self.resync_call = None;
        self.health.calls_dropped();
        let now = Instant::now();
        if !self.accepted() {
            self.next_register = Some(now);
            return;
        }
        let spread = bounds::reconnect_spread(self.config.resync_interval);
        let later = || now + bounds::spread_delay(spread, rand::rng().random::<f64>());
        self.next_register = Some(later());
        self.next_resync = Some(later());
        self.next_republish = Some(later());
        self.next_lease = Some(now);
        self.last_status_hash = None;
        self.next_score = Some(now);
        self.specs.on_reconnect();
    }

    async fn registration_request(&self) -> RegistrationRequest {
        registration_request(
            &self.config,
            self.backend.as_ref(),
            &self.store,
            self.credentials.as_deref(),
        )
        .await
    }

    /// Sends a registration request; its answer comes to [`Self::on_register_answer`].
    async fn register(&mut self) {
        self.next_register = None;
        let request = self.registration_request().await;
        let Some((client, spoke)) = self.registration_client().await else {
            self.next_register = Some(Instant::now() + self.config.denied_poll);
            return;
        };
        let config = self.config.clone();
        let source = self.source.clone();
        let bound = self.answer_times.bound();
        self.health.register_sent(Instant::now(), bound);
        self.notified_while_registering = false;
        self.register_call = Some(Call::new(Timed::of(async move {
            ask_hub_within(&client, spoke, &config, &source, &request, bound).await
        })));
    }

    async fn on_register_answer(&mut self, answer: Timed<Result<RegistrationResponse, AskError>>) {
        let Timed { answer, took } = answer;
        self.health.register_ended();
        match &answer {
            Err(AskError::Unanswered(_)) => self.answer_times.unanswered(took),
            Err(AskError::Encode(_)) => {}
            _ => self.answer_times.answered(took),
        }
        match answer {
            Ok(_) if self.notified_while_registering => {
                tracing::debug!("registration answer older than a notification; asking again");
                self.next_register = Some(Instant::now());
            }
            Ok(resp) => {
                self.register_failures = 0;
                self.apply_response(resp).await;
            }
            Err(AskError::Encode(e)) => {
                tracing::error!(error = %e, "registration request cannot be encoded");
                self.next_register = Some(Instant::now() + self.config.denied_poll);
            }
            Err(AskError::Unanswered(e)) => {
                tracing::debug!(error = %e, "registration request not answered");
                self.retry_register();
            }
            Err(e @ (AskError::Unreadable(_) | AskError::NotOurs(_))) => {
                tracing::warn!(error = %e, "unreadable registration reply");
                self.retry_register();
            }
        }
    }

    fn retry_register(&mut self) {
        self.register_failures += 1;
        let delay = flotilla_bus::connect::backoff(self.register_failures, Duration::from_secs(30));
        self.next_register = Some(Instant::now() + delay);
    }

    async fn apply_response(&mut self, resp: RegistrationResponse) {
        self.take_credentials(&resp).await;
        if !resp.in_reply_to.is_empty() && resp.dropped_labels != self.dropped_labels {
            if !resp.dropped_labels.is_empty() {
                tracing::warn!(
                    labels = %resp.dropped_labels.join(","),
                    "the hub dropped labels it reserves (the cluster set comes from the hub admin, a join credential naming it, or an import policy); remove them from --label"
                );
            }
            self.dropped_labels = resp.dropped_labels.clone();
        }
        let state =
            RegistrationState::try_from(resp.state).unwrap_or(RegistrationState::Unspecified);
        // With several hubs: an answer is the hub's sign of life; a denial makes the agent
        // leave it.
        if let Some(session) = &self.config.hub_session {
            session.signal(if state == RegistrationState::Denied {
                crate::hubs::Signal::Denied
            } else {
                crate::hubs::Signal::Alive
            });
        }
        let was_accepted = self.accepted();
        let lease_changed = resp.lease_duration_seconds > 0
            && resp.lease_duration_seconds != self.store.get().lease_duration_seconds;
        let new_state = match state {
            RegistrationState::Busy => {
                let wait = busy_wait(resp.retry_after_ms);
                tracing::debug!(
                    wait_ms = wait.as_millis() as u64,
                    "the hub is busy registering others; asking again later"
                );
                self.next_register = Some(Instant::now() + wait);
                return;
            }
            RegistrationState::Accepted => HubState::Accepted,
            RegistrationState::Pending => HubState::Pending,
            RegistrationState::Denied => HubState::Denied,
            RegistrationState::Deleted => HubState::Unknown,
            RegistrationState::Rejected => {
                tracing::error!(reason = %resp.message, "the hub rejected the registration request; no lease, resync or status until it takes this agent again");
                self.refused = true;
                self.next_lease = None;
                self.next_resync = None;
                self.next_register = Some(Instant::now() + self.config.denied_poll);
                return;
            }
            RegistrationState::Unspecified => {
                tracing::warn!("registration reply without a state");
                self.retry_register();
                return;
            }
        };
        // Any answer but a refusal ends one (`was_accepted` above saw it: taken again, the
        // lease and resync start at once).
        self.refused = false;
        // The hub's list of managed namespaces: the full list in every Accepted answer; none
        // once the cluster was deleted (OCM unmanages everything then).
        let namespaces = match new_state {
            HubState::Accepted => Some(
                resp.managed_namespaces
                    .iter()
                    .map(|n| ManagedNamespace {
                        name: n.name.clone(),
                        cluster_set: n.cluster_set.clone(),
                    })
                    .collect::<Vec<_>>(),
            ),
            HubState::Unknown => Some(Vec::new()),
            HubState::Pending | HubState::Denied => None,
        };
        let namespaces_changed = namespaces
            .as_ref()
            .is_some_and(|n| *n != self.store.get().managed_namespaces);
        // Likewise the add-ons installed by someone else, whose spoke Leases it reports.
        let addons = match new_state {
            HubState::Accepted => Some(watched_addons(&resp.external_addons)),
            HubState::Unknown => Some(Vec::new()),
            HubState::Pending | HubState::Denied => None,
        };
        let addons_changed = addons
            .as_ref()
            .is_some_and(|a| *a != self.store.get().external_addons);
        if let Err(e) = self.store.update(|s| {
            s.hub_state = new_state;
            if resp.lease_duration_seconds > 0 {
                s.lease_duration_seconds = resp.lease_duration_seconds;
            }
            if let Some(n) = namespaces {
                s.managed_namespaces = n;
            }
            if let Some(a) = addons {
                s.external_addons = a;
            }
        }) {
            tracing::error!(error = %e, "saving agent state failed");
        }
        if namespaces_changed {
            self.reconcile_namespaces(true).await;
        }
        if (namespaces_changed || addons_changed) && new_state == HubState::Accepted {
            self.report_status(false).await;
        }
        self.schedule_after(new_state, was_accepted, lease_changed, &resp);
    }

    /// The timers after a registration answer moved the agent to `new_state`: lease, resync
    /// and scores at once when newly accepted, the next registration by state.
    fn schedule_after(
        &mut self,
        new_state: HubState,
        was_accepted: bool,
        lease_changed: bool,
        resp: &RegistrationResponse,
    ) {
        match new_state {
            HubState::Accepted => {
                if !was_accepted {
                    tracing::info!(
                        lease_seconds = resp.lease_duration_seconds,
                        "accepted by the hub"
                    );
                }
                if !was_accepted || lease_changed {
                    self.next_lease = Some(Instant::now());
                    self.last_status_hash = None;
                }
                if !was_accepted {
                    self.next_resync = Some(Instant::now());
                    self.next_score = Some(Instant::now());
                }
                let mut refresh = jitter(ACCEPTED_REFRESH, 0.5);
                if let Some(creds) = &self.credentials {
                    refresh = refresh.min(Duration::from_secs(creds.renew_in().max(1)));
                }
                self.next_register = Some(Instant::now() + refresh);
            }
            HubState::Pending => {
                self.next_resync = None;
                tracing::info!("waiting for the hub to accept this cluster");
                self.next_lease = None;
                self.next_register = Some(Instant::now() + jitter(self.config.pending_poll, 0.5));
            }
            HubState::Denied => {
                self.next_resync = None;
                tracing::warn!(reason = %resp.message, "the hub denied this cluster");
                self.next_lease = None;
                self.next_register = Some(Instant::now() + jitter(self.config.denied_poll, 0.5));
            }
            HubState::Unknown => {
                self.next_resync = None;
                tracing::warn!("the cluster was deleted on the hub; registering again");
                self.next_lease = None;
                self.next_register = Some(Instant::now() + jitter(self.config.pending_poll, 0.5));
            }
        }
    }

    /// A message of the spec subject (or a spec of a resync answer) as an event for this cluster;
    /// None, counted as dropped, when it is unreadable or for another cluster. Logged at debug:
    /// anyone who can name the spec subject as a reply could otherwise flood the agent's log.
    fn read_spec(&self, bytes: &[u8]) -> Option<Event> {
        self.config.metrics.spec_events.inc();
        let event = match Event::decode(bytes, self.config.max_event_bytes) {
            Ok(e) => e,
            Err(e) => {
                self.config.metrics.spec_dropped.inc();
                tracing::debug!(error = %e, "malformed spec event dropped");
                return None;
            }
        };
        if event.cluster != self.name() {
            self.config.metrics.spec_dropped.inc();
            tracing::debug!(clustername = %event.cluster, "spec event for another cluster dropped");
            return None;
        }
        Some(event)
    }

    async fn on_spec(&mut self, msg: async_nats::Message) {
        let Some(event) = self.read_spec(&msg.payload) else {
            return;
        };
        if flotilla_bus::works::is_work(&event.event_type) {
            if self.accepted() {
                self.works.on_spec(&event).await;
            } else {
                tracing::warn!("work spec ignored: this cluster is not accepted");
            }
            return;
        }
        let accepted = self.accepted();
        let parts = spec::Parts {
            config: &self.config,
            backend: &self.backend,
            store: &self.store,
            client: &self.client,
            spoke: self.spoke.as_ref(),
        };
        if self.specs.on_spec(&event, accepted, &parts).await {
            return;
        }
        if event.event_type == types::registration_response()
            || event.event_type == types::cluster_deleted()
        {
            match event.decode_data::<RegistrationResponse>("RegistrationResponse") {
                // The hub's notifications carry no in_reply_to; an answer to a request arriving
                // here was sent to a reply subject someone else chose: not ours to act on.
                // The hub notifies acceptance, denial and deletion here; Pending and Rejected are
                // only ever answers to a request.
                Ok(resp)
                    if !resp.in_reply_to.is_empty()
                        || matches!(
                            RegistrationState::try_from(resp.state),
                            Ok(RegistrationState::Pending | RegistrationState::Rejected)
                        ) =>
                {
                    self.config.metrics.spec_dropped.inc();
                    tracing::debug!("an answer to someone's request on the spec subject dropped");
                }
                Ok(resp) => {
                    self.notified_while_registering |= self.register_call.is_some();
                    self.apply_response(resp).await;
                }
                Err(e) => {
                    self.config.metrics.spec_dropped.inc();
                    tracing::debug!(error = %e, "malformed registration event dropped");
                }
            }
        } else {
            tracing::debug!(r#type = %event.event_type, "spec event type not handled by this agent");
        }
    }

    /// Spec resync: the full `{resourceid: generation}` map when it is small (one request),
    /// else first the digest of the works this agent holds (one small message when nothing
    /// changed, which is the common case after a reconnect), then — only when the hub's digest
    /// differs — the full map. The hub re-sends what is newer and names what it no longer has,
    /// which is deleted here when the answer comes; or, busy with others, says when to ask again.
    fn resync(&mut self) {
        self.next_resync = Some(Instant::now() + jitter(self.resync_interval(), 0.5));
        self.periodic_resync = self.next_resync;
        if !self.accepted() {
            self.next_resync = None;
            return;
        }
        let versions = self.works.versions();
        let uids = self.works.uids();
        let first = first_resync_request(self.name(), &versions, &uids);
        let bound = self.answer_times.bound();
        // A resync is up to two requests (the digest, then the versions), each within `bound`.
        self.health.resync_sent(Instant::now(), bound * 2);
        let call = ResyncCall {
            requests: self.requests.with_timeout(bound),
            source: self.source.clone(),
            cluster: self.name().to_string(),
        };
        self.resync_call = Some(Call::new(call.run(first, versions, uids)));
    }

    /// The period of periodic resyncs: the agent's own, or the hub's when it asks for longer.
    /// With several hubs the answers are the hub's sign of life, so the session keeps its own
    /// (capped) interval.
    fn resync_interval(&self) -> Duration {
        if self.config.hub_session.is_some() {
            return self.config.resync_interval;
        }
        self.config.resync_interval.max(self.hub_resync_period)
    }

    /// A full answer says the period the hub asks of periodic resyncs: the one scheduled when
    /// the request went out follows it (not one something else scheduled since).
    fn follow_hub_resync_period(&mut self, seconds: u32) {
        let period = Duration::from_secs(u64::from(seconds));
        if period == self.hub_resync_period {
            return;
        }
        self.hub_resync_period = period;
        if self.next_resync.is_some() && self.next_resync == self.periodic_resync {
            self.next_resync = Some(Instant::now() + jitter(self.resync_interval(), 0.5));
            self.periodic_resync = self.next_resync;
        }
    }

    /// A spec the hub put in its resync answer: handled as a work spec of the spec subject is.
    async fn on_resynced_spec(&mut self, bytes: &[u8]) {
        let Some(event) = self.read_spec(bytes) else {
            return;
        };
        if !flotilla_bus::works::is_work(&event.event_type) || !self.accepted() {
            self.config.metrics.spec_dropped.inc();
            tracing::warn!(
                event_type = %event.event_type,
                "a resync answer's spec that is not a work of this accepted cluster dropped"
            );
            return;
        }
        self.works.on_spec(&event).await;
    }

    /// The NATS client dropped a message of a full subscription (one event per message). It may
    /// have been a spec, sent once over core NATS: a resync asks the hub for anything this agent
    /// lacks — now rather than at the next periodic one, and at most once every
    /// [`DROP_RESYNC_SPACING`] however many were dropped. A resync in flight keeps going; the
    /// one scheduled here follows its answer.
    fn messages_dropped(&mut self) {
        self.config.metrics.slow_consumer.inc();
        if !self.accepted() {
            return;
        }
        let now = Instant::now();
        let at = self
            .drop_resync
            .map_or(now, |t| (t + DROP_RESYNC_SPACING).max(now));
        if self.next_resync.is_none_or(|n| at < n) {
            self.next_resync = Some(at);
            self.drop_resync = Some(at);
        }
    }

    async fn on_resync_answer(&mut self, answer: Timed<Result<SpecResyncResponse, ResyncFailed>>) {
        let Timed { answer, took } = answer;
        self.health.resync_ended(match &answer {
            Ok(_) => Outcome::Answered,
            Err(ResyncFailed::Busy(_)) => Outcome::Busy,
            Err(ResyncFailed::Refused) => Outcome::Refused,
            Err(ResyncFailed::Unanswered) => Outcome::Unanswered,
        });
        if let Err(ResyncFailed::Unanswered) = answer {
            self.answer_times.unanswered(took);
        } else {
            self.answer_times.answered(took);
        }
        if let (Some(session), Ok(_) | Err(ResyncFailed::Refused | ResyncFailed::Busy(_))) =
            (&self.config.hub_session, &answer)
        {
            session.signal(crate::hubs::Signal::Alive);
        }
        match answer {
            Ok(resp) => {
                self.resync_failures = 0;
                self.follow_hub_resync_period(resp.resync_period_seconds);
                tracing::debug!(
                    resent = resp.resent,
                    deleted = resp.deleted.len(),
                    "spec resync done"
                );
                self.works.delete_unknown(&resp.deleted).await;
                self.works.republish(&resp.republish).await;
                for spec in &resp.specs {
                    Box::pin(self.on_resynced_spec(spec)).await;
                }
            }
            Err(ResyncFailed::Refused) => self.resync_failures = 0,
            // A place in the hub's queue, not a failure: asked again when it is due.
            Err(ResyncFailed::Busy(wait)) => {
                self.resync_failures = 0;
                self.next_resync = Some(Instant::now() + wait);
            }
            // Sooner than a whole resync interval later, but later each time the hub does not
            // answer: a fleet that came back at once must not ask again at once.
            Err(ResyncFailed::Unanswered) => {
                self.resync_failures = self.resync_failures.saturating_add(1);
                let wait = jitter(resync_wait(self.resync_failures), 0.5);
                self.next_resync = Some(Instant::now() + wait);
            }
        }
    }

    /// Says on the status tick what keeps this agent from hearing the hub, if anything does
    /// ([`LoopHealth`]): a starved agent whose resyncs all come to nothing, or a stuck call,
    /// would otherwise keep its leases going while works the hub sent never arrive, silently.
    fn report_health(&mut self) {
        let Some(report) = self.health.report(Instant::now()) else {
            return;
        };
        let (calls_waiting, unclaimed_answers, routed) =
            self.spoke.as_ref().map_or((0, 0, 0), |s| {
                (s.calls_waiting(), s.unclaimed_answers(), s.routed())
            });
        let found = match report {
            Report::Recovered => {
                tracing::info!("the hub answers this agent's calls again");
                return;
            }
            Report::Unwell(found) => found,
        };
        // Every agent of a starved simulator finds the same at once: process-wide budgets.
        static UNANSWERED: WarnBudget = WarnBudget::new();
        static STUCK: WarnBudget = WarnBudget::new();
        for finding in found {
            let budget = match finding {
                Finding::Unanswered { .. } => &UNANSWERED,
                Finding::Stuck { .. } => &STUCK,
            };
            let Allow::Say { left_out } = budget.allow() else {
                continue;
            };
            match finding {
                Finding::Unanswered { for_, misses } => tracing::warn!(
                    cluster = %self.config.cluster_name,
                    seconds = for_.as_secs(),
                    busy = misses.busy,
                    refused = misses.refused,
                    unanswered = misses.unanswered,
                    bound_ms = self.answer_times.bound().as_millis() as u64,
                    works = self.works.versions().len(),
                    spec_events = self.config.metrics.spec_events.get(),
                    calls_waiting,
                    unclaimed_answers,
                    routed,
                    left_out,
                    "no spec resync answered for minutes: works the hub sent meanwhile may be missing here"
                ),
                Finding::Stuck { what, for_, bound } => tracing::warn!(
                    cluster = %self.config.cluster_name,
                    call = what,
                    seconds = for_.as_secs(),
                    bound_ms = bound.as_millis() as u64,
                    calls_waiting,
                    left_out,
                    "a call to the hub is outstanding far past its bound; spec events wait behind a resync call"
                ),
            }
        }
    }

    async fn publish(&self, kind: &str, ev: Event) -> bool {
        self.publish_to(subjects::status(self.name(), kind, None), kind, ev)
            .await
    }

    /// Publishes into the status stream and waits (bounded) for the acknowledgement.
    async fn publish_to(&self, subject: String, kind: &str, ev: Event) -> bool {
        match self.events.publish_acked(subject, &ev).await {
            Ok(_) => true,
            Err(e) if e.is_permanent() => {
                tracing::error!(error = %e, kind, "event cannot be sent");
                false
            }
            Err(e) => {
                tracing::debug!(error = %e, kind, "status publish failed");
                false
            }
        }
    }
}

/// What the agent asks the hub at registration: its labels and claims, what the cluster reports,
/// its public key, and in secure mode whether it needs credentials.
pub async fn registration_request(
    config: &AgentConfig,
    backend: &dyn Backend,
    store: &LocalStore,
    credentials: Option<&AgentCredentials>,
) -> RegistrationRequest {
    let info = backend.info().await;
    let public_key = nkeys::KeyPair::from_seed(store.get().nkey_seed.expose())
        .map(|k| k.public_key())
        .unwrap_or_default();
    let claims = claims(config, store, &info);
    RegistrationRequest {
        cluster_name: config.cluster_name.clone(),
        labels: config.labels.clone(),
        claims,
        capacity: info.capacity,
        allocatable: info.allocatable,
        kubernetes_version: info.kubernetes_version,
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        agent_public_key: public_key,
        credentials_wanted: credentials.is_some_and(|c| c.wanted()),
        request_id: uuid::Uuid::new_v4().simple().to_string(),
        listens_under_prefix: !config.legacy_wire,
    }
}

/// The add-ons the hub names in an Accepted answer, as kept in the local store.
fn watched_addons(list: &[flotilla_api::v1::ExternalAddOn]) -> Vec<crate::store::WatchedAddOn> {
    list.iter()
        .map(|a| crate::store::WatchedAddOn {
            name: a.name.clone(),
            install_namespace: a.install_namespace.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;

//! The Flotilla agent: runs next to (or inside) one spoke cluster.
//!
//! - [`registration`]: the registration actor — double opt-in registration, lease renewal,
//!   cluster status reports, reaction to acceptance/denial/deletion and to reconnects.
//! - [`credentials`]: secure mode — bootstrap credentials, the cluster's own (issued by the
//!   hub, kept in `STATE_DIR/cluster.creds`), renewal and fallback.
//! - [`enrolment`]: secure mode before the agent has its own credentials: registration over
//!   the bootstrap connection until the hub issues them.
//! - [`backend`]: the local cluster ([`backend::sim::SimBackend`] for simulators and tests).
//! - [`claims`]: the cluster's reserved claims, reported by registration and read by policy
//!   templates.
//! - [`work`]: ManifestWork execution — one actor per work, status feedback, proxy queries.
//! - [`warn_budget`]: process-wide budgets for warnings every agent of a simulator gives at once.
//! - [`kubeproxy`]: the cluster proxy's calls from the hub (`kubectl` through the hub), served
//!   by the backend ([`backend::Backend::serve_api`]) and streamed back with flow control.
//! - [`policy`]: governance — replicated policies evaluated and enforced on the spoke (one
//!   actor per policy), status and history reported when they change.
//! - [`peersecrets`]: MirrorPeers — the source Secret sealed to every peer with the agent's
//!   static curve key, peers' boxes opened into GREEN Secrets, removed when the MirrorPeer goes.
//! - [`serviceaccount`]: ManagedServiceAccounts — the ServiceAccount created, tokens requested,
//!   sealed to the hub and rotated at a fraction of the lifetime the cluster granted.
//! - [`spec`]: the spec handlers the registration actor routes the hub's spec events to
//!   (policies, ManagedServiceAccounts, MirrorPeers), in one list; works stay its own part.
//! - [`namespaces`]: the namespaces the cluster's sets manage (ManagedClusterSet
//!   `managedNamespaces`), created and labelled as OCM's registration agent does.
//! - [`scores`]: AddOnPlacementScores the agent reports (resource usage).
//! - [`addons`]: add-on agents run in-process on simulated clusters
//!   ([`AgentConfig::simulate_addons`]), the example add-on `fleet-metrics`, and (secure mode)
//!   the hub credentials handed to add-ons as Secrets ([`addons::credentials`]).
//! - [`store`]: durable local state (`--state-dir`) or in-memory state for simulators.
//! - [`features`]: feature gates (`--feature-gates`), as OCM's work agent names them.
//! - [`hubs`]: several hubs (OCM's MultipleHubs) — one session at a time, failover when the
//!   current hub stops answering or denies the cluster, one state directory per hub.
//! - [`metrics`]: the agent's Prometheus metrics, one set per process (a simulator's agents
//!   share it; no per-cluster labels).
//!
//! [`run`] is what the `flotilla-agent` binary and the simulator call.

#![deny(missing_docs)]

pub mod addons;
pub mod backend;
pub mod claims;
pub mod credentials;
pub mod enrolment;
pub mod features;
pub mod hubs;
pub mod kubeproxy;
pub mod metrics;
pub mod namespaces;
pub mod peersecrets;
pub mod policy;
pub mod registration;
pub mod scores;
pub mod serviceaccount;
pub mod spec;
pub mod store;
pub mod warn_budget;
pub mod work;

use flotilla_api::v1::ClusterClaim;
use flotilla_bus::connect::{self, NatsConfig};
use flotilla_bus::spoke::{Demux, Feeds, Spoke};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Where the agent keeps its state.
#[derive(Clone)]
pub enum StateConfig {
    /// A directory (durable across restarts).
    Dir(PathBuf),
    /// Memory only (simulators).
    Memory,
    /// A store the caller keeps: a simulated agent restarted in the same process comes back
    /// with its key, sequence numbers and works, as a real agent does from its directory.
    Shared(Arc<store::LocalStore>),
}

impl StateConfig {
    /// The state directory, for a durable state.
    fn dir(&self) -> Option<&std::path::Path> {
        match self {
            Self::Dir(dir) => Some(dir),
            Self::Memory | Self::Shared(_) => None,
        }
    }
}

impl std::fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
            Self::Memory => f.write_str("Memory"),
            Self::Shared(_) => f.write_str("Shared"),
        }
    }
}

/// Everything an agent needs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The cluster's name (DNS-1123 label).
    pub cluster_name: String,
    /// NATS connection (the inbox prefix is set to `_INBOX.<cluster>`).
    pub nats: NatsConfig,
    /// State location.
    pub state: StateConfig,
    /// Labels asked for at registration.
    pub labels: HashMap<String, String>,
    /// Custom claims (the reserved ones are added from the backend).
    pub claims: Vec<ClusterClaim>,
    /// How often a pending agent asks again.
    pub pending_poll: Duration,
    /// How often a denied agent asks again.
    pub denied_poll: Duration,
    /// How often the backend is checked for status changes.
    pub status_interval: Duration,
    /// How often work resources are observed (status and feedback).
    pub work_status_interval: Duration,
    /// How long a work reports `Repaired` after drift repair wrote something back, and the
    /// span over which repairs count towards a fight (`Contested`).
    pub drift_window: Duration,
    /// How often the agent asks the hub for a spec resync besides every (re)connect (jittered).
    pub resync_interval: Duration,
    /// How often the agent reports its AddOnPlacementScores (None = never); each report is
    /// valid for three intervals.
    pub score_interval: Option<Duration>,
    /// Largest event sent.
    pub max_event_bytes: usize,
    /// Serve the hub's cluster-proxy calls (`kubectl` through the hub); off saves a channel per
    /// agent (and, on the previous wire, a subscription) in very large simulated fleets.
    pub cluster_proxy: bool,
    /// Listen on the previous wire — `flotilla.spec.<c>`, `flotilla.proxy.<c>`,
    /// `flotilla.kubeapi.<c>` and an inbox, three or four subscriptions — instead of the one
    /// subscription `flotilla.to.<c>.>` ([`flotilla_bus::spoke`]). Only for tests and the
    /// simulator, which play agents that predate the prefix against a newer hub.
    pub legacy_wire: bool,
    /// What the cluster proxy's callers may take of the agent: calls per caller, request-body
    /// bytes held.
    pub proxy_limits: kubeproxy::Limits,
    /// Secure mode: the bootstrap credentials file (`--bootstrap-creds`).
    pub bootstrap_creds: Option<PathBuf>,
    /// Feature gates (`--feature-gates`); all off by default, as in OCM.
    pub feature_gates: features::FeatureGates,
    /// Where the agent counts what it does (shared by every agent of a simulator process).
    pub metrics: Arc<metrics::AgentMetrics>,
    /// A NATS connection shared with other agents (simulators at scale); `None`: the agent
    /// opens its own from `nats`, as a real edge cluster does.
    pub connection: Option<SharedConnection>,
    /// Run the add-on agents of known images (`flotilla/fleet-metrics`) that the cluster's
    /// Deployments declare inside the agent, as a simulated cluster's kubelet would
    /// ([`addons::Supervisor`]). Off by default (a real cluster runs them itself); `flotilla-sim`
    /// turns it on. In secure mode each add-on gets credentials of its own from the hub.
    pub simulate_addons: bool,
    /// Secure mode: hand each add-on that asks for hub access (its work carries
    /// `addon.flotilla.io/hub-credentials-secret`) credentials of its own, as a Secret in its
    /// install namespace ([`addons::credentials::SecretKeeper`]). On by default; ignored
    /// without secure mode.
    pub addon_credentials_secrets: bool,
    /// The namespace of the ServiceAccounts of ManagedServiceAccounts on this cluster
    /// (`--service-account-namespace`; OCM's add-on install namespace by default).
    pub service_account_namespace: String,
    /// Set by [`hubs::Supervisor`] for the session with one of several hubs: the hub's name
    /// and where to tell when it answered or denied the cluster. `None` with one hub.
    pub hub_session: Option<hubs::Session>,
}

/// A NATS connection several agents of one process share (`flotilla-sim --share-connections`):
/// each agent subscribes and publishes on it as on its own, hears its connection events from
/// `events`, and never drains or closes it. Not for secure mode: credentials are per cluster.
#[derive(Debug, Clone)]
pub struct SharedConnection {
    /// The connected client.
    pub client: async_nats::Client,
    /// The connection's JetStream context, shared by every agent on it (one acknowledgement
    /// task per connection).
    pub js: async_nats::jetstream::Context,
    /// The connection's events, for every agent on it.
    pub events: tokio::sync::broadcast::Sender<connect::ConnectionEvent>,
}

impl SharedConnection {
    /// Connects with `nats` and starts fanning its events out (the task ends with the
    /// connection).
    pub async fn connect(nats: &NatsConfig) -> Result<Self, connect::ConnectError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let client = connect::connect(nats, Some(tx)).await?;
        let (events, _) = tokio::sync::broadcast::channel(64);
        let fan_out = events.clone();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                let _ = fan_out.send(ev);
            }
        });
        let js = async_nats::jetstream::new(client.clone());
        Ok(Self { client, js, events })
    }

    /// This agent's view of the events: a channel fed until the agent drops it. An agent that
    /// fell behind hears `Connected`, which makes it resync.
    fn subscribe(&self) -> tokio::sync::mpsc::UnboundedReceiver<connect::ConnectionEvent> {
        use tokio::sync::broadcast::error::RecvError;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut events = self.events.subscribe();
        tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    () = tx.closed() => break,
                    ev = events.recv() => match ev {
                        Ok(ev) => ev,
                        Err(RecvError::Lagged(_)) => connect::ConnectionEvent::Connected,
                        Err(RecvError::Closed) => break,
                    },
                };
                if tx.send(ev).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

impl AgentConfig {
    /// Defaults for a cluster talking to `nats_url`.
    pub fn new(cluster_name: &str, nats_url: &str) -> Self {
        let mut nats = NatsConfig::new(nats_url, format!("flotilla-agent/{cluster_name}"));
        nats.inbox_prefix = Some(flotilla_bus::subjects::inbox_prefix(cluster_name));
        Self {
            cluster_name: cluster_name.to_string(),
            nats,
            state: StateConfig::Memory,
            labels: HashMap::new(),
            claims: Vec::new(),
            pending_poll: Duration::from_secs(30),
            denied_poll: Duration::from_secs(300),
            status_interval: Duration::from_secs(10),
            work_status_interval: Duration::from_secs(10),
            drift_window: work::drift::DriftRules::default().window,
            resync_interval: Duration::from_secs(300),
            score_interval: Some(Duration::from_secs(60)),
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            cluster_proxy: true,
            legacy_wire: false,
            proxy_limits: kubeproxy::Limits::default(),
            bootstrap_creds: None,
            feature_gates: features::FeatureGates::default(),
            metrics: Arc::default(),
            connection: None,
            simulate_addons: false,
            addon_credentials_secrets: true,
            service_account_namespace: flotilla_api::serviceaccount::DEFAULT_NAMESPACE.into(),
            hub_session: None,
        }
    }

    /// Checks everything the hub would reject, so a misconfigured agent fails at start with
    /// every problem listed instead of being refused over the wire.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if let Err(e) = flotilla_api::names::validate_cluster_name(&self.cluster_name) {
            errors.push(format!("--cluster-name: {}", e.reason));
        }
        for e in flotilla_api::names::validate_labels("--label", &self.labels) {
            errors.push(e.to_string());
        }
        for (i, c) in self.claims.iter().enumerate() {
            if let Err(e) =
                flotilla_api::names::validate_claim(&format!("--claim[{i}]"), &c.name, &c.value)
            {
                errors.push(e.to_string());
            }
            if flotilla_api::meta::RESERVED_CLAIMS.contains(&c.name.as_str()) {
                errors.push(format!(
                    "--claim[{i}]: {:?} is reserved and reported by the agent itself",
                    c.name
                ));
            }
        }
        if let Err(e) = flotilla_api::names::validate_dns1123_label(
            "--service-account-namespace",
            &self.service_account_namespace,
        ) {
            errors.push(e.to_string());
        }
        if self.claims.len() > flotilla_api::meta::MAX_CUSTOM_CLAIMS {
            errors.push(format!(
                "--claim: {} custom claims, at most {} allowed",
                self.claims.len(),
                flotilla_api::meta::MAX_CUSTOM_CLAIMS
            ));
        }
        if self.connection.is_some() && self.bootstrap_creds.is_some() {
            errors.push(
                "a shared NATS connection cannot be used in secure mode: each cluster's \
                 credentials need a connection of their own"
                    .into(),
            );
        }
        errors
    }
}

/// Why the agent stopped.
#[derive(Debug, Error)]
pub enum AgentError {
    /// Invalid configuration (every problem listed).
    #[error("invalid configuration: {}", .0.join("; "))]
    Config(Vec<String>),
    /// The secure mode's credentials are unusable (`--bootstrap-creds`, the agent's key).
    #[error("invalid configuration: {0}")]
    Credentials(#[from] credentials::CredentialsError),
    /// Local state is unusable.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// NATS options are unusable.
    #[error(transparent)]
    Connect(#[from] connect::ConnectError),
    /// The agent's subscription could not be made (the client closed).
    #[error("subscribing to the hub's messages failed: {0}")]
    Subscribe(#[from] async_nats::SubscribeError),
}

/// Runs an agent until `shutdown` resolves. Survives NATS and hub outages on its own.
pub async fn run(
    config: AgentConfig,
    backend: Arc<dyn backend::Backend>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    let mut shutdown = Box::pin(shutdown);
    // The one-off steps run boxed, so the task keeps only what the running actor needs (the
    // state of a connect or an enrolment is much larger than an idle agent's).
    let Some(Prepared {
        actor,
        feeds,
        events: events_rx,
        client,
        demux,
        addons,
        keeper,
        proxy,
    }) = Box::pin(prepare(config, backend, shutdown.as_mut())).await?
    else {
        return Ok(());
    };
    // The add-ons and their credentials run as long as the agent does, and stop with it. Each
    // is boxed only when there is one: an absent part costs nothing (a box of `pending` does
    // not allocate), where an `async` block choosing between the two would hold the largest.
    let addons = boxed_or_pending(addons.map(addons::Supervisor::run));
    let keeper = boxed_or_pending(keeper.map(addons::credentials::SecretKeeper::run));
    let proxy = boxed_or_pending(proxy.map(kubeproxy::Server::run));
    tokio::select! {
        () = actor.run(feeds, events_rx, shutdown) => {}
        () = addons => {}
        () = keeper => {}
        () = proxy => {}
    }
    if let Some(demux) = demux {
        demux.stop().await;
    }
    if let Some(own) = client {
        let _ = tokio::time::timeout(Duration::from_secs(2), Box::pin(own.drain())).await;
    }
    Ok(())
}

/// `part`, boxed, or a future that never resolves (and allocates nothing) without one.
fn boxed_or_pending(
    part: Option<impl std::future::Future<Output = ()> + Send + 'static>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    match part {
        Some(f) => Box::pin(f),
        None => Box::pin(std::future::pending()),
    }
}

/// What a running agent is made of.
struct Prepared {
    actor: registration::RegistrationActor,
    /// What the hub sends it (specs, proxied reads; the cluster proxy's frames went to `proxy`).
    feeds: Feeds,
    /// Its connection events.
    events: tokio::sync::mpsc::UnboundedReceiver<connect::ConnectionEvent>,
    /// Its own client, to drain at the end (`None` for a shared connection).
    client: Option<async_nats::Client>,
    /// The demux of its one subscription (prefix wire), stopped at the end.
    demux: Option<Demux>,
    /// The in-process add-ons' supervisor (`simulate_addons`).
    addons: Option<addons::Supervisor>,
    /// The keeper of the add-ons' hub credentials Secrets (secure mode).
    keeper: Option<addons::credentials::SecretKeeper>,
    /// The cluster-proxy server.
    proxy: Option<kubeproxy::Server>,
}

/// Where the hub's messages reach the agent: one subscription and its demux (the prefix wire),
/// or the previous wire's own subscriptions ([`AgentConfig::legacy_wire`]).
async fn listen(
    config: &AgentConfig,
    client: &async_nats::Client,
) -> Result<(Option<Spoke>, Feeds, Option<Demux>), AgentError> {
    if config.legacy_wire {
        let feeds = Feeds::previous(client, &config.cluster_name, config.cluster_proxy).await;
        return Ok((None, feeds, None));
    }
    let (spoke, feeds, demux) = Spoke::start(
        client,
        &config.cluster_name,
        config.cluster_proxy,
        flotilla_bus::spoke::Capacities::default(),
    )
    .await?;
    Ok((Some(spoke), feeds, Some(demux)))
}

/// Opens the state, enrols (secure mode), connects and builds the actor; `None` when
/// `shutdown` resolves first.
async fn prepare(
    mut config: AgentConfig,
    backend: Arc<dyn backend::Backend>,
    mut shutdown: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Result<Option<Prepared>, AgentError> {
    let errors = config.validate();
    if !errors.is_empty() {
        return Err(AgentError::Config(errors));
    }
    let store = open_store(&config)?;
    let credentials = secure_credentials(&mut config, &store)?;
    if let Some(creds) = credentials.as_ref().filter(|c| !c.usable()) {
        tokio::select! {
            r = enrolment::run(&config, backend.as_ref(), &store, creds) => r?,
            () = &mut shutdown => return Ok(None),
        }
    }
    let connection = Connection::open(&config).await?;
    settle_wire(&mut config, credentials.as_deref());
    let (spoke, mut feeds, demux) = listen(&config, &connection.client).await?;
    let link = Link {
        client: connection.client,
        js: connection.js,
        spoke,
        kubeapi: feeds.kubeapi.take(),
    };
    let parts = assemble(config, backend, store, credentials, link)?;
    Ok(Some(Prepared {
        actor: parts.actor,
        feeds,
        events: connection.events,
        client: connection.own,
        demux,
        addons: parts.addons,
        keeper: parts.keeper,
        proxy: parts.proxy,
    }))
}

/// The agent's local state: its state directory, memory (simulators), or the caller's store.
fn open_store(config: &AgentConfig) -> Result<Arc<store::LocalStore>, AgentError> {
    Ok(match &config.state {
        StateConfig::Dir(dir) => Arc::new(store::LocalStore::open(dir, &config.cluster_name)?),
        StateConfig::Memory => Arc::new(store::LocalStore::memory(&config.cluster_name)),
        StateConfig::Shared(store) => store.clone(),
    })
}

/// Secure mode (`bootstrap_creds` set): the cluster's credentials — its own from the state
/// directory, or the bootstrap ones until the hub issues them — made the connection's
/// authentication. `None` outside secure mode.
fn secure_credentials(
    config: &mut AgentConfig,
    store: &store::LocalStore,
) -> Result<Option<Arc<credentials::AgentCredentials>>, AgentError> {
    let Some(bootstrap) = &config.bootstrap_creds else {
        return Ok(None);
    };
    let creds = credentials::AgentCredentials::load(
        bootstrap,
        config.state.dir(),
        store.get().nkey_seed.expose(),
    )?;
    let creds = Arc::new(match config.legacy_wire {
        true => creds,
        false => creds.needing(flotilla_bus::subjects::to_all(&config.cluster_name)),
    });
    config.nats.auth = Some(creds.clone());
    config.nats.credentials_file = None;
    Ok(Some(creds))
}

/// The agent's NATS connection: its own, or one the process shares.
struct Connection {
    client: async_nats::Client,
    /// One JetStream context per connection: every publisher derives from it.
    js: async_nats::jetstream::Context,
    events: tokio::sync::mpsc::UnboundedReceiver<connect::ConnectionEvent>,
    /// The agent's own client, to drain at the end (`None` for a shared connection).
    own: Option<async_nats::Client>,
}

impl Connection {
    /// Joins [`AgentConfig::connection`] when there is one, or connects with
    /// [`AgentConfig::nats`].
    async fn open(config: &AgentConfig) -> Result<Self, AgentError> {
        if let Some(shared) = &config.connection {
            return Ok(Self {
                client: shared.client.clone(),
                js: shared.js.clone(),
                events: shared.subscribe(),
                own: None,
            });
        }
        let (events_tx, events) = tokio::sync::mpsc::unbounded_channel();
        let client = connect::connect(&config.nats, Some(events_tx)).await?;
        Ok(Self {
            js: async_nats::jetstream::new(client.clone()),
            own: Some(client.clone()),
            client,
            events,
        })
    }
}

/// Credentials issued by a hub before the one-subscription wire do not allow its prefix: this
/// run stays on the previous wire (and says so at registration), and asks for credentials that
/// allow the prefix, which the next start uses.
fn settle_wire(config: &mut AgentConfig, credentials: Option<&credentials::AgentCredentials>) {
    if !config.legacy_wire
        && let Some(creds) = credentials
        && !creds.allow_subscribing(&flotilla_bus::subjects::to_all(&config.cluster_name))
    {
        tracing::warn!(
            "the cluster's credentials predate the one-subscription wire; listening on the previous wire until the agent restarts with renewed ones"
        );
        config.legacy_wire = true;
    }
}

/// The agent's connection as its parts use it.
struct Link {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    /// Where requests' answers and JetStream acknowledgements come back (prefix wire).
    spoke: Option<Spoke>,
    /// The cluster proxy's frames (when it serves them).
    kubeapi: Option<flotilla_bus::spoke::Feed>,
}

/// What [`assemble`] builds.
struct Parts {
    actor: registration::RegistrationActor,
    addons: Option<addons::Supervisor>,
    keeper: Option<addons::credentials::SecretKeeper>,
    proxy: Option<kubeproxy::Server>,
}

/// Builds the agent's parts over its connection: the work manager, the add-ons (and their
/// credentials' keeper), governance, the cluster-proxy server and the registration actor.
fn assemble(
    config: AgentConfig,
    backend: Arc<dyn backend::Backend>,
    store: Arc<store::LocalStore>,
    credentials: Option<Arc<credentials::AgentCredentials>>,
    link: Link,
) -> Result<Parts, AgentError> {
    let Link {
        client,
        js,
        spoke,
        kubeapi,
    } = link;
    let works = work_manager(&config, &backend, &store, &js, &spoke)?;
    let (addons, keeper) = addon_parts(
        &config,
        &backend,
        &store,
        credentials.is_some(),
        &client,
        &spoke,
    );
    let policies = policy_manager(&config, &backend, &store, &js, &spoke)?;
    let proxy = config.cluster_proxy.then(|| {
        kubeproxy::Server::new(
            &js,
            &config.cluster_name,
            backend.clone(),
            config.max_event_bytes,
        )
        .with_limits(config.proxy_limits.clone(), config.metrics.clone())
        .with_feed(kubeapi)
    });
    let mut actor = registration::RegistrationActor::new(config, &js, backend, store, works)
        .with_spoke(spoke)
        .with_policies(policies);
    if let Some(creds) = credentials {
        actor = actor.with_credentials(creds);
    }
    Ok(Parts {
        actor,
        addons,
        keeper,
        proxy,
    })
}

/// The work manager, publishing over `js` (and `spoke`), keeping the resources of other hubs'
/// parked works when the agent serves several hubs.
fn work_manager(
    config: &AgentConfig,
    backend: &Arc<dyn backend::Backend>,
    store: &Arc<store::LocalStore>,
    js: &async_nats::jetstream::Context,
    spoke: &Option<Spoke>,
) -> Result<work::WorkManager, AgentError> {
    let publisher = work::Publisher::new(
        js,
        spoke.clone(),
        store.clone(),
        &config.cluster_name,
        config.max_event_bytes,
        config.metrics.clone(),
    );
    let works = work::WorkManager::start(
        &config.cluster_name,
        backend.clone(),
        store.clone(),
        publisher,
        work::WorkConfig {
            status_interval: config.work_status_interval,
            max_event_bytes: config.max_event_bytes,
            raw_json: config.feature_gates.raw_json(),
            metrics: config.metrics.clone(),
            drift: work::drift::DriftRules {
                window: config.drift_window,
                ..Default::default()
            },
            anchor_scope: config
                .hub_session
                .as_ref()
                .map(|s| Arc::from(s.hub.as_str())),
            stall_after: work::DEFAULT_STALL_AFTER,
        },
    )?;
    if let Some(session) = &config.hub_session {
        let parked = session.parked_resources(&config.cluster_name);
        tracing::debug!(hub = %session.hub, parked = parked.len(), "resources of other hubs' parked works kept");
        works.keep_parked(&parked);
    }
    Ok(works)
}

/// Governance: the policy manager, reporting status over `js` (and `spoke`).
fn policy_manager(
    config: &AgentConfig,
    backend: &Arc<dyn backend::Backend>,
    store: &Arc<store::LocalStore>,
    js: &async_nats::jetstream::Context,
    spoke: &Option<Spoke>,
) -> Result<policy::PolicyManager, AgentError> {
    let policies = policy::PolicyManager::start(
        &config.cluster_name,
        backend.clone(),
        store.clone(),
        Arc::new(policy::StreamSink::new(
            flotilla_bus::publish::Publisher::over(
                js,
                config.max_event_bytes,
                policy::STATUS_PUBLISH_TIMEOUT,
            )
            .with_spoke(spoke.clone()),
            store.clone(),
            &config.cluster_name,
        )),
        policy::PolicyConfig {
            claims: config.claims.clone(),
            ..policy::PolicyConfig::default()
        },
    )?;
    Ok(policies)
}

/// The in-process add-ons' supervisor (`simulate_addons`) and, in secure mode, the keeper of the
/// add-ons' hub credentials Secrets.
fn addon_parts(
    config: &AgentConfig,
    backend: &Arc<dyn backend::Backend>,
    store: &Arc<store::LocalStore>,
    secure: bool,
    client: &async_nats::Client,
    spoke: &Option<Spoke>,
) -> (
    Option<addons::Supervisor>,
    Option<addons::credentials::SecretKeeper>,
) {
    // Secure mode: one key per add-on, kept with the agent's state, shared by the Secrets'
    // keeper and the in-process add-ons.
    let keys = secure.then(|| {
        Arc::new(addons::credentials::AddOnKeys::new(
            config.state.dir().map(std::path::Path::to_path_buf),
        ))
    });
    let keeper = keys
        .as_ref()
        .filter(|_| config.addon_credentials_secrets)
        .map(|keys| {
            addons::credentials::SecretKeeper::new(
                &config.cluster_name,
                backend.clone(),
                store.clone(),
                client.clone(),
                keys.clone(),
            )
            .with_spoke(spoke.clone())
            .with_request_timeout(config.nats.request_timeout)
            .with_max_event_bytes(config.max_event_bytes)
        });
    let addons = config.simulate_addons.then(|| {
        let supervisor = addons::Supervisor::new(
            &config.cluster_name,
            backend.clone(),
            store.clone(),
            client.clone(),
        )
        .with_max_event_bytes(config.max_event_bytes);
        match &keys {
            Some(keys) => supervisor
                .with_requested_credentials(config.nats.clone())
                .with_keys(keys.clone()),
            None => supervisor,
        }
    });
    (addons, keeper)
}

//! The Flotilla hub: decides what every managed cluster should run and tracks what it reports.
//!
//! The hub's core — cluster actors and shards, the router, the store, several hubs, views, the
//! forwarding layer, report sinks and the controller shape — is the crate `flotilla-hub-core`,
//! re-exported here under the modules' old names; this crate adds the controller families, their
//! gRPC services, the cluster proxy and the dashboard. The core cannot import from here.
//!
//! Starting, state and views:
//! - `boot` (private): the steps of [`start`], one concern each — listeners, store, state and
//!   views, the spokes' subscriptions, the API, shard leases, servers.
//! - [`starting`]: what a starting hub's metrics address answers while the start waits.
//! - [`expiry`]: when the hub's own certificates and NATS credentials expire (a gauge).
//! - [`store`]: typed JetStream KV buckets; calls ride through elections, records that do not
//!   decode are quarantined.
//! - [`doctor`]: `flotilla-hub doctor` — the stored records that do not decode, and their
//!   removal; [`catalog`], every bucket and what it decodes as.
//! - [`backup`] and [`restore`]: `flotilla-hub backup` and `restore` — every stream through
//!   JetStream's own snapshot API into a directory, and back into an empty server.
//! - [`install`]: `flotilla-hub manifests` — the management-cluster install (NATS, hubs,
//!   Secrets, policies, monitoring) rendered from a checked plan (pure).
//! - [`identity`]: uid, creationTimestamp and generation of stored objects.
//! - [`keys`]: typed keys of namespaced objects (inventory and KV spellings).
//! - [`settle`]: keys whose write had an unknown outcome, read again by their owner.
//! - [`backoff`]: per-key retry times, the wait doubling while attempts go unanswered (pure).
//! - [`inventory`]: the shared read view of all clusters and works plus a change broadcast.
//! - [`views`]: every hub's views of every cluster and work, fed by one KV watch per bucket.
//!
//! Clusters and spokes:
//! - [`cluster`]: one actor per ManagedCluster (registration, acceptance, leases, status, admin
//!   edits) and the registry that spawns them; pure OCM rules in [`cluster::rules`].
//! - [`router`]: NATS subscriptions (registrations, the status stream) → cluster actors and
//!   report sinks; the one way the hub answers a spoke ([`flotilla_bus::reply`]).
//! - [`admission`]: how many new clusters are created at once under a registration burst, and
//!   when a busy agent asks again.
//! - [`limits`]: what spokes may make the hub keep (pending clusters, new names per second, the
//!   status stream's bounds).
//! - [`janitor`]: purges the subjects of refused status messages from the status stream.
//! - [`mailbox`]: a bounded mailbox that holds no buffer while empty (one per cluster actor).
//! - [`security`]: secure mode — cluster credentials with registration replies, join
//!   credentials, revocations.
//!
//! Controllers (run by the hub holding the controllers' unit):
//! - [`controller`]: a controller family's shape ([`controller::Family`]) and the running set
//!   ([`controller::Controllers`]).
//! - [`controllers`]: the one list of controller families, in start order, with their settings
//!   and flags; the hub's access table follows from it.
//! - [`report`]: status reports a family takes — handed to it on the controllers' hub, forwarded
//!   there from the others.
//! - [`tasks`]: a registry's per-object actors, awaited when the controllers stop.
//! - [`handle`]: the handle of a controller task that owns one kind's objects: its mailbox and
//!   published views (ManagedServiceAccounts, MirrorPeers).
//! - [`clusterset`]: ManagedClusterSets and bindings, and the managed-namespace task.
//! - [`placement`]: one actor per Placement over the shared inventory, the dispatcher that
//!   reschedules only affected placements, AddOnPlacementScores.
//! - [`replicaset`]: ManifestWorkReplicaSets — one actor per replica set rolling a template
//!   out over its placements' decisions.
//! - [`gitops`]: GitRepos — Git repositories fetched by a bounded worker process, each path's
//!   bundle rendered and delivered as a ManifestWorkReplicaSet, the status saying which commit.
//! - [`rollout`]: one placement's rollout round, shared by replica sets and add-on upgrades.
//! - [`addon`]: add-ons — one actor per ClusterManagementAddOn installing its template on the
//!   clusters placements select, rolling config changes out, watching health.
//! - [`policy`]: governance — Policies, PlacementBindings, PolicySets and PlacementRules; one
//!   actor per Policy, its root status from the clusters' reports.
//! - [`serviceaccount`]: ManagedServiceAccounts — delivered to their cluster, tokens reported
//!   sealed to the hub's key, handed out over the API and recognised by the cluster proxy.
//! - [`importpolicy`]: ClusterImportPolicies — pending registrations accepted, labelled and put
//!   in a cluster set by a CEL template, with no admin step.
//! - [`mirrorpeer`]: MirrorPeers — peers' Secrets sealed end to end between their agents; the
//!   hub holds and forwards boxes only.
//! - [`recovery`]: the recovery window after a restore — orphans (works spokes hold that the
//!   restored store lacks) listed and decided over `flotilla.v1.RecoveryService`.
//! - [`info`]: the hub's version and the agent versions it accepts, over
//!   `flotilla.v1.InfoService` (`flotilla version`).
//!
//! Several hubs:
//! - [`ha`]: unit leases, fences, membership, and the shard-lease loop.
//! - [`units`]: what this hub does for each unit it holds — a shard's actors and status
//!   consumer, or the controllers.
//! - [`sealed`]: boxes between hubs — forwarded calls sealed with the shared sealing key (the
//!   forwarding hub vouching for its caller), answers and join tokens sealed to the asker.
//!
//! Serving:
//! - [`grpc`]: the `flotilla.v1` gRPC services.
//! - [`kubeproxy`]: the cluster proxy — every cluster's Kubernetes API under
//!   `/clusters/<cluster>/…`, streamed through its agent.
//! - [`dashboard`]: the web dashboard (`--dashboard-listen`): server-rendered views of the
//!   fleet, live over Server-Sent Events.
//! - [`webserver`]: how the cluster proxy and the dashboard accept and serve HTTP(S).
//! - [`oidc`]: identities from an OIDC issuer — the `--oidc-*` flags, the keys task, the
//!   bearer verifier every surface authenticates ID tokens with (over `flotilla-oidc`).
//! - [`hosts`]: which `Host` an open server (no API tokens) answers — DNS rebinding (pure).
//! - [`metrics`]: Prometheus metrics and the `/metrics` endpoint.
//!
//! [`start`] wires them together; the `flotilla-hub` binary only parses flags and calls [`run`].

#![deny(missing_docs)]

// The core, under the names the hub's modules have always used (`crate::cluster`, …):
// families and tests import them from here or from `flotilla_hub_core`.
pub use flotilla_hub_core::{
    admission, backoff, cluster, controller, grants, ha, handle, identity, inventory, janitor,
    keys, limits, mailbox, metrics, report, router, sealed, security, setindex, settle, store,
    tasks, units, views,
};

pub mod addon;
pub mod backup;
mod boot;
pub mod catalog;
pub mod clusterset;
pub mod controllers;
pub mod dashboard;
pub mod doctor;
pub mod expiry;
pub mod gitops;
pub mod grpc;
pub mod hosts;
pub mod importpolicy;
pub mod info;
pub mod install;
pub mod kubeproxy;
pub mod mirrorpeer;
pub mod oidc;
pub mod placement;
pub mod policy;
pub mod recovery;
pub mod replicaset;
pub mod restore;
pub mod rollout;
pub mod serviceaccount;
pub mod starting;
pub mod webserver;

use crate::cluster::{ClusterConfig, Clusters};
use crate::inventory::ClusterInventory;
use crate::metrics::Metrics;
use crate::router::RouterConfig;
use crate::store::StoreError;
use flotilla_bus::connect::{self, NatsConfig};
use flotilla_bus::jetstream::StreamOptions;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Default gRPC listen address.
pub const DEFAULT_GRPC_LISTEN: &str = "127.0.0.1:50051";
/// Default metrics listen address.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9464";

/// Everything the hub needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// NATS connection.
    pub nats: NatsConfig,
    /// gRPC API address (port 0 picks a free port).
    pub grpc_listen: SocketAddr,
    /// `/metrics` address (port 0 picks a free port).
    pub metrics_listen: SocketAddr,
    /// Cluster actor settings.
    pub cluster: ClusterConfig,
    /// Router settings.
    pub router: RouterConfig,
    /// JetStream storage and replication.
    pub stream: StreamOptions,
    /// How long store calls wait for JetStream elections, and a start for the store.
    pub store: store::StoreConfig,
    /// What the holder of the controllers remembers of forwarded calls (replays, clock slack).
    pub inter_hub: sealed::ReplayLimits,
    /// The controller families' settings, one field a family with settings.
    pub families: controllers::Settings,
    /// Who may call the API, and its TLS.
    pub api: ApiConfig,
    /// Secure mode (`--secure-dir`): cluster credentials and revocations.
    pub security: Option<security::SecurityConfig>,
    /// Limits on what spokes may make the hub keep.
    pub limits: limits::LimitsConfig,
    /// Shard leases: how this hub shares the work with the others on the same NATS.
    pub ha: ha::HaConfig,
    /// The cluster proxy (`--cluster-proxy-listen`), served with the API's tokens and TLS.
    pub cluster_proxy: kubeproxy::ProxyConfig,
    /// The web dashboard (`--dashboard-listen`), served with the API's tokens and TLS.
    pub dashboard: dashboard::DashboardConfig,
}

/// Security of the gRPC API.
#[derive(Debug, Clone, Default)]
pub struct ApiConfig {
    /// Bearer tokens and their roles (`None`: the API is open — loopback demos only).
    pub tokens: Option<grpc::auth::Tokens>,
    /// PEM certificate chain and private key: serve TLS.
    pub tls: Option<TlsFiles>,
    /// How much of the server one caller may hold: connections, streams, calls and watches.
    pub capacity: grpc::capacity::CapacityConfig,
    /// An OIDC issuer whose ID tokens are bearer tokens too (`--oidc-issuer-url`).
    pub oidc: Option<flotilla_oidc::Config>,
}

/// A PEM certificate chain and its private key.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Certificate chain (PEM).
    pub cert: std::path::PathBuf,
    /// Private key (PEM).
    pub key: std::path::PathBuf,
}

impl Config {
    /// Defaults for a hub talking to `nats_url`.
    pub fn new(nats_url: &str) -> Self {
        let mut nats = NatsConfig::new(nats_url, "flotilla-hub");
        nats.inbox_prefix = Some(flotilla_bus::reply::HUB_INBOX_PREFIX.to_string());
        Self {
            nats,
            grpc_listen: DEFAULT_GRPC_LISTEN.parse().expect("valid default address"),
            metrics_listen: DEFAULT_METRICS_LISTEN
                .parse()
                .expect("valid default address"),
            cluster: ClusterConfig::default(),
            router: RouterConfig::default(),
            stream: StreamOptions::default(),
            store: store::StoreConfig::default(),
            inter_hub: sealed::ReplayLimits::default(),
            families: controllers::Settings::default(),
            api: ApiConfig::default(),
            security: None,
            limits: limits::LimitsConfig::default(),
            ha: ha::HaConfig::default(),
            cluster_proxy: kubeproxy::ProxyConfig::default(),
            dashboard: dashboard::DashboardConfig::default(),
        }
    }
}

/// Why the hub could not start.
#[derive(Debug, Error)]
pub enum HubError {
    /// NATS options are unusable.
    #[error(transparent)]
    Connect(#[from] connect::ConnectError),
    /// State could not be loaded.
    #[error("loading hub state: {0}")]
    Store(#[from] StoreError),
    /// The API's TLS certificate or key is unusable.
    #[error("gRPC TLS: {0}")]
    Tls(String),
    /// A listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Two parts of the hub declare who may call the same method.
    #[error("{0}")]
    Access(#[from] grpc::access::Twice),
    /// Reflection could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(String),
    /// The cluster proxy could not subscribe to the agents' frames.
    #[error("cluster proxy: subscribing to the agents' frames: {0}")]
    ClusterProxy(#[source] async_nats::SubscribeError),
    /// The secure directory is unusable.
    #[error("--secure-dir: {0}")]
    Security(#[from] security::StartError),
    /// The shard lease settings are unusable.
    #[error("shard leases: {0}")]
    Ha(String),
    /// The OIDC issuer cannot be used.
    #[error(transparent)]
    Oidc(#[from] oidc::OidcError),
    /// The store's format marker refuses this hub (too old), or cannot be read.
    #[error(transparent)]
    StoreFormat(#[from] flotilla_hub_core::recovery::format::FormatError),
    /// JetStream has no room for what a stream of the hub reserves.
    #[error(
        "NATS JetStream has no room for stream {stream}, whose size the hub bounds with \
         --status-stream-max-bytes ({max_bytes} bytes): give the server more JetStream storage \
         (`max_file_store` in its `jetstream` block; by default three quarters of the disk that \
         was free when it started; in secure mode also `flotilla-hub init --jetstream-max-bytes`) \
         or lower --status-stream-max-bytes: {source}"
    )]
    NoStorage {
        /// The stream.
        stream: String,
        /// The status stream's bound.
        max_bytes: i64,
        /// The server's refusal.
        #[source]
        source: flotilla_bus::jetstream::JetStreamError,
    },
}

/// `<hostname>-<grpc port>`: unique per hub on a host, stable across restarts.
fn default_hub_id(port: u16) -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "hub".to_string());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{host}-{port}")
}

/// A running hub.
pub struct Hub {
    /// Bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// Bound metrics address.
    pub metrics_addr: SocketAddr,
    /// Bound cluster proxy address, when serving one.
    pub cluster_proxy_addr: Option<SocketAddr>,
    /// Bound dashboard address, when serving one.
    pub dashboard_addr: Option<SocketAddr>,
    /// The cluster proxy's calls, when serving one.
    pub cluster_proxy: Option<kubeproxy::tunnel::Tunnels>,
    /// The cluster inventory.
    pub inventory: ClusterInventory,
    /// The work inventory.
    pub works: inventory::WorkInventory,
    /// The cluster actors.
    pub clusters: Clusters,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// What this hub does for the units it holds (its controllers among them).
    pub units: Arc<units::Units>,
    /// The shard leases this hub holds, and the live hubs.
    pub shards: ha::shards::Shards,
    shards_task: JoinHandle<()>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Hub {
    /// The controllers, while this hub holds them (a hub alone on its NATS always does).
    pub fn controllers(&self) -> Option<Arc<controller::Controllers>> {
        self.units.controllers()
    }

    /// Placements, their decisions and AddOnPlacementScores.
    ///
    /// # Panics
    /// When this hub does not hold the controllers (see [`Hub::controllers`]).
    pub fn placements(&self) -> placement::Placements {
        self.controllers()
            .expect("this hub holds the controllers")
            .get::<placement::Placements>()
    }

    /// ManifestWorkReplicaSets.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn replicasets(&self) -> replicaset::ReplicaSets {
        self.controllers()
            .expect("this hub holds the controllers")
            .get::<replicaset::ReplicaSets>()
    }

    /// Add-ons.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn addons(&self) -> addon::AddOns {
        self.controllers()
            .expect("this hub holds the controllers")
            .get::<addon::AddOns>()
    }

    /// Governance: policies, bindings, policy sets, placement rules.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn policies(&self) -> policy::Policies {
        self.controllers()
            .expect("this hub holds the controllers")
            .get::<policy::Policies>()
    }

    /// ManagedServiceAccounts.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn service_accounts(&self) -> serviceaccount::ServiceAccounts {
        self.controllers()
            .expect("this hub holds the controllers")
            .get::<serviceaccount::ServiceAccounts>()
    }

    /// The hub's MirrorPeers.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn mirror_peers(&self) -> mirrorpeer::MirrorPeers {
        self.controllers()
            .expect("this hub holds the controllers")
            .get::<mirrorpeer::MirrorPeers>()
    }

    /// Hands every shard over (drained, then released, so the other hubs take them at once),
    /// stops serving and waits (bounded) for the tasks to end.
    pub async fn stop(self) {
        self.shards.drain();
        if tokio::time::timeout(Duration::from_secs(30), self.shards_task)
            .await
            .is_err()
        {
            tracing::warn!("handing the shards over took too long; stopping anyway");
        }
        self.clusters.stop_all().await;
        self.units.stop_all().await;
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

/// Connects, loads all state, spawns the actors and starts serving (the steps are in
/// [`boot`]). While the store does not answer (NATS starting, JetStream electing leaders) the
/// start waits for it — as long as it takes, or `config.store.wait` — and its metrics address
/// says so ([`starting`]).
pub async fn start(config: Config) -> Result<Hub, HubError> {
    store::ride::set_patience(config.store.patience);
    let listeners = boot::Listeners::bind(&config).await?;
    let start = store::ride::Start::new(config.store.wait);
    let health =
        starting::Starting::serve(&listeners.metrics, start.waiting()).map_err(|source| {
            HubError::Bind {
                addr: listeners.metrics_addr,
                source,
            }
        })?;
    let hub = store::ride::starting(start, start_on(config, listeners)).await;
    health.stop().await;
    hub
}

/// [`start`]'s steps, on bound listeners.
async fn start_on(mut config: Config, listeners: boot::Listeners) -> Result<Hub, HubError> {
    // The controller families, and the access table every call to the API is decided by (the
    // core's rows and each family's), handed to the API's tokens before anything serves.
    let families = controllers::families(&config);
    config.api.tokens = oidc::prepare(config.api.tokens.take(), config.api.oidc.as_ref());
    boot::decide_access(&mut config, &families)?;
    let hub_id = boot::hub_id(&config, &listeners);
    config.ha.validate().map_err(HubError::Ha)?;
    let (nats, jetstream, opened) = boot::connect(&config).await?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (security_handle, pusher) = boot::start_security(&config, &jetstream, &shutdown_rx).await?;
    let metrics = Arc::new(Metrics::new());
    let mut tasks = Vec::from_iter(pusher);
    let agents_account = (security_handle.as_ref()).map(|s| s.agents_account().to_string());
    let state = boot::State::load(
        boot::StateDeps {
            config: &config,
            nats: &nats,
            opened: &opened,
            metrics: &metrics,
            hub_id: &hub_id,
            security: security_handle.clone(),
        },
        &shutdown_rx,
        &mut tasks,
    )
    .await?;
    let clusters = state.clusters.clone();
    // Every surface decides by the grants over this hub's set index; the grants file is
    // followed while the hub runs.
    config.api.tokens = (config.api.tokens.take()).map(|t| t.with_index(state.set_index.clone()));
    // ID tokens of the OIDC issuer, verified with keys a task fetches and rotates.
    let oidc_issuer = match (config.api.oidc.clone(), config.api.tokens.take()) {
        (Some(issuer), Some(tokens)) => {
            let (tokens, authenticator, task) = oidc::start(issuer, tokens, &shutdown_rx)?;
            config.api.tokens = Some(tokens);
            tasks.push(task);
            Some(authenticator)
        }
        (_, tokens) => {
            config.api.tokens = tokens;
            None
        }
    };
    if let Some(live) = config.api.tokens.as_ref().map(|t| t.live())
        && let Some(path) = live.file()
    {
        let follower = grants::source::Follower::new(path.to_path_buf(), live.clone());
        tasks.push(follower.spawn(shutdown_rx.clone()));
    }

    // The controller families: their services exist only on the hub holding them (each sits
    // in a late slot, filled while this hub runs the controllers), their report sinks hand
    // reports to them here or forward them to the hub that holds them.
    let reports = report::Sinks::new(&nats, controller::Families::report_kinds(&families));
    let router_config = boot::router_config(&config, &state, agents_account, reports.clone());
    tasks
        .extend(boot::serve_spokes(&nats, &clusters, &metrics, &router_config, &shutdown_rx).await);

    // The API's services, built once: served here, and (the controllers' ones) to the hubs
    // that forward to this one while it holds the controllers.
    let (routes, forwarded, families) =
        boot::api_routes(&config, &state, families, &hub_id).await?;

    // Shard leases last: everything a shard's owner needs is in place.
    let units = Arc::new(units::Units::new(
        clusters.clone(),
        opened.status_stream.clone(),
        metrics.clone(),
        router_config.clone(),
        state.progress,
        families,
        controller::Deps {
            jetstream: jetstream.clone(),
            stream: config.stream,
            nats: nats.clone(),
            inventory: state.inventory.clone(),
            works: state.works.clone(),
            clusters: clusters.clone(),
            metrics: metrics.clone(),
            security: security_handle,
            router: router_config,
            hub_id: hub_id.clone(),
            max_event_bytes: config.cluster.max_event_bytes,
            forwarded,
            seal: sealed::HubSeal::new(config.families.service_accounts.key.clone()),
            inter_hub: config.inter_hub,
            reports,
        },
    ));
    let (shards, shards_task) = boot::take_shards(
        &config,
        boot::ShardDeps {
            me: boot::hub_info(&hub_id, &listeners),
            units: units.clone(),
        },
    )
    .await?;

    let addrs = boot::Addrs::of(&listeners);
    let serve = boot::ServeDeps {
        config: &config,
        nats: &nats,
        metrics: &metrics,
        inventory: &state.inventory,
        works: &state.works,
        units: &units,
        shards: &shards,
        oidc: oidc_issuer.as_ref(),
    };
    let cluster_proxy = boot::serve(listeners, serve, routes, shutdown_rx, &mut tasks).await?;
    Ok(Hub {
        grpc_addr: addrs.grpc,
        metrics_addr: addrs.metrics,
        cluster_proxy_addr: addrs.cluster_proxy,
        dashboard_addr: addrs.dashboard,
        cluster_proxy,
        inventory: state.inventory,
        works: state.works,
        clusters,
        metrics,
        units,
        shards,
        shards_task,
        shutdown,
        tasks,
    })
}

/// Runs the hub until `shutdown` resolves.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), HubError> {
    let hub = start(config).await?;
    shutdown.await;
    tracing::info!("shutting down");
    hub.stop().await;
    Ok(())
}

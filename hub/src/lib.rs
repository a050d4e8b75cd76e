//! The Flotilla hub: decides what every managed cluster should run and tracks what it reports.
//!
//! - [`addon`]: add-ons — one actor per ClusterManagementAddOn installing its template on the
//!   clusters placements select, rolling config changes out, watching health.
//! - [`cluster`]: one actor per ManagedCluster (registration, acceptance, leases, status, admin
//!   edits) and the registry that spawns them; pure OCM rules in [`cluster::rules`].
//! - [`clusterset`]: ManagedClusterSets and bindings.
//! - [`placement`]: one actor per Placement over the shared inventory, the dispatcher that
//!   reschedules only affected placements, AddOnPlacementScores.
//! - [`inventory`]: the shared read view of all clusters plus a change broadcast.
//! - [`identity`]: uid, creationTimestamp and generation of stored objects.
//! - [`keys`]: typed keys of namespaced objects (inventory and KV spellings).
//! - [`replicaset`]: ManifestWorkReplicaSets — one actor per replica set rolling a template
//!   out over its placements' decisions.
//! - [`router`]: NATS subscriptions (registrations, the status stream) → actors; the one way
//!   the hub answers a spoke ([`flotilla_bus::reply`]).
//! - [`security`]: secure mode — cluster credentials with registration replies, join
//!   credentials, revocations.
//! - [`limits`]: what spokes may make the hub keep (pending clusters, new names per second, the
//!   status stream's bounds); [`janitor`] purges refused status messages.
//! - [`store`]: typed JetStream KV buckets.
//! - [`grpc`]: the `flotilla.v1` gRPC services.
//! - [`metrics`]: Prometheus metrics and the `/metrics` endpoint.
//!
//! [`start`] wires them together; the `flotilla-hub` binary only parses flags and calls [`run`].

#![deny(missing_docs)]

pub mod addon;
pub mod cluster;
pub mod clusterset;
pub mod controllers;
pub mod grpc;
pub mod ha;
pub mod identity;
pub mod inventory;
pub mod janitor;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod placement;
pub mod policy;
pub mod replicaset;
pub mod router;
pub mod security;
pub mod store;
pub mod units;
pub mod views;

use crate::cluster::{ClusterConfig, Clusters, Shared};
use crate::inventory::ClusterInventory;
use crate::metrics::Metrics;
use crate::router::RouterConfig;
use crate::store::{Bucket, StoreError};
use flotilla_api::v1::add_on_service_server::AddOnServiceServer;
use flotilla_api::v1::cluster_service_server::ClusterServiceServer;
use flotilla_api::v1::cluster_set_service_server::ClusterSetServiceServer;
use flotilla_api::v1::placement_service_server::PlacementServiceServer;
use flotilla_api::v1::replica_set_service_server::ReplicaSetServiceServer;
use flotilla_api::v1::work_service_server::WorkServiceServer;
use flotilla_bus::connect::{self, NatsConfig};
use flotilla_bus::jetstream::{self as js, StreamOptions};
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

/// How long one event to an agent may take to be handed to the NATS client (a client whose
/// buffer is full during an outage must not stall an actor for longer).
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// Placement settings.
    pub placement: placement::PlacementConfig,
    /// Who may call the API, and its TLS.
    pub api: ApiConfig,
    /// Secure mode (`--secure-dir`): cluster credentials and revocations.
    pub security: Option<security::SecurityConfig>,
    /// Add-on settings.
    pub addons: addon::AddOnConfig,
    /// Limits on what spokes may make the hub keep.
    pub limits: limits::LimitsConfig,
    /// Shard leases: how this hub shares the work with the others on the same NATS.
    pub ha: ha::HaConfig,
}

/// Security of the gRPC API.
#[derive(Debug, Clone, Default)]
pub struct ApiConfig {
    /// Bearer tokens and their roles (`None`: the API is open — loopback demos only).
    pub tokens: Option<grpc::auth::Tokens>,
    /// PEM certificate chain and private key: serve TLS.
    pub tls: Option<TlsFiles>,
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
            placement: placement::PlacementConfig::default(),
            api: ApiConfig::default(),
            security: None,
            addons: addon::AddOnConfig::default(),
            limits: limits::LimitsConfig::default(),
            ha: ha::HaConfig::default(),
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
    /// Reflection could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(String),
    /// The secure directory is unusable.
    #[error("--secure-dir: {0}")]
    Security(#[from] security::StartError),
    /// The replica sets could not be loaded.
    #[error("loading replica sets: {0}")]
    ReplicaSets(String),
    /// The add-ons could not be loaded.
    #[error("loading add-ons: {0}")]
    AddOns(String),
    /// The shard lease settings are unusable.
    #[error("shard leases: {0}")]
    Ha(String),
    /// Governance state could not be loaded.
    #[error("policies: {0}")]
    Policies(#[source] policy::PolicyError),
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
    pub fn controllers(&self) -> Option<Arc<controllers::Controllers>> {
        self.units.controllers()
    }

    /// Placements, their decisions and AddOnPlacementScores.
    ///
    /// # Panics
    /// When this hub does not hold the controllers (see [`Hub::controllers`]).
    pub fn placements(&self) -> placement::Placements {
        self.controllers()
            .expect("this hub holds the controllers")
            .placements
            .clone()
    }

    /// ManifestWorkReplicaSets.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn replicasets(&self) -> replicaset::ReplicaSets {
        self.controllers()
            .expect("this hub holds the controllers")
            .replicasets
            .clone()
    }

    /// Add-ons.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn addons(&self) -> addon::AddOns {
        self.controllers()
            .expect("this hub holds the controllers")
            .addons
            .clone()
    }

    /// Governance: policies, bindings, policy sets, placement rules.
    ///
    /// # Panics
    /// When this hub does not hold the controllers.
    pub fn policies(&self) -> policy::Policies {
        self.controllers()
            .expect("this hub holds the controllers")
            .policies
            .clone()
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

struct Opened {
    clusters: Bucket<flotilla_api::v1::ManagedCluster>,
    works: Bucket<flotilla_api::v1::ManifestWork>,
    status_stream: async_nats::jetstream::stream::Stream,
}

async fn open(
    jetstream: &async_nats::jetstream::Context,
    opts: StreamOptions,
    limits: limits::StreamLimits,
) -> Result<Opened, StoreError> {
    Ok(Opened {
        clusters: Bucket::open(jetstream, store::CLUSTERS, opts).await?,
        works: Bucket::open(jetstream, store::WORKS, opts).await?,
        status_stream: js::ensure_status_stream(
            jetstream,
            opts,
            js::StatusLimits {
                max_bytes: limits.max_bytes,
                max_age: limits.max_age,
            },
        )
        .await?,
    })
}

/// Connects, loads all state, spawns the actors and starts serving.
pub async fn start(config: Config) -> Result<Hub, HubError> {
    let grpc_listener = tokio::net::TcpListener::bind(config.grpc_listen)
        .await
        .map_err(|source| HubError::Bind {
            addr: config.grpc_listen,
            source,
        })?;
    let metrics_listener = tokio::net::TcpListener::bind(config.metrics_listen)
        .await
        .map_err(|source| HubError::Bind {
            addr: config.metrics_listen,
            source,
        })?;
    let grpc_addr = grpc_listener
        .local_addr()
        .map_err(|source| HubError::Bind {
            addr: config.grpc_listen,
            source,
        })?;
    let metrics_addr = metrics_listener
        .local_addr()
        .map_err(|source| HubError::Bind {
            addr: config.metrics_listen,
            source,
        })?;

    let hub_id = match &config.ha.hub_id {
        Some(id) => id.clone(),
        None => default_hub_id(grpc_addr.port()),
    };
    config.ha.validate().map_err(HubError::Ha)?;
    // A paused or cut-off NATS connection is noticed within a third of the shard lease TTL.
    let mut nats_config = config.nats.clone();
    nats_config.ping_interval = nats_config.ping_interval.min(config.ha.ttl / 3);
    let nats = connect::connect(&nats_config, None).await?;
    let jetstream = async_nats::jetstream::new(nats.clone());
    // NATS may still be starting (compose, systemd): wait for JetStream instead of failing.
    let mut attempt = 0;
    let opened = loop {
        match open(&jetstream, config.stream, config.limits.stream).await {
            Ok(o) => break o,
            Err(e) if attempt < 120 => {
                if attempt % 10 == 0 {
                    tracing::warn!(error = %e, url = %config.nats.url, "waiting for NATS JetStream");
                }
                attempt += 1;
                tokio::time::sleep(connect::backoff(attempt.min(4), Duration::from_secs(2))).await;
            }
            Err(e) => return Err(e.into()),
        }
    };

    let security = match &config.security {
        Some(sc) => Some(security::Security::start(sc, &config.nats).await?),
        None => None,
    };
    let metrics = Arc::new(Metrics::new());
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (janitor, janitor_task) = janitor::Janitor::spawn(
        opened.status_stream.clone(),
        metrics.clone(),
        config.limits.status_unknown_max,
        shutdown_rx.clone(),
    );
    let inventory = ClusterInventory::new(4096);
    let works = inventory::WorkInventory::new(4096);
    let clusters = Clusters::new(Shared {
        config: config.cluster.clone(),
        bucket: opened.clusters.clone(),
        inventory: inventory.clone(),
        work_bucket: opened.works.clone(),
        works: works.clone(),
        metrics: metrics.clone(),
        nats: nats.clone(),
        publisher: flotilla_bus::publish::Publisher::new(
            nats.clone(),
            config.cluster.max_event_bytes,
            SEND_TIMEOUT,
        ),
        status_stream: opened.status_stream.clone(),
        hub_id: hub_id.clone(),
        security: security.as_ref().map(|(s, _)| s.clone()),
        janitor: janitor.clone(),
    });
    let held: Arc<dyn views::Holder> = Arc::new(clusters.clone());
    let (cluster_view, cluster_progress) = views::View::load(
        opened.clusters.clone(),
        inventory.clone(),
        views::Keys::Cluster,
        held.clone(),
    )
    .await?;
    let (work_view, work_progress) = views::View::load(
        opened.works.clone(),
        works.clone(),
        views::Keys::InCluster,
        held,
    )
    .await?;
    let (count, work_count) = (inventory.len(), works.len());
    tracing::info!(clusters = count, works = work_count, "hub state loaded");

    let mut tasks = vec![
        janitor_task,
        tokio::spawn(cluster_view.follow(shutdown_rx.clone())),
        tokio::spawn(work_view.follow(shutdown_rx.clone())),
    ];
    let security_handle = security.as_ref().map(|(s, _)| s.clone());
    let security_handle_for_router = security
        .as_ref()
        .map(|(s, _)| s.agents_account().to_string());
    tasks.extend(security.map(|(_, pusher)| pusher));
    let (local_scores, score_sink) = placement::score_route::ScoreSink::new(nats.clone());
    let (sets_slot, sets_service) = grpc::late::LateSlot::new();
    let (placements_slot, placements_service) = grpc::late::LateSlot::new();
    let (replicasets_slot, replicasets_service) = grpc::late::LateSlot::new();
    let (addons_slot, addons_service) = grpc::late::LateSlot::new();
    let (local_policies, policy_sink) = policy::route::PolicySink::new(nats.clone());
    let (policies_slot, policies_service) = grpc::late::LateSlot::new();
    let services = controllers::Services {
        sets: sets_slot,
        placements: placements_slot,
        replicasets: replicasets_slot,
        addons: addons_slot,
        scores: local_scores,
        policies: policies_slot,
        policy_reports: local_policies,
    };
    // The hub is started once every request subject is subscribed at the server: a request
    // sent right after `start` returns is answered, not lost.
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut router_config = config.router.clone();
    router_config.scores = Some(score_sink);
    router_config.policies = Some(policy_sink);
    router_config.janitor = Some(janitor);
    router_config.agents_account = security_handle_for_router;
    router_config.new_names = Some(Arc::new(limits::NewNames::new(
        config.limits.clone(),
        config.cluster.auto_accept.enabled,
    )));
    router_config.ready = Some(ready_tx);
    tasks.push(tokio::spawn(router::run_registrations(
        nats.clone(),
        clusters.clone(),
        metrics.clone(),
        router_config.clone(),
        shutdown_rx.clone(),
    )));
    tasks.push(tokio::spawn(router::run_resyncs(
        nats.clone(),
        clusters.clone(),
        metrics.clone(),
        router_config.clone(),
        shutdown_rx.clone(),
    )));
    let subscribed = tokio::time::timeout(Duration::from_secs(10), async {
        for _ in 0..2 {
            if ready_rx.recv().await.is_none() {
                break;
            }
        }
    })
    .await;
    if subscribed.is_err() {
        tracing::warn!("request subscriptions not confirmed within 10 s; serving anyway");
    }

    // The API's services, built once: served here, and (the controllers' ones) to the hubs
    // that forward to this one while it holds the controllers.
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<ClusterServiceServer<grpc::cluster::ClusterApi>>()
        .await;
    health_reporter
        .set_serving::<ClusterSetServiceServer<grpc::clusterset::ClusterSetApi>>()
        .await;
    health_reporter
        .set_serving::<WorkServiceServer<grpc::work::WorkApi>>()
        .await;
    health_reporter
        .set_serving::<PlacementServiceServer<grpc::placement::PlacementApi>>()
        .await;
    health_reporter
        .set_serving::<ReplicaSetServiceServer<grpc::replicaset::ReplicaSetApi>>()
        .await;
    health_reporter
        .set_serving::<AddOnServiceServer<grpc::addon::AddOnApi>>()
        .await;
    health_reporter
        .set_serving::<flotilla_api::v1::policy_service_server::PolicyServiceServer<grpc::policy::PolicyApi>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(flotilla_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| HubError::Reflection(e.to_string()))?;
    let routes = tonic::service::Routes::new(health_service)
        .add_service(reflection)
        .add_service(ClusterServiceServer::new(grpc::cluster::ClusterApi::new(
            clusters.clone(),
            inventory.clone(),
        )))
        .add_service(sets_service)
        .add_service(
            WorkServiceServer::new(grpc::work::WorkApi::new(
                clusters.clone(),
                works.clone(),
                &clusters.shared().publisher,
            ))
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        )
        .add_service(placements_service)
        .add_service(replicasets_service)
        .add_service(addons_service)
        .add_service(policies_service);
    let forwarded = tower::Layer::layer(
        &grpc::auth::Authenticate::new(config.api.tokens.clone()),
        routes.clone().prepare(),
    );

    // Shard leases last: everything a shard's owner needs is in place.
    let units = Arc::new(units::Units::new(
        clusters.clone(),
        opened.status_stream.clone(),
        metrics.clone(),
        router_config.clone(),
        vec![
            (cluster_progress, opened.clusters.kv().stream.clone()),
            (work_progress, opened.works.kv().stream.clone()),
        ],
        controllers::Deps {
            jetstream: jetstream.clone(),
            stream: config.stream,
            nats: nats.clone(),
            inventory: inventory.clone(),
            works: works.clone(),
            clusters: clusters.clone(),
            metrics: metrics.clone(),
            security: security_handle,
            placement: config.placement.clone(),
            addons: config.addons.clone(),
            router: router_config,
            hub_id: hub_id.clone(),
            max_event_bytes: config.cluster.max_event_bytes,
            forwarded,
        },
        services,
    ));
    let me = ha::lease::HubInfo {
        hub: hub_id.clone(),
        incarnation: uuid::Uuid::new_v4().to_string(),
        grpc: grpc_addr.to_string(),
        metrics: metrics_addr.to_string(),
        draining: false,
    };
    let (lease_kv, ttl) =
        ha::lease::open_expiring(&jetstream, ha::lease::LEASES, config.ha.ttl, config.stream)
            .await?;
    let (member_kv, _) =
        ha::lease::open_expiring(&jetstream, ha::lease::MEMBERS, ttl, config.stream).await?;
    let mut ha_config = config.ha.clone();
    if ttl != ha_config.ttl {
        tracing::info!(bucket_ttl = ?ttl, flag = ?ha_config.ttl, "using the lease bucket's TTL");
        ha_config.ttl = ttl;
    }
    let ownership = ha::Ownership::new(ha::UNITS);
    let (shards, shards_task) = ha::shards::spawn(
        ha_config.clone(),
        me,
        ha::lease::Leases::new(lease_kv, ha_config.renew),
        ha::members::Members::new(member_kv, ha_config.renew * 3),
        ownership.clone(),
        Arc::new(units::UnitHost(units.clone())),
    );
    shards.first_round().await;
    // The units taken in the first round are started before `start` returns.
    let started = tokio::time::timeout(Duration::from_secs(10), async {
        while ownership.held().iter().any(|u| {
            if *u == ha::CONTROLLERS {
                units.controllers().is_none()
            } else {
                !clusters.holds_shard(*u)
            }
        }) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if started.is_err() {
        tracing::warn!("the shards taken at start were not all started within 10 s");
    }

    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &config.api.tls {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| HubError::Tls(format!("{}: {e}", p.display())))
        };
        let identity = tonic::transport::Identity::from_pem(read(&tls.cert)?, read(&tls.key)?);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(|e| HubError::Tls(e.to_string()))?;
    }
    // The controllers' calls go to the hub holding them when it is not this one (after the
    // token check here; the holder checks it again).
    let route = {
        let units = units.clone();
        move |path: &str| {
            if !controllers::serves(path) || units.controllers().is_some() {
                grpc::forward::Decision::Local
            } else if grpc::forward::is_watch(path) {
                grpc::forward::Decision::Refuse(
                    "watches of sets, placements, replica sets and add-ons are served by the hub \
                     holding the controllers (see /debug/shards on the hubs' metrics port)"
                        .into(),
                )
            } else {
                grpc::forward::Decision::Forward
            }
        }
    };
    let grpc = builder
        .layer(grpc::guard::CountRejections::new(metrics.clone()))
        .layer(grpc::auth::Authenticate::new(config.api.tokens.clone()))
        .layer(grpc::forward::Forward::new(
            nats.clone(),
            controllers::FORWARD_SUBJECT,
            route,
        ))
        .add_routes(routes);
    let mut rx = shutdown_rx.clone();
    tasks.push(tokio::spawn(async move {
        // Nagle off on every API connection: `serve_with_incoming` ignores the builder's
        // `tcp_nodelay`, and with Nagle on, small responses waited for the client's delayed
        // ACK — ApplyWork calls took 5 ms or 45 ms, nothing in between.
        let incoming = tokio_stream::StreamExt::map(
            tokio_stream::wrappers::TcpListenerStream::new(grpc_listener),
            |conn| {
                conn.inspect(|s| {
                    if let Err(e) = s.set_nodelay(true) {
                        tracing::debug!(error = %e, "TCP_NODELAY not set on an API connection");
                    }
                })
            },
        );
        let stop = async move {
            let _ = rx.changed().await;
        };
        if let Err(e) = grpc.serve_with_incoming_shutdown(incoming, stop).await {
            tracing::error!(error = %e, "gRPC server failed");
        }
    }));
    let mut rx = shutdown_rx.clone();
    let (m, inv, sh) = (metrics.clone(), inventory.clone(), shards.clone());
    tasks.push(tokio::spawn(async move {
        let stop = async move {
            let _ = rx.changed().await;
        };
        if let Err(e) = metrics::serve(metrics_listener, m, inv, sh, stop).await {
            tracing::error!(error = %e, "metrics server failed");
        }
    }));
    tracing::info!(grpc = %grpc_addr, metrics = %metrics_addr, nats = %config.nats.url, "hub started");
    Ok(Hub {
        grpc_addr,
        metrics_addr,
        inventory,
        works,
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

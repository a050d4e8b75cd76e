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
pub mod grpc;
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

use crate::cluster::{ClusterConfig, Clusters, Shared};
use crate::clusterset::ClusterSets;
use crate::inventory::ClusterInventory;
use crate::metrics::Metrics;
use crate::router::RouterConfig;
use crate::store::{Bucket, StoreError};
use flotilla_api::v1::cluster_service_server::ClusterServiceServer;
use flotilla_api::v1::cluster_set_service_server::ClusterSetServiceServer;
use flotilla_api::v1::placement_service_server::PlacementServiceServer;
use flotilla_api::v1::work_service_server::WorkServiceServer;
use flotilla_bus::connect::{self, NatsConfig};
use flotilla_bus::jetstream::{self as js, StreamOptions};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
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
    /// Governance state could not be loaded.
    #[error("policies: {0}")]
    Policies(#[source] policy::PolicyError),
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
    /// Placements, their decisions and AddOnPlacementScores.
    pub placements: placement::Placements,
    /// ManifestWorkReplicaSets.
    pub replicasets: replicaset::ReplicaSets,
    /// Add-ons.
    pub addons: addon::AddOns,
    /// Governance: policies, bindings, policy sets, placement rules.
    pub policies: policy::Policies,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Hub {
    /// Stops serving and waits (bounded) for the tasks to end.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

struct Opened {
    clusters: Bucket<flotilla_api::v1::ManagedCluster>,
    works: Bucket<flotilla_api::v1::ManifestWork>,
    sets: Bucket<flotilla_api::v1::ManagedClusterSet>,
    bindings: Bucket<flotilla_api::v1::ManagedClusterSetBinding>,
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
        sets: Bucket::open(jetstream, store::CLUSTERSETS, opts).await?,
        bindings: Bucket::open(jetstream, store::BINDINGS, opts).await?,
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
    let started = SystemTime::now();
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

    let nats = connect::connect(&config.nats, None).await?;
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
        status_stream: opened.status_stream.clone(),
        started,
        security: security.as_ref().map(|(s, _)| s.clone()),
        janitor: janitor.clone(),
    });
    let loaded = opened.clusters.load_all().await?;
    let count = loaded.len();
    let mut works_by_cluster: std::collections::HashMap<String, Vec<_>> =
        std::collections::HashMap::new();
    let stored_works = opened.works.load_all().await?;
    let work_count = stored_works.len();
    for (_, work, revision) in stored_works {
        let cluster = work
            .metadata
            .as_ref()
            .map(|m| m.namespace.clone())
            .unwrap_or_default();
        works_by_cluster
            .entry(cluster)
            .or_default()
            .push((work, revision));
    }
    for (_, cluster, revision) in loaded {
        let name = inventory::name(&cluster).to_string();
        let works = works_by_cluster.remove(&name).unwrap_or_default();
        clusters.spawn_loaded(cluster, revision, works);
    }
    // Works whose cluster is gone (a crash between the two purges of a cluster delete).
    for (cluster, orphans) in works_by_cluster {
        for (w, _) in orphans {
            let name = w
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            tracing::warn!(cluster = %cluster, work = %name, "removing a work of a deleted cluster");
            opened
                .works
                .purge(&keys::ObjectRef::new(cluster.as_str(), name).store_key())
                .await?;
        }
    }
    let sets = ClusterSets::load(opened.sets, opened.bindings, inventory.clone()).await?;
    tracing::info!(clusters = count, works = work_count, "hub state loaded");

    let mut tasks = vec![janitor_task];
    let security_handle = security.as_ref().map(|(s, _)| s.clone());
    let security_handle_for_router = security
        .as_ref()
        .map(|(s, _)| s.agents_account().to_string());
    tasks.extend(security.map(|(_, pusher)| pusher));
    let (placements, dispatcher) = placement::Placements::start(
        placement::Deps {
            buckets: placement::Buckets::open(&jetstream, config.stream).await?,
            clusters: inventory.clone(),
            sets: sets.clone(),
            metrics: metrics.clone(),
        },
        config.placement.clone(),
        shutdown_rx.clone(),
    )
    .await?;
    tasks.push(dispatcher);
    let replicasets = replicaset::ReplicaSets::start(
        Bucket::open(&jetstream, replicaset::BUCKET, config.stream).await?,
        replicaset::Deps {
            clusters: clusters.clone(),
            works: works.clone(),
            placements: placements.clone(),
        },
    )
    .await
    .map_err(|e| HubError::ReplicaSets(e.to_string()))?;
    let addons = addon::AddOns::start(
        addon::Store::open(&jetstream, config.stream).await?,
        addon::Deps {
            clusters: clusters.clone(),
            inventory: inventory.clone(),
            works: works.clone(),
            placements: placements.clone(),
            security: security_handle,
            config: config.addons.clone(),
        },
    )
    .await
    .map_err(|e| HubError::AddOns(e.to_string()))?;
    let policies = policy::Policies::start(
        policy::Buckets::open(&jetstream, config.stream).await?,
        policy::Deps {
            placements: placements.clone(),
            clusters: inventory.clone(),
            nats: nats.clone(),
            metrics: metrics.clone(),
            max_event_bytes: config.cluster.max_event_bytes,
        },
    )
    .await
    .map_err(HubError::Policies)?;
    // The hub is started once every request subject is subscribed at the server: a request
    // sent right after `start` returns is answered, not lost.
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut addon_router_config = config.router.clone();
    addon_router_config.ready = Some(ready_tx.clone());
    tasks.push(tokio::spawn(addon::router::run(
        nats.clone(),
        addons.clone(),
        placements.scores().clone(),
        metrics.clone(),
        addon_router_config.clone(),
        shutdown_rx.clone(),
    )));
    tasks.push(tokio::spawn(addon::router::run_credentials(
        nats.clone(),
        addons.clone(),
        metrics.clone(),
        addon_router_config,
        shutdown_rx.clone(),
    )));
    tasks.push(clusterset::namespaces::spawn(
        sets.clone(),
        inventory.clone(),
        clusters.clone(),
        shutdown_rx.clone(),
    ));
    let mut router_config = config.router.clone();
    router_config.scores = Some(placements.scores().clone());
    router_config.policies = Some(policies.clone());
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
    tasks.push(tokio::spawn(router::run_status(
        opened.status_stream,
        clusters.clone(),
        metrics.clone(),
        router_config,
        shutdown_rx.clone(),
    )));
    let subscribed = tokio::time::timeout(Duration::from_secs(10), async {
        for _ in 0..4 {
            if ready_rx.recv().await.is_none() {
                break;
            }
        }
    })
    .await;
    if subscribed.is_err() {
        tracing::warn!("request subscriptions not confirmed within 10 s; serving anyway");
    }

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
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(flotilla_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| HubError::Reflection(e.to_string()))?;
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
    let grpc = builder
        .layer(grpc::guard::CountRejections::new(metrics.clone()))
        .layer(grpc::auth::Authenticate::new(config.api.tokens.clone()))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(ClusterServiceServer::new(grpc::cluster::ClusterApi::new(
            clusters.clone(),
            inventory.clone(),
        )))
        .add_service(ClusterSetServiceServer::new(
            grpc::clusterset::ClusterSetApi::new(sets),
        ))
        .add_service(
            WorkServiceServer::new(grpc::work::WorkApi::new(
                clusters.clone(),
                works.clone(),
                nats.clone(),
                config.cluster.max_event_bytes,
            ))
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        )
        .add_service(PlacementServiceServer::new(
            grpc::placement::PlacementApi::new(placements.clone()),
        ))
        .add_service(
            flotilla_api::v1::replica_set_service_server::ReplicaSetServiceServer::new(
                grpc::replicaset::ReplicaSetApi::new(replicasets.clone()),
            )
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        )
        .add_service(
            flotilla_api::v1::add_on_service_server::AddOnServiceServer::new(
                grpc::addon::AddOnApi::new(addons.clone()),
            )
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        )
        .add_service(
            flotilla_api::v1::policy_service_server::PolicyServiceServer::new(
                grpc::policy::PolicyApi::new(policies.clone()),
            )
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        );
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
    let (m, inv) = (metrics.clone(), inventory.clone());
    tasks.push(tokio::spawn(async move {
        let stop = async move {
            let _ = rx.changed().await;
        };
        if let Err(e) = metrics::serve(metrics_listener, m, inv, stop).await {
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
        placements,
        replicasets,
        addons,
        policies,
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

//! The steps of [`crate::start`], one concern each: bind the listeners, connect and open the
//! store, load the state and its views, serve the spokes' requests, build the API (one list of
//! services feeds the server and its health reports), take shard leases, serve gRPC and
//! metrics. A step that starts tasks returns their `JoinHandle`s: the [`crate::Hub`] owns every
//! one and awaits them when it stops.

use crate::cluster::{Clusters, Shared};
use crate::inventory::{ClusterInventory, WorkInventory};
use crate::metrics::Metrics;
use crate::router::RouterConfig;
use crate::store::{self, Bucket, StoreError};
use crate::{Config, HubError, grpc, ha, janitor, limits, units, views};
use flotilla_api::v1::access_service_server::AccessServiceServer;
use flotilla_api::v1::cluster_service_server::ClusterServiceServer;
use flotilla_api::v1::work_service_server::WorkServiceServer;
use flotilla_bus::connect;
use flotilla_bus::jetstream::{self as js, StreamOptions};
use flotilla_hub_core::recovery;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How long one event to an agent may take to be handed to the NATS client (a client whose
/// buffer is full during an outage must not stall an actor for longer).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The API and metrics listeners, bound before anything else (a taken port fails at once).
pub(crate) struct Listeners {
    pub grpc: TcpListener,
    pub metrics: TcpListener,
    pub grpc_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub cluster_proxy: Option<TcpListener>,
    pub cluster_proxy_addr: Option<SocketAddr>,
    pub dashboard: Option<TcpListener>,
    pub dashboard_addr: Option<SocketAddr>,
    pub webhooks: Option<TcpListener>,
}

impl Listeners {
    pub async fn bind(config: &Config) -> Result<Self, HubError> {
        let bind = |addr: SocketAddr| async move {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| HubError::Bind { addr, source })?;
            let local = listener
                .local_addr()
                .map_err(|source| HubError::Bind { addr, source })?;
            Ok::<_, HubError>((listener, local))
        };
        let (grpc, grpc_addr) = bind(config.grpc_listen).await?;
        let (metrics, metrics_addr) = bind(config.metrics_listen).await?;
        let (cluster_proxy, cluster_proxy_addr) = match config.cluster_proxy.listen {
            Some(addr) => {
                let (l, a) = bind(addr).await?;
                (Some(l), Some(a))
            }
            None => (None, None),
        };
        let (dashboard, dashboard_addr) = match config.dashboard.listen {
            Some(addr) => {
                let (l, a) = bind(addr).await?;
                (Some(l), Some(a))
            }
            None => (None, None),
        };
        let webhooks = match config.families.gitops.webhook.listen {
            Some(addr) => Some(bind(addr).await?.0),
            None => None,
        };
        Ok(Self {
            grpc,
            metrics,
            grpc_addr,
            metrics_addr,
            cluster_proxy,
            cluster_proxy_addr,
            dashboard,
            dashboard_addr,
            webhooks,
        })
    }
}

/// The addresses the listeners are bound to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Addrs {
    pub grpc: SocketAddr,
    pub metrics: SocketAddr,
    pub cluster_proxy: Option<SocketAddr>,
    pub dashboard: Option<SocketAddr>,
}

impl Addrs {
    /// The addresses of `listeners`.
    pub fn of(listeners: &Listeners) -> Self {
        Self {
            grpc: listeners.grpc_addr,
            metrics: listeners.metrics_addr,
            cluster_proxy: listeners.cluster_proxy_addr,
            dashboard: listeners.dashboard_addr,
        }
    }
}

/// This hub's id: the configured one, else one made from the API port.
pub(crate) fn hub_id(config: &Config, listeners: &Listeners) -> String {
    match &config.ha.hub_id {
        Some(id) => id.clone(),
        None => crate::default_hub_id(listeners.grpc_addr.port()),
    }
}

/// This hub as its shard leases name it: a fresh incarnation, its API and metrics addresses.
pub(crate) fn hub_info(hub_id: &str, listeners: &Listeners) -> ha::lease::HubInfo {
    ha::lease::HubInfo {
        hub: hub_id.to_string(),
        incarnation: uuid::Uuid::new_v4().to_string(),
        grpc: listeners.grpc_addr.to_string(),
        metrics: listeners.metrics_addr.to_string(),
        draining: false,
        version: flotilla_api::version::VERSION.into(),
    }
}

/// What [`serve`] needs besides the listeners.
#[derive(Clone, Copy)]
pub(crate) struct ServeDeps<'a> {
    pub config: &'a Config,
    pub nats: &'a async_nats::Client,
    pub metrics: &'a Arc<Metrics>,
    pub inventory: &'a ClusterInventory,
    pub works: &'a WorkInventory,
    pub units: &'a Arc<units::Units>,
    pub shards: &'a ha::shards::Shards,
    /// The OIDC issuer's authenticator (the dashboard's sign-in with it).
    pub oidc: Option<&'a flotilla_oidc::Authenticator>,
}

/// Serves gRPC, the cluster proxy and the dashboard (when their listeners are bound) and
/// metrics, their tasks pushed on `tasks`; the cluster proxy's tunnels when it serves.
pub(crate) async fn serve(
    listeners: Listeners,
    deps: ServeDeps<'_>,
    routes: tonic::service::Routes,
    shutdown: watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<Option<crate::kubeproxy::tunnel::Tunnels>, HubError> {
    let ServeDeps {
        config,
        nats,
        metrics,
        inventory,
        works,
        units,
        shards,
        ..
    } = deps;
    tasks.push(serve_grpc(
        config,
        nats,
        metrics,
        units,
        routes,
        listeners.grpc,
        shutdown.clone(),
    )?);
    let cluster_proxy = match listeners.cluster_proxy {
        Some(listener) => Some(
            serve_cluster_proxy(
                config,
                nats,
                inventory,
                metrics,
                listener,
                shutdown.clone(),
                tasks,
            )
            .await?,
        ),
        None => None,
    };
    if let Some(listener) = listeners.dashboard {
        tasks.extend(serve_dashboard(deps, listener, shutdown.clone())?);
    }
    if let Some(listener) = listeners.webhooks {
        tasks.push(serve_webhooks(deps, listener, shutdown.clone())?);
    }
    tasks.push(serve_metrics(
        listeners.metrics,
        metrics.clone(),
        inventory.clone(),
        works.clone(),
        shards.clone(),
        shutdown.clone(),
    ));
    tasks.push(poll_stream_fill(metrics, units, shutdown));
    let credentials = crate::expiry::sources(config);
    crate::expiry::check_at_start(&credentials, flotilla_auth::setup::unix_now());
    metrics.register_collector(Box::new(crate::expiry::ExpiryMetrics(credentials)));
    tracing::info!(grpc = %listeners.grpc_addr, metrics = %listeners.metrics_addr, nats = %config.nats.url, "hub started");
    Ok(cluster_proxy)
}

/// The hub's buckets and the status stream.
pub(crate) struct Opened {
    pub clusters: Bucket<flotilla_api::v1::ManagedCluster>,
    pub works: Bucket<crate::cluster::StoredWork>,
    pub status_stream: async_nats::jetstream::stream::Stream,
    pub orphans: Bucket<flotilla_api::v1::Orphan>,
    pub hubmeta: Bucket<flotilla_api::v1::RecoveryWindow>,
}

async fn open(
    jetstream: &async_nats::jetstream::Context,
    opts: StreamOptions,
    limits: limits::StreamLimits,
) -> Result<Opened, StoreError> {
    Ok(Opened {
        clusters: Bucket::open(jetstream, store::CLUSTERS, opts).await?,
        works: Bucket::open(jetstream, store::WORKS, opts).await?,
        orphans: Bucket::open(jetstream, recovery::ORPHANS, opts).await?,
        hubmeta: Bucket::open(jetstream, recovery::HUBMETA, opts).await?,
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

/// Connects to NATS and opens the store, waiting for JetStream while NATS is still starting
/// (compose, systemd) instead of failing.
pub(crate) async fn connect(
    config: &Config,
) -> Result<(async_nats::Client, async_nats::jetstream::Context, Opened), HubError> {
    let nats = connect::connect(&nats_config(config, ""), None).await?;
    let jetstream = async_nats::jetstream::new(nats.clone());
    let opened = patiently("the hub's streams and buckets", || async {
        match open(&jetstream, config.stream, config.limits.stream).await {
            Err(StoreError::JetStream(e)) if e.out_of_storage() => {
                Err(Patience::GiveUp(HubError::NoStorage {
                    stream: e.stream().to_string(),
                    max_bytes: config.limits.stream.max_bytes,
                    source: e,
                }))
            }
            other => other.map_err(|e| Patience::Retry(HubError::from(e))),
        }
    })
    .await
    .map_err(Patience::into_inner)?;
    Ok((nats, jetstream, opened))
}

/// The hub's NATS settings for one of its connections (`purpose` is added to its name). A
/// paused or cut-off connection is noticed within a third of the shard lease TTL.
fn nats_config(config: &Config, purpose: &str) -> connect::NatsConfig {
    let mut nats = config.nats.clone();
    nats.ping_interval = nats.ping_interval.min(config.ha.ttl / 3);
    if !purpose.is_empty() {
        nats.name = format!("{}-{purpose}", nats.name);
    }
    nats
}

/// Runs a JetStream request of the start until it succeeds: a NATS that is still starting, or
/// a cluster still electing its stream leaders (a new R3 stream can take longer than one
/// request's timeout on a busy machine), is waited for instead of failing — as long as the
/// start may wait for its store (`--store-wait-seconds`, without bound by default), saying
/// what for ([`store::ride::waiting_for`]).
async fn patiently<T, E, F, Fut>(what: &str, mut request: F) -> Result<T, E>
where
    E: Retryable,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let started = tokio::time::Instant::now();
    let mut attempt = 0;
    loop {
        match request().await {
            Ok(v) => {
                if attempt > 0 {
                    store::ride::waiting_for(None);
                }
                return Ok(v);
            }
            Err(e) if e.retryable() && !store::ride::start_expired() => {
                if attempt % 10 == 0 {
                    tracing::warn!(error = %e, what, waited_s = started.elapsed().as_secs(), "waiting for NATS JetStream");
                }
                store::ride::waiting_for(Some(format!(
                    "{what}: {e} (for {} s)",
                    started.elapsed().as_secs()
                )));
                attempt += 1;
                tokio::time::sleep(connect::backoff(attempt.min(4), Duration::from_secs(2))).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// An error [`patiently`] may wait out (a NATS still starting) or must not (a configuration
/// the server refuses).
trait Retryable: std::fmt::Display {
    fn retryable(&self) -> bool {
        true
    }
}

impl Retryable for StoreError {}
impl Retryable for js::JetStreamError {}

/// A request's error, marked as worth waiting for or not.
enum Patience<E> {
    Retry(E),
    GiveUp(E),
}

impl<E> Patience<E> {
    fn into_inner(self) -> E {
        match self {
            Self::Retry(e) | Self::GiveUp(e) => e,
        }
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Patience<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Retry(e) | Self::GiveUp(e) => e.fmt(f),
        }
    }
}

impl<E: std::fmt::Display> Retryable for Patience<E> {
    fn retryable(&self) -> bool {
        matches!(self, Self::Retry(_))
    }
}

/// The clusters and works: the actors' registry, the inventories every hub reads, and how
/// far their views have read (a new shard owner waits for them).
pub(crate) struct State {
    pub inventory: ClusterInventory,
    pub works: WorkInventory,
    pub clusters: Clusters,
    pub janitor: janitor::Janitor,
    pub progress: Vec<(views::Progress, async_nats::jetstream::stream::Stream)>,
    /// Which sets each cluster is in (every hub keeps it: the grants' filters and decisions).
    pub set_index: flotilla_hub_core::setindex::SetIndex,
}

/// What [`State::load`] needs.
pub(crate) struct StateDeps<'a> {
    pub config: &'a Config,
    pub nats: &'a async_nats::Client,
    pub opened: &'a Opened,
    pub metrics: &'a Arc<Metrics>,
    pub hub_id: &'a str,
    pub security: Option<crate::security::Security>,
}

impl State {
    /// Loads every cluster and work into the views and starts following the buckets.
    pub async fn load(
        deps: StateDeps<'_>,
        shutdown: &watch::Receiver<bool>,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> Result<Self, HubError> {
        let StateDeps {
            config,
            nats,
            opened,
            metrics,
            hub_id,
            security,
        } = deps;
        let (janitor, janitor_task) = janitor::Janitor::spawn(
            opened.status_stream.clone(),
            metrics.clone(),
            config.limits.status_unknown_max,
            shutdown.clone(),
        );
        tasks.push(janitor_task);
        // A store marked for newer hubs stops this one before it reads a record.
        recovery::format::check(&opened.hubmeta, &flotilla_api::version::Version::current())
            .await?;
        let (recovery, recovery_task) = recovery::Recovery::start(
            opened.orphans.clone(),
            opened.hubmeta.clone(),
            shutdown.clone(),
        )
        .await?;
        tasks.push(recovery_task);
        recovery.export(metrics);
        crate::info::export_build_info(metrics);
        let inventory = ClusterInventory::new(4096);
        let works = WorkInventory::new(4096);
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
            hub_id: hub_id.to_string(),
            security,
            janitor: janitor.clone(),
            seal: crate::sealed::HubSeal::new(config.families.service_accounts.key.clone()),
            recovery,
            grants: config.api.tokens.as_ref().map(|t| t.live().clone()),
        });
        let holder: Arc<dyn views::Holder> = Arc::new(clusters.clone());
        let (cluster_view, cluster_progress) = views::View::load(
            opened.clusters.clone(),
            inventory.clone(),
            views::Keys::Cluster,
            holder.clone(),
        )
        .await?;
        let (work_view, work_progress) = views::View::load(
            opened.works.clone(),
            works.clone(),
            views::Keys::InCluster,
            holder,
        )
        .await?;
        tracing::info!(
            clusters = inventory.len(),
            works = works.len(),
            "hub state loaded"
        );
        tasks.push(tokio::spawn(
            cluster_view
                .follow(shutdown.clone())
                .instrument(tracing::info_span!("view", bucket = "clusters")),
        ));
        tasks.push(tokio::spawn(
            work_view
                .follow(shutdown.clone())
                .instrument(tracing::info_span!("view", bucket = "works")),
        ));
        let set_index = flotilla_hub_core::setindex::SetIndex::new();
        let sets = Bucket::open(
            &async_nats::jetstream::new(nats.clone()),
            crate::store::CLUSTERSETS,
            config.stream,
        )
        .await?;
        tasks.extend(
            set_index
                .spawn(sets, inventory.clone(), shutdown.clone())
                .await?,
        );
        Ok(Self {
            inventory,
            works,
            clusters,
            janitor,
            progress: vec![
                (cluster_progress, opened.clusters.kv().stream.clone()),
                (work_progress, opened.works.kv().stream.clone()),
            ],
            set_index,
        })
    }
}

/// Serves the spokes' registration and resync requests; returns once both subscriptions are
/// in place at the server (a request sent right after `start` returns is answered, not lost).
pub(crate) async fn serve_spokes(
    nats: &async_nats::Client,
    clusters: &Clusters,
    metrics: &Arc<Metrics>,
    router: &RouterConfig,
    shutdown: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut router = router.clone();
    router.ready = Some(ready_tx);
    let tasks = vec![
        tokio::spawn(
            crate::router::run_registrations(
                nats.clone(),
                clusters.clone(),
                metrics.clone(),
                router.clone(),
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("router", serves = "registrations")),
        ),
        tokio::spawn(
            crate::router::run_resyncs(
                nats.clone(),
                clusters.clone(),
                metrics.clone(),
                router,
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("router", serves = "resyncs")),
        ),
    ];
    let subscribed = tokio::time::timeout(Duration::from_secs(10), async {
        for _ in 0..tasks.len() {
            if ready_rx.recv().await.is_none() {
                break;
            }
        }
    })
    .await;
    if subscribed.is_err() {
        tracing::warn!("request subscriptions not confirmed within 10 s; serving anyway");
    }
    tasks
}

/// The hub's security (`--security-dir`) and its task pushing accounts to NATS; neither
/// without it.
pub(crate) async fn start_security(
    config: &Config,
    jetstream: &async_nats::jetstream::Context,
    shutdown: &watch::Receiver<bool>,
) -> Result<(Option<crate::security::Security>, Option<JoinHandle<()>>), HubError> {
    let Some(sc) = &config.security else {
        return Ok((None, None));
    };
    let (security, pusher) = crate::security::Security::start(
        sc,
        &config.nats,
        jetstream,
        config.stream,
        shutdown.clone(),
    )
    .await?;
    Ok((Some(security), Some(pusher)))
}

/// The router's configuration: the configured one with the controller families' report
/// sinks, the janitor, the agents' NATS account, and the limits on new names and registrations
/// in flight.
pub(crate) fn router_config(
    config: &Config,
    state: &State,
    agents_account: Option<String>,
    reports: crate::report::Sinks,
) -> RouterConfig {
    let mut router_config = config.router.clone();
    router_config.reports = reports;
    router_config.janitor = Some(state.janitor.clone());
    router_config.agents_account = agents_account;
    router_config.new_names = Some(Arc::new(limits::NewNames::new(
        config.limits.clone(),
        config.cluster.auto_accept.enabled,
    )));
    router_config.admission = Some(crate::admission::Admission::new(
        config.limits.registrations_in_flight,
    ));
    router_config
}

/// Gives the API's tokens the hub's access table — the core's rows and those of every family
/// in `families` — so every server that decides calls by them (the API, forwarded calls, the
/// cluster proxy, the dashboard) decides by the same table. A method two parts declare is
/// refused at start.
pub(crate) fn decide_access(
    config: &mut Config,
    families: &[Box<dyn crate::controller::Family>],
) -> Result<(), HubError> {
    let table = Arc::new(crate::controller::Families::access(families)?);
    config.api.tokens = config.api.tokens.take().map(|t| t.with_access(table));
    Ok(())
}

/// The API's services, built once: the routes served here, the same routes behind
/// authentication for the hubs that forward to this one while it holds the controllers, and
/// the families (whose services sit in late slots they fill while they run here).
pub(crate) async fn api_routes(
    config: &Config,
    state: &State,
    families: Vec<Box<dyn crate::controller::Family>>,
    hub_id: &str,
) -> Result<
    (
        tonic::service::Routes,
        grpc::auth::Authenticated<tonic::service::Routes>,
        crate::controller::Families,
    ),
    HubError,
> {
    let clusters = &state.clusters;
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let teams = grpc::guard::Teams::new(config.api.tokens.as_ref().map(|t| t.live().clone()));
    let api = grpc::api::Api::new(health_service)
        .map_err(|e| HubError::Reflection(e.to_string()))?
        .with(ClusterServiceServer::new(grpc::cluster::ClusterApi::new(
            clusters.clone(),
            state.inventory.clone(),
            teams.clone(),
        )))
        .with(
            WorkServiceServer::new(grpc::work::WorkApi::new(
                clusters.clone(),
                state.works.clone(),
                &clusters.shared().publisher,
                teams,
            ))
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        )
        .with(AccessServiceServer::new(grpc::whoami::AccessApi::new(
            hub_id,
        )));
    let (families, api) = crate::controller::Families::new(families, api);
    let routes = api.serving(&health_reporter).await;
    let forwarded = tower::Layer::layer(
        &grpc::auth::Authenticate::new(config.api.tokens.clone()),
        routes.clone().prepare(),
    );
    Ok((routes, forwarded, families))
}

/// What [`take_shards`] needs.
pub(crate) struct ShardDeps {
    pub me: ha::lease::HubInfo,
    pub units: Arc<units::Units>,
}

/// Opens the lease buckets and starts taking shard leases; returns once the units taken in the
/// first round are started (bounded).
///
/// Leases and heartbeats have a NATS connection of their own: on the hub's main connection a
/// renewal waited behind everything else the hub was sending and receiving (10,000 work specs
/// of a fanout, the status replay of shards just taken) and at 10,000 clusters every lease ran
/// out at once.
pub(crate) async fn take_shards(
    config: &Config,
    deps: ShardDeps,
) -> Result<(ha::shards::Shards, JoinHandle<()>), HubError> {
    let ShardDeps { me, units } = deps;
    let jetstream =
        async_nats::jetstream::new(connect::connect(&nats_config(config, "leases"), None).await?);
    let (lease_kv, ttl) = patiently("the shard lease bucket", || {
        ha::lease::open_expiring(&jetstream, ha::lease::LEASES, config.ha.ttl, config.stream)
    })
    .await?;
    let (member_kv, _) = patiently("the hub member bucket", || {
        ha::lease::open_expiring(&jetstream, ha::lease::MEMBERS, ttl, config.stream)
    })
    .await?;
    let mut ha_config = config.ha.clone();
    if ttl != ha_config.ttl {
        tracing::info!(bucket_ttl = ?ttl, flag = ?ha_config.ttl, "using the lease bucket's TTL");
        ha_config.ttl = ttl;
    }
    let ownership = ha::Ownership::new(ha::UNITS);
    let (shards, task) = ha::shards::spawn(
        ha_config.clone(),
        me,
        ha::lease::Leases::new(lease_kv, ha_config.renew),
        ha::members::Members::new(member_kv, ha_config.renew * 3),
        ownership.clone(),
        Arc::new(units::UnitHost(units.clone())),
    );
    shards.first_round().await;
    let started = tokio::time::timeout(Duration::from_secs(10), async {
        while ownership.held().iter().any(|u| !units.started(*u)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if started.is_err() {
        tracing::warn!("the shards taken at start were not all started within 10 s");
    }
    Ok((shards, task))
}

/// The gRPC server: tokens checked, the controllers' calls forwarded to the hub holding them
/// when it is not this one (sealed, vouching for the caller this hub authenticated).
pub(crate) fn serve_grpc(
    config: &Config,
    nats: &async_nats::Client,
    metrics: &Arc<Metrics>,
    units: &Arc<units::Units>,
    routes: tonic::service::Routes,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, HubError> {
    let capacity = &config.api.capacity;
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(capacity.max_concurrent_streams)
        .http2_keepalive_interval(Some(capacity.keepalive))
        .http2_keepalive_timeout(Some(capacity.keepalive_timeout));
    if let Some(tls) = &config.api.tls {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| HubError::Tls(format!("{}: {e}", p.display())))
        };
        let identity = tonic::transport::Identity::from_pem(read(&tls.cert)?, read(&tls.key)?);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(|e| HubError::Tls(e.to_string()))?;
    }
    let route = {
        let units = units.clone();
        move |path: &str| {
            if !units.families().serves(path) || units.controllers().is_some() {
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
    let server = builder
        .layer(grpc::guard::CountRejections::new(metrics.clone()))
        .layer(grpc::auth::Authenticate::new(config.api.tokens.clone()))
        .layer(grpc::capacity::Admit::new(
            capacity.clone(),
            metrics.clone(),
        ))
        .layer(grpc::forward::Forward::new(
            nats.clone(),
            crate::controller::FORWARD_SUBJECT,
            route,
            crate::sealed::HubSeal::new(config.families.service_accounts.key.clone()),
        ))
        .add_routes(routes);
    let connections = grpc::capacity::Connections::new(capacity.max_connections, metrics.clone());
    Ok(tokio::spawn(
        async move {
            // Nagle off on every API connection: `serve_with_incoming` ignores the builder's
            // `tcp_nodelay`, and with Nagle on, small responses waited for the client's delayed
            // ACK — ApplyWork calls took 5 ms or 45 ms, nothing in between.
            // Past --grpc-max-connections a connection is closed as soon as it is accepted.
            let incoming = tokio_stream::StreamExt::filter_map(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                move |conn| match conn {
                    Ok(s) => {
                        if let Err(e) = s.set_nodelay(true) {
                            tracing::debug!(error = %e, "TCP_NODELAY not set on an API connection");
                        }
                        let peer = s.peer_addr().ok();
                        connections.admit(s, peer).map(Ok)
                    }
                    Err(e) => Some(Err(e)),
                },
            );
            let stop = async move {
                let _ = shutdown.changed().await;
            };
            if let Err(e) = server.serve_with_incoming_shutdown(incoming, stop).await {
                tracing::error!(error = %e, "gRPC server failed");
            }
        }
        .instrument(tracing::info_span!("grpc_server")),
    ))
}

/// The cluster proxy: its calls' dispatcher and its server, with the API's tokens and TLS.
pub(crate) async fn serve_cluster_proxy(
    config: &Config,
    nats: &async_nats::Client,
    inventory: &ClusterInventory,
    metrics: &Metrics,
    listener: TcpListener,
    shutdown: watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<crate::kubeproxy::tunnel::Tunnels, HubError> {
    use crate::kubeproxy::{metrics::ProxyMetrics, offline, server, tunnel};
    let proxy_metrics = ProxyMetrics::new(metrics);
    let tls = match &config.api.tls {
        Some(tls) => Some(server::tls_acceptor(&tls.cert, &tls.key).map_err(HubError::Tls)?),
        None => None,
    };
    let mut tunnel_config = config.cluster_proxy.tunnel.clone();
    tunnel_config.max_event_bytes = config.cluster.max_event_bytes;
    let (tunnels, dispatcher) = tunnel::Tunnels::start(
        nats,
        inventory.clone(),
        tunnel_config,
        proxy_metrics.clone(),
        shutdown.clone(),
    )
    .await
    .map_err(HubError::ClusterProxy)?;
    tasks.push(dispatcher);
    let hosts = match (&config.api.tokens, listener.local_addr()) {
        (None, Ok(listen)) => {
            tracing::warn!(
                %listen,
                "the cluster proxy is open (no API tokens): every caller is an anonymous admin \
                 on every cluster, Secrets included; it answers only requests addressed to this \
                 machine"
            );
            Some(crate::hosts::AllowedHosts::open_server(listen))
        }
        _ => None,
    };
    let deps = std::sync::Arc::new(server::Deps {
        tunnels: tunnels.clone(),
        inventory: inventory.clone(),
        tokens: config.api.tokens.clone(),
        hosts,
        lease: offline::LeaseRule {
            default_lease_seconds: config.cluster.default_lease_duration_seconds,
            grace_multiplier: config.cluster.lease_grace_multiplier,
        },
        metrics: proxy_metrics,
        limits: config.cluster_proxy.connections.clone(),
        service_account_tokens: Some(
            crate::serviceaccount::TokenLookup::open(
                &async_nats::jetstream::new(nats.clone()),
                config.stream,
            )
            .await?,
        ),
    });
    tasks.push(server::serve(listener, tls, deps, shutdown));
    Ok(tunnels)
}

/// The dashboard: its live feed and its server, with the API's tokens and TLS.
pub(crate) fn serve_dashboard(
    deps: ServeDeps<'_>,
    listener: TcpListener,
    shutdown: watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>, HubError> {
    let ServeDeps {
        config,
        metrics,
        inventory,
        works,
        units,
        oidc,
        ..
    } = deps;
    // The sign-in with the issuer: offered when configured and the hub trusts an issuer.
    let sign_in = match (config.dashboard.sign_in.clone(), oidc) {
        (Some(sign_in), Some(oidc)) => Some(Arc::new(
            crate::dashboard::oidc::SignIn::new(sign_in, oidc.clone())
                .map_err(|e| HubError::Oidc(crate::oidc::OidcError::Client(e)))?,
        )),
        (Some(_), None) => {
            tracing::warn!(
                "the dashboard's OIDC sign-in needs --oidc-issuer-url: only tokens sign in"
            );
            None
        }
        (None, _) => None,
    };
    let tls = match &config.api.tls {
        Some(tls) => {
            Some(crate::webserver::tls_acceptor(&tls.cert, &tls.key).map_err(HubError::Tls)?)
        }
        None => None,
    };
    Ok(crate::dashboard::start(
        &config.dashboard,
        crate::dashboard::Sources {
            inventory: inventory.clone(),
            works: works.clone(),
            units: units.clone(),
            tokens: config.api.tokens.clone(),
            metrics: metrics.clone(),
            sign_in,
        },
        listener,
        tls,
        shutdown,
    ))
}

/// The GitRepo push webhooks (`--gitops-webhook-listen`), with the API's TLS.
pub(crate) fn serve_webhooks(
    deps: ServeDeps<'_>,
    listener: TcpListener,
    shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, HubError> {
    use crate::gitops::webhook::{forward::Route, listener::Webhooks};
    let config = deps.config;
    let tls = match &config.api.tls {
        Some(tls) => {
            Some(crate::webserver::tls_acceptor(&tls.cert, &tls.key).map_err(HubError::Tls)?)
        }
        None => None,
    };
    let route = Route {
        units: deps.units.clone(),
        nats: deps.nats.clone(),
        seal: crate::sealed::HubSeal::new(config.families.service_accounts.key.clone()),
    };
    let settings = &config.families.gitops.webhook;
    let handler = Arc::new(Webhooks::new(settings, route, deps.metrics));
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving GitRepo webhooks");
    }
    Ok(crate::webserver::serve(
        listener,
        tls,
        settings.limits.clone(),
        handler,
        shutdown,
    ))
}

/// The streams' fill (`flotilla_hub_stream_*`), listed while this hub holds the controllers'
/// unit: one poller per fleet.
pub(crate) fn poll_stream_fill(
    metrics: &Metrics,
    units: &units::Units,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let fill = store::fill::FillMetrics::default();
    metrics.register_collector(Box::new(fill.clone()));
    store::fill::spawn(
        units.controller_deps().jetstream.clone(),
        units.watch_controllers(),
        Option::is_some,
        fill,
        store::fill::EVERY,
        shutdown,
    )
}

/// The metrics endpoint (`/metrics`, `/debug/shards`).
pub(crate) fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    inventory: ClusterInventory,
    works: WorkInventory,
    shards: ha::shards::Shards,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    metrics.register_collector(Box::new(crate::cluster::work_states::WorksMetrics(works)));
    metrics.register_collector(Box::new(ha::skew::SkewMetrics(shards.clone())));
    metrics.register_collector(Box::new(ha::held::HeldMetrics(shards.clone())));
    tokio::spawn(
        async move {
            let stop = async move {
                let _ = shutdown.changed().await;
            };
            if let Err(e) = crate::metrics::serve(listener, metrics, inventory, shards, stop).await
            {
                tracing::error!(error = %e, "metrics server failed");
            }
        }
        .instrument(tracing::info_span!("metrics_server")),
    )
}

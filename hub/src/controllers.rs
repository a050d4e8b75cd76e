//! The controllers: cluster sets and bindings, placements (with scores and the dispatcher),
//! replica sets, add-ons (with their agents' router) and the sets' managed namespaces. They run
//! on the one hub holding the controllers' unit, start when it takes the unit (loading their
//! state from the store) and stop when it gives it up or loses it; every write they make is
//! stamped with the unit's epoch and refused once its fence is gone.
//!
//! Their gRPC services sit behind [`LateSlot`]s: the server is built once, and the hub holding
//! the controllers fills the slots while it holds them.

use crate::HubError;
use crate::addon;
use crate::cluster::Clusters;
use crate::clusterset::{self, ClusterSets};
use crate::grpc;
use crate::grpc::late::{Late, LateSlot};
use crate::ha::Fence;
use crate::inventory::{ClusterInventory, WorkInventory};
use crate::metrics::Metrics;
use crate::placement;
use crate::replicaset;
use crate::router::RouterConfig;
use crate::store::{self, Bucket};
use flotilla_api::v1::add_on_service_server::AddOnServiceServer;
use flotilla_api::v1::cluster_set_service_server::ClusterSetServiceServer;
use flotilla_api::v1::import_policy_service_server::ImportPolicyServiceServer;
use flotilla_api::v1::mirror_peer_service_server::MirrorPeerServiceServer;
use flotilla_api::v1::placement_service_server::PlacementServiceServer;
use flotilla_api::v1::policy_service_server::PolicyServiceServer;
use flotilla_api::v1::replica_set_service_server::ReplicaSetServiceServer;
use flotilla_api::v1::service_account_service_server::ServiceAccountServiceServer;
use flotilla_bus::jetstream::StreamOptions;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The gRPC services the controllers serve.
pub struct Services {
    /// ClusterSetService.
    pub sets: LateSlot<ClusterSetServiceServer<grpc::clusterset::ClusterSetApi>>,
    /// PlacementService.
    pub placements: LateSlot<PlacementServiceServer<grpc::placement::PlacementApi>>,
    /// ReplicaSetService.
    pub replicasets: LateSlot<ReplicaSetServiceServer<grpc::replicaset::ReplicaSetApi>>,
    /// AddOnService.
    pub addons: LateSlot<AddOnServiceServer<grpc::addon::AddOnApi>>,
    /// The score actor this hub's status router reports to.
    pub scores: placement::score_route::LocalScores,
    /// PolicyService.
    pub policies: LateSlot<PolicyServiceServer<grpc::policy::PolicyApi>>,
    /// The policies this hub's status router reports to.
    pub policy_reports: crate::policy::route::LocalPolicies,
    /// ServiceAccountService.
    pub service_accounts:
        LateSlot<ServiceAccountServiceServer<grpc::serviceaccount::ServiceAccountApi>>,
    /// The ManagedServiceAccounts this hub's status router reports to.
    pub msa_reports: crate::serviceaccount::route::LocalAccounts,
    /// ImportPolicyService.
    pub import_policies: LateSlot<ImportPolicyServiceServer<grpc::importpolicy::ImportPolicyApi>>,
    /// MirrorPeerService.
    pub mirror_peers: LateSlot<MirrorPeerServiceServer<grpc::mirrorpeer::MirrorPeerApi>>,
}

/// The controllers' gRPC services as every hub serves them: each answers from the slot
/// [`Services`] fills while this hub runs the controllers.
pub struct Served {
    sets: Late<ClusterSetServiceServer<grpc::clusterset::ClusterSetApi>>,
    placements: Late<PlacementServiceServer<grpc::placement::PlacementApi>>,
    replicasets: Late<ReplicaSetServiceServer<grpc::replicaset::ReplicaSetApi>>,
    addons: Late<AddOnServiceServer<grpc::addon::AddOnApi>>,
    policies: Late<PolicyServiceServer<grpc::policy::PolicyApi>>,
    service_accounts: Late<ServiceAccountServiceServer<grpc::serviceaccount::ServiceAccountApi>>,
    import_policies: Late<ImportPolicyServiceServer<grpc::importpolicy::ImportPolicyApi>>,
    mirror_peers: Late<MirrorPeerServiceServer<grpc::mirrorpeer::MirrorPeerApi>>,
}

impl Served {
    /// Adds every one of them to the API.
    pub(crate) fn add_to(self, api: crate::boot::Api) -> crate::boot::Api {
        api.add(self.sets)
            .add(self.placements)
            .add(self.replicasets)
            .add(self.addons)
            .add(self.policies)
            .add(self.service_accounts)
            .add(self.import_policies)
            .add(self.mirror_peers)
    }
}

impl Services {
    /// Empty slots, the services serving from them, and the sinks this hub's status router
    /// sends score and policy reports to (here while this hub runs the controllers, else to
    /// the hub that does).
    pub fn new(
        nats: &async_nats::Client,
    ) -> (
        Self,
        Served,
        placement::score_route::ScoreSink,
        crate::policy::route::PolicySink,
        crate::serviceaccount::route::MsaSink,
    ) {
        let (scores, score_sink) = placement::score_route::ScoreSink::new(nats.clone());
        let (policy_reports, policy_sink) = crate::policy::route::PolicySink::new(nats.clone());
        let (msa_reports, msa_sink) = crate::serviceaccount::route::MsaSink::new(nats.clone());
        let (service_accounts, service_accounts_served) = LateSlot::new();
        let (sets, sets_served) = LateSlot::new();
        let (placements, placements_served) = LateSlot::new();
        let (replicasets, replicasets_served) = LateSlot::new();
        let (addons, addons_served) = LateSlot::new();
        let (policies, policies_served) = LateSlot::new();
        let (import_policies, import_policies_served) = LateSlot::new();
        let (mirror_peers, mirror_peers_served) = LateSlot::new();
        (
            Self {
                sets,
                placements,
                replicasets,
                addons,
                scores,
                policies,
                policy_reports,
                service_accounts,
                msa_reports,
                import_policies,
                mirror_peers,
            },
            Served {
                sets: sets_served,
                placements: placements_served,
                replicasets: replicasets_served,
                addons: addons_served,
                policies: policies_served,
                service_accounts: service_accounts_served,
                import_policies: import_policies_served,
                mirror_peers: mirror_peers_served,
            },
            score_sink,
            policy_sink,
            msa_sink,
        )
    }

    fn fill(&self, c: &Controllers) {
        self.sets.set(Some(ClusterSetServiceServer::new(
            grpc::clusterset::ClusterSetApi::new(c.sets.clone()),
        )));
        self.placements.set(Some(PlacementServiceServer::new(
            grpc::placement::PlacementApi::new(c.placements.clone()),
        )));
        self.replicasets.set(Some(
            ReplicaSetServiceServer::new(grpc::replicaset::ReplicaSetApi::new(
                c.replicasets.clone(),
            ))
            .max_decoding_message_size(8 * 1024 * 1024)
            .max_encoding_message_size(8 * 1024 * 1024),
        ));
        self.addons.set(Some(
            AddOnServiceServer::new(grpc::addon::AddOnApi::new(c.addons.clone()))
                .max_decoding_message_size(8 * 1024 * 1024)
                .max_encoding_message_size(8 * 1024 * 1024),
        ));
        self.scores.set(Some(c.placements.scores().clone()));
        self.policies.set(Some(
            PolicyServiceServer::new(grpc::policy::PolicyApi::new(c.policies.clone()))
                .max_decoding_message_size(8 * 1024 * 1024)
                .max_encoding_message_size(8 * 1024 * 1024),
        ));
        self.policy_reports.set(Some(c.policies.clone()));
        self.service_accounts
            .set(Some(ServiceAccountServiceServer::new(
                grpc::serviceaccount::ServiceAccountApi::new(c.service_accounts.clone()),
            )));
        self.msa_reports.set(Some(c.service_accounts.clone()));
        self.import_policies
            .set(Some(ImportPolicyServiceServer::new(
                grpc::importpolicy::ImportPolicyApi::new(c.import_policies.clone()),
            )));
        self.mirror_peers.set(Some(MirrorPeerServiceServer::new(
            grpc::mirrorpeer::MirrorPeerApi::new(c.mirror_peers.clone()),
        )));
    }

    fn empty(&self) {
        self.scores.set(None);
        self.policies.set(None);
        self.policy_reports.set(None);
        self.service_accounts.set(None);
        self.msa_reports.set(None);
        self.import_policies.set(None);
        self.mirror_peers.set(None);
        self.sets.set(None);
        self.placements.set(None);
        self.replicasets.set(None);
        self.addons.set(None);
    }
}

/// What the controllers are built from.
#[derive(Clone)]
pub struct Deps {
    /// JetStream, to open the buckets.
    pub jetstream: async_nats::jetstream::Context,
    /// Replicas and storage of the buckets.
    pub stream: StreamOptions,
    /// NATS, for the add-on agents' router.
    pub nats: async_nats::Client,
    /// Every cluster.
    pub inventory: ClusterInventory,
    /// Every work.
    pub works: WorkInventory,
    /// Cluster actors (here or on their shard's hub).
    pub clusters: Clusters,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Secure mode.
    pub security: Option<crate::security::Security>,
    /// Placement settings.
    pub placement: placement::PlacementConfig,
    /// Add-on settings.
    pub addons: addon::AddOnConfig,
    /// Router settings (the add-on agents' router).
    pub router: RouterConfig,
    /// This hub's id, stamped on writes.
    pub hub_id: String,
    /// Largest event (policy specs).
    pub max_event_bytes: usize,
    /// The API as forwarded calls reach it (the vouched caller held to its role again).
    pub forwarded: grpc::auth::Authenticated<tonic::service::Routes>,
    /// What the holder remembers to run each forwarded call once.
    pub inter_hub: crate::sealed::ReplayLimits,
    /// ManagedServiceAccount settings (the sealing key).
    pub service_accounts: crate::serviceaccount::MsaConfig,
    /// ClusterImportPolicy settings.
    pub import_policies: crate::importpolicy::ImportConfig,
    /// MirrorPeer settings.
    pub mirror_peers: crate::mirrorpeer::MirrorPeerConfig,
}

/// Where hubs not holding the controllers forward the controllers' gRPC calls (hub account
/// only).
pub const FORWARD_SUBJECT: &str = "flotilla.hub.controllers.grpc";

/// The gRPC services the controllers serve, by path prefix.
const SERVICES: [&str; 8] = [
    "/flotilla.v1.ClusterSetService/",
    "/flotilla.v1.PlacementService/",
    "/flotilla.v1.ReplicaSetService/",
    "/flotilla.v1.AddOnService/",
    "/flotilla.v1.PolicyService/",
    "/flotilla.v1.ServiceAccountService/",
    "/flotilla.v1.ImportPolicyService/",
    "/flotilla.v1.MirrorPeerService/",
];

/// Whether the call at `path` is one of the controllers'.
pub fn serves(path: &str) -> bool {
    SERVICES.iter().any(|s| path.starts_with(s))
}

/// The running controllers.
pub struct Controllers {
    /// Cluster sets and bindings.
    pub sets: ClusterSets,
    /// Placements, their decisions and scores.
    pub placements: placement::Placements,
    /// Replica sets.
    pub replicasets: replicaset::ReplicaSets,
    /// Add-ons.
    pub addons: addon::AddOns,
    /// Governance: policies, bindings, policy sets, placement rules.
    pub policies: crate::policy::Policies,
    /// ManagedServiceAccounts.
    pub service_accounts: crate::serviceaccount::ServiceAccounts,
    /// ClusterImportPolicies.
    pub import_policies: crate::importpolicy::ImportPolicies,
    /// MirrorPeers.
    pub mirror_peers: crate::mirrorpeer::MirrorPeers,
    stop: watch::Sender<bool>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

/// What starting the controllers shares: their dependencies, the unit's fence (stamped on
/// every bucket they write) and their tasks' stop signal. One method per controller.
struct Starter<'a> {
    deps: &'a Deps,
    fence: &'a Fence,
    stop: watch::Receiver<bool>,
}

impl Starter<'_> {
    /// `bucket`, its writes stamped with the unit's epoch.
    fn fenced<T: prost::Message + Default>(&self, bucket: Bucket<T>) -> Bucket<T> {
        bucket.fenced(self.fence.clone(), &self.deps.hub_id)
    }

    /// Opens the bucket `name`, fenced.
    async fn open<T: prost::Message + Default>(
        &self,
        name: &'static str,
    ) -> Result<Bucket<T>, HubError> {
        let bucket = Bucket::open(&self.deps.jetstream, name, self.deps.stream).await?;
        Ok(self.fenced(bucket))
    }

    async fn sets(&self) -> Result<ClusterSets, HubError> {
        ClusterSets::load(
            self.open(store::CLUSTERSETS).await?,
            self.open(store::BINDINGS).await?,
            self.deps.inventory.clone(),
        )
        .await
        .map_err(HubError::from)
    }

    /// The placements and their dispatcher's task.
    async fn placements(
        &self,
        sets: &ClusterSets,
    ) -> Result<(placement::Placements, JoinHandle<()>), HubError> {
        let mut buckets = placement::Buckets::open(&self.deps.jetstream, self.deps.stream).await?;
        buckets.placements = self.fenced(buckets.placements);
        buckets.decisions = self.fenced(buckets.decisions);
        buckets.scores = self.fenced(buckets.scores);
        placement::Placements::start(
            placement::Deps {
                buckets,
                clusters: self.deps.inventory.clone(),
                sets: sets.clone(),
                metrics: self.deps.metrics.clone(),
            },
            self.deps.placement.clone(),
            self.stop.clone(),
        )
        .await
        .map_err(HubError::from)
    }

    async fn replicasets(
        &self,
        placements: &placement::Placements,
    ) -> Result<replicaset::ReplicaSets, HubError> {
        replicaset::ReplicaSets::start(
            self.open(replicaset::BUCKET).await?,
            replicaset::Deps {
                clusters: self.deps.clusters.clone(),
                works: self.deps.works.clone(),
                placements: placements.clone(),
            },
        )
        .await
        .map_err(|e| HubError::ReplicaSets(e.to_string()))
    }

    async fn addons(&self, placements: &placement::Placements) -> Result<addon::AddOns, HubError> {
        let mut store = addon::Store::open(&self.deps.jetstream, self.deps.stream).await?;
        store.addons = self.fenced(store.addons);
        store.cluster_addons = self.fenced(store.cluster_addons);
        store.templates = self.fenced(store.templates);
        store.configs = self.fenced(store.configs);
        addon::AddOns::start(
            store,
            addon::Deps {
                clusters: self.deps.clusters.clone(),
                inventory: self.deps.inventory.clone(),
                works: self.deps.works.clone(),
                placements: placements.clone(),
                security: self.deps.security.clone(),
                config: self.deps.addons.clone(),
            },
        )
        .await
        .map_err(|e| HubError::AddOns(e.to_string()))
    }

    async fn policies(
        &self,
        placements: &placement::Placements,
    ) -> Result<crate::policy::Policies, HubError> {
        let mut buckets =
            crate::policy::Buckets::open(&self.deps.jetstream, self.deps.stream).await?;
        buckets.policies = self.fenced(buckets.policies);
        buckets.bindings = self.fenced(buckets.bindings);
        buckets.sets = self.fenced(buckets.sets);
        buckets.rules = self.fenced(buckets.rules);
        buckets.status = self.fenced(buckets.status);
        crate::policy::Policies::start(
            buckets,
            crate::policy::Deps {
                placements: placements.clone(),
                clusters: self.deps.inventory.clone(),
                publisher: self.deps.clusters.shared().publisher.clone(),
                metrics: self.deps.metrics.clone(),
            },
        )
        .await
        .map_err(HubError::Policies)
    }

    async fn service_accounts(&self) -> Result<crate::serviceaccount::ServiceAccounts, HubError> {
        let mut buckets =
            crate::serviceaccount::Buckets::open(&self.deps.jetstream, self.deps.stream).await?;
        buckets.accounts = self.fenced(buckets.accounts);
        buckets.tokens = self.fenced(buckets.tokens);
        crate::serviceaccount::ServiceAccounts::start(
            buckets,
            crate::serviceaccount::Deps {
                clusters: self.deps.inventory.clone(),
                publisher: self.deps.clusters.shared().publisher.clone(),
                metrics: self.deps.metrics.clone(),
                config: self.deps.service_accounts.clone(),
            },
        )
        .await
        .map_err(HubError::ServiceAccounts)
    }

    /// The import policies and their task.
    async fn import_policies(
        &self,
    ) -> Result<(crate::importpolicy::ImportPolicies, JoinHandle<()>), HubError> {
        let mut buckets =
            crate::importpolicy::Buckets::open(&self.deps.jetstream, self.deps.stream).await?;
        buckets.policies = self.fenced(buckets.policies);
        buckets.records = self.fenced(buckets.records);
        crate::importpolicy::ImportPolicies::spawn(
            buckets,
            crate::importpolicy::Deps {
                inventory: self.deps.inventory.clone(),
                clusters: self.deps.clusters.clone(),
                secure: self.deps.security.is_some(),
                agents: self.deps.clusters.shared().publisher.clone(),
                config: self.deps.import_policies.clone(),
            },
            self.stop.clone(),
        )
        .await
        .map_err(HubError::ImportPolicies)
    }

    /// The MirrorPeers and their task.
    async fn mirror_peers(
        &self,
    ) -> Result<(crate::mirrorpeer::MirrorPeers, JoinHandle<()>), HubError> {
        let mut buckets =
            crate::mirrorpeer::Buckets::open(&self.deps.jetstream, self.deps.stream).await?;
        buckets.peers = self.fenced(buckets.peers);
        buckets.secrets = self.fenced(buckets.secrets);
        buckets.keys = self.fenced(buckets.keys);
        crate::mirrorpeer::MirrorPeers::spawn(
            buckets,
            crate::mirrorpeer::Deps {
                inventory: self.deps.inventory.clone(),
                publisher: self.deps.clusters.shared().publisher.clone(),
                config: self.deps.mirror_peers.clone(),
                secure: self.deps.security.is_some(),
            },
            self.stop.clone(),
        )
        .await
        .map_err(HubError::MirrorPeers)
    }

    /// The tasks serving the controllers' NATS subjects (add-on agents, MirrorPeer requests,
    /// policy reports, ManagedServiceAccount tokens, scores, forwarded gRPC calls) and the sets'
    /// own tasks. The add-on agents' routers report on `router.ready` once subscribed.
    fn routes(&self, c: &Controllers, router: RouterConfig) -> Vec<JoinHandle<()>> {
        let (deps, stop) = (self.deps, &self.stop);
        vec![
            tokio::spawn(crate::mirrorpeer::route::run(
                deps.nats.clone(),
                c.mirror_peers.clone(),
                crate::mirrorpeer::route::Deps {
                    inventory: deps.inventory.clone(),
                    metrics: deps.metrics.clone(),
                    router: router.clone(),
                    limits: deps.mirror_peers.requests,
                },
                stop.clone(),
            )),
            tokio::spawn(addon::router::run(
                deps.nats.clone(),
                c.addons.clone(),
                c.placements.scores().clone(),
                deps.metrics.clone(),
                router.clone(),
                stop.clone(),
            )),
            tokio::spawn(addon::router::run_credentials(
                deps.nats.clone(),
                c.addons.clone(),
                deps.metrics.clone(),
                router,
                stop.clone(),
            )),
            tokio::spawn({
                let (nats, service, stop) =
                    (deps.nats.clone(), deps.forwarded.clone(), stop.clone());
                let seal = crate::sealed::HubSeal::new(deps.service_accounts.key.clone());
                let metrics = grpc::forward::ForwardMetrics::new(&deps.metrics);
                let replay = deps.inter_hub;
                async move {
                    if let Err(e) = grpc::forward::serve(
                        nats,
                        FORWARD_SUBJECT,
                        service,
                        seal,
                        replay,
                        metrics,
                        stop,
                    )
                    .await
                    {
                        tracing::error!(error = %e, "serving forwarded controller calls failed");
                    }
                }
            }),
            tokio::spawn(crate::policy::route::serve(
                deps.nats.clone(),
                c.policies.clone(),
                deps.max_event_bytes,
                stop.clone(),
            )),
            tokio::spawn(crate::serviceaccount::route::serve(
                deps.nats.clone(),
                c.service_accounts.clone(),
                deps.max_event_bytes,
                stop.clone(),
            )),
            tokio::spawn(placement::score_route::serve(
                deps.nats.clone(),
                c.placements.scores().clone(),
                stop.clone(),
            )),
            tokio::spawn(c.sets.clone().settle(stop.clone())),
            clusterset::namespaces::spawn(
                c.sets.clone(),
                deps.inventory.clone(),
                deps.clusters.clone(),
                stop.clone(),
            ),
        ]
    }
}

impl Controllers {
    /// Loads the controllers' state and starts them under `fence`; fills `services`.
    pub async fn start(deps: &Deps, fence: Fence, services: &Services) -> Result<Self, HubError> {
        let (stop, stop_rx) = watch::channel(false);
        let starter = Starter {
            deps,
            fence: &fence,
            stop: stop_rx,
        };
        let sets = starter.sets().await?;
        let (placements, dispatcher) = starter.placements(&sets).await?;
        let replicasets = starter.replicasets(&placements).await?;
        let addons = starter.addons(&placements).await?;
        let policies = starter.policies(&placements).await?;
        let service_accounts = starter.service_accounts().await?;
        let (import_policies, import_task) = starter.import_policies().await?;
        let (mirror_peers, mirror_task) = starter.mirror_peers().await?;
        let controllers = Self {
            sets,
            placements,
            replicasets,
            addons,
            policies,
            service_accounts,
            import_policies,
            mirror_peers,
            stop,
            tasks: std::sync::Mutex::new(vec![dispatcher, import_task, mirror_task]),
        };
        // The add-on agents' subjects are served once subscribed at the server.
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut router = deps.router.clone();
        router.ready = Some(ready_tx);
        let routes = starter.routes(&controllers, router);
        controllers
            .tasks
            .lock()
            .expect("controller tasks lock")
            .extend(routes);
        let subscribed = tokio::time::timeout(Duration::from_secs(10), async {
            for _ in 0..3 {
                if ready_rx.recv().await.is_none() {
                    break;
                }
            }
        })
        .await;
        if subscribed.is_err() {
            tracing::warn!("add-on subscriptions not confirmed within 10 s; serving anyway");
        }
        services.fill(&controllers);
        tracing::info!(epoch = fence.epoch(), "controllers started");
        Ok(controllers)
    }

    /// Stops them (bounded) and empties `services`.
    pub async fn stop(&self, services: &Services) {
        services.empty();
        let _ = self.stop.send(true);
        self.replicasets.stop().await;
        self.addons.stop().await;
        self.policies.stop().await;
        self.service_accounts.stop().await;
        self.placements.join().await;
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("controller tasks lock"));
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        tracing::info!("controllers stopped");
    }
}

//! Fixtures for hub integration tests: a real nats-server, an in-process hub on free ports, and
//! in-process agents on simulated clusters.

#![allow(dead_code)]

pub mod addon;
pub mod addon_fleet;
pub mod hubproc;
pub mod kubectl;
pub mod policy;
pub mod raw_agent;
pub mod stores;
pub mod tokens;
pub mod work;

use flotilla_agent::backend::sim::SimBackend;
use flotilla_agent::{AgentConfig, StateConfig};
use flotilla_api::meta::{self, COND_AVAILABLE};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{
    GetClusterRequest, LabelClusterRequest, ManagedCluster, ManagedClusterSetBinding,
    ManagedClusterSetBindingSpec, ObjectMeta, PlacementRef,
};
use flotilla_hub::{Config, Hub};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tonic::transport::Channel;

/// Generous bound for anything that should happen "soon".
pub const SOON: Duration = Duration::from_secs(20);

pub fn hub_config(nats_url: &str) -> Config {
    let mut c = Config::new(nats_url);
    c.grpc_listen = "127.0.0.1:0".parse().unwrap();
    c.metrics_listen = "127.0.0.1:0".parse().unwrap();
    c.cluster.default_lease_duration_seconds = 1;
    c.cluster.lease_grace_multiplier = 3;
    c.router.ack_wait = Duration::from_secs(2);
    c.limits.stream.max_bytes = flotilla_testkit::STATUS_STREAM_MAX_BYTES;
    c
}

pub async fn start_hub(config: Config) -> Hub {
    // Logs for debugging a failing test: RUST_LOG=debug cargo test ...
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
    tokio::time::timeout(SOON, flotilla_hub::start(config))
        .await
        .expect("hub started in time")
        .expect("hub started")
}

pub async fn clusters_client(hub: &Hub) -> ClusterServiceClient<Channel> {
    ClusterServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .expect("connect to the hub's gRPC API")
}

pub async fn sets_client(hub: &Hub) -> ClusterSetServiceClient<Channel> {
    ClusterSetServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .expect("connect to the hub's gRPC API")
}

/// Binds cluster set `set` to `namespace`, so that placements there may select its clusters.
pub async fn bind_set(hub: &Hub, namespace: &str, set: &str) {
    sets_client(hub)
        .await
        .apply_binding(set_binding(namespace, set))
        .await
        .unwrap();
}

/// The ManagedClusterSetBinding of cluster set `set` to `namespace` (named after the set).
pub fn set_binding(namespace: &str, set: &str) -> ManagedClusterSetBinding {
    ManagedClusterSetBinding {
        metadata: Some(ObjectMeta {
            name: set.into(),
            namespace: namespace.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetBindingSpec {
            cluster_set: set.into(),
        }),
        status: None,
    }
}

/// Sets labels `set` and removes labels `remove` of `cluster`.
pub async fn label(hub: &Hub, cluster: &str, set: &[(&str, &str)], remove: &[&str]) {
    clusters_client(hub)
        .await
        .label_cluster(LabelClusterRequest {
            name: cluster.into(),
            set: set
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            remove: remove.iter().map(|s| s.to_string()).collect(),
        })
        .await
        .expect("label the cluster");
}

/// Every value of KV bucket `bucket`, raw, as NATS holds it.
pub async fn raw_values(
    nats: &flotilla_testkit::NatsServer,
    bucket: &str,
) -> Vec<(String, Vec<u8>)> {
    use futures::StreamExt;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let kv = js.get_key_value(bucket).await.unwrap();
    let keys: Vec<String> = kv
        .keys()
        .await
        .unwrap()
        .filter_map(|k| async { k.ok() })
        .collect()
        .await;
    let mut out = Vec::new();
    for k in keys {
        if let Some(v) = kv.get(&k).await.unwrap() {
            out.push((k, v.to_vec()));
        }
    }
    out
}

/// A running in-process agent.
pub struct TestAgent {
    pub backend: Arc<SimBackend>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestAgent {
    /// An agent task started elsewhere (another backend), stopped through `stop`.
    pub fn from_parts(
        backend: Arc<SimBackend>,
        stop: oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    ) -> Self {
        Self {
            backend,
            stop: Some(stop),
            task,
        }
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(SOON, &mut self.task).await;
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn agent_config(name: &str, nats_url: &str) -> AgentConfig {
    let mut c = AgentConfig::new(name, nats_url);
    c.pending_poll = Duration::from_millis(300);
    c.denied_poll = Duration::from_millis(500);
    c.status_interval = Duration::from_millis(200);
    c.work_status_interval = Duration::from_millis(200);
    c.resync_interval = Duration::from_secs(2);
    // Tests that want agent-reported scores set this (the simulated fleet does).
    c.score_interval = None;
    c.state = StateConfig::Memory;
    c
}

/// A simulated cluster whose workloads become ready after 300 ms.
pub fn sim_backend() -> Arc<SimBackend> {
    Arc::new(
        SimBackend::new(8, 32, "v1.30.2")
            .with_platform("AWS")
            .with_config(flotilla_agent::backend::sim::SimConfig {
                ready_delay: Duration::from_millis(300),
                ..Default::default()
            }),
    )
}

/// Starts an agent on an existing simulated cluster (to restart an agent on the same cluster).
pub fn start_agent_on(config: AgentConfig, backend: Arc<SimBackend>) -> TestAgent {
    let (tx, rx) = oneshot::channel();
    let b: Arc<dyn flotilla_agent::backend::Backend> = backend.clone();
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = rx.await;
        };
        if let Err(e) = flotilla_agent::run(config, b, shutdown).await {
            panic!("agent failed: {e}");
        }
    });
    TestAgent {
        backend,
        stop: Some(tx),
        task,
    }
}

pub fn start_agent(config: AgentConfig) -> TestAgent {
    start_agent_on(config, sim_backend())
}

pub async fn get(client: &mut ClusterServiceClient<Channel>, name: &str) -> Option<ManagedCluster> {
    client
        .get_cluster(GetClusterRequest { name: name.into() })
        .await
        .ok()
        .map(|r| r.into_inner())
}

pub fn available(c: &ManagedCluster) -> Option<String> {
    c.status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, COND_AVAILABLE))
        .map(str::to_string)
}

pub fn condition(c: &ManagedCluster, ty: &str) -> Option<String> {
    c.status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, ty))
        .map(str::to_string)
}

pub fn taints(c: &ManagedCluster) -> Vec<String> {
    c.spec
        .as_ref()
        .map(|s| s.taints.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

pub fn accepted(c: &ManagedCluster) -> bool {
    c.spec.as_ref().is_some_and(|s| s.hub_accepts_client)
}

/// Waits until the cluster satisfies `pred`, returning it.
pub async fn wait_cluster(
    client: &mut ClusterServiceClient<Channel>,
    name: &str,
    what: &str,
    pred: impl Fn(&ManagedCluster) -> bool,
) -> ManagedCluster {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let c = get(client, name).await;
        if let Some(c) = &c
            && pred(c)
        {
            return c.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for cluster {name} to be {what}; last seen: {c:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn accept(client: &mut ClusterServiceClient<Channel>, name: &str) {
    client
        .accept_clusters(flotilla_api::v1::ClusterNamesRequest {
            names: vec![name.into()],
            key: String::new(),
        })
        .await
        .expect("accept");
}

/// Starts an agent, accepts its cluster once it has registered, and waits until the cluster is
/// Available with no taints.
pub async fn accepted_agent(
    api: &mut ClusterServiceClient<Channel>,
    config: AgentConfig,
) -> TestAgent {
    accepted_agent_on(api, config, sim_backend()).await
}

/// [`accepted_agent`] on a given simulated cluster.
pub async fn accepted_agent_on(
    api: &mut ClusterServiceClient<Channel>,
    config: AgentConfig,
    backend: Arc<SimBackend>,
) -> TestAgent {
    let name = config.cluster_name.clone();
    let agent = start_agent_on(config, backend);
    wait_cluster(api, &name, "registered", |_| true).await;
    accept(api, &name).await;
    wait_available(api, &name).await;
    agent
}

/// An accepted, Available cluster `name` with default agent settings.
pub async fn accepted_cluster(
    api: &mut ClusterServiceClient<Channel>,
    nats_url: &str,
    name: &str,
) -> TestAgent {
    accepted_agent(api, agent_config(name, nats_url)).await
}

/// Accepted, Available clusters for `names` (agents started together, then accepted).
pub async fn accepted_fleet(
    api: &mut ClusterServiceClient<Channel>,
    nats_url: &str,
    names: &[&str],
) -> Vec<TestAgent> {
    let agents = names
        .iter()
        .map(|n| start_agent(agent_config(n, nats_url)))
        .collect();
    for n in names {
        wait_cluster(api, n, "registered", |_| true).await;
        accept(api, n).await;
    }
    for n in names {
        wait_available(api, n).await;
    }
    agents
}

/// Waits until the cluster is Available with no taints.
pub async fn wait_available(api: &mut ClusterServiceClient<Channel>, name: &str) -> ManagedCluster {
    wait_cluster(api, name, "Available", |c| {
        available(c).as_deref() == Some("True") && taints(c).is_empty()
    })
    .await
}

/// The clusters in every decision page of placement `namespace/name` (empty when none).
pub async fn decided_clusters(
    client: &mut PlacementServiceClient<Channel>,
    namespace: &str,
    name: &str,
) -> BTreeSet<String> {
    client
        .list_decisions(PlacementRef {
            namespace: namespace.into(),
            name: name.into(),
        })
        .await
        .map(|r| {
            r.into_inner()
                .items
                .iter()
                .flat_map(|d| d.status.clone().unwrap_or_default().decisions)
                .map(|c| c.cluster_name)
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until a metric line containing `needle` has a non-zero value.
pub async fn wait_metric(hub: &Hub, needle: &str) {
    let needle = needle.to_string();
    flotilla_testkit::eventually(SOON, &format!("metric {needle}"), || {
        let text = hub.metrics.render(&hub.inventory);
        let found = text
            .lines()
            .any(|l| l.contains(&needle) && !l.ends_with(" 0"));
        async move { found.then_some(()) }
    })
    .await;
}

pub async fn metrics_text(hub: &Hub) -> String {
    hub.metrics.render(&hub.inventory)
}

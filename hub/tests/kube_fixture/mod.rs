//! The Kubernetes backend tests' fixture: the cluster under test (the testkit's API server, or
//! a real cluster when `FLOTILLA_TEST_KUBECONFIG` names its kubeconfig), an agent with
//! `KubeBackend` on it, and a hub on a real nats-server with that agent accepted.

#![allow(dead_code)]

use crate::common::work::{cond, wait_gone, wait_work, works_client};
use crate::common::*;
use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_api::work::manifest_id;
use flotilla_testkit::NatsServer;
use flotilla_testkit::kube::FakeKube;
use serde_json::Value;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The cluster under test: the testkit's API server, or a real one.
pub enum Cluster {
    Fake(FakeKube),
    Real(PathBuf),
}

impl Cluster {
    /// The cluster, with the AppliedManifestWork CRD installed as `flotilla join` installs it.
    pub async fn start() -> Self {
        let cluster = match std::env::var_os("FLOTILLA_TEST_KUBECONFIG") {
            Some(path) => Self::Real(PathBuf::from(path)),
            None => Self::Fake(FakeKube::start().await),
        };
        let crd: Value =
            serde_yaml::from_str(include_str!("../../../deploy/appliedmanifestwork-crd.yaml"))
                .expect("the CRD parses");
        cluster.take_fields(&crd, "flotilla-test").await;
        let deadline = tokio::time::Instant::now() + SOON;
        let probe = anchor("probe");
        while cluster
            .client()
            .await
            .get(&manifest_id(&probe).unwrap())
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the CRD is not served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        cluster
    }

    /// The anchors (AppliedManifestWorks) owning an object.
    pub async fn owners(&self, object: &Value) -> Vec<String> {
        self.get(object).await.map_or_else(Vec::new, |o| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["kind"] == "AppliedManifestWork")
                .filter_map(|r| r["name"].as_str().map(str::to_string))
                .collect()
        })
    }

    pub fn kubeconfig(&self) -> PathBuf {
        match self {
            Self::Fake(f) => f.kubeconfig(),
            Self::Real(p) => p.clone(),
        }
    }

    pub fn fake(&self) -> Option<&FakeKube> {
        match self {
            Self::Fake(f) => Some(f),
            Self::Real(_) => None,
        }
    }

    pub async fn client(&self) -> KubeBackend {
        KubeBackend::connect(Some(&self.kubeconfig()))
            .await
            .expect("connect to the cluster under test")
    }

    pub async fn get(&self, object: &Value) -> Option<Value> {
        let id = manifest_id(object).unwrap();
        self.client().await.get(&id).await.expect("get")
    }

    /// Deletes an object behind the agent's back.
    pub async fn remove(&self, object: &Value) {
        let id = manifest_id(object).unwrap();
        self.client().await.delete(&id).await.expect("delete");
    }

    /// Another field manager takes fields of an object (server-side apply with force).
    pub async fn take_fields(&self, object: &Value, manager: &str) {
        let id = manifest_id(object).unwrap();
        let strategy = Strategy::ServerSideApply {
            force: true,
            field_manager: manager.into(),
        };
        self.client()
            .await
            .apply(&id, object, &strategy)
            .await
            .expect("apply as another manager");
    }
}

/// A namespace name of its own per run, so runs on a real cluster do not meet the previous
/// run's namespace while it terminates.
pub fn unique(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{n:x}")
}

pub fn anchor(name: &str) -> Value {
    json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "AppliedManifestWork", "metadata": {"name": name}})
}

pub fn deployment(ns: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns}})
}

pub fn config_map(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}})
}

pub async fn kube_agent(nats: &NatsServer, cluster: &Cluster, name: &str) -> TestAgent {
    kube_agent_with(agent_config(name, &nats.url()), cluster).await
}

/// An agent on the cluster with its own settings (a state directory, to restart it).
pub async fn kube_agent_with(config: flotilla_agent::AgentConfig, cluster: &Cluster) -> TestAgent {
    let backend = cluster.client().await;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let b: Arc<dyn flotilla_agent::backend::Backend> = Arc::new(backend);
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = rx.await;
        };
        if let Err(e) = flotilla_agent::run(config, b, shutdown).await {
            panic!("agent failed: {e}");
        }
    });
    TestAgent::from_parts(sim_backend(), tx, task)
}

pub type Works =
    flotilla_api::v1::work_service_client::WorkServiceClient<tonic::transport::Channel>;

/// Deletes work `name` of edge-1 and waits until the hub no longer has it.
pub async fn delete_work_and_wait(works: &mut Works, name: &str) {
    works
        .delete_work(flotilla_api::v1::DeleteWorkRequest {
            cluster: "edge-1".into(),
            name: name.into(),
        })
        .await
        .unwrap();
    wait_gone(works, "edge-1", name).await;
}

/// Waits until work `name` of edge-1 is Applied.
pub async fn wait_applied(works: &mut Works, name: &str) -> flotilla_api::v1::ManifestWork {
    wait_work(works, "edge-1", name, "applied", |w| {
        cond(w, "Applied").as_deref() == Some("True")
    })
    .await
}

/// A hub on a real nats-server, the cluster under test, and an accepted agent `edge-1` on it.
pub struct Setup {
    pub nats: NatsServer,
    pub cluster: Cluster,
    pub hub: flotilla_hub::Hub,
    pub agent: TestAgent,
    pub works: Works,
}

pub async fn setup() -> Setup {
    let nats = NatsServer::start();
    let cluster = Cluster::start().await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = kube_agent(&nats, &cluster, "edge-1").await;
    wait_cluster(&mut clusters, "edge-1", "registered", |_| true).await;
    accept(&mut clusters, "edge-1").await;
    wait_available(&mut clusters, "edge-1").await;
    let works = works_client(&hub).await;
    Setup {
        nats,
        cluster,
        hub,
        agent,
        works,
    }
}

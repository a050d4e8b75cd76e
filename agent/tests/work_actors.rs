//! The health of the works' actors on a spoke: an actor whose task died (a panic) or that is
//! stuck in one step would otherwise hold its work's generation for ever — the agent's resyncs
//! would claim it, the hub's re-sends would reach nobody, and the hub would never hear its
//! status. The manager's check, run on the agent's status tick, starts a dead actor again from
//! its saved record, reports a stalled one once, and restarts it when it stays stuck.
//!
//! Fed spec events directly (no hub), on a simulated cluster whose applies can be made to panic
//! or hang, against a real `nats-server` holding the status stream.

use flotilla_agent::backend::sim::SimBackend;
use flotilla_agent::backend::{ApplyOutcome, Backend, BackendError, ClusterInfo, Strategy};
use flotilla_agent::metrics::AgentMetrics;
use flotilla_agent::store::LocalStore;
use flotilla_agent::work::{Publisher, WorkConfig, WorkManager};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::{ManifestWork, WorkStatusReport};
use flotilla_api::work::ManifestId;
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::works;
use flotilla_testkit::NatsServer;

mod common;
use futures::StreamExt;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLUSTER: &str = "edge-1";
const WORK: &str = "app";
const MAX: usize = 1 << 20;
const SOON: Duration = Duration::from_secs(20);

/// What the next applies do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trap {
    None,
    Panic,
    Hang,
}

/// A simulated cluster whose applies can be made to panic or never return.
struct Trapped {
    inner: SimBackend,
    trap: Mutex<Trap>,
}

impl Trapped {
    fn set(&self, trap: Trap) {
        *self.trap.lock().expect("trap lock") = trap;
    }
}

#[async_trait::async_trait]
impl Backend for Trapped {
    async fn info(&self) -> ClusterInfo {
        self.inner.info().await
    }

    async fn apply(
        &self,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        let trap = *self.trap.lock().expect("trap lock");
        match trap {
            Trap::Panic => panic!("the backend panicked applying {}", id.describe()),
            Trap::Hang => std::future::pending().await,
            Trap::None => self.inner.apply(id, object, strategy).await,
        }
    }

    async fn get(&self, id: &ManifestId) -> Result<Option<Value>, BackendError> {
        self.inner.get(id).await
    }

    async fn delete(&self, id: &ManifestId) -> Result<bool, BackendError> {
        self.inner.delete(id).await
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>, BackendError> {
        self.inner.list(kind, namespace).await
    }
}

/// A spoke's work execution, fed spec events directly, with the reports it publishes.
struct Spoke {
    _nats: NatsServer,
    backend: Arc<Trapped>,
    manager: WorkManager,
    metrics: Arc<AgentMetrics>,
    reports: async_nats::Subscriber,
}

impl Spoke {
    async fn start(stall_after: Duration) -> Self {
        let common::StatusFeed { nats, js, reports } = common::status_feed().await;
        let backend = Arc::new(Trapped {
            inner: SimBackend::new(4, 16, "v1.32.0"),
            trap: Mutex::new(Trap::None),
        });
        let store = Arc::new(LocalStore::memory(CLUSTER));
        let config = WorkConfig {
            status_interval: Duration::from_millis(200),
            stall_after,
            ..WorkConfig::default()
        };
        let metrics = config.metrics.clone();
        let publisher = Publisher::new(&js, None, store.clone(), CLUSTER, MAX, metrics.clone());
        let manager = WorkManager::start(CLUSTER, backend.clone(), store, publisher, config)
            .expect("work manager");
        Self {
            _nats: nats,
            backend,
            manager,
            metrics,
            reports,
        }
    }

    /// Sends the hub's spec event for generation `generation` of the work.
    async fn spec(&mut self, generation: i64) {
        let work = work(generation);
        let event = Event::new(
            works::spec_type(Action::UpdateRequest),
            "flotilla-hub",
            CLUSTER,
            &work,
        )
        .with_resource_id(rid())
        .with_resource_version(generation);
        self.manager.on_spec(&event).await;
    }

    /// Waits for a status report of generation `generation`.
    async fn report(&mut self, generation: i64) -> WorkStatusReport {
        let wait = async {
            while let Some(msg) = self.reports.next().await {
                let report: WorkStatusReport = Event::decode(&msg.payload, MAX)
                    .and_then(|e| e.decode_data("WorkStatusReport"))
                    .expect("a status report");
                if report.observed_generation == generation {
                    return report;
                }
            }
            panic!("the status subscription ended");
        };
        tokio::time::timeout(SOON, wait)
            .await
            .unwrap_or_else(|_| panic!("no status report of generation {generation}"))
    }

    /// The generation the agent's resync would claim for the work.
    fn claimed(&self) -> Option<i64> {
        self.manager.versions().get(&rid()).copied()
    }

    /// Waits until the resync no longer claims the work.
    async fn until_unclaimed(&self) {
        let deadline = tokio::time::Instant::now() + SOON;
        while self.claimed().is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the dead actor's work is still claimed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn metric(&self, name: &str) -> String {
        let text = self.metrics.render();
        text.lines()
            .find(|l| l.starts_with(&format!("flotilla_agent_{name}_total ")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .rsplit(' ')
            .next()
            .expect("a value")
            .to_string()
    }
}

fn rid() -> String {
    works::resource_id(CLUSTER, WORK)
}

/// The work at `generation`: one ConfigMap whose value is the generation.
fn work(generation: i64) -> ManifestWork {
    let doc = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
         metadata: {{namespace: {CLUSTER}, name: {WORK}}}\nspec:\n  workload:\n    manifests:\n\
         \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: default}}, data: {{generation: \"{generation}\"}}}}\n"
    );
    let mut w = match parse_documents(&doc).remove(0) {
        Ok(Document::Work(w)) => w,
        other => panic!("not a work: {other:?}"),
    };
    if let Some(m) = w.metadata.as_mut() {
        m.generation = generation;
    }
    w
}

/// An actor that panicked is not claimed by the resync (so the hub re-sends its work), and the
/// health check starts it again from its record: the re-sent spec is then applied and reported.
#[tokio::test]
async fn a_work_whose_actor_died_is_unclaimed_and_started_again_from_its_record() {
    let mut spoke = Spoke::start(Duration::from_secs(60)).await;
    spoke.spec(1).await;
    spoke.report(1).await;
    assert_eq!(spoke.claimed(), Some(1));

    spoke.backend.set(Trap::Panic);
    spoke.spec(2).await;
    spoke.until_unclaimed().await;

    spoke.backend.set(Trap::None);
    spoke.manager.check_actors();
    assert_eq!(spoke.metric("work_actor_restarts"), "1");
    assert_eq!(
        spoke.claimed(),
        Some(1),
        "started again from its record, which holds the generation applied before"
    );
    // The hub re-sends what the resync showed missing.
    spoke.spec(2).await;
    let report = spoke.report(2).await;
    assert!(!report.deleted);
    assert_eq!(spoke.claimed(), Some(2));
}

/// An actor stuck in its backend is reported once, and stopped and started again from its
/// record when it stays stuck; the re-sent spec is then applied and reported.
#[tokio::test]
async fn a_work_actor_stuck_in_its_backend_is_reported_once_then_restarted() {
    let stall_after = Duration::from_millis(300);
    let mut spoke = Spoke::start(stall_after).await;
    spoke.spec(1).await;
    spoke.report(1).await;

    spoke.backend.set(Trap::Hang);
    spoke.spec(2).await;
    tokio::time::sleep(stall_after * 2).await;
    spoke.manager.check_actors();
    spoke.manager.check_actors();
    assert_eq!(
        spoke.metric("work_actor_stalls"),
        "1",
        "one stall, reported once"
    );
    assert_eq!(
        spoke.metric("work_actor_restarts"),
        "0",
        "not yet restarted"
    );

    spoke.backend.set(Trap::None);
    tokio::time::sleep(stall_after * flotilla_agent::work::STALL_RESTART_FACTOR).await;
    spoke.manager.check_actors();
    assert_eq!(spoke.metric("work_actor_restarts"), "1");
    assert_eq!(spoke.metric("work_actor_stalls"), "1");
    spoke.spec(2).await;
    spoke.report(2).await;
    assert_eq!(spoke.claimed(), Some(2));
    // The stuck task was stopped: one work is held, not two.
    assert!(
        spoke.metrics.render().contains("flotilla_agent_works 1\n"),
        "{}",
        spoke.metrics.render()
    );
}

//! The example add-on `fleet-metrics`: an add-on agent that tells the hub it is alive and how big
//! its cluster is.
//!
//! Every `interval` the reporter publishes, over core NATS (not the status stream: a lost message
//! is made good by the next one):
//! - an `AddOnLeaseRenewal` (`renew_time` = now) on `flotilla.addon.<addon>.<cluster>.lease`,
//!   which keeps the add-on Available under the hub's `Lease` health check;
//! - an `AddOnPlacementScoreReport` named [`SCORE_NAME`] on `flotilla.addon.<addon>.<cluster>.score`
//!   with two scores, normalised with OCM's formula `200 × (x − min)/(max − min) − 100`, clamped
//!   to [-100, 100] ([`crate::scores::normalise`]):
//!   - [`NODE_COUNT`]: the cluster's nodes, 0 → -100 … [`MAX_NODES`] (100) or more → 100;
//!   - [`WORK_COUNT`]: the ManifestWorks applied on it, 0 → -100 … [`MAX_WORKS`] (500) or more →
//!     100 — a busier cluster scores higher, so a placement that prefers quiet clusters gives
//!     this score a negative weight;
//!
//!   valid until now + 3 × interval, so a silent add-on's scores expire. A count its [`Source`]
//!   cannot tell is left out of the report (a report with no scores is still sent: it says the
//!   add-on runs).
//!
//! The counts come from a [`Source`]: [`AgentSource`] on a simulated cluster (the backend's node
//! count, the works the agent holds), [`KubeSource`] in the `flotilla-addon-fleet-metrics` binary
//! (the `nodes` and `appliedmanifestworks.work.open-cluster-management.io` of the cluster).

use crate::backend::Backend;
use crate::store::LocalStore;
use flotilla_api::v1::{AddOnLeaseRenewal, AddOnPlacementScoreItem};
use flotilla_bus::addons;
use flotilla_bus::envelope::Event;
use flotilla_bus::publish::{PublishError, Publisher};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The add-on's default name.
pub const ADDON_NAME: &str = "fleet-metrics";
/// Name of the AddOnPlacementScore the add-on reports.
pub const SCORE_NAME: &str = "fleet-metrics";
/// Score of the cluster's node count.
pub const NODE_COUNT: &str = "nodeCount";
/// Score of the number of ManifestWorks applied on the cluster.
pub const WORK_COUNT: &str = "workCount";
/// Nodes that normalise to 100 (0 nodes is -100).
pub const MAX_NODES: f64 = 100.0;
/// ManifestWorks that normalise to 100 (0 works is -100).
pub const MAX_WORKS: f64 = 500.0;
/// The default report interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// How long a publish may wait for the client (a disconnected client with a full buffer) before
/// the report is given up; the next one follows an interval later.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the reporter's counts come from.
#[async_trait::async_trait]
pub trait Source: Send + Sync + 'static {
    /// Nodes of the cluster; `None` when unknown (the score is left out).
    async fn node_count(&self) -> Option<u32>;
    /// ManifestWorks applied on the cluster; `None` when unknown (the score is left out).
    async fn work_count(&self) -> Option<u32>;
}

/// The scores of a cluster with `nodes` nodes and `works` ManifestWorks (unknown counts are left
/// out).
pub fn scores(nodes: Option<u32>, works: Option<u32>) -> Vec<AddOnPlacementScoreItem> {
    [
        (NODE_COUNT, nodes, MAX_NODES),
        (WORK_COUNT, works, MAX_WORKS),
    ]
    .into_iter()
    .filter_map(|(name, count, max)| {
        count.map(|n| AddOnPlacementScoreItem {
            name: name.into(),
            value: crate::scores::normalise(f64::from(n), 0.0, max),
        })
    })
    .collect()
}

/// What one reporter reports as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReporterConfig {
    /// The add-on (the subject's `<addon>` token, the renewal's `addon_name`).
    pub addon_name: String,
    /// The cluster the add-on runs on.
    pub cluster_name: String,
    /// Time between reports (at least 1 s); scores are valid for three intervals.
    pub interval: Duration,
    /// Name of the AddOnPlacementScore ([`SCORE_NAME`]).
    pub score_name: String,
    /// Largest event sent.
    pub max_event_bytes: usize,
}

impl ReporterConfig {
    /// A reporter of `addon_name` on `cluster_name` every `interval`.
    pub fn new(addon_name: &str, cluster_name: &str, interval: Duration) -> Self {
        Self {
            addon_name: addon_name.to_string(),
            cluster_name: cluster_name.to_string(),
            interval: interval.max(Duration::from_secs(1)),
            score_name: SCORE_NAME.to_string(),
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
        }
    }

    /// The events' `source`: `flotilla-addon/<addon>/<cluster>`.
    pub fn source(&self) -> String {
        format!("flotilla-addon/{}/{}", self.addon_name, self.cluster_name)
    }
}

/// The fleet-metrics reporter of one add-on on one cluster.
pub struct Reporter {
    config: ReporterConfig,
    publisher: Publisher,
    source: Arc<dyn Source>,
    last_sequence: u64,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why a report was not sent.
#[derive(Debug, thiserror::Error)]
#[error("publishing the {what}: {source}")]
pub struct ReportError {
    /// Which event (`lease renewal`, `score report`).
    pub what: &'static str,
    /// Why: too large, refused by the client, or not taken in time (a disconnected client
    /// with a full buffer).
    #[source]
    pub source: PublishError,
}

impl Reporter {
    /// A reporter publishing with `client`, counting with `source`.
    pub fn new(
        config: ReporterConfig,
        client: async_nats::Client,
        source: Arc<dyn Source>,
    ) -> Self {
        let publisher = Publisher::new(client, config.max_event_bytes, PUBLISH_TIMEOUT);
        Self {
            config,
            publisher,
            source,
            last_sequence: 0,
        }
    }

    /// The reporter's settings.
    pub fn config(&self) -> &ReporterConfig {
        &self.config
    }

    /// The next `sequenceid`: strictly increasing, never below the wall clock in microseconds
    /// (a restarted add-on still sorts after its earlier events).
    fn next_sequence(&mut self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.last_sequence = (self.last_sequence + 1).max(now);
        self.last_sequence
    }

    /// The lease renewal event at `now`.
    pub fn lease_event(&mut self, now: SystemTime) -> Event {
        let renewal = AddOnLeaseRenewal {
            cluster_name: self.config.cluster_name.clone(),
            addon_name: self.config.addon_name.clone(),
            renew_time: Some(flotilla_api::meta::timestamp(now)),
        };
        let seq = self.next_sequence();
        Event::new(
            addons::lease_type(),
            self.config.source(),
            &self.config.cluster_name,
            &renewal,
        )
        .with_sequence(seq)
    }

    /// The score report event at `now` for these counts.
    pub fn score_event(
        &mut self,
        now: SystemTime,
        nodes: Option<u32>,
        works: Option<u32>,
    ) -> Event {
        let seq = self.next_sequence();
        crate::scores::report_event(
            &self.config.source(),
            &self.config.cluster_name,
            &self.config.score_name,
            scores(nodes, works),
            now + self.config.interval * 3,
            seq,
        )
    }

    async fn publish(&self, what: &'static str, kind: &str, ev: &Event) -> Result<(), ReportError> {
        let subject = addons::subject(&self.config.addon_name, &self.config.cluster_name, kind);
        self.publisher
            .publish(subject, ev)
            .await
            .map_err(|source| ReportError { what, source })
    }

    /// Publishes one lease renewal and one score report (both are tried).
    pub async fn report_once(&mut self) -> Result<(), ReportError> {
        let now = SystemTime::now();
        let lease = self.lease_event(now);
        let leased = self
            .publish("lease renewal", addons::KIND_LEASE, &lease)
            .await;
        let (nodes, works) = tokio::join!(self.source.node_count(), self.source.work_count());
        let report = self.score_event(now, nodes, works);
        let scored = self
            .publish("score report", addons::KIND_SCORE, &report)
            .await;
        leased.and(scored)
    }

    /// Reports now and then every interval, for ever (drop or abort the task to stop).
    pub async fn run(mut self) {
        let mut ticks = tokio::time::interval(self.config.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!(
            addon = %self.config.addon_name,
            cluster = %self.config.cluster_name,
            interval_s = self.config.interval.as_secs(),
            "fleet-metrics reporter started"
        );
        loop {
            ticks.tick().await;
            if let Err(e) = self.report_once().await {
                tracing::debug!(
                    addon = %self.config.addon_name,
                    cluster = %self.config.cluster_name,
                    error = %e,
                    "fleet-metrics report not sent; the next one follows"
                );
            }
        }
    }

    /// Runs the reporter on a task of its own; the handle stops it when dropped.
    pub fn spawn(self) -> ReporterHandle {
        ReporterHandle(tokio::spawn(self.run()))
    }
}

/// A running reporter (or any add-on task): stops it when dropped.
#[derive(Debug)]
pub struct ReporterHandle(tokio::task::JoinHandle<()>);

impl ReporterHandle {
    /// Wraps a task that is aborted when the handle is dropped.
    pub fn new(task: tokio::task::JoinHandle<()>) -> Self {
        Self(task)
    }

    /// Stops the task.
    pub fn stop(self) {}

    /// Whether the task ended (it only does when stopped or on a panic).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for ReporterHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The counts of a simulated cluster: the backend's node count ([`crate::backend::ClusterInfo`]
/// `nodes`) and the works the agent holds in its store.
pub struct AgentSource {
    backend: Arc<dyn Backend>,
    store: Arc<LocalStore>,
}

impl AgentSource {
    /// Counts from `backend` and `store`.
    pub fn new(backend: Arc<dyn Backend>, store: Arc<LocalStore>) -> Self {
        Self { backend, store }
    }
}

#[async_trait::async_trait]
impl Source for AgentSource {
    async fn node_count(&self) -> Option<u32> {
        self.backend.info().await.nodes
    }

    async fn work_count(&self) -> Option<u32> {
        u32::try_from(self.store.work_count()).ok()
    }
}

/// The counts of a real cluster, from its Kubernetes API: `nodes` and
/// `appliedmanifestworks.work.open-cluster-management.io` (the anchors the agent makes for the
/// works it applied; a cluster without that CRD has no work count).
pub struct KubeSource {
    client: kube::Client,
}

impl KubeSource {
    /// Connects with `kubeconfig`, or `KUBECONFIG`/`~/.kube/config`/in-cluster config when
    /// `None` (as the agent's Kubernetes backend does).
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, String> {
        let config = crate::backend::kube::client_config(kubeconfig).await?;
        let client =
            kube::Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))?;
        Ok(Self { client })
    }

    /// Counts with an existing client.
    pub fn with_client(client: kube::Client) -> Self {
        Self { client }
    }

    async fn count(&self, resource: &kube::discovery::ApiResource) -> Option<u32> {
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(self.client.clone(), resource);
        match api.list_metadata(&kube::api::ListParams::default()).await {
            Ok(list) => u32::try_from(list.items.len()).ok(),
            Err(e) => {
                tracing::debug!(resource = %resource.plural, error = %e, "counting failed");
                None
            }
        }
    }
}

#[async_trait::async_trait]
impl Source for KubeSource {
    async fn node_count(&self) -> Option<u32> {
        self.count(&kube::discovery::ApiResource::erase::<
            k8s_openapi::api::core::v1::Node,
        >(&()))
            .await
    }

    async fn work_count(&self) -> Option<u32> {
        self.count(&kube::discovery::ApiResource {
            group: "work.open-cluster-management.io".into(),
            version: "v1".into(),
            api_version: crate::backend::kube::ANCHOR_API_VERSION.into(),
            kind: crate::backend::kube::ANCHOR_KIND.into(),
            plural: "appliedmanifestworks".into(),
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::AddOnPlacementScoreReport;

    #[test]
    fn counts_are_normalised_with_ocms_formula() {
        let s = scores(Some(3), Some(25));
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].name.as_str(), s[0].value), (NODE_COUNT, -94));
        assert_eq!((s[1].name.as_str(), s[1].value), (WORK_COUNT, -90));
        let edges = scores(Some(0), Some(250));
        assert_eq!(edges[0].value, -100);
        assert_eq!(edges[1].value, 0);
        let full = scores(Some(100), Some(10_000));
        assert_eq!((full[0].value, full[1].value), (100, 100));
        // Unknown counts are left out.
        let only_works = scores(None, Some(500));
        assert_eq!(only_works.len(), 1);
        assert_eq!(only_works[0].name, WORK_COUNT);
        assert!(scores(None, None).is_empty());
    }

    #[tokio::test]
    async fn events_carry_the_renewal_and_the_report() {
        // A client that never connects: only the events are built here.
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("nats://127.0.0.1:1")
            .await
            .unwrap();
        struct Fixed;
        #[async_trait::async_trait]
        impl Source for Fixed {
            async fn node_count(&self) -> Option<u32> {
                Some(3)
            }
            async fn work_count(&self) -> Option<u32> {
                Some(1)
            }
        }
        let config = ReporterConfig::new("fleet-metrics", "edge-1", Duration::from_secs(30));
        assert_eq!(config.source(), "flotilla-addon/fleet-metrics/edge-1");
        let mut r = Reporter::new(config, client, Arc::new(Fixed));
        let now = SystemTime::now();
        let lease = r.lease_event(now);
        assert_eq!(lease.event_type, addons::lease_type());
        assert_eq!(lease.cluster, "edge-1");
        let renewal: AddOnLeaseRenewal = lease.decode_data("AddOnLeaseRenewal").unwrap();
        assert_eq!(renewal.cluster_name, "edge-1");
        assert_eq!(renewal.addon_name, "fleet-metrics");
        assert_eq!(renewal.renew_time, Some(flotilla_api::meta::timestamp(now)));
        let report = r.score_event(now, Some(3), Some(1));
        assert_eq!(report.event_type, flotilla_bus::scores::report_type());
        assert!(report.sequence_id > lease.sequence_id);
        assert_eq!(
            report.resource_id.as_deref(),
            Some(flotilla_bus::scores::resource_id("edge-1", SCORE_NAME).as_str())
        );
        let body: AddOnPlacementScoreReport =
            report.decode_data("AddOnPlacementScoreReport").unwrap();
        assert_eq!(body.resource_name, SCORE_NAME);
        assert_eq!(body.cluster_name, "edge-1");
        assert_eq!(body.scores, scores(Some(3), Some(1)));
        assert_eq!(
            body.valid_until,
            Some(flotilla_api::meta::timestamp(now + Duration::from_secs(90)))
        );
        // Events round-trip through the wire encoding.
        let bytes = report.encode(1 << 20).unwrap();
        assert_eq!(Event::decode(&bytes, 1 << 20).unwrap(), report);
    }

    #[test]
    fn the_interval_is_at_least_a_second() {
        let c = ReporterConfig::new("a", "c", Duration::ZERO);
        assert_eq!(c.interval, Duration::from_secs(1));
    }
}

//! AddOnPlacementScores: one actor owns them (KV bucket `scores`, key
//! `<cluster>.<resourceName>`), publishes every stored change to a [`ScoreInventory`] that the
//! placement dispatcher reads, and takes writes from the API (request/reply) and from agents
//! (routed status events, `try_send`, acknowledged once stored).
//!
//! Scores are status, so an agent's report replaces the object's scores and `validUntil`
//! wholesale. A report that changes nothing is acknowledged without a write. Scores of a cluster
//! that is deleted are purged with it, like OCM's cluster namespace.
//!
//! Agents' reports are written pipelined: up to [`MAX_WRITES_IN_FLIGHT`] KV writes at once,
//! one at a time per score (a report for a score whose write is in flight waits, and a newer
//! one replaces it — the older is acknowledged, it is superseded). A fleet that reports at once
//! (every agent starts its score timer at registration) is then bounded by the KV's throughput,
//! not by one write's round trip; before, one write at a time left the mailbox full and
//! JetStream redelivering thousands of reports at 10,000 clusters. API writes and purges wait
//! for the writes in flight, so they always see the newest stored revision.

use crate::inventory::{ChangeKind, ClusterInventory, Inventory};
use crate::keys::ObjectRef;
use crate::placement::metrics::PlacementMetrics;
use crate::store::{Bucket, StoreError};
use flotilla_api::names;
use flotilla_api::v1::{AddOnPlacementScore, AddOnPlacementScoreReport, ObjectMeta};
use std::collections::{BTreeMap, HashMap, HashSet};
use thiserror::Error;
use tokio::sync::{broadcast::error::RecvError, mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

/// Most agent score writes the actor has in flight at once.
pub const MAX_WRITES_IN_FLIGHT: usize = 128;

/// Every AddOnPlacementScore, keyed `<cluster>/<resourceName>`.
pub type ScoreInventory = Inventory<AddOnPlacementScore>;

/// Why a score operation failed.
#[derive(Debug, Error)]
pub enum ScoreError {
    /// Invalid input; names the field.
    #[error(transparent)]
    Invalid(#[from] InvalidScore),
    /// No such score or cluster.
    #[error("{0} not found")]
    NotFound(String),
    /// Storage failed; nothing changed.
    #[error("storing the score failed: {0}")]
    Unavailable(#[from] StoreError),
    /// The score actor has stopped (the hub is shutting down).
    #[error("the score store has stopped")]
    Gone,
}

/// What is wrong with a score (an object or an agent's report); every message starts with the
/// field (`status.scores[1].name`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidScore {
    /// A resource name that breaks the Kubernetes rules.
    #[error(transparent)]
    Name(#[from] names::NameError),
    /// A namespace that is not a cluster's name.
    #[error("{0} (the namespace of an AddOnPlacementScore is its cluster)")]
    Namespace(#[source] names::NameError),
    /// A score's name is empty or too long.
    #[error("status.scores[{index}].name: must be 1 to 253 characters (got {name:?})")]
    ScoreName {
        /// The score's index.
        index: usize,
        /// Its name.
        name: String,
    },
    /// A score named twice.
    #[error("status.scores[{index}].name: {name:?} appears twice")]
    Twice {
        /// The second score's index.
        index: usize,
        /// Its name.
        name: String,
    },
    /// A value out of [-100, 100].
    #[error(
        "status.scores[{index}].value: must be in [-100, 100] (got {value}); normalise raw \
         values as 200 × (x − min)/(max − min) − 100"
    )]
    Value {
        /// The score's index.
        index: usize,
        /// Its value.
        value: i32,
    },
}

/// The text of a refusal: a refused report's reply and log carry the message only.
impl From<InvalidScore> for String {
    fn from(e: InvalidScore) -> Self {
        e.to_string()
    }
}

/// Checks a score object: cluster and resource names, score names, values in [-100, 100].
pub fn validate(s: &AddOnPlacementScore) -> Result<(), InvalidScore> {
    let m = s.metadata.clone().unwrap_or_default();
    names::validate_dns1123_label("metadata.namespace", &m.namespace)
        .map_err(InvalidScore::Namespace)?;
    names::validate_dns1123_subdomain("metadata.name", &m.name)?;
    let st = s.status.clone().unwrap_or_default();
    validate_items(&st.scores)
}

fn validate_items(items: &[flotilla_api::v1::AddOnPlacementScoreItem]) -> Result<(), InvalidScore> {
    let mut seen = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        if item.name.is_empty() || item.name.len() > 253 {
            return Err(InvalidScore::ScoreName {
                index,
                name: item.name.clone(),
            });
        }
        if !seen.insert(item.name.as_str()) {
            return Err(InvalidScore::Twice {
                index,
                name: item.name.clone(),
            });
        }
        if !(-100..=100).contains(&item.value) {
            return Err(InvalidScore::Value {
                index,
                value: item.value,
            });
        }
    }
    Ok(())
}

/// Checks an agent's report against the cluster it came from.
pub fn validate_report(r: &AddOnPlacementScoreReport) -> Result<(), InvalidScore> {
    names::validate_dns1123_subdomain("resourceName", &r.resource_name)?;
    validate_items(&r.scores)
}

/// A score report from an agent, with the stream message to acknowledge once stored.
#[derive(Debug)]
pub struct ScoreReport {
    /// The report (already validated by the router).
    pub report: AddOnPlacementScoreReport,
    /// The event's `sequenceid`: older reports for the same score are dropped.
    pub sequence: Option<u64>,
    /// Settled once the score is stored (or found unchanged).
    pub ack: Option<crate::report::Ack>,
}

type Reply<T> = oneshot::Sender<Result<T, ScoreError>>;

enum Msg {
    Apply {
        score: Box<AddOnPlacementScore>,
        respond_to: Reply<AddOnPlacementScore>,
    },
    Delete {
        cluster: String,
        name: String,
        respond_to: Reply<()>,
    },
    Report(Box<ScoreReport>),
}

/// Handle to the score actor; cloneable, cheap.
#[derive(Clone)]
pub struct Scores {
    tx: mpsc::Sender<Msg>,
    inventory: ScoreInventory,
}

impl std::fmt::Debug for Scores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scores")
            .field("scores", &self.inventory.len())
            .finish()
    }
}

impl Scores {
    /// Loads the bucket into the inventory and spawns the actor (it ends on `shutdown` or when
    /// every handle is dropped).
    pub async fn load(
        bucket: Bucket<AddOnPlacementScore>,
        clusters: ClusterInventory,
        metrics: PlacementMetrics,
        mailbox: usize,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Self, StoreError> {
        let inventory = ScoreInventory::new(16_384);
        let mut revisions = HashMap::new();
        for (_, mut s, rev) in bucket.load_all().await? {
            let m = s.metadata.get_or_insert_with(Default::default);
            m.resource_version = rev;
            let key = ObjectRef::new(m.namespace.as_str(), m.name.as_str()).inventory_key();
            revisions.insert(key.clone(), rev);
            inventory.upsert(&key, s);
        }
        let (tx, rx) = mpsc::channel(mailbox.max(1));
        let actor = Actor {
            bucket,
            inventory: inventory.clone(),
            revisions,
            sequences: HashMap::new(),
            writes: JoinSet::new(),
            in_flight: HashMap::new(),
            clusters,
            metrics,
            rx,
            shutdown,
        };
        tokio::spawn(actor.run().instrument(tracing::info_span!("scores")));
        Ok(Self { tx, inventory })
    }

    /// The read view of every score.
    pub fn inventory(&self) -> &ScoreInventory {
        &self.inventory
    }

    /// Scores of one cluster (every cluster when empty), sorted.
    pub fn list(&self, cluster: &str) -> Vec<AddOnPlacementScore> {
        let prefix = ObjectRef::prefix(cluster);
        self.inventory
            .with_prefix(&prefix)
            .into_iter()
            .map(|(_, s)| (*s).clone())
            .collect()
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T, ScoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(|_| ScoreError::Gone)?;
        rx.await.map_err(|_| ScoreError::Gone)?
    }

    /// Creates or replaces a score (the cluster must exist).
    pub async fn apply(
        &self,
        score: AddOnPlacementScore,
    ) -> Result<AddOnPlacementScore, ScoreError> {
        validate(&score)?;
        self.call(|respond_to| Msg::Apply {
            score: Box::new(score),
            respond_to,
        })
        .await
    }

    /// Deletes a score.
    pub async fn delete(&self, cluster: &str, name: &str) -> Result<(), ScoreError> {
        self.call(|respond_to| Msg::Delete {
            cluster: cluster.to_string(),
            name: name.to_string(),
            respond_to,
        })
        .await
    }

    /// Hands an agent's report to the actor without waiting; a full mailbox gives it back (the
    /// taker counts the drop and hands the report back for redelivery).
    pub fn try_report(&self, report: ScoreReport) -> Result<(), Box<ScoreReport>> {
        self.tx
            .try_send(Msg::Report(Box::new(report)))
            .map_err(|e| match e.into_inner() {
                Msg::Report(r) => r,
                _ => unreachable!("only reports are try_sent"),
            })
    }
}

struct Actor {
    bucket: Bucket<AddOnPlacementScore>,
    inventory: ScoreInventory,
    /// KV revision per inventory key.
    revisions: HashMap<String, u64>,
    /// Last applied agent `sequenceid` per inventory key (in memory: the stream keeps one
    /// message per subject, so a restart replays at most the latest report).
    sequences: HashMap<String, u64>,
    /// Agent score writes in flight.
    writes: JoinSet<Written>,
    /// Inventory keys with a write in flight, each with the report that waits for it.
    in_flight: HashMap<String, Option<ScoreReport>>,
    clusters: ClusterInventory,
    metrics: PlacementMetrics,
    rx: mpsc::Receiver<Msg>,
    shutdown: watch::Receiver<bool>,
}

impl Actor {
    async fn run(mut self) {
        let mut cluster_changes = self.clusters.subscribe();
        // Scores of clusters deleted while the hub was down.
        self.purge_orphans().await;
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => break,
                Some(done) = self.writes.join_next(), if !self.writes.is_empty() => {
                    self.written(done).await;
                }
                msg = self.rx.recv(), if self.writes.len() < MAX_WRITES_IN_FLIGHT => match msg {
                    None => break,
                    Some(Msg::Apply { score, respond_to }) => {
                        self.drain().await;
                        let _ = respond_to.send(self.apply(*score).await);
                    }
                    Some(Msg::Delete { cluster, name, respond_to }) => {
                        self.drain().await;
                        let _ = respond_to.send(self.delete(&cluster, &name).await);
                    }
                    Some(Msg::Report(r)) => self.report(*r).await,
                },
                change = cluster_changes.recv() => match change {
                    Ok(c) if c.kind == ChangeKind::Deleted => {
                        self.drain().await;
                        self.purge_cluster(&c.key).await;
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => {
                        self.drain().await;
                        self.purge_orphans().await;
                    }
                    Err(RecvError::Closed) => break,
                },
            }
        }
        // Writes in flight finish (and are acknowledged) before the actor ends.
        self.drain().await;
    }

    /// Waits for every write in flight, and for the reports waiting behind them.
    async fn drain(&mut self) {
        while let Some(done) = self.writes.join_next().await {
            self.written(done).await;
        }
    }

    /// Adopts a finished write; starts the report that waited for it.
    async fn written(&mut self, done: Result<Written, tokio::task::JoinError>) {
        let Written {
            key,
            score,
            result,
            ack,
        } = match done {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "a score write task failed");
                return;
            }
        };
        match result {
            Ok(rev) => {
                let mut score = score;
                if let Some(m) = score.metadata.as_mut() {
                    m.resource_version = rev;
                }
                self.revisions.insert(key.clone(), rev);
                self.inventory.upsert(&key, score);
                self.metrics.score_updates.inc();
                ack_message(ack).await;
            }
            // Handed back: delivered again after a back-off.
            Err(e) => {
                self.sequences.remove(&key);
                tracing::warn!(error = %e, score = %key, "storing a reported score failed");
                crate::report::settle(ack, crate::report::Outcome::Retry).await;
            }
        }
        if let Some(Some(next)) = self.in_flight.remove(&key) {
            self.report(next).await;
        }
    }

    async fn store(
        &mut self,
        key: &str,
        mut score: AddOnPlacementScore,
    ) -> Result<AddOnPlacementScore, ScoreError> {
        let m = score.metadata.get_or_insert_with(Default::default);
        let (cluster, name) = (m.namespace.clone(), m.name.clone());
        let existing = self.inventory.get(key);
        match &existing {
            Some(old) => {
                let om = old.metadata.clone().unwrap_or_default();
                crate::identity::keep(m, &om, false);
            }
            None => {
                crate::identity::create(m);
            }
        }
        m.resource_version = 0;
        let expected = self.revisions.get(key).copied().unwrap_or(0);
        let store_key = ObjectRef::new(cluster.as_str(), name.as_str()).store_key();
        let rev = write_or_take_over(&self.bucket, &store_key, &score, expected).await?;
        if let Some(m) = score.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.revisions.insert(key.to_string(), rev);
        self.inventory.upsert(key, score.clone());
        self.metrics.score_updates.inc();
        Ok(score)
    }

    async fn apply(
        &mut self,
        score: AddOnPlacementScore,
    ) -> Result<AddOnPlacementScore, ScoreError> {
        let m = score.metadata.clone().unwrap_or_default();
        if self.clusters.get(&m.namespace).is_none() {
            return Err(ScoreError::NotFound(format!(
                "managed cluster {:?} (the namespace of AddOnPlacementScore {:?})",
                m.namespace, m.name
            )));
        }
        let key = ObjectRef::new(m.namespace.as_str(), m.name.as_str()).inventory_key();
        let mut next = AddOnPlacementScore {
            metadata: Some(ObjectMeta {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                labels: m.labels,
                annotations: m.annotations,
                ..Default::default()
            }),
            status: score.status,
        };
        if let Some(old) = self.inventory.get(&key)
            && old.status == next.status
            && old.metadata.as_ref().map(|o| (&o.labels, &o.annotations))
                == next.metadata.as_ref().map(|n| (&n.labels, &n.annotations))
        {
            return Ok((*old).clone());
        }
        next.status.get_or_insert_with(Default::default);
        self.store(&key, next).await
    }

    async fn delete(&mut self, cluster: &str, name: &str) -> Result<(), ScoreError> {
        let key = ObjectRef::new(cluster, name).inventory_key();
        if self.inventory.get(&key).is_none() {
            return Err(ScoreError::NotFound(format!(
                "AddOnPlacementScore {cluster}/{name}"
            )));
        }
        self.bucket
            .purge(&ObjectRef::new(cluster, name).store_key())
            .await?;
        self.revisions.remove(&key);
        self.sequences.remove(&key);
        self.inventory.remove(&key);
        Ok(())
    }

    async fn report(&mut self, r: ScoreReport) {
        let key = ObjectRef::new(
            r.report.cluster_name.as_str(),
            r.report.resource_name.as_str(),
        )
        .inventory_key();
        if let Some(waiting) = self.in_flight.get_mut(&key) {
            // Behind a write of the same score: keep the newest report only.
            let newer = match waiting {
                Some(w) => match (w.sequence, r.sequence) {
                    (Some(old), Some(new)) => new > old,
                    _ => true,
                },
                None => true,
            };
            let superseded = if newer { waiting.replace(r) } else { Some(r) };
            if let Some(old) = superseded {
                ack_message(old.ack).await;
            }
            return;
        }
        let ScoreReport {
            report,
            sequence,
            ack,
        } = r;
        if let Some(seq) = sequence {
            if self.sequences.get(&key).is_some_and(|&last| seq <= last) {
                ack_message(ack).await;
                return;
            }
            self.sequences.insert(key.clone(), seq);
        }
        let old = self.inventory.get(&key);
        let mut status = old
            .as_ref()
            .and_then(|o| o.status.clone())
            .unwrap_or_default();
        if status.scores == report.scores && status.valid_until == report.valid_until {
            ack_message(ack).await;
            return;
        }
        status.scores = report.scores;
        status.valid_until = report.valid_until;
        let meta = old
            .as_ref()
            .and_then(|o| o.metadata.clone())
            .unwrap_or_else(|| ObjectMeta {
                name: report.resource_name.clone(),
                namespace: report.cluster_name.clone(),
                ..Default::default()
            });
        let mut next = AddOnPlacementScore {
            metadata: Some(meta),
            status: Some(status),
        };
        let m = next.metadata.get_or_insert_with(Default::default);
        match &old {
            Some(o) => crate::identity::keep(m, &o.metadata.clone().unwrap_or_default(), false),
            None => crate::identity::create(m),
        }
        m.resource_version = 0;
        let store_key = ObjectRef::new(m.namespace.as_str(), m.name.as_str()).store_key();
        let expected = self.revisions.get(&key).copied().unwrap_or(0);
        let bucket = self.bucket.clone();
        self.in_flight.insert(key.clone(), None);
        let span = tracing::info_span!("score_write", score = %store_key);
        self.writes.spawn(
            async move {
                let result = write_or_take_over(&bucket, &store_key, &next, expected).await;
                Written {
                    key,
                    score: next,
                    result,
                    ack,
                }
            }
            .instrument(span),
        );
    }

    async fn purge_cluster(&mut self, cluster: &str) {
        for (key, s) in self.inventory.with_prefix(&ObjectRef::prefix(cluster)) {
            let name = s
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            match self
                .bucket
                .purge(&ObjectRef::new(cluster, name.as_str()).store_key())
                .await
            {
                Ok(()) => {
                    self.revisions.remove(&*key);
                    self.sequences.remove(&*key);
                    self.inventory.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, score = %key, "purging a deleted cluster's score failed")
                }
            }
        }
    }

    async fn purge_orphans(&mut self) {
        let clusters: BTreeMap<String, ()> = self
            .inventory
            .snapshot()
            .iter()
            .filter_map(|s| s.metadata.as_ref().map(|m| (m.namespace.clone(), ())))
            .collect();
        for cluster in clusters.keys() {
            // A cluster whose record does not decode is unreadable, not gone.
            if self.clusters.get(cluster).is_none()
                && !crate::store::quarantine::holds(crate::store::CLUSTERS, cluster)
            {
                self.purge_cluster(cluster).await;
            }
        }
    }
}

/// A finished agent score write.
struct Written {
    key: String,
    score: AddOnPlacementScore,
    result: Result<u64, StoreError>,
    ack: Option<crate::report::Ack>,
}

/// Compare-and-set at `expected`; on a conflict (written by someone else, such as another hub)
/// takes the stored revision and writes once more. Returns the new revision.
async fn write_or_take_over(
    bucket: &Bucket<AddOnPlacementScore>,
    key: &str,
    score: &AddOnPlacementScore,
    expected: u64,
) -> Result<u64, StoreError> {
    match bucket.write(key, score, expected).await {
        Err(e) if e.is_conflict() => {
            let current = bucket.get(key).await?.map_or(0, |(_, r)| r);
            bucket.write(key, score, current).await
        }
        other => other,
    }
}

async fn ack_message(ack: Option<crate::report::Ack>) {
    crate::report::settle(ack, crate::report::Outcome::Taken).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{AddOnPlacementScoreItem, AddOnPlacementScoreStatus};

    fn score(ns: &str, name: &str, items: &[(&str, i32)]) -> AddOnPlacementScore {
        AddOnPlacementScore {
            metadata: Some(ObjectMeta {
                name: name.into(),
                namespace: ns.into(),
                ..Default::default()
            }),
            status: Some(AddOnPlacementScoreStatus {
                scores: items
                    .iter()
                    .map(|(n, v)| AddOnPlacementScoreItem {
                        name: (*n).into(),
                        value: *v,
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }

    fn report(cluster: &str, value: i32, sequence: u64) -> ScoreReport {
        ScoreReport {
            report: AddOnPlacementScoreReport {
                cluster_name: cluster.into(),
                resource_name: "load".into(),
                scores: vec![AddOnPlacementScoreItem {
                    name: "free".into(),
                    value,
                }],
                ..Default::default()
            },
            sequence: Some(sequence),
            ack: None,
        }
    }

    fn value(s: &AddOnPlacementScore) -> i32 {
        s.status.as_ref().unwrap().scores[0].value
    }

    #[tokio::test]
    async fn a_burst_of_reports_is_stored_pipelined_and_the_newest_per_score_wins() {
        let nats = flotilla_testkit::NatsServer::start();
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        let bucket: Bucket<AddOnPlacementScore> =
            Bucket::open(&js, crate::placement::SCORES_BUCKET, Default::default())
                .await
                .unwrap();
        let clusters = ClusterInventory::new(1024);
        let names: Vec<String> = (0..300).map(|i| format!("c{i:03}")).collect();
        for n in &names {
            clusters.upsert(n, flotilla_api::v1::ManagedCluster::default());
        }
        let metrics = PlacementMetrics::new(&crate::metrics::Metrics::new());
        let (_stop, shutdown) = watch::channel(false);
        let scores = Scores::load(bucket.clone(), clusters, metrics.clone(), 10_000, shutdown)
            .await
            .unwrap();
        // Five reports per cluster, all at once: 1,500 reports for 300 scores.
        for seq in 1..=5u64 {
            for n in &names {
                scores
                    .try_report(report(n, seq as i32 * 10, seq))
                    .expect("mailbox has room");
            }
        }
        // A stale report (older sequence) after the newest changes nothing.
        scores.try_report(report("c000", -100, 2)).unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let all = scores.list("");
            if all.len() == 300 && all.iter().all(|s| value(s) == 50) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not every score reached its newest report"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(scores.list("").iter().all(|s| value(s) == 50));
        let stored = bucket.load_all().await.unwrap();
        assert_eq!(stored.len(), 300);
        assert!(
            stored.iter().all(|(_, s, _)| value(s) == 50),
            "the KV agrees"
        );
        let writes = metrics.score_updates.get();
        assert!(
            (300..=1500).contains(&writes),
            "one to five writes per score, superseded reports skipped: {writes}"
        );
    }

    #[test]
    fn scores_are_validated_with_field_paths() {
        assert!(
            validate(&score(
                "c1",
                "resource-usage-score",
                &[("cpuAvailable", 66)]
            ))
            .is_ok()
        );
        let e = validate(&score("c1", "s", &[("cpu", 101)]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("status.scores[0].value"), "{e}");
        let e = validate(&score("c1", "s", &[("a", 1), ("a", 2)]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("status.scores[1].name"), "{e}");
        let e = validate(&score("Bad_NS", "s", &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata.namespace"), "{e}");
        let e = validate(&score("c1", "", &[])).unwrap_err().to_string();
        assert!(e.contains("metadata.name"), "{e}");
    }
}

//! Placements: one [`actor`] per Placement scheduling over the shared cluster inventory, the
//! [`dispatch`]er that reschedules only the placements a change can affect, AddOnPlacementScores
//! ([`scores`]), conversions to and from the scheduler's types ([`convert`]), the published
//! [`snapshot`] the actors read, and [`metrics`].
//!
//! ```text
//! ClusterInventory ─┐ (change broadcasts)
//! ClusterSets ──────┼─▶ Dispatcher ──(debounce, rebuild Fleet index)──▶ watch<Snapshot>
//! ScoreInventory ───┤        │                                              │ read by
//! PlacementInventory┘        └──wake (Notify) only affected placements──▶ PlacementActor(ns/name)
//!                                                                           │ KV placements, decisions
//!      gRPC PlacementService ──apply/delete──▶ PlacementHandle              ▼
//!      internal subscribers, gRPC watch ◀── PlacementInventory (view + change broadcast)
//! ```
//!
//! The algorithm itself is the pure `flotilla-placement` crate; this module feeds it and stores
//! its results. Decision changes reach internal subscribers (the next issue's ReplicaSetActor)
//! through [`Placements::subscribe`] / [`Placements::get`], the same view the gRPC watch streams.

pub mod actor;
pub mod convert;
pub mod dispatch;
pub mod explained;
pub mod family;
pub mod grpc;
mod load;
pub mod metrics;
pub mod score_route;
pub mod scores;
pub mod snapshot;

use crate::clusterset::ClusterSets;
use crate::inventory::{Change, ClusterInventory, Inventory};
use crate::keys::ObjectRef;
use crate::store::{Bucket, StoreError};
use actor::{Loaded, PlacementHandle};
use dashmap::DashMap;
use dispatch::{Dispatcher, Sources};
use flotilla_api::names;
use flotilla_api::v1::{self, Placement, PlacementDecision};
use flotilla_placement::{self as sched, ErrorKind, PlacementInput};
use metrics::PlacementMetrics;
use scores::Scores;
use snapshot::Snapshot;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use thiserror::Error;
use tokio::sync::{Semaphore, broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Bucket of Placements (spec and status), key `<ns>.<name>`.
pub const PLACEMENTS_BUCKET: &str = "placements";
/// Bucket of PlacementDecision pages, key `<ns>.<placement>.<n>` (`n` from 1).
pub const DECISIONS_BUCKET: &str = "decisions";
/// Bucket of AddOnPlacementScores, key `<cluster>.<resourceName>`.
pub const SCORES_BUCKET: &str = "scores";

/// How long an API call waits for the dispatcher to catch up before scheduling anyway.
const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest placement name: `<name>-decision-<n>` must stay a valid object name.
pub const MAX_NAME_LEN: usize = 200;

/// Settings of the placement machinery.
#[derive(Debug, Clone)]
pub struct PlacementConfig {
    /// Changes are collected this long before the fleet index is rebuilt and the affected
    /// placements are woken (one rebuild per window, whatever the burst).
    pub debounce: Duration,
    /// Placements that use AddOn scores are rescheduled at least this often (OCM: 5 minutes).
    pub addon_resync: Duration,
    /// Scheduling runs computing at the same time (each on the blocking pool).
    pub max_concurrent_schedules: usize,
    /// Mailbox capacity of each placement actor and of the score actor.
    pub mailbox_capacity: usize,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(100),
            addon_resync: Duration::from_secs(300),
            max_concurrent_schedules: std::thread::available_parallelism().map_or(2, |n| n.get()),
            mailbox_capacity: 64,
        }
    }
}

/// Why a placement operation failed.
#[derive(Debug, Error)]
pub enum PlacementError {
    /// The spec is invalid; every problem with its field path.
    #[error("{0}")]
    Invalid(String),
    /// No such placement.
    #[error("{0} not found")]
    NotFound(String),
    /// Stale resourceVersion or a concurrent write.
    #[error("{0}")]
    Conflict(String),
    /// Storage failed; nothing changed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The placement's actor stopped (deleted meanwhile, or the hub is stopping).
    #[error("placement {0} is gone")]
    Gone(String),
}

/// A placement as published to readers: the stored object with its status, and its
/// PlacementDecision pages in order.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementView {
    /// The Placement (spec and status).
    pub placement: Placement,
    /// Its PlacementDecisions, `<name>-decision-1` first.
    pub decisions: Vec<PlacementDecision>,
}

impl PlacementView {
    /// Every decided cluster.
    pub fn clusters(&self) -> BTreeSet<String> {
        self.decisions
            .iter()
            .flat_map(|d| convert::decided_clusters(d).map(str::to_string))
            .collect()
    }

    /// Every decided cluster with its decision group (from the page labels), in page order;
    /// a cluster on two pages is listed once.
    pub fn decided_by_group(&self) -> Vec<(String, flotilla_rollout::GroupKey)> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for page in &self.decisions {
            let labels = page.metadata.as_ref().map(|m| &m.labels);
            let label = |k: &str| labels.and_then(|l| l.get(k));
            let group = flotilla_rollout::GroupKey {
                index: label(flotilla_placement::DECISION_GROUP_INDEX_LABEL)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                name: label(flotilla_placement::DECISION_GROUP_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default(),
            };
            for c in convert::decided_clusters(page) {
                if seen.insert(c.to_string()) {
                    out.push((c.to_string(), group.clone()));
                }
            }
        }
        out
    }
}

/// Every placement's view, keyed `<ns>/<name>`, with a change broadcast.
pub type PlacementInventory = Inventory<PlacementView>;

/// What every placement actor shares.
pub(crate) struct Shared {
    pub(crate) config: PlacementConfig,
    pub(crate) placements: Bucket<Placement>,
    pub(crate) decisions: Bucket<PlacementDecision>,
    pub(crate) views: PlacementInventory,
    pub(crate) snapshot: watch::Receiver<Arc<Snapshot>>,
    pub(crate) metrics: PlacementMetrics,
    pub(crate) schedule_slots: Semaphore,
    pub(crate) actors: Arc<DashMap<String, PlacementHandle>>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Asks the dispatcher to publish a snapshot with every queued change.
    pub(crate) sync: mpsc::Sender<oneshot::Sender<()>>,
    /// The actors' tasks (they end when `shutdown` flips), awaited by [`Placements::join`].
    pub(crate) tasks: crate::tasks::TaskGroup,
}

flotilla_hub_core::buckets! {
    /// The opened placement buckets.
    pub struct Buckets {
        /// `placements`.
        placements: Placement = PLACEMENTS_BUCKET,
        /// `decisions`.
        decisions: PlacementDecision = DECISIONS_BUCKET,
        /// `scores`.
        scores: v1::AddOnPlacementScore = SCORES_BUCKET,
    }
}

/// What the placement machinery reads.
pub struct Deps {
    /// The opened buckets.
    pub buckets: Buckets,
    /// The cluster inventory (written by cluster actors).
    pub clusters: ClusterInventory,
    /// Sets and bindings.
    pub sets: ClusterSets,
    /// The hub's metrics registry.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// The placement registry: every placement actor, the score actor and the dispatcher.
#[derive(Clone)]
pub struct Placements {
    shared: Arc<Shared>,
    scores: Scores,
    sets: ClusterSets,
    metrics: PlacementMetrics,
    /// The scheduler's explanations, kept per view and snapshot.
    explained: Arc<explained::Explained>,
}

impl Placements {
    /// Waits (bounded) for every placement actor to end, once the shutdown signal given at
    /// start has flipped.
    pub async fn join(&self) {
        self.shared
            .tasks
            .join(std::time::Duration::from_secs(5))
            .await;
    }
}

impl Placements {
    /// Loads placements, decisions and scores, builds the first fleet snapshot, spawns an actor
    /// per placement (each reconciles once: with Steady and unchanged inputs its decisions stay
    /// as stored) and the dispatcher. Everything stops when `shutdown` flips; the returned task
    /// is the dispatcher's.
    pub async fn start(
        deps: Deps,
        config: PlacementConfig,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, JoinHandle<()>), StoreError> {
        let metrics = PlacementMetrics::new(&deps.metrics);
        let scores = Scores::load(
            deps.buckets.scores.clone(),
            deps.clusters.clone(),
            metrics.clone(),
            config.mailbox_capacity.max(4096),
            shutdown.clone(),
        )
        .await?;
        let mut pages = load::group_pages(deps.buckets.decisions.load_all().await?);
        let views = PlacementInventory::new(16_384);
        let actors: Arc<DashMap<String, PlacementHandle>> = Arc::new(DashMap::new());
        let (snapshot_tx, snapshot_rx) = watch::channel(Arc::new(Snapshot {
            fleet: Arc::new(sched::Fleet::new(vec![], vec![], vec![], vec![])),
            counts: Arc::default(),
            version: 0,
        }));
        let (sync_tx, sync_rx) = mpsc::channel(64);
        let shared = Arc::new(Shared {
            config: config.clone(),
            placements: deps.buckets.placements.clone(),
            decisions: deps.buckets.decisions.clone(),
            views: views.clone(),
            snapshot: snapshot_rx,
            metrics: metrics.clone(),
            schedule_slots: Semaphore::new(config.max_concurrent_schedules.max(1)),
            actors: actors.clone(),
            shutdown: shutdown.clone(),
            sync: sync_tx,
            tasks: crate::tasks::TaskGroup::default(),
        });
        // Publish every stored placement's view first (so the dispatcher's first snapshot counts
        // every decision for Balance), then spawn the actors' tasks.
        let stored = load::pair(deps.buckets.placements.load_all().await?, &mut pages);
        for s in &stored {
            views.upsert(
                &s.key.inventory_key(),
                PlacementView {
                    placement: s.placement.clone(),
                    decisions: s.pages.clone(),
                },
            );
        }
        purge_orphans(&deps.buckets.placements, &deps.buckets.decisions, pages).await?;
        let sources = Sources {
            clusters: deps.clusters.clone(),
            sets: deps.sets.clone(),
            scores: scores.inventory().clone(),
            placements: views.clone(),
        };
        let debounce = config.debounce;
        let (dispatcher, receivers) = {
            let actors = actors.clone();
            let m = metrics.clone();
            flotilla_hub_core::tasks::blocking(move || {
                Dispatcher::new(sources, actors, m, debounce, snapshot_tx)
            })
            .await
            .expect("building the first fleet snapshot panicked")
        };
        for s in stored {
            let handle = actor::spawn(
                &s.key.namespace,
                &s.key.name,
                Some(Loaded {
                    placement: s.placement,
                    revision: s.revision,
                    pages: s.pages,
                }),
                shared.clone(),
            );
            actors.insert(s.key.inventory_key(), handle);
        }
        tracing::info!(placements = actors.len(), "placements loaded");
        let task = tokio::spawn(
            dispatcher
                .run(receivers, sync_rx, shutdown)
                .instrument(tracing::info_span!("placement_dispatcher")),
        );
        Ok((
            Self {
                shared,
                scores,
                sets: deps.sets,
                metrics,
                explained: Arc::default(),
            },
            task,
        ))
    }

    /// The score store.
    pub fn scores(&self) -> &Scores {
        &self.scores
    }

    /// Placement metrics.
    pub fn metrics(&self) -> &PlacementMetrics {
        &self.metrics
    }

    /// The current fleet snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.snapshot.borrow().clone()
    }

    /// Validates a placement as the API does: `Err` lists every rejected field; `Ok` carries
    /// the problems OCM accepts and reports as `PlacementMisconfigured`.
    pub fn validate(p: &Placement) -> Result<Vec<sched::FieldError>, PlacementError> {
        let (invalid, misconfigured) = Self::field_errors(p);
        if invalid.is_empty() {
            Ok(misconfigured)
        } else {
            let errors: Vec<String> = invalid.iter().map(ToString::to_string).collect();
            Err(PlacementError::Invalid(errors.join("; ")))
        }
    }

    /// Every problem [`Placements::validate`] finds, each with its field's path: those the API
    /// refuses, and those OCM accepts and reports as `PlacementMisconfigured` (looked for only
    /// when the spec converts).
    pub fn field_errors(p: &Placement) -> (Vec<sched::FieldError>, Vec<sched::FieldError>) {
        let m = p.metadata.clone().unwrap_or_default();
        let invalid =
            |e: names::NameError| sched::FieldError::new(e.field, ErrorKind::Invalid, e.reason);
        let mut errors = Vec::new();
        if let Err(e) = names::validate_dns1123_label("metadata.namespace", &m.namespace) {
            errors.push(invalid(e));
        }
        if let Err(e) = names::validate_dns1123_subdomain("metadata.name", &m.name) {
            errors.push(invalid(e));
        } else if m.name.len() > MAX_NAME_LEN {
            errors.push(sched::FieldError::new(
                "metadata.name",
                ErrorKind::Invalid,
                format!(
                    "at most {MAX_NAME_LEN} characters, so that PlacementDecision names fit (got {})",
                    m.name.len()
                ),
            ));
        }
        let misconfigured = match convert::placement(p) {
            Err(es) => {
                errors.extend(es);
                Vec::new()
            }
            Ok(spec) => {
                let (invalid, misconfigured): (Vec<_>, Vec<_>) = sched::validate(&spec)
                    .into_iter()
                    .partition(|e| e.kind == ErrorKind::Invalid);
                errors.extend(invalid);
                misconfigured
            }
        };
        (errors, misconfigured)
    }

    /// Waits (briefly) until the dispatcher has published a snapshot with every change queued
    /// so far, so that an API call scheduling now sees the writes that came before it.
    pub async fn sync(&self) {
        let (tx, rx) = oneshot::channel();
        if self.shared.sync.send(tx).await.is_ok() {
            let _ = tokio::time::timeout(SYNC_TIMEOUT, rx).await;
        }
    }

    /// Creates or updates a placement and schedules it before answering.
    pub async fn apply(&self, placement: Placement) -> Result<Placement, PlacementError> {
        Self::validate(&placement)?;
        self.sync().await;
        let m = placement.metadata.clone().unwrap_or_default();
        let key = ObjectRef::new(m.namespace.as_str(), m.name.as_str()).inventory_key();
        loop {
            let handle = self
                .shared
                .actors
                .entry(key.clone())
                .or_insert_with(|| actor::spawn(&m.namespace, &m.name, None, self.shared.clone()))
                .clone();
            match handle.apply(placement.clone()).await {
                // Deleted between lookup and call: start over with a new actor.
                Err(PlacementError::Gone(_)) => {
                    self.shared.actors.remove_if(&key, |_, h| h.is_closed());
                    continue;
                }
                r => return r,
            }
        }
    }

    /// One placement and its decisions.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<PlacementView>> {
        self.shared
            .views
            .get(&ObjectRef::new(namespace, name).inventory_key())
    }

    /// Placements of a namespace (every namespace when empty), sorted by key.
    pub fn list(&self, namespace: &str) -> Vec<Arc<PlacementView>> {
        let prefix = ObjectRef::prefix(namespace);
        self.shared
            .views
            .with_prefix(&prefix)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// Deletes a placement and its decisions.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), PlacementError> {
        let key = ObjectRef::new(namespace, name).inventory_key();
        let not_found = || PlacementError::NotFound(format!("Placement {key}"));
        let handle = self
            .shared
            .actors
            .get(&key)
            .map(|h| h.clone())
            .ok_or_else(not_found)?;
        match handle.delete().await {
            Err(PlacementError::Gone(_)) => Err(not_found()),
            r => r,
        }
    }

    /// Subscribes to placement changes (spec, status or decisions); the entry point for
    /// internal consumers of decisions.
    pub fn subscribe(&self) -> broadcast::Receiver<Change<PlacementView>> {
        self.shared.views.subscribe()
    }

    /// The published views.
    pub fn views(&self) -> &PlacementInventory {
        &self.shared.views
    }

    /// OCM's debug view: every candidate's filter verdicts and scores, against the current
    /// snapshot with the placement's current decisions — computed once per placement view and
    /// snapshot ([`explained`]).
    pub async fn debug(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<v1::PlacementDebug, PlacementError> {
        let view = self
            .get(namespace, name)
            .ok_or_else(|| PlacementError::NotFound(format!("Placement {namespace}/{name}")))?;
        self.sync().await;
        let snapshot = self.snapshot();
        let key = ObjectRef::new(namespace, name).inventory_key();
        let kept = || (self.explained).get(&key, &view, snapshot.version, Instant::now());
        if let Some(hit) = kept() {
            return Ok((*hit).clone());
        }
        let _one = self.explained.one_at_a_time().await;
        if let Some(hit) = kept() {
            return Ok((*hit).clone());
        }
        let debug = Arc::new(Self::explain(&view, snapshot.clone()).await?);
        (self.explained).put(&key, &view, snapshot.version, Instant::now(), debug.clone());
        Ok((*debug).clone())
    }

    /// The scheduler's explanation of `view` against `snapshot`, computed now.
    async fn explain(
        view: &PlacementView,
        snapshot: Arc<Snapshot>,
    ) -> Result<v1::PlacementDebug, PlacementError> {
        let spec = convert::placement(&view.placement)
            .map_err(|es| PlacementError::Invalid(format!("{es:?}")))?;
        let decided = view.clusters();
        let explained = flotilla_hub_core::tasks::blocking(move || {
            let input = PlacementInput::new(&spec, SystemTime::now())
                .current_decisions(&decided)
                .all_decision_counts(&snapshot.counts);
            snapshot.fleet.explain(&input)
        })
        .await
        .map_err(|e| PlacementError::Unavailable(format!("explaining panicked: {e}")))?;
        Ok(match explained {
            Ok((_, d)) => convert::debug(view.placement.clone(), Some(&d), None),
            Err(e) => convert::debug(view.placement.clone(), None, Some(e.to_string())),
        })
    }

    /// Sets and bindings (for callers that need both).
    pub fn sets(&self) -> &ClusterSets {
        &self.sets
    }
}

/// Purges the decision pages whose placement is gone (a crash during a delete). A placement
/// whose record does not decode is unreadable, not gone: its decisions stay.
async fn purge_orphans(
    placements: &Bucket<Placement>,
    decisions: &Bucket<PlacementDecision>,
    orphans: load::Pages,
) -> Result<(), StoreError> {
    for (key, pages) in orphans {
        if crate::store::quarantine::holds(placements.name(), &key.store_key()) {
            continue;
        }
        for (n, _, _) in pages {
            tracing::warn!(namespace = %key.namespace, placement = %key.name, page = n, "removing a decision of a deleted placement");
            decisions.purge(&key.page_store_key(n)).await?;
        }
    }
    Ok(())
}

//! One PlacementActor per Placement: owns the stored object, its PlacementDecision pages and
//! their KV revisions, and reconciles — schedule against the current [`Snapshot`], write what
//! changed, publish the new view — whenever it is woken (by the dispatcher, after a change that
//! can affect it), when its own timer fires (a toleration expiring, an AddOn score's
//! `validUntil`, the periodic AddOn resync), or after an API change. Reconciling returns when to
//! look again, like kube-runtime's `Action::requeue`.
//!
//! Wake-ups are a [`Notify`], not messages: any number of them while a run is in progress
//! coalesce into one more run, and the dispatcher never blocks on a busy placement.
//!
//! Writes: decision pages first (`decisions`, key `<ns>.<placement>.<n>`, unconditional puts —
//! the actor is their only writer), then the placement with its status (`placements`, key
//! `<ns>.<name>`, compare-and-set). A failed write is retried every second; the published view
//! only ever shows what is stored.

use crate::keys::ObjectRef;
use crate::placement::convert;
use crate::placement::metrics::Timer;
use crate::placement::snapshot::Snapshot;
use crate::placement::{PlacementError, PlacementView, Shared};
use crate::store::StoreError;
use flotilla_api::meta;
use flotilla_api::v1::{Placement, PlacementDecision};
use flotilla_placement::{self as sched, PlacementInput, ScheduleError, ScoreCoordinateType};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;
use tracing::Instrument;

/// How long after a failed write the actor tries again.
const RETRY: Duration = Duration::from_secs(1);

type Reply<T> = oneshot::Sender<Result<T, PlacementError>>;

/// Messages a placement actor handles.
pub(crate) enum Msg {
    /// Create or update the spec (already validated), schedule, answer with the stored object.
    Apply {
        placement: Box<Placement>,
        respond_to: Reply<Placement>,
    },
    /// Delete the placement and its decisions; the actor stops.
    Delete { respond_to: Reply<()> },
}

/// A cloneable handle to one placement actor.
#[derive(Clone)]
pub struct PlacementHandle {
    tx: mpsc::Sender<Msg>,
    wake: Arc<Notify>,
    key: Arc<str>,
}

impl PlacementHandle {
    /// Whether the actor has stopped.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Asks the actor to reconcile soon (coalesces with pending wake-ups; never blocks).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T, PlacementError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| PlacementError::Gone(self.key.to_string()))?;
        rx.await
            .map_err(|_| PlacementError::Gone(self.key.to_string()))?
    }

    /// Applies a validated spec.
    pub(crate) async fn apply(&self, placement: Placement) -> Result<Placement, PlacementError> {
        self.call(|respond_to| Msg::Apply {
            placement: Box::new(placement),
            respond_to,
        })
        .await
    }

    /// Deletes the placement.
    pub(crate) async fn delete(&self) -> Result<(), PlacementError> {
        self.call(|respond_to| Msg::Delete { respond_to }).await
    }
}

/// What was loaded from the store for an existing placement.
pub(crate) struct Loaded {
    pub(crate) placement: Placement,
    pub(crate) revision: u64,
    /// Pages in order (`<name>-decision-1` first).
    pub(crate) pages: Vec<PlacementDecision>,
}

/// Spawns the actor of `namespace/name`. A loaded placement publishes its view before this
/// returns (so the dispatcher's first snapshot counts its decisions) and reconciles at once.
pub(crate) fn spawn(
    namespace: &str,
    name: &str,
    loaded: Option<Loaded>,
    shared: Arc<Shared>,
) -> PlacementHandle {
    let id = ObjectRef::new(namespace, name);
    let key = id.inventory_key();
    let (tx, rx) = mpsc::channel(shared.config.mailbox_capacity.max(1));
    let wake = Arc::new(Notify::new());
    let span =
        tracing::info_span!("placement", placement.namespace = %namespace, placement.name = %name);
    let mut actor = Actor {
        key: key.clone(),
        id,
        placement: None,
        revision: 0,
        spec: None,
        pages: Vec::new(),
        decided: Arc::new(BTreeSet::new()),
        scores: Arc::new(HashMap::new()),
        requeue: None,
        dirty: false,
        unsettled: crate::settle::Unsettled::default(),
        shared,
        rx,
        wake: wake.clone(),
    };
    if let Some(l) = loaded {
        actor.adopt_spec(&l.placement);
        actor.adopt_pages_decided(&l.pages);
        actor.placement = Some(l.placement);
        actor.revision = l.revision;
        actor.pages = l.pages;
        actor.publish();
        wake.notify_one();
    }
    let tasks = actor.shared.tasks.clone();
    tasks.spawn(actor.run().instrument(span));
    PlacementHandle {
        tx,
        wake,
        key: key.into(),
    }
}

struct Actor {
    /// `id.inventory_key()`, the key of the registry and the views.
    key: String,
    id: ObjectRef,
    /// The stored object (spec and status), `None` until created.
    placement: Option<Placement>,
    revision: u64,
    /// The spec in the scheduler's form; `None` when it does not convert (never for specs that
    /// went through the API).
    spec: Option<Arc<sched::Placement>>,
    /// Stored pages, in order.
    pages: Vec<PlacementDecision>,
    /// Clusters in `pages`.
    decided: Arc<BTreeSet<String>>,
    /// The score each decision in `pages` records.
    scores: Arc<HashMap<String, i64>>,
    requeue: Option<Instant>,
    /// A write failed; reconcile again after [`RETRY`].
    dirty: bool,
    /// A write of the placement had an unknown outcome (an outage): read it again until the
    /// store answers, and adopt what is there.
    unsettled: crate::settle::Unsettled<()>,
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Msg>,
    wake: Arc<Notify>,
}

enum Flow {
    Continue,
    Stop,
}

impl Actor {
    async fn run(mut self) {
        let mut shutdown = self.shared.shutdown.clone();
        loop {
            let requeue = if self.dirty {
                Some(Instant::now() + RETRY)
            } else {
                self.requeue
            };
            let unsettled = self.unsettled.deadline();
            tokio::select! {
                _ = shutdown.changed() => break,
                msg = self.rx.recv() => match msg {
                    None => break,
                    Some(msg) => if let Flow::Stop = self.handle(msg).await { break },
                },
                () = self.wake.notified() => self.reconcile().await,
                () = sleep_until(requeue), if requeue.is_some() => self.reconcile().await,
                () = sleep_until(unsettled), if unsettled.is_some() => {
                    if let Flow::Stop = self.verify().await { break }
                }
            }
        }
        tracing::debug!("placement actor stopped");
    }

    async fn handle(&mut self, msg: Msg) -> Flow {
        match msg {
            Msg::Apply {
                placement,
                respond_to,
            } => {
                let r = self.apply(*placement).await;
                let created = r.is_ok();
                let _ = respond_to.send(r);
                if !created && self.placement.is_none() && self.unsettled.is_empty() {
                    // A failed create leaves nothing behind.
                    self.shared.actors.remove(&self.key);
                    return Flow::Stop;
                }
                Flow::Continue
            }
            Msg::Delete { respond_to } => {
                let r = self.delete().await;
                let stop = r.is_ok();
                let _ = respond_to.send(r);
                if stop { Flow::Stop } else { Flow::Continue }
            }
        }
    }

    fn adopt_spec(&mut self, p: &Placement) {
        self.spec = match convert::placement(p) {
            Ok(s) => Some(Arc::new(s)),
            Err(errors) => {
                tracing::error!(
                    ?errors,
                    "stored placement does not convert; not scheduling it"
                );
                None
            }
        };
    }

    fn publish(&self) {
        if let Some(p) = &self.placement {
            self.shared.views.upsert(
                &self.key,
                PlacementView {
                    placement: p.clone(),
                    decisions: self.pages.clone(),
                },
            );
        }
    }

    /// Creates or updates the placement. A lost race means a write of this actor's own landed
    /// after it was reported failed: the stored placement is adopted and the apply decided
    /// again against it, once, so applying the same document again succeeds.
    async fn apply(&mut self, next: Placement) -> Result<Placement, PlacementError> {
        let before = self.revision;
        match self.apply_once(next.clone()).await {
            Err(PlacementError::Conflict(_)) if self.revision != before => {
                self.apply_once(next).await
            }
            result => result,
        }
    }

    async fn apply_once(&mut self, mut next: Placement) -> Result<Placement, PlacementError> {
        let mut m = next.metadata.take().unwrap_or_default();
        let expected = match &self.placement {
            Some(old) => {
                if m.resource_version != 0 && m.resource_version != self.revision {
                    return Err(PlacementError::Conflict(format!(
                        "Placement {}: resourceVersion {} is stale (stored {}); get it again and retry",
                        self.key, m.resource_version, self.revision
                    )));
                }
                let om = old.metadata.clone().unwrap_or_default();
                crate::identity::keep(&mut m, &om, old.spec != next.spec);
                next.status = old.status.clone();
                self.revision
            }
            None => {
                if m.resource_version != 0 {
                    return Err(PlacementError::NotFound(format!("Placement {}", self.key)));
                }
                crate::identity::create(&mut m);
                next.status = None;
                0
            }
        };
        m.resource_version = 0;
        next.metadata = Some(m);
        let written = self
            .shared
            .placements
            .write(&self.id.store_key(), &next, expected)
            .await;
        let rev = match written {
            Ok(rev) => rev,
            Err(e) if e.is_conflict() => {
                if self.reload().await.is_err() {
                    self.unsettled.note(());
                }
                return Err(PlacementError::Conflict(format!(
                    "Placement {} changed meanwhile; retry",
                    self.key
                )));
            }
            Err(e) => {
                self.unsettled.note(());
                return Err(PlacementError::Unavailable(e.to_string()));
            }
        };
        if let Some(m) = next.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.revision = rev;
        self.adopt_spec(&next);
        self.placement = Some(next);
        self.publish();
        self.reconcile().await;
        self.placement
            .clone()
            .ok_or_else(|| PlacementError::Gone(self.key.clone()))
    }

    async fn delete(&mut self) -> Result<(), PlacementError> {
        if self.placement.is_none() {
            return Err(PlacementError::NotFound(format!("Placement {}", self.key)));
        }
        for n in 1..=self.pages.len() {
            self.shared
                .decisions
                .purge(&self.id.page_store_key(n))
                .await
                .map_err(|e| PlacementError::Unavailable(e.to_string()))?;
        }
        self.shared
            .placements
            .purge(&self.id.store_key())
            .await
            .map_err(|e| PlacementError::Unavailable(e.to_string()))?;
        self.shared.actors.remove(&self.key);
        self.shared.views.remove(&self.key);
        self.placement = None;
        tracing::info!("placement deleted");
        Ok(())
    }

    /// Takes the decided clusters and their recorded scores from `pages`.
    fn adopt_pages_decided(&mut self, pages: &[PlacementDecision]) {
        let (decided, scores) = convert::decided_with_scores(pages);
        self.decided = Arc::new(decided);
        self.scores = Arc::new(scores);
    }

    /// Schedules against the current snapshot and writes what changed; sets the next requeue.
    async fn reconcile(&mut self) {
        let Some(placement) = self.placement.clone() else {
            return;
        };
        let Some(spec) = self.spec.clone() else {
            return;
        };
        let snapshot: Arc<Snapshot> = self.shared.snapshot.borrow().clone();
        let decided = self.decided.clone();
        let scores = self.scores.clone();
        let last_score_update = placement
            .status
            .as_ref()
            .and_then(|s| s.last_score_update_time.as_ref())
            .map(meta::system_time);
        let metrics = self.shared.metrics.clone();
        let now = SystemTime::now();
        let result = {
            // Bounded parallelism: at most `max_concurrent_schedules` runs use the blocking pool.
            let _slot = self.shared.schedule_slots.acquire().await;
            flotilla_hub_core::tasks::blocking(move || {
                let _t = Timer::start(&metrics.schedule_seconds);
                let input = PlacementInput::new(&spec, now)
                    .current_decisions(&decided)
                    .recorded_scores(&scores, last_score_update)
                    .all_decision_counts(&snapshot.counts);
                snapshot.fleet.schedule(&input)
            })
            .await
        };
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "scheduling panicked");
                self.shared.metrics.outcome("failed");
                return;
            }
        };
        let generation = placement.metadata.as_ref().map_or(0, |m| m.generation);
        let old_status = placement.status.clone();
        let (pages, status, requeue_at, outcome) = match &result {
            Ok(s) => {
                let mut pages: Vec<PlacementDecision> =
                    s.pages.iter().map(convert::decision).collect();
                for (n, p) in pages.iter_mut().enumerate() {
                    if let Some(old) = self.pages.get(n)
                        && let (Some(m), Some(om)) = (p.metadata.as_mut(), old.metadata.as_ref())
                    {
                        m.uid = om.uid.clone();
                        m.creation_timestamp = om.creation_timestamp;
                        m.resource_version = om.resource_version;
                    }
                }
                let status = convert::status(&s.status, old_status.as_ref(), generation);
                (pages, status, s.requeue_at, "changed")
            }
            Err(e @ ScheduleError::Misconfigured { .. }) => {
                // OCM reports the problem; Flotilla also keeps the existing decisions.
                let mut status = old_status.clone().unwrap_or_default();
                convert::set_conditions(&mut status.conditions, &e.conditions(), generation);
                (self.pages.clone(), status, None, "misconfigured")
            }
        };
        let pages_changed = !same_pages(&pages, &self.pages);
        tracing::debug!(
            snapshot = self.shared.snapshot.borrow().version,
            outcome,
            pages = pages.len(),
            "scheduled"
        );
        let status_changed = old_status.as_ref() != Some(&status);
        self.requeue = self.next_requeue(requeue_at);
        if !pages_changed && !status_changed {
            self.shared.metrics.outcome(if outcome == "misconfigured" {
                outcome
            } else {
                "unchanged"
            });
            self.dirty = false;
            return;
        }
        match self.persist(pages, status).await {
            Ok(()) => {
                self.dirty = false;
                self.shared.metrics.outcome(outcome);
            }
            Err(e) => {
                tracing::warn!(error = %e, "storing placement decisions failed; retrying");
                self.shared.metrics.outcome("failed");
                self.dirty = true;
                if e.is_conflict() {
                    let _ = self.reload().await;
                }
            }
        }
    }

    /// The requeue instant: the scheduler's, the periodic AddOn resync, whichever is first.
    fn next_requeue(&self, at: Option<SystemTime>) -> Option<Instant> {
        let from_schedule = at.map(|t| {
            let wait = t.duration_since(SystemTime::now()).unwrap_or_default();
            // A millisecond past the instant: the scheduler treats "now == expiry" as expired,
            // and the monotonic and wall clocks may disagree by a hair.
            Instant::now() + wait + Duration::from_millis(1)
        });
        let uses_addon = self.spec.as_ref().is_some_and(|s| {
            s.prioritizer_policy
                .configurations
                .iter()
                .any(|c| c.score_coordinate.type_ == ScoreCoordinateType::AddOn)
        });
        let resync = uses_addon.then(|| Instant::now() + self.shared.config.addon_resync);
        match (from_schedule, resync) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn persist(
        &mut self,
        mut pages: Vec<PlacementDecision>,
        status: flotilla_api::v1::PlacementStatus,
    ) -> Result<(), StoreError> {
        let decided_before = self.decided.clone();
        for (i, page) in pages.iter_mut().enumerate() {
            let n = i + 1;
            if self.pages.get(i).is_some_and(|old| same_page(old, page)) {
                continue;
            }
            if let Some(m) = page.metadata.as_mut() {
                if m.uid.is_empty() {
                    m.uid = uuid::Uuid::new_v4().to_string();
                    m.creation_timestamp = Some(meta::now());
                }
                m.resource_version = 0;
            }
            let rev = self
                .shared
                .decisions
                .put(&self.id.page_store_key(n), page)
                .await?;
            if let Some(m) = page.metadata.as_mut() {
                m.resource_version = rev;
            }
        }
        for n in pages.len() + 1..=self.pages.len() {
            self.shared
                .decisions
                .purge(&self.id.page_store_key(n))
                .await?;
        }
        // The decisions are stored: adopt them even if the status write below fails.
        self.adopt_pages_decided(&pages);
        self.pages = pages;
        if *self.decided != *decided_before {
            self.shared.metrics.decision_changes.inc();
        }
        let Some(mut next) = self.placement.clone() else {
            return Ok(());
        };
        next.status = Some(status);
        if let Some(m) = next.metadata.as_mut() {
            m.resource_version = 0;
        }
        let written = self
            .shared
            .placements
            .write(&self.id.store_key(), &next, self.revision)
            .await;
        match written {
            Ok(rev) => {
                if let Some(m) = next.metadata.as_mut() {
                    m.resource_version = rev;
                }
                self.revision = rev;
                self.placement = Some(next);
                self.publish();
                Ok(())
            }
            Err(e) => {
                self.publish();
                Err(e)
            }
        }
    }

    /// Re-reads the stored placement after a lost compare-and-set or a write whose outcome was
    /// unknown, and adopts it. Returns whether the store holds it.
    async fn reload(&mut self) -> Result<bool, StoreError> {
        match self.shared.placements.get(&self.id.store_key()).await {
            Ok(Some((mut p, rev))) => {
                if let Some(m) = p.metadata.as_mut() {
                    m.resource_version = rev;
                }
                if rev != self.revision {
                    tracing::warn!(revision = rev, "adopting the stored placement");
                }
                self.revision = rev;
                self.adopt_spec(&p);
                self.placement = Some(p);
                self.publish();
                Ok(true)
            }
            Ok(None) => {
                if self.placement.is_some() {
                    tracing::warn!("the stored placement disappeared");
                }
                Ok(false)
            }
            Err(e) => {
                tracing::warn!(error = %e, "re-reading the placement failed");
                Err(e)
            }
        }
    }

    /// Settles a write whose outcome was unknown, once the store answers: a placement that
    /// landed is adopted and scheduled; a create that never landed leaves nothing behind.
    async fn verify(&mut self) -> Flow {
        self.unsettled.take();
        match self.reload().await {
            Err(_) => {
                self.unsettled.note(());
                Flow::Continue
            }
            Ok(true) => {
                self.reconcile().await;
                Flow::Continue
            }
            Ok(false) => {
                if self.placement.is_none() {
                    self.shared.actors.remove(&self.key);
                    return Flow::Stop;
                }
                Flow::Continue
            }
        }
    }
}

/// Whether two pages say the same thing (name, labels, decisions), ignoring bookkeeping.
fn same_page(a: &PlacementDecision, b: &PlacementDecision) -> bool {
    let key = |d: &PlacementDecision| {
        d.metadata.as_ref().map(|m| {
            (
                m.name.clone(),
                convert::sorted(&m.labels)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Vec<_>>(),
            )
        })
    };
    key(a) == key(b) && a.status == b.status
}

fn same_pages(a: &[PlacementDecision], b: &[PlacementDecision]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_page(x, y))
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

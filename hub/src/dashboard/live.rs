//! The live feed: one task follows the cluster inventory's change notifications (the same
//! broadcast the gRPC Watch APIs stream from), keeps the [`History`] and publishes what pages
//! show — a cluster's new availability, the counts — to every open page as Server-Sent Events.
//! While this hub runs the controllers it follows their views' broadcasts too (placements,
//! replica sets, add-ons, policies — what their gRPC Watch APIs stream) and tells the pages
//! showing one of them that it changed (`event: changed`, the kind and key; the page reads
//! itself again), coalesced: each key at most once per [`LiveConfig::summary_every`], and past
//! [`MAX_DIRTY`] keys in one period a single "every object of the kind" event. Replica sets'
//! and add-ons' progress is remembered as it changes ([`Progress`]) for the progress plots.
//!
//! Bounds: at most [`LiveConfig::max_clients`] streams at once and
//! [`LiveConfig::max_per_identity`] of one identity (a token's name: one viewer cannot take the
//! others' pages; more are answered 503 naming the flag, counted in
//! `flotilla_hub_limit_refusals_total{limit="dashboard_live"|"dashboard_live_per_identity"}`); all
//! streams share one broadcast ring of [`LiveConfig::buffer`] events, so a page that does not
//! read is at most that far behind — further and it is dropped (`event: reset`, its script
//! reloads the page), never buffered without limit. Shutdown ends every stream.

use super::fence::{Fence, Next as FenceNext};
use super::history::{Availability, Counts, History, HistoryLimits, Transition};
use super::progress::{Progress, ProgressLimits};
use crate::controller::Controllers;
use crate::grpc::auth::Identity;
use crate::grpc::guard::Teams;
use crate::inventory::{Change, ChangeKind, ClusterInventory, Inventory, Tally};
use crate::metrics::Metrics;
use bytes::Bytes;
use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use hyper::body::Frame;
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How the live feed is bounded.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Streams open at once (default 64, `--dashboard-live-streams`).
    pub max_clients: usize,
    /// Streams one identity may have open at once (default 16,
    /// `--dashboard-live-streams-per-identity`).
    pub max_per_identity: usize,
    /// Events a stream may fall behind before it is dropped (default 1024).
    pub buffer: usize,
    /// A comment line this often keeps proxies from closing a quiet stream (default 15 s).
    pub heartbeat: Duration,
    /// Counts are sent at most this often (default 500 ms).
    pub summary_every: Duration,
    /// The counts are sampled this often for the availability plot (default 10 s).
    pub sample_every: Duration,
    /// How much history is kept.
    pub history: HistoryLimits,
    /// How much rollout progress is kept.
    pub progress: ProgressLimits,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            max_clients: DEFAULT_LIVE_STREAMS,
            max_per_identity: DEFAULT_LIVE_STREAMS_PER_IDENTITY,
            buffer: 1024,
            heartbeat: Duration::from_secs(15),
            summary_every: Duration::from_millis(500),
            sample_every: Duration::from_secs(10),
            history: HistoryLimits::default(),
            progress: ProgressLimits::default(),
        }
    }
}

/// Default [`LiveConfig::max_clients`].
pub const DEFAULT_LIVE_STREAMS: usize = 64;
/// Default [`LiveConfig::max_per_identity`].
pub const DEFAULT_LIVE_STREAMS_PER_IDENTITY: usize = 16;

/// The flags of the live feed's bounds (flattened into the hub's).
#[derive(clap::Args, Debug, Clone)]
pub struct LiveArgs {
    /// Live dashboard pages (Server-Sent Events streams) open at once; more are answered 503.
    #[arg(
        long,
        env = "FLOTILLA_DASHBOARD_LIVE_STREAMS",
        default_value_t = DEFAULT_LIVE_STREAMS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000)
    )]
    pub dashboard_live_streams: usize,
    /// Live dashboard pages one identity (a token's name) may have open at once.
    #[arg(
        long,
        env = "FLOTILLA_DASHBOARD_LIVE_STREAMS_PER_IDENTITY",
        default_value_t = DEFAULT_LIVE_STREAMS_PER_IDENTITY,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000)
    )]
    pub dashboard_live_streams_per_identity: usize,
}

impl LiveArgs {
    /// Sets the bounds the flags give in `config`.
    pub fn apply(&self, config: &mut LiveConfig) {
        config.max_clients = self.dashboard_live_streams;
        config.max_per_identity = self.dashboard_live_streams_per_identity;
    }
}

/// What an open page is told.
#[derive(Debug, Clone)]
pub enum LiveEvent {
    /// A cluster changed state.
    Transition(Transition),
    /// The counts now.
    Summary(Counts),
    /// A controller's object changed (`key` `*`: many of its kind did).
    Changed {
        /// Its kind.
        kind: Kind,
        /// Its key (`<ns>/<name>`, or the add-on's name).
        key: Arc<str>,
    },
}

/// The kinds of controller objects pages follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A placement (`/placements/<ns>/<name>`).
    Placement,
    /// A ManifestWorkReplicaSet (`/rollouts/<ns>/<name>`).
    Rollout,
    /// A ClusterManagementAddOn (`/addons/<name>`).
    AddOn,
    /// A policy (`/policies`).
    Policy,
}

impl Kind {
    /// Its name in pages' `data-follow` and in the feed.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Placement => "placement",
            Kind::Rollout => "rollout",
            Kind::AddOn => "addon",
            Kind::Policy => "policy",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Kind::Placement, Kind::Rollout, Kind::AddOn, Kind::Policy]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// Keys changed in one period past which a kind's changes are sent as one `*`.
pub const MAX_DIRTY: usize = 256;

/// What a page follows: `kind:key` or `kind:*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Follows {
    keys: HashSet<(Kind, String)>,
    kinds: HashSet<Kind>,
}

impl Follows {
    /// Parses `kind:key` items (space or comma separated), at most `max`; unknown kinds are
    /// skipped.
    pub fn parse(s: &str, max: usize) -> Self {
        let mut f = Self::default();
        for item in s.split([',', ' ']).filter(|i| !i.is_empty()).take(max) {
            let Some((kind, key)) = item.split_once(':') else {
                continue;
            };
            let Some(kind) = Kind::parse(kind) else {
                continue;
            };
            if key == "*" {
                f.kinds.insert(kind);
            } else if !key.is_empty() {
                f.keys.insert((kind, key.to_string()));
            }
        }
        f
    }

    /// Whether nothing is followed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.kinds.is_empty()
    }

    /// Whether a change of `kind`/`key` concerns the page.
    pub fn wants(&self, kind: Kind, key: &str) -> bool {
        self.kinds.contains(&kind)
            || (key == "*" && self.keys.iter().any(|(k, _)| *k == kind))
            || self.keys.contains(&(kind, key.to_string()))
    }
}

/// Changed keys waiting for the next period (coalesced, bounded).
#[derive(Debug, Default)]
pub struct Dirty {
    keys: std::collections::BTreeSet<(Kind, Arc<str>)>,
    all: std::collections::BTreeSet<Kind>,
}

impl Dirty {
    /// Notes a change (every object of `kind` when `key` is `None`).
    pub fn mark(&mut self, kind: Kind, key: Option<Arc<str>>) {
        if self.all.contains(&kind) {
            return;
        }
        match key {
            Some(k) if self.keys.len() < MAX_DIRTY => {
                self.keys.insert((kind, k));
            }
            _ => {
                self.keys.retain(|(k, _)| *k != kind);
                self.all.insert(kind);
            }
        }
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.all.is_empty()
    }

    /// The events to send, emptying it.
    pub fn drain(&mut self) -> Vec<LiveEvent> {
        let all = std::mem::take(&mut self.all);
        let keys = std::mem::take(&mut self.keys);
        all.into_iter()
            .map(|kind| LiveEvent::Changed {
                kind,
                key: "*".into(),
            })
            .chain(
                keys.into_iter()
                    .map(|(kind, key)| LiveEvent::Changed { kind, key }),
            )
            .collect()
    }
}

/// One controller view's change, as the feed's task sees it.
enum ObjectChange {
    /// An object changed; `progress` for replica sets and add-ons (`None` when deleted).
    One {
        kind: Kind,
        key: Arc<str>,
        progress: Option<(i64, i64, i64)>,
    },
    /// The task fell behind this kind's broadcast.
    Lagged(Kind),
}

/// How far a rollout is: (done, failed, total).
type Measure<T> = fn(&T) -> (i64, i64, i64);

/// The changes of one controller view as [`ObjectChange`]s.
fn follow_view<T: Send + Sync + 'static, X: Tally<T>>(
    view: &Inventory<T, X>,
    kind: Kind,
    progress: Option<Measure<T>>,
) -> BoxStream<'static, ObjectChange> {
    tokio_stream::wrappers::BroadcastStream::new(view.subscribe())
        .map(move |c: Result<Change<T>, _>| match c {
            Ok(c) => ObjectChange::One {
                kind,
                progress: match c.kind {
                    ChangeKind::Deleted => None,
                    _ => progress.map(|f| f(&c.object)),
                },
                key: c.key,
            },
            Err(_) => ObjectChange::Lagged(kind),
        })
        .boxed()
}

/// A stream's body: SSE frames.
pub type Events = Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>;

/// The feed: the history pages read, the broadcast streams follow.
#[derive(Clone)]
pub struct Live {
    history: Arc<RwLock<History>>,
    progress: Arc<RwLock<Progress>>,
    events: broadcast::Sender<Arc<LiveEvent>>,
    clients: Arc<Semaphore>,
    /// Streams open per identity.
    shares: Arc<Mutex<HashMap<String, usize>>>,
    metrics: Option<Arc<Metrics>>,
    config: LiveConfig,
}

/// A live stream refused: too many are open.
#[derive(Debug, thiserror::Error)]
pub enum Busy {
    /// The dashboard's limit.
    #[error(
        "too many live pages are open ({0}, --dashboard-live-streams); close some or try again later"
    )]
    Full(usize),
    /// The identity's share.
    #[error(
        "{who} has {max} live pages open, its share (--dashboard-live-streams-per-identity); \
         close some"
    )]
    Share {
        /// The identity.
        who: String,
        /// Its share.
        max: usize,
    },
}

impl Busy {
    /// The limit's metric label.
    pub fn limit(&self) -> &'static str {
        match self {
            Busy::Full(_) => "dashboard_live",
            Busy::Share { .. } => "dashboard_live_per_identity",
        }
    }
}

/// One identity's place among the open streams, given back when the stream ends.
struct Share {
    shares: Arc<Mutex<HashMap<String, usize>>>,
    who: String,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut shares = self.shares.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = shares.get_mut(&self.who) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                shares.remove(&self.who);
            }
        }
    }
}

impl Live {
    /// Starts following `inventory`, and the controllers' views while `controllers` holds
    /// them; the task ends on `shutdown`.
    pub fn start(
        inventory: ClusterInventory,
        controllers: watch::Receiver<Option<Arc<Controllers>>>,
        config: LiveConfig,
        shutdown: watch::Receiver<bool>,
    ) -> (Self, JoinHandle<()>) {
        let (events, _) = broadcast::channel(config.buffer.max(16));
        let live = Self {
            history: Arc::new(RwLock::new(History::new(config.history))),
            progress: Arc::new(RwLock::new(Progress::new(config.progress))),
            events,
            clients: Arc::new(Semaphore::new(config.max_clients)),
            shares: Arc::default(),
            metrics: None,
            config,
        };
        // Subscribe before the first catch-up so that nothing falls between them.
        let rx = inventory.subscribe();
        live.catch_up(&inventory, true);
        let task = tokio::spawn(
            live.clone()
                .follow(inventory, rx, controllers, shutdown)
                .instrument(tracing::info_span!("dashboard_live")),
        );
        (live, task)
    }

    /// Counts refused streams in `metrics` (`flotilla_hub_limit_refusals_total`).
    pub fn count_refusals_in(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The progress seen of a rollout (`rollout:<ns>/<name>`, `addon:<name>`), oldest first.
    pub fn progress(&self, key: &str) -> Vec<super::progress::Point> {
        self.progress.read().expect("progress lock").points(key)
    }

    /// Subscribes to the controllers' views (when they run here) and records every rollout's
    /// progress now.
    fn follow_controllers(
        &self,
        controllers: &watch::Receiver<Option<Arc<Controllers>>>,
    ) -> SelectAll<BoxStream<'static, ObjectChange>> {
        let mut views = SelectAll::new();
        let Some(ctl) = controllers.borrow().clone() else {
            return views;
        };
        // Subscribe before reading so that nothing falls between.
        views.push(follow_view(
            ctl.get::<crate::placement::Placements>().views(),
            Kind::Placement,
            None,
        ));
        views.push(follow_view(
            ctl.get::<crate::replicaset::ReplicaSets>().views(),
            Kind::Rollout,
            Some(super::progress::of_replica_set),
        ));
        views.push(follow_view(
            &ctl.get::<crate::addon::AddOns>().store().addon_views,
            Kind::AddOn,
            Some(super::progress::of_addon),
        ));
        views.push(follow_view(
            ctl.get::<crate::policy::Policies>().views(),
            Kind::Policy,
            None,
        ));
        self.record_all(&ctl, None);
        views
    }

    /// Records every replica set's and add-on's progress (`only`: one kind).
    fn record_all(&self, ctl: &Controllers, only: Option<Kind>) {
        let now = SystemTime::now();
        let mut p = self.progress.write().expect("progress lock");
        if only.is_none_or(|k| k == Kind::Rollout) {
            for (key, rs) in ctl
                .get::<crate::replicaset::ReplicaSets>()
                .views()
                .with_prefix("")
            {
                p.record(
                    &format!("rollout:{key}"),
                    now,
                    super::progress::of_replica_set(&rs),
                );
            }
        }
        if only.is_none_or(|k| k == Kind::AddOn) {
            for (key, a) in ctl
                .get::<crate::addon::AddOns>()
                .store()
                .addon_views
                .with_prefix("")
            {
                p.record(&format!("addon:{key}"), now, super::progress::of_addon(&a));
            }
        }
    }

    /// Reads the history.
    pub fn read<T>(&self, f: impl FnOnce(&History) -> T) -> T {
        f(&self.history.read().expect("history lock"))
    }

    /// Streams open now.
    pub fn clients(&self) -> usize {
        self.config.max_clients - self.clients.available_permits()
    }

    /// Observes every cluster now (at start, and after falling behind the broadcast).
    fn catch_up(&self, inventory: &ClusterInventory, initial: bool) -> Vec<Transition> {
        let now = SystemTime::now();
        let all = inventory.with_prefix("");
        let mut history = self.history.write().expect("history lock");
        let mut out = Vec::new();
        let mut present = HashSet::with_capacity(all.len());
        for (name, c) in &all {
            out.extend(history.observe(name, Some(Availability::of(c)), now, initial));
            present.insert(name.clone());
        }
        out.extend(history.retain(&present, now));
        out
    }

    async fn follow(
        self,
        inventory: ClusterInventory,
        mut rx: broadcast::Receiver<crate::inventory::Change<flotilla_api::v1::ManagedCluster>>,
        mut controllers: watch::Receiver<Option<Arc<Controllers>>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut summary = tokio::time::interval(self.config.summary_every);
        // After a quiet spell the first change goes out at once and the next wait a whole
        // period (the default would fire every missed tick at once: no coalescing).
        summary.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sample = tokio::time::interval(self.config.sample_every);
        let mut dirty = false;
        let mut objects = Dirty::default();
        controllers.mark_unchanged();
        let mut views = self.follow_controllers(&controllers);
        let mut hosted = true;
        loop {
            tokio::select! {
                changed = controllers.changed(), if hosted => {
                    if changed.is_err() {
                        // The hub is stopping: no controllers any more.
                        hosted = false;
                        views = SelectAll::new();
                    } else {
                        views = self.follow_controllers(&controllers);
                    }
                    // Started or stopped here: every page of a controller's object is stale.
                    for kind in [Kind::Placement, Kind::Rollout, Kind::AddOn, Kind::Policy] {
                        objects.mark(kind, None);
                    }
                }
                Some(change) = views.next(), if !views.is_empty() => match change {
                    ObjectChange::One { kind, key, progress } => {
                        let tagged = format!("{}:{key}", kind.as_str());
                        {
                            let mut p = self.progress.write().expect("progress lock");
                            match progress {
                                Some(v) => p.record(&tagged, SystemTime::now(), v),
                                None if matches!(kind, Kind::Rollout | Kind::AddOn) => p.forget(&tagged),
                                None => {}
                            }
                        }
                        objects.mark(kind, Some(key));
                    }
                    ObjectChange::Lagged(kind) => {
                        tracing::debug!(kind = kind.as_str(), "dashboard: fell behind a controller's view");
                        if let Some(ctl) = controllers.borrow().clone() {
                            self.record_all(&ctl, Some(kind));
                        }
                        objects.mark(kind, None);
                    }
                },
                change = rx.recv() => {
                    let transitions = match change {
                        Ok(c) => {
                            let now = match c.kind {
                                ChangeKind::Deleted => None,
                                _ => Some(Availability::of(&c.object)),
                            };
                            let mut h = self.history.write().expect("history lock");
                            h.observe(&c.key, now, SystemTime::now(), false).into_iter().collect()
                        }
                        Err(RecvError::Lagged(n)) => {
                            tracing::debug!(missed = n, "dashboard: fell behind the inventory; catching up");
                            self.catch_up(&inventory, false)
                        }
                        Err(RecvError::Closed) => break,
                    };
                    for t in transitions {
                        dirty = true;
                        let _ = self.events.send(Arc::new(LiveEvent::Transition(t)));
                    }
                }
                _ = summary.tick(), if dirty || !objects.is_empty() => {
                    if dirty {
                        dirty = false;
                        let counts = self.read(History::counts);
                        let _ = self.events.send(Arc::new(LiveEvent::Summary(counts)));
                    }
                    for e in objects.drain() {
                        let _ = self.events.send(Arc::new(e));
                    }
                }
                _ = sample.tick() => {
                    self.history.write().expect("history lock").sample(SystemTime::now());
                }
                _ = shutdown.changed() => break,
            }
        }
    }

    /// A stream for `who`'s page that shows `clusters` (`None`: every cluster's transitions)
    /// and `follows` controllers' objects, of what `who` may see by `teams` (its
    /// [`Fence`]), ended by `shutdown`; refused (counted) when [`LiveConfig::max_clients`] are
    /// open, or [`LiveConfig::max_per_identity`] of `who`'s.
    pub fn stream(
        &self,
        who: (&Identity, &Teams),
        clusters: Option<HashSet<String>>,
        follows: Follows,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Events, Busy> {
        let (caller, teams) = who;
        let who = caller.name();
        let (share, permit) = self.admit(who).inspect_err(|busy| {
            if let Some(m) = &self.metrics {
                m.limit_refused(busy.limit());
            }
        })?;
        // Subscribe before reading the state sent first, so that nothing falls between.
        let rx = self.events.subscribe();
        let mut first = String::from("retry: 2000\n\n");
        let fence = self.read(|h| {
            let fence = Fence::of(teams, caller, h);
            let counts = fence.as_ref().map_or(h.counts(), |f| f.summary(h.counts()));
            first.push_str(&encode(&LiveEvent::Summary(counts)));
            let seen = |name: &str| fence.as_ref().is_none_or(|f| f.cluster(name));
            for name in clusters.iter().flatten().filter(|n| seen(n)) {
                if let Some(a) = h.state(name) {
                    first.push_str(&cluster_event(name, Some(a)));
                }
            }
            fence
        });
        let state = Streaming {
            rx,
            clusters,
            follows,
            fence,
            history: self.history.clone(),
            heartbeat: tokio::time::interval_at(
                tokio::time::Instant::now() + self.config.heartbeat,
                self.config.heartbeat,
            ),
            shutdown,
            pending: Some(first),
            ended: false,
            _permit: permit,
            _share: share,
        };
        Ok(Box::pin(futures::stream::unfold(state, next)))
    }

    /// A place for one more stream of `who`: its share first, then the dashboard's.
    fn admit(&self, who: &str) -> Result<(Share, OwnedSemaphorePermit), Busy> {
        let share = {
            let mut shares = self.shares.lock().unwrap_or_else(|p| p.into_inner());
            let n = shares.entry(who.to_string()).or_default();
            if *n >= self.config.max_per_identity {
                return Err(Busy::Share {
                    who: who.to_string(),
                    max: self.config.max_per_identity,
                });
            }
            *n += 1;
            Share {
                shares: self.shares.clone(),
                who: who.to_string(),
            }
        };
        let permit = self
            .clients
            .clone()
            .try_acquire_owned()
            .map_err(|_| Busy::Full(self.config.max_clients))?;
        Ok((share, permit))
    }
}

/// One open stream.
struct Streaming {
    rx: broadcast::Receiver<Arc<LiveEvent>>,
    clusters: Option<HashSet<String>>,
    follows: Follows,
    /// What its viewer may be told (none: everything).
    fence: Option<Fence>,
    history: Arc<RwLock<History>>,
    heartbeat: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
    pending: Option<String>,
    ended: bool,
    _permit: OwnedSemaphorePermit,
    _share: Share,
}

async fn next(mut s: Streaming) -> Option<(Result<Frame<Bytes>, Infallible>, Streaming)> {
    let frame = |text: String| Ok(Frame::data(Bytes::from(text)));
    if let Some(first) = s.pending.take() {
        return Some((frame(first), s));
    }
    if s.ended || *s.shutdown.borrow() {
        return None;
    }
    loop {
        tokio::select! {
            event = s.rx.recv() => match event {
                Ok(e) => {
                    if !s.fence.as_mut().is_none_or(|f| f.admits(&e)) {
                        continue;
                    }
                    let wanted = match &*e {
                        LiveEvent::Transition(t) => s
                            .clusters
                            .as_ref()
                            .is_none_or(|names| names.contains(&*t.cluster)),
                        LiveEvent::Summary(_) => true,
                        LiveEvent::Changed { kind, key } => s.follows.wants(*kind, key),
                    };
                    if !wanted {
                        continue;
                    }
                    let text = match (&*e, &mut s.fence) {
                        // Its own counts, and only when they changed.
                        (LiveEvent::Summary(fleet), Some(f)) => match f.summary_changed(*fleet) {
                            Some(counts) => encode(&LiveEvent::Summary(counts)),
                            None => continue,
                        },
                        _ => encode(&e),
                    };
                    return Some((frame(text), s));
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "dashboard: a live page fell behind; dropping it");
                    s.ended = true;
                    return Some((frame(RESET.into()), s));
                }
                Err(RecvError::Closed) => return None,
            },
            next = fenced(&mut s.fence, &s.history) => match next {
                FenceNext::Reset => {
                    s.ended = true;
                    return Some((frame(RESET.into()), s));
                }
                FenceNext::Summary(counts) => {
                    return Some((frame(encode(&LiveEvent::Summary(counts))), s));
                }
            },
            _ = s.heartbeat.tick() => return Some((frame(": ping\n\n".into()), s)),
            _ = s.shutdown.changed() => return None,
        }
    }
}

/// What tells a page to read itself again (its script reloads it), before its stream ends.
const RESET: &str = "event: reset\ndata: {}\n\n";

/// The next change of `fence`'s grants or set index (never, without a fence).
async fn fenced(fence: &mut Option<Fence>, history: &RwLock<History>) -> FenceNext {
    match fence {
        Some(f) => f.changed(history).await,
        None => std::future::pending().await,
    }
}

/// A cluster's state as an SSE event.
fn cluster_event(name: &str, to: Option<Availability>) -> String {
    let data = serde_json::json!({
        "cluster": name,
        "to": to.map(Availability::as_str),
    });
    format!("event: cluster\ndata: {data}\n\n")
}

/// An event as SSE text (JSON data: one line, nothing a page would run).
pub fn encode(e: &LiveEvent) -> String {
    match e {
        LiveEvent::Transition(t) => {
            let mut out = cluster_event(&t.cluster, t.to);
            let data = serde_json::json!({
                "cluster": &*t.cluster,
                "from": t.from.map(Availability::as_str),
                "to": t.to.map(Availability::as_str),
                "at": super::html::system_time(t.at),
            });
            out.push_str(&format!("event: transition\ndata: {data}\n\n"));
            out
        }
        LiveEvent::Changed { kind, key } => {
            let data = serde_json::json!({"kind": kind.as_str(), "key": &**key});
            format!("event: changed\ndata: {data}\n\n")
        }
        LiveEvent::Summary(c) => {
            let mut counts = serde_json::Map::new();
            for a in Availability::ALL {
                counts.insert(a.as_str().into(), c.get(a).into());
            }
            counts.insert("total".into(), c.total().into());
            format!(
                "event: summary\ndata: {}\n\n",
                serde_json::Value::Object(counts)
            )
        }
    }
}

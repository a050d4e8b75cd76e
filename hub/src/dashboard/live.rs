//! The live feed: one task follows the cluster inventory's change notifications (the same
//! broadcast the gRPC Watch APIs stream from), keeps the [`History`] and publishes what pages
//! show — a cluster's new availability, the counts — to every open page as Server-Sent Events.
//!
//! Bounds: at most [`LiveConfig::max_clients`] streams at once (more are answered 503); all
//! streams share one broadcast ring of [`LiveConfig::buffer`] events, so a page that does not
//! read is at most that far behind — further and it is dropped (`event: reset`, its script
//! reloads the page), never buffered without limit. Shutdown ends every stream.

use super::history::{Availability, Counts, History, HistoryLimits, Transition};
use crate::inventory::{ChangeKind, ClusterInventory};
use bytes::Bytes;
use futures::Stream;
use hyper::body::Frame;
use std::collections::HashSet;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, watch};
use tokio::task::JoinHandle;

/// How the live feed is bounded.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Streams open at once (default 64).
    pub max_clients: usize,
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
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            max_clients: 64,
            buffer: 1024,
            heartbeat: Duration::from_secs(15),
            summary_every: Duration::from_millis(500),
            sample_every: Duration::from_secs(10),
            history: HistoryLimits::default(),
        }
    }
}

/// What an open page is told.
#[derive(Debug, Clone)]
pub enum LiveEvent {
    /// A cluster changed state.
    Transition(Transition),
    /// The counts now.
    Summary(Counts),
}

/// A stream's body: SSE frames.
pub type Events = Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>;

/// The feed: the history pages read, the broadcast streams follow.
#[derive(Clone)]
pub struct Live {
    history: Arc<RwLock<History>>,
    events: broadcast::Sender<Arc<LiveEvent>>,
    clients: Arc<Semaphore>,
    config: LiveConfig,
}

/// Too many streams are open.
#[derive(Debug, thiserror::Error)]
#[error("too many live pages are open ({0}); try again later")]
pub struct Busy(pub usize);

impl Live {
    /// Starts following `inventory`; the task ends on `shutdown`.
    pub fn start(
        inventory: ClusterInventory,
        config: LiveConfig,
        shutdown: watch::Receiver<bool>,
    ) -> (Self, JoinHandle<()>) {
        let (events, _) = broadcast::channel(config.buffer.max(16));
        let live = Self {
            history: Arc::new(RwLock::new(History::new(config.history))),
            events,
            clients: Arc::new(Semaphore::new(config.max_clients)),
            config,
        };
        // Subscribe before the first catch-up so that nothing falls between them.
        let rx = inventory.subscribe();
        live.catch_up(&inventory, true);
        let task = tokio::spawn(live.clone().follow(inventory, rx, shutdown));
        (live, task)
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
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut summary = tokio::time::interval(self.config.summary_every);
        let mut sample = tokio::time::interval(self.config.sample_every);
        let mut dirty = false;
        loop {
            tokio::select! {
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
                _ = summary.tick(), if dirty => {
                    dirty = false;
                    let counts = self.read(History::counts);
                    let _ = self.events.send(Arc::new(LiveEvent::Summary(counts)));
                }
                _ = sample.tick() => {
                    self.history.write().expect("history lock").sample(SystemTime::now());
                }
                _ = shutdown.changed() => break,
            }
        }
    }

    /// A stream for a page that shows `clusters` (`None`: every cluster's transitions), ended
    /// by `shutdown`; refused when [`LiveConfig::max_clients`] are open.
    pub fn stream(
        &self,
        clusters: Option<HashSet<String>>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Events, Busy> {
        let permit = self
            .clients
            .clone()
            .try_acquire_owned()
            .map_err(|_| Busy(self.config.max_clients))?;
        // Subscribe before reading the state sent first, so that nothing falls between.
        let rx = self.events.subscribe();
        let mut first = String::from("retry: 2000\n\n");
        self.read(|h| {
            first.push_str(&encode(&LiveEvent::Summary(h.counts())));
            for name in clusters.iter().flatten() {
                if let Some(a) = h.state(name) {
                    first.push_str(&cluster_event(name, Some(a)));
                }
            }
        });
        let state = Streaming {
            rx,
            clusters,
            heartbeat: tokio::time::interval_at(
                tokio::time::Instant::now() + self.config.heartbeat,
                self.config.heartbeat,
            ),
            shutdown,
            pending: Some(first),
            ended: false,
            _permit: permit,
        };
        Ok(Box::pin(futures::stream::unfold(state, next)))
    }
}

/// One open stream.
struct Streaming {
    rx: broadcast::Receiver<Arc<LiveEvent>>,
    clusters: Option<HashSet<String>>,
    heartbeat: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
    pending: Option<String>,
    ended: bool,
    _permit: OwnedSemaphorePermit,
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
                    if let LiveEvent::Transition(t) = &*e
                        && let Some(names) = &s.clusters
                        && !names.contains(&*t.cluster)
                    {
                        continue;
                    }
                    return Some((frame(encode(&e)), s));
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "dashboard: a live page fell behind; dropping it");
                    s.ended = true;
                    return Some((frame("event: reset\ndata: {}\n\n".into()), s));
                }
                Err(RecvError::Closed) => return None,
            },
            _ = s.heartbeat.tick() => return Some((frame(": ping\n\n".into()), s)),
            _ = s.shutdown.changed() => return None,
        }
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

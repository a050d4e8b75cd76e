//! The gRPC API (`flotilla.v1`): the cluster and work services here, and `AccessService`
//! ([`whoami`]: who the hub takes the caller for); each controller family's
//! service in its own folder (`crate::placement::grpc`, `crate::policy::grpc`, …), built on the
//! helpers below (watch streams, status mapping). Errors map to the status codes clients expect: `INVALID_ARGUMENT` naming the field,
//! `NOT_FOUND`, `ABORTED` for a stale resourceVersion, `PERMISSION_DENIED` naming the caller,
//! `UNAVAILABLE` when storage is down.
//!
//! Every call passes [`guard`] (rejections counted), [`auth`] (bearer tokens and roles) and
//! [`capacity`] (each identity's share of calls and watches) before a service; [`access`] is
//! the table of what each method needs. Watches stream through [`watch`]: lazily, and a
//! watcher that reads nothing is dropped after a deadline.

// What every service passes through, from the core (`crate::grpc::auth`, … as before).
pub use flotilla_hub_core::grpc::{access, api, auth, capacity, forward, guard, late};

pub mod cluster;
pub mod whoami;
pub mod work;

use crate::clusterset::SetError;
use crate::grants::index::Changed;
use crate::inventory::{ChangeKind, Inventory, Tally};
pub use capacity::WatchSettings;
use flotilla_api::selector;
use flotilla_api::v1::{EventType, LabelSelector, ObjectMeta};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tonic::Status;
use tracing::Instrument;

/// Parses the `labelSelector` field of a list or watch request.
pub(crate) fn parse_selector(s: &str) -> Result<LabelSelector, Status> {
    selector::parse(s).map_err(|e| Status::invalid_argument(format!("labelSelector: {e}")))
}

/// Whether an object with this metadata is selected.
pub(crate) fn selects(sel: &LabelSelector, meta: Option<&ObjectMeta>) -> bool {
    match meta {
        Some(m) => selector::matches_labels(sel, &m.labels),
        None => selector::matches_labels(sel, &HashMap::new()),
    }
}

/// A server stream of watch events.
pub type WatchStream<E> = Pin<Box<dyn Stream<Item = Result<E, Status>> + Send>>;

/// Where a watch task sends its events: a queue of [`WatchSettings::queue`] events that the
/// client's HTTP/2 stream drains. A client that takes nothing for [`WatchSettings::slow_after`]
/// (it grants no flow-control window, or reads nothing) is dropped: the task ends, and the
/// stream ends with `RESOURCE_EXHAUSTED` saying why when the client reads again.
pub struct WatchSink<E> {
    tx: tokio::sync::mpsc::Sender<Result<E, Status>>,
    settings: WatchSettings,
    dropped: Arc<OnceLock<Status>>,
}

impl<E: Send + 'static> WatchSink<E> {
    /// Sends one event; false when the watch is over (the client went, or was dropped as slow).
    pub async fn send(&self, event: Result<E, Status>) -> bool {
        use tokio::sync::mpsc::error::TrySendError;
        let event = match self.tx.try_send(event) {
            Ok(()) => return true,
            Err(TrySendError::Closed(_)) => return false,
            Err(TrySendError::Full(event)) => event,
        };
        match tokio::time::timeout(self.settings.slow_after, self.tx.send(event)).await {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                let _ = self.dropped.set(self.settings.dropped());
                false
            }
        }
    }
}

/// A watch stream fed by a task through a [`WatchSink`]; the task ends when the client goes.
pub fn watch_stream<E, F, Fut>(settings: &WatchSettings, f: F) -> WatchStream<E>
where
    E: Send + 'static,
    F: FnOnce(WatchSink<E>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(settings.queue.max(1));
    let dropped = Arc::new(OnceLock::new());
    let span = tracing::info_span!("watch", events = std::any::type_name::<E>());
    tokio::spawn(
        f(WatchSink {
            tx,
            settings: settings.clone(),
            dropped: dropped.clone(),
        })
        .instrument(span),
    );
    Box::pin(Watched {
        rx,
        dropped,
        ended: false,
    })
}

/// The client's side of a [`WatchSink`]: once the watcher is dropped, its status comes next
/// (what was queued is let go) and then the end.
struct Watched<E> {
    rx: tokio::sync::mpsc::Receiver<Result<E, Status>>,
    dropped: Arc<OnceLock<Status>>,
    ended: bool,
}

impl<E> Stream for Watched<E> {
    type Item = Result<E, Status>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.ended {
            return std::task::Poll::Ready(None);
        }
        if let Some(status) = self.dropped.get().cloned() {
            self.ended = true;
            self.rx.close();
            return std::task::Poll::Ready(Some(Err(status)));
        }
        self.rx.poll_recv(cx)
    }
}

/// Streams the current objects of an inventory that pass `filter` as ADDED, then every change.
///
/// The current objects are streamed lazily: the watch takes the keys and makes each event when
/// the client has room for it, so a client that reads nothing costs the hub the keys and a
/// queue of [`WatchSettings::queue`] events — not a copy of every object (200 unread watches
/// over 2,000 clusters took a hub from 82 MiB to 1.7 GiB when each copied them all first).
///
/// A watcher that falls behind the change broadcast (a slow client during a burst) is not cut
/// off: it is caught up with the current state — MODIFIED for every object it should see that
/// changed since it last saw it (or that it has not seen), and DELETED for objects it saw that
/// are gone — and then follows changes again. Objects it already holds are not sent again: at
/// 100,000 clusters a catch-up that re-sent everything took longer than the next burst took to
/// overflow the broadcast, so the watcher never caught up and the hub spent its time encoding.
pub fn watch<T, X, E, F, M>(
    settings: &WatchSettings,
    inventory: &Inventory<T, X>,
    filter: F,
    make: M,
) -> WatchStream<E>
where
    T: Send + Sync + 'static,
    X: Tally<T> + 'static,
    E: Send + 'static,
    F: Fn(&str, &T) -> bool + Send + Sync + 'static,
    M: Fn(EventType, &T) -> E + Send + Sync + 'static,
{
    watch_fenced(settings, inventory, WatchFence::open(), filter, make)
}

/// How a watch's objects are fenced by the caller's grants (issue 48): which part of a key
/// names what the caller must see, and the grants and set index it follows.
pub struct WatchFence {
    teams: guard::Teams,
    caller: Option<auth::Identity>,
    by: By,
}

/// What decides whether a watcher sees an object, by its inventory key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The key is a cluster's name.
    Cluster,
    /// The key is `<cluster>/<name>`: an object of a cluster's namespace.
    InCluster,
    /// The key is `<namespace>/<name>`: an object of a workspace namespace.
    InNamespace,
}

impl WatchFence {
    /// No fence: the watcher sees what its filter passes.
    pub fn open() -> Self {
        Self {
            teams: guard::Teams::default(),
            caller: None,
            by: By::Cluster,
        }
    }

    /// `caller`'s grants in `teams` fence the objects, each by its key as `by` says.
    pub fn new(teams: &guard::Teams, caller: Option<&auth::Identity>, by: By) -> Self {
        Self {
            teams: teams.clone(),
            caller: caller.cloned(),
            by,
        }
    }

    fn visibility(&self) -> guard::Visibility {
        self.teams.visibility(self.caller.as_ref())
    }

    fn sees(&self, vis: &guard::Visibility, key: &str) -> bool {
        if vis.is_all() {
            return true;
        }
        match self.by {
            By::Cluster => vis.cluster(key),
            By::InCluster => key.split_once('/').is_some_and(|(c, _)| vis.cluster(c)),
            By::InNamespace => key.split_once('/').is_some_and(|(n, _)| vis.namespace(n)),
        }
    }

    /// The keys of `inventory` a move of `cluster` between sets may show or hide.
    fn keys_of<T: Send + Sync + 'static, X: Tally<T> + 'static>(
        &self,
        inventory: &Inventory<T, X>,
        cluster: &str,
    ) -> Vec<Arc<str>> {
        match self.by {
            By::Cluster => vec![Arc::from(cluster)],
            By::InCluster => inventory
                .with_prefix(&format!("{cluster}/"))
                .into_iter()
                .map(|(k, _)| k)
                .collect(),
            By::InNamespace => Vec::new(),
        }
    }
}

/// Waits for a change of `rx`; never, without one (or once its sender is gone).
async fn changed<V>(rx: &mut Option<tokio::sync::watch::Receiver<V>>) {
    if let Some(r) = rx
        && r.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// [`watch`], fenced by the caller's grants: the watcher sees only what `fence` lets it, and
/// when the fence moves — a cluster changes sets, the grants are reloaded — it gets DELETED
/// for what it may no longer see and ADDED for what it now may (docs/notes/issue-48-design.md
/// §6.2). A cluster moving re-checks that cluster's keys only; a set's rule changing or a
/// reload re-checks every key.
pub fn watch_fenced<T, X, E, F, M>(
    settings: &WatchSettings,
    inventory: &Inventory<T, X>,
    fence: WatchFence,
    filter: F,
    make: M,
) -> WatchStream<E>
where
    T: Send + Sync + 'static,
    X: Tally<T> + 'static,
    E: Send + 'static,
    F: Fn(&str, &T) -> bool + Send + Sync + 'static,
    M: Fn(EventType, &T) -> E + Send + Sync + 'static,
{
    // Subscribe before the snapshot so that no change falls between them.
    let mut rx = inventory.subscribe();
    let live = fence.teams.live().filter(|_| fence.caller.is_some());
    let mut index_rx = live.map(|l| l.index().subscribe());
    let mut grants_rx = live.map(|l| l.subscribe());
    let inventory = inventory.clone();
    watch_stream(settings, move |sink| async move {
        let mut seen: HashMap<Arc<str>, Arc<T>> = HashMap::new();
        let view = View {
            inventory: &inventory,
            filter: &filter,
            make: &make,
            fence: &fence,
        };
        let mut vis = fence.visibility();
        if let Some(rx) = index_rx.as_mut() {
            rx.borrow_and_update();
        }
        if let Some(rx) = grants_rx.as_mut() {
            rx.borrow_and_update();
        }
        if !view.sync(&vis, EventType::Added, &mut seen, &sink).await {
            return;
        }
        loop {
            let next = tokio::select! {
                next = rx.recv() => next,
                () = changed(&mut index_rx) => {
                    let published = index_rx.as_mut().map(|r| r.borrow_and_update().clone());
                    let moved = published.map_or(Changed::All, |p| p.since(vis.index_generation()));
                    let was_all = vis.is_all();
                    vis = fence.visibility();
                    let done = match moved {
                        _ if was_all && vis.is_all() => true,
                        Changed::Some(clusters) => view.recheck(&vis, &clusters, &mut seen, &sink).await,
                        Changed::All => view.sync(&vis, EventType::Added, &mut seen, &sink).await,
                    };
                    if !done {
                        return;
                    }
                    continue;
                }
                () = changed(&mut grants_rx) => {
                    vis = fence.visibility();
                    if !view.sync(&vis, EventType::Added, &mut seen, &sink).await {
                        return;
                    }
                    continue;
                }
            };
            let event = match next {
                Ok(change) => {
                    let visible = view.visible(&vis, &change.key, &change.object);
                    let known = seen.get(&change.key);
                    let kind = match change.kind {
                        ChangeKind::Deleted if known.is_some() => EventType::Deleted,
                        ChangeKind::Deleted => continue,
                        // An object that stops matching leaves this watcher's view.
                        _ if !visible && known.is_some() => EventType::Deleted,
                        _ if !visible => continue,
                        // Already sent in this state (while the watch listed its objects).
                        _ if known.is_some_and(|o| Arc::ptr_eq(o, &change.object)) => continue,
                        _ if known.is_some() => EventType::Modified,
                        _ => EventType::Added,
                    };
                    if kind == EventType::Deleted {
                        seen.remove(&change.key);
                    } else {
                        seen.insert(change.key.clone(), change.object.clone());
                    }
                    make(kind, &change.object)
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "watcher fell behind; catching it up");
                    if !view.sync(&vis, EventType::Modified, &mut seen, &sink).await {
                        return;
                    }
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            if !sink.send(Ok(event)).await {
                return;
            }
        }
    })
}

/// What one watch sees of an inventory.
struct View<'a, T, X, F, M> {
    inventory: &'a Inventory<T, X>,
    filter: &'a F,
    make: &'a M,
    fence: &'a WatchFence,
}

impl<T, X, E, F, M> View<'_, T, X, F, M>
where
    T: Send + Sync + 'static,
    X: Tally<T> + 'static,
    E: Send + 'static,
    F: Fn(&str, &T) -> bool,
    M: Fn(EventType, &T) -> E,
{
    fn visible(&self, vis: &guard::Visibility, key: &str, object: &T) -> bool {
        self.fence.sees(vis, key) && (self.filter)(key, object)
    }

    /// Brings a watcher that saw `seen` to the inventory's current state: `kind` for each
    /// visible object it has not seen, MODIFIED for each it saw in another state, DELETED for
    /// each it saw that is gone or no longer visible. Objects are looked up and their events
    /// made one at a time, as the client takes them. False when the watch is over.
    async fn sync(
        &self,
        vis: &guard::Visibility,
        kind: EventType,
        seen: &mut HashMap<Arc<str>, Arc<T>>,
        sink: &WatchSink<E>,
    ) -> bool {
        for key in self.inventory.keys() {
            let event = match self.inventory.get(&key) {
                Some(object) if self.visible(vis, &key, &object) => {
                    let event = match seen.get(&key) {
                        Some(old) if Arc::ptr_eq(old, &object) => None,
                        Some(_) => Some((self.make)(EventType::Modified, &object)),
                        None => Some((self.make)(kind, &object)),
                    };
                    seen.insert(key, object);
                    event
                }
                _ => seen
                    .remove(&key)
                    .map(|old| (self.make)(EventType::Deleted, &old)),
            };
            if let Some(event) = event
                && !sink.send(Ok(event)).await
            {
                return false;
            }
        }
        // Objects it saw that were gone before the keys were taken.
        let gone: Vec<Arc<str>> = seen
            .keys()
            .filter(|k| self.inventory.get(k).is_none())
            .cloned()
            .collect();
        for key in gone {
            if let Some(old) = seen.remove(&key)
                && !sink.send(Ok((self.make)(EventType::Deleted, &old))).await
            {
                return false;
            }
        }
        true
    }

    /// Checks again the keys of `clusters`, which moved between sets: ADDED for what the
    /// watcher now sees, DELETED for what it no longer does. False when the watch is over.
    async fn recheck(
        &self,
        vis: &guard::Visibility,
        clusters: &[Arc<str>],
        seen: &mut HashMap<Arc<str>, Arc<T>>,
        sink: &WatchSink<E>,
    ) -> bool {
        for cluster in clusters {
            for key in self.fence.keys_of(self.inventory, cluster) {
                let now = self
                    .inventory
                    .get(&key)
                    .filter(|o| self.visible(vis, &key, o));
                let event = match (now, seen.contains_key(&key)) {
                    (Some(object), false) => {
                        let event = (self.make)(EventType::Added, &object);
                        seen.insert(key, object);
                        event
                    }
                    (None, true) => match seen.remove(&key) {
                        Some(old) => (self.make)(EventType::Deleted, &old),
                        None => continue,
                    },
                    _ => continue,
                };
                if !sink.send(Ok(event)).await {
                    return false;
                }
            }
        }
        true
    }
}

impl From<SetError> for Status {
    fn from(e: SetError) -> Self {
        match &e {
            SetError::Invalid(_) => Status::invalid_argument(e.to_string()),
            SetError::NotFound(_) => Status::not_found(e.to_string()),
            SetError::Conflict(_) => Status::aborted(e.to_string()),
            SetError::Precondition(_) => Status::failed_precondition(e.to_string()),
            SetError::Store(_) => Status::unavailable(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;

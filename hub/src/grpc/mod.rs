//! The gRPC API (`flotilla.v1`): cluster, cluster-set, work, placement, replica-set, add-on and
//! policy services. Errors map to the status codes clients expect: `INVALID_ARGUMENT` naming the field,
//! `NOT_FOUND`, `ABORTED` for a stale resourceVersion, `PERMISSION_DENIED` naming the caller,
//! `UNAVAILABLE` when storage is down.
//!
//! Every call passes [`guard`] (rejections counted) and [`auth`] (bearer tokens and roles) before
//! a service; [`access`] is the table of what each method needs.

pub mod access;
pub mod addon;
pub mod auth;
pub mod cluster;
pub mod clusterset;
pub mod forward;
pub mod guard;
pub mod importpolicy;
pub mod late;
pub mod mirrorpeer;
pub mod placement;
pub mod policy;
pub mod replicaset;
pub mod serviceaccount;
pub mod work;

use crate::cluster::ClusterError;
use crate::clusterset::SetError;
use crate::inventory::{ChangeKind, Inventory};
use flotilla_api::selector;
use flotilla_api::v1::{EventType, LabelSelector, ObjectMeta};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tonic::Status;

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

/// A server stream fed by a task through a bounded channel (the task ends when the client goes).
pub fn async_stream<T, F, Fut>(f: F) -> Pin<Box<dyn Stream<Item = T> + Send>>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    tokio::spawn(f(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// A server stream of watch events.
pub type WatchStream<E> = Pin<Box<dyn Stream<Item = Result<E, Status>> + Send>>;

/// Streams the current objects of an inventory that pass `filter` as ADDED, then every change.
///
/// A watcher that falls behind the change broadcast (a slow client during a burst) is not cut
/// off: it is caught up with the current state — MODIFIED for every object it should see that
/// changed since it last saw it (or that it has not seen), and DELETED for objects it saw that
/// are gone — and then follows changes again. Objects it already holds are not sent again: at
/// 100,000 clusters a catch-up that re-sent everything took longer than the next burst took to
/// overflow the broadcast, so the watcher never caught up and the hub spent its time encoding.
pub fn watch<T, E, F, M>(inventory: &Inventory<T>, filter: F, make: M) -> WatchStream<E>
where
    T: Send + Sync + 'static,
    E: Send + 'static,
    F: Fn(&str, &T) -> bool + Send + Sync + 'static,
    M: Fn(EventType, &T) -> E + Send + Sync + 'static,
{
    // Subscribe before the snapshot so that no change falls between them.
    let mut rx = inventory.subscribe();
    let inventory = inventory.clone();
    async_stream(move |tx| async move {
        let mut seen: HashMap<Arc<str>, Arc<T>> = HashMap::new();
        let catch_up = |kind: EventType, seen: &mut HashMap<Arc<str>, Arc<T>>| {
            let mut events = Vec::new();
            let mut now: HashMap<Arc<str>, Arc<T>> = HashMap::new();
            for (k, v) in inventory.with_prefix("") {
                if filter(&k, &v) {
                    // The inventory replaces an object's `Arc` on every change.
                    if !seen.get(&k).is_some_and(|old| Arc::ptr_eq(old, &v)) {
                        events.push(make(kind, &v));
                    }
                    now.insert(k, v);
                }
            }
            for (k, v) in seen.iter() {
                if !now.contains_key(k) {
                    events.push(make(EventType::Deleted, v));
                }
            }
            *seen = now;
            events
        };
        for ev in catch_up(EventType::Added, &mut seen) {
            if tx.send(Ok(ev)).await.is_err() {
                return;
            }
        }
        loop {
            let events = match rx.recv().await {
                Ok(change) => {
                    let visible = filter(&change.key, &change.object);
                    let known = seen.contains_key(&change.key);
                    let kind = match change.kind {
                        ChangeKind::Deleted if known => EventType::Deleted,
                        ChangeKind::Deleted => continue,
                        // An object that stops matching leaves this watcher's view.
                        _ if !visible && known => EventType::Deleted,
                        _ if !visible => continue,
                        _ if known => EventType::Modified,
                        _ => EventType::Added,
                    };
                    if kind == EventType::Deleted {
                        seen.remove(&change.key);
                    } else {
                        seen.insert(change.key.clone(), change.object.clone());
                    }
                    vec![make(kind, &change.object)]
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "watcher fell behind; catching it up");
                    catch_up(EventType::Modified, &mut seen)
                }
                Err(RecvError::Closed) => return,
            };
            for ev in events {
                if tx.send(Ok(ev)).await.is_err() {
                    return;
                }
            }
        }
    })
}

impl From<ClusterError> for Status {
    fn from(e: ClusterError) -> Self {
        match &e {
            ClusterError::NotFound(_) | ClusterError::Gone(_) => Status::not_found(e.to_string()),
            ClusterError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ClusterError::Unavailable(_) => Status::unavailable(e.to_string()),
            ClusterError::Conflict(_) => Status::aborted(e.to_string()),
            ClusterError::Precondition(_) => Status::failed_precondition(e.to_string()),
        }
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

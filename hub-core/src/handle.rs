//! The handle of a controller task that owns one kind's objects (the only writer of its
//! buckets) and publishes them for reads: requests go through the task's mailbox, each with a
//! reply channel; reads take the published views without asking. ManagedServiceAccounts and
//! MirrorPeers are served this way.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};

/// The published objects, by key: the task writes them, handles read them.
pub type Views<T> = Arc<RwLock<BTreeMap<String, T>>>;

/// The task has ended (the hub is shutting down or gave the controllers up); each kind's
/// error says so in its own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// A task's mailbox and its published views (cheap to clone).
pub struct Handle<M, T> {
    tx: mpsc::Sender<M>,
    views: Views<T>,
}

impl<M, T> Clone for Handle<M, T> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            views: self.views.clone(),
        }
    }
}

impl<M, T: Clone> Handle<M, T> {
    /// The handle of the task reading `tx`'s receiver and writing `views`.
    pub fn new(tx: mpsc::Sender<M>, views: Views<T>) -> Self {
        Self { tx, views }
    }

    /// Sends the request `make` builds around a reply channel (waiting for room in the
    /// mailbox), then waits for the answer.
    pub async fn ask<R>(&self, make: impl FnOnce(oneshot::Sender<R>) -> M) -> Result<R, Gone> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| Gone)?;
        rx.await.map_err(|_| Gone)
    }

    /// Sends `msg`, waiting for room in the mailbox.
    pub async fn send(&self, msg: M) -> Result<(), Gone> {
        self.tx.send(msg).await.map_err(|_| Gone)
    }

    /// Sends `msg` without waiting: it comes back when the mailbox is full or the task ended.
    pub fn try_send(&self, msg: M) -> Result<(), TrySendError<M>> {
        self.tx.try_send(msg)
    }

    /// The published object at `key`.
    pub fn get(&self, key: &str) -> Option<T> {
        self.views.read().expect("views lock").get(key).cloned()
    }

    /// The published objects whose key starts with `prefix` (every one when it is empty), in
    /// key order.
    pub fn list(&self, prefix: &str) -> Vec<T> {
        self.views
            .read()
            .expect("views lock")
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

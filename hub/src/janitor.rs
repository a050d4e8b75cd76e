//! The status stream's janitor: purges the subjects of status messages the hub refused.
//!
//! The status stream keeps the latest message of every subject, and a cluster may publish on
//! any subject under its own `flotilla.status.<shard>.<cluster>.>`. A message the hub cannot use
//! — an unknown kind, a work the hub does not know, input that does not decode — would stay in
//! the stream for ever, so one hostile cluster could fill JetStream with endless distinct
//! subjects. The router and the cluster actors hand every such subject to the janitor, which
//! purges it; a full queue is counted (`limit_refusals{limit="status_unknown"}`) and the stream's
//! own bounds (bytes, age) are the backstop.

use crate::metrics::Metrics;
use async_nats::jetstream::stream::Stream;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Subjects queued for purging, at most.
pub const QUEUE: usize = 4096;

/// Hands refused status subjects to the janitor task (cheap to clone).
#[derive(Clone)]
pub struct Janitor {
    tx: mpsc::Sender<String>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Janitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Janitor")
            .field("queued", &(QUEUE - self.tx.capacity()))
            .finish()
    }
}

impl Janitor {
    /// Starts the janitor on the status stream; it stops when `shutdown` flips or every handle
    /// is gone.
    pub fn spawn(
        stream: Stream,
        metrics: Arc<Metrics>,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Self, JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<String>(QUEUE);
        let task = tokio::spawn(async move {
            loop {
                let subject = tokio::select! {
                    _ = shutdown.changed() => return,
                    next = rx.recv() => match next {
                        Some(s) => s,
                        None => return,
                    },
                };
                if let Err(e) = stream.purge().filter(subject.clone()).await {
                    tracing::debug!(error = %e, subject, "purging a refused status subject failed");
                }
            }
        });
        (Self { tx, metrics }, task)
    }

    /// A janitor that purges nothing (tests of the rules without a stream).
    pub fn none(metrics: Arc<Metrics>) -> Self {
        let (tx, _) = mpsc::channel(1);
        Self { tx, metrics }
    }

    /// Queues the subject of a refused status message for purging.
    pub fn purge(&self, subject: &str) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(subject.to_string())
            && self.metrics.limit_refused("status_unknown")
        {
            tracing::warn!(
                subject,
                "status janitor queue full; the stream's bounds apply"
            );
        }
    }
}

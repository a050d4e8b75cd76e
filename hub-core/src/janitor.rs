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
use futures::StreamExt;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Subjects queued for purging, at most.
pub const QUEUE: usize = 4096;

/// Hands refused status subjects to the janitor task (cheap to clone).
#[derive(Clone)]
pub struct Janitor {
    tx: mpsc::Sender<Refused>,
    metrics: Arc<Metrics>,
    budget: Arc<Budget>,
}

/// Refused status messages per cluster in the current minute.
#[derive(Debug)]
struct Budget {
    max: u32,
    counts: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, u32)>>,
}

impl Budget {
    /// Counts one refused message of `cluster`; returns the count this minute when over the
    /// budget.
    fn spend(&self, cluster: &str) -> Option<u32> {
        let now = std::time::Instant::now();
        let minute = std::time::Duration::from_secs(60);
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if counts.len() > 10_000 {
            counts.retain(|_, (since, _)| now.duration_since(*since) < minute);
        }
        let entry = counts.entry(cluster.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= minute {
            *entry = (now, 0);
        }
        entry.1 += 1;
        (entry.1 > self.max).then_some(entry.1)
    }
}

impl std::fmt::Debug for Janitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Janitor")
            .field("queued", &(QUEUE - self.tx.capacity()))
            .finish()
    }
}

/// A refused status message: its subject, and its stream sequence when known (deleting one
/// message by sequence is constant work for the server; a purge by subject is the fallback).
#[derive(Debug)]
struct Refused {
    subject: String,
    sequence: Option<u64>,
}

/// Deletions in flight at once.
const CONCURRENCY: usize = 4;

impl Janitor {
    /// Starts the janitor on the status stream; it stops when `shutdown` flips or every handle
    /// is gone.
    pub fn spawn(
        stream: Stream,
        metrics: Arc<Metrics>,
        status_unknown_max: u32,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Refused>(QUEUE);
        let task = tokio::spawn(async move {
            let work = tokio_stream::wrappers::ReceiverStream::new(rx).for_each_concurrent(
                CONCURRENCY,
                |refused| {
                    let stream = stream.clone();
                    async move {
                        let result = match refused.sequence {
                            Some(seq) => stream.delete_message(seq).await.map(drop).map_err(|e| e.to_string()),
                            None => stream
                                .purge()
                                .filter(refused.subject.clone())
                                .await
                                .map(drop)
                                .map_err(|e| e.to_string()),
                        };
                        if let Err(e) = result {
                            tracing::debug!(error = %e, subject = %refused.subject, "removing a refused status message failed");
                        }
                    }
                },
            );
            tokio::select! {
                _ = shutdown.changed() => {}
                () = work => {}
            }
        }
        .instrument(tracing::info_span!("janitor")));
        let budget = Arc::new(Budget {
            max: status_unknown_max,
            counts: Default::default(),
        });
        (
            Self {
                tx,
                metrics,
                budget,
            },
            task,
        )
    }

    /// Queues a refused status message of `cluster` for removal (by its stream sequence when
    /// known) and spends the cluster's budget.
    pub fn purge(&self, cluster: &str, subject: &str, sequence: Option<u64>) {
        if let Some(count) = self.budget.spend(cluster)
            && self.metrics.limit_refused("status_unknown")
        {
            tracing::warn!(
                cluster,
                refused = count,
                max = self.budget.max,
                "a cluster sends status the hub cannot use, over --status-unknown-max in a minute; all of it is removed"
            );
        }
        let refused = Refused {
            subject: subject.to_string(),
            sequence,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(refused)
            && self.metrics.limit_refused("status_unknown")
        {
            tracing::warn!(
                subject,
                "status janitor queue full; the stream's bounds apply"
            );
        }
    }
}

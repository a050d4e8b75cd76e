//! A work actor's handle (cheap to clone): the manager's side of one work's task — its
//! messages, and what the task shares (the generation and uid it holds, whether it finished or
//! stalled).

use super::WorkMsg;
use crate::work::health::{Shared, Stall};
use flotilla_api::v1::ManifestWork;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;

/// A handle to one work's actor.
#[derive(Clone)]
pub struct WorkHandle {
    pub(super) tx: mpsc::Sender<WorkMsg>,
    pub(super) shared: Arc<Shared>,
    pub(super) task: tokio::task::AbortHandle,
}

impl WorkHandle {
    /// The spec generation the actor holds.
    pub fn generation(&self) -> i64 {
        self.shared.generation.load(Ordering::Relaxed)
    }

    /// The uid of the spec the actor holds ("" when the hub sent none).
    pub fn uid(&self) -> String {
        self.shared.uid()
    }

    /// Whether the work is gone (deleted and confirmed to the hub).
    pub fn is_finished(&self) -> bool {
        self.shared.finished.load(Ordering::Relaxed)
    }

    /// Whether the actor's task ended without finishing the work (a panic): its messages go
    /// nowhere, so the manager starts it again from its record.
    pub fn is_dead(&self) -> bool {
        self.tx.is_closed() && !self.is_finished()
    }

    /// The handler whose current step has been running for at least `after`, if one has (a
    /// backend call that never returns stops the work's every later apply and status).
    pub fn stall(&self, after: Duration) -> Option<Stall> {
        self.shared.stall(after)
    }

    /// Stops the actor's task where it waits (a stalled actor, before it is started again).
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Delivers a new spec.
    pub async fn update(&self, work: ManifestWork, traceparent: Option<String>) {
        let _ = self
            .tx
            .send(WorkMsg::Update(Box::new(work), traceparent))
            .await;
    }

    /// Deletes the work with the delete option of `work`.
    pub async fn delete(&self, work: ManifestWork) {
        let _ = self.tx.send(WorkMsg::Delete(Some(Box::new(work)))).await;
    }

    /// Deletes the work with the delete option it holds.
    pub async fn delete_as_held(&self) {
        let _ = self.tx.send(WorkMsg::Delete(None)).await;
    }

    /// Publishes the status again even if unchanged.
    pub async fn republish(&self) {
        let _ = self.tx.try_send(WorkMsg::Republish);
    }
}

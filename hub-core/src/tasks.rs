//! The tasks of one owner — a registry's per-object actors — kept so that the owner's stop
//! waits for them instead of leaving them to end whenever their mailbox is noticed closed.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tracing::Instrument;

/// Runs `work` on the blocking pool inside the caller's span (a bare `spawn_blocking` would
/// log outside it: which placement, which snapshot).
pub fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(work))
}

/// A set of tasks owned together. Cheap to clone (the clones share the set).
#[derive(Clone, Default)]
pub struct TaskGroup(Arc<Mutex<JoinSet<()>>>);

impl TaskGroup {
    /// Spawns `task` into the group (finished tasks are reaped on the way).
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut set = self.0.lock().expect("task group lock");
        while set.try_join_next().is_some() {}
        // The spawner's span, unless the task brings its own (the registries' actors do).
        set.spawn(task.in_current_span());
    }

    /// Spawns `task` into the group inside `span` alone (a woken actor: not inside whichever
    /// sender's span woke it).
    pub fn spawn_in(&self, span: tracing::Span, task: impl Future<Output = ()> + Send + 'static) {
        let mut set = self.0.lock().expect("task group lock");
        while set.try_join_next().is_some() {}
        set.spawn(task.instrument(span));
    }

    /// Tasks not finished yet.
    pub fn len(&self) -> usize {
        let mut set = self.0.lock().expect("task group lock");
        while set.try_join_next().is_some() {}
        set.len()
    }

    /// Whether every task has finished.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for every task to end (the owner has told them to: closed their mailboxes or
    /// flipped their stop signal); those still running after `grace` are aborted.
    pub async fn join(&self, grace: Duration) {
        let mut set = std::mem::take(&mut *self.0.lock().expect("task group lock"));
        let ended =
            tokio::time::timeout(grace, async { while set.join_next().await.is_some() {} }).await;
        if ended.is_err() {
            tracing::warn!(left = set.len(), "tasks did not end in time; aborting them");
            set.abort_all();
            while set.join_next().await.is_some() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_waits_for_tasks_told_to_end_and_aborts_the_rest() {
        let group = TaskGroup::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ended.clone();
        group.spawn(async move {
            while rx.recv().await.is_some() {}
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        group.spawn(std::future::pending());
        assert_eq!(group.len(), 2);
        drop(tx);
        group.join(Duration::from_millis(200)).await;
        assert!(ended.load(std::sync::atomic::Ordering::SeqCst));
        assert!(group.is_empty());
    }
}

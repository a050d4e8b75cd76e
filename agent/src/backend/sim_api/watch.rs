//! Watch streams of the simulated cluster: the objects of a resource (after the selectors) as
//! `ADDED`, `MODIFIED` and `DELETED` events, one JSON object per line as the API server streams
//! them. Each change of the cluster ([`crate::backend::Backend::changes`]) is compared with what the watcher
//! last saw, by `resourceVersion`; the stream is a plain value (no task), so it ends the moment
//! the proxy drops it — when the client goes away.
//!
//! `resourceVersion` unset or `0` starts with every current object as `ADDED` (Kubernetes'
//! "most recent" semantics); a version from a list starts with the objects changed since, as
//! `MODIFIED`, and nothing else. `timeoutSeconds` ends the stream. The events and their diff
//! are the shared in-memory API's ([`flotilla_kubemem::watch`]).

use super::SimObjects;
use bytes::Bytes;
use flotilla_kubemem::ApiError;
use flotilla_kubemem::engine::{Lines, Objects, Target, Watch};
use flotilla_kubemem::select::Selectors;
use flotilla_kubemem::watch::{Seen, deadline, diff, event, key, version};
use serde_json::Value;
use std::collections::VecDeque;
use tokio::time::Instant;

struct State {
    objects: SimObjects,
    target: Target,
    selectors: Selectors,
    changes: tokio::sync::watch::Receiver<u64>,
    /// Keeps the backend telling this watch of status changes without a write.
    _follow: crate::backend::ApiFollow,
    seen: Seen,
    pending: VecDeque<Bytes>,
    until: Option<Instant>,
}

impl State {
    async fn current(&self) -> Option<Vec<Value>> {
        let (items, _) = self.objects.list(&self.target).await.ok()?;
        Some(
            items
                .into_iter()
                .filter(|o| self.selectors.matches(o))
                .collect(),
        )
    }

    /// The next event, waiting for changes; `None` ends the stream.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            let changed = self.changes.changed();
            match self.until {
                Some(until) => tokio::time::timeout_at(until, changed).await.ok()?.ok()?,
                None => changed.await.ok()?,
            }
            let now = self.current().await?;
            self.pending.extend(diff(&mut self.seen, now));
        }
    }
}

/// The events of a watch of the target's collection.
pub(super) async fn lines(
    objects: SimObjects,
    target: Target,
    w: Watch,
) -> Result<Lines, ApiError> {
    let Some(follow) = objects.backend.follow_api() else {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "this cluster cannot watch".into(),
        ));
    };
    let mut changes = follow.changes.clone();
    changes.mark_unchanged();
    let since = w.since.filter(|v| *v > 0);
    let until = w.timeout.map(|t| deadline(Instant::now(), t));
    let mut state = State {
        objects,
        target,
        selectors: w.selectors,
        changes,
        _follow: follow,
        seen: Seen::new(),
        pending: VecDeque::new(),
        until,
    };
    let now = state.current().await.unwrap_or_default();
    match since {
        None => state.pending.extend(diff(&mut state.seen, now)),
        Some(since) => {
            for o in now {
                if version(&o).parse::<u64>().is_ok_and(|v| v > since) {
                    state.pending.push_back(event("MODIFIED", &o));
                }
                state
                    .seen
                    .insert(key(&o), (flotilla_kubemem::watch::state(&o), o));
            }
        }
    }
    Ok(Box::pin(futures::stream::unfold(
        state,
        |mut state| async move {
            let e = state.next().await?;
            Some((e, state))
        },
    )))
}

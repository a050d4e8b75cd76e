//! Watch streams of the simulated cluster: the objects of a resource (after the selectors) as
//! `ADDED`, `MODIFIED` and `DELETED` events, one JSON object per line as the API server streams
//! them. Each change of the cluster ([`Backend::changes`]) is compared with what the watcher
//! last saw, by `resourceVersion`; the stream is a plain value (no task), so it ends the moment
//! the proxy drops it — when the client goes away.
//!
//! `resourceVersion` unset or `0` starts with every current object as `ADDED` (Kubernetes'
//! "most recent" semantics); a version from a list starts with the objects changed since, as
//! `MODIFIED`, and nothing else. `timeoutSeconds` ends the stream.

use super::{Target, objects, selected, selectors};
use crate::backend::Backend;
use crate::backend::api::{ApiRequest, ApiResponse};
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest a watch runs, whatever `timeoutSeconds` asks (the API server also caps it).
pub const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(3600);

/// When a watch asked to last `timeout_seconds` from `now` ends: at most [`MAX_WATCH_TIMEOUT`]
/// from `now`, so a huge value is a long watch, never an overflow.
fn deadline(now: Instant, timeout_seconds: u64) -> Instant {
    let asked = Duration::from_secs(timeout_seconds).min(MAX_WATCH_TIMEOUT);
    now.checked_add(asked).unwrap_or(now)
}

/// What a watcher has seen: object key → (its [`state`], object).
type Seen = BTreeMap<String, (String, Value)>;

fn key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn version(o: &Value) -> String {
    o["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What a watcher compares: the version, and the status (a simulated object's readiness comes
/// with its age, without a write, and is a `MODIFIED` event as an API server's status update).
fn state(o: &Value) -> String {
    format!("{}|{}", version(o), o["status"])
}

fn event(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The events that turn `seen` into `now` (and `seen` becomes `now`).
pub fn diff(seen: &mut Seen, now: Vec<Value>) -> Vec<Bytes> {
    let mut events = Vec::new();
    let mut next = Seen::new();
    for o in now {
        let k = key(&o);
        let v = state(&o);
        match seen.get(&k) {
            None => events.push(event("ADDED", &o)),
            Some((old, _)) if *old != v => events.push(event("MODIFIED", &o)),
            Some(_) => {}
        }
        next.insert(k, (v, o));
    }
    for (k, (_, o)) in seen.iter() {
        if !next.contains_key(k) {
            events.push(event("DELETED", o));
        }
    }
    *seen = next;
    events
}

struct State {
    backend: Arc<dyn Backend>,
    target: Target,
    labels: Option<flotilla_api::v1::LabelSelector>,
    fields: Vec<(String, String, bool)>,
    changes: tokio::sync::watch::Receiver<u64>,
    /// Keeps the backend telling this watch of status changes without a write.
    _follow: crate::backend::ApiFollow,
    seen: Seen,
    pending: VecDeque<Bytes>,
    until: Option<Instant>,
}

impl State {
    async fn current(&self) -> Option<Vec<Value>> {
        let items = objects(self.backend.as_ref(), &self.target).await.ok()?;
        Some(
            items
                .into_iter()
                .filter(|o| selected(o, self.labels.as_ref(), &self.fields))
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

/// Serves a watch.
pub(super) async fn serve(
    backend: Arc<dyn Backend>,
    target: Target,
    request: &ApiRequest,
) -> ApiResponse {
    let (labels, fields) = match selectors(request) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let Some(follow) = backend.follow_api() else {
        return ApiResponse::status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "this cluster cannot watch",
        );
    };
    let mut changes = follow.changes.clone();
    changes.mark_unchanged();
    let since: Option<u64> = request
        .param("resourceVersion")
        .and_then(|v| v.parse().ok())
        .filter(|v| *v > 0);
    let until = request
        .param("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(|t| deadline(Instant::now(), t));
    let mut state = State {
        backend,
        target,
        labels,
        fields,
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
                state.seen.insert(key(&o), (self::state(&o), o));
            }
        }
    }
    let stream = futures::stream::unfold(state, |mut state| async move {
        let e = state.next().await?;
        Some((Ok(e), state))
    });
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    ApiResponse {
        status: StatusCode::OK,
        headers,
        body: Box::pin(stream),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "a", "resourceVersion": rv}})
    }

    fn kinds(events: &[Bytes]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let v: Value = serde_json::from_slice(e).unwrap();
                format!(
                    "{} {}",
                    v["type"].as_str().unwrap(),
                    v["object"]["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn a_huge_timeout_is_capped_instead_of_overflowing() {
        let now = Instant::now();
        assert_eq!(deadline(now, 30), now + Duration::from_secs(30));
        assert_eq!(deadline(now, u64::MAX), now + MAX_WATCH_TIMEOUT);
        assert_eq!(deadline(now, 3601), now + MAX_WATCH_TIMEOUT);
    }

    #[test]
    fn changes_become_added_modified_and_deleted_events() {
        let mut seen = Seen::new();
        assert_eq!(
            kinds(&diff(&mut seen, vec![obj("x", "1"), obj("y", "2")])),
            ["ADDED x", "ADDED y"]
        );
        assert!(diff(&mut seen, vec![obj("x", "1"), obj("y", "2")]).is_empty());
        assert_eq!(
            kinds(&diff(&mut seen, vec![obj("x", "3"), obj("z", "4")])),
            ["MODIFIED x", "ADDED z", "DELETED y"]
        );
        assert!(diff(&mut seen, vec![obj("x", "3"), obj("z", "4")]).is_empty());
        assert!(diff(&mut seen, vec![]).iter().all(|e| e.ends_with(b"\n")));
    }
}

//! Watch streams, as the API server writes them: one JSON event (`ADDED`, `MODIFIED`,
//! `DELETED`, or an `ERROR` `Status`) per line, ended by `timeoutSeconds` (capped at
//! [`MAX_WATCH_TIMEOUT`]) or when the client goes away. Bookmarks are not sent.
//!
//! Two sources feed them: the [`Store`](crate::store::Store)'s event history and broadcast
//! ([`from_history`]: a watch from a resourceVersion replays what it missed since, or gets 410
//! `Expired` when that is no longer kept), and a cluster that can only be read again when it
//! changes — the agent's simulated cluster — whose successive reads [`diff`] turns into
//! events (pure). The streams are plain values (no task): they end the moment they are dropped.

use crate::select::Selectors;
use crate::store::WatchEvent;
use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::time::Instant;

/// The longest a watch runs, whatever `timeoutSeconds` asks (the API server also caps it).
pub const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(3600);

/// When a watch asked to last `timeout_seconds` from `now` ends: at most [`MAX_WATCH_TIMEOUT`]
/// from `now`, so a huge value is a long watch, never an overflow.
pub fn deadline(now: Instant, timeout_seconds: u64) -> Instant {
    let asked = Duration::from_secs(timeout_seconds).min(MAX_WATCH_TIMEOUT);
    now.checked_add(asked).unwrap_or(now)
}

/// One event line: `{"type": kind, "object": object}` and a newline.
pub fn event(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The line that ends a watch from a resourceVersion older than the history kept: a 410
/// `Expired` `Status`, after which the client lists again.
pub fn expired() -> Bytes {
    let status =
        flotilla_api::kubestatus::failure(410, "Expired", "too old resource version", None);
    event("ERROR", &status)
}

/// What a watcher has seen: object key → (its [`state`], object).
pub type Seen = BTreeMap<String, (String, Value)>;

/// `namespace/name` of an object.
pub fn key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// An object's `metadata.resourceVersion` (`""` when it has none).
pub fn version(o: &Value) -> String {
    o["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What a watcher compares: the version, and the status (a simulated object's readiness comes
/// with its age, without a write, and is a `MODIFIED` event as an API server's status update).
pub fn state(o: &Value) -> String {
    format!("{}|{}", version(o), o["status"])
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

/// Which events of the store a watch wants: one resource, in one namespace (`""`: all), that
/// the selectors select.
#[derive(Debug, Clone)]
pub struct Filter {
    /// The resource's group.
    pub group: String,
    /// The resource's plural.
    pub plural: String,
    /// The namespace, `""` for all.
    pub namespace: String,
    /// The request's selectors.
    pub selectors: Selectors,
}

impl Filter {
    fn wants(&self, ev: &WatchEvent) -> bool {
        ev.group == self.group
            && ev.resource == self.plural
            && (self.namespace.is_empty() || ev.namespace == self.namespace)
            && self.selectors.matches(&ev.object)
    }
}

/// A watch of the store: `replay` (the history since the asked resourceVersion, read under
/// the same lock as `rx` was subscribed, so nothing falls between), then live events, until
/// `until`.
pub fn from_history(
    rx: broadcast::Receiver<WatchEvent>,
    replay: Vec<WatchEvent>,
    filter: Filter,
    until: Instant,
) -> impl Stream<Item = Bytes> + Send + 'static {
    struct State {
        rx: broadcast::Receiver<WatchEvent>,
        replay: VecDeque<WatchEvent>,
        filter: Filter,
        last: u64,
    }
    let state = State {
        rx,
        replay: replay.into(),
        filter,
        last: 0,
    };
    futures::stream::unfold(state, move |mut st| async move {
        loop {
            let next = match st.replay.pop_front() {
                Some(ev) => Ok(Ok(ev)),
                None => tokio::time::timeout_at(until, st.rx.recv()).await,
            };
            let ev = match next {
                Err(_) | Ok(Err(_)) => return None,
                Ok(Ok(ev)) => ev,
            };
            // Live events already replayed from the history are skipped.
            if ev.revision <= st.last {
                continue;
            }
            st.last = ev.revision;
            if st.filter.wants(&ev) {
                return Some((event(ev.kind, &ev.object), st));
            }
        }
    })
}

#[cfg(test)]
mod tests;

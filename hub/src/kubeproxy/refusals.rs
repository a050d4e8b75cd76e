//! The spoke's recent refusals of exec and attach upgrades (pure but for a mutex), so that
//! kubectl's SPDY retry of a refused WebSocket gets the spoke's own answer.
//!
//! kubectl 1.30+ tries exec, attach and cp over WebSocket and, on any answer but `101`,
//! retries over SPDY and prints the *second* answer. The hub serves both, so the retry would
//! reach the spoke again; answering it from here instead asks the spoke once (a refusal is
//! not worth a second round trip through the agent) and gives kubectl exactly the answer the
//! spoke gave (its RBAC's 403, a 404 pod, a 400 "not running"). A refusal is remembered for
//! [`REMEMBERED`] under a fingerprint of everything that decided it — the cluster and the
//! request as the agent got it (caller, impersonation, credential, path, query), never the
//! method or the upgrade headers — and answered once to the SPDY retry of the same request.
//! At most [`MAX_REMEMBERED`] are kept (the oldest go first), each body at most
//! [`MAX_BODY`] bytes (a `Status`); a larger one is not remembered.

use bytes::Bytes;
use flotilla_api::v1::TunnelRequest;
use prost::Message;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a refusal is remembered: kubectl retries within milliseconds.
pub const REMEMBERED: Duration = Duration::from_secs(10);
/// Refusals remembered at once.
pub const MAX_REMEMBERED: usize = 256;
/// The largest refusal body remembered.
pub const MAX_BODY: usize = 16 * 1024;

/// What decided a refusal: a SHA-256 of the cluster and the request without its method,
/// headers and session (a bearer token is kept only as part of the hash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl Key {
    /// The key of `request` on `cluster`.
    pub fn of(cluster: &str, request: &TunnelRequest) -> Key {
        let mut decided = request.clone();
        decided.method.clear();
        decided.headers.clear();
        decided.session = None;
        let mut sha = Sha256::new();
        sha.update(cluster.as_bytes());
        sha.update([0]);
        sha.update(decided.encode_to_vec());
        Key(sha.finalize().into())
    }
}

/// A refusal as the client got it.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Its status (4xx or 5xx).
    pub status: http::StatusCode,
    /// Its headers (as the hub passed them on).
    pub headers: http::HeaderMap,
    /// Its body (a `Status`).
    pub body: Bytes,
}

/// Refusals remembered, oldest first.
#[derive(Debug, Default)]
pub struct Recent {
    entries: Mutex<VecDeque<(Key, Instant, Refusal)>>,
}

impl Recent {
    /// Remembers `refusal` of the request `key` at `now`.
    pub fn remember(&self, key: Key, refusal: Refusal, now: Instant) {
        if refusal.body.len() > MAX_BODY {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|(k, at, _)| *k != key && now.saturating_duration_since(*at) < REMEMBERED);
        if entries.len() >= MAX_REMEMBERED {
            entries.pop_front();
        }
        entries.push_back((key, now, refusal));
    }

    /// The refusal of the request `key`, if one was remembered within [`REMEMBERED`] of
    /// `now`; it is forgotten (one retry is answered).
    pub fn take(&self, key: Key, now: Instant) -> Option<Refusal> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let i = entries.iter().position(|(k, _, _)| *k == key)?;
        let (_, at, refusal) = entries.remove(i)?;
        (now.saturating_duration_since(at) < REMEMBERED).then_some(refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, user: &str) -> TunnelRequest {
        TunnelRequest {
            method: "GET".into(),
            path: path.into(),
            query: "command=ls".into(),
            bearer: user.into(),
            ..TunnelRequest::default()
        }
    }

    fn refusal(code: u16) -> Refusal {
        Refusal {
            status: http::StatusCode::from_u16(code).unwrap(),
            headers: http::HeaderMap::new(),
            body: Bytes::from_static(b"{}"),
        }
    }

    #[test]
    fn the_spdy_retry_of_a_refused_request_gets_its_refusal_once_within_the_window() {
        let recent = Recent::default();
        let t0 = Instant::now();
        let ws = request("/api/v1/namespaces/a/pods/p/exec", "token-1");
        let mut spdy = ws.clone();
        spdy.method = "POST".into();
        recent.remember(Key::of("edge-1", &ws), refusal(403), t0);
        // Another cluster, another caller: not theirs.
        assert_eq!(recent.take(Key::of("edge-2", &spdy), t0), None);
        let other = request("/api/v1/namespaces/a/pods/p/exec", "token-2");
        assert_eq!(recent.take(Key::of("edge-1", &other), t0), None);
        assert_eq!(
            recent.take(Key::of("edge-1", &spdy), t0 + Duration::from_millis(5)),
            Some(refusal(403))
        );
        assert_eq!(recent.take(Key::of("edge-1", &spdy), t0), None, "once");
        recent.remember(Key::of("edge-1", &ws), refusal(404), t0);
        assert_eq!(recent.take(Key::of("edge-1", &spdy), t0 + REMEMBERED), None);
    }

    #[test]
    fn refusals_are_bounded_in_number_and_size() {
        let recent = Recent::default();
        let t0 = Instant::now();
        for i in 0..=MAX_REMEMBERED {
            let r = request(&format!("/api/v1/namespaces/a/pods/p{i}/exec"), "t");
            recent.remember(Key::of("c", &r), refusal(403), t0);
        }
        let first = request("/api/v1/namespaces/a/pods/p0/exec", "t");
        assert_eq!(
            recent.take(Key::of("c", &first), t0),
            None,
            "the oldest went"
        );
        let big = Refusal {
            body: Bytes::from(vec![b' '; MAX_BODY + 1]),
            ..refusal(403)
        };
        let r = request("/x", "t");
        recent.remember(Key::of("c", &r), big, t0);
        assert_eq!(recent.take(Key::of("c", &r), t0), None);
    }
}

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
//!
//! Bounds (review #10): each caller keeps at most [`PER_CALLER`] refusals (its oldest go
//! first), so one caller refused again and again forgets only its own; at most
//! [`MAX_REMEMBERED`] are kept over every caller (when full, the oldest refusal of the caller
//! holding most goes); a refusal whose headers and body are over [`MAX_BYTES`] is not
//! remembered — the spoke chooses both, and a `Status` is far smaller.

use bytes::Bytes;
use flotilla_api::v1::TunnelRequest;
use prost::Message;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a refusal is remembered: kubectl retries within milliseconds.
pub const REMEMBERED: Duration = Duration::from_secs(10);
/// Refusals remembered at once, over every caller.
pub const MAX_REMEMBERED: usize = 256;
/// Refusals remembered at once for one caller: a few execs refused at once (a script's loop
/// over pods) each get their retry answered.
pub const PER_CALLER: usize = 8;
/// The largest refusal remembered: its body and its headers, in bytes.
pub const MAX_BYTES: usize = 16 * 1024;

/// What decided a refusal — a SHA-256 of the cluster and the request without its method,
/// headers and session (a bearer token is kept only as part of the hash) — and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    digest: [u8; 32],
    /// The caller's name (empty: an open hub's anonymous caller), whose share it counts in.
    caller: Arc<str>,
}

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
        Key {
            digest: sha.finalize().into(),
            caller: request
                .caller
                .as_ref()
                .map_or_else(|| Arc::from(""), |c| Arc::from(c.name.as_str())),
        }
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

impl Refusal {
    /// What keeping it takes: its body and its headers' names and values.
    fn size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len())
            .sum();
        self.body.len() + headers
    }
}

/// One remembered refusal.
#[derive(Debug)]
struct Entry {
    key: Key,
    at: Instant,
    refusal: Refusal,
}

/// Refusals remembered, oldest first.
#[derive(Debug, Default)]
pub struct Recent {
    entries: Mutex<VecDeque<Entry>>,
}

impl Recent {
    /// Remembers `refusal` of the request `key` at `now`.
    pub fn remember(&self, key: Key, refusal: Refusal, now: Instant) {
        if refusal.size() > MAX_BYTES {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|e| {
            e.key.digest != key.digest && now.saturating_duration_since(e.at) < REMEMBERED
        });
        let theirs = entries
            .iter()
            .filter(|e| e.key.caller == key.caller)
            .count();
        let evicted = if theirs >= PER_CALLER {
            Some(key.caller.clone())
        } else if entries.len() >= MAX_REMEMBERED {
            busiest(&entries)
        } else {
            None
        };
        if let Some(caller) = evicted
            && let Some(oldest) = entries.iter().position(|e| e.key.caller == caller)
        {
            entries.remove(oldest);
        }
        entries.push_back(Entry {
            key,
            at: now,
            refusal,
        });
    }

    /// The refusal of the request `key`, if one was remembered within [`REMEMBERED`] of
    /// `now`; it is forgotten (one retry is answered).
    pub fn take(&self, key: &Key, now: Instant) -> Option<Refusal> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let i = entries.iter().position(|e| e.key.digest == key.digest)?;
        let entry = entries.remove(i)?;
        (now.saturating_duration_since(entry.at) < REMEMBERED).then_some(entry.refusal)
    }
}

/// The caller holding the most entries (the first such in age order).
fn busiest(entries: &VecDeque<Entry>) -> Option<Arc<str>> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for e in entries {
        *counts.entry(&e.key.caller).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    entries
        .iter()
        .find(|e| counts[&*e.key.caller] == most)
        .map(|e| e.key.caller.clone())
}

#[cfg(test)]
mod tests;

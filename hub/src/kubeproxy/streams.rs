//! The cluster proxy's sessions — exec, attach, port-forward — as the hub bounds, logs and
//! counts them (I/O-light: a mutex, log lines, metrics).
//!
//! - [`Ledger`]: session slots, hub-wide and per identity, and each session's *byte
//!   reservation*: its two windows (2 × W × `max_chunk`, 2 MiB by default), taken from its
//!   identity's budget when it opens and given back when it ends. What one identity can make
//!   the hub and its agents buffer is fixed when its sessions open, never discovered under
//!   load. Sessions also count as calls (the tunnel's own limits).
//! - [`Tracked`]: one session's two log lines — `cluster proxy session` when it opens (caller,
//!   role, cluster, kind, namespace, pod, container, command, port, protocol, acting as) and
//!   `cluster proxy session ended` (the same, plus `duration_ms`, `bytes_in` client → pod,
//!   `bytes_out` pod → client, `exit_code`, `why`) — and its metrics.
//! - [`SessionMetrics`]: `flotilla_hub_cluster_proxy_sessions{kind}` (open now),
//!   `…_session_bytes_total{kind,direction}`, `…_sessions_ended_total{kind,why}`; refusals go to
//!   the proxy's `refusals` counter (`sessions`, `session_identity`, `session_bytes`).

use flotilla_api::v1::TunnelRequest;
use flotilla_bus::tunnel::session::{Kind, Spec, command_line, loggable, pod_of};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use thiserror::Error;

#[cfg(test)]
mod tests;

/// Default [`Limits::sessions`].
pub const DEFAULT_SESSIONS: usize = 1024;
/// Default [`Limits::per_identity`].
pub const DEFAULT_SESSIONS_PER_IDENTITY: usize = 32;
/// Default [`Limits::bytes_per_identity`]: 32 sessions of the default 2 MiB.
pub const DEFAULT_SESSION_BYTES_PER_IDENTITY: u64 = 64 << 20;

/// What sessions may take of the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Sessions open at once, hub-wide (more: 503).
    pub sessions: usize,
    /// Sessions one identity may have open at once (more: 429).
    pub per_identity: usize,
    /// Bytes one identity's open sessions may reserve (more: 429): the bound that holds when
    /// the window or the chunk size is raised.
    pub bytes_per_identity: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            sessions: DEFAULT_SESSIONS,
            per_identity: DEFAULT_SESSIONS_PER_IDENTITY,
            bytes_per_identity: DEFAULT_SESSION_BYTES_PER_IDENTITY,
        }
    }
}

/// Why a session may not open now.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The hub's sessions are all taken.
    #[error(
        "the hub already has {0} exec, attach and port-forward sessions open \
         (--cluster-proxy-sessions); try again later"
    )]
    Sessions(usize),
    /// The caller's share of sessions is taken.
    #[error(
        "{caller:?} already has {limit} exec, attach and port-forward sessions open at this hub, \
         its share (--cluster-proxy-sessions-per-identity); close some or try again later"
    )]
    Identity {
        /// Who.
        caller: String,
        /// The share.
        limit: usize,
    },
    /// The caller's sessions reserve all the bytes it may have in flight.
    #[error(
        "{caller:?} already has {limit} bytes reserved by its open sessions at this hub (each \
         reserves {each} bytes for its two windows; --cluster-proxy-session-bytes-per-identity); \
         close some or try again later"
    )]
    Bytes {
        /// Who.
        caller: String,
        /// The budget.
        limit: u64,
        /// What one session reserves.
        each: u64,
    },
}

impl Refusal {
    /// The limit's name in the proxy's `refusals` metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Sessions(_) => "sessions",
            Refusal::Identity { .. } => "session_identity",
            Refusal::Bytes { .. } => "session_bytes",
        }
    }

    /// The HTTP status the client gets: 503 for the hub's own bound, 429 for the caller's.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Refusal::Sessions(_) => http::StatusCode::SERVICE_UNAVAILABLE,
            _ => http::StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

/// What one identity holds.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    sessions: usize,
    bytes: u64,
}

#[derive(Debug, Default)]
struct State {
    open: usize,
    /// Only identities with at least one session.
    identities: HashMap<String, Held>,
}

/// The hub's open sessions and what each identity holds (shared; short critical sections).
#[derive(Debug, Default)]
pub struct Ledger {
    state: Mutex<State>,
}

impl Ledger {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a session slot and `bytes` for `who`, or says which limit holds.
    pub fn reserve(
        self: &Arc<Self>,
        who: &str,
        bytes: u64,
        limits: &Limits,
    ) -> Result<Reservation, Refusal> {
        let mut state = self.state();
        if state.open >= limits.sessions {
            return Err(Refusal::Sessions(limits.sessions));
        }
        let held = state.identities.get(who).copied().unwrap_or_default();
        if held.sessions >= limits.per_identity {
            return Err(Refusal::Identity {
                caller: who.to_string(),
                limit: limits.per_identity,
            });
        }
        if held.bytes.saturating_add(bytes) > limits.bytes_per_identity {
            return Err(Refusal::Bytes {
                caller: who.to_string(),
                limit: limits.bytes_per_identity,
                each: bytes,
            });
        }
        state.open += 1;
        let entry = state.identities.entry(who.to_string()).or_default();
        entry.sessions += 1;
        entry.bytes += bytes;
        Ok(Reservation {
            ledger: self.clone(),
            who: who.to_string(),
            bytes,
        })
    }

    /// Sessions open now.
    pub fn open(&self) -> usize {
        self.state().open
    }

    /// What `who` holds now: its sessions and their reserved bytes.
    pub fn held(&self, who: &str) -> (usize, u64) {
        let held = self
            .state()
            .identities
            .get(who)
            .copied()
            .unwrap_or_default();
        (held.sessions, held.bytes)
    }
}

/// A session's slot and bytes, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    ledger: Arc<Ledger>,
    who: String,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut state = self.ledger.state();
        state.open = state.open.saturating_sub(1);
        if let Some(held) = state.identities.get_mut(&self.who) {
            held.sessions = held.sessions.saturating_sub(1);
            held.bytes = held.bytes.saturating_sub(self.bytes);
            if held.sessions == 0 {
                state.identities.remove(&self.who);
            }
        }
    }
}

/// Labels of the open-sessions gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `exec`, `attach` or `portforward`.
    pub kind: &'static str,
}

/// Labels of the bytes counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BytesLabels {
    /// `exec`, `attach` or `portforward`.
    pub kind: &'static str,
    /// `in` (client → pod) or `out` (pod → client).
    pub direction: &'static str,
}

/// Labels of the ended-sessions counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndLabels {
    /// `exec`, `attach` or `portforward`.
    pub kind: &'static str,
    /// Why it ended (`exited`, `closed`, `refused`, `client_gone`, `agent_cancelled`,
    /// `agent_silent`, `protocol`, `hub_stopping`, `send_failed`).
    pub why: &'static str,
}

/// The sessions' metrics (cloneable; families share their counters).
#[derive(Clone, Debug, Default)]
pub struct SessionMetrics {
    /// Sessions open now, by kind.
    pub open: Family<KindLabels, Gauge>,
    /// Bytes through sessions, by kind and direction.
    pub bytes: Family<BytesLabels, Counter>,
    /// Sessions ended, by kind and why.
    pub ended: Family<EndLabels, Counter>,
}

impl SessionMetrics {
    /// Registers them in the proxy's registry (`flotilla_hub_cluster_proxy_…`).
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "sessions",
            "Cluster proxy exec, attach and port-forward sessions open now, by kind",
            self.open.clone(),
        );
        r.register(
            "session_bytes",
            "Bytes through cluster proxy sessions, by kind and direction (in: client to pod)",
            self.bytes.clone(),
        );
        r.register(
            "sessions_ended",
            "Cluster proxy sessions ended, by kind and why",
            self.ended.clone(),
        );
    }
}

/// The fields both log lines carry.
#[derive(Debug, Clone)]
struct Fields {
    caller: String,
    role: String,
    cluster: String,
    namespace: String,
    pod: String,
    container: String,
    command: String,
    port: u16,
    protocol: &'static str,
    as_user: String,
}

/// One session from its open to its end: logged at both, counted while open.
#[derive(Debug)]
pub struct Tracked {
    metrics: SessionMetrics,
    kind: Kind,
    fields: Fields,
    started: Instant,
    bytes_in: u64,
    bytes_out: u64,
    exit_code: Option<u8>,
    ended: bool,
}

impl Tracked {
    /// A session of `spec` on `cluster` (its request as the hub sends it; `protocol` the
    /// client's: `v5.channel.k8s.io`, `SPDY/3.1+portforward.k8s.io`, …): logs it and counts it
    /// open.
    pub fn open(
        metrics: &SessionMetrics,
        cluster: &str,
        spec: &Spec,
        request: &TunnelRequest,
        protocol: &'static str,
    ) -> Self {
        let caller = request.caller.clone().unwrap_or_default();
        let (namespace, pod) = pod_of(&request.path, spec.kind).unwrap_or_default();
        let fields = Fields {
            caller: caller.name,
            role: caller.role,
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            container: loggable(spec.container.as_deref().unwrap_or_default()),
            command: command_line(&spec.command),
            port: spec.port,
            protocol,
            as_user: flotilla_bus::tunnel::as_user(request).to_string(),
        };
        let f = &fields;
        tracing::info!(
            caller = %f.caller, role = %f.role, cluster.name = %f.cluster, kind = %spec.kind,
            namespace = %f.namespace, pod = %f.pod, container = %f.container,
            command = %f.command, port = f.port, protocol = f.protocol, as_user = %f.as_user,
            "cluster proxy session"
        );
        metrics
            .open
            .get_or_create(&KindLabels {
                kind: spec.kind.name(),
            })
            .inc();
        Self {
            metrics: metrics.clone(),
            kind: spec.kind,
            fields,
            started: Instant::now(),
            bytes_in: 0,
            bytes_out: 0,
            exit_code: None,
            ended: false,
        }
    }

    /// Counts bytes from the client to the pod.
    pub fn bytes_in(&mut self, n: usize) {
        self.count(n, "in");
    }

    /// Counts bytes from the pod to the client.
    pub fn bytes_out(&mut self, n: usize) {
        self.count(n, "out");
    }

    fn count(&mut self, n: usize, direction: &'static str) {
        let n = n as u64;
        if direction == "in" {
            self.bytes_in += n;
        } else {
            self.bytes_out += n;
        }
        self.metrics
            .bytes
            .get_or_create(&BytesLabels {
                kind: self.kind.name(),
                direction,
            })
            .inc_by(n);
    }

    /// What kubectl exits with, once the agent said how the session ended.
    pub fn exit_code(&mut self, code: u8) {
        self.exit_code = Some(code);
    }

    /// Bytes client → pod and pod → client so far.
    pub fn bytes(&self) -> (u64, u64) {
        (self.bytes_in, self.bytes_out)
    }

    /// Logs the end and counts it under `why` (once; later calls do nothing).
    pub fn end(&mut self, why: &'static str) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let f = &self.fields;
        tracing::info!(
            caller = %f.caller, role = %f.role, cluster.name = %f.cluster, kind = %self.kind,
            namespace = %f.namespace, pod = %f.pod, container = %f.container,
            command = %f.command, port = f.port, protocol = f.protocol, as_user = %f.as_user,
            duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            bytes_in = self.bytes_in, bytes_out = self.bytes_out, exit_code = ?self.exit_code,
            why, "cluster proxy session ended"
        );
        self.metrics
            .ended
            .get_or_create(&EndLabels {
                kind: self.kind.name(),
                why,
            })
            .inc();
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // A task aborted at shutdown still logs its session's end.
        self.end("hub_stopping");
        self.metrics
            .open
            .get_or_create(&KindLabels {
                kind: self.kind.name(),
            })
            .dec();
    }
}

//! The cluster proxy: `--cluster-proxy-listen` serves every cluster's Kubernetes API under
//! `/clusters/<cluster>/…`, so `kubectl` reaches a spoke behind NAT through the NATS
//! connection its agent already holds.
//!
//! - [`request`]: the cluster and the Kubernetes verb and resource of a request (pure).
//! - [`access`]: what a caller's API token may do through the proxy and whom it acts as on the
//!   spoke (pure).
//! - [`answer`]: what of a spoke's answer reaches the client: final statuses only, no
//!   redirects or headers that steer the client (pure).
//! - [`metrics`]: requests by verb and status, open calls, frames dropped.
//! - [`offline`]: whether a cluster can take calls, and since when it cannot (pure).
//! - [`status`]: the hub's own answers as Kubernetes `Status` objects.
//! - [`revoke`]: a long request (a session, a watch) decided again when the grants or the set
//!   index change, and ended when its grant is gone (issue 48); a session also when its
//!   caller's token expires or is no longer accepted ([`credential`]).
//! - [`credential`]: a session's token, watched to its expiry and checked again while the
//!   session runs.
//! - [`tunnel`]: calls streamed to agents over NATS ([`flotilla_bus::tunnel`]) with flow control,
//!   cancellation and timeouts; exec, attach and port-forward sessions, full duplex.
//! - [`streams`]: what sessions may take (slots, byte reservations per identity), their log
//!   lines and metrics.
//! - [`refusals`]: the spoke's recent refusals of exec and attach upgrades, answered again to
//!   kubectl's SPDY retry.
//! - [`session`]: what an exec, attach or port-forward request asks for, from its path and
//!   query (pure).
//! - [`upgrade`]: a session request's upgrade checked, its session opened, `101` answered and
//!   the connection handed to [`exec`] (WebSocket channel protocols), [`spdy_exec`]
//!   (`v4.channel.k8s.io` over SPDY) or [`portforward`] (SPDY, raw or in a WebSocket; a
//!   session per forwarded connection).
//! - [`server`]: the HTTP(S) server, an axum `Router` with one fallback handler and layers for
//!   the count and an open hub's host check: authenticate, decide, log, check the cluster, call,
//!   stream the answer back.
//!
//! The agent forwards each call to its cluster's API server (or the simulated cluster answers
//! it) and streams the answer back; errors from the spoke come back verbatim.

pub mod access;
pub mod answer;
pub mod credential;
pub mod exec;
pub mod metrics;
pub mod offline;
pub mod portforward;
pub mod refusals;
pub mod request;
pub mod revoke;
pub mod server;
pub mod session;
pub mod spdy_exec;
pub mod status;
pub mod streams;
pub mod tunnel;
pub mod upgrade;

use thiserror::Error;

/// Largest request body the proxy forwards (what a Kubernetes API server accepts).
pub const MAX_REQUEST_BODY: usize = 3 * 1024 * 1024;

/// Why a body (the client's, or the spoke's on its way to the client) broke off.
#[derive(Debug, Error)]
pub enum BodyError {
    /// The client's body is larger than [`MAX_REQUEST_BODY`].
    #[error("the request body is over the {0}-byte limit")]
    TooLarge(usize),
    /// The client's body could not be read.
    #[error("reading the request body: {0}")]
    Read(#[source] axum::Error),
    /// The call broke off while the response was streaming.
    #[error("the call broke off: {0}")]
    Call(#[source] Box<tunnel::CallError>),
    /// A read (`GET`, `HEAD`, a watch) carries a body: Kubernetes reads none, and one that
    /// never ends would hold a slot and memory at the agent (issue 42).
    #[error(
        "a {0} request carries no body: the cluster proxy refuses a body on GET, HEAD and watch \
         requests (the Kubernetes API reads none); send the request without one"
    )]
    OnRead(http::Method),
    /// The client did not send its whole body within the deadline.
    #[error(
        "the request body did not arrive within {0:?} (--cluster-proxy-body-seconds): the \
         cluster proxy cuts a body that is still coming then"
    )]
    TooSlow(std::time::Duration),
    /// The grant that allowed the request is gone (issue 48): the answer is cut.
    #[error("{0}")]
    Revoked(String),
}

/// Settings of the cluster proxy.
#[derive(Debug, Clone, Default)]
pub struct ProxyConfig {
    /// Where to listen (`None`: no cluster proxy).
    pub listen: Option<std::net::SocketAddr>,
    /// The calls' settings.
    pub tunnel: tunnel::TunnelConfig,
    /// How client connections are bounded.
    pub connections: server::Limits,
}

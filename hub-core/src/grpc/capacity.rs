//! How much of the gRPC server one caller may hold (issue 42): a read-only token opened 200
//! watches it never read and took the hub from 82 MiB to 1.7 GiB. Each limit is configurable
//! ([`CapacityArgs`]), counted (`flotilla_hub_limit_refusals_total{limit}`) and refused with a
//! status that names it and its flag:
//!
//! - `grpc_connections`: connections open at once (`--grpc-max-connections`); one past it is
//!   closed as soon as it is accepted (a connection has no identity yet), logged;
//! - streams per connection (`--grpc-max-concurrent-streams`, HTTP/2 `SETTINGS`) and HTTP/2
//!   keepalive pings (`--grpc-keepalive-seconds`, `--grpc-keepalive-timeout-seconds`): a
//!   connection whose peer stops answering pings is closed, with everything it held;
//! - `grpc_calls_per_identity`: calls in flight per identity, streams included
//!   (`--grpc-calls-per-identity`) — each identity's share of the server;
//! - `grpc_watches_per_identity` and `grpc_watches`: watches open per identity
//!   (`--grpc-watches-per-identity`) and on the hub (`--grpc-watches-max`);
//! - `grpc_slow_watcher`: a watcher whose stream has accepted nothing for
//!   `--grpc-slow-watcher-seconds` is dropped (the hub's `grpc::watch`), its stream ended with
//!   `RESOURCE_EXHAUSTED` when the client reads again.
//!
//! The identity is the token's name; on an open hub (no token file) every caller from one
//! address is one identity. A call holds its slots until its response body is dropped — the
//! end of a stream, a reset, or its connection closing — so a stream nobody reads keeps
//! counting against its identity.

use super::auth::Identity;
use crate::metrics::Metrics;
use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;
use tonic::body::Body;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

/// Default `--grpc-max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default `--grpc-max-concurrent-streams` (per connection).
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 256;
/// Default `--grpc-keepalive-seconds`.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(30);
/// Default `--grpc-keepalive-timeout-seconds`.
pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// Default `--grpc-calls-per-identity`: above the load tests' 256 concurrent callers and their
/// watches on one open hub.
pub const DEFAULT_CALLS_PER_IDENTITY: usize = 512;
/// Default `--grpc-watches-per-identity`.
pub const DEFAULT_WATCHES_PER_IDENTITY: usize = 64;
/// Default `--grpc-watches-max`.
pub const DEFAULT_WATCHES: usize = 1024;
/// Default `--grpc-slow-watcher-seconds`.
pub const DEFAULT_SLOW_WATCHER: Duration = Duration::from_secs(30);
/// Events a watch queues for its client before its task waits (and, past the deadline, is
/// dropped): what one unread watch costs besides its position.
pub const WATCH_QUEUE: usize = 16;

/// The gRPC server's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityConfig {
    /// Connections open at once.
    pub max_connections: usize,
    /// HTTP/2 streams one connection may have open at once.
    pub max_concurrent_streams: u32,
    /// An HTTP/2 ping this often on every connection.
    pub keepalive: Duration,
    /// A connection whose ping is not answered within this is closed.
    pub keepalive_timeout: Duration,
    /// Calls (streams included) one identity may have in flight.
    pub calls_per_identity: usize,
    /// Watches one identity may have open.
    pub watches_per_identity: usize,
    /// Watches open on the hub.
    pub watches: usize,
    /// A watcher whose stream accepted nothing for this long is dropped.
    pub slow_watcher: Duration,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            keepalive: DEFAULT_KEEPALIVE,
            keepalive_timeout: DEFAULT_KEEPALIVE_TIMEOUT,
            calls_per_identity: DEFAULT_CALLS_PER_IDENTITY,
            watches_per_identity: DEFAULT_WATCHES_PER_IDENTITY,
            watches: DEFAULT_WATCHES,
            slow_watcher: DEFAULT_SLOW_WATCHER,
        }
    }
}

/// The flags of [`CapacityConfig`] (flattened into the hub's).
#[derive(clap::Args, Debug, Clone)]
pub struct CapacityArgs {
    /// gRPC connections open at once; one past it is closed as soon as it is accepted.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_MAX_CONNECTIONS",
        default_value_t = DEFAULT_MAX_CONNECTIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000)
    )]
    pub grpc_max_connections: usize,
    /// HTTP/2 streams (calls) one gRPC connection may have open at once.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_MAX_CONCURRENT_STREAMS",
        default_value_t = DEFAULT_MAX_CONCURRENT_STREAMS,
        value_parser = clap::value_parser!(u32).range(1..=65_536)
    )]
    pub grpc_max_concurrent_streams: u32,
    /// Seconds between HTTP/2 pings on every gRPC connection.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_KEEPALIVE_SECONDS",
        default_value_t = DEFAULT_KEEPALIVE.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub grpc_keepalive_seconds: u64,
    /// Seconds a ping may go unanswered before its connection is closed.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_KEEPALIVE_TIMEOUT_SECONDS",
        default_value_t = DEFAULT_KEEPALIVE_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=3_600)
    )]
    pub grpc_keepalive_timeout_seconds: u64,
    /// gRPC calls (streams included) one identity may have in flight: its share of the server
    /// (on an open hub, one address is one identity).
    #[arg(
        long,
        env = "FLOTILLA_GRPC_CALLS_PER_IDENTITY",
        default_value_t = DEFAULT_CALLS_PER_IDENTITY,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000)
    )]
    pub grpc_calls_per_identity: usize,
    /// Watches one identity may have open.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_WATCHES_PER_IDENTITY",
        default_value_t = DEFAULT_WATCHES_PER_IDENTITY,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000)
    )]
    pub grpc_watches_per_identity: usize,
    /// Watches open on the hub, every identity together.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_WATCHES_MAX",
        default_value_t = DEFAULT_WATCHES,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000)
    )]
    pub grpc_watches_max: usize,
    /// A watcher whose stream has accepted nothing for this many seconds (a client that reads
    /// nothing) is dropped; its stream ends with RESOURCE_EXHAUSTED.
    #[arg(
        long,
        env = "FLOTILLA_GRPC_SLOW_WATCHER_SECONDS",
        default_value_t = DEFAULT_SLOW_WATCHER.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub grpc_slow_watcher_seconds: u64,
}

impl CapacityArgs {
    /// The configuration the flags give.
    pub fn config(&self) -> CapacityConfig {
        CapacityConfig {
            max_connections: self.grpc_max_connections,
            max_concurrent_streams: self.grpc_max_concurrent_streams,
            keepalive: Duration::from_secs(self.grpc_keepalive_seconds),
            keepalive_timeout: Duration::from_secs(self.grpc_keepalive_timeout_seconds),
            calls_per_identity: self.grpc_calls_per_identity,
            watches_per_identity: self.grpc_watches_per_identity,
            watches: self.grpc_watches_max,
            slow_watcher: Duration::from_secs(self.grpc_slow_watcher_seconds),
        }
    }
}

/// The server's gauges (`flotilla_hub_api_connections`, `flotilla_hub_api_calls`,
/// `flotilla_hub_api_watches`).
#[derive(Clone, Default)]
pub struct Gauges {
    connections: Gauge<i64, AtomicI64>,
    calls: Gauge<i64, AtomicI64>,
    watches: Gauge<i64, AtomicI64>,
}

impl Gauges {
    /// The gauges, registered once per hub.
    pub fn of(metrics: &Metrics) -> Self {
        metrics.component("api_capacity", |hub| {
            let g = Self::default();
            hub.register_component("api", |r| {
                r.register(
                    "connections",
                    "gRPC connections open",
                    g.connections.clone(),
                );
                r.register(
                    "calls",
                    "gRPC calls in flight, streams included",
                    g.calls.clone(),
                );
                r.register("watches", "gRPC watches open", g.watches.clone());
            });
            g
        })
    }
}

/// A refusal at one of the server's limits: which limit and what the caller is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The limit's metric label.
    pub limit: &'static str,
    /// What the caller is told (names the flag).
    pub message: String,
}

impl From<Refused> for Status {
    fn from(r: Refused) -> Self {
        Status::resource_exhausted(r.message)
    }
}

/// What one identity holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Held {
    calls: usize,
    watches: usize,
}

/// Every identity's calls and watches, and the hub's watches.
#[derive(Debug, Default)]
struct Ledger {
    by_identity: HashMap<Arc<str>, Held>,
    watches: usize,
}

/// The shares: admits a call (or refuses it) and hands out the [`Slot`] it holds.
#[derive(Clone)]
pub struct Shares {
    config: CapacityConfig,
    ledger: Arc<Mutex<Ledger>>,
    gauges: Gauges,
}

impl Shares {
    /// Shares by `config`, reported in `gauges`.
    pub fn new(config: CapacityConfig, gauges: Gauges) -> Self {
        Self {
            config,
            ledger: Arc::default(),
            gauges,
        }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a call of `who` (a watch when `watch`), or says which limit refuses it.
    pub fn admit(&self, who: &str, watch: bool) -> Result<Slot, Refused> {
        let c = &self.config;
        let mut guard = self.ledger();
        let ledger = &mut *guard;
        let hub_watches = ledger.watches;
        let held = ledger.by_identity.get(who).copied().unwrap_or_default();
        if held.calls >= c.calls_per_identity {
            return Err(Refused {
                limit: "grpc_calls_per_identity",
                message: format!(
                    "{who} has {} calls in flight, its share of the hub \
                     (--grpc-calls-per-identity {}); wait for some to finish",
                    held.calls, c.calls_per_identity
                ),
            });
        }
        if watch && held.watches >= c.watches_per_identity {
            return Err(Refused {
                limit: "grpc_watches_per_identity",
                message: format!(
                    "{who} has {} watches open, its share of the hub \
                     (--grpc-watches-per-identity {}); close one before opening another",
                    held.watches, c.watches_per_identity
                ),
            });
        }
        if watch && hub_watches >= c.watches {
            return Err(Refused {
                limit: "grpc_watches",
                message: format!(
                    "the hub serves {hub_watches} watches, its limit (--grpc-watches-max {}); \
                     try again later",
                    c.watches
                ),
            });
        }
        let who: Arc<str> = who.into();
        let entry = ledger.by_identity.entry(who.clone()).or_default();
        entry.calls += 1;
        self.gauges.calls.inc();
        if watch {
            entry.watches += 1;
            ledger.watches += 1;
            self.gauges.watches.inc();
        }
        Ok(Slot {
            shares: self.clone(),
            who,
            watch,
        })
    }

    /// What `who` holds now: (calls, watches).
    pub fn held(&self, who: &str) -> (usize, usize) {
        let h = self
            .ledger()
            .by_identity
            .get(who)
            .copied()
            .unwrap_or_default();
        (h.calls, h.watches)
    }

    fn release(&self, who: &Arc<str>, watch: bool) {
        let mut ledger = self.ledger();
        if watch {
            ledger.watches = ledger.watches.saturating_sub(1);
            self.gauges.watches.dec();
        }
        self.gauges.calls.dec();
        if let Some(h) = ledger.by_identity.get_mut(who) {
            h.calls = h.calls.saturating_sub(1);
            if watch {
                h.watches = h.watches.saturating_sub(1);
            }
            if h.calls == 0 {
                ledger.by_identity.remove(who);
            }
        }
    }
}

/// A call's place in its identity's share, given back when dropped.
pub struct Slot {
    shares: Shares,
    who: Arc<str>,
    watch: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shares.release(&self.who, self.watch);
    }
}

/// How a watch is served, put in a watch call's extensions by [`Admit`] for the services
/// (the hub's `grpc::watch`).
#[derive(Clone)]
pub struct WatchSettings {
    /// A watcher whose stream accepted nothing for this long is dropped.
    pub slow_after: Duration,
    /// Events queued for the client at most.
    pub queue: usize,
    /// Where dropped watchers are counted.
    pub metrics: Option<Arc<Metrics>>,
}

impl Default for WatchSettings {
    fn default() -> Self {
        Self {
            slow_after: DEFAULT_SLOW_WATCHER,
            queue: WATCH_QUEUE,
            metrics: None,
        }
    }
}

impl WatchSettings {
    /// The settings [`Admit`] put in `req` (defaults without it: unit tests).
    pub fn of<T>(req: &tonic::Request<T>) -> Self {
        req.extensions().get::<Self>().cloned().unwrap_or_default()
    }

    /// The status a dropped watcher's stream ends with (counted).
    pub fn dropped(&self) -> Status {
        if let Some(m) = &self.metrics
            && m.limit_refused("grpc_slow_watcher")
        {
            tracing::info!(
                seconds = self.slow_after.as_secs(),
                "gRPC watch dropped: its client read nothing"
            );
        }
        Status::resource_exhausted(format!(
            "watch dropped: the client read nothing for {} s (--grpc-slow-watcher-seconds); \
             read the stream or watch again",
            self.slow_after.as_secs()
        ))
    }
}

/// The identity a call is counted under: the token's name, else the caller's address.
fn identity_of<B>(req: &http::Request<B>) -> String {
    if let Some(id) = req.extensions().get::<Identity>() {
        return id.name().to_string();
    }
    let ext = req.extensions();
    let addr = ext
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|t| t.get_ref().remote_addr())
        });
    match addr {
        Some(a) => format!("anonymous caller {}", a.ip()),
        None => "anonymous caller".into(),
    }
}

/// A tower layer (inside authentication, which names the identity) that admits each call by
/// [`Shares`] and refuses the rest with `RESOURCE_EXHAUSTED`.
#[derive(Clone)]
pub struct Admit {
    shares: Shares,
    watch: WatchSettings,
    metrics: Arc<Metrics>,
}

impl Admit {
    /// The layer.
    pub fn new(config: CapacityConfig, metrics: Arc<Metrics>) -> Self {
        let watch = WatchSettings {
            slow_after: config.slow_watcher,
            queue: WATCH_QUEUE,
            metrics: Some(metrics.clone()),
        };
        Self {
            shares: Shares::new(config, Gauges::of(&metrics)),
            watch,
            metrics,
        }
    }
}

impl<S> tower::Layer<S> for Admit {
    type Service = Admitted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admitted {
            inner,
            admit: self.clone(),
        }
    }
}

/// The service [`Admit`] wraps.
#[derive(Clone)]
pub struct Admitted<S> {
    inner: S,
    admit: Admit,
}

impl<S, B> tower::Service<http::Request<B>> for Admitted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let watch = super::forward::is_watch(req.uri().path());
        let who = identity_of(&req);
        let slot = match self.admit.shares.admit(&who, watch) {
            Ok(slot) => slot,
            Err(refused) => {
                if self.admit.metrics.limit_refused(refused.limit) {
                    tracing::warn!(
                        limit = refused.limit,
                        caller = %who,
                        method = %req.uri().path(),
                        "gRPC call refused: {refused}"
                    );
                }
                return Box::pin(std::future::ready(Ok(Status::from(refused).into_http())));
            }
        };
        if watch {
            req.extensions_mut().insert(self.admit.watch.clone());
        }
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await?;
            Ok(response.map(|body| Body::new(Holding { body, _slot: slot })))
        })
    }
}

/// A response body holding its call's [`Slot`] until hyper drops it.
struct Holding {
    body: Body,
    _slot: Slot,
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        http_body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::Body::size_hint(&self.body)
    }
}

/// Counts the server's connections: [`Connections::admit`] wraps an accepted connection that
/// fits in [`Counted`], which holds its place until the connection is dropped.
#[derive(Clone)]
pub struct Connections {
    open: Arc<Semaphore>,
    max: usize,
    gauges: Gauges,
    metrics: Arc<Metrics>,
    refused: Arc<AtomicU64>,
}

impl Connections {
    /// At most `max` at once.
    pub fn new(max: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            open: Arc::new(Semaphore::new(max)),
            max,
            gauges: Gauges::of(&metrics),
            metrics,
            refused: Arc::default(),
        }
    }

    /// The connection counted, or `None` (counted, logged, closed) past the limit.
    pub fn admit<IO>(&self, io: IO, peer: Option<std::net::SocketAddr>) -> Option<Counted<IO>> {
        match self.open.clone().try_acquire_owned() {
            Ok(permit) => {
                self.gauges.connections.inc();
                Some(Counted {
                    io,
                    _permit: permit,
                    gauge: self.gauges.connections.clone(),
                })
            }
            Err(_) => {
                let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
                if self.metrics.limit_refused("grpc_connections") {
                    tracing::warn!(
                        peer = ?peer,
                        refused = n,
                        "gRPC connection closed: the hub holds {} connections, its limit \
                         (--grpc-max-connections)",
                        self.max
                    );
                }
                None
            }
        }
    }
}

/// An accepted connection counted by [`Connections`].
pub struct Counted<IO> {
    io: IO,
    _permit: OwnedSemaphorePermit,
    gauge: Gauge<i64, AtomicI64>,
}

impl<IO> Drop for Counted<IO> {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl<IO: Connected> Connected for Counted<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(calls: usize, watches: usize, hub_watches: usize) -> Shares {
        Shares::new(
            CapacityConfig {
                calls_per_identity: calls,
                watches_per_identity: watches,
                watches: hub_watches,
                ..CapacityConfig::default()
            },
            Gauges::default(),
        )
    }

    #[test]
    fn each_identity_has_its_own_share_of_watches_and_gets_it_back() {
        let s = shares(100, 2, 100);
        let a1 = s.admit("alice", true).unwrap();
        let _a2 = s.admit("alice", true).unwrap();
        let refused = s.admit("alice", true).err().unwrap();
        assert_eq!(refused.limit, "grpc_watches_per_identity");
        assert!(
            refused.message.contains("--grpc-watches-per-identity 2")
                && refused.message.contains("alice"),
            "{refused}"
        );
        // Unary calls are not watches; another identity has its own share.
        let _call = s.admit("alice", false).unwrap();
        let _b = s.admit("bob", true).unwrap();
        drop(a1);
        assert_eq!(s.held("alice"), (2, 1));
        let _a3 = s.admit("alice", true).unwrap();
    }

    #[test]
    fn the_hub_wide_watch_limit_and_the_calls_share_are_refused_by_name() {
        let s = shares(3, 10, 2);
        let _a = s.admit("alice", true).unwrap();
        let _b = s.admit("bob", true).unwrap();
        let refused = s.admit("carol", true).err().unwrap();
        assert_eq!(refused.limit, "grpc_watches");
        assert!(
            refused.message.contains("--grpc-watches-max 2"),
            "{refused}"
        );
        let _c1 = s.admit("carol", false).unwrap();
        let _c2 = s.admit("carol", false).unwrap();
        let _c3 = s.admit("carol", false).unwrap();
        let refused = s.admit("carol", false).err().unwrap();
        assert_eq!(refused.limit, "grpc_calls_per_identity");
        assert!(
            refused.message.contains("--grpc-calls-per-identity 3"),
            "{refused}"
        );
        let status = Status::from(refused);
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    }

    #[test]
    fn identities_that_hold_nothing_are_forgotten() {
        let s = shares(10, 10, 10);
        let slots: Vec<Slot> = (0..5)
            .map(|i| s.admit(&format!("caller-{i}"), i % 2 == 0).unwrap())
            .collect();
        assert_eq!(s.ledger().by_identity.len(), 5);
        drop(slots);
        let ledger = s.ledger();
        assert!(ledger.by_identity.is_empty());
        assert_eq!(ledger.watches, 0);
    }
}

//! The hub's own HTTP(S) servers — the cluster proxy and the dashboard — share how a connection
//! is accepted, bounded and served: a bounded number of connections (and, where asked, per
//! source address), each served by a task the server owns; a TLS handshake and a first request within time limits; HTTP/1.1 and HTTP/2
//! (ALPN over TLS); accept failures backed off; everything stopped on shutdown.
//!
//! A server supplies a [`Handler`]; this module knows nothing of what it answers.

use bytes::Bytes;
use hyper::body::Incoming;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

/// How a connection is bounded before and while it is served: no client, authenticated or
/// not, holds a connection or the accept loop without limit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long a client has to finish the TLS handshake (default 10 s).
    pub tls_handshake: Duration,
    /// How long a client has to send its first request, and an HTTP/1.1 request's headers
    /// (default 30 s).
    pub header_read: Duration,
    /// Connections served at once; past it the server stops accepting until one ends
    /// (default 4096).
    pub max_connections: usize,
    /// HTTP/2 keep-alive: a ping after this much silence (default 30 s)…
    pub h2_keep_alive_interval: Duration,
    /// …and the connection closed when it is not answered within this (default 20 s).
    pub h2_keep_alive_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once (`None`: hyper's default, 200).
    pub h2_max_streams: Option<u32>,
    /// Connections one source ([`source_of`]) may hold at once; past it a new one is closed at
    /// once (0: no limit, the default) — one address cannot hold every connection.
    pub per_address: usize,
    /// Sources not held to [`Limits::per_address`]: proxies every sender comes through.
    pub trusted: Vec<Cidr>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            tls_handshake: Duration::from_secs(10),
            header_read: Duration::from_secs(30),
            max_connections: 4096,
            h2_keep_alive_interval: Duration::from_secs(30),
            h2_keep_alive_timeout: Duration::from_secs(20),
            h2_max_streams: None,
            per_address: 0,
            trusted: Vec::new(),
        }
    }
}

/// An address block (`10.0.0.0/8`, `2001:db8::/32`; a bare address is a block of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Whether `ip` is in the block (an IPv4-mapped IPv6 address as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.bits))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (addr, bits) = text.trim().split_once('/').unwrap_or((text.trim(), ""));
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an address block (10.0.0.0/8, 2001:db8::/32)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = if bits.is_empty() {
            max
        } else {
            bits.parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?
        };
        Ok(Self { addr, bits })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

/// The source a per-address bound counts: an IPv4 address (an IPv4-mapped IPv6 one as
/// itself), or an IPv6 address's /64 (one site's whole prefix: an IPv6 sender has billions of
/// addresses, not billions of prefixes).
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(std::net::Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Connections held by each source, for [`Limits::per_address`].
#[derive(Debug, Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place in [`PerAddress`], given back when it ends.
struct AddressSlot {
    table: Arc<PerAddress>,
    source: IpAddr,
}

impl PerAddress {
    /// A slot for a connection from `peer`, or `None` when its source holds `limit` already.
    fn take(table: &Arc<PerAddress>, peer: IpAddr, limit: usize) -> Option<AddressSlot> {
        let source = source_of(peer);
        let mut held = table.0.lock().expect("per-address lock");
        let n = held.entry(source).or_default();
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            table: table.clone(),
            source,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut held = self.table.0.lock().expect("per-address lock");
        if let Some(n) = held.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.source);
            }
        }
    }
}

/// The first pause after a failed accept (out of file descriptors…); it doubles up to
/// [`MAX_ACCEPT_BACKOFF`] while accepts keep failing.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause after a failed accept.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(2);

/// What a server answers.
pub trait Handler: Send + Sync + 'static {
    /// The responses' body.
    type Body: http_body::Body<Data = Bytes, Error = Self::BodyError> + Send + 'static;
    /// Why a body broke off.
    type BodyError: Into<Box<dyn std::error::Error + Send + Sync>>;
    /// The server's name in logs ("cluster proxy", "dashboard").
    const NAME: &'static str;
    /// Answers one request from `peer`.
    fn handle(
        self: Arc<Self>,
        req: http::Request<Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = http::Response<Self::Body>> + Send;
}

/// Serves until `shutdown`; every connection is served by a task the server owns, at most
/// [`Limits::max_connections`] at once. Shutdown ends every connection (streams included).
pub fn serve<H: Handler>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    handler: Arc<H>,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let span = tracing::info_span!("webserver", server = H::NAME);
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        let permits = Arc::new(Semaphore::new(limits.max_connections));
        let per_address = Arc::new(PerAddress::default());
        let mut backoff = ACCEPT_BACKOFF;
        loop {
            let (permit, accepted) = tokio::select! {
                accepted = accept(&listener, &permits) => accepted,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                _ = shutdown.changed() => break,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => {
                    backoff = ACCEPT_BACKOFF;
                    a
                }
                Err(e) => {
                    // Out of file descriptors, say: retrying at once would spin.
                    tracing::warn!(server = H::NAME, error = %e, ?backoff, "accepting a connection failed");
                    drop(permit);
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = shutdown.changed() => break,
                    }
                    backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                    continue;
                }
            };
            let slot = if limits.per_address == 0
                || limits.trusted.iter().any(|c| c.contains(peer.ip()))
            {
                None
            } else {
                match PerAddress::take(&per_address, peer.ip(), limits.per_address) {
                    Some(slot) => Some(slot),
                    None => {
                        tracing::debug!(server = H::NAME, %peer, limit = limits.per_address, "too many connections from one address: closed");
                        continue;
                    }
                }
            };
            let _ = tcp.set_nodelay(true);
            let span = tracing::debug_span!("connection", %peer);
            let held = (permit, slot);
            connections.spawn(
                connection(handler.clone(), limits.clone(), tls.clone(), tcp, peer, held)
                    .instrument(span),
            );
        }
        connections.shutdown().await;
    }
    .instrument(span))
}

/// The next connection, once there is room for one (the permit is held while it is served).
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
) -> (
    Option<OwnedSemaphorePermit>,
    std::io::Result<(TcpStream, SocketAddr)>,
) {
    // The semaphore is never closed; without a permit the server would not be bounded, so
    // a closed one stops accepting.
    let Ok(permit) = permits.clone().acquire_owned().await else {
        return std::future::pending().await;
    };
    (Some(permit), listener.accept().await)
}

/// Serves one connection: the TLS handshake within [`Limits::tls_handshake`], a first request
/// within [`Limits::header_read`], then HTTP/1.1 or HTTP/2 until the client leaves — or until
/// an HTTP/1.1 connection is upgraded (the cluster proxy's exec, attach and port-forward), when
/// hyper hands it to the handler's task and this connection's permit is given back.
async fn connection<H: Handler>(
    handler: Arc<H>,
    limits: Limits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    tcp: TcpStream,
    peer: SocketAddr,
    _held: (Option<OwnedSemaphorePermit>, Option<AddressSlot>),
) {
    let requested = Arc::new(AtomicBool::new(false));
    let seen = requested.clone();
    let service = hyper::service::service_fn(move |req| {
        let handler = handler.clone();
        seen.store(true, Ordering::Relaxed);
        async move { Ok::<_, std::convert::Infallible>(handler.handle(req, peer).await) }
    });
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // A client that never finishes its headers does not hold a connection forever; an HTTP/2
    // peer that stops answering pings is dropped.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(limits.h2_keep_alive_interval)
        .keep_alive_timeout(limits.h2_keep_alive_timeout)
        .max_concurrent_streams(limits.h2_max_streams);
    let served = match tls {
        Some(acceptor) => {
            let stream = match tokio::time::timeout(limits.tls_handshake, acceptor.accept(tcp))
                .await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(server = H::NAME, %peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(server = H::NAME, %peer, "TLS handshake timed out");
                    return;
                }
            };
            let conn = builder
                .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                served = conn => served,
                () = silent(&requested, limits.header_read) => {
                    tracing::debug!(server = H::NAME, %peer, "no request in time");
                    return;
                }
            }
        }
        None => {
            let conn =
                builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tcp), service);
            tokio::select! {
                served = conn => served,
                () = silent(&requested, limits.header_read) => {
                    tracing::debug!(server = H::NAME, %peer, "no request in time");
                    return;
                }
            }
        }
    };
    if let Err(e) = served {
        tracing::debug!(server = H::NAME, %peer, error = %e, "connection ended");
    }
}

/// Resolves after `within` if no request came by then (hyper's own header timeout does not
/// cover the wait for the first bytes, while it tells HTTP/1.1 from HTTP/2); never otherwise.
async fn silent(requested: &AtomicBool, within: Duration) {
    tokio::time::sleep(within).await;
    if requested.load(Ordering::Relaxed) {
        std::future::pending::<()>().await;
    }
}

/// A TLS acceptor for the certificate chain and key (PEM), offering HTTP/2 and HTTP/1.1.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Why an HTTP listener's flags are refused at start (empty: fine): plain HTTP only on
/// loopback, and an open server (no tokens) only on loopback unless told otherwise. `flag` is
/// the listener's flag (for the message), `what` what an open server lets anyone do.
pub fn listener_refusals(
    flag: &str,
    addr: SocketAddr,
    tls: bool,
    tokens: bool,
    allow_unauthenticated: bool,
    what: &str,
) -> Vec<String> {
    let mut errors = Vec::new();
    if !addr.ip().is_loopback() && !tls {
        errors.push(format!(
            "{flag} {addr}: plain HTTP is served on loopback only; give --grpc-tls-cert and \
             --grpc-tls-key (it serves the API's certificate)"
        ));
    }
    if !tokens && !addr.ip().is_loopback() && !allow_unauthenticated {
        errors.push(format!(
            "{flag} {addr}: without --api-token-file anyone who reaches it may {what}; give \
             tokens or listen on loopback"
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_or_open_listeners_are_refused_off_loopback() {
        let off: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(listener_refusals("--x", lo, false, false, false, "act").is_empty());
        let plain = listener_refusals("--x", off, false, true, false, "act");
        assert_eq!(plain.len(), 1);
        assert!(plain[0].contains("plain HTTP is served on loopback only"));
        let open = listener_refusals("--x", off, true, false, false, "act");
        assert_eq!(open.len(), 1);
        assert!(open[0].contains("without --api-token-file"));
        assert!(listener_refusals("--x", off, true, false, true, "act").is_empty());
    }
}

//! The upgrade handshakes of exec, attach and port-forward (pure): which transport and
//! subprotocol a request asks for, the checks before answering it, and the `101` head.
//!
//! Two transports reach the proxy (design note §1.1):
//! - **WebSocket** (RFC 6455, `GET`): exec and attach offer `v5.channel.k8s.io` (kubectl) or
//!   `v5`+`v4` (kube-rs); kubectl ≥ 1.31's port-forward offers `SPDY/3.1+portforward.k8s.io`,
//!   a SPDY connection carried in binary messages. We choose by *our* preference (v5, then
//!   v4) and name the supported list in the refusal.
//! - **SPDY/3.1** (`POST`, `Upgrade: SPDY/3.1`): the client lists `X-Stream-Protocol-Version`
//!   headers and the server takes the first one it knows (apimachinery `httpstream.Handshake`);
//!   none → `403` with `X-Accepted-Stream-Protocol-Versions`.
//!
//! Refusals are typed ([`Error`]) with the HTTP status a Kubernetes API server would use; the
//! caller words them as a `Status`. kubectl falls back from WebSocket to SPDY on *any* non-101
//! answer, so refusals must not depend on the transport.

use data_encoding::BASE64;
use http::header::{
    CONNECTION, HeaderMap, HeaderName, HeaderValue, ORIGIN, SEC_WEBSOCKET_ACCEPT,
    SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL, SEC_WEBSOCKET_VERSION, UPGRADE,
};
use http::{Method, Request, Response, StatusCode, Version};
use sha1::{Digest, Sha1};

use crate::channel;

#[cfg(test)]
mod tests;

/// The GUID RFC 6455 appends to the client's key before hashing it.
pub const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The WebSocket subprotocol of a SPDY port-forward connection tunnelled in a WebSocket.
pub const SPDY_PORT_FORWARD_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";
/// The stream protocol of port-forward over raw SPDY.
pub const PORT_FORWARD: &str = "portforward.k8s.io";
/// The `Upgrade` token of SPDY/3.1.
pub const SPDY_31: &str = "SPDY/3.1";
/// The header a SPDY client lists its stream protocols in, and the server answers with.
pub const X_STREAM_PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static("x-stream-protocol-version");
/// The header a SPDY refusal lists the server's stream protocols in.
pub const X_ACCEPTED_STREAM_PROTOCOL_VERSIONS: HeaderName =
    HeaderName::from_static("x-accepted-stream-protocol-versions");
/// The prefix of the subprotocols that carry a bearer token (`base64url.bearer.authorization.
/// k8s.io.<token>`): never honoured, never repeated in an error.
pub const BEARER_SUBPROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// At most this many offered protocols are repeated in a refusal, each cut to
/// [`MAX_ECHOED_LEN`] characters: an error must not reflect a client's headers unbounded.
pub const MAX_ECHOED: usize = 8;
/// See [`MAX_ECHOED`].
pub const MAX_ECHOED_LEN: usize = 64;

/// What the upgraded connection is for: it decides the protocols we accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `pods/exec` and `pods/attach`: the channel protocols.
    Channels,
    /// `pods/portforward`: SPDY streams, raw or tunnelled in a WebSocket.
    PortForward,
}

/// The subprotocol chosen for a WebSocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsProtocol {
    /// `v5.channel.k8s.io` or `v4.channel.k8s.io`.
    Channel(channel::Protocol),
    /// `SPDY/3.1+portforward.k8s.io`: SPDY carried in binary messages.
    SpdyTunnel,
}

impl WsProtocol {
    /// The subprotocol's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            WsProtocol::Channel(p) => p.name(),
            WsProtocol::SpdyTunnel => SPDY_PORT_FORWARD_TUNNEL,
        }
    }
}

/// The stream protocol chosen for a raw SPDY connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpdyProtocol {
    /// `portforward.k8s.io`.
    PortForward,
    /// `v4.channel.k8s.io`: exec and attach over SPDY (kubectl ≤ 1.29 and the fallback).
    ChannelV4,
}

impl SpdyProtocol {
    /// The protocol's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            SpdyProtocol::PortForward => PORT_FORWARD,
            SpdyProtocol::ChannelV4 => channel::Protocol::V4.name(),
        }
    }
}

impl Purpose {
    /// The WebSocket subprotocols served, in order of preference.
    pub fn websocket_protocols(self) -> &'static [WsProtocol] {
        match self {
            Purpose::Channels => &[
                WsProtocol::Channel(channel::Protocol::V5),
                WsProtocol::Channel(channel::Protocol::V4),
            ],
            Purpose::PortForward => &[WsProtocol::SpdyTunnel],
        }
    }

    /// The SPDY stream protocols served.
    pub fn spdy_protocols(self) -> &'static [SpdyProtocol] {
        match self {
            Purpose::Channels => &[SpdyProtocol::ChannelV4],
            Purpose::PortForward => &[SpdyProtocol::PortForward],
        }
    }
}

/// An accepted WebSocket handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSocketUpgrade {
    /// The client's `Sec-WebSocket-Key`, checked to be 16 bytes in base64.
    pub key: String,
    /// The subprotocol chosen.
    pub protocol: WsProtocol,
}

/// An accepted SPDY/3.1 upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpdyUpgrade {
    /// The stream protocol chosen.
    pub protocol: SpdyProtocol,
}

/// What a request may be upgraded to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upgrade {
    /// A WebSocket.
    WebSocket(WebSocketUpgrade),
    /// A raw SPDY/3.1 connection.
    Spdy(SpdyUpgrade),
}

/// Why an upgrade was refused. [`Error::status`] is the HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// HTTP/2 or HTTP/1.0: only HTTP/1.1 connections are upgraded.
    #[error("exec, attach and port-forward need an HTTP/1.1 connection upgrade; got {version:?}")]
    NotHttp11 {
        /// The request's version.
        version: Version,
    },
    /// No `Connection: Upgrade` or no `Upgrade` header.
    #[error(
        "exec, attach and port-forward need an HTTP/1.1 connection upgrade \
         (Connection: Upgrade with Upgrade: websocket or SPDY/3.1)"
    )]
    NotUpgrade,
    /// An `Upgrade` to something else than WebSocket or SPDY/3.1.
    #[error("unsupported upgrade {upgrade:?}: the cluster proxy speaks websocket and SPDY/3.1")]
    UnknownUpgrade {
        /// The `Upgrade` header, cut to [`MAX_ECHOED_LEN`].
        upgrade: String,
    },
    /// An upgrade carrying `Origin`: a browser page must never drive a stream into a pod
    /// (WebSockets are not subject to CORS); kubectl sends no `Origin`.
    #[error(
        "upgrades carrying an Origin header are refused: a browser page may not open a \
         stream into a pod"
    )]
    Origin,
    /// A WebSocket handshake that is not a `GET`.
    #[error("a WebSocket handshake is a GET; got {method}")]
    Method {
        /// The request's method.
        method: Method,
    },
    /// A WebSocket version other than 13.
    #[error("unsupported Sec-WebSocket-Version {version:?}: only 13 is served")]
    WebSocketVersion {
        /// The header, cut to [`MAX_ECHOED_LEN`].
        version: String,
    },
    /// A missing or malformed `Sec-WebSocket-Key`.
    #[error("Sec-WebSocket-Key must be 16 bytes in base64")]
    WebSocketKey,
    /// None of the offered WebSocket subprotocols is served.
    #[error(
        "none of the offered subprotocols [{}] is served; supported subprotocols: {}",
        offered.join(", "), supported.join(", ")
    )]
    NoSubprotocol {
        /// What the client offered (bearer tokens left out, bounded).
        offered: Vec<String>,
        /// What we serve for this purpose.
        supported: Vec<&'static str>,
    },
    /// None of the offered SPDY stream protocols is served.
    #[error(
        "none of the offered stream protocols [{}] is served; supported: {}",
        offered.join(", "), supported.join(", ")
    )]
    NoStreamProtocol {
        /// What the client offered (bounded).
        offered: Vec<String>,
        /// What we serve for this purpose.
        supported: Vec<&'static str>,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status of the refusal, as a Kubernetes API server would answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::Origin | Error::NoStreamProtocol { .. } => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// Headers the refusal carries besides its body: `Sec-WebSocket-Version: 13` for a wrong
    /// version (RFC 6455 §4.4), `X-Accepted-Stream-Protocol-Versions` when SPDY protocols did
    /// not match (apimachinery `httpstream.Handshake`).
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        match self {
            Error::WebSocketVersion { .. } => {
                headers.insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
            }
            Error::NoStreamProtocol { supported, .. } => {
                for p in supported {
                    headers.append(
                        X_ACCEPTED_STREAM_PROTOCOL_VERSIONS,
                        HeaderValue::from_static(p),
                    );
                }
            }
            _ => {}
        }
        headers
    }
}

/// Classifies an upgrade request for `purpose` and checks it: HTTP/1.1, no `Origin`,
/// `Connection: Upgrade`, then the WebSocket or SPDY rules.
pub fn upgrade<B>(req: &Request<B>, purpose: Purpose) -> Result<Upgrade> {
    if req.version() != Version::HTTP_11 {
        return Err(Error::NotHttp11 {
            version: req.version(),
        });
    }
    let headers = req.headers();
    if headers.contains_key(ORIGIN) {
        return Err(Error::Origin);
    }
    if !has_token(headers, &CONNECTION, "upgrade") {
        return Err(Error::NotUpgrade);
    }
    if has_token(headers, &UPGRADE, "websocket") {
        return websocket(req.method(), headers, purpose).map(Upgrade::WebSocket);
    }
    if has_token(headers, &UPGRADE, SPDY_31) {
        return spdy(headers, purpose).map(Upgrade::Spdy);
    }
    match headers.get(UPGRADE) {
        None => Err(Error::NotUpgrade),
        Some(v) => Err(Error::UnknownUpgrade {
            upgrade: echo(&String::from_utf8_lossy(v.as_bytes())),
        }),
    }
}

/// Checks a WebSocket handshake (RFC 6455 §4.2.1) and chooses its subprotocol.
pub fn websocket(
    method: &Method,
    headers: &HeaderMap,
    purpose: Purpose,
) -> Result<WebSocketUpgrade> {
    if method != Method::GET {
        return Err(Error::Method {
            method: method.clone(),
        });
    }
    let version = headers
        .get(SEC_WEBSOCKET_VERSION)
        .map(HeaderValue::as_bytes);
    if version != Some(b"13") {
        return Err(Error::WebSocketVersion {
            version: echo(&String::from_utf8_lossy(version.unwrap_or_default())),
        });
    }
    let key = headers
        .get(SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| BASE64.decode(k.as_bytes()).is_ok_and(|raw| raw.len() == 16))
        .ok_or(Error::WebSocketKey)?;
    let offered = tokens(headers, &SEC_WEBSOCKET_PROTOCOL);
    let supported = purpose.websocket_protocols();
    let protocol = supported
        .iter()
        .copied()
        .find(|p| offered.iter().any(|o| o == p.name()))
        .ok_or_else(|| Error::NoSubprotocol {
            offered: echoed(&offered),
            supported: supported.iter().map(|p| p.name()).collect(),
        })?;
    Ok(WebSocketUpgrade {
        key: key.to_owned(),
        protocol,
    })
}

/// Checks a SPDY/3.1 upgrade's stream protocols: the first the client lists that we serve
/// (apimachinery `httpstream.Handshake`). kubectl lists one per header; commas are also split.
pub fn spdy(headers: &HeaderMap, purpose: Purpose) -> Result<SpdyUpgrade> {
    let offered = tokens(headers, &X_STREAM_PROTOCOL_VERSION);
    let supported = purpose.spdy_protocols();
    offered
        .iter()
        .find_map(|o| supported.iter().copied().find(|p| p.name() == o))
        .map(|protocol| SpdyUpgrade { protocol })
        .ok_or_else(|| Error::NoStreamProtocol {
            offered: echoed(&offered),
            supported: supported.iter().map(|p| p.name()).collect(),
        })
}

/// `Sec-WebSocket-Accept` for a client key: base64(SHA-1(key ++ GUID)).
pub fn accept_key(key: &str) -> String {
    let mut sha = Sha1::new();
    sha.update(key.as_bytes());
    sha.update(WEBSOCKET_GUID.as_bytes());
    BASE64.encode(&sha.finalize())
}

impl WebSocketUpgrade {
    /// The `101 Switching Protocols` head: `Upgrade: websocket`, `Connection: Upgrade`,
    /// the accept key and the chosen subprotocol; no extensions.
    pub fn response(&self) -> Response<()> {
        let accept =
            HeaderValue::try_from(accept_key(&self.key)).expect("base64 is a valid header value");
        let mut resp = switching_protocols("websocket");
        let headers = resp.headers_mut();
        headers.insert(SEC_WEBSOCKET_ACCEPT, accept);
        headers.insert(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(self.protocol.name()),
        );
        resp
    }
}

impl SpdyUpgrade {
    /// The `101 Switching Protocols` head: `Upgrade: SPDY/3.1`, `Connection: Upgrade` and
    /// the chosen `X-Stream-Protocol-Version` (apimachinery `spdy/upgrade.go`).
    pub fn response(&self) -> Response<()> {
        let mut resp = switching_protocols(SPDY_31);
        resp.headers_mut().insert(
            X_STREAM_PROTOCOL_VERSION,
            HeaderValue::from_static(self.protocol.name()),
        );
        resp
    }
}

fn switching_protocols(upgrade: &'static str) -> Response<()> {
    let mut resp = Response::new(());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = resp.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static(upgrade));
    resp
}

/// The comma-separated tokens of every `name` header, trimmed, empty ones dropped.
fn tokens(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    tokens(headers, name)
        .iter()
        .any(|t| t.eq_ignore_ascii_case(token))
}

/// The offered list as a refusal may repeat it: bearer subprotocols left out, bounded.
fn echoed(offered: &[String]) -> Vec<String> {
    offered
        .iter()
        .filter(|o| !o.starts_with(BEARER_SUBPROTOCOL_PREFIX))
        .take(MAX_ECHOED)
        .map(|o| echo(o))
        .collect()
}

fn echo(s: &str) -> String {
    s.chars().take(MAX_ECHOED_LEN).collect()
}

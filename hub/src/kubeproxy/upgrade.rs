//! exec, attach and port-forward requests (I/O): the client's connection upgrade checked
//! ([`flotilla_kubestream::negotiate`]), the session opened through the cluster's agent, the
//! `101` answered, and the upgraded connection handed to its protocol's task
//! ([`super::exec`], [`super::portforward`]), owned by the tunnels' task set.
//!
//! Reached only after the request was authenticated, decided (exec, attach and port-forward
//! are `create` on the pod's subresource: read-only tokens are refused), logged and its
//! cluster found available, so a refusal is the same whichever transport kubectl tries first
//! (it retries a refused WebSocket over SPDY and prints the second answer).
//!
//! | request | answer |
//! |---|---|
//! | exec/attach, WebSocket `v5.channel.k8s.io` / `v4.channel.k8s.io` | `101` once the agent opened the session, else the agent's refusal |
//! | exec/attach, SPDY/3.1 `v4.channel.k8s.io` (kubectl ≤ 1.29, `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, kubectl's retry of a refused WebSocket) | the spoke's refusal of the same request over WebSocket moments before if there was one ([`super::refusals`]: kubectl prints the retry's answer, and the spoke is not asked twice), else `101` once the agent opened the session, else the agent's refusal |
//! | port-forward, WebSocket `SPDY/3.1+portforward.k8s.io`, or SPDY/3.1 `portforward.k8s.io` | `101` at once; a session per forwarded connection |
//! | HTTP/2, no upgrade, an `Origin`, unknown protocols | `400`/`403` with what is served |

use super::refusals::{self, Key, Refusal};
use super::revoke::Hold;
use super::server::{Deps, answered, call_failed};
use super::status::{self, Body};
use super::tunnel::{Opened, SessionError, SessionIo, SessionOutgoing};
use super::{exec, portforward, session, spdy_exec};
use flotilla_api::v1::TunnelRequest;
use flotilla_bus::tunnel::session::{Kind, Streams};
use flotilla_kubestream::negotiate::{self, Purpose, Upgrade, WsProtocol};
use flotilla_kubestream::wsio::WsIo;
use http::StatusCode;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tracing::Instrument;

/// How often a session's client is pinged while it is quiet (WebSocket and SPDY pings; kubectl
/// pings every 5 or 10 s itself, and answers ours).
pub const CLIENT_PING: std::time::Duration = std::time::Duration::from_secs(20);
/// How long a session's client may send nothing (not even the answer to a ping) before its
/// session ends: its host vanished without closing the connection. kubectl's own limit on the
/// server is 61 s.
pub const CLIENT_SILENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// The SPDY connection settings of a session's client: [`CLIENT_PING`], [`CLIENT_SILENCE`].
pub fn spdy_config() -> flotilla_kubestream::spdy::conn::Config {
    flotilla_kubestream::spdy::conn::Config {
        ping_interval: Some(CLIENT_PING),
        silence_limit: Some(CLIENT_SILENCE),
        ..Default::default()
    }
}

/// The protocol of exec and attach over SPDY, for the log.
const SPDY_EXEC: &str = "SPDY/3.1+v4.channel.k8s.io";

/// Serves a session request for `kind` on `cluster`: `request` is what the caller's grant
/// makes of it (path, caller, impersonation, credential); the session ends when what it
/// holds (`hold`: the grant, the caller's token) is gone.
pub async fn serve(
    deps: &Deps,
    mut req: axum::extract::Request,
    kind: Kind,
    cluster: String,
    query: &str,
    mut request: TunnelRequest,
    hold: Hold,
) -> http::Response<Body> {
    if let Some(why) = hold.expired() {
        // 401: a client with a credential plugin fetches a new token and tries again.
        tracing::info!(cluster.name = %cluster, reason = %why, "cluster proxy session refused");
        return status::response(StatusCode::UNAUTHORIZED, &why);
    }
    let purpose = match kind {
        Kind::PortForward => Purpose::PortForward,
        Kind::Exec | Kind::Attach => Purpose::Channels,
    };
    let upgrade = match negotiate::upgrade(&req, purpose) {
        Ok(upgrade) => upgrade,
        Err(e) => {
            deps.metrics.refused(match e {
                negotiate::Error::Origin => "origin",
                _ => "protocol",
            });
            let mut resp = status::response(e.status(), &e.to_string());
            resp.headers_mut().extend(e.headers());
            return resp;
        }
    };
    if carries_body(req.headers()) {
        return status::response(
            StatusCode::BAD_REQUEST,
            "an exec, attach or port-forward upgrade carries no body",
        );
    }
    // The upgrade's headers are for the hub; the agent gets the parsed session.
    request.headers.clear();
    let key = Key::of(&cluster, &request);
    let on_upgrade = hyper::upgrade::on(&mut req);
    let tunnels = &deps.tunnels;
    match (kind, upgrade) {
        (Kind::PortForward, upgrade) => {
            if let Err(e) = session::port_forward(&request.path, 1) {
                return status::response(StatusCode::BAD_REQUEST, &e.to_string());
            }
            let (resp, tunnelled) = match &upgrade {
                Upgrade::WebSocket(ws) => (ws.response(), true),
                Upgrade::Spdy(spdy) => (spdy.response(), false),
            };
            // The connection's own place, before kubectl is answered: what it can make the
            // hub hold is its caller's, like a session's.
            let buffered = portforward::buffered(&portforward::config(), tunnelled);
            let place = match tunnels.reserve_connection(&request, buffered) {
                Ok(place) => place,
                Err(r) => {
                    tracing::info!(cluster.name = %cluster, refusal = %r, "port-forward refused");
                    return status::response(r.status(), &r.to_string());
                }
            };
            let target = portforward::Target {
                tunnels: tunnels.clone(),
                cluster: cluster.clone(),
                request,
                protocol: if tunnelled {
                    negotiate::SPDY_PORT_FORWARD_TUNNEL
                } else {
                    negotiate::SPDY_31
                },
                hold,
                place,
            };
            let span = tracing::info_span!("kubeproxy_portforward", cluster.name = %cluster);
            tunnels.spawn_task(port_forward(on_upgrade, tunnelled, target).instrument(span));
            switching(resp)
        }
        (_, Upgrade::Spdy(spdy)) => {
            if let Some(refusal) = tunnels.refusals().take(&key, std::time::Instant::now()) {
                return replayed(refusal);
            }
            let opened = open(deps, kind, &cluster, query, request, SPDY_EXEC, hold).await;
            let (io, asked) = match opened {
                Ok(opened) => opened,
                // Read whole, bounded, as a WebSocket's (nothing retries a SPDY exec, so it
                // is not remembered).
                Err(Refused::Spoke(resp)) => {
                    return collected(resp).await.map_or_else(|resp| resp, replayed);
                }
                Err(Refused::Hub(resp)) => return resp,
            };
            let span = tracing::info_span!(
                "kubeproxy_exec", cluster.name = %cluster, kind = %kind, protocol = SPDY_EXEC
            );
            tunnels.spawn_task(
                async move {
                    match on_upgrade.await {
                        Ok(upgraded) => spdy_exec::serve(TokioIo::new(upgraded), asked, io).await,
                        Err(e) => tracing::debug!(error = %e, "the client's upgrade failed"),
                    }
                }
                .instrument(span),
            );
            switching(spdy.response())
        }
        (_, Upgrade::WebSocket(ws)) => {
            let WsProtocol::Channel(protocol) = ws.protocol else {
                // negotiate offers only the channel protocols for exec and attach.
                return status::response(StatusCode::BAD_REQUEST, "not a channel protocol");
            };
            let opened = open(deps, kind, &cluster, query, request, protocol.name(), hold).await;
            let io = match opened {
                Ok((io, _)) => io,
                Err(Refused::Spoke(resp)) => return remembered(deps, key, resp).await,
                Err(Refused::Hub(resp)) => return resp,
            };
            let span = tracing::info_span!(
                "kubeproxy_exec", cluster.name = %cluster, kind = %kind
            );
            tunnels.spawn_task(
                async move {
                    match on_upgrade.await {
                        Ok(upgraded) => exec::serve(TokioIo::new(upgraded), protocol, io).await,
                        Err(e) => tracing::debug!(error = %e, "the client's upgrade failed"),
                    }
                }
                .instrument(span),
            );
            switching(ws.response())
        }
    }
}

/// Why an exec or attach session did not open: the answer for the client.
enum Refused {
    /// The spoke refused it (its RBAC, a missing pod): remembered for kubectl's SPDY retry.
    Spoke(http::Response<Body>),
    /// The hub refused it (the query, a limit, the agent's silence).
    Hub(http::Response<Body>),
}

/// Opens the exec or attach session `query` asks for through the cluster's agent; returns it
/// with the streams the client asked for.
async fn open(
    deps: &Deps,
    kind: Kind,
    cluster: &str,
    query: &str,
    mut request: TunnelRequest,
    protocol: &'static str,
    hold: Hold,
) -> Result<(SessionIo, Streams), Refused> {
    let spec = session::exec_or_attach(kind, &request.path, query)
        .map_err(|e| Refused::Hub(status::response(StatusCode::BAD_REQUEST, &e.to_string())))?;
    request.session = Some(spec.to_wire());
    let opened = deps
        .tunnels
        .open_session_until(
            SessionOutgoing {
                cluster: cluster.to_owned(),
                request,
                protocol,
            },
            hold,
        )
        .await;
    match opened {
        Ok(Opened::Session(io)) => Ok((io, spec.streams)),
        Ok(Opened::Refused(answer)) => Err(Refused::Spoke(answered(cluster, answer))),
        Err(e) => Err(Refused::Hub(session_failed(deps, cluster, &e))),
    }
}

/// The port-forward connection's task: the upgraded connection, unwrapped from its WebSocket
/// when tunnelled.
async fn port_forward(on_upgrade: OnUpgrade, tunnelled: bool, target: portforward::Target) {
    let upgraded = match on_upgrade.await {
        Ok(upgraded) => TokioIo::new(upgraded),
        Err(e) => {
            tracing::debug!(error = %e, "the client's upgrade failed");
            return;
        }
    };
    if tunnelled {
        let config = WebSocketConfig::default()
            .max_message_size(Some(portforward::MAX_TUNNEL_MESSAGE))
            .max_frame_size(Some(portforward::MAX_TUNNEL_MESSAGE))
            .write_buffer_size(0);
        let ws = WebSocketStream::from_raw_socket(upgraded, Role::Server, Some(config)).await;
        portforward::serve(WsIo::new(ws), target).await;
    } else {
        portforward::serve(upgraded, target).await;
    }
}

/// How long a spoke's refusal body may take to arrive before it is passed on unremembered.
const REFUSAL_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The spoke's refusal of a session, passed on and remembered for kubectl's SPDY retry.
async fn remembered(deps: &Deps, key: Key, resp: http::Response<Body>) -> http::Response<Body> {
    let refusal = match collected(resp).await {
        Ok(refusal) => refusal,
        Err(resp) => return resp,
    };
    deps.tunnels
        .refusals()
        .remember(key, refusal.clone(), std::time::Instant::now());
    replayed(refusal)
}

/// The spoke's refusal of a session read whole — its body at most [`refusals::MAX_BYTES`]
/// within [`REFUSAL_BODY_WAIT`] — or, when it is larger, slower or broken off, the hub's own
/// answer with its status: a hostile spoke must not hold the caller's session (and kubectl)
/// by dripping an endless refusal.
async fn collected(resp: http::Response<Body>) -> Result<Refusal, http::Response<Body>> {
    use http_body_util::BodyExt;
    let (parts, body) = resp.into_parts();
    let limited = http_body_util::Limited::new(body, refusals::MAX_BYTES);
    match tokio::time::timeout(REFUSAL_BODY_WAIT, limited.collect()).await {
        Ok(Ok(collected)) => Ok(Refusal {
            status: parts.status,
            headers: parts.headers,
            body: collected.to_bytes(),
        }),
        _ => Err(status::response(
            parts.status,
            "the cluster refused the session",
        )),
    }
}

/// A remembered refusal as the proxy's response.
fn replayed(refusal: Refusal) -> http::Response<Body> {
    use http_body_util::BodyExt;
    let mut resp = http::Response::new(
        http_body_util::Full::new(refusal.body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = refusal.status;
    *resp.headers_mut() = refusal.headers;
    resp
}

/// A `101` head as the proxy's response.
fn switching(resp: http::Response<()>) -> http::Response<Body> {
    resp.map(|()| {
        use http_body_util::BodyExt;
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync()
    })
}

/// Whether an upgrade request carries a body (a SPDY `POST` says `Content-Length: 0`).
fn carries_body(headers: &http::HeaderMap) -> bool {
    let length = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim() != "0");
    length.unwrap_or(false) || headers.contains_key(http::header::TRANSFER_ENCODING)
}

/// The answer to a session that could not open.
fn session_failed(deps: &Deps, cluster: &str, e: &SessionError) -> http::Response<Body> {
    let code = match e {
        // Counted by the tunnels.
        SessionError::Refused(r) => r.status(),
        SessionError::Call(call) => {
            let (code, limit) = call_failed(call);
            if let Some(limit) = limit {
                deps.metrics.refused(limit);
            }
            code
        }
        SessionError::Invalid(_) => StatusCode::BAD_REQUEST,
        SessionError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        SessionError::BadExit { .. } => StatusCode::BAD_GATEWAY,
        SessionError::Revoked { .. } => StatusCode::FORBIDDEN,
        SessionError::CredentialEnded { .. } => StatusCode::UNAUTHORIZED,
    };
    tracing::info!(cluster.name = %cluster, error = %e, "cluster proxy session failed");
    status::response(code, &e.to_string())
}

#[cfg(test)]
mod tests;

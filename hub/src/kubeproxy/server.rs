//! The cluster proxy's HTTP(S) server: each request is authenticated with the API's tokens,
//! decided ([`super::access`]), logged (who, cluster, verb, resource), checked against the
//! cluster's availability ([`super::offline`]) and made as a call through the cluster's agent
//! ([`super::tunnel`]); the spoke's answer streams back as it comes.
//!
//! Only end-to-end headers cross: the client's `Authorization` (a hub token) and `Impersonate-*`
//! never reach the spoke, hop-by-hop headers are dropped both ways. HTTP/1.1 and HTTP/2 (ALPN
//! over TLS), as kubectl speaks either.

use super::access::{self, Act, Asked};
use super::offline::{self, LeaseRule};
use super::request::{self, RequestInfo, Verb};
use super::status::{self, Body};
use super::tunnel::{CallError, Outgoing, Tunnels};
use super::{BodyError, MAX_REQUEST_BODY};
use crate::grpc::auth::{Identity, Role, Tokens};
use crate::inventory::ClusterInventory;
use bytes::Bytes;
use flotilla_api::v1::{TunnelCaller, TunnelHeader, TunnelImpersonation, TunnelRequest};
use futures::StreamExt;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, BodyStream, StreamBody};
use hyper::body::{Body as _, Incoming};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The role a ManagedServiceAccount caller is logged with.
const SERVICE_ACCOUNT_ROLE: &str = "service-account";

/// Headers that never cross the proxy: hop-by-hop ones, the hub's credentials, impersonation
/// (decided by the hub) and framing (the proxy streams).
const DROPPED: [&str; 14] = [
    "authorization",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
    "http2-settings",
    // `Expect: 100-continue` is answered (or not) by the hub's HTTP server; the spoke gets
    // the whole body, never the expectation.
    "expect",
];

pub use crate::webserver::{Limits, tls_acceptor};

/// What the server needs.
pub struct Deps {
    /// Calls to agents.
    pub tunnels: Tunnels,
    /// Clusters and their availability.
    pub inventory: ClusterInventory,
    /// The API's tokens (`None`: open, every caller an admin — loopback only).
    pub tokens: Option<Tokens>,
    /// On an open hub, the hosts it answers ([`crate::hosts`]): DNS rebinding.
    pub hosts: Option<crate::hosts::AllowedHosts>,
    /// How leases are judged (for the offline message).
    pub lease: LeaseRule,
    /// Requests counted.
    pub metrics: super::metrics::ProxyMetrics,
    /// How connections are bounded.
    pub limits: Limits,
    /// ManagedServiceAccount tokens: a bearer that is no API token but a current token of the
    /// cluster asked for is forwarded for the spoke to authenticate.
    pub service_account_tokens: Option<crate::serviceaccount::TokenLookup>,
}

impl crate::webserver::Handler for Deps {
    type Body = Body;
    type BodyError = BodyError;
    const NAME: &'static str = "cluster proxy";

    async fn handle(
        self: Arc<Self>,
        req: http::Request<Incoming>,
        _peer: std::net::SocketAddr,
    ) -> http::Response<Body> {
        let verb = verb_of(&req);
        let host = self.hosts.map(|h| h.check(crate::hosts::of_request(&req)));
        let resp = match host {
            Some(Err(refusal)) => {
                tracing::info!(%refusal, "cluster proxy request refused");
                status::response(StatusCode::FORBIDDEN, &refusal.to_string())
            }
            _ => handle(&self, req).await,
        };
        let mut resp = resp;
        if self.hosts.is_some() {
            // kubectl prints a `Warning` header to its user: an open proxy says what it grants.
            resp.headers_mut().insert(
                http::header::WARNING,
                http::HeaderValue::from_static(OPEN_PROXY_WARNING),
            );
        }
        self.metrics.answered(&verb, resp.status());
        resp
    }
}

/// What every answer of an open hub's proxy says (kubectl shows it as `Warning: …`).
const OPEN_PROXY_WARNING: &str = "299 - \"open hub (no API tokens): this cluster proxy grants \
every caller admin on every cluster, Secrets included; it answers only requests addressed to \
this machine\"";

/// Serves until `shutdown` ([`crate::webserver::serve`]).
pub fn serve(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    deps: Arc<Deps>,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let limits = deps.limits.clone();
    crate::webserver::serve(listener, tls, limits, deps, shutdown)
}

/// The request's Kubernetes verb, for metrics (`other` off the `/clusters/` paths).
fn verb_of(req: &http::Request<Incoming>) -> String {
    match request::split(req.uri().path()) {
        Ok((_, spoke)) => {
            RequestInfo::parse(req.method(), spoke, req.uri().query().unwrap_or_default())
                .verb
                .to_string()
        }
        Err(_) => "other".into(),
    }
}

/// Who a request comes from.
enum Caller {
    /// An API token's identity (every caller is an admin on an open hub).
    Api(Identity),
    /// A current ManagedServiceAccount token of the cluster asked for: forwarded as the
    /// request's credential, so the spoke authenticates it and its RBAC decides.
    ServiceAccount(crate::serviceaccount::TokenOwner, String),
}

/// The caller of a request to `cluster`: the API token's identity; else a current
/// ManagedServiceAccount token of that cluster (looked up by its hash; another cluster's token
/// is unknown here); else, on an open hub, an anonymous admin when no token was sent. A bearer
/// that is neither is refused (401) even on an open hub: its sender meant to be someone, and
/// a token that stopped being valid (replaced, deleted, expired) must not become an admin. A
/// token store that does not answer is a 503 (the token may be valid).
async fn authenticate(
    deps: &Deps,
    cluster: &str,
    headers: &HeaderMap,
) -> Result<Caller, (StatusCode, String)> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    if let (Some(tokens), Some(token)) = (deps.tokens.as_ref(), bearer)
        && let Some(identity) = tokens.identify(token)
    {
        return Ok(Caller::Api(identity.clone()));
    }
    if let (Some(lookup), Some(token)) = (deps.service_account_tokens.as_ref(), bearer) {
        match lookup.owner(cluster, token).await {
            Ok(Some(owner)) => return Ok(Caller::ServiceAccount(owner, token.to_string())),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(cluster.name = %cluster, error = %e, "looking up a bearer token failed");
                return Err((StatusCode::SERVICE_UNAVAILABLE, format!("{e}; try again")));
            }
        }
    }
    match (deps.tokens.as_ref(), bearer) {
        (None, None) => Ok(Caller::Api(Identity {
            name: "anonymous".into(),
            role: Role::Admin,
            execute_as: Vec::new(),
        })),
        (Some(_), None) => Err((
            StatusCode::UNAUTHORIZED,
            "no bearer token: use the kubeconfig `flotilla kubeconfig` prints (it carries FLOTILLA_TOKEN)"
                .into(),
        )),
        (_, Some(_)) => Err((
            StatusCode::UNAUTHORIZED,
            format!(
                "the bearer token is neither an API token of this hub nor a current \
                 ManagedServiceAccount token of cluster {cluster:?}"
            ),
        )),
    }
}

/// What the client asked to impersonate.
fn asked(headers: &HeaderMap) -> Asked {
    Asked {
        user: headers
            .get("impersonate-user")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        groups: headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect(),
    }
}

/// The end-to-end headers of a request or response.
fn forwarded(headers: &HeaderMap) -> Vec<TunnelHeader> {
    headers
        .iter()
        .filter(|(name, _)| {
            let n = name.as_str();
            !DROPPED.contains(&n) && !n.starts_with("impersonate-")
        })
        .filter_map(|(name, value)| {
            Some(TunnelHeader {
                name: name.as_str().to_string(),
                value: value.to_str().ok()?.to_string(),
            })
        })
        .collect()
}

/// Whether the request carries a body: writes always do (possibly empty), other methods when
/// they say so (a DELETE with its options).
fn has_body(req: &http::Request<Incoming>) -> bool {
    let length = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    matches!(
        *req.method(),
        http::Method::POST | http::Method::PUT | http::Method::PATCH
    ) || length.is_some_and(|n| n > 0)
        || req.headers().contains_key(http::header::TRANSFER_ENCODING)
}

/// A read (`GET`, `HEAD`, a watch) that carries a body, refused before anything reaches the
/// agent: Kubernetes reads none, and the agent would keep one that never ends.
fn body_on_read(req: &http::Request<Incoming>, info: &RequestInfo) -> Option<BodyError> {
    let read =
        matches!(*req.method(), http::Method::GET | http::Method::HEAD) || info.verb == Verb::Watch;
    (read && (has_body(req) || !req.body().is_end_stream()))
        .then(|| BodyError::OnRead(req.method().clone()))
}

async fn handle(deps: &Deps, req: http::Request<Incoming>) -> http::Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let (cluster, spoke_path) = match request::split(&path) {
        Ok(split) => split,
        Err(e @ (request::PathError::Encoded(_) | request::PathError::Segments(_))) => {
            return status::response(StatusCode::BAD_REQUEST, &e.to_string());
        }
        Err(e) => return status::response(StatusCode::NOT_FOUND, &e.to_string()),
    };
    let cluster = cluster.to_string();
    let spoke_path = spoke_path.to_string();
    let caller = match authenticate(deps, &cluster, req.headers()).await {
        Ok(c) => c,
        Err((code, why)) => {
            tracing::info!(cluster.name = %cluster, reason = %why, "cluster proxy request unauthenticated");
            return status::response(code, &why);
        }
    };
    let info = RequestInfo::parse(req.method(), &spoke_path, &query);
    if req.headers().contains_key(http::header::UPGRADE)
        || matches!(info.subresource.as_str(), "exec" | "attach" | "portforward")
    {
        return status::response(
            StatusCode::NOT_IMPLEMENTED,
            "exec, attach and port-forward (connection upgrades) are not supported by the \
             cluster proxy yet",
        );
    }
    if let Some(refusal) = body_on_read(&req, &info) {
        deps.metrics.refused("body_on_read");
        return status::response(StatusCode::BAD_REQUEST, &refusal.to_string());
    }
    // Who it is, as what it acts on the spoke, and the credential forwarded (if any).
    let (who, role, act, bearer) = match caller {
        Caller::Api(identity) => match access::decide(&identity, &info, &asked(req.headers())) {
            Ok(act) => (identity.name, identity.role.to_string(), act, String::new()),
            Err(refusal) => {
                tracing::info!(
                    caller = %identity.name, role = %identity.role, cluster.name = %cluster,
                    verb = %info.verb, resource = %info.resource_label(), namespace = %info.namespace,
                    name = %info.name, reason = %refusal.0, "cluster proxy request refused"
                );
                return status::response(StatusCode::FORBIDDEN, &refusal.0);
            }
        },
        // The spoke authenticates the token and its RBAC decides; the client's impersonation
        // headers are dropped like everyone's.
        Caller::ServiceAccount(owner, token) => (
            format!("managedserviceaccount:{}/{}", owner.cluster, owner.name),
            SERVICE_ACCOUNT_ROLE.to_string(),
            Act::Impersonate {
                user: format!("system:serviceaccount:{}:{}", owner.namespace, owner.name),
                groups: Vec::new(),
            },
            token,
        ),
    };
    let as_user = match &act {
        Act::AsAgent => "agent",
        Act::Impersonate { user, .. } => user.as_str(),
    };
    tracing::info!(
        caller = %who, role = %role, cluster.name = %cluster,
        verb = %info.verb, resource = %info.resource_label(), namespace = %info.namespace,
        name = %info.name, path = %spoke_path, as_user, "cluster proxy request"
    );
    if let Some(why) = offline::refusal(
        &cluster,
        deps.inventory.get(&cluster).as_deref(),
        deps.lease,
    ) {
        return status::response(StatusCode::SERVICE_UNAVAILABLE, &why);
    }
    let declared = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_REQUEST_BODY) {
        return status::response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &BodyError::TooLarge(MAX_REQUEST_BODY).to_string(),
        );
    }
    let with_body = has_body(&req);
    let request = TunnelRequest {
        method: req.method().as_str().to_string(),
        path: spoke_path,
        query,
        headers: forwarded(req.headers()),
        caller: Some(TunnelCaller { name: who, role }),
        // With a ServiceAccount's token, its own credential says who it is.
        impersonate: match act {
            Act::Impersonate { user, groups } if bearer.is_empty() => {
                Some(TunnelImpersonation { user, groups })
            }
            _ => None,
        },
        bearer,
        ..Default::default()
    };
    let deadline = deps.tunnels.body_deadline();
    let body = with_body.then(|| within(deadline, limited(req.into_body())));
    match deps
        .tunnels
        .call(Outgoing {
            cluster: cluster.clone(),
            request,
            body,
        })
        .await
    {
        Ok(answer) => {
            let code = match super::answer::status(answer.head.status) {
                Ok(code) => code,
                Err(refused) => {
                    tracing::warn!(
                        cluster.name = %cluster, status = answer.head.status,
                        "cluster proxy: the spoke's answer refused: {refused}"
                    );
                    // Dropping the answer's body ends the call (the spoke is told).
                    return status::response(StatusCode::BAD_GATEWAY, &refused.to_string());
                }
            };
            let body =
                StreamBody::new(answer.body.map(|chunk| chunk.map(hyper::body::Frame::data)));
            let mut resp = http::Response::new(BodyExt::boxed_unsync(body));
            *resp.status_mut() = code;
            *resp.headers_mut() = super::answer::headers(answer.head.headers, &DROPPED);
            resp
        }
        Err(e) => {
            let code = match &e {
                CallError::Timeout { .. } | CallError::Send { .. } | CallError::Shutdown => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                CallError::Busy(_) => {
                    deps.metrics.refused("calls");
                    StatusCode::SERVICE_UNAVAILABLE
                }
                CallError::IdentityBusy { .. } => {
                    deps.metrics.refused("identity_calls");
                    StatusCode::TOO_MANY_REQUESTS
                }
                CallError::BodyBytes { .. } => {
                    deps.metrics.refused("body_bytes");
                    StatusCode::TOO_MANY_REQUESTS
                }
                CallError::RequestBody(BodyError::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
                CallError::RequestBody(BodyError::TooSlow(_)) => {
                    deps.metrics.refused("body_deadline");
                    StatusCode::REQUEST_TIMEOUT
                }
                CallError::RequestBody(_) => StatusCode::BAD_REQUEST,
                CallError::Cancelled { .. } | CallError::Protocol { .. } => StatusCode::BAD_GATEWAY,
            };
            tracing::info!(cluster.name = %cluster, error = %e, "cluster proxy call failed");
            status::response(code, &e.to_string())
        }
    }
}

/// The client's body as chunks, cut off with an error past [`MAX_REQUEST_BODY`].
fn limited(body: Incoming) -> super::tunnel::ByteStream {
    let mut total = 0usize;
    Box::pin(BodyStream::new(body).filter_map(move |frame| {
        let item = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => {
                    total += data.len();
                    if total > MAX_REQUEST_BODY {
                        Some(Err(BodyError::TooLarge(MAX_REQUEST_BODY)))
                    } else {
                        Some(Ok::<Bytes, BodyError>(data))
                    }
                }
                // Trailers carry nothing the spoke needs.
                Err(_) => None,
            },
            Err(e) => Some(Err(BodyError::Read(e))),
        };
        std::future::ready(item)
    }))
}

/// `body`, cut with [`BodyError::TooSlow`] when it has not ended within `deadline` of now.
fn within<S>(deadline: std::time::Duration, body: S) -> super::tunnel::ByteStream
where
    S: futures::Stream<Item = Result<Bytes, BodyError>> + Send + 'static,
{
    let until = tokio::time::Instant::now() + deadline;
    Box::pin(futures::stream::unfold(
        Some(Box::pin(body)),
        move |body| async move {
            let mut body = body?;
            match tokio::time::timeout_at(until, body.next()).await {
                Ok(Some(item)) => Some((item, Some(body))),
                Ok(None) => None,
                // The error ends the body: nothing is read after it.
                Err(_) => Some((Err(BodyError::TooSlow(deadline)), None)),
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_still_coming_at_the_deadline_is_cut() {
        let deadline = std::time::Duration::from_secs(60);
        let slow = futures::stream::iter([Ok(Bytes::from_static(b"first"))])
            .chain(futures::stream::pending());
        let mut body = within(deadline, slow);
        assert_eq!(body.next().await.unwrap().unwrap(), "first");
        let started = tokio::time::Instant::now();
        let cut = body.next().await.unwrap().unwrap_err();
        assert!(
            matches!(cut, BodyError::TooSlow(d) if d == deadline),
            "{cut}"
        );
        assert_eq!(started.elapsed(), deadline);
        assert!(body.next().await.is_none(), "nothing after the cut");
        // A body that ends in time is passed through whole.
        let quick =
            futures::stream::iter([Ok(Bytes::from_static(b"a")), Ok(Bytes::from_static(b"b"))]);
        let got: Vec<_> = within(deadline, quick).collect().await;
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn credentials_impersonation_hop_by_hop_and_expect_do_not_reach_the_spoke() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer hub-token"),
            ("impersonate-user", "jane"),
            ("expect", "100-continue"),
            ("connection", "keep-alive"),
            ("content-type", "application/json"),
        ] {
            headers.insert(
                http::HeaderName::from_static(name),
                http::HeaderValue::from_static(value),
            );
        }
        let names: Vec<_> = forwarded(&headers).into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["content-type"]);
    }
}

//! The cluster proxy's HTTP(S) server (I/O): an [`axum::Router`] whose one handler (the
//! fallback: the Kubernetes path space is forwarded whole) makes every call, inside layers for
//! what every answer shares — the count by verb and status, and an open hub's host check and
//! warning. Each request is authenticated with the API's tokens,
//! decided ([`super::access`]), logged (who, cluster, verb, resource), checked against the
//! cluster's availability ([`super::offline`]) and made as a call through the cluster's agent
//! ([`super::tunnel`]); the spoke's answer streams back as it comes.
//!
//! Only end-to-end headers cross: the client's `Authorization` (a hub token) and `Impersonate-*`
//! never reach the spoke, hop-by-hop headers are dropped both ways. HTTP/1.1 and HTTP/2 (ALPN
//! over TLS), as kubectl speaks either.

use super::access::{self, Act, Asked};
use super::credential::Credential;
use super::metrics::ProxyMetrics;
use super::offline::{self, LeaseRule};
use super::request::{self, RequestInfo, Verb};
use super::revoke::{Hold, Recheck};
use super::status::{self, Body};
use super::tunnel::{CallError, Outgoing, Tunnels};
use super::{BodyError, MAX_REQUEST_BODY};
use crate::grpc::auth::{Identity, Tokens};
use crate::hosts::AllowedHosts;
use crate::inventory::ClusterInventory;
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
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
use tower::ServiceExt;

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
    pub hosts: Option<AllowedHosts>,
    /// How leases are judged (for the offline message).
    pub lease: LeaseRule,
    /// Requests counted.
    pub metrics: ProxyMetrics,
    /// How connections are bounded.
    pub limits: Limits,
    /// ManagedServiceAccount tokens: a bearer that is no API token but a current token of the
    /// cluster asked for is forwarded for the spoke to authenticate.
    pub service_account_tokens: Option<crate::serviceaccount::TokenLookup>,
}

/// The cluster proxy as [`crate::webserver`] serves it: [`router`] over [`Deps`].
pub struct Proxy {
    router: Router,
}

impl Proxy {
    /// The proxy over `deps`.
    pub fn new(deps: Arc<Deps>) -> Self {
        Self {
            router: router(deps),
        }
    }
}

impl crate::webserver::Handler for Proxy {
    type Body = axum::body::Body;
    type BodyError = axum::Error;
    const NAME: &'static str = "cluster proxy";

    async fn handle(
        self: Arc<Self>,
        mut req: http::Request<Incoming>,
        peer: std::net::SocketAddr,
    ) -> Response {
        // Who sent it, for the audit line of a refused authentication.
        req.extensions_mut().insert(Peer(peer));
        match self.router.clone().oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }
}

/// The address a request came from (in its extensions).
#[derive(Debug, Clone, Copy)]
struct Peer(std::net::SocketAddr);

/// The proxy's routes. Every path goes to [`proxy`], the router's fallback: the Kubernetes API's
/// path space is forwarded whole, and `/clusters/<cluster>/…` is taken apart by
/// [`request::split`] on the raw path — percent-encoding and dot segments are refused there, which
/// a route's decoded parameters would hide.
pub fn router(deps: Arc<Deps>) -> Router {
    let (hosts, metrics) = (deps.hosts, deps.metrics.clone());
    layered(
        Router::new().fallback(proxy).with_state(deps),
        hosts,
        metrics,
    )
}

/// `routes` inside the layers every answer goes through: the count by verb and status
/// (outermost: it counts the host refusals too), then an open hub's host check and warning.
fn layered(routes: Router, hosts: Option<AllowedHosts>, metrics: ProxyMetrics) -> Router {
    routes
        .layer(middleware::from_fn_with_state(hosts, open_hub))
        .layer(middleware::from_fn_with_state(metrics, count))
}

/// Counts each answer by the request's Kubernetes verb and the answer's status.
async fn count(State(metrics): State<ProxyMetrics>, req: Request, next: Next) -> Response {
    let verb = verb_of(&req);
    let resp = next.run(req).await;
    metrics.answered(&verb, resp.status());
    resp
}

/// On an open hub (no API tokens, `hosts` set): refuses a request addressed to another host
/// (DNS rebinding), and says in every answer what the proxy grants.
async fn open_hub(State(hosts): State<Option<AllowedHosts>>, req: Request, next: Next) -> Response {
    let Some(hosts) = hosts else {
        return next.run(req).await;
    };
    let mut resp = match hosts.check(crate::hosts::of_request(&req)) {
        Err(refusal) => {
            tracing::info!(%refusal, "cluster proxy request refused");
            status::response(StatusCode::FORBIDDEN, &refusal.to_string()).into_response()
        }
        Ok(()) => next.run(req).await,
    };
    // kubectl prints a `Warning` header to its user: an open proxy says what it grants.
    resp.headers_mut().insert(
        http::header::WARNING,
        http::HeaderValue::from_static(OPEN_PROXY_WARNING),
    );
    resp
}

/// Makes one request's call: every path (the router's fallback).
async fn proxy(State(deps): State<Arc<Deps>>, req: Request) -> http::Response<Body> {
    handle(&deps, req).await
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
    crate::webserver::serve(listener, tls, limits, Arc::new(Proxy::new(deps)), shutdown)
}

/// The request's Kubernetes verb, for metrics (`other` off the `/clusters/` paths).
fn verb_of<B>(req: &http::Request<B>) -> String {
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

/// The caller of a request to `cluster`: the API token's identity (the token file's, or an ID
/// token of the hub's OIDC issuer); else a current
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
    if let (Some(tokens), Some(token)) = (deps.tokens.as_ref(), bearer) {
        match tokens.authenticate(token) {
            Ok(identity) => return Ok(Caller::Api(identity)),
            // An ID token of the hub's OIDC issuer that is refused (expired, audience, key):
            // not a ManagedServiceAccount token either; say why.
            Err(why) if why != crate::grpc::auth::UNKNOWN_TOKEN => {
                return Err((StatusCode::UNAUTHORIZED, why));
            }
            Err(_) => {}
        }
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
        (None, None) => Ok(Caller::Api(Identity::open())),
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

/// The token a session of `caller` to `cluster` is held to while it runs
/// ([`super::credential`]): an ID token's or a ManagedServiceAccount's; none for the token
/// file's (nothing ends them while the hub runs) or on an open hub.
fn credential(
    deps: &Deps,
    caller: &Caller,
    cluster: &str,
    info: &RequestInfo,
    headers: &HeaderMap,
) -> Option<Credential> {
    let every = deps.tunnels.credential_recheck();
    match caller {
        Caller::Api(identity) => {
            let token = headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "))
                .map(str::trim)?;
            Credential::api(
                identity,
                deps.tokens.as_ref()?,
                token,
                (cluster, info),
                every,
            )
        }
        Caller::ServiceAccount(owner, token) => Some(Credential::service_account(
            owner,
            deps.service_account_tokens.as_ref()?,
            token,
            info,
            every,
        )),
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
fn has_body(req: &Request) -> bool {
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
fn body_on_read(req: &Request, info: &RequestInfo) -> Option<BodyError> {
    let read =
        matches!(*req.method(), http::Method::GET | http::Method::HEAD) || info.verb == Verb::Watch;
    (read && (has_body(req) || !req.body().is_end_stream()))
        .then(|| BodyError::OnRead(req.method().clone()))
}

async fn handle(deps: &Deps, req: Request) -> http::Response<Body> {
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
    let info = RequestInfo::parse(req.method(), &spoke_path, &query);
    let caller = match authenticate(deps, &cluster, req.headers()).await {
        Ok(c) => c,
        Err((code, why)) => {
            // An audit line like an accepted request's, bounded per source.
            let peer = req.extensions().get::<Peer>().map(|p| p.0.ip());
            access::audit_unauthenticated(peer, &cluster, &info, &why);
            return status::response(code, &why);
        }
    };
    let session = session_kind(&info);
    if session.is_none() && req.headers().contains_key(http::header::UPGRADE) {
        deps.metrics.refused("protocol");
        return status::response(StatusCode::BAD_REQUEST, UPGRADE_ELSEWHERE);
    }
    if let Some(refusal) = body_on_read(&req, &info) {
        deps.metrics.refused("body_on_read");
        return status::response(StatusCode::BAD_REQUEST, &refusal.to_string());
    }
    let live = deps.tokens.as_ref().map(Tokens::live);
    let api_caller = match &caller {
        Caller::Api(identity) => Some(identity.clone()),
        Caller::ServiceAccount(..) => None,
    };
    // A session also ends with its caller's token (issue 46 review #11).
    let credential =
        session.and_then(|_| credential(deps, &caller, &cluster, &info, req.headers()));
    let grant = match grant(caller, live, &cluster, &info, req.headers()) {
        Ok(grant) => grant,
        Err((identity, refusal)) => {
            tracing::info!(
                caller = %identity.name(), role = %identity.role(), cluster.name = %cluster,
                verb = %info.verb, resource = %info.resource_label(), namespace = %info.namespace,
                name = %info.name, reason = %refusal.0, "cluster proxy request refused"
            );
            return status::response(StatusCode::FORBIDDEN, &refusal.0);
        }
    };
    tracing::info!(
        caller = %grant.who, role = %grant.role, cluster.name = %cluster,
        verb = %info.verb, resource = %info.resource_label(), namespace = %info.namespace,
        name = %info.name, path = %spoke_path, as_user = grant.as_user(), "cluster proxy request"
    );
    if let Some(why) = offline::refusal(
        &cluster,
        deps.inventory.get(&cluster).as_deref(),
        deps.lease,
    ) {
        return status::response(StatusCode::SERVICE_UNAVAILABLE, &why);
    }
    // Long requests end when the grant that allowed them is gone (issue 48).
    let recheck = api_caller.and_then(|identity| {
        Recheck::new(
            &identity,
            live,
            &cluster,
            &info,
            &asked(req.headers()),
            &grant.act,
        )
    });
    if let Some(kind) = session {
        let request = grant.request(req.method(), spoke_path, query.clone(), req.headers());
        let hold = Hold {
            grant: recheck,
            credential,
        };
        return super::upgrade::serve(deps, req, kind, cluster, &query, request, hold).await;
    }
    if declared_length(req.headers()).is_some_and(|n| n > MAX_REQUEST_BODY) {
        return status::response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &BodyError::TooLarge(MAX_REQUEST_BODY).to_string(),
        );
    }
    let with_body = has_body(&req);
    let head_only = req.method() == http::Method::HEAD;
    let request = grant.request(req.method(), spoke_path, query, req.headers());
    let deadline = deps.tunnels.body_deadline();
    let body = with_body.then(|| within(deadline, limited(req.into_body())));
    let call = deps.tunnels.call(Outgoing {
        cluster: cluster.clone(),
        request,
        body,
    });
    match call.await {
        Ok(answer) if head_only => answered_head(&cluster, answer).await,
        Ok(mut answer) => {
            if let Some(recheck) = recheck {
                let json = answer.head.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("content-type") && h.value.contains("json")
                });
                answer.body = super::revoke::guarded(answer.body, recheck, &info, json);
            }
            answered(&cluster, answer)
        }
        Err(e) => {
            let (code, refused) = call_failed(&e);
            if let Some(limit) = refused {
                deps.metrics.refused(limit);
            }
            tracing::info!(cluster.name = %cluster, error = %e, "cluster proxy call failed");
            status::response(code, &e.to_string())
        }
    }
}

/// What an upgrade on any path but a pod's exec, attach or port-forward is answered (400).
const UPGRADE_ELSEWHERE: &str = "the cluster proxy upgrades connections only for a pod's exec, \
attach and portforward subresources";

/// The session a request asks for: a pod's exec, attach or port-forward subresource.
fn session_kind(info: &RequestInfo) -> Option<flotilla_bus::tunnel::session::Kind> {
    (info.resource_request && info.group.is_empty() && info.resource == "pods")
        .then(|| super::session::kind_of(&info.subresource))
        .flatten()
}

/// Who a request is logged as, what it acts as on the spoke and the credential forwarded.
#[derive(Debug, PartialEq)]
struct Grant {
    /// The caller's name in the log and on the tunnel.
    who: String,
    /// Its role, likewise.
    role: String,
    /// As whom the agent makes the call.
    act: Act,
    /// A ManagedServiceAccount's token, forwarded for the spoke to authenticate (else empty).
    bearer: String,
}

/// What `caller` may do with the request `info` (impersonating as the client asked in
/// `headers`), or the API caller and why it is refused. A ManagedServiceAccount's request is
/// always granted: the spoke authenticates its token and its RBAC decides (the client's
/// impersonation headers are dropped like everyone's).
fn grant(
    caller: Caller,
    live: Option<&crate::grants::live::Live>,
    cluster: &str,
    info: &RequestInfo,
    headers: &HeaderMap,
) -> Result<Grant, (Identity, access::Refusal)> {
    match caller {
        Caller::Api(identity) => {
            match access::decide_at(&identity, live, cluster, info, &asked(headers)) {
                Ok(act) => Ok(Grant {
                    who: identity.name().to_string(),
                    role: identity.role().to_string(),
                    act,
                    bearer: String::new(),
                }),
                Err(refusal) => Err((identity, refusal)),
            }
        }
        Caller::ServiceAccount(owner, token) => {
            access::audit_service_account(&owner, info);
            Ok(Grant {
                who: format!("managedserviceaccount:{}/{}", owner.cluster, owner.name),
                role: SERVICE_ACCOUNT_ROLE.to_string(),
                act: Act::Impersonate {
                    user: format!("system:serviceaccount:{}:{}", owner.namespace, owner.name),
                    groups: Vec::new(),
                },
                bearer: token,
            })
        }
    }
}

impl Grant {
    /// The user the spoke sees, for the log.
    fn as_user(&self) -> &str {
        match &self.act {
            Act::AsAgent => "agent",
            Act::Impersonate { user, .. } => user.as_str(),
        }
    }

    /// The request the agent makes: the client's method, path, query and end-to-end headers,
    /// as this grant says.
    fn request(
        self,
        method: &http::Method,
        path: String,
        query: String,
        headers: &HeaderMap,
    ) -> TunnelRequest {
        TunnelRequest {
            method: method.as_str().to_string(),
            path,
            query,
            headers: forwarded(headers),
            caller: Some(TunnelCaller {
                name: self.who,
                role: self.role,
            }),
            // With a ServiceAccount's token, its own credential says who it is.
            impersonate: match self.act {
                Act::Impersonate { user, groups } if self.bearer.is_empty() => {
                    Some(TunnelImpersonation { user, groups })
                }
                _ => None,
            },
            bearer: self.bearer,
            ..Default::default()
        }
    }
}

/// The request's `Content-Length`, when it declares one.
fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
}

/// The spoke's answer as the client's response (its body streamed), or a 502 when the answer
/// is refused (dropping it ends the call; the spoke is told).
pub(super) fn answered(cluster: &str, answer: super::tunnel::Answer) -> http::Response<Body> {
    let code = match super::answer::status(answer.head.status) {
        Ok(code) => code,
        Err(refused) => {
            tracing::warn!(
                cluster.name = %cluster, status = answer.head.status,
                "cluster proxy: the spoke's answer refused: {refused}"
            );
            return status::response(StatusCode::BAD_GATEWAY, &refused.to_string());
        }
    };
    let body = StreamBody::new(answer.body.map(|chunk| chunk.map(hyper::body::Frame::data)));
    let mut resp = http::Response::new(BodyExt::boxed_unsync(body));
    *resp.status_mut() = code;
    *resp.headers_mut() = super::answer::headers(answer.head.headers, &DROPPED);
    resp
}

/// How long a HEAD's answer may take to end after its head (the spoke sends no body).
const HEAD_END: std::time::Duration = std::time::Duration::from_secs(5);

/// A HEAD's answer: its head, with the spoke's (empty) body read to its end first. The server
/// sends no body for HEAD and would drop the stream unread, so the call would end as given up
/// by the client instead of answered; a spoke that streams a body anyway is cut at [`HEAD_END`].
async fn answered_head(cluster: &str, mut answer: super::tunnel::Answer) -> http::Response<Body> {
    let drained = tokio::time::timeout(HEAD_END, async {
        while let Some(chunk) = answer.body.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(cluster.name = %cluster, "cluster proxy: a HEAD answer's body did not end; cut");
    }
    answer.body = Box::pin(futures::stream::empty());
    answered(cluster, answer)
}

/// The status a failed call is answered with and, for a limit that refused it, the limit's
/// name in the `refused` metric.
pub(super) fn call_failed(e: &CallError) -> (StatusCode, Option<&'static str>) {
    match e {
        CallError::Timeout { .. } | CallError::Send { .. } | CallError::Shutdown => {
            (StatusCode::SERVICE_UNAVAILABLE, None)
        }
        CallError::Busy(_) => (StatusCode::SERVICE_UNAVAILABLE, Some("calls")),
        CallError::IdentityBusy { .. } => (StatusCode::TOO_MANY_REQUESTS, Some("identity_calls")),
        CallError::BodyBytes { .. } => (StatusCode::TOO_MANY_REQUESTS, Some("body_bytes")),
        CallError::RequestBody(BodyError::TooLarge(_)) => (StatusCode::PAYLOAD_TOO_LARGE, None),
        CallError::RequestBody(BodyError::TooSlow(_)) => {
            (StatusCode::REQUEST_TIMEOUT, Some("body_deadline"))
        }
        CallError::RequestBody(_) => (StatusCode::BAD_REQUEST, None),
        CallError::Cancelled { .. } | CallError::Protocol { .. } => (StatusCode::BAD_GATEWAY, None),
    }
}

/// The client's body as chunks, cut off with an error past [`MAX_REQUEST_BODY`].
fn limited(body: axum::body::Body) -> super::tunnel::ByteStream {
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
    use crate::grpc::auth::Role;

    fn answer_of(body: super::super::tunnel::ByteStream) -> super::super::tunnel::Answer {
        super::super::tunnel::Answer {
            head: flotilla_api::v1::TunnelResponse {
                status: 200,
                headers: vec![],
            },
            body,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_answer_is_read_to_its_end_before_it_is_answered_and_cut_if_it_never_ends() {
        // The spoke's (empty) body ends: read to its end, so the call ends answered.
        let read = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = read.clone();
        let ending = futures::stream::once(async move {
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(Bytes::new())
        });
        let resp = answered_head("c1", answer_of(Box::pin(ending))).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(
            read.load(std::sync::atomic::Ordering::SeqCst),
            "the body was read"
        );
        let body = resp.into_body().collect().await.expect("a body").to_bytes();
        assert!(body.is_empty());
        // A spoke that streams a body on HEAD forever is cut after HEAD_END.
        let started = tokio::time::Instant::now();
        let endless = futures::stream::repeat_with(|| Ok(Bytes::from_static(b"x"))).then(
            |chunk| async move {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                chunk
            },
        );
        let resp = answered_head("c1", answer_of(Box::pin(endless))).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(started.elapsed(), HEAD_END);
        let body = resp.into_body().collect().await.expect("a body").to_bytes();
        assert!(
            body.is_empty(),
            "nothing of a HEAD's body reaches the client"
        );
    }

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
    fn a_service_accounts_token_is_forwarded_and_never_impersonated() {
        let info = RequestInfo::parse(&http::Method::GET, "/api/v1/namespaces/ns/pods", "");
        let mut headers = HeaderMap::new();
        headers.insert("impersonate-user", http::HeaderValue::from_static("root"));
        let owner = crate::serviceaccount::TokenOwner {
            cluster: "c1".into(),
            name: "reader".into(),
            namespace: "open-cluster-management-agent-addon".into(),
            expires: std::time::SystemTime::UNIX_EPOCH,
        };
        let grant = grant(
            Caller::ServiceAccount(owner, "sa-token".into()),
            None,
            "c1",
            &info,
            &headers,
        )
        .expect("the spoke decides");
        assert_eq!(grant.who, "managedserviceaccount:c1/reader");
        assert_eq!(
            grant.as_user(),
            "system:serviceaccount:open-cluster-management-agent-addon:reader"
        );
        let request = grant.request(&http::Method::GET, "/api".into(), String::new(), &headers);
        assert_eq!(request.bearer, "sa-token");
        assert_eq!(
            request.impersonate, None,
            "its own credential says who it is"
        );
        assert!(
            request.headers.is_empty(),
            "the client's impersonation is dropped"
        );
    }

    #[test]
    fn an_admin_impersonates_whom_it_asked_for_and_a_reader_is_refused_it() {
        let info = RequestInfo::parse(&http::Method::GET, "/api/v1/namespaces/ns/pods", "");
        let mut headers = HeaderMap::new();
        headers.insert("impersonate-user", http::HeaderValue::from_static("jane"));
        headers.insert("impersonate-group", http::HeaderValue::from_static("devs"));
        let identity = |role| Identity::token("ops", role, Vec::new());
        let grant = grant(
            Caller::Api(identity(Role::Admin)),
            None,
            "c1",
            &info,
            &headers,
        )
        .expect("an admin");
        assert_eq!(grant.as_user(), "jane");
        let request = grant.request(&http::Method::GET, "/api".into(), String::new(), &headers);
        assert!(request.bearer.is_empty());
        assert_eq!(
            request.impersonate,
            Some(TunnelImpersonation {
                user: "jane".into(),
                groups: vec!["devs".into()],
            })
        );
        assert_eq!(request.caller.unwrap().name, "ops");
        let (who, refusal) = super::grant(
            Caller::Api(identity(Role::ReadOnly)),
            None,
            "c1",
            &info,
            &headers,
        )
        .expect_err("a reader may not impersonate");
        assert_eq!(who.name(), "ops");
        assert!(refusal.0.contains("may not impersonate"), "{}", refusal.0);
    }

    #[test]
    fn failed_calls_answer_by_cause_and_count_the_limit_that_refused() {
        let cluster = "c1".to_string();
        assert_eq!(
            call_failed(&CallError::Shutdown),
            (StatusCode::SERVICE_UNAVAILABLE, None)
        );
        assert_eq!(
            call_failed(&CallError::BodyBytes {
                cluster: cluster.clone(),
                limit: 1,
            }),
            (StatusCode::TOO_MANY_REQUESTS, Some("body_bytes"))
        );
        assert_eq!(
            call_failed(&CallError::RequestBody(BodyError::TooSlow(
                std::time::Duration::from_secs(1)
            ))),
            (StatusCode::REQUEST_TIMEOUT, Some("body_deadline"))
        );
        assert_eq!(
            call_failed(&CallError::RequestBody(BodyError::TooLarge(1))),
            (StatusCode::PAYLOAD_TOO_LARGE, None)
        );
    }

    /// The layers around a fallback that answers 200, as [`router`] puts them around [`proxy`].
    async fn through_layers(hosts: Option<AllowedHosts>, host: &str) -> (Response, ProxyMetrics) {
        let metrics = ProxyMetrics::default();
        let routes = Router::new().fallback(|| async { "called" });
        let req = http::Request::get("/clusters/c1/api/v1/namespaces/ns/pods")
            .header(http::header::HOST, host)
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = layered(routes, hosts, metrics.clone())
            .oneshot(req)
            .await
            .unwrap();
        (resp, metrics)
    }

    fn counted(metrics: &ProxyMetrics, verb: &str, code: &str) -> u64 {
        metrics
            .requests
            .get_or_create(&super::super::metrics::RequestLabels {
                verb: verb.into(),
                code: code.into(),
            })
            .get()
    }

    #[tokio::test]
    async fn an_open_hub_refuses_other_hosts_and_warns_in_every_answer_and_both_are_counted() {
        let open = Some(AllowedHosts::open_server("127.0.0.1:6443".parse().unwrap()));
        let (resp, metrics) = through_layers(open, "evil.example:6443").await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert!(resp.headers().contains_key(http::header::WARNING));
        assert_eq!(counted(&metrics, "list", "4xx"), 1);
        let (resp, metrics) = through_layers(open, "localhost:6443").await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            resp.headers()[http::header::WARNING],
            OPEN_PROXY_WARNING,
            "an open proxy says what it grants"
        );
        assert_eq!(counted(&metrics, "list", "2xx"), 1);
        // With API tokens there is no host check and no warning.
        let (resp, _) = through_layers(None, "evil.example:6443").await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(!resp.headers().contains_key(http::header::WARNING));
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

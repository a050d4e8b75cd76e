//! Unary gRPC calls forwarded over NATS to the hub that holds the controllers.
//!
//! Several hubs share one control plane; the controllers (placements, replica sets, add-ons,
//! cluster sets) run only on the hub holding their lease, yet every hub serves the whole API.
//! A hub that does not hold them puts [`Forward`] in its tower stack: for each call its route
//! function says whether the call is served here ([`Decision::Local`]), sent to the holder
//! ([`Decision::Forward`]) or refused ([`Decision::Refuse`], for server streams, which one NATS
//! request cannot carry). The holder runs [`serve`] on the same subject while it holds the lease,
//! with its own routes behind the same authentication layer.
//!
//! # Nothing secret in clear (version 2)
//!
//! The forwarding hub authenticates the caller (its bearer token, on the edge's own
//! authentication layer) and vouches for the identity it found; the token itself never leaves
//! the edge. Where the hubs share the sealing key ([`crate::sealed`]) the call is sealed with it
//! to itself, so only a hub of the control plane can read it or make one that opens — the
//! holder runs the call as the vouched identity ([`super::auth::Vouched`], still held to its
//! role by the access table), once per call id and not after its deadline. The answer is sealed
//! to a reply key the edge made for that call: a ManagedServiceAccount token handed out through
//! another hub crosses NATS in a box only the asking hub opens. Hubs without a shared sealing key
//! forward calls in clear, and only calls of an open API: a call made with a token is refused
//! with `FAILED_PRECONDITION` rather than sent in clear (docs/security.md "Between hubs").
//!
//! # Wire format (version [`FORWARD_VERSION`])
//!
//! A core NATS request on the forwarding subject whose payload is a protobuf
//! `flotilla.v1.ForwardedCall` (`proto/flotilla/v1/forward.proto`): the version and an
//! `InnerCall`, sealed or (hubs without a shared key) clear — a random call id, the issue time,
//! the reply key, the vouched caller, the request path
//! (`/flotilla.v1.PlacementService/ApplyPlacement`), the request headers in
//! [`FORWARDED_HEADERS`] — `grpc-timeout` always set, to the edge's deadline for the call — and
//! the whole HTTP/2 request body (the length-prefixed gRPC message, not decoded). The reply, on
//! the requester's inbox, is a `flotilla.v1.ForwardedReply` whose `sealed` field holds, sealed
//! to the reply key, the answer: HTTP status, response headers (a trailers-only answer carries
//! `grpc-status` there), the whole response body and the trailers. A holder that could not open
//! the call answers with a trailers-only error in clear; the edge takes nothing else in clear.
//! Either side refuses a version it does not know: a hub of version 1 (which sent the caller's
//! token in clear) and one of version 2 fail each other's calls with a message naming both
//! versions.
//!
//! # What a caller sees
//!
//! - The holder's answer, status and metadata unchanged.
//! - `FAILED_PRECONDITION` for a call made with a token on a hub without a shared sealing key.
//! - `UNAUTHENTICATED` from the holder for a call that does not open with its sealing key (the
//!   hubs do not share one), `FAILED_PRECONDITION` for a call replayed or older than its
//!   deadline plus the clock slack (`--inter-hub-clock-slack-seconds`: the hubs' clocks
//!   disagree).
//! - `RESOURCE_EXHAUSTED` for a request body over [`MAX_BODY`], or a call or answer larger than
//!   the NATS server's `max_payload`.
//! - `UNAVAILABLE` "no hub holds the controllers (takeover in progress?)" when nobody serves the
//!   subject for the forwarder's patience (retried meanwhile, 100 ms doubling to 1 s: a call
//!   nobody received is safe to send again).
//! - `DEADLINE_EXCEEDED` from the holder when the call ran past its deadline there — the
//!   forwarder's timeout or the caller's shorter `grpc-timeout`, sent along.
//! - `UNAVAILABLE` "… the outcome is unknown" when the holder took the call but did not answer
//!   at all (it died, or NATS lost the answer): it may have been carried out, so it is never
//!   retried here.

use super::auth::{ExecuteAs, Identity, Role, Vouched};
use crate::sealed::{HubSeal, Purpose, ReplayGuard, ReplyKey};
use bytes::{Bytes, BytesMut};
use flotilla_api::v1::{
    ForwardedCall, ForwardedHeader, ForwardedIdentity, ForwardedReply, InnerCall, SealedAnswer,
    forwarded_call,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use prost::Message as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};
use thiserror::Error;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tonic::Status;
use tonic::body::Body;
use tracing::Instrument;

/// The wire version this hub speaks (`ForwardedCall.version`, `ForwardedReply.version`).
pub const FORWARD_VERSION: u32 = 2;

/// Largest request body forwarded (the largest message the hub's services decode), and
/// largest response body a holder sends back.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// Default time the holder has to answer one forwarded call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time a call waits for some hub to serve the forwarding subject (a takeover).
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(30);

/// Calls a holder works on at once; further requests wait in the subscription.
pub const MAX_IN_FLIGHT: usize = 64;

/// Longest a holder works on one call: a call's own `grpc-timeout` shortens it, and it bounds
/// how long [`serve`] takes to drain once stopped.
pub const MAX_CALL_TIME: Duration = Duration::from_secs(300);

/// The request headers a forwarded call carries, and the only ones a holder takes from the
/// wire: what gRPC needs and tracing. Anything else — the caller's `authorization` above all,
/// and any header that could claim an identity — stays behind: the caller travels as the
/// identity the edge verified. `flotilla-force` (`flotilla_api::meta::FORCE_HEADER`) claims no
/// identity: it asks for a write the caller's grants already allow.
pub const FORWARDED_HEADERS: [&str; 9] = [
    "content-type",
    "te",
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
    "x-request-id",
    "traceparent",
    "tracestate",
    "flotilla-force",
];

/// Hop-by-hop headers: about one HTTP connection, never copied from a forwarded answer.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "content-length",
];

/// Reply subjects a holder answers on: hub inboxes (`_INBOX_hub`, what hubs use) and default
/// client inboxes. Never an arbitrary subject named by whoever published the request.
const INBOXES: [&str; 2] = ["_INBOX_hub.", "_INBOX."];

/// First wait after "no responders"; it doubles up to [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// Longest wait between two attempts.
const LAST_RETRY: Duration = Duration::from_secs(1);

/// How long past a call's deadline the edge waits for its answer: a holder cuts a call short
/// at the deadline it was sent and says so (`DEADLINE_EXCEEDED`); only silence beyond this
/// grace is "outcome unknown".
const REPLY_GRACE: Duration = Duration::from_millis(500);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What to do with one call, by its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Serve it here (the inner service).
    Local,
    /// Send it to the hub serving the forwarding subject.
    Forward,
    /// Answer `UNAVAILABLE` with this message (server streams, which cannot be forwarded:
    /// say where the call must be made).
    Refuse(String),
}

/// Whether `path` names a server-streaming method of the Flotilla API: its method starts with
/// `Watch` (`/flotilla.v1.PlacementService/WatchPlacements`). Those cannot be forwarded.
pub fn is_watch(path: &str) -> bool {
    path.rsplit_once('/')
        .is_some_and(|(service, method)| !service.is_empty() && method.starts_with("Watch"))
}

/// The route function: [`Decision`] by request path.
pub type Route = Arc<dyn Fn(&str) -> Decision + Send + Sync>;

/// A tower layer forwarding the calls its route function picks to the hub serving `subject`
/// ([`serve`]).
#[derive(Clone)]
pub struct Forward {
    nats: async_nats::Client,
    subject: async_nats::Subject,
    route: Route,
    seal: HubSeal,
    timeout: Duration,
    patience: Duration,
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("subject", &self.subject)
            .field("sealed", &self.seal.shared())
            .field("timeout", &self.timeout)
            .field("patience", &self.patience)
            .finish_non_exhaustive()
    }
}

impl Forward {
    /// Forwards over `nats` to `subject` the calls `route` says to, sealed with `seal`, with
    /// [`DEFAULT_TIMEOUT`] and [`DEFAULT_PATIENCE`]. Put it inside the authentication layer:
    /// the caller's [`Identity`] it finds is what the call vouches for.
    pub fn new(
        nats: async_nats::Client,
        subject: impl Into<String>,
        route: impl Fn(&str) -> Decision + Send + Sync + 'static,
        seal: HubSeal,
    ) -> Self {
        Self {
            nats,
            subject: async_nats::Subject::from(subject.into()),
            route: Arc::new(route),
            seal,
            timeout: DEFAULT_TIMEOUT,
            patience: DEFAULT_PATIENCE,
        }
    }

    /// How long the holder may work on a call (a caller's shorter `grpc-timeout` wins): it is
    /// sent as the call's `grpc-timeout`, so the holder cuts the call short with
    /// `DEADLINE_EXCEEDED`; a holder silent for longer leaves the caller `UNAVAILABLE`, outcome
    /// unknown.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a call waits, retrying, for some hub to serve the subject.
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Sends one call to the holder and rebuilds its answer (an error status as a
    /// trailers-only response).
    async fn forward(&self, req: http::Request<Body>) -> http::Response<Body> {
        let path = req.uri().path().to_string();
        let started = Instant::now();
        let response = self.try_forward(req).await.unwrap_or_else(|status| {
            tracing::debug!(method = %path, code = ?status.code(), message = status.message(), "forwarding failed");
            status.into_http()
        });
        tracing::debug!(method = %path, elapsed = ?started.elapsed(), "forwarded call answered");
        response
    }

    async fn try_forward(&self, req: http::Request<Body>) -> Result<http::Response<Body>, Status> {
        let (parts, body) = req.into_parts();
        let body = read_body(body, MAX_BODY).await?;
        let deadline = parts
            .headers
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_grpc_timeout)
            .map_or(self.timeout, |caller| caller.min(self.timeout));
        let reply_key = ReplyKey::new();
        let inner = InnerCall {
            call_id: uuid::Uuid::new_v4().into_bytes().to_vec(),
            issued_unix_millis: unix_millis(SystemTime::now()),
            reply_xkey: reply_key.public().to_string(),
            caller: parts.extensions.get::<Identity>().map(identity_to_wire),
            path: parts.uri.path().to_string(),
            headers: forwarded_headers(&parts.headers, deadline),
            body: body.into(),
        };
        let call = seal_call(&self.seal, inner)?;
        let reply = self
            .request(Bytes::from(call.encode_to_vec()), deadline)
            .await?;
        let reply = ForwardedReply::decode(reply.payload).map_err(|e| {
            Status::internal(format!(
                "the hub holding the controllers sent an answer that is not a ForwardedReply: {e}"
            ))
        })?;
        response(open_reply(&self.seal, &reply_key, reply)?)
    }

    /// One NATS request, sent again while nobody serves the subject, for at most the patience.
    async fn request(
        &self,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<async_nats::Message, Status> {
        use async_nats::RequestErrorKind as Kind;
        let started = Instant::now();
        let mut delays = retry_delays();
        loop {
            let request = async_nats::Request::new()
                .payload(payload.clone())
                .timeout(Some(timeout + REPLY_GRACE));
            let err = match self.nats.send_request(self.subject.clone(), request).await {
                Ok(reply) => return Ok(reply),
                Err(err) => err,
            };
            match err.kind() {
                Kind::NoResponders => {
                    // The last attempt is made when the patience runs out.
                    let left = self.patience.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        tracing::warn!(subject = %self.subject, patience = ?self.patience, "nobody serves forwarded calls");
                        return Err(Status::unavailable(format!(
                            "no hub holds the controllers (takeover in progress?): nobody \
                             answered on {} for {:?}; try again shortly",
                            self.subject, self.patience
                        )));
                    }
                    let delay = delays.next().unwrap_or(LAST_RETRY);
                    tokio::time::sleep(delay.min(left)).await;
                }
                Kind::TimedOut => {
                    return Err(Status::unavailable(format!(
                        "the hub holding the controllers took the call but did not answer \
                         within {timeout:?}: the outcome is unknown; check the object before \
                         retrying a change"
                    )));
                }
                Kind::MaxPayloadExceeded => {
                    return Err(Status::resource_exhausted(format!(
                        "the call is {} bytes forwarded, more than the NATS server carries \
                         (max_payload {}); make it on the hub holding the controllers or raise \
                         max_payload",
                        payload.len(),
                        self.nats.server_info().max_payload
                    )));
                }
                Kind::InvalidSubject | Kind::Other => {
                    return Err(Status::unavailable(format!(
                        "forwarding the call to the hub holding the controllers failed: {err}"
                    )));
                }
            }
        }
    }
}

impl<S> tower::Layer<S> for Forward {
    type Service = ForwardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ForwardService {
            inner,
            forward: Arc::new(self.clone()),
        }
    }
}

/// The service [`Forward`] wraps around the gRPC routes.
#[derive(Clone)]
pub struct ForwardService<S> {
    inner: S,
    forward: Arc<Forward>,
}

impl<S, R> tower::Service<http::Request<Body>> for ForwardService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: http_body::Body<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match (self.forward.route)(req.uri().path()) {
            Decision::Local => {
                let call = self.inner.call(req);
                Box::pin(async move { Ok(call.await?.map(Body::new)) })
            }
            Decision::Refuse(message) => {
                tracing::debug!(method = %req.uri().path(), "call refused: not forwardable");
                Box::pin(std::future::ready(Ok(
                    Status::unavailable(message).into_http()
                )))
            }
            Decision::Forward => {
                let forward = self.forward.clone();
                Box::pin(async move { Ok(forward.forward(req).await) })
            }
        }
    }
}

/// Labels of the refused-call counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct RefusedLabels {
    /// Why: `unopened` (sealed with another key, or in clear where the hubs share one),
    /// `replayed_or_stale`, `version`, `invalid`.
    pub reason: &'static str,
}

/// The holder's metrics of forwarded calls (`flotilla_hub_forwarded_calls_…`).
#[derive(Clone, Default)]
pub struct ForwardMetrics {
    /// Forwarded calls refused before running, by reason
    /// (`flotilla_hub_forwarded_calls_refused_total`).
    pub refused: prometheus_client::metrics::family::Family<
        RefusedLabels,
        prometheus_client::metrics::counter::Counter,
    >,
}

impl ForwardMetrics {
    /// The forwarded-call metrics of `hub` (created and registered once).
    pub fn new(hub: &crate::metrics::Metrics) -> Self {
        hub.component("forwarded_calls", |hub| {
            let m = Self::default();
            hub.register_component("forwarded_calls", |r| {
                r.register(
                    "refused",
                    "Calls forwarded from another hub refused before running, by reason \
                     (unopened, replayed_or_stale, version, invalid)",
                    m.refused.clone(),
                );
            });
            m
        })
    }

    fn count_refusal(&self, status: &Status) {
        let reason = match status.code() {
            tonic::Code::Unauthenticated => "unopened",
            tonic::Code::FailedPrecondition => "replayed_or_stale",
            tonic::Code::Unimplemented => "version",
            _ => "invalid",
        };
        self.refused.get_or_create(&RefusedLabels { reason }).inc();
    }
}

/// A subscription to the forwarding subject could not be made.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The subscription was refused.
    #[error("subscribing to forwarded calls on {subject}: {source}")]
    Subscribe {
        /// The forwarding subject.
        subject: String,
        /// The NATS error.
        #[source]
        source: async_nats::SubscribeError,
    },
    /// The server did not confirm the subscription.
    #[error("confirming the subscription to forwarded calls on {subject}: {source}")]
    Flush {
        /// The forwarding subject.
        subject: String,
        /// The NATS error.
        #[source]
        source: async_nats::client::FlushError,
    },
}

/// Answers the calls forwarded on `subject` with `service` until `stop` turns true (or its
/// sender is dropped), then drains: unsubscribes, answers the calls the server delivered before
/// it took the unsubscription, waits for the calls in flight (each bounded by its deadline, at
/// most [`MAX_CALL_TIME`]) and returns. Once it has returned, a forwarder's next call finds
/// no responders (and waits for the next holder) rather than a silent subscriber.
///
/// Run it only while holding what the forwarders forward for: every hub subscribed gets every
/// call. `service` sees each call as a plain HTTP/2 gRPC request rebuilt from the wire, with only
/// [`FORWARDED_HEADERS`] and, from a call sealed with `seal`'s shared key, the caller the edge
/// vouches for ([`Vouched`]); pass the same authentication layer the gRPC server has, so the
/// caller is held to its role here too. Each call id runs once ([`ReplayGuard`]); calls refused
/// before running are counted in `metrics`. Up to [`MAX_IN_FLIGHT`] calls run at once; a
/// request whose reply subject is not an inbox is ignored.
pub async fn serve<S, B>(
    nats: async_nats::Client,
    subject: impl Into<String>,
    service: S,
    seal: HubSeal,
    replay: crate::sealed::ReplayLimits,
    metrics: ForwardMetrics,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ServeError>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let subject = subject.into();
    let span = tracing::info_span!("forwarded", subject = %subject);
    let mut calls =
        nats.subscribe(subject.clone())
            .await
            .map_err(|source| ServeError::Subscribe {
                subject: subject.clone(),
                source,
            })?;
    nats.flush().await.map_err(|source| ServeError::Flush {
        subject: subject.clone(),
        source,
    })?;
    async move {
        tracing::info!(sealed = seal.shared(), "serving forwarded calls");
        let guard = Arc::new(std::sync::Mutex::new(ReplayGuard::within(replay)));
        let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let mut running = JoinSet::new();
        let mut draining = false;
        loop {
            let msg = tokio::select! {
                // Unsubscribed at the server, the calls it delivered before are still answered:
                // a call is either answered here or never delivered ("no responders" for the
                // next holder to take), not dropped in between.
                () = stopped(&mut stop), if !draining => {
                    draining = true;
                    if let Err(e) = calls.drain().await {
                        tracing::warn!(error = %e, "draining forwarded calls failed");
                        break;
                    }
                    continue;
                }
                Some(_) = running.join_next(), if !running.is_empty() => continue,
                msg = futures::StreamExt::next(&mut calls) => match msg {
                    Some(msg) => msg,
                    None => break,
                },
            };
            let Some(reply) = answerable(msg.reply.as_ref()) else {
                tracing::debug!(reply = ?msg.reply, "forwarded call ignored: its reply subject is not an inbox");
                continue;
            };
            let permit = permits
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let (nats, service, seal, guard, metrics) = (
                nats.clone(),
                service.clone(),
                seal.clone(),
                guard.clone(),
                metrics.clone(),
            );
            running.spawn(
                async move {
                    let answer = answer(service, &seal, &guard, &metrics, msg.payload).await;
                    send(&nats, reply, answer).await;
                    drop(permit);
                }
                .in_current_span(),
            );
        }
        while running.join_next().await.is_some() {}
        tracing::info!("stopped serving forwarded calls");
    }
    .instrument(span)
    .await;
    Ok(())
}

/// Resolves once `stop` is true or its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: dropped here, never held across an await.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// The reply subject if it is an inbox a holder answers on.
fn answerable(reply: Option<&async_nats::Subject>) -> Option<async_nats::Subject> {
    let s = reply?.as_str();
    let inbox = INBOXES
        .iter()
        .any(|p| s.len() > p.len() && s.starts_with(p));
    let plain = !s.contains(['*', '>', ' ', '\t', '\r', '\n']) && !s.contains("..");
    (inbox && plain).then(|| async_nats::Subject::from(s))
}

/// Publishes `answer` to `reply`; an answer too large for NATS becomes `RESOURCE_EXHAUSTED`.
async fn send(nats: &async_nats::Client, reply: async_nats::Subject, answer: ForwardedReply) {
    let bytes = Bytes::from(answer.encode_to_vec());
    let len = bytes.len();
    let err = match nats.publish(reply.clone(), bytes).await {
        Ok(()) => return,
        Err(e) => e,
    };
    if err.kind() != async_nats::PublishErrorKind::MaxPayloadExceeded {
        tracing::debug!(error = %err, "answering a forwarded call failed");
        return;
    }
    let refusal = status_reply(Status::resource_exhausted(format!(
        "the answer is {len} bytes forwarded, more than the NATS server carries (max_payload \
         {}); make the call on the hub holding the controllers or raise max_payload",
        nats.server_info().max_payload
    )));
    if let Err(e) = nats
        .publish(reply, Bytes::from(refusal.encode_to_vec()))
        .await
    {
        tracing::debug!(error = %e, "answering a forwarded call failed");
    }
}

/// Opens one forwarded call, runs it through `service` and collects its whole answer, sealed to
/// the call's reply key (a call that does not open is answered in clear, with the error alone).
async fn answer<S, B>(
    mut service: S,
    seal: &HubSeal,
    guard: &std::sync::Mutex<ReplayGuard>,
    metrics: &ForwardMetrics,
    payload: Bytes,
) -> ForwardedReply
where
    S: tower::Service<http::Request<Body>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let opened = open_call(seal, guard, payload, SystemTime::now()).and_then(|inner| {
        let reply_xkey = inner.reply_xkey.clone();
        let (req, deadline) = request(inner, seal.shared())?;
        Ok((req, deadline, reply_xkey))
    });
    let (req, deadline, reply_xkey) = match opened {
        Ok(r) => r,
        Err(status) => {
            tracing::warn!(code = ?status.code(), message = status.message(), "forwarded call refused");
            metrics.count_refusal(&status);
            return status_reply(status);
        }
    };
    let path = req.uri().path().to_string();
    let run = async {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .map_err(|e| Status::from_error(e.into()))?;
        let response = service
            .call(req)
            .await
            .map_err(|e| Status::from_error(e.into()))?;
        collect(response).await
    };
    let reply = match tokio::time::timeout(deadline, run).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(status)) => status_reply(status),
        Err(_) => status_reply(Status::deadline_exceeded(format!(
            "{path} did not finish within {deadline:?} on the hub holding the controllers"
        ))),
    };
    tracing::debug!(method = %path, "forwarded call served");
    seal_reply(seal, &reply, &reply_xkey)
}

/// The HTTP request a forwarded call stands for, and how long it may run; with `vouch`, the
/// caller it names is the request's [`Vouched`] identity (only for a call that was sealed).
fn request(call: InnerCall, vouch: bool) -> Result<(http::Request<Body>, Duration), Status> {
    if !call.path.starts_with('/') {
        return Err(Status::invalid_argument(format!(
            "forwarded call path {:?} does not start with '/'",
            call.path
        )));
    }
    let uri: http::Uri = call.path.parse().map_err(|e| {
        Status::invalid_argument(format!("forwarded call path {:?}: {e}", call.path))
    })?;
    let mut req = http::Request::new(Body::new(Full::new(Bytes::from(call.body))));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = uri;
    *req.version_mut() = http::Version::HTTP_2;
    if vouch && let Some(caller) = call.caller {
        req.extensions_mut()
            .insert(Vouched(identity_from_wire(caller)?));
    }
    let mut deadline = MAX_CALL_TIME;
    for header in call.headers {
        if !FORWARDED_HEADERS.contains(&header.name.as_str()) {
            continue;
        }
        let (name, value) = header_pair(header)
            .map_err(|e| Status::invalid_argument(format!("forwarded call header: {e}")))?;
        if name == "grpc-timeout"
            && let Some(d) = value.to_str().ok().and_then(parse_grpc_timeout)
        {
            deadline = deadline.min(d);
        }
        req.headers_mut().append(name, value);
    }
    Ok((req, deadline))
}

/// The whole answer of `response`: headers, body (at most [`MAX_BODY`]) and trailers.
async fn collect<B>(response: http::Response<B>) -> Result<ForwardedReply, Status>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    let collected = Limited::new(body, MAX_BODY).collect().await.map_err(|e| {
        if e.is::<LengthLimitError>() {
            Status::resource_exhausted(format!(
                "the answer is over {MAX_BODY} bytes, more than a forwarded call carries"
            ))
        } else {
            Status::from_error(e)
        }
    })?;
    let trailers = collected.trailers().map(wire_headers).unwrap_or_default();
    Ok(ForwardedReply {
        version: FORWARD_VERSION,
        http_status: u32::from(parts.status.as_u16()),
        headers: wire_headers(&parts.headers),
        body: collected.to_bytes().into(),
        trailers,
        sealed: None,
    })
}

/// A trailers-only answer carrying `status`.
fn status_reply(status: Status) -> ForwardedReply {
    let response = status.into_http::<()>();
    ForwardedReply {
        version: FORWARD_VERSION,
        http_status: u32::from(response.status().as_u16()),
        headers: wire_headers(response.headers()),
        body: Vec::new(),
        trailers: Vec::new(),
        sealed: None,
    }
}

/// The response a forwarded answer stands for.
fn response(reply: ForwardedReply) -> Result<http::Response<Body>, Status> {
    if reply.version != FORWARD_VERSION {
        return Err(Status::unavailable(format!(
            "the hub holding the controllers answered in forwarding version {} (this hub speaks \
             {FORWARD_VERSION}); upgrade the hubs to one version",
            reply.version
        )));
    }
    let bad = |e: String| {
        Status::internal(format!(
            "the hub holding the controllers sent an unusable answer: {e}"
        ))
    };
    let status = u16::try_from(reply.http_status)
        .ok()
        .and_then(|s| http::StatusCode::from_u16(s).ok())
        .ok_or_else(|| bad(format!("HTTP status {}", reply.http_status)))?;
    let headers = header_map(reply.headers).map_err(|e| bad(e.to_string()))?;
    let trailers = header_map(reply.trailers).map_err(|e| bad(e.to_string()))?;
    let body = Full::new(Bytes::from(reply.body));
    let body = if trailers.is_empty() {
        Body::new(body)
    } else {
        Body::new(body.with_trailers(std::future::ready(Some(Ok(trailers)))))
    };
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// Reads a whole request body, refusing one over `limit` bytes.
async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, Status> {
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        // Request trailers have no meaning in gRPC: only data is kept.
        if let Ok(data) = frame?.into_data() {
            if buf.len() + data.len() > limit {
                return Err(Status::resource_exhausted(format!(
                    "the request is over {} MiB: a call forwarded to the hub holding the \
                     controllers carries at most {limit} bytes",
                    limit / (1024 * 1024)
                )));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// The [`FORWARDED_HEADERS`] of a request, with `grpc-timeout` set to `deadline`.
fn forwarded_headers(headers: &HeaderMap, deadline: Duration) -> Vec<ForwardedHeader> {
    let mut out: Vec<ForwardedHeader> = FORWARDED_HEADERS
        .iter()
        .filter(|name| **name != "grpc-timeout")
        .flat_map(|name| {
            headers.get_all(*name).iter().map(|value| ForwardedHeader {
                name: (*name).to_string(),
                value: value.as_bytes().to_vec(),
            })
        })
        .collect();
    out.push(ForwardedHeader {
        name: "grpc-timeout".into(),
        value: format_grpc_timeout(deadline).into_bytes(),
    });
    out
}

/// Every end-to-end header of `headers`, for the wire.
fn wire_headers(headers: &HeaderMap) -> Vec<ForwardedHeader> {
    headers
        .iter()
        .filter(|(name, _)| !HOP_BY_HOP.contains(&name.as_str()))
        .map(|(name, value)| ForwardedHeader {
            name: name.as_str().to_string(),
            value: value.as_bytes().to_vec(),
        })
        .collect()
}

/// A forwarded header that is not an HTTP header.
#[derive(Debug, Error)]
enum HeaderError {
    /// Its name is not a header name.
    #[error("header name {name:?}: {source}")]
    Name {
        /// The name as sent.
        name: String,
        /// Why.
        #[source]
        source: http::header::InvalidHeaderName,
    },
    /// Its value is not a header value.
    #[error("value of header {name}: {source}")]
    Value {
        /// The header.
        name: HeaderName,
        /// Why.
        #[source]
        source: http::header::InvalidHeaderValue,
    },
}

/// Headers from the wire, hop-by-hop ones dropped.
fn header_map(headers: Vec<ForwardedHeader>) -> Result<HeaderMap, HeaderError> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for header in headers {
        if HOP_BY_HOP.contains(&header.name.as_str()) {
            continue;
        }
        let (name, value) = header_pair(header)?;
        map.append(name, value);
    }
    Ok(map)
}

fn header_pair(header: ForwardedHeader) -> Result<(HeaderName, HeaderValue), HeaderError> {
    let name = match HeaderName::from_bytes(header.name.as_bytes()) {
        Ok(name) => name,
        Err(source) => {
            return Err(HeaderError::Name {
                name: header.name,
                source,
            });
        }
    };
    match HeaderValue::from_bytes(&header.value) {
        Ok(value) => Ok((name, value)),
        Err(source) => Err(HeaderError::Value { name, source }),
    }
}

/// The waits between attempts while nobody serves the subject: 100 ms doubling to 1 s.
fn retry_delays() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(FIRST_RETRY), |d| Some((*d * 2).min(LAST_RETRY)))
}

/// A `grpc-timeout` value (`1*8DIGIT` then `H`, `M`, `S`, `m`, `u` or `n`).
fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let split = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at_checked(split)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `deadline` as a `grpc-timeout` value: milliseconds, rounded up, or whole seconds when
/// milliseconds would not fit in 8 digits.
fn format_grpc_timeout(deadline: Duration) -> String {
    let millis = deadline.as_micros().div_ceil(1000);
    if millis < 100_000_000 {
        format!("{millis}m")
    } else {
        format!("{}S", deadline.as_secs().min(99_999_999))
    }
}

mod seal;
#[cfg(test)]
mod tests;

use seal::{identity_from_wire, identity_to_wire, seal_reply, unix_millis};
pub use seal::{open_call, open_reply, seal_call};

//! The agent's side of the cluster proxy ([`flotilla_bus::tunnel`]): takes the hub's calls on
//! `flotilla.kubeapi.<cluster>`, one task per call, each of which hands the request to the
//! backend ([`Backend::serve_api`]) at once, streams the request body to it as the hub sends
//! it (granting the hub more only as the backend takes it: [`upload`]), and streams the answer
//! back to the hub that made the call (`flotilla.kubeapiback.<cluster>.<hub>`) within the hub's
//! credit — so neither a large body nor a large list or a long watch ever sits whole in the
//! agent's memory.
//! A call ends when its body is done, the hub cancels it (its client went away: the upstream
//! request is dropped with it) or the hub falls silent for [`tunnel::idle_timeout`].
//!
//! What callers may take of the agent is bounded (issue 42): [`MAX_CALLS`] calls at once, at
//! most [`Limits::calls_per_caller`] of them for one caller (the identity the hub names), and
//! at most [`Limits::body_bytes`] of request bodies waiting for the backend over every call
//! and hub; past
//! any of them a call is answered 429 (503 for the agent's own cap) saying which. A `GET` or
//! `HEAD` with a body is answered 400 before its body is asked for.
//!
//! A call that is an exec, attach or port-forward *session* ([`TunnelRequest::session`]) goes
//! to [`session`]: the backend opens it ([`Backend::open_session`]) and the call turns full
//! duplex, within [`Limits::sessions`] sessions at once and [`Limits::sessions_per_caller`]
//! per caller.

use crate::backend::Backend;
use crate::backend::api::{ApiRequest, ApiResponse, Bearer, Impersonation, RequestBody};
use bytes::Bytes;
use flotilla_api::v1::{TunnelHeader, TunnelRequest, TunnelResponse};
use flotilla_bus::publish::Publisher;
use flotilla_bus::spoke::Feed;
use flotilla_bus::subjects;
use flotilla_bus::tunnel::{
    self, Frame, ProtocolError, Received, RecvWindow, SendWindow, SeqCheck, StreamId,
};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

/// Calls one agent serves at once; more are answered at once with a 503 `Status` (the client
/// may retry).
pub const MAX_CALLS: usize = 256;
/// Smallest [`Limits::body_bytes`]: three windows of the largest chunks, and the largest
/// body a Kubernetes API server reads by default.
pub const MIN_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Default [`Limits::calls_per_caller`]: a quarter of [`MAX_CALLS`].
pub const DEFAULT_CALLS_PER_CALLER: usize = MAX_CALLS / 4;
/// Default [`Limits::body_bytes`]: 32 MiB, ten bodies of the largest size.
pub const DEFAULT_BODY_BYTES: usize = 32 << 20;

/// What the cluster proxy's callers may take of the agent.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Calls served at once for one caller (the name the hub gives), of [`MAX_CALLS`].
    pub calls_per_caller: usize,
    /// Request-body bytes held at once, over every call and hub (at least
    /// [`MIN_BODY_BYTES`]): what hubs sent that the backend has not yet taken (a call holds
    /// at most its window of chunks: bodies stream to the backend).
    pub body_bytes: usize,
    /// exec, attach and port-forward sessions served at once, over every caller (of
    /// [`MAX_CALLS`]; more: 503).
    pub sessions: usize,
    /// Sessions served at once for one caller (more: 429).
    pub sessions_per_caller: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            calls_per_caller: DEFAULT_CALLS_PER_CALLER,
            body_bytes: DEFAULT_BODY_BYTES,
            sessions: session::MAX_SESSIONS,
            sessions_per_caller: session::SESSIONS_PER_CALLER,
        }
    }
}

/// The agent's cluster-proxy server.
pub struct Server {
    js: async_nats::jetstream::Context,
    client: async_nats::Client,
    cluster: String,
    backend: Arc<dyn Backend>,
    max_event_bytes: usize,
    limits: Limits,
    metrics: Arc<crate::metrics::AgentMetrics>,
    /// Where the hub's frames arrive (the agent's one subscription); without one the server
    /// subscribes to `flotilla.kubeapi.<cluster>` itself (the previous wire).
    feed: Option<Feed>,
}

/// What each call needs.
struct Shared {
    publisher: Publisher,
    cluster: String,
    source: String,
    backend: Arc<dyn Backend>,
    /// The request-body bytes the agent may hold, over every call.
    budget: Arc<Semaphore>,
    /// Its size.
    body_bytes: usize,
    metrics: Arc<crate::metrics::AgentMetrics>,
}

/// An open call as the server loop sees it: its mailbox and its caller.
struct Open {
    tx: mpsc::Sender<Received>,
    caller: String,
    /// An exec, attach or port-forward session.
    session: bool,
}

impl Server {
    /// A server for `cluster` over the connection of `js`.
    pub fn new(
        js: &async_nats::jetstream::Context,
        cluster: &str,
        backend: Arc<dyn Backend>,
        max_event_bytes: usize,
    ) -> Self {
        Self {
            js: js.clone(),
            client: js.client(),
            cluster: cluster.to_string(),
            backend,
            max_event_bytes,
            limits: Limits::default(),
            metrics: Arc::default(),
            feed: None,
        }
    }

    /// Reading the hub's frames from `feed` (the agent's wire) when there is one.
    pub fn with_feed(mut self, feed: Option<Feed>) -> Self {
        self.feed = feed;
        self
    }

    /// With `limits`, counting refusals in `metrics`.
    pub fn with_limits(
        mut self,
        limits: Limits,
        metrics: Arc<crate::metrics::AgentMetrics>,
    ) -> Self {
        self.limits = limits;
        self.metrics = metrics;
        self
    }

    /// Serves calls until the task is dropped (its calls end with it).
    pub async fn run(self) {
        let span = tracing::info_span!("kubeproxy", cluster.name = %self.cluster);
        self.serve().instrument(span).await;
    }

    async fn serve(mut self) {
        let shared = Arc::new(Shared {
            publisher: Publisher::over(&self.js, self.max_event_bytes, Duration::from_secs(5)),
            cluster: self.cluster.clone(),
            source: format!("flotilla-agent/{}", self.cluster),
            backend: self.backend.clone(),
            budget: Arc::new(Semaphore::new(
                self.limits.body_bytes.min(Semaphore::MAX_PERMITS),
            )),
            body_bytes: self.limits.body_bytes,
            metrics: self.metrics.clone(),
        });
        let max_chunk = tunnel::max_chunk_for(self.max_event_bytes) as usize;
        let mut calls: HashMap<StreamId, Open> = HashMap::new();
        // Every call's task (and every refusal's) is owned here: dropping the server ends them.
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut feed = match self.feed.take() {
            Some(feed) => feed,
            None => Feed::subscribe(&self.client, subjects::kubeapi(&self.cluster)).await,
        };
        loop {
            let msg = tokio::select! {
                msg = feed.next() => msg,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                    // A call that ended (or panicked) dropped its mailbox.
                    calls.retain(|_, open| !open.tx.is_closed());
                    continue;
                }
            };
            let received = match tunnel::decode(
                &msg.payload,
                self.max_event_bytes,
                &tunnel::down_type(),
                &self.cluster,
                max_chunk,
            ) {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(error = %e, "cluster-proxy frame dropped");
                    continue;
                }
            };
            if let Some(open) = calls.get(&received.stream) {
                let stream = received.stream.clone();
                if open.tx.try_send(received).is_err() {
                    // Over its credit: the call sees its mailbox closed and ends.
                    calls.remove(&stream);
                }
                continue;
            }
            let Received { stream, seq, frame } = received;
            let Frame::Request(request) = frame else {
                // A frame of a call that already ended.
                continue;
            };
            if seq != 0 || !subjects::valid_hub_token(&request.hub) {
                tracing::debug!(%stream, "malformed cluster-proxy call dropped");
                continue;
            }
            let caller = request
                .caller
                .as_ref()
                .map_or_else(String::new, |c| c.name.clone());
            let is_session = request.session.is_some();
            if let Err((reason, refusal)) = self.admit(&calls, &caller, is_session) {
                self.metrics.proxy_refused(reason);
                let call = Call::new(shared.clone(), stream, &request);
                tasks.spawn(call.refuse(refusal));
                continue;
            }
            let (tx, rx) = mpsc::channel(tunnel::MAX_WINDOW as usize + 16);
            calls.insert(
                stream.clone(),
                Open {
                    tx,
                    caller,
                    session: is_session,
                },
            );
            let call = Call::new(shared.clone(), stream.clone(), &request);
            if is_session {
                let span = tracing::info_span!("kubeproxy_session", %stream);
                tasks.spawn(session::run(call, *request, rx).instrument(span));
            } else {
                let span = tracing::debug_span!("call", %stream);
                tasks.spawn(call.run(*request, rx).instrument(span));
            }
        }
    }
}

impl Server {
    /// Whether one more call of `caller` may open now (a session counts against the sessions'
    /// bounds too): the refusal, and its metric's reason, when not.
    fn admit(
        &self,
        calls: &HashMap<StreamId, Open>,
        caller: &str,
        is_session: bool,
    ) -> Result<(), (&'static str, Refusal)> {
        if calls.len() >= MAX_CALLS {
            return Err((
                "calls",
                Refusal::busy(format!(
                    "the agent already serves {MAX_CALLS} calls; try again later"
                )),
            ));
        }
        let share = self.limits.calls_per_caller;
        if calls.values().filter(|o| o.caller == caller).count() >= share {
            return Err((
                "caller_calls",
                Refusal::too_many(format!(
                    "the agent of cluster {} already serves {share} calls of {caller:?}, its \
                     share per caller (--cluster-proxy-calls-per-caller); close some \
                     (watches, log follows) or try again later",
                    self.cluster
                )),
            ));
        }
        if is_session {
            let open = calls
                .values()
                .filter(|o| o.session)
                .map(|o| o.caller.as_str());
            session::admit(open, caller, &self.cluster, &self.limits)?;
        }
        Ok(())
    }
}

/// A call the agent will not serve now, and why.
struct Refusal {
    status: http::StatusCode,
    reason: &'static str,
    message: String,
}

impl Refusal {
    /// The agent's own cap (503).
    fn busy(message: String) -> Self {
        Self {
            status: http::StatusCode::SERVICE_UNAVAILABLE,
            reason: "ServiceUnavailable",
            message,
        }
    }

    /// A share or bound of the caller's (429).
    fn too_many(message: String) -> Self {
        Self {
            status: http::StatusCode::TOO_MANY_REQUESTS,
            reason: "TooManyRequests",
            message,
        }
    }

    fn response(&self) -> ApiResponse {
        ApiResponse::status(self.status, self.reason, &self.message)
    }
}

/// Request-body bytes a call holds of the agent's budget (and shows in the gauge) until the
/// backend answered.
struct Held {
    permit: OwnedSemaphorePermit,
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gauge
            .dec_by(i64::try_from(self.permit.num_permits()).unwrap_or(i64::MAX));
    }
}

/// One call.
struct Call {
    shared: Arc<Shared>,
    stream: StreamId,
    subject: String,
    seq: u64,
}

/// Why a call ended early.
enum Stop {
    /// The hub cancelled it (or is gone).
    Hub(String),
    /// The hub broke the protocol.
    Protocol(ProtocolError),
    /// Sending failed.
    Send(flotilla_bus::publish::PublishError),
    /// The backend's response broke off.
    Upstream(String),
}

impl Call {
    fn new(shared: Arc<Shared>, stream: StreamId, request: &TunnelRequest) -> Self {
        Self {
            subject: subjects::kubeapi_back(&shared.cluster, &request.hub),
            shared,
            stream,
            seq: 0,
        }
    }

    async fn send(&mut self, frame: Frame) -> Result<(), Stop> {
        let event = tunnel::encode(
            tunnel::up_type(),
            &self.shared.source,
            &self.shared.cluster,
            &self.stream,
            self.seq,
            frame,
        );
        self.seq += 1;
        self.shared
            .publisher
            .publish(self.subject.clone(), &event)
            .await
            .map_err(Stop::Send)
    }

    /// Answers a call the agent will not serve now with a `Status` (503 or 429): a retryable
    /// answer (kubectl and client-go retry both), where a cancel would reach the client as a
    /// 502.
    async fn refuse(mut self, refusal: Refusal) {
        let _ = self.answer_whole(refusal.response()).await;
    }

    async fn run(mut self, request: TunnelRequest, mut rx: mpsc::Receiver<Received>) {
        let caller = request.caller.clone().unwrap_or_default();
        tracing::info!(
            caller = %caller.name, role = %caller.role, method = %request.method,
            path = %request.path, as_user = tunnel::as_user(&request), "cluster proxy call"
        );
        let mut seq_in = SeqCheck::default();
        // The request itself was frame 0.
        let _ = seq_in.check(0);
        if let Err(stop) = self.serve(request, &mut rx, &mut seq_in).await {
            self.stopped(stop).await;
        }
    }

    /// Ends a call that stopped early: logs why, and tells the hub when it did not know.
    async fn stopped(&mut self, stop: Stop) {
        match stop {
            Stop::Hub(reason) => tracing::debug!(%reason, "call ended by the hub"),
            Stop::Protocol(e) => {
                tracing::warn!(error = %e, "the hub broke the cluster-proxy protocol; call cancelled");
                let _ = self.send(Frame::Cancel(e.to_string())).await;
            }
            Stop::Send(e) => tracing::debug!(error = %e, "sending to the hub failed; call ended"),
            Stop::Upstream(reason) => {
                tracing::debug!(%reason, "response broke off");
                let _ = self.send(Frame::Cancel(reason)).await;
            }
        }
    }

    /// Takes the next frame from the hub, checking its counter; pings keep the deadline.
    async fn next(
        rx: &mut mpsc::Receiver<Received>,
        seq_in: &mut SeqCheck,
        deadline: &mut Instant,
    ) -> Result<Frame, Stop> {
        loop {
            let r = tokio::select! {
                r = rx.recv() => r.ok_or_else(|| Stop::Protocol(ProtocolError::Unexpected {
                    frame: "data",
                    detail: "beyond the call's mailbox (the hub ignored its credit)",
                }))?,
                () = tokio::time::sleep_until(*deadline) => {
                    return Err(Stop::Hub("the hub fell silent".into()));
                }
            };
            *deadline = Instant::now() + tunnel::idle_timeout();
            seq_in.check(r.seq).map_err(Stop::Protocol)?;
            match r.frame {
                Frame::Ping => continue,
                Frame::Cancel(reason) => return Err(Stop::Hub(reason)),
                other => return Ok(other),
            }
        }
    }

    async fn serve(
        &mut self,
        request: TunnelRequest,
        rx: &mut mpsc::Receiver<Received>,
        seq_in: &mut SeqCheck,
    ) -> Result<(), Stop> {
        let mut deadline = Instant::now() + tunnel::idle_timeout();
        if request.has_body && matches!(request.method.as_str(), "GET" | "HEAD") {
            // Before any credit: the body is never asked for.
            self.shared.metrics.proxy_refused("body_on_read");
            return self
                .answer_whole(ApiResponse::status(
                    http::StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!(
                        "a {} request carries no body: the Kubernetes API reads none",
                        request.method
                    ),
                ))
                .await;
        }
        let mut recv = RecvWindow::new(tunnel::DEFAULT_WINDOW);
        // Frame 0: the agent has the call, and allows the request body's first window.
        self.send(Frame::Credit(recv.granted())).await?;
        // The body streams to the backend as it comes: the hub is granted more only as the
        // backend takes it.
        let (mut feed, body) = if request.has_body {
            let (feed, body) = upload::open(tunnel::DEFAULT_WINDOW as usize);
            (Some(feed), body)
        } else {
            (None, RequestBody::empty())
        };
        let api_request = match to_api_request(&request, body) {
            Ok(r) => r,
            Err(why) => {
                return self
                    .answer_whole(ApiResponse::status(
                        http::StatusCode::BAD_REQUEST,
                        "BadRequest",
                        &why,
                    ))
                    .await;
            }
        };
        // The backend's answer, while the body streams to it, the hub may cancel (and pings
        // keep it open).
        let answer = self.shared.backend.clone().serve_api(api_request);
        tokio::pin!(answer);
        let mut keepalive =
            tokio::time::interval_at(Instant::now() + tunnel::KEEPALIVE, tunnel::KEEPALIVE);
        let mut send = SendWindow::new(u64::from(request.window.clamp(1, tunnel::MAX_WINDOW)));
        let max_chunk =
            (request.max_chunk as usize).clamp(1024, tunnel::DEFAULT_MAX_CHUNK as usize);
        let response = loop {
            tokio::select! {
                // The backend first: it takes what waits of the body before more is let in.
                biased;
                response = &mut answer => break response,
                Some(()) = taken(&mut feed) => {
                    if let Some(credit) = recv.consumed() {
                        self.send(Frame::Credit(credit)).await?;
                    }
                }
                frame = Self::next(rx, seq_in, &mut deadline) => match frame? {
                    Frame::Data(chunk) => if let Some(f) = feed.as_mut() {
                        recv.received().map_err(Stop::Protocol)?;
                        if let Err(refusal) = self.feed(f, chunk, &mut recv).await? {
                            // Dropping the backend's call breaks its body off.
                            return self.answer_whole(refusal.response()).await;
                        }
                    } else {
                        take_credit(&mut send, Frame::Data(chunk), "while the backend answers")?;
                    },
                    Frame::End if feed.is_some() => {
                        if let Some(mut f) = feed.take() {
                            f.end();
                        }
                    }
                    other => take_credit(&mut send, other, "while the backend answers")?,
                },
                _ = keepalive.tick() => self.send(Frame::Ping).await?,
            }
        };
        // The backend is done with the body. Answered before the body ended, what the hub still
        // sends of it is dropped (the hub stops sending when the answer reaches it).
        let mut body_coming = feed.is_some();
        drop(feed);
        self.send(Frame::Response(response_head(&response))).await?;
        let mut body = response.body;
        let mut pending = Bytes::new();
        let mut done = false;
        loop {
            while !pending.is_empty() && send.may_send() {
                let piece = pending.split_to(pending.len().min(max_chunk));
                send.sent();
                self.send(Frame::Data(piece)).await?;
            }
            if done && pending.is_empty() {
                return self.send(Frame::End).await;
            }
            let want = pending.is_empty() && !done && send.may_send();
            tokio::select! {
                chunk = body.next(), if want => match chunk {
                    Some(Ok(bytes)) => pending = bytes,
                    Some(Err(e)) => {
                        return Err(Stop::Upstream(format!("the API server's response broke off: {e}")));
                    }
                    None => done = true,
                },
                frame = Self::next(rx, seq_in, &mut deadline) => match frame? {
                    Frame::Data(_) if body_coming => recv.received().map_err(Stop::Protocol)?,
                    Frame::End if body_coming => body_coming = false,
                    other => take_credit(&mut send, other, "while the response streams")?,
                },
                _ = keepalive.tick() => self.send(Frame::Ping).await?,
            }
        }
    }

    /// Takes `n` bytes of the agent's request-body budget for a chunk on its way to the
    /// backend (given back as the backend takes it), or says the budget is spent.
    fn hold(&self, n: usize) -> Result<Option<Held>, Refusal> {
        if n == 0 {
            return Ok(None);
        }
        let refused = || {
            self.shared.metrics.proxy_refused("body_bytes");
            Refusal::too_many(format!(
                "the agent of cluster {} already holds {} bytes of request bodies its cluster \
                 has not yet read (--cluster-proxy-body-bytes); try again later",
                self.shared.cluster, self.shared.body_bytes
            ))
        };
        let wanted = u32::try_from(n).map_err(|_| refused())?;
        let permit = self
            .shared
            .budget
            .clone()
            .try_acquire_many_owned(wanted)
            .map_err(|_| refused())?;
        self.shared
            .metrics
            .proxy_body_bytes
            .inc_by(i64::from(wanted));
        Ok(Some(Held {
            permit,
            gauge: self.shared.metrics.proxy_body_bytes.clone(),
        }))
    }

    /// Passes a chunk of the body on to the backend, holding its bytes of the budget until the
    /// backend takes it; a spent budget is the call's refusal.
    async fn feed(
        &mut self,
        feed: &mut upload::Feed,
        chunk: Bytes,
        recv: &mut RecvWindow,
    ) -> Result<Result<(), Refusal>, Stop> {
        let held = match self.hold(chunk.len()) {
            Ok(held) => held,
            Err(refusal) => return Ok(Err(refusal)),
        };
        self.pushed(feed.push(chunk, held), recv).await?;
        Ok(Ok(()))
    }

    /// Acts on what became of a chunk passed to the backend.
    async fn pushed(&mut self, pushed: upload::Pushed, recv: &mut RecvWindow) -> Result<(), Stop> {
        match pushed {
            upload::Pushed::Queued => Ok(()),
            // The backend reads no more: the chunk counts as consumed, so the hub is not kept
            // waiting for credit until the answer comes.
            upload::Pushed::Unread => match recv.consumed() {
                Some(credit) => self.send(Frame::Credit(credit)).await,
                None => Ok(()),
            },
            upload::Pushed::OverWindow => Err(Stop::Protocol(ProtocolError::Unexpected {
                frame: "data",
                detail: "beyond the request body's window",
            })),
        }
    }

    /// Answers with a whole (small) response, ignoring the window: a `Status` fits one chunk.
    async fn answer_whole(&mut self, response: ApiResponse) -> Result<(), Stop> {
        self.send(Frame::Response(TunnelResponse {
            status: u32::from(response.status.as_u16()),
            headers: vec![TunnelHeader {
                name: "content-type".into(),
                value: "application/json".into(),
            }],
        }))
        .await?;
        let mut body = response.body;
        while let Some(Ok(chunk)) = body.next().await {
            self.send(Frame::Data(chunk)).await?;
        }
        self.send(Frame::End).await
    }
}

/// The response head as the tunnel carries it (headers that are not text are left out).
fn response_head(response: &ApiResponse) -> TunnelResponse {
    TunnelResponse {
        status: u32::from(response.status.as_u16()),
        headers: response
            .headers
            .iter()
            .filter_map(|(n, v)| {
                Some(TunnelHeader {
                    name: n.as_str().to_string(),
                    value: v.to_str().ok()?.to_string(),
                })
            })
            .collect(),
    }
}

/// The next chunk the backend took of the body on its way (never, without one).
async fn taken(feed: &mut Option<upload::Feed>) -> Option<()> {
    match feed {
        Some(f) => f.taken.recv().await,
        None => std::future::pending().await,
    }
}

/// Takes a credit frame, the only frame the hub sends once the request is complete (pings and
/// cancels are handled by [`Call::next`]).
fn take_credit(send: &mut SendWindow, frame: Frame, when: &'static str) -> Result<(), Stop> {
    match frame {
        Frame::Credit(n) => send.credit(n).map_err(Stop::Protocol),
        other => Err(Stop::Protocol(ProtocolError::Unexpected {
            frame: other.name(),
            detail: when,
        })),
    }
}

/// The backend's request from the hub's, refusing what cannot be a Kubernetes request.
fn to_api_request(request: &TunnelRequest, body: RequestBody) -> Result<ApiRequest, String> {
    let method = http::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| format!("method {:?} is not an HTTP method", request.method))?;
    if !request.path.starts_with('/')
        || request.path.contains("/../")
        || request.path.ends_with("/..")
    {
        return Err(format!(
            "path {:?} is not an absolute API path",
            request.path
        ));
    }
    let mut headers = http::HeaderMap::new();
    for h in &request.headers {
        let name = h.name.to_ascii_lowercase();
        if name == "authorization" || name.starts_with("impersonate-") {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(&h.value),
        ) {
            headers.append(n, v);
        }
    }
    let (impersonate, bearer) = acting_as(request);
    Ok(ApiRequest {
        method,
        path: request.path.clone(),
        query: request.query.clone(),
        headers,
        impersonate,
        bearer,
        body,
    })
}

/// Whom the agent acts as for a call: the user the hub names, or the caller's
/// ManagedServiceAccount token — a caller with a token acts as that ServiceAccount, never as
/// someone it names.
fn acting_as(request: &TunnelRequest) -> (Option<Impersonation>, Option<Bearer>) {
    if request.bearer.is_empty() {
        let impersonate = request.impersonate.as_ref().map(|i| Impersonation {
            user: i.user.clone(),
            groups: i.groups.clone(),
        });
        (impersonate, None)
    } else {
        (None, Some(Bearer(request.bearer.clone())))
    }
}

mod session;
pub use session::{MAX_SESSIONS, SESSIONS_PER_CALLER};
#[cfg(test)]
mod tests;
mod upload;

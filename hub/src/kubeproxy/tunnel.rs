//! The hub's side of the cluster proxy's wire protocol ([`flotilla_bus::tunnel`]): opens calls
//! to agents and runs each one as a task that sends the request body within the agent's credit,
//! hands the response head and body to the HTTP server as they come, grants credit as the
//! client takes data, pings, and cancels the call when the client goes away, the agent falls
//! silent or breaks the protocol.
//!
//! One subscription per hub, `flotilla.kubeapiback.*.<hub token>`, feeds every call: a frame
//! goes to its call only when the stream is open *and* was opened for the cluster the subject
//! names, by `try_send` into the call's bounded mailbox — a spoke flooding a call gets it
//! cancelled, never a blocked dispatcher. A frame whose subject names a cluster with no open
//! call is dropped before it is decoded (one map lookup), so a spoke without calls costs the
//! dispatcher next to nothing however much it sends. A frame that carries a reply subject
//! (the spoke's own choice, kept by the stream import into the hub's account) is dropped before
//! anything else: nothing of the hub ever answers or acts on one.
//!
//! What one caller and one agent may take is bounded (issue 42): each identity holds at most
//! [`TunnelConfig::calls_per_identity`] calls at once, and the request-body bytes on their way
//! to one cluster's agent (read from clients, not yet answered) at most
//! [`TunnelConfig::body_bytes_per_cluster`]; past either the call is refused with a 429 saying
//! which.

use bytes::Bytes;
use dashmap::DashMap;
use flotilla_api::v1::{TunnelRequest, TunnelResponse};
use flotilla_bus::publish::{PublishError, Publisher};
use flotilla_bus::subjects;
use flotilla_bus::tunnel::{
    self, Frame, ProtocolError, Received, RecvWindow, SendWindow, SeqCheck, StreamId,
};
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

/// Source attribute of the hub's frames.
const SOURCE: &str = "flotilla-hub";

/// Settings of the hub's calls.
#[derive(Debug, Clone)]
pub struct TunnelConfig {
    /// How long the agent has to take a call (its first frame) before the call fails — an
    /// agent that is gone although its lease has not run out yet.
    pub open_timeout: Duration,
    /// Response data frames the agent may send ahead of the client (the window).
    pub window: u32,
    /// Largest event on the bus (NATS `max_payload`): chunks are cut below it.
    pub max_event_bytes: usize,
    /// How long one frame may take to be handed to NATS.
    pub send_timeout: Duration,
    /// Calls open at once, over every cluster; more are refused (503).
    pub max_calls: usize,
    /// Calls one identity (API token or ManagedServiceAccount) may have open at once, over
    /// every cluster; more are refused (429), so one token cannot take every slot.
    pub calls_per_identity: usize,
    /// Request-body bytes on their way to one cluster's agent at once (read from clients and
    /// sent, the call not yet answered), over every caller; a call whose body would go past it
    /// is refused (429). At least [`super::MAX_REQUEST_BODY`].
    pub body_bytes_per_cluster: usize,
    /// How long a client has to send its whole request body; a body still coming then is cut
    /// (408), so a writer that never ends its bodies holds its cluster's body budget no longer.
    pub body_deadline: Duration,
}

/// Default [`TunnelConfig::calls_per_identity`]: what one agent serves at once.
pub const DEFAULT_CALLS_PER_IDENTITY: usize = 256;
/// Default [`TunnelConfig::body_bytes_per_cluster`]: 32 MiB, ten bodies of the largest size
/// Kubernetes takes.
pub const DEFAULT_BODY_BYTES_PER_CLUSTER: usize = 32 << 20;
/// Default [`TunnelConfig::body_deadline`]: a 3 MiB body at 50 KiB/s.
pub const DEFAULT_BODY_DEADLINE: Duration = Duration::from_secs(60);

impl Default for TunnelConfig {
    fn default() -> Self {
        Self {
            open_timeout: Duration::from_secs(5),
            window: tunnel::DEFAULT_WINDOW,
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            send_timeout: Duration::from_secs(5),
            max_calls: 4096,
            calls_per_identity: DEFAULT_CALLS_PER_IDENTITY,
            body_bytes_per_cluster: DEFAULT_BODY_BYTES_PER_CLUSTER,
            body_deadline: DEFAULT_BODY_DEADLINE,
        }
    }
}

/// Why a call failed.
#[derive(Debug, Error)]
pub enum CallError {
    /// The agent did not take the call, or fell silent.
    #[error("the agent of cluster {cluster} did not answer within {after:?}")]
    Timeout {
        /// The cluster.
        cluster: String,
        /// How long the hub waited.
        after: Duration,
    },
    /// The agent cancelled the call.
    #[error("the agent of cluster {cluster} cancelled the call: {reason}")]
    Cancelled {
        /// The cluster.
        cluster: String,
        /// Its reason.
        reason: String,
    },
    /// The agent broke the protocol.
    #[error("the agent of cluster {cluster} broke the proxy protocol: {source}")]
    Protocol {
        /// The cluster.
        cluster: String,
        /// What it did.
        #[source]
        source: ProtocolError,
    },
    /// A frame could not be sent.
    #[error("sending to the agent of cluster {cluster}: {source}")]
    Send {
        /// The cluster.
        cluster: String,
        /// The bus error.
        #[source]
        source: PublishError,
    },
    /// The client's request body could not be read (or is over the limit).
    #[error("reading the request body: {0}")]
    RequestBody(#[source] super::BodyError),
    /// The hub is stopping.
    #[error("the hub is shutting down")]
    Shutdown,
    /// Too many calls are open.
    #[error("the hub already has {0} cluster-proxy calls open; try again later")]
    Busy(usize),
    /// The caller's share of calls is taken.
    #[error(
        "{caller:?} already has {limit} cluster-proxy calls open at this hub, its share \
         (--cluster-proxy-calls-per-identity); close some (watches, log follows) or try again later"
    )]
    IdentityBusy {
        /// Who.
        caller: String,
        /// The share.
        limit: usize,
    },
    /// The request-body bytes in flight to the cluster's agent are at their bound.
    #[error(
        "cluster {cluster} already has {limit} bytes of request bodies in flight through this \
         hub (--cluster-proxy-body-bytes-per-cluster); try again later"
    )]
    BodyBytes {
        /// The cluster.
        cluster: String,
        /// The bound.
        limit: usize,
    },
}

/// A body the hub streams (the client's request body).
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, super::BodyError>> + Send>>;

/// A call to make.
pub struct Outgoing {
    /// The cluster.
    pub cluster: String,
    /// The request head (`window`, `max_chunk` and `has_body` are set by the tunnel).
    pub request: TunnelRequest,
    /// The request body, if any.
    pub body: Option<ByteStream>,
}

/// The spoke's answer: its head, and its body as it comes.
pub struct Answer {
    /// Status and headers.
    pub head: TunnelResponse,
    /// The body; an `Err` item means the call broke off (the client sees a cut response).
    pub body: ByteStream,
}

struct Entry {
    cluster: Arc<str>,
    tx: mpsc::Sender<Received>,
}

struct Inner {
    publisher: Publisher,
    /// Every cluster's record: which subjects its agent listens on.
    inventory: crate::inventory::ClusterInventory,
    /// Open calls by identity (only identities with at least one).
    identities: DashMap<String, usize>,
    /// Each cluster's request-body budget, in bytes (made at its first call with a body).
    budgets: DashMap<Arc<str>, Arc<Semaphore>>,
    metrics: super::metrics::ProxyMetrics,
    token: String,
    calls: DashMap<StreamId, Entry>,
    /// Open calls by cluster (only clusters with at least one): what the dispatcher checks
    /// before decoding anything.
    clusters: DashMap<Arc<str>, usize>,
    config: TunnelConfig,
    max_chunk: u32,
    shutdown: watch::Receiver<bool>,
    /// Every call's task: owned here, reaped as calls are made, and awaited (bounded) when the
    /// dispatcher stops.
    tasks: std::sync::Mutex<JoinSet<()>>,
}

/// How long the dispatcher, stopping, waits for the calls' tasks (which end at `shutdown`)
/// before aborting them.
const CALLS_GRACE: Duration = Duration::from_secs(5);

/// The hub's open calls (cloneable handle).
#[derive(Clone)]
pub struct Tunnels {
    inner: Arc<Inner>,
}

impl Tunnels {
    /// How long a client has to send its whole request body ([`TunnelConfig::body_deadline`]).
    pub fn body_deadline(&self) -> Duration {
        self.inner.config.body_deadline
    }

    /// Subscribes to this hub's frames and starts dispatching them; the task ends at
    /// `shutdown`. Each call's frames go on its cluster's wire, from `inventory`.
    pub async fn start(
        nats: &async_nats::Client,
        inventory: crate::inventory::ClusterInventory,
        config: TunnelConfig,
        metrics: super::metrics::ProxyMetrics,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, JoinHandle<()>), async_nats::SubscribeError> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let sub = nats.subscribe(subjects::kubeapi_back_to(&token)).await?;
        let inner = Arc::new(Inner {
            publisher: Publisher::new(nats.clone(), config.max_event_bytes, config.send_timeout),
            inventory,
            identities: DashMap::new(),
            budgets: DashMap::new(),
            metrics,
            token,
            calls: DashMap::new(),
            clusters: DashMap::new(),
            max_chunk: tunnel::max_chunk_for(config.max_event_bytes),
            config,
            shutdown: shutdown.clone(),
            tasks: std::sync::Mutex::new(JoinSet::new()),
        });
        let task = tokio::spawn(
            dispatch(inner.clone(), sub, shutdown)
                .instrument(tracing::info_span!("kubeproxy_dispatch")),
        );
        Ok((Self { inner }, task))
    }

    /// Calls open now.
    pub fn open_calls(&self) -> usize {
        self.inner.calls.len()
    }

    /// Makes a call: returns once the agent has sent the response head.
    pub async fn call(&self, out: Outgoing) -> Result<Answer, CallError> {
        if self.inner.calls.len() >= self.inner.config.max_calls {
            return Err(CallError::Busy(self.inner.config.max_calls));
        }
        let who = out
            .request
            .caller
            .as_ref()
            .map_or_else(String::new, |c| c.name.clone());
        let slot = IdentitySlot::take(&self.inner, who)?;
        let budget = out.body.as_ref().map(|_| self.inner.budget(&out.cluster));
        let stream = StreamId::random();
        let capacity = self.inner.config.window as usize + 16;
        let (tx, rx) = mpsc::channel(capacity);
        self.inner.open(
            stream.clone(),
            Entry {
                cluster: out.cluster.as_str().into(),
                tx,
            },
        );
        let (head_tx, head_rx) = oneshot::channel();
        // The window's data, and room for the error that breaks a body off (the client must
        // see a cut response, never a complete-looking short one).
        let (body_tx, body_rx) = mpsc::channel(self.inner.config.window as usize + 1);
        let (consumed_tx, consumed_rx) = mpsc::unbounded_channel();
        let span =
            tracing::debug_span!("kubeproxy_call", cluster.name = %out.cluster, stream = %stream);
        let call = Call {
            subject: self
                .inner
                .inventory
                .wire(&out.cluster)
                .kubeapi(&out.cluster),
            inner: self.inner.clone(),
            stream,
            cluster: out.cluster,
            seq: 0,
            frames: rx,
            head: Some(head_tx),
            body: body_tx,
            consumed: consumed_rx,
            _slot: slot,
            budget,
            body_bytes: None,
        };
        {
            let mut tasks = self.inner.tasks.lock().expect("call tasks lock");
            while tasks.try_join_next().is_some() {}
            tasks.spawn(call.run(out.request, out.body).instrument(span));
        }
        let head = head_rx.await.map_err(|_| CallError::Shutdown)??;
        let body =
            futures::stream::unfold((body_rx, consumed_tx), |(mut rx, consumed)| async move {
                let item = rx.recv().await?;
                if item.is_ok() {
                    let _ = consumed.send(());
                }
                Some((item, (rx, consumed)))
            });
        Ok(Answer {
            head,
            body: Box::pin(body),
        })
    }
}

impl Inner {
    /// Registers a call.
    fn open(&self, stream: StreamId, entry: Entry) {
        *self.clusters.entry(entry.cluster.clone()).or_insert(0) += 1;
        if let Some(old) = self.calls.insert(stream, entry) {
            // A random id never repeats; were it to, the count stays true.
            self.closed(&old.cluster);
        }
    }

    /// Forgets a call (once, however many times it is asked).
    fn forget(&self, stream: &StreamId) {
        if let Some((_, entry)) = self.calls.remove(stream) {
            self.closed(&entry.cluster);
        }
    }

    fn closed(&self, cluster: &Arc<str>) {
        if let dashmap::Entry::Occupied(mut open) = self.clusters.entry(cluster.clone()) {
            *open.get_mut() -= 1;
            if *open.get() == 0 {
                open.remove();
            }
        }
    }

    /// `cluster`'s request-body budget.
    fn budget(&self, cluster: &str) -> Arc<Semaphore> {
        if let Some(b) = self.budgets.get(cluster) {
            return b.clone();
        }
        self.budgets
            .entry(cluster.into())
            .or_insert_with(|| {
                Arc::new(Semaphore::new(
                    self.config
                        .body_bytes_per_cluster
                        .min(Semaphore::MAX_PERMITS),
                ))
            })
            .clone()
    }

    /// Whether `cluster` has an open call (a frame for it may be wanted).
    fn wants(&self, cluster: &str) -> bool {
        self.clusters.contains_key(cluster)
    }
}

/// One open call of an identity, given back when dropped.
struct IdentitySlot {
    inner: Arc<Inner>,
    who: String,
}

impl IdentitySlot {
    /// Takes a slot of `who`'s share, or says it is taken.
    fn take(inner: &Arc<Inner>, who: String) -> Result<Self, CallError> {
        let limit = inner.config.calls_per_identity;
        let mut open = inner.identities.entry(who.clone()).or_insert(0);
        if *open >= limit {
            return Err(CallError::IdentityBusy { caller: who, limit });
        }
        *open += 1;
        drop(open);
        Ok(Self {
            inner: inner.clone(),
            who,
        })
    }
}

impl Drop for IdentitySlot {
    fn drop(&mut self) {
        if let dashmap::Entry::Occupied(mut open) = self.inner.identities.entry(self.who.clone()) {
            *open.get_mut() -= 1;
            if *open.get() == 0 {
                open.remove();
            }
        }
    }
}

/// Request-body bytes a call holds of its cluster's budget (and shows in the gauge) until the
/// agent answers.
struct BodyBytes {
    permit: OwnedSemaphorePermit,
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Drop for BodyBytes {
    fn drop(&mut self) {
        self.gauge
            .dec_by(i64::try_from(self.permit.num_permits()).unwrap_or(i64::MAX));
    }
}

/// Routes each frame to its call.
async fn dispatch(
    inner: Arc<Inner>,
    mut sub: async_nats::Subscriber,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let msg = tokio::select! {
            msg = sub.next() => match msg {
                Some(m) => m,
                None => break,
            },
            _ = shutdown.changed() => break,
        };
        // The spoke chose it (a stream import keeps it): never answered, never read further.
        if msg.reply.is_some() {
            inner.metrics.dropped("reply_subject");
            continue;
        }
        let Some(cluster) = subjects::kubeapi_back_cluster(msg.subject.as_str(), &inner.token)
        else {
            inner.metrics.dropped("subject");
            continue;
        };
        // Before any decoding: a cluster with no open call has nothing to say.
        if !inner.wants(cluster) {
            inner.metrics.dropped("no_call");
            continue;
        }
        let received = match tunnel::decode(
            &msg.payload,
            inner.config.max_event_bytes,
            &tunnel::up_type(),
            cluster,
            inner.max_chunk as usize,
        ) {
            Ok(r) => r,
            Err(e) => {
                inner.metrics.dropped("decode");
                tracing::debug!(cluster.name = %cluster, error = %e, "cluster-proxy frame dropped");
                continue;
            }
        };
        let stream = received.stream.clone();
        let flooded = match inner.calls.get(&stream) {
            Some(entry) if &*entry.cluster == cluster => entry.tx.try_send(received).is_err(),
            Some(_) => {
                inner.metrics.dropped("other_cluster");
                tracing::warn!(cluster.name = %cluster, "cluster-proxy frame for another cluster's call dropped");
                false
            }
            None => {
                inner.metrics.dropped("unknown_stream");
                false
            }
        };
        if flooded {
            inner.metrics.dropped("over_credit");
            // Over its credit (or the call just ended): the call sees its mailbox closed.
            inner.forget(&stream);
        }
    }
    // The calls end at the same shutdown (or with their frames gone): wait for them.
    let mut tasks = std::mem::take(&mut *inner.tasks.lock().expect("call tasks lock"));
    let ended = tokio::time::timeout(CALLS_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if ended.is_err() {
        tracing::warn!(
            calls = tasks.len(),
            "cluster-proxy calls did not end in time; aborting them"
        );
        tasks.abort_all();
    }
}

/// Where a call is in its life.
struct Call {
    inner: Arc<Inner>,
    stream: StreamId,
    cluster: String,
    /// Where its frames go (the cluster's wire, when the call began).
    subject: String,
    seq: u64,
    frames: mpsc::Receiver<Received>,
    /// The response head's receiver, until the head came.
    head: Option<oneshot::Sender<Result<TunnelResponse, CallError>>>,
    body: mpsc::Sender<Result<Bytes, super::BodyError>>,
    consumed: mpsc::UnboundedReceiver<()>,
    /// The caller's slot, given back when the call ends.
    _slot: IdentitySlot,
    /// The cluster's request-body budget (calls with a body).
    budget: Option<Arc<Semaphore>>,
    /// What the call holds of it: from the body's first byte until the agent answers.
    body_bytes: Option<BodyBytes>,
}

/// How a call ended.
enum End {
    /// The response is complete.
    Done,
    /// The client went away.
    ClientGone,
    /// It failed.
    Failed(CallError),
}

impl Call {
    async fn run(mut self, mut request: TunnelRequest, body: Option<ByteStream>) {
        request.window = self.inner.config.window;
        request.max_chunk = self.inner.max_chunk;
        request.has_body = body.is_some();
        request.hub = self.inner.token.clone();
        self.inner.metrics.open_calls.inc();
        let end = match self.send(Frame::Request(Box::new(request))).await {
            Ok(()) => self.serve(body).await,
            Err(e) => End::Failed(e),
        };
        self.inner.forget(&self.stream);
        self.inner.metrics.open_calls.dec();
        match end {
            End::Done => {}
            End::ClientGone => {
                tracing::debug!("client went away; cancelling the call");
                let _ = self
                    .send(Frame::Cancel("the client went away".into()))
                    .await;
            }
            End::Failed(e) => {
                tracing::debug!(error = %e, "cluster-proxy call failed");
                if !matches!(e, CallError::Cancelled { .. } | CallError::Send { .. }) {
                    let _ = self.send(Frame::Cancel(e.to_string())).await;
                }
                match self.head.take() {
                    Some(head) => {
                        let _ = head.send(Err(e));
                    }
                    None => {
                        let _ = self.body.try_send(Err(super::BodyError::Call(Box::new(e))));
                    }
                }
            }
        }
    }

    async fn send(&mut self, frame: Frame) -> Result<(), CallError> {
        let event = tunnel::encode(
            tunnel::down_type(),
            SOURCE,
            &self.cluster,
            &self.stream,
            self.seq,
            frame,
        );
        self.seq += 1;
        self.inner
            .publisher
            .publish(self.subject.clone(), &event)
            .await
            .map_err(|source| CallError::Send {
                cluster: self.cluster.clone(),
                source,
            })
    }

    /// Takes `n` more bytes of the cluster's request-body budget, or says it is spent.
    fn hold(&mut self, n: usize) -> Result<(), CallError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        let refused = || CallError::BodyBytes {
            cluster: self.cluster.clone(),
            limit: self.inner.config.body_bytes_per_cluster,
        };
        let wanted = u32::try_from(n).map_err(|_| refused())?;
        let permit = budget
            .clone()
            .try_acquire_many_owned(wanted)
            .map_err(|_| refused())?;
        self.inner
            .metrics
            .body_bytes_in_flight
            .inc_by(i64::from(wanted));
        match &mut self.body_bytes {
            Some(held) => held.permit.merge(permit),
            None => {
                self.body_bytes = Some(BodyBytes {
                    permit,
                    gauge: self.inner.metrics.body_bytes_in_flight.clone(),
                });
            }
        }
        Ok(())
    }

    fn protocol(&self, source: ProtocolError) -> End {
        End::Failed(CallError::Protocol {
            cluster: self.cluster.clone(),
            source,
        })
    }

    async fn serve(&mut self, body: Option<ByteStream>) -> End {
        let mut shutdown = self.inner.shutdown.clone();
        let mut flow = Flow {
            seq_in: SeqCheck::default(),
            recv: RecvWindow::new(self.inner.config.window),
            // Nothing may be sent before the agent's first credit.
            send: SendWindow::new(0),
            body,
            pending: Bytes::new(),
        };
        let mut heard = false;
        let mut deadline = Instant::now() + self.inner.config.open_timeout;
        let mut keepalive =
            tokio::time::interval_at(Instant::now() + tunnel::KEEPALIVE, tunnel::KEEPALIVE);
        let max_chunk = self.inner.max_chunk as usize;
        loop {
            // The request body, within the agent's credit.
            while !flow.pending.is_empty() && flow.send.may_send() {
                let piece = flow.pending.split_to(flow.pending.len().min(max_chunk));
                flow.send.sent();
                if let Err(e) = self.send(Frame::Data(piece)).await {
                    return End::Failed(e);
                }
            }
            let want_body = flow.pending.is_empty() && flow.send.may_send() && flow.body.is_some();
            let ended = tokio::select! {
                frame = self.frames.recv() => {
                    let Some(r) = frame else {
                        return self.protocol(ProtocolError::Unexpected {
                            frame: "data",
                            detail: "beyond the call's mailbox (the agent ignored its credit)",
                        });
                    };
                    heard = true;
                    deadline = Instant::now() + tunnel::idle_timeout();
                    self.on_frame(r, &mut flow)
                }
                Some(()) = self.consumed.recv() => match flow.recv.consumed() {
                    Some(credit) => self.send(Frame::Credit(credit)).await.err().map(End::Failed),
                    None => None,
                },
                chunk = next(&mut flow.body), if want_body => self.on_body(chunk, &mut flow).await,
                _ = keepalive.tick() => self.send(Frame::Ping).await.err().map(End::Failed),
                () = tokio::time::sleep_until(deadline) => {
                    let after = if heard {
                        tunnel::idle_timeout()
                    } else {
                        self.inner.config.open_timeout
                    };
                    Some(End::Failed(CallError::Timeout {
                        cluster: self.cluster.clone(),
                        after,
                    }))
                }
                () = self.body.closed(), if self.head.is_none() => Some(End::ClientGone),
                // The client gave up before the spoke answered (a slow API server).
                () = head_closed(&mut self.head), if self.head.is_some() => Some(End::ClientGone),
                _ = shutdown.changed() => Some(End::Failed(CallError::Shutdown)),
            };
            if let Some(end) = ended {
                return end;
            }
        }
    }

    /// Takes one frame from the agent (in sequence): credit for the request body, the response
    /// head, response data within the window, the end, a cancel. `Some` when the call ends.
    fn on_frame(&mut self, r: Received, flow: &mut Flow) -> Option<End> {
        if let Err(e) = flow.seq_in.check(r.seq) {
            return Some(self.protocol(e));
        }
        let unexpected = |frame, detail| ProtocolError::Unexpected { frame, detail };
        let name = r.frame.name();
        match r.frame {
            Frame::Credit(n) => flow.send.credit(n).err().map(|e| self.protocol(e)),
            Frame::Response(head) => {
                let Some(tx) = self.head.take() else {
                    return Some(self.protocol(unexpected("response", "after the response head")));
                };
                // The agent is done with the body: what is left of it is not sent (an API
                // server that answered before the body ended reads no more of it).
                self.body_bytes = None;
                flow.body = None;
                flow.pending = Bytes::new();
                tx.send(Ok(head)).is_err().then_some(End::ClientGone)
            }
            Frame::Data(_) if self.head.is_some() => {
                Some(self.protocol(unexpected("data", "before the response head")))
            }
            Frame::Data(chunk) => {
                if let Err(e) = flow.recv.received() {
                    return Some(self.protocol(e));
                }
                match self.body.try_send(Ok(chunk)) {
                    Ok(()) => None,
                    Err(mpsc::error::TrySendError::Closed(_)) => Some(End::ClientGone),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        Some(self.protocol(unexpected("data", "beyond the window")))
                    }
                }
            }
            Frame::End if self.head.is_none() => Some(End::Done),
            Frame::End => Some(self.protocol(unexpected("end", "before the response head"))),
            Frame::Cancel(reason) => Some(End::Failed(CallError::Cancelled {
                cluster: self.cluster.clone(),
                reason,
            })),
            Frame::Ping => None,
            Frame::Request(_) => Some(self.protocol(unexpected("request", "from an agent"))),
            Frame::Chunk { .. } | Frame::Close(_) | Frame::Resize { .. } | Frame::Exit(_) => {
                Some(self.protocol(unexpected(name, "in a call that is not a session")))
            }
        }
    }

    /// Takes what the client's body gave: a chunk to send (held against the cluster's budget),
    /// its error, or its end (told to the agent). `Some` when the call ends.
    async fn on_body(
        &mut self,
        chunk: Option<Result<Bytes, super::BodyError>>,
        flow: &mut Flow,
    ) -> Option<End> {
        match chunk {
            Some(Ok(bytes)) => {
                if let Err(e) = self.hold(bytes.len()) {
                    return Some(End::Failed(e));
                }
                flow.pending = bytes;
                None
            }
            Some(Err(e)) => Some(End::Failed(CallError::RequestBody(e))),
            None => {
                flow.body = None;
                self.send(Frame::End).await.err().map(End::Failed)
            }
        }
    }
}

/// A call's two directions while it is served.
struct Flow {
    /// The agent's frames come in sequence.
    seq_in: SeqCheck,
    /// Response data received and consumed: the credit the agent is given.
    recv: RecvWindow,
    /// Request data sent within the agent's credit.
    send: SendWindow,
    /// The client's body, until it ended or the agent answered.
    body: Option<ByteStream>,
    /// Read from the body, not yet sent.
    pending: Bytes,
}

/// Resolves when the HTTP handler stopped waiting for the response head.
async fn head_closed(head: &mut Option<oneshot::Sender<Result<TunnelResponse, CallError>>>) {
    match head {
        Some(h) => h.closed().await,
        None => std::future::pending().await,
    }
}

async fn next(body: &mut Option<ByteStream>) -> Option<Result<Bytes, super::BodyError>> {
    match body {
        Some(b) => b.next().await,
        None => None,
    }
}

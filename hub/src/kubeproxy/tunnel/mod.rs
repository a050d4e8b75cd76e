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
//!
//! [`call`] runs one call (its task); [`session`] one exec, attach or port-forward session
//! (full duplex once the agent answered 101, bounded and logged by [`super::streams`]); this
//! module opens calls, dispatches frames and bounds what callers take.

mod call;
pub mod session;

pub use session::{
    Opened, SessionError, SessionInput, SessionIo, SessionOutgoing, SessionOutput, SessionOutputs,
};

use bytes::Bytes;
use call::Call;
use dashmap::DashMap;
use flotilla_api::v1::{TunnelRequest, TunnelResponse};
use flotilla_bus::publish::{PublishError, Publisher};
use flotilla_bus::subjects;
use flotilla_bus::tunnel::{self, Frame, ProtocolError, Received, StreamId};
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

/// Source attribute of the hub's frames.
const SOURCE: &str = "flotilla-hub";

/// Settings of the hub's calls.
#[derive(Debug, Clone)]
pub struct TunnelConfig {
    /// How long the agent has to take a call (its first frame) before the call fails — an
    /// agent that is gone although its lease has not run out yet.
    pub open_timeout: Duration,
    /// How long the agent has to answer a session (`101`, or its refusal) once it took it:
    /// the upgrade through its API server. Past it the session fails, so a spoke that pings
    /// but never answers holds its caller's place and kubectl no longer.
    pub session_answer: Duration,
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
    /// What exec, attach and port-forward sessions may take (they also count as calls).
    pub sessions: super::streams::Limits,
    /// How often a session's token that can be revoked (an OIDC ID token, a
    /// ManagedServiceAccount token) is checked again while the session runs; its expiry is
    /// kept to the second regardless ([`super::credential`]).
    pub credential_recheck: Duration,
}

/// Default [`TunnelConfig::session_answer`]: twice the kubelet's wait for a session's streams.
pub const DEFAULT_SESSION_ANSWER: Duration = Duration::from_secs(60);
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
            session_answer: DEFAULT_SESSION_ANSWER,
            window: tunnel::DEFAULT_WINDOW,
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            send_timeout: Duration::from_secs(5),
            max_calls: 4096,
            calls_per_identity: DEFAULT_CALLS_PER_IDENTITY,
            body_bytes_per_cluster: DEFAULT_BODY_BYTES_PER_CLUSTER,
            body_deadline: DEFAULT_BODY_DEADLINE,
            sessions: super::streams::Limits::default(),
            credential_recheck: super::credential::DEFAULT_RECHECK,
        }
    }
}

impl CallError {
    /// The agent's cancel, its reason made one line of plain text: it reaches the client's
    /// terminal (the exit `Status` kubectl prints, a port-forward's error stream) and the
    /// log, and a spoke must drive neither (no escape sequences, no forged lines).
    fn cancelled(cluster: &str, reason: &str) -> Self {
        CallError::Cancelled {
            cluster: cluster.to_owned(),
            reason: reason
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
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
    /// The open sessions and what each identity holds of them.
    sessions: Arc<super::streams::Ledger>,
    /// The spoke's recent refusals of exec and attach upgrades.
    refusals: super::refusals::Recent,
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
    /// The spoke's recent refusals of exec and attach upgrades ([`super::refusals`]).
    pub fn refusals(&self) -> &super::refusals::Recent {
        &self.inner.refusals
    }

    /// How often a session's token is checked again ([`TunnelConfig::credential_recheck`]).
    pub fn credential_recheck(&self) -> Duration {
        self.inner.config.credential_recheck
    }

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
            sessions: Arc::default(),
            refusals: super::refusals::Recent::default(),
        });
        let task = tokio::spawn(
            dispatch(inner.clone(), sub, shutdown)
                .instrument(tracing::info_span!("kubeproxy_dispatch")),
        );
        Ok((Self { inner }, task))
    }

    /// Calls open now (sessions included).
    pub fn open_calls(&self) -> usize {
        self.inner.calls.len()
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.inner.sessions.open()
    }

    /// Runs a session's protocol task (a kubectl WebSocket or SPDY connection) in the set the
    /// dispatcher owns, so it is waited for (and aborted past the grace) when the hub stops.
    pub fn spawn_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.spawn(task);
    }

    /// Turns `true` when the hub stops: a protocol task with no session open ends then.
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.clone()
    }

    /// Makes a call: returns once the agent has sent the response head.
    pub async fn call(&self, out: Outgoing) -> Result<Answer, CallError> {
        let slot = self.inner.admit(caller_name(&out.request))?;
        let budget = out.body.as_ref().map(|_| self.inner.budget(&out.cluster));
        let (stream, rx) = self.inner.register(&out.cluster);
        let (head_tx, head_rx) = oneshot::channel();
        // The window's data, and room for the error that breaks a body off (the client must
        // see a cut response, never a complete-looking short one).
        let (body_tx, body_rx) = mpsc::channel(self.inner.config.window as usize + 1);
        let (consumed_tx, consumed_rx) = mpsc::unbounded_channel();
        let span =
            tracing::debug_span!("kubeproxy_call", cluster.name = %out.cluster, stream = %stream);
        let call = Call {
            subject: self.inner.subject(&out.cluster),
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
        self.inner
            .spawn(call.run(out.request, out.body).instrument(span));
        let head = head_rx.await.map_err(|_| CallError::Shutdown)??;
        Ok(Answer {
            head,
            body: answer_body(body_rx, consumed_tx),
        })
    }
}

/// Who makes a call (the name the hub authenticated; empty on an open hub's anonymous call).
fn caller_name(request: &TunnelRequest) -> String {
    request
        .caller
        .as_ref()
        .map_or_else(String::new, |c| c.name.clone())
}

/// A response body as the HTTP server streams it: the call's items, each one taken telling
/// the call (which credits the agent for it).
fn answer_body(
    body: mpsc::Receiver<Result<Bytes, super::BodyError>>,
    consumed: mpsc::UnboundedSender<()>,
) -> ByteStream {
    Box::pin(futures::stream::unfold(
        (body, consumed),
        |(mut rx, consumed)| async move {
            let item = rx.recv().await?;
            if item.is_ok() {
                let _ = consumed.send(());
            }
            Some((item, (rx, consumed)))
        },
    ))
}

impl Inner {
    /// Takes one more call of `who`: within the hub's calls and the identity's share.
    fn admit(self: &Arc<Self>, who: String) -> Result<IdentitySlot, CallError> {
        if self.calls.len() >= self.config.max_calls {
            return Err(CallError::Busy(self.config.max_calls));
        }
        IdentitySlot::take(self, who)
    }

    /// A new call of `cluster`, registered for the dispatcher: its id and its mailbox.
    fn register(&self, cluster: &str) -> (StreamId, mpsc::Receiver<Received>) {
        let stream = StreamId::random();
        let (tx, rx) = mpsc::channel(self.config.window as usize + 16);
        self.open(
            stream.clone(),
            Entry {
                cluster: cluster.into(),
                tx,
            },
        );
        (stream, rx)
    }

    /// Where a call of `cluster` sends its frames (its agent's wire, when the call begins).
    fn subject(&self, cluster: &str) -> String {
        self.inventory.wire(cluster).kubeapi(cluster)
    }

    /// Spawns a call's task into the set the dispatcher owns (reaping those that ended).
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().expect("call tasks lock");
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }

    /// Sends frame `seq` of `stream` to `cluster`'s agent on `subject`, and counts it.
    async fn send(
        &self,
        cluster: &str,
        subject: &str,
        stream: &StreamId,
        seq: &mut u64,
        frame: Frame,
    ) -> Result<(), CallError> {
        let event = tunnel::encode(tunnel::down_type(), SOURCE, cluster, stream, *seq, frame);
        *seq += 1;
        self.publisher
            .publish(subject.to_string(), &event)
            .await
            .map_err(|source| CallError::Send {
                cluster: cluster.to_string(),
                source,
            })
    }

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

#[cfg(test)]
mod tests {
    use super::CallError;

    #[test]
    fn an_agents_cancel_reason_reaches_no_terminal_and_forges_no_log_line() {
        let e = CallError::cancelled("edge-1", "gone\x1b]52;c;aGk=\x07\nINFO forged\r");
        let text = e.to_string();
        assert_eq!(
            text,
            "the agent of cluster edge-1 cancelled the call: gone ]52;c;aGk=  INFO forged "
        );
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }
}

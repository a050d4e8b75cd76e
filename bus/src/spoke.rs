//! The agent's one subscription (I/O; which subject is what is [`subjects::Inbound`], pure).
//!
//! An agent of the prefix wire subscribes once, to `flotilla.to.<cluster>.>`, and one demux
//! task routes what arrives: specs, proxied reads and cluster-proxy frames to bounded channels
//! ([`Feeds`]) that their consumers read, and answers to the agent's own calls — registration,
//! resync, MirrorPeer and add-on credential requests, the JetStream acknowledgements of its
//! status publishes — to the call waiting for them ([`Spoke::request`], through a
//! [`crate::publish::Publisher`] made [`with_spoke`](crate::publish::Publisher::with_spoke)).
//! async-nats then never opens its muxed inbox (one more subscription) on the agent's
//! connection. An agent of the previous wire reads the same [`Feeds`] over its three
//! subscriptions ([`Feeds::previous`]) and asks through async-nats as before.
//!
//! NATS tells a requester that nobody listens with a status-503 message on the request's reply
//! subject (the client announces headers and no-responders in its CONNECT): a call reads it as
//! [`RequestErrorKind::NoResponders`] at once, as async-nats does. An answer that comes after
//! its call gave up, or names no call, is dropped; the table of calls is bounded
//! ([`Capacities::calls`]).

use crate::subjects::{self, Inbound};
use async_nats::{
    Client, HeaderMap, Message, RequestError, RequestErrorKind, StatusCode, SubscribeError,
    Subscriber,
};
use bytes::Bytes;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How many messages of each kind wait for their consumer, and how many calls wait for their
/// answer, at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacities {
    /// Spec events waiting for the agent's registration loop (past it a spec is dropped and the
    /// agent resyncs, as when the client drops messages of a full subscription).
    pub spec: usize,
    /// Proxied reads waiting (past it the hub's call times out and is asked again).
    pub proxy: usize,
    /// Cluster-proxy frames waiting for the agent's cluster-proxy server.
    pub kubeapi: usize,
    /// The agent's own calls waiting for an answer: past it a call fails at once.
    pub calls: usize,
}

impl Default for Capacities {
    fn default() -> Self {
        Self {
            spec: 1024,
            proxy: 64,
            kubeapi: 1024,
            calls: 1024,
        }
    }
}

/// The agent's side of its one subscription: makes calls whose answers the demux routes back.
/// Cheap to clone; the demux runs until its [`Demux`] is stopped or dropped.
#[derive(Clone, Debug)]
pub struct Spoke {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    cluster: String,
    /// 128 random bits at the head of every token: a late answer to an earlier spoke of the
    /// cluster never completes a new call, and nobody who cannot read this prefix can guess a
    /// waiting call's token (in secure mode anyone may name any reply subject in a request,
    /// and the server delivers the hub's answer there).
    salt: String,
    next: AtomicU64,
    calls: Mutex<HashMap<String, oneshot::Sender<Message>>>,
    max_calls: usize,
    /// Answers that came when no call waited for them (late, or made up).
    unclaimed: AtomicU64,
    /// Messages the demux has routed (or answered) so far.
    routed: AtomicU64,
    /// Calls timed out in a row with nothing routed meanwhile ([`DEAF_AFTER`]).
    timeouts: AtomicU32,
    /// `routed` when the subscription was last taken for deaf (the demux checks that nothing
    /// came since before making it again).
    routed_when_deaf: AtomicU64,
    /// Wakes the demux to make the subscription again (a deaf one).
    resubscribe: Notify,
}

/// Calls timed out in a row, with not one message of any kind routed meanwhile, after which
/// the subscription is taken for deaf and made again. Acknowledgements of the JetStream server
/// come on it too, so a slow or stopped hub alone never makes it look deaf; a lost interest on
/// the way does (a leaf node that did not send it upstream again after a reconnect is a known
/// class of nats-server defect): the agent's publishes still reach the hub — its leases keep
/// the cluster Available — while nothing the hub sends reaches it, silently.
pub const DEAF_AFTER: u32 = 6;

/// A deaf subscription is made again at most this often.
pub const RESUBSCRIBE_SPACING: Duration = Duration::from_secs(300);

/// The messages of one kind the hub sends an agent, in order.
#[derive(Debug)]
pub struct Feed(Source);

#[derive(Debug)]
enum Source {
    /// Routed by the demux (prefix wire). Boxed: an idle agent's channel then holds a block of
    /// pointers, not of messages.
    Routed(mpsc::Receiver<Box<Message>>),
    /// A subscription of its own (previous wire), made again if it ends.
    Subscribed {
        client: Client,
        subject: String,
        sub: Subscriber,
    },
}

impl Feed {
    /// A subscription of its own to `subject` (the previous wire), sent to the server before
    /// anything the agent sends after this returns; tried again every second until the client
    /// takes it.
    pub async fn subscribe(client: &Client, subject: String) -> Self {
        let sub = subscribe(client, &subject).await;
        Self(Source::Subscribed {
            client: client.clone(),
            subject,
            sub,
        })
    }

    /// The next message. Never resolves once the demux has stopped (the agent is stopping); a
    /// subscription of its own that ends is made again.
    pub async fn next(&mut self) -> Message {
        match &mut self.0 {
            Source::Routed(rx) => match rx.recv().await {
                Some(m) => *m,
                None => std::future::pending().await,
            },
            Source::Subscribed {
                client,
                subject,
                sub,
            } => loop {
                if let Some(m) = sub.next().await {
                    return m;
                }
                tracing::warn!(subject = %subject, "subscription closed; subscribing again");
                *sub = subscribe(client, subject).await;
            },
        }
    }
}

/// What the hub sends an agent, by kind.
#[derive(Debug)]
pub struct Feeds {
    /// Spec events.
    pub spec: Feed,
    /// Proxied reads (requests).
    pub proxy: Feed,
    /// Cluster-proxy frames (`None`: the agent serves no cluster proxy).
    pub kubeapi: Option<Feed>,
    /// Told when the demux dropped a spec at a full channel.
    pub dropped: Dropped,
}

/// Says when the demux dropped a spec event at a full channel (the agent then resyncs, as when
/// the client drops messages of a full subscription).
#[derive(Debug)]
pub struct Dropped(Option<Arc<Notify>>);

impl Dropped {
    /// Resolves when a spec was dropped since the last time (never on the previous wire,
    /// where the client's slow-consumer event says it).
    pub async fn notified(&self) {
        match &self.0 {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl Feeds {
    /// The previous wire's three subscriptions (`flotilla.spec.<c>`, `flotilla.proxy.<c>`, and
    /// `flotilla.kubeapi.<c>` when `kubeapi`), each sent to the server before the agent's first
    /// request (a notification sent right after it must not be missed). Each is tried again
    /// every second until the client takes it.
    pub async fn previous(client: &Client, cluster: &str, kubeapi: bool) -> Self {
        let kubeapi = match kubeapi {
            true => Some(Feed::subscribe(client, subjects::kubeapi(cluster)).await),
            false => None,
        };
        Self {
            spec: Feed::subscribe(client, subjects::spec(cluster)).await,
            proxy: Feed::subscribe(client, subjects::proxy(cluster)).await,
            kubeapi,
            dropped: Dropped(None),
        }
    }
}

/// Subscribes to `subject`, trying again every second until the client takes it.
async fn subscribe(client: &Client, subject: &str) -> Subscriber {
    loop {
        match client.subscribe(subject.to_string()).await {
            Ok(s) => return s,
            Err(e) => {
                tracing::warn!(error = %e, subject, "subscribing failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The demux task: its owner stops it ([`Demux::stop`]) or drops it (which stops it too); the
/// subscription ends with it.
#[derive(Debug)]
pub struct Demux {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Demux {
    /// Stops the task and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Where the demux sends each kind.
struct Routes {
    spec: mpsc::Sender<Box<Message>>,
    proxy: mpsc::Sender<Box<Message>>,
    kubeapi: mpsc::Sender<Box<Message>>,
    dropped: Arc<Notify>,
}

impl Spoke {
    /// Subscribes to `flotilla.to.<cluster>.>` (the subscription goes to the server before
    /// anything the agent sends after this returns, so no answer to its first request is lost)
    /// and starts the demux in a `spoke` span. `kubeapi`: whether cluster-proxy frames have a
    /// consumer (without one they are dropped).
    pub async fn start(
        client: &Client,
        cluster: &str,
        kubeapi: bool,
        capacities: Capacities,
    ) -> Result<(Self, Feeds, Demux), SubscribeError> {
        let sub = client.subscribe(subjects::to_all(cluster)).await?;
        let inner = Arc::new(Inner {
            client: client.clone(),
            cluster: cluster.to_string(),
            salt: uuid::Uuid::new_v4().simple().to_string(),
            next: AtomicU64::new(0),
            calls: Mutex::new(HashMap::new()),
            max_calls: capacities.calls,
            unclaimed: AtomicU64::new(0),
            routed: AtomicU64::new(0),
            timeouts: AtomicU32::new(0),
            routed_when_deaf: AtomicU64::new(0),
            resubscribe: Notify::new(),
        });
        let (spec_tx, spec_rx) = mpsc::channel(capacities.spec.max(1));
        let (proxy_tx, proxy_rx) = mpsc::channel(capacities.proxy.max(1));
        let (kubeapi_tx, kubeapi_rx) = mpsc::channel(capacities.kubeapi.max(1));
        let dropped = Arc::new(Notify::new());
        let routes = Routes {
            spec: spec_tx,
            proxy: proxy_tx,
            kubeapi: kubeapi_tx,
            dropped: dropped.clone(),
        };
        let feeds = Feeds {
            spec: Feed(Source::Routed(spec_rx)),
            proxy: Feed(Source::Routed(proxy_rx)),
            kubeapi: kubeapi.then_some(Feed(Source::Routed(kubeapi_rx))),
            dropped: Dropped(Some(dropped)),
        };
        let (stop, stopped) = oneshot::channel();
        let span = tracing::info_span!("spoke", cluster.name = %cluster);
        let task = tokio::spawn(demux(inner.clone(), sub, routes, stopped).instrument(span));
        Ok((Self { inner }, feeds, Demux { stop, task }))
    }

    /// The cluster whose prefix this is.
    pub fn cluster(&self) -> &str {
        &self.inner.cluster
    }

    /// Calls waiting for their answer now.
    pub fn calls_waiting(&self) -> usize {
        self.inner.lock().len()
    }

    /// Answers that came when no call waited for them, so far.
    pub fn unclaimed_answers(&self) -> u64 {
        self.inner.unclaimed.load(Ordering::Relaxed)
    }

    /// Messages routed to the agent so far (specs, reads, frames, answers).
    pub fn routed(&self) -> u64 {
        self.inner.routed.load(Ordering::Relaxed)
    }

    /// Publishes a request on `subject` whose answer comes back on this cluster's reply subject,
    /// and waits at most `timeout` for it. Fails at once when the table of calls is full or the
    /// server says nobody listens on `subject` ([`RequestErrorKind::NoResponders`]); no answer in
    /// time is [`RequestErrorKind::TimedOut`]. The errors are async-nats' own, so a caller reads
    /// them as it reads `Client::send_request`'s.
    pub async fn request(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Message, RequestError> {
        let (token, answer) = self.inner.open()?;
        // Whatever ends the wait (answer, timeout, a dropped caller), the call leaves the table.
        let _forget = Forget {
            inner: &self.inner,
            token: &token,
        };
        let reply = subjects::to_reply(&self.inner.cluster, &token);
        self.inner
            .client
            .publish_with_reply_and_headers(subject, reply, headers, payload)
            .await
            .map_err(|e| RequestError::with_source(RequestErrorKind::Other, e))?;
        let answer = match answer_within(answer, timeout).await {
            Err(_) => {
                self.inner.timed_out();
                return Err(RequestError::new(RequestErrorKind::TimedOut));
            }
            Ok(None) => {
                return Err(RequestError::with_source(
                    RequestErrorKind::Other,
                    "the agent's subscription stopped",
                ));
            }
            Ok(Some(m)) => m,
        };
        if answer.status == Some(StatusCode::NO_RESPONDERS) {
            return Err(RequestError::with_source(
                RequestErrorKind::NoResponders,
                "no responders",
            ));
        }
        Ok(answer)
    }
}

/// Turns of the process's other tasks a call waits, once its time is up, before it takes the
/// silence for a timeout.
pub const GRACE_TURNS: usize = 3;

/// Waits at most `timeout` for a call's answer — and then a few more turns of the process
/// ([`GRACE_TURNS`]): an answer already in the subscription is routed by the demux, a task of
/// its own, which a starved process may not have run yet. At 100,000 simulated clusters an
/// agent's resync answers came, one after another, just after its timer ended its wait (the
/// process had not run the demux meanwhile): 65 answers dropped as late, its work never
/// applied. A timeout measures the hub and the link, not this process's own turn.
///
/// `Ok(None)`: the answer's sender went without an answer (the subscription stopped). A
/// receiver whose `try_recv` said so is spent: awaiting it again panics ("called after
/// complete"), which killed simulated agents' work actors at 100,000 clusters.
async fn answer_within<T>(
    mut answer: oneshot::Receiver<T>,
    timeout: Duration,
) -> Result<Option<T>, tokio::time::error::Elapsed> {
    let elapsed = match tokio::time::timeout(timeout, &mut answer).await {
        Ok(done) => return Ok(done.ok()),
        Err(e) => e,
    };
    for _ in 0..GRACE_TURNS {
        tokio::task::yield_now().await;
        match answer.try_recv() {
            Ok(m) => return Ok(Some(m)),
            Err(oneshot::error::TryRecvError::Closed) => return Ok(None),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
    }
    Err(elapsed)
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Message>>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new call's token and where its answer comes.
    fn open(&self) -> Result<(String, oneshot::Receiver<Message>), RequestError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}{n:x}", self.salt);
        let (tx, rx) = oneshot::channel();
        let mut calls = self.lock();
        if calls.len() >= self.max_calls {
            return Err(RequestError::with_source(
                RequestErrorKind::Other,
                format!("{} calls already wait for an answer", self.max_calls),
            ));
        }
        calls.insert(token.clone(), tx);
        Ok((token, rx))
    }

    /// A message came through the subscription: it is not deaf.
    fn heard(&self) {
        self.routed.fetch_add(1, Ordering::Relaxed);
        self.timeouts.store(0, Ordering::Relaxed);
    }

    /// A call timed out; the [`DEAF_AFTER`]th in a row with nothing heard wakes the demux to
    /// make the subscription again.
    fn timed_out(&self) {
        if self.timeouts.fetch_add(1, Ordering::Relaxed) + 1 >= DEAF_AFTER {
            self.timeouts.store(0, Ordering::Relaxed);
            self.routed_when_deaf
                .store(self.routed.load(Ordering::Relaxed), Ordering::Relaxed);
            self.resubscribe.notify_one();
        }
    }

    /// Hands an answer to its call; one no call waits for is dropped.
    fn answer(&self, token: &str, msg: Message) {
        let waiting = self.lock().remove(token);
        let taken = waiting.is_some_and(|call| call.send(msg).is_ok());
        if !taken {
            self.unclaimed.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(token, "an answer no call waits for dropped");
        }
    }
}

/// Removes a call from the table when its wait ends.
struct Forget<'a> {
    inner: &'a Inner,
    token: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.inner.lock().remove(self.token);
    }
}

/// Routes every message of the subscription until stopped; makes the subscription again if it
/// ends while the client lives.
async fn demux(
    inner: Arc<Inner>,
    mut sub: Subscriber,
    routes: Routes,
    mut stopped: oneshot::Receiver<()>,
) {
    let all = subjects::to_all(&inner.cluster);
    let mut last_resubscribe: Option<tokio::time::Instant> = None;
    loop {
        // Messages first: a process too busy to run the demux for a while has its messages
        // waiting here, and routing them shows the subscription is not deaf.
        let msg = tokio::select! {
            biased;
            _ = &mut stopped => break,
            m = sub.next() => m,
            () = inner.resubscribe.notified() => {
                let now = tokio::time::Instant::now();
                let heard_since = inner.routed.load(Ordering::Relaxed)
                    != inner.routed_when_deaf.load(Ordering::Relaxed);
                if heard_since || last_resubscribe.is_some_and(|at| now < at + RESUBSCRIBE_SPACING) {
                    continue;
                }
                last_resubscribe = Some(now);
                tracing::warn!(
                    cluster = %inner.cluster,
                    timeouts = DEAF_AFTER,
                    routed = inner.routed.load(Ordering::Relaxed),
                    "calls time out and nothing reaches this agent's subscription: subscribing again"
                );
                // Unsubscribed first: a new subscription beside the old one would not make the
                // servers send the interest on again.
                if let Err(e) = sub.unsubscribe().await {
                    tracing::debug!(error = %e, "unsubscribing the deaf subscription failed");
                }
                // What it still holds is routed (the client closed it: this ends).
                while let Some(msg) = sub.next().await {
                    route(&inner, &routes, msg);
                }
                tokio::select! {
                    _ = &mut stopped => break,
                    s = subscribe(&inner.client, &all) => sub = s,
                }
                continue;
            }
        };
        match msg {
            Some(msg) => route(&inner, &routes, msg),
            None => {
                tracing::warn!("subscription closed; subscribing again");
                tokio::select! {
                    _ = &mut stopped => break,
                    s = subscribe(&inner.client, &all) => sub = s,
                }
            }
        }
    }
    // Every call still waiting ends now rather than at its timeout.
    inner.lock().clear();
}

fn route(inner: &Inner, routes: &Routes, msg: Message) {
    inner.heard();
    let parsed = Inbound::parse(msg.subject.as_str(), &inner.cluster);
    let (to, what) = match parsed {
        Ok(Inbound::Reply(token)) => {
            let token = token.to_string();
            inner.answer(&token, msg);
            return;
        }
        Ok(Inbound::Spec) => (&routes.spec, "spec"),
        Ok(Inbound::Proxy) => (&routes.proxy, "proxy"),
        Ok(Inbound::Kubeapi) => (&routes.kubeapi, "kubeapi"),
        Err(e) => {
            tracing::debug!(error = %e, "message outside the agent's wire dropped");
            return;
        }
    };
    match to.try_send(Box::new(msg)) {
        Ok(()) => {}
        // Nobody reads this kind (no cluster proxy, or the agent stopping).
        Err(mpsc::error::TrySendError::Closed(_)) => {}
        Err(mpsc::error::TrySendError::Full(_)) => {
            tracing::debug!(kind = what, "a full channel dropped a message");
            if what == "spec" {
                routes.dropped.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that never connects (nothing here sends).
    async fn idle_client() -> Client {
        async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("127.0.0.1:1")
            .await
            .expect("a client that connects later")
    }

    fn inner(client: Client, max_calls: usize) -> Inner {
        Inner {
            client,
            cluster: "edge-1".into(),
            salt: "5a17".into(),
            next: AtomicU64::new(0),
            calls: Mutex::new(HashMap::new()),
            max_calls,
            unclaimed: AtomicU64::new(0),
            routed: AtomicU64::new(0),
            timeouts: AtomicU32::new(0),
            routed_when_deaf: AtomicU64::new(0),
            resubscribe: Notify::new(),
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_answer_routed_in_the_turn_the_wait_ends_is_taken() {
        // The answer's task becomes runnable at the same instant the caller's time is up, as
        // the demux of a starved process does: the caller takes it rather than timing out.
        let bound = Duration::from_secs(10);
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(bound).await;
            tokio::task::yield_now().await;
            let _ = tx.send(7);
        });
        assert_eq!(answer_within(rx, bound).await.unwrap(), Some(7));
        // Nothing coming at all is still a timeout, after the grace turns.
        let (_tx, rx) = oneshot::channel::<u32>();
        let started = tokio::time::Instant::now();
        assert!(answer_within(rx, bound).await.is_err());
        assert_eq!(started.elapsed(), bound);
        // A dropped sender ends the wait at once as before.
        let (tx, rx) = oneshot::channel::<u32>();
        drop(tx);
        assert_eq!(answer_within(rx, bound).await.unwrap(), None);
        // And one dropped in the grace turns ends it too, without polling the spent receiver
        // again (tokio panics "called after complete").
        let (tx, rx) = oneshot::channel::<u32>();
        tokio::spawn(async move {
            tokio::time::sleep(bound).await;
            tokio::task::yield_now().await;
            drop(tx);
        });
        assert_eq!(answer_within(rx, bound).await.unwrap(), None);
    }

    #[tokio::test]
    async fn only_timeouts_in_a_row_with_nothing_heard_wake_the_resubscription() {
        let inner = inner(idle_client().await, 4);
        let woken = || {
            let notified = inner.resubscribe.notified();
            tokio::pin!(notified);
            notified.as_mut().enable()
        };
        for _ in 0..DEAF_AFTER - 1 {
            inner.timed_out();
        }
        inner.heard();
        for _ in 0..DEAF_AFTER - 1 {
            inner.timed_out();
        }
        assert!(!woken(), "a message heard in between starts the count over");
        inner.timed_out();
        assert!(woken(), "the sixth in a row with nothing heard");
        assert_eq!(inner.routed.load(Ordering::Relaxed), 1);
    }

    fn answer_on(subject: &str) -> Message {
        Message {
            subject: subject.into(),
            reply: None,
            payload: Bytes::from_static(b"ok"),
            headers: None,
            status: None,
            description: None,
            length: 2,
        }
    }

    #[tokio::test]
    async fn calls_are_bounded_and_answered_once_by_token() {
        let inner = inner(idle_client().await, 2);
        let (a, rx_a) = inner.open().unwrap();
        let (b, _rx_b) = inner.open().unwrap();
        assert!(subjects::valid_reply_token(&a) && a != b && a.starts_with("5a17"));
        assert!(inner.open().is_err(), "a third call past the bound of two");
        inner.answer(&a, answer_on(&subjects::to_reply("edge-1", &a)));
        assert_eq!(rx_a.await.unwrap().payload, Bytes::from_static(b"ok"));
        // Late (its call is gone) or made up: dropped and counted.
        inner.answer(&a, answer_on("x"));
        inner.answer("nobody", answer_on("x"));
        assert_eq!(inner.unclaimed.load(Ordering::Relaxed), 2);
        assert!(inner.open().is_ok(), "a slot freed by the answer");
    }

    #[tokio::test]
    async fn the_demux_routes_by_kind_and_drops_the_rest() {
        let inner = inner(idle_client().await, 4);
        let (spec, mut spec_rx) = mpsc::channel(1);
        let (proxy, mut proxy_rx) = mpsc::channel(1);
        let (kubeapi, kubeapi_rx) = mpsc::channel(1);
        drop(kubeapi_rx);
        let dropped = Arc::new(Notify::new());
        let routes = Routes {
            spec,
            proxy,
            kubeapi,
            dropped: dropped.clone(),
        };
        let (token, answer) = inner.open().unwrap();
        route(&inner, &routes, answer_on(&subjects::to_spec("edge-1")));
        route(&inner, &routes, answer_on(&subjects::to_proxy("edge-1")));
        route(&inner, &routes, answer_on(&subjects::to_kubeapi("edge-1")));
        route(&inner, &routes, answer_on(&subjects::to_spec("edge-2")));
        route(
            &inner,
            &routes,
            answer_on(&subjects::to_reply("edge-1", &token)),
        );
        assert!(spec_rx.try_recv().is_ok() && spec_rx.try_recv().is_err());
        assert!(proxy_rx.try_recv().is_ok());
        assert!(answer.await.is_ok());
        // A full spec channel drops and says so.
        route(&inner, &routes, answer_on(&subjects::to_spec("edge-1")));
        route(&inner, &routes, answer_on(&subjects::to_spec("edge-1")));
        tokio::time::timeout(Duration::from_secs(1), dropped.notified())
            .await
            .expect("told of the dropped spec");
    }
}

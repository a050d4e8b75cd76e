//! The router owns the hub's NATS subscriptions and dispatches every incoming event to its
//! cluster actor. It validates envelopes (bad input is rejected, logged and counted, never
//! stored) and never blocks on a slow actor: a full mailbox is a counted drop, repaired by the
//! agent's retry (registration) or by JetStream redelivery (status, left unacknowledged).

use crate::cluster::{Clusters, LeaseEvent, Msg, StatusEvent, WorkStatusEvent, rules};
use crate::metrics::Metrics;
use async_nats::jetstream::{self, consumer};
use flotilla_api::v1::{
    ClusterStatusReport, LeaseRenewal, RegistrationRequest, RegistrationResponse,
    RegistrationState, SpecResyncRequest, SpecResyncResponse, WorkStatusReport,
};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::Publisher;
use flotilla_bus::reply::ReplyTo;
use flotilla_bus::subjects::{self, StatusSubject};
use flotilla_bus::works;
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// Durable name of the one status consumer of hubs before shards (removed when seen).
pub const LEGACY_STATUS_CONSUMER: &str = "flotilla-hub";

/// Router settings.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Largest accepted event.
    pub max_event_bytes: usize,
    /// Status messages in flight (unacknowledged) at most.
    pub max_ack_pending: i64,
    /// Redelivery delay for unacknowledged status.
    pub ack_wait: Duration,
    /// Where AddOnPlacementScore reports go (set by the hub at start; without it they are
    /// rejected as an unknown type).
    pub scores: Option<crate::placement::score_route::ScoreSink>,
    /// Where policy status reports go (set by the hub at start; without it they are rejected
    /// as an unknown type): the controllers' policies, here or on their hub.
    pub policies: Option<crate::policy::route::PolicySink>,
    /// Where ManagedServiceAccount reports go (set by the hub at start; without it they are
    /// rejected as an unknown type): the controllers' accounts, here or on their hub.
    pub service_accounts: Option<crate::serviceaccount::route::MsaSink>,
    /// Secure mode: the agents' account, whose users' identities registration requests carry
    /// (`Nats-Request-Info`, set by the server on the service import). Set by the hub at start.
    pub agents_account: Option<String>,
    /// Admits registrations of new names (set by the hub at start; without it, every one).
    pub new_names: Option<Arc<crate::limits::NewNames>>,
    /// Paces the creation of new clusters (set by the hub at start; without it, no limit).
    pub admission: Option<crate::admission::Admission>,
    /// Purges refused status messages (set by the hub at start).
    pub janitor: Option<crate::janitor::Janitor>,
    /// Told each subject once its subscription is in place at the server (set by the hub at
    /// start, which returns only once every request subject is served).
    pub ready: Option<tokio::sync::mpsc::UnboundedSender<&'static str>>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            max_ack_pending: 20_000,
            ack_wait: Duration::from_secs(30),
            scores: None,
            policies: None,
            service_accounts: None,
            agents_account: None,
            new_names: None,
            admission: None,
            janitor: None,
            ready: None,
        }
    }
}

/// Serves a subscription on `subject` with `handle` until `shutdown` flips, re-subscribing if
/// the subscription ends (NATS restarts are handled by the client's reconnect).
///
/// Every hub subscribes (no queue group: a paused member of a queue group would swallow its
/// share of the requests until the server noticed), and `mine` keeps only the requests of
/// clusters whose shard this hub holds: exactly one hub answers each.
pub(crate) async fn serve<F, Fut>(
    nats: async_nats::Client,
    subject: &'static str,
    mut shutdown: watch::Receiver<bool>,
    mut ready: Option<tokio::sync::mpsc::UnboundedSender<&'static str>>,
    mine: impl Fn(&str) -> bool,
    mut handle: F,
) where
    F: FnMut(async_nats::Message) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        let mut sub = match nats.subscribe(subject).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, subject, "subscribing failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // The server has the subscription once a flush comes back.
        if let Some(tx) = ready.take() {
            if let Err(e) = nats.flush().await {
                tracing::debug!(error = %e, subject, "flush after subscribing failed");
            }
            let _ = tx.send(subject);
        }
        // Requests are answered concurrently: after a site's uplink returns, thousands of
        // agents ask at once, and one at a time they would time out and back off (a reconnect
        // storm of 10,000 agents took 27–48 s). Each request goes to its own cluster actor,
        // which keeps one cluster's requests in order.
        tokio::select! {
            _ = shutdown.changed() => return,
            () = (&mut sub)
                .filter(|m| std::future::ready(mine(m.subject.as_str())))
                .for_each_concurrent(REQUESTS_IN_FLIGHT, &mut handle) => {}
        }
    }
}

/// Whether a request on `flotilla.<verb>.<cluster>` is this hub's to answer.
pub(crate) fn owned(clusters: &Clusters, verb: &'static str) -> impl Fn(&str) -> bool + use<> {
    let clusters = clusters.clone();
    move |subject| {
        subjects::cluster_token(subject, verb)
            .is_some_and(|c| clusters.holds_shard(subjects::shard(c)))
    }
}

/// How long an answer to a spoke may take to be handed to the client.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the hub answers spokes' requests with.
pub(crate) fn answers(nats: &async_nats::Client, config: &RouterConfig) -> Publisher {
    Publisher::new(nats.clone(), config.max_event_bytes, ANSWER_TIMEOUT)
}

/// Registration and resync requests handled at once, at most.
const REQUESTS_IN_FLIGHT: usize = 256;

/// Runs the registration subscription until `shutdown` flips.
pub async fn run_registrations(
    nats: async_nats::Client,
    clusters: Clusters,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    shutdown: watch::Receiver<bool>,
) {
    let answers = answers(&nats, &config);
    let ready = config.ready.clone();
    let mine = owned(&clusters, "register");
    serve(nats, subjects::REGISTER_ALL, shutdown, ready, mine, |msg| {
        handle_registration(&answers, &clusters, &metrics, &config, msg)
    })
    .await;
}

async fn handle_registration(
    nats: &Publisher,
    clusters: &Clusters,
    metrics: &Metrics,
    config: &RouterConfig,
    msg: async_nats::Message,
) {
    let expected = types::registration_request().to_string();
    // The answer goes only to an inbox: a reply subject the spoke chose is never written to.
    let reply = match ReplyTo::check(msg.reply.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            if metrics.registration_refused("bad_reply") {
                tracing::warn!(subject = %msg.subject, error = %e, "registration refused");
            }
            return;
        }
    };
    let msg = Request { msg, reply };
    let reject = |reason: &str, cluster: &str, why: String| {
        if metrics.rejected(&expected, reason) {
            tracing::warn!(subject = %msg.subject, cluster, reason, error = %why, "registration rejected");
        }
        why
    };
    let subject_cluster = subjects::cluster_token(&msg.subject, "register").unwrap_or_default();
    let event = match Event::decode(&msg.payload, config.max_event_bytes) {
        Ok(e) => e,
        Err(e) => {
            let why = reject(&e.reason(), subject_cluster, e.to_string());
            reply_rejected(nats, &msg, subject_cluster, &why).await;
            return;
        }
    };
    metrics.received(&event.event_type.to_string());
    if event.event_type.to_string() != expected {
        let why = reject(
            "unknown_type",
            subject_cluster,
            format!(
                "type {} is not accepted on {}",
                event.event_type, msg.subject
            ),
        );
        reply_rejected(nats, &msg, subject_cluster, &why).await;
        return;
    }
    if event.cluster != subject_cluster {
        let why = reject(
            "clustername_mismatch",
            subject_cluster,
            format!(
                "clustername {:?} does not match subject cluster {:?}",
                event.cluster, subject_cluster
            ),
        );
        reply_rejected(nats, &msg, subject_cluster, &why).await;
        return;
    }
    let request: RegistrationRequest = match event.decode_data("RegistrationRequest") {
        Ok(r) => r,
        Err(e) => {
            let why = reject(&e.reason(), subject_cluster, e.to_string());
            reply_rejected(nats, &msg, subject_cluster, &why).await;
            return;
        }
    };
    if request.cluster_name != event.cluster {
        let why = reject(
            "clustername_mismatch",
            subject_cluster,
            format!(
                "clusterName {:?} does not match the event's clustername {:?}",
                request.cluster_name, event.cluster
            ),
        );
        reply_rejected(nats, &msg, subject_cluster, &why).await;
        return;
    }
    if let Err(why) = rules::validate_registration(&request) {
        let why = reject("invalid_request", subject_cluster, why);
        reply_rejected(nats, &msg, subject_cluster, &why).await;
        return;
    }
    let credential = match requester(&msg, config.agents_account.as_deref()) {
        Ok(c) => c,
        Err(why) => {
            if metrics.registration_refused("identity") {
                tracing::warn!(subject = %msg.subject, error = %why, "registration refused");
            }
            reply_rejected(nats, &msg, subject_cluster, &why).await;
            return;
        }
    };
    if credential.is_some() && !flotilla_auth::issuer::is_user_key(&request.agent_public_key) {
        let why = reject(
            "invalid_request",
            subject_cluster,
            format!(
                "agentPublicKey {:?} is not a NATS user key (U…)",
                request.agent_public_key
            ),
        );
        reply_rejected(nats, &msg, subject_cluster, &why).await;
        return;
    }
    // A new name holds one of the admission gate's slots until its actor has answered.
    let mut permit = None;
    let handle = match clusters.local_or_load(&request.cluster_name) {
        Some(h) => {
            // Requests under a known name from any credential but the cluster's own agent key
            // spend that credential's rate: a flood must not fill the cluster actor's mailbox
            // (its lease renewals go through it too).
            if let (Some(gate), Some(who)) = (&config.new_names, credential.as_deref()) {
                let own = clusters
                    .shared()
                    .inventory
                    .get(&request.cluster_name)
                    .and_then(|c| c.hub.as_ref().map(|h| h.agent_public_key == who))
                    .unwrap_or(false);
                if !own && let Err(refusal) = gate.rate(who, metrics, std::time::Instant::now()) {
                    reply_rejected(nats, &msg, subject_cluster, &refusal.message).await;
                    return;
                }
            }
            h
        }
        None => {
            if let Some(gate) = &config.new_names {
                let inventory = &clusters.shared().inventory;
                let who = credential.as_deref();
                if let Err(refusal) = gate.admit(who, inventory, metrics, std::time::Instant::now())
                {
                    reply_rejected(nats, &msg, subject_cluster, &refusal.message).await;
                    return;
                }
            }
            permit = match config
                .admission
                .as_ref()
                .map(|a| a.try_admit(Instant::now()))
            {
                Some(Err(busy)) => {
                    metrics.registration_busy("in_flight");
                    reply_busy(nats, &msg, &request, busy).await;
                    return;
                }
                Some(Ok(p)) => Some(p),
                None => None,
            };
            match clusters.local_or_spawn(&request.cluster_name) {
                Ok(h) => h,
                // The shard moved away meanwhile: its new owner answers the agent's retry.
                Err(e) => {
                    tracing::debug!(error = %e, "registration for a shard this hub no longer holds");
                    return;
                }
            }
        }
    };
    let sent = handle.try_send(Msg::Register {
        request: Box::new(request),
        reply: msg.reply().cloned(),
        credential,
        permit,
    });
    if let Err(e) = sent {
        metrics.dropped("cluster");
        // A full mailbox: the agent is told when to ask again rather than left to time out.
        if let (Msg::Register { request, .. }, Some(gate)) = ((*e).into_inner(), &config.admission)
        {
            metrics.registration_busy("mailbox");
            reply_busy(nats, &msg, &request, gate.busy(Instant::now())).await;
        }
    }
}

/// Answers a registration that stored nothing: ask again after `busy.retry_after`.
async fn reply_busy(
    nats: &Publisher,
    msg: &Request,
    request: &RegistrationRequest,
    busy: crate::admission::Busy,
) {
    let response = crate::cluster::rules::registration::busy(request, busy.retry_after);
    reply(
        nats,
        msg,
        types::registration_response(),
        &request.cluster_name,
        &response,
    )
    .await;
}

/// A request from a spoke whose reply subject was checked.
pub(crate) struct Request {
    msg: async_nats::Message,
    reply: Option<ReplyTo>,
}

impl std::ops::Deref for Request {
    type Target = async_nats::Message;
    fn deref(&self) -> &async_nats::Message {
        &self.msg
    }
}

impl Request {
    /// Checks a request's reply subject; `None` (counted, logged within budget) when the hub
    /// must not answer it — the caller then drops the request.
    pub(crate) fn check(msg: async_nats::Message, metrics: &Metrics, ty: &str) -> Option<Self> {
        match ReplyTo::check(msg.reply.as_ref()) {
            Ok(reply) => Some(Self { msg, reply }),
            Err(e) => {
                if metrics.rejected(ty, "bad_reply") {
                    tracing::warn!(subject = %msg.subject, error = %e, "request refused");
                }
                None
            }
        }
    }

    /// Where the answer goes, if anywhere.
    pub(crate) fn reply(&self) -> Option<&ReplyTo> {
        self.reply.as_ref()
    }
}

/// The NATS user that sent a request through the agents' account, as the server attests it in
/// `Nats-Request-Info` — secure mode only (`Ok(None)` in plain mode, where anyone could write
/// the header). The server replaces a requester's copy of the header with its own, but servers
/// before 2.14 replace only the first copy and append theirs: a request carrying the header
/// more than once is a forgery, and one without it did not come through the import.
fn requester(
    msg: &async_nats::Message,
    agents_account: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(agents) = agents_account else {
        return Ok(None);
    };
    let values: Vec<_> = msg
        .headers
        .as_ref()
        .map(|h| h.get_all(REQUEST_INFO).collect())
        .unwrap_or_default();
    let [value] = values.as_slice() else {
        return Err(format!(
            "the request carries {} {REQUEST_INFO} headers where the server sets exactly one",
            values.len()
        ));
    };
    let info: serde_json::Value = serde_json::from_str(value.as_str())
        .map_err(|e| format!("{REQUEST_INFO} is not JSON: {e}"))?;
    match (info["acc"].as_str(), info["user"].as_str()) {
        (Some(acc), Some(user)) if acc == agents && !user.is_empty() => Ok(Some(user.to_string())),
        _ => Err(format!(
            "{REQUEST_INFO} names no user of the agents' account"
        )),
    }
}

/// The header a service import with `share` adds: the requesting account and user.
const REQUEST_INFO: &str = "Nats-Request-Info";

async fn reply_rejected(nats: &Publisher, msg: &Request, cluster: &str, why: &str) {
    let response = RegistrationResponse {
        cluster_name: reply_cluster(cluster).to_string(),
        state: RegistrationState::Rejected as i32,
        lease_duration_seconds: 0,
        message: why.to_string(),
        // An answer, never a notification: an agent ignores it wherever else it lands.
        in_reply_to: "-".into(),
        ..Default::default()
    };
    reply(
        nats,
        msg,
        types::registration_response(),
        cluster,
        &response,
    )
    .await;
}

/// The clustername of an answer to bad input: the request's, when it is a valid name.
fn reply_cluster(cluster: &str) -> &str {
    if flotilla_api::names::validate_cluster_name(cluster).is_ok() {
        cluster
    } else {
        "invalid"
    }
}

/// Answers a request (if it wants an answer) with one event.
pub(crate) async fn reply(
    nats: &Publisher,
    msg: &Request,
    ty: flotilla_bus::EventType,
    cluster: &str,
    payload: &impl prost::Message,
) {
    let Some(reply) = msg.reply() else { return };
    let ev = Event::new(ty, crate::cluster::SOURCE, reply_cluster(cluster), payload);
    reply.answer(nats, &ev).await;
}

/// Runs the spec resync subscription until `shutdown` flips.
pub async fn run_resyncs(
    nats: async_nats::Client,
    clusters: Clusters,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    shutdown: watch::Receiver<bool>,
) {
    let replies = answers(&nats, &config);
    let ty = works::resync_request_type().to_string();
    let ready = config.ready.clone();
    let mine = owned(&clusters, "sync");
    serve(nats, subjects::SYNC_ALL, shutdown, ready, mine, |msg| {
        let msg = Request::check(msg, &metrics, &ty);
        let rejected = msg
            .as_ref()
            .and_then(|m| check_resync(&clusters, &metrics, &config, m).err());
        let replies = replies.clone();
        async move {
            if let (Some(msg), Some((cluster, why))) = (msg, rejected) {
                reply_resync_rejected(&replies, &msg, &cluster, why).await;
            }
        }
    })
    .await;
}

/// Validates a resync request and hands it to its cluster actor, or says why it was rejected
/// (the cluster to answer as, and the reason).
fn check_resync(
    clusters: &Clusters,
    metrics: &Metrics,
    config: &RouterConfig,
    msg: &Request,
) -> Result<(), (String, String)> {
    let expected = works::resync_request_type().to_string();
    let subject_cluster = subjects::cluster_token(&msg.subject, "sync").unwrap_or_default();
    let reject = |reason: &str, why: String| {
        if metrics.rejected(&expected, reason) {
            tracing::warn!(subject = %msg.subject, reason, error = %why, "resync request rejected");
        }
        Err((subject_cluster.to_string(), why))
    };
    let event = match Event::decode(&msg.payload, config.max_event_bytes) {
        Ok(e) => e,
        Err(e) => return reject(&e.reason(), e.to_string()),
    };
    metrics.received(&event.event_type.to_string());
    if event.event_type.to_string() != expected {
        return reject(
            "unknown_type",
            format!(
                "type {} is not accepted on {}",
                event.event_type, msg.subject
            ),
        );
    }
    if event.cluster != subject_cluster {
        return reject(
            "clustername_mismatch",
            format!("clustername {:?} does not match the subject", event.cluster),
        );
    }
    let request: SpecResyncRequest = match event.decode_data("SpecResyncRequest") {
        Ok(r) => r,
        Err(e) => return reject(&e.reason(), e.to_string()),
    };
    let Some(handle) = clusters.local_or_load(subject_cluster) else {
        return reject(
            "unknown_cluster",
            format!("cluster {subject_cluster:?} is not registered"),
        );
    };
    metrics.resyncs.inc();
    if handle
        .try_send(Msg::Resync {
            request: Box::new(request),
            reply: msg.reply().cloned(),
        })
        .is_err()
    {
        // The agent retries after its request timeout.
        metrics.dropped("cluster");
    }
    Ok(())
}

/// Answers a rejected resync request at once, saying why.
async fn reply_resync_rejected(nats: &Publisher, msg: &Request, cluster: &str, why: String) {
    let response = SpecResyncResponse {
        error: why,
        ..Default::default()
    };
    reply(nats, msg, works::resync_response_type(), cluster, &response).await;
}

/// The status consumer of one shard under one epoch: a new owner reads the latest message of
/// every subject of its shard at once (actors de-duplicate by `sequenceid`/`statushash`), and a
/// late acknowledgement from the previous owner lands on the previous consumer, not this one.
#[derive(Debug, Clone)]
pub struct StatusFeed {
    /// The shard.
    pub shard: u32,
    /// The holder's epoch.
    pub epoch: u64,
}

/// Idle heartbeat of the status pulls.
const PULL_HEARTBEAT: Duration = Duration::from_secs(2);
/// How long one status pull waits on the server.
const PULL_EXPIRES: Duration = Duration::from_secs(10);

/// Missed heartbeats in a row (each one 2 × [`PULL_HEARTBEAT`] of silence) after which a
/// shard's pull is made again: its node is taken for lost.
const MISSES_BEFORE_RESUBSCRIBE: u32 = 3;
/// A blind shard sees again after this long without another missed heartbeat (more than one
/// miss period: the heartbeats are arriving).
const HEARTBEAT_SETTLE: Duration = Duration::from_secs(6);

/// The longest wait before a shard's status consumer is asked for again.
const RESUBSCRIBE_MAX: Duration = Duration::from_secs(10);

/// The wait after the `failures`-th failure in a row: 0.1–0.2 s after the first (a lost node is
/// noticed within seconds), doubling to [`RESUBSCRIBE_MAX`].
fn resubscribe_wait(failures: usize) -> Duration {
    flotilla_bus::connect::backoff(failures, RESUBSCRIBE_MAX)
}

/// Prefix of every shard status consumer's name.
const FEED_PREFIX: &str = "flotilla-status-s";

impl StatusFeed {
    /// The consumer's durable name.
    pub fn name(&self) -> String {
        format!("{FEED_PREFIX}{:02}-e{}", self.shard, self.epoch)
    }

    fn is_older_of_same_shard(&self, name: &str) -> bool {
        let prefix = format!("{FEED_PREFIX}{:02}-e", self.shard);
        name.strip_prefix(&prefix)
            .and_then(|e| e.parse::<u64>().ok())
            .is_some_and(|e| e < self.epoch)
    }
}

/// Creates (or opens) a shard's status consumer, removing the consumers of its earlier epochs
/// and the single consumer of hubs before shards.
pub async fn status_consumer(
    stream: &jetstream::stream::Stream,
    feed: &StatusFeed,
    config: &RouterConfig,
) -> Result<consumer::Consumer<consumer::pull::Config>, String> {
    let name = feed.name();
    let consumer = stream
        .get_or_create_consumer(
            &name,
            consumer::pull::Config {
                durable_name: Some(name.clone()),
                filter_subject: subjects::status_of_shard(feed.shard),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: config.ack_wait,
                max_ack_pending: config.max_ack_pending,
                deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                // Stored like the stream (file, its replicas): a NATS restart or the loss of one
                // node of a cluster keeps it and what it has delivered.
                // A consumer nobody reads (its hub died with it) goes away by itself.
                inactive_threshold: Duration::from_secs(300),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut names = stream.consumer_names();
    let mut stale = Vec::new();
    while let Some(Ok(n)) = names.next().await {
        if n == LEGACY_STATUS_CONSUMER || feed.is_older_of_same_shard(&n) {
            stale.push(n);
        }
    }
    for n in stale {
        if let Err(e) = stream.delete_consumer(&n).await {
            tracing::debug!(consumer = %n, error = %e, "removing a stale status consumer failed");
        }
    }
    Ok(consumer)
}

/// Removes a shard's status consumer (the shard was handed over).
pub async fn remove_status_consumer(stream: &jetstream::stream::Stream, feed: &StatusFeed) {
    if let Err(e) = stream.delete_consumer(&feed.name()).await {
        tracing::debug!(consumer = %feed.name(), error = %e, "removing the status consumer failed");
    }
}

/// Consumes one shard's status until `shutdown` flips, re-establishing the consumer after
/// errors (NATS restarts). Messages are handled only while the shard's fence holds.
pub async fn run_status(
    stream: jetstream::stream::Stream,
    feed: StatusFeed,
    fence: crate::ha::Fence,
    clusters: Clusters,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    mut shutdown: watch::Receiver<bool>,
) {
    let sight = clusters.sight(feed.shard);
    let blind = || {
        if let Some(s) = &sight {
            s.lost();
        }
    };
    // Failures in a row: the waits before asking the server again double (to
    // RESUBSCRIBE_MAX), so 32 shards do not each ask an overloaded server every second.
    let mut failures = 0;
    loop {
        blind();
        if *shutdown.borrow() || !fence.is_valid() {
            return;
        }
        let consumer = match status_consumer(&stream, &feed, &config).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(shard = feed.shard, error = %e, "status consumer unavailable; retrying");
                failures += 1;
                tokio::select! {
                    _ = shutdown.changed() => return,
                    () = tokio::time::sleep(resubscribe_wait(failures)) => continue,
                }
            }
        };
        // Short pulls with heartbeats: a consumer lost with its NATS node is noticed within
        // seconds (after the client's defaults it took 30 s, and clusters of a test fleet with a
        // 10 s grace went Unknown).
        let pulled = consumer
            .stream()
            .heartbeat(PULL_HEARTBEAT)
            .expires(PULL_EXPIRES)
            .messages()
            .await;
        let mut messages = match pulled {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(shard = feed.shard, error = %e, "status stream unavailable; retrying");
                failures += 1;
                tokio::time::sleep(resubscribe_wait(failures)).await;
                continue;
            }
        };
        tracing::debug!(
            shard = feed.shard,
            epoch = feed.epoch,
            "consuming the shard's status"
        );
        if let Some(s) = &sight {
            s.regained();
        }
        // A missed heartbeat makes the shard blind (no lease is judged) but keeps the pull: an
        // overloaded server answers late, and a pull re-made every 4 s was never answered at all
        // (the 100,000-cluster fanout stopped consuming). Only MISSES_BEFORE_RESUBSCRIBE misses
        // in a row (a lost node) re-make it; a stretch without a miss, or a message, ends the
        // blindness.
        let mut missed = 0;
        let mut blind_since: Option<tokio::time::Instant> = None;
        loop {
            let settled = blind_since.map(|t| t + HEARTBEAT_SETTLE);
            tokio::select! {
                _ = shutdown.changed() => return,
                () = sleep_until_some(settled) => {
                    blind_since = None;
                    missed = 0;
                    if let Some(s) = &sight {
                        s.regained();
                    }
                }
                next = messages.next() => match next {
                    // Left unacknowledged once the fence is gone: the next owner reads it.
                    Some(Ok(_)) if !fence.is_valid() => return,
                    Some(Ok(msg)) => {
                        failures = 0;
                        missed = 0;
                        if blind_since.take().is_some()
                            && let Some(s) = &sight
                        {
                            s.regained();
                        }
                        handle_status(&clusters, &metrics, &config, msg).await;
                    }
                    Some(Err(e))
                        if e.kind() == consumer::pull::MessagesErrorKind::MissingHeartbeat
                            && missed + 1 < MISSES_BEFORE_RESUBSCRIBE =>
                    {
                        missed += 1;
                        blind();
                        blind_since = Some(tokio::time::Instant::now());
                        tracing::debug!(shard = feed.shard, missed, "status heartbeat missed; waiting");
                    }
                    Some(Err(e)) => {
                        tracing::warn!(shard = feed.shard, error = %e, "status stream error; re-subscribing");
                        failures += 1;
                        tokio::time::sleep(resubscribe_wait(failures)).await;
                        break;
                    }
                    None => break,
                }
            }
        }
    }
}

/// Sleeps until `at`; never, without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn handle_status(
    clusters: &Clusters,
    metrics: &Metrics,
    config: &RouterConfig,
    msg: jetstream::Message,
) {
    let info = msg.info().ok();
    let server_time = info
        .as_ref()
        .map(|i| SystemTime::from(i.published))
        .unwrap_or_else(SystemTime::now);
    let sequence = info.as_ref().map(|i| i.stream_sequence);
    let subject = msg.subject.to_string();
    // Everything rejected is acknowledged — redelivering bad input would not make it better —
    // and its subject purged, so refused input never accumulates in the stream.
    let reject = |ty: &str, reason: &str, why: String| {
        if metrics.rejected(ty, reason) {
            tracing::warn!(subject = %subject, reason, error = %why, "status event rejected");
        }
        if let Some(janitor) = &config.janitor {
            janitor.purge(
                subjects::StatusSubject::parse(&subject).map_or("", |p| p.cluster),
                &subject,
                sequence,
            );
        }
    };
    let parsed = match StatusSubject::parse(&subject) {
        Ok(p) => p,
        Err(e) => {
            reject("unknown", "bad_subject", e.to_string());
            let _ = msg.ack().await;
            return;
        }
    };
    let event = match Event::decode(&msg.payload, config.max_event_bytes) {
        Ok(e) => e,
        Err(e) => {
            reject("unknown", &e.reason(), e.to_string());
            let _ = msg.ack().await;
            return;
        }
    };
    let ty = event.event_type.to_string();
    metrics.received(&ty);
    if event.cluster != parsed.cluster {
        reject(
            &ty,
            "clustername_mismatch",
            format!(
                "clustername {:?} does not match the subject's cluster {:?}",
                event.cluster, parsed.cluster
            ),
        );
        let _ = msg.ack().await;
        return;
    }
    let Some(handle) = clusters.local_or_load(parsed.cluster) else {
        reject(
            &ty,
            "unknown_cluster",
            format!("cluster {:?} is not registered", parsed.cluster),
        );
        let _ = msg.ack().await;
        return;
    };
    let dispatched = match (parsed.kind, parsed.resource_id) {
        (subjects::KIND_LEASE, None) if event.event_type == types::lease_renewal() => {
            match event.decode_data::<LeaseRenewal>("LeaseRenewal") {
                Ok(renewal) => handle.try_send(Msg::Lease(Box::new(LeaseEvent {
                    renewal,
                    sequence: event.sequence_id,
                    server_time,
                    ack: Some(msg),
                }))),
                Err(e) => {
                    reject(&ty, &e.reason(), e.to_string());
                    let _ = msg.ack().await;
                    return;
                }
            }
        }
        (subjects::KIND_CLUSTER, None) if event.event_type == types::cluster_status() => {
            let report = match event.decode_data::<ClusterStatusReport>("ClusterStatusReport") {
                Ok(r) => r,
                Err(e) => {
                    reject(&ty, &e.reason(), e.to_string());
                    let _ = msg.ack().await;
                    return;
                }
            };
            if report.cluster_name != event.cluster {
                reject(
                    &ty,
                    "clustername_mismatch",
                    format!(
                        "clusterName {:?} does not match {:?}",
                        report.cluster_name, event.cluster
                    ),
                );
                let _ = msg.ack().await;
                return;
            }
            if let Err(why) = rules::validate_claims(&report.claims)
                .and_then(|()| rules::validate_namespace_report(&report.managed_namespaces))
            {
                reject(&ty, "invalid_status", why);
                let _ = msg.ack().await;
                return;
            }
            handle.try_send(Msg::Status(Box::new(StatusEvent {
                report,
                sequence: event.sequence_id,
                hash: event.status_hash.clone(),
                ack: Some(msg),
            })))
        }
        (subjects::KIND_WORK, Some(rid)) if event.event_type == works::status_type() => {
            let report = match event.decode_data::<WorkStatusReport>("WorkStatusReport") {
                Ok(r) => r,
                Err(e) => {
                    reject(&ty, &e.reason(), e.to_string());
                    let _ = msg.ack().await;
                    return;
                }
            };
            if report.cluster_name != event.cluster || report.resource_id != rid {
                reject(
                    &ty,
                    "clustername_mismatch",
                    format!(
                        "clusterName {:?} / resourceId {:?} do not match the subject ({:?}, {rid:?})",
                        report.cluster_name, report.resource_id, parsed.cluster
                    ),
                );
                let _ = msg.ack().await;
                return;
            }
            // A work the hub does not have is refused here, not in the actor: a cluster
            // flooding made-up works must not fill its actor's mailbox (dropped messages would
            // wait for redelivery) nor delay its real status.
            let work = crate::keys::ObjectRef::new(parsed.cluster, report.work_name.as_str());
            if clusters.shared().works.get(&work.inventory_key()).is_none() {
                reject(
                    &ty,
                    "unknown_work",
                    format!(
                        "cluster {:?} has no work {:?}",
                        parsed.cluster, report.work_name
                    ),
                );
                let _ = msg.ack().await;
                return;
            }
            handle.try_send(Msg::WorkStatus(Box::new(WorkStatusEvent {
                resource_id: rid.to_string(),
                report,
                sequence: event.sequence_id,
                hash: event.status_hash.clone(),
                ack: Some(msg),
                traceparent: event.traceparent.clone(),
            })))
        }
        (flotilla_bus::policies::KIND_POLICY, Some(rid))
            if event.event_type == flotilla_bus::policies::status_type()
                && config.policies.is_some() =>
        {
            let accepted = clusters
                .shared()
                .inventory
                .get(&event.cluster)
                .is_some_and(|c| rules::accepted(&c));
            let sink = config.policies.as_ref().expect("checked by the guard");
            let raw = msg.payload.clone();
            if let Err(((reason, why), msg)) = sink.route(&event, &raw, rid, accepted, msg).await {
                reject(&ty, reason, why);
                if let Some(msg) = msg {
                    let _ = msg.ack().await;
                }
            }
            return;
        }
        (flotilla_bus::serviceaccounts::KIND_MSA, Some(rid))
            if event.event_type == flotilla_bus::serviceaccounts::status_type()
                && config.service_accounts.is_some() =>
        {
            let accepted = clusters
                .shared()
                .inventory
                .get(&event.cluster)
                .is_some_and(|c| rules::accepted(&c));
            let sink = config
                .service_accounts
                .as_ref()
                .expect("checked by the guard");
            let raw = msg.payload.clone();
            if let Err(((reason, why), msg)) = sink.route(&event, &raw, rid, accepted, msg).await {
                reject(&ty, reason, why);
                if let Some(msg) = msg {
                    let _ = msg.ack().await;
                }
            }
            return;
        }
        (flotilla_bus::scores::KIND_SCORE, Some(rid))
            if event.event_type == flotilla_bus::scores::report_type() =>
        {
            let rid = rid.to_string();
            route_score(clusters, metrics, config, &subject, event, &rid, msg).await;
            return;
        }
        _ => {
            reject(
                &ty,
                "unknown_type",
                format!("type {ty} is not accepted on status kind {:?}", parsed.kind),
            );
            let _ = msg.ack().await;
            return;
        }
    };
    if dispatched.is_err() {
        // Not acknowledged: JetStream redelivers it after ack_wait.
        metrics.dropped("cluster");
    }
}

/// Routes an AddOnPlacementScore report to the score store (scores are not the cluster actor's
/// business), with the same discipline as the other status kinds: bad input is rejected,
/// counted and acknowledged; a full mailbox is a counted drop left for redelivery.
async fn route_score(
    clusters: &Clusters,
    metrics: &Metrics,
    config: &RouterConfig,
    subject: &str,
    event: Event,
    rid: &str,
    msg: jetstream::Message,
) {
    use crate::placement::scores::{self, ScoreReport};
    use flotilla_api::v1::AddOnPlacementScoreReport;
    let ty = event.event_type.to_string();
    let sequence = msg.info().ok().map(|i| i.stream_sequence);
    let reject = |reason: &str, why: String| {
        if metrics.rejected(&ty, reason) {
            tracing::warn!(subject = %subject, reason, error = %why, "score report rejected");
        }
        if let Some(janitor) = &config.janitor {
            janitor.purge(&event.cluster, subject, sequence);
        }
    };
    let Some(sink) = &config.scores else {
        reject(
            "unknown_type",
            "this hub does not take score reports".into(),
        );
        let _ = msg.ack().await;
        return;
    };
    let report = match event.decode_data::<AddOnPlacementScoreReport>("AddOnPlacementScoreReport") {
        Ok(r) => r,
        Err(e) => {
            reject(&e.reason(), e.to_string());
            let _ = msg.ack().await;
            return;
        }
    };
    if report.cluster_name != event.cluster
        || flotilla_bus::scores::resource_id(&report.cluster_name, &report.resource_name) != rid
    {
        reject(
            "clustername_mismatch",
            format!(
                "clusterName {:?} / resourceName {:?} do not match the subject ({:?}, {rid:?})",
                report.cluster_name, report.resource_name, event.cluster
            ),
        );
        let _ = msg.ack().await;
        return;
    }
    if let Err(why) = scores::validate_report(&report) {
        reject("invalid_status", why);
        let _ = msg.ack().await;
        return;
    }
    let accepted = clusters
        .shared()
        .inventory
        .get(&report.cluster_name)
        .is_some_and(|c| rules::accepted(&c));
    if !accepted {
        reject(
            "not_accepted",
            format!("cluster {:?} is not accepted", report.cluster_name),
        );
        let _ = msg.ack().await;
        return;
    }
    let sequence = event.sequence_id;
    if sink
        .try_report(ScoreReport {
            report,
            sequence,
            ack: Some(msg),
        })
        .is_err()
    {
        // Not acknowledged: JetStream redelivers it after ack_wait.
        metrics.dropped("scores");
    }
}

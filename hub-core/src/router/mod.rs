//! The router owns the hub's NATS subscriptions and dispatches every incoming event to its
//! cluster actor. It validates envelopes (bad input is rejected, logged and counted, never
//! stored) and never blocks on a slow actor: a full mailbox is a counted drop, repaired by the
//! agent's retry (registration) or by JetStream redelivery (status, left unacknowledged).
//! Registrations of new names and spec resyncs are admitted ([`crate::admission`]): past a
//! bound, or at a full mailbox, the agent is answered busy with its slot in a queue.

use crate::admission::{Admission, Permit};
use crate::cluster::{ClusterHandle, Clusters, Msg};
use crate::metrics::Metrics;
use check::Refused;
use flotilla_api::v1::{
    RegistrationRequest, RegistrationResponse, RegistrationState, SpecResyncRequest,
    SpecResyncResponse,
};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::Publisher;
use flotilla_bus::reply::ReplyTo;
use flotilla_bus::subjects;
use flotilla_bus::works;
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    /// Where the reports a controller family takes go, by status kind (set by the hub at
    /// start; a kind without a sink is rejected as an unknown type): the family here, or the
    /// hub holding the controllers.
    pub reports: crate::report::Sinks,
    /// Secure mode: the agents' account, whose users' identities registration requests carry
    /// (`Nats-Request-Info`, set by the server on the service import). Set by the hub at start.
    pub agents_account: Option<String>,
    /// Admits registrations of new names (set by the hub at start; without it, every one).
    pub new_names: Option<Arc<crate::limits::NewNames>>,
    /// Paces the creation of new clusters (set by the hub at start; without it, no limit).
    pub admission: Option<crate::admission::Admission>,
    /// Spec resyncs answered at once, at most, before an agent that reads busy answers is told
    /// when to ask again ([`RESYNCS_IN_FLIGHT`] by default).
    pub resyncs_in_flight: usize,
    /// Purges refused status messages (set by the hub at start).
    pub janitor: Option<crate::janitor::Janitor>,
    /// Told each subject once its subscription is in place at the server (set by the hub at
    /// start, which returns only once every request subject is served).
    pub ready: Option<tokio::sync::mpsc::UnboundedSender<&'static str>>,
    /// The agent versions accepted at registration (`--agent-versions`; by default this hub's
    /// minor line and the one before).
    pub agent_versions: flotilla_api::version::Accepts,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            max_ack_pending: 20_000,
            ack_wait: Duration::from_secs(30),
            reports: crate::report::Sinks::default(),
            agents_account: None,
            new_names: None,
            admission: None,
            resyncs_in_flight: RESYNCS_IN_FLIGHT,
            janitor: None,
            ready: None,
            agent_versions: flotilla_api::version::Accepts::default_for(
                &flotilla_api::version::Version::current(),
            ),
        }
    }
}

/// Serves a subscription on `subject` with `handle` until `shutdown` flips, re-subscribing if
/// the subscription ends (NATS restarts are handled by the client's reconnect).
///
/// Every hub subscribes (no queue group: a paused member of a queue group would swallow its
/// share of the requests until the server noticed), and `mine` keeps only the requests of
/// clusters whose shard this hub holds: exactly one hub answers each.
pub async fn serve<F, Fut>(
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
pub fn owned(clusters: &Clusters, verb: &'static str) -> impl Fn(&str) -> bool + use<> {
    let clusters = clusters.clone();
    move |subject| {
        subjects::cluster_token(subject, verb)
            .is_some_and(|c| clusters.holds_shard(subjects::shard(c)))
    }
}

/// How long an answer to a spoke may take to be handed to the client.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the hub answers spokes' requests with.
pub fn answers(nats: &async_nats::Client, config: &RouterConfig) -> Publisher {
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
    // The answer goes only to an inbox (or the asking cluster's reply subject): a reply
    // subject the spoke chose is never written to.
    let subject_cluster = subjects::cluster_token(&msg.subject, "register").unwrap_or_default();
    let reply = match ReplyTo::check(msg.reply.as_ref(), subject_cluster) {
        Ok(r) => r,
        Err(e) => {
            if metrics.registration_refused("bad_reply") {
                tracing::warn!(subject = %msg.subject, error = %e, "registration refused");
            }
            return;
        }
    };
    let msg = Request { msg, reply };
    let subject_cluster = subjects::cluster_token(&msg.subject, "register").unwrap_or_default();
    let checked = match Event::decode(&msg.payload, config.max_event_bytes) {
        Ok(event) => {
            metrics.received(&event.event_type.to_string());
            check::registration(
                &msg.subject,
                msg.headers.as_ref(),
                &event,
                subject_cluster,
                config.agents_account.as_deref(),
            )
        }
        Err(e) => Err(Refused::Rejected {
            reason: e.reason(),
            why: e.to_string(),
        }),
    };
    let (request, credential) = match checked {
        Ok(checked) => checked,
        Err(refused) => {
            refuse_registration(nats, metrics, &msg, subject_cluster, refused).await;
            return;
        }
    };
    let hub = flotilla_api::version::Version::current();
    if let Err(refusal) = config.agent_versions.judge(&hub, &request.agent_version) {
        refuse_version(
            nats,
            clusters,
            metrics,
            &msg,
            request,
            credential,
            refusal.to_string(),
        )
        .await;
        return;
    }
    let Some((handle, permit)) = route_registration(
        nats,
        clusters,
        metrics,
        config,
        &msg,
        &request,
        credential.as_deref(),
    )
    .await
    else {
        return;
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

/// Counts and logs (within budget) a registration refused before any actor saw it, and tells
/// the agent why.
async fn refuse_registration(
    nats: &Publisher,
    metrics: &Metrics,
    msg: &Request,
    subject_cluster: &str,
    refused: Refused,
) {
    let why = match refused {
        Refused::Rejected { reason, why } => {
            let expected = types::registration_request().to_string();
            if metrics.rejected(&expected, &reason) {
                tracing::warn!(subject = %msg.subject, cluster = subject_cluster, reason, error = %why, "registration rejected");
            }
            why
        }
        Refused::Identity(why) => {
            if metrics.registration_refused("identity") {
                tracing::warn!(subject = %msg.subject, error = %why, "registration refused");
            }
            why
        }
    };
    reply_rejected(nats, msg, subject_cluster, &why).await;
}

/// The actor a checked registration goes to and, for a name the hub has never seen, its
/// admission slot (held until the actor has answered). `None` when the request was answered
/// here — refused at a limit, or busy — or its shard is no longer this hub's.
async fn route_registration(
    nats: &Publisher,
    clusters: &Clusters,
    metrics: &Metrics,
    config: &RouterConfig,
    msg: &Request,
    request: &RegistrationRequest,
    credential: Option<&str>,
) -> Option<(ClusterHandle, Option<Permit>)> {
    match clusters.local_or_load(&request.cluster_name) {
        Some(h) => {
            // Requests under a known name from any credential but the cluster's own agent key
            // spend that credential's rate: a flood must not fill the cluster actor's mailbox
            // (its lease renewals go through it too).
            if let (Some(gate), Some(who)) = (&config.new_names, credential) {
                let own = clusters
                    .shared()
                    .inventory
                    .get(&request.cluster_name)
                    .and_then(|c| c.hub.as_ref().map(|h| h.agent_public_key == who))
                    .unwrap_or(false);
                if !own && let Err(refusal) = gate.rate(who, metrics, Instant::now()) {
                    reply_rejected(nats, msg, &request.cluster_name, &refusal.message).await;
                    return None;
                }
            }
            Some((h, None))
        }
        None => {
            if let Some(gate) = &config.new_names {
                let inventory = &clusters.shared().inventory;
                if let Err(refusal) = gate.admit(credential, inventory, metrics, Instant::now()) {
                    reply_rejected(nats, msg, &request.cluster_name, &refusal.message).await;
                    return None;
                }
            }
            let permit = match config
                .admission
                .as_ref()
                .map(|a| a.try_admit(Instant::now()))
            {
                Some(Err(busy)) => {
                    metrics.registration_busy("in_flight");
                    reply_busy(nats, msg, request, busy).await;
                    return None;
                }
                Some(Ok(p)) => Some(p),
                None => None,
            };
            match clusters.local_or_spawn(&request.cluster_name) {
                Ok(h) => Some((h, permit)),
                // The shard moved away meanwhile: its new owner answers the agent's retry.
                Err(e) => {
                    tracing::debug!(error = %e, "registration for a shard this hub no longer holds");
                    None
                }
            }
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
pub struct Request {
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
    /// Checks the reply subject of a request `cluster` made (the cluster its subject names);
    /// `None` (counted, logged within budget) when the hub must not answer it — the caller then
    /// drops the request.
    pub fn check(
        msg: async_nats::Message,
        metrics: &Metrics,
        ty: &str,
        cluster: &str,
    ) -> Option<Self> {
        match ReplyTo::check(msg.reply.as_ref(), cluster) {
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
    pub fn reply(&self) -> Option<&ReplyTo> {
        self.reply.as_ref()
    }
}

/// Answers a registration from an agent whose version this hub does not accept (before any
/// actor sees it: nothing is stored), naming the request so the agent takes the answer and
/// says why.
async fn refuse_version(
    nats: &Publisher,
    clusters: &Clusters,
    metrics: &Metrics,
    msg: &Request,
    request: RegistrationRequest,
    credential: Option<String>,
    why: String,
) {
    let cluster = request.cluster_name.clone();
    if metrics.registration_refused("agent_version") {
        tracing::warn!(cluster, agent_version = %request.agent_version, reason = why, "registration refused");
    }
    let to = crate::cluster::rules::registration::in_reply_to(&request);
    // Under a known cluster's bound key, over the agent's own credentials (or in plain mode),
    // the cluster's actor answers and records the refusal on the cluster when the request is
    // its own agent's. Anything else changes nothing and costs the actor nothing (a flood over
    // the shared bootstrap credential naming a public key never reaches its mailbox).
    let own = credential
        .as_deref()
        .is_none_or(|user| user == request.agent_public_key);
    let bound = own
        && clusters
            .shared()
            .inventory
            .get(&cluster)
            .and_then(|c| {
                c.hub
                    .as_ref()
                    .map(|h| h.agent_public_key == request.agent_public_key)
            })
            .unwrap_or(false);
    if bound
        && !request.agent_public_key.is_empty()
        && let Some(handle) = clusters.local_or_load(&cluster)
    {
        let sent = handle.try_send(Msg::VersionRefused {
            request: Box::new(request),
            reply: msg.reply().cloned(),
            credential,
            why: why.clone(),
        });
        if sent.is_ok() {
            return;
        }
        metrics.dropped("cluster");
    }
    answer_rejected(nats, msg, &cluster, &why, to).await;
}

async fn reply_rejected(nats: &Publisher, msg: &Request, cluster: &str, why: &str) {
    // An answer, never a notification: an agent ignores it wherever else it lands.
    answer_rejected(nats, msg, cluster, why, "-".into()).await;
}

/// Answers a registration REJECTED with `why`, for the request `in_reply_to` names.
async fn answer_rejected(
    nats: &Publisher,
    msg: &Request,
    cluster: &str,
    why: &str,
    in_reply_to: String,
) {
    let response = RegistrationResponse {
        cluster_name: reply_cluster(cluster).to_string(),
        state: RegistrationState::Rejected as i32,
        lease_duration_seconds: 0,
        message: why.to_string(),
        in_reply_to,
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
pub async fn reply(
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

/// Spec resyncs being answered at once, at most, before an agent that reads busy answers is
/// told when to ask again. A reconnecting site's fleet asks at once; past this the mailboxes
/// only lengthen the wait of everyone behind, and an answer later than the agent's bound is
/// asked again (a reconnect storm of 100,000 clusters answered 6.9 resyncs per agent).
pub const RESYNCS_IN_FLIGHT: usize = 512;

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
    let gate = Admission::new(config.resyncs_in_flight);
    serve(nats, subjects::SYNC_ALL, shutdown, ready, mine, |msg| {
        let cluster = subjects::cluster_token(&msg.subject, "sync")
            .unwrap_or_default()
            .to_string();
        let msg = Request::check(msg, &metrics, &ty, &cluster);
        let routed = msg
            .as_ref()
            .map(|m| check_resync(&clusters, &metrics, &config, &gate, m));
        let replies = replies.clone();
        async move {
            let Some(msg) = msg else { return };
            match routed {
                Some(Routed::Rejected { cluster, why }) => {
                    reply_resync_rejected(&replies, &msg, &cluster, why).await;
                }
                Some(Routed::Busy { cluster, busy }) => {
                    reply_resync_busy(&replies, &msg, &cluster, busy).await;
                }
                Some(Routed::Sent) | None => {}
            }
        }
    })
    .await;
}

/// What became of a resync request.
enum Routed {
    /// Handed to its cluster actor, which answers it (or dropped at a full mailbox for an
    /// agent of the previous wire, which asks again after its timeout).
    Sent,
    /// The agent reads busy answers and the hub is busy: answered with its slot.
    Busy {
        /// The cluster to answer as.
        cluster: String,
        /// When to ask again.
        busy: crate::admission::Busy,
    },
    /// Rejected: answered with the reason.
    Rejected {
        /// The cluster to answer as.
        cluster: String,
        /// What was wrong.
        why: String,
    },
}

/// Validates a resync request and hands it to its cluster actor — within the `gate`'s bound,
/// or past it (and at a full mailbox) answered busy when the agent reads busy answers — or
/// says why it was rejected.
fn check_resync(
    clusters: &Clusters,
    metrics: &Metrics,
    config: &RouterConfig,
    gate: &Admission,
    msg: &Request,
) -> Routed {
    let expected = works::resync_request_type().to_string();
    let subject_cluster = subjects::cluster_token(&msg.subject, "sync").unwrap_or_default();
    let reject = |reason: &str, why: String| {
        if metrics.rejected(&expected, reason) {
            tracing::warn!(subject = %msg.subject, reason, error = %why, "resync request rejected");
        }
        Routed::Rejected {
            cluster: subject_cluster.to_string(),
            why,
        }
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
    admit_resync(&handle, metrics, gate, msg, request, subject_cluster)
}

/// The longest an agent waits for a resync's answer (`agent/src/registration/bounds.rs`
/// `MAX_BOUND`): an admitted request still unanswered after it is dropped by its actor.
pub(crate) const LONGEST_RESYNC_WAIT: Duration = Duration::from_secs(60);

/// A resync request's kind in metrics: the digest first, or the full version map.
pub(crate) fn resync_kind(request: &SpecResyncRequest) -> &'static str {
    if request.versions.is_empty() && !request.digest.is_empty() {
        "digest"
    } else {
        "full"
    }
}

/// Hands a checked resync request to its cluster actor with a slot of the `gate` (freed when
/// the actor has answered), or answers busy. An agent of the previous wire (no `takes_busy`)
/// would read a busy answer as "in sync": it is never answered busy, and goes past the bound.
fn admit_resync(
    handle: &ClusterHandle,
    metrics: &Metrics,
    gate: &Admission,
    msg: &Request,
    request: SpecResyncRequest,
    cluster: &str,
) -> Routed {
    let kind = resync_kind(&request);
    let takes_busy = request.takes_busy;
    let busy = |busy| {
        metrics.resync_request(kind, "busy");
        Routed::Busy {
            cluster: cluster.to_string(),
            busy,
        }
    };
    let now = Instant::now();
    let permit = match gate.try_admit(now) {
        Ok(permit) => Some(permit),
        Err(b) if takes_busy => return busy(b),
        Err(_) => None,
    };
    metrics.resyncs.inc();
    let sent = handle.try_send(Msg::Resync {
        request: Box::new(request),
        reply: msg.reply().cloned(),
        permit,
    });
    match sent {
        Ok(()) => metrics.resync_request(kind, "admitted"),
        Err(_) => {
            metrics.dropped("cluster");
            if takes_busy {
                return busy(gate.busy(now));
            }
            // The agent asks again after its request timeout.
            metrics.resync_request(kind, "dropped");
        }
    }
    Routed::Sent
}

/// Answers a resync the hub did nothing for: ask again after `busy.retry_after`.
async fn reply_resync_busy(
    nats: &Publisher,
    msg: &Request,
    cluster: &str,
    busy: crate::admission::Busy,
) {
    let response = SpecResyncResponse {
        retry_after_ms: u32::try_from(busy.retry_after.as_millis())
            .unwrap_or(u32::MAX)
            .max(1),
        ..Default::default()
    };
    reply(nats, msg, works::resync_response_type(), cluster, &response).await;
}

/// Answers a rejected resync request at once, saying why.
async fn reply_resync_rejected(nats: &Publisher, msg: &Request, cluster: &str, why: String) {
    let response = SpecResyncResponse {
        error: why,
        ..Default::default()
    };
    reply(nats, msg, works::resync_response_type(), cluster, &response).await;
}

mod check;
pub mod clock;
mod dispatch;
mod status;

pub use status::{StatusFeed, remove_status_consumer, run_status, status_consumer};

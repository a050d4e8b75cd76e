//! Status reports a controller family takes (policy status, ManagedServiceAccount tokens,
//! AddOnPlacementScores): the one way they travel from the hub consuming a cluster's shard to
//! the hub holding the controllers.
//!
//! A family declares the status kinds it takes ([`Kind`]); the router hands each report of
//! such a kind to that kind's [`Sink`], which gives it to the family's [`Taker`] while this hub
//! holds the controllers and forwards it otherwise — a NATS request on
//! `flotilla.hub.controllers.report.<kind>` in the hub's account, answered with a protobuf
//! [`ReportAnswer`]: taken, busy, or refused with a reason. The holder's [`serve`] takes every
//! kind on one subscription. The router knows no family: it holds [`Sinks`] by kind.
//!
//! What becomes of a report reaches its source through its [`Ack`]: the status stream's
//! message is acknowledged once the report is taken, handed back for a delayed redelivery when
//! it could not be ([`retry_after`]), and a forwarded report is answered the same way.
//! (I/O: NATS and JetStream; the answer mapping is pure.)

use flotilla_api::v1::{ForwardedReport, ReportAnswer, ReportRefusal, report_answer};
use flotilla_bus::Event;
use flotilla_bus::envelope::EventType;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use prost::Message as _;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// The subjects forwarded reports travel on, one per kind (hub account only).
pub const SUBJECT_PREFIX: &str = "flotilla.hub.controllers.report";
/// How long a forwarding hub waits for the holder's answer before handing the message back.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// Reports one status consumer has on their way to the holder at once; past it the consumer
/// waits for one to be answered before it reads the next message (at most this many × 5 s of a
/// dead holder's timeouts overlap, instead of one after another).
pub const FORWARDS_IN_FLIGHT: usize = 64;
/// Forwarded reports the holder keeps waiting for their family's word at once; past it a new
/// one is answered busy at once.
const WAITING_MAX: usize = 4096;

/// A status kind a family takes: the status subject's kind token and the event type it must
/// carry.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The status subject's kind token (`flotilla.status.<cluster>.<kind>.<resource>`).
    pub name: &'static str,
    /// The one event type accepted on it.
    pub event_type: fn() -> EventType,
}

/// One report, as the router has checked it: its subject's cluster sent it.
pub struct Report {
    /// The decoded CloudEvent.
    pub event: Event,
    /// The event as received (forwarded verbatim).
    pub raw: bytes::Bytes,
    /// The resource id of its status subject.
    pub resource_id: String,
    /// Whether its cluster is accepted.
    pub accepted: bool,
}

/// Why a report was refused for good: counted under `reason`, then acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The rejection label (`invalid_status`, `clustername_mismatch`, `not_accepted`, …).
    pub reason: &'static str,
    /// What was wrong.
    pub why: String,
}

impl Refusal {
    /// A refusal for `reason`.
    pub fn new(reason: &'static str, why: impl Into<String>) -> Self {
        Self {
            reason,
            why: why.into(),
        }
    }
}

/// The rejection labels a holder may answer; any other is counted as `refused` (labels are
/// metric labels: a closed set).
const REASONS: [&str; 6] = [
    "invalid_status",
    "clustername_mismatch",
    "not_accepted",
    "unknown_type",
    "unknown_cluster",
    "refused",
];

fn known_reason(reason: &str) -> &'static str {
    REASONS
        .iter()
        .find(|r| **r == reason)
        .copied()
        .unwrap_or("refused")
}

/// What became of a report a family took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Dealt with: stored, superseded, or found to change nothing.
    Taken,
    /// Not now (a full mailbox, a failed write): deliver it again later.
    Retry,
}

/// Where a report's outcome goes: its status stream message, or the hub that forwarded it.
/// Dropped without a word, the message is redelivered (a forwarded one is answered busy).
pub enum Ack {
    /// The status stream's message (this hub consumes the cluster's shard).
    Stream(Box<async_nats::jetstream::Message>),
    /// A report another hub forwarded: answered when settled.
    Forwarded(oneshot::Sender<Outcome>),
}

impl std::fmt::Debug for Ack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Stream(_) => "Ack::Stream",
            Self::Forwarded(_) => "Ack::Forwarded",
        })
    }
}

impl Ack {
    /// Tells the report's source what became of it.
    pub async fn settle(self, outcome: Outcome) {
        match (self, outcome) {
            (Self::Stream(m), Outcome::Taken) => {
                if let Err(e) = m.ack().await {
                    tracing::debug!(error = %e, "acknowledging a status report failed");
                }
            }
            (Self::Stream(m), Outcome::Retry) => {
                let delivered = m.info().map_or(1, |i| i.delivered);
                let kind = async_nats::jetstream::AckKind::Nak(Some(retry_after(delivered)));
                if let Err(e) = m.ack_with(kind).await {
                    // Redelivered after ack_wait instead.
                    tracing::debug!(error = %e, "handing a status report back failed");
                }
            }
            (Self::Forwarded(tx), outcome) => {
                let _ = tx.send(outcome);
            }
        }
    }
}

/// Settles `ack`, if there is one (reports a hub makes itself carry none).
pub async fn settle(ack: Option<Ack>, outcome: Outcome) {
    if let Some(ack) = ack {
        ack.settle(outcome).await;
    }
}

/// How long JetStream waits before delivering again a report the hub could not take or store,
/// after its `delivered`-th delivery: 1 s doubling to 30 s.
pub fn retry_after(delivered: i64) -> Duration {
    let n = u32::try_from(delivered.clamp(1, 6) - 1).unwrap_or(0);
    Duration::from_secs(2u64.pow(n).min(30))
}

/// What a family implements to take the reports of its kinds.
pub trait Taker: Send + Sync + 'static {
    /// Checks one report and hands it on; its outcome goes to `ack` (now or once dealt with).
    /// `Err` is a refusal for good, with the ack to acknowledge.
    fn take(&self, report: Report, ack: Ack) -> BoxFuture<'_, Result<(), (Refusal, Ack)>>;
}

type Local = Option<Arc<dyn Taker>>;

/// Where the router sends the reports of one kind.
#[derive(Clone)]
pub struct Sink {
    kind: Kind,
    local: watch::Receiver<Local>,
    set: Arc<watch::Sender<Local>>,
    nats: async_nats::Client,
}

impl Sink {
    /// The kind it carries.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Sets (or clears) the taker of this hub.
    pub fn set_local(&self, taker: Local) {
        self.set.send_replace(taker);
    }

    /// Hands `report` to this hub's taker, or starts forwarding it to the controllers' hub.
    /// A forward is not waited for here: the caller owns it ([`Routed::Forwarding`]) and
    /// bounds how many are in flight, so a slow holder does not hold a shard's status consumer
    /// for each report's write.
    pub async fn route(&self, report: Report, ack: Ack) -> Routed {
        let local = self.local.borrow().clone();
        if let Some(taker) = local {
            return match taker.take(report, ack).await {
                Ok(()) => Routed::Settled,
                Err((refusal, ack)) => Routed::Refused(refusal, ack),
            };
        }
        Routed::Forwarding(Box::pin(forward(self.nats.clone(), self.kind, report, ack)))
    }
}

/// What [`Sink::route`] did with a report.
pub enum Routed {
    /// Taken or handed back: its ack is settled (or in its family's hands).
    Settled,
    /// Refused for good: count it, then acknowledge it.
    Refused(Refusal, Ack),
    /// On its way to the controllers' hub: the future settles the ack once the holder answers
    /// (or [`FORWARD_TIMEOUT`] passes: handed back) and yields a refusal to count and
    /// acknowledge. Dropped unfinished, the report is delivered again.
    Forwarding(BoxFuture<'static, Option<(Refusal, Ack)>>),
}

impl std::fmt::Debug for Routed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Settled => f.write_str("Settled"),
            Self::Refused(r, _) => f.debug_tuple("Refused").field(r).finish(),
            Self::Forwarding(_) => f.write_str("Forwarding"),
        }
    }
}

/// Forwards `report` to the holder of the controllers and settles `ack` with its answer.
async fn forward(
    nats: async_nats::Client,
    kind: Kind,
    report: Report,
    ack: Ack,
) -> Option<(Refusal, Ack)> {
    let forwarded = ForwardedReport {
        event: report.raw.to_vec(),
        resource_id: report.resource_id,
        accepted: report.accepted,
    };
    let request = async_nats::Request::new()
        .payload(forwarded.encode_to_vec().into())
        .timeout(Some(FORWARD_TIMEOUT));
    let subject = format!("{SUBJECT_PREFIX}.{}", kind.name);
    let answer = match nats.send_request(subject, request).await {
        Ok(m) => ReportAnswer::decode(m.payload.as_ref()).ok(),
        Err(e) => {
            tracing::debug!(kind = kind.name, error = %e, "forwarding a report failed");
            None
        }
    };
    match answer.and_then(|a| a.outcome) {
        Some(report_answer::Outcome::Taken(_)) => ack.settle(Outcome::Taken).await,
        Some(report_answer::Outcome::Refused(r)) => {
            return Some((Refusal::new(known_reason(&r.reason), r.message), ack));
        }
        // Busy, an answer this hub does not know, or none: not stored, so delivered again.
        Some(report_answer::Outcome::Busy(_)) | None => ack.settle(Outcome::Retry).await,
    }
    None
}

/// The sinks of every kind the families take, by kind (the router's).
#[derive(Clone, Default)]
pub struct Sinks {
    by_kind: Arc<HashMap<&'static str, Sink>>,
}

impl std::fmt::Debug for Sinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_kind.keys()).finish()
    }
}

impl Sinks {
    /// A sink for each of `kinds`, none with a local taker yet.
    pub fn new(nats: &async_nats::Client, kinds: impl IntoIterator<Item = Kind>) -> Self {
        let by_kind = kinds
            .into_iter()
            .map(|kind| {
                let (tx, rx) = watch::channel(None);
                let sink = Sink {
                    kind,
                    local: rx,
                    set: Arc::new(tx),
                    nats: nats.clone(),
                };
                (kind.name, sink)
            })
            .collect();
        Self {
            by_kind: Arc::new(by_kind),
        }
    }

    /// The sink of status kind `name`.
    pub fn get(&self, name: &str) -> Option<&Sink> {
        self.by_kind.get(name)
    }
}

/// The answer to a forwarded report.
fn answer(outcome: Result<Outcome, Refusal>) -> ReportAnswer {
    use report_answer::Outcome as O;
    ReportAnswer {
        outcome: Some(match outcome {
            Ok(Outcome::Taken) => O::Taken(true),
            Ok(Outcome::Retry) => O::Busy(true),
            Err(r) => O::Refused(ReportRefusal {
                reason: r.reason.to_string(),
                message: r.why,
            }),
        }),
    }
}

/// Checks a forwarded report's wrapping and event (bounded like the router's).
fn unwrap(kind: &str, payload: &[u8], max_event_bytes: usize) -> Result<Report, Refusal> {
    let forwarded = ForwardedReport::decode(payload)
        .map_err(|e| Refusal::new("invalid_status", format!("forwarded {kind} report: {e}")))?;
    let raw = bytes::Bytes::from(forwarded.event);
    let event = Event::decode(&raw, max_event_bytes)
        .map_err(|e| Refusal::new("invalid_status", e.to_string()))?;
    Ok(Report {
        event,
        raw,
        resource_id: forwarded.resource_id,
        accepted: forwarded.accepted,
    })
}

/// Takes forwarded reports of every kind in `takers` until `stop` flips (run with the
/// controllers). Each is answered once its family settles it, at once when refused, and busy
/// when its family could not take it or too many wait.
pub async fn serve(
    nats: async_nats::Client,
    takers: HashMap<&'static str, Arc<dyn Taker>>,
    max_event_bytes: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut sub = match nats.subscribe(format!("{SUBJECT_PREFIX}.*")).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to forwarded reports failed");
            return;
        }
    };
    let reply_to = |reply: async_nats::Subject, outcome| {
        let nats = nats.clone();
        async move {
            let payload = answer(outcome).encode_to_vec();
            if let Err(e) = nats.publish(reply, payload.into()).await {
                tracing::debug!(error = %e, "answering a forwarded report failed");
            }
        }
    };
    let mut waiting = FuturesUnordered::new();
    loop {
        let msg = tokio::select! {
            _ = stop.changed() => break,
            Some((reply, settled)) = waiting.next(), if !waiting.is_empty() => {
                // A family that dropped the ack did not take it.
                let outcome = match settled {
                    Ok(o) => o,
                    Err(oneshot::error::RecvError { .. }) => Outcome::Retry,
                };
                reply_to(reply, Ok(outcome)).await;
                continue;
            }
            m = sub.next() => match m { Some(m) => m, None => break },
        };
        let Some(reply) = msg.reply.clone() else {
            continue;
        };
        let kind = msg.subject.rsplit('.').next().unwrap_or_default();
        let Some(taker) = takers.get(kind) else {
            let refusal = Refusal::new("unknown_type", format!("no family takes {kind:?} reports"));
            reply_to(reply, Err(refusal)).await;
            continue;
        };
        if waiting.len() >= WAITING_MAX {
            reply_to(reply, Ok(Outcome::Retry)).await;
            continue;
        }
        let report = match unwrap(kind, &msg.payload, max_event_bytes) {
            Ok(r) => r,
            Err(refusal) => {
                reply_to(reply, Err(refusal)).await;
                continue;
            }
        };
        let (tx, rx) = oneshot::channel();
        match taker.take(report, Ack::Forwarded(tx)).await {
            Ok(()) => waiting.push(async move { (reply, rx.await) }),
            Err((refusal, _)) => reply_to(reply, Err(refusal)).await,
        }
    }
    let _ = sub.unsubscribe().await;
}

#[cfg(test)]
mod tests;

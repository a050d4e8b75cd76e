//! One status message from a spoke: decoded, checked, and routed to its cluster actor or to the
//! report sink of the controller family that takes its kind ([`crate::report`]). Every message is hostile until checked: its subject
//! names the cluster, the event must name the same one (and the same resource), the cluster must
//! be known, the payload must decode and validate. Everything refused is counted, logged (rate
//! limited by the metric), acknowledged — redelivering bad input would not make it better — and
//! its subject purged, so refused input never accumulates in the stream.

use super::RouterConfig;
use super::clock::ServerClock;
use crate::cluster::{
    ClusterHandle, Clusters, LeaseEvent, Msg, StatusEvent, WorkStatusEvent, rules,
};
use crate::metrics::Metrics;
use crate::report::Routed;
use async_nats::jetstream;
use flotilla_api::v1::{ClusterStatusReport, LeaseRenewal, WorkStatusReport};
use flotilla_bus::envelope::{EnvelopeError, Event, types};
use flotilla_bus::subjects::{self, StatusSubject};
use flotilla_bus::works;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Why a status message is refused: the metric's reason and what is logged.
pub(super) struct Refused {
    reason: Cow<'static, str>,
    why: String,
}

impl Refused {
    fn new(reason: impl Into<Cow<'static, str>>, why: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            why: why.into(),
        }
    }
}

impl From<EnvelopeError> for Refused {
    fn from(e: EnvelopeError) -> Self {
        Self::new(e.reason(), e.to_string())
    }
}

impl From<(&'static str, String)> for Refused {
    fn from((reason, why): (&'static str, String)) -> Self {
        Self::new(reason, why)
    }
}

/// Refuses the status messages of one subject: counts, logs, purges and acknowledges.
struct Refuser<'a> {
    metrics: &'a Arc<Metrics>,
    config: &'a RouterConfig,
    subject: &'a str,
    sequence: Option<u64>,
}

impl Refuser<'_> {
    async fn refuse(&self, ty: &str, r: Refused, msg: jetstream::Message) {
        self.count(ty, &r);
        let _ = msg.ack().await;
    }

    fn count(&self, ty: &str, r: &Refused) {
        count(
            self.metrics,
            self.config.janitor.as_ref(),
            self.subject,
            self.sequence,
            ty,
            r,
        );
    }

    /// The same counting, for a refusal that comes back later (a forwarded report's).
    fn owned(&self) -> OwnedRefuser {
        OwnedRefuser {
            metrics: self.metrics.clone(),
            janitor: self.config.janitor.clone(),
            subject: self.subject.to_string(),
            sequence: self.sequence,
        }
    }
}

struct OwnedRefuser {
    metrics: Arc<Metrics>,
    janitor: Option<crate::janitor::Janitor>,
    subject: String,
    sequence: Option<u64>,
}

impl OwnedRefuser {
    fn count(&self, ty: &str, r: &Refused) {
        count(
            &self.metrics,
            self.janitor.as_ref(),
            &self.subject,
            self.sequence,
            ty,
            r,
        );
    }
}

/// Counts a refused status message and has the janitor purge it.
fn count(
    metrics: &Metrics,
    janitor: Option<&crate::janitor::Janitor>,
    subject: &str,
    sequence: Option<u64>,
    ty: &str,
    r: &Refused,
) {
    if metrics.rejected(ty, &r.reason) {
        tracing::warn!(subject = %subject, reason = %r.reason, error = %r.why, "status event rejected");
    }
    if let Some(janitor) = janitor {
        let cluster = StatusSubject::parse(subject).map_or("", |p| p.cluster);
        janitor.purge(cluster, subject, sequence);
    }
}

/// Reports one shard's status consumer has on their way to the controllers' hub (it owns them
/// and keeps at most [`crate::report::FORWARDS_IN_FLIGHT`]).
pub(super) type InFlight = FuturesUnordered<BoxFuture<'static, ()>>;

/// Decodes, checks and routes one status message.
pub(super) async fn handle_status(
    clusters: &Clusters,
    metrics: &Arc<Metrics>,
    config: &RouterConfig,
    msg: jetstream::Message,
    in_flight: &mut InFlight,
    clock: &mut ServerClock,
) {
    let info = msg.info().ok();
    // When the server stored it, on this hub's clock (now, without a stream's metadata).
    let server_time = info.as_ref().map_or_else(SystemTime::now, |i| {
        let stored = SystemTime::from(i.published);
        clock.observe(Instant::now(), SystemTime::now(), stored, i.pending);
        clock.local(stored)
    });
    let subject = msg.subject.to_string();
    let refuser = Refuser {
        metrics,
        config,
        subject: &subject,
        sequence: info.as_ref().map(|i| i.stream_sequence),
    };
    let (parsed, event) = match StatusSubject::parse(&subject)
        .map_err(|e| Refused::new("bad_subject", e.to_string()))
        .and_then(|p| Ok((p, Event::decode(&msg.payload, config.max_event_bytes)?)))
    {
        Ok(pe) => pe,
        Err(r) => return refuser.refuse("unknown", r, msg).await,
    };
    let ty = event.event_type.to_string();
    metrics.received(&ty);
    let handle = match sender(clusters, &parsed, &event) {
        Ok(h) => h,
        Err(r) => return refuser.refuse(&ty, r, msg).await,
    };
    let sent = match (parsed.kind, parsed.resource_id) {
        (subjects::KIND_LEASE, None) if event.event_type == types::lease_renewal() => {
            match event.decode_data::<LeaseRenewal>("LeaseRenewal") {
                Ok(renewal) => handle.try_send(Msg::Lease(Box::new(LeaseEvent {
                    renewal,
                    sequence: event.sequence_id,
                    server_time,
                    ack: Some(msg),
                }))),
                Err(e) => return refuser.refuse(&ty, e.into(), msg).await,
            }
        }
        (subjects::KIND_CLUSTER, None) if event.event_type == types::cluster_status() => {
            match cluster_report(&event) {
                Ok(report) => handle.try_send(Msg::Status(Box::new(StatusEvent {
                    report,
                    sequence: event.sequence_id,
                    hash: event.status_hash.clone(),
                    server_time,
                    ack: Some(msg),
                }))),
                Err(r) => return refuser.refuse(&ty, r, msg).await,
            }
        }
        (subjects::KIND_WORK, Some(rid)) if event.event_type == works::status_type() => {
            match work_report(clusters, &parsed, rid, &event) {
                Ok(report) => handle.try_send(Msg::WorkStatus(Box::new(WorkStatusEvent {
                    resource_id: rid.to_string(),
                    report,
                    sequence: event.sequence_id,
                    hash: event.status_hash.clone(),
                    server_time,
                    ack: Some(msg),
                    traceparent: event.traceparent.clone(),
                }))),
                Err(r) => return refuser.refuse(&ty, r, msg).await,
            }
        }
        (kind, Some(rid)) if config.reports.get(kind).is_some() => {
            let at = (ty.as_str(), &parsed, rid);
            return route_report(clusters, config, &refuser, at, event, msg, in_flight).await;
        }
        _ => return refuser.refuse(&ty, unknown_type(&ty, &parsed), msg).await,
    };
    if sent.is_err() {
        // Not acknowledged: JetStream redelivers it after ack_wait.
        metrics.dropped("cluster");
    }
}

fn unknown_type(ty: &str, parsed: &StatusSubject<'_>) -> Refused {
    Refused::new(
        "unknown_type",
        format!("type {ty} is not accepted on status kind {:?}", parsed.kind),
    )
}

/// The actor of the cluster the subject names, once the event names the same cluster.
fn sender(
    clusters: &Clusters,
    parsed: &StatusSubject<'_>,
    event: &Event,
) -> Result<ClusterHandle, Refused> {
    if event.cluster != parsed.cluster {
        return Err(Refused::new(
            "clustername_mismatch",
            format!(
                "clustername {:?} does not match the subject's cluster {:?}",
                event.cluster, parsed.cluster
            ),
        ));
    }
    clusters.local_or_load(parsed.cluster).ok_or_else(|| {
        Refused::new(
            "unknown_cluster",
            format!("cluster {:?} is not registered", parsed.cluster),
        )
    })
}

/// A cluster status report, decoded and checked: its own cluster, valid claims, managed
/// namespaces and add-on health.
fn cluster_report(event: &Event) -> Result<ClusterStatusReport, Refused> {
    let report = event.decode_data::<ClusterStatusReport>("ClusterStatusReport")?;
    if report.cluster_name != event.cluster {
        return Err(Refused::new(
            "clustername_mismatch",
            format!(
                "clusterName {:?} does not match {:?}",
                report.cluster_name, event.cluster
            ),
        ));
    }
    rules::validate_claims(&report.claims)
        .and_then(|()| rules::validate_namespace_report(&report.managed_namespaces))
        .and_then(|()| rules::addons::validate_addon_health(&report.addon_health))
        .map_err(|why| Refused::new("invalid_status", why))?;
    Ok(report)
}

/// A work status report, decoded and checked: its own cluster and resource, and a work the hub
/// has. A work the hub does not have is refused here, not in the actor: a cluster flooding
/// made-up works must not fill its actor's mailbox (dropped messages would wait for
/// redelivery) nor delay its real status.
fn work_report(
    clusters: &Clusters,
    parsed: &StatusSubject<'_>,
    rid: &str,
    event: &Event,
) -> Result<WorkStatusReport, Refused> {
    let report = event.decode_data::<WorkStatusReport>("WorkStatusReport")?;
    if report.cluster_name != event.cluster || report.resource_id != rid {
        return Err(Refused::new(
            "clustername_mismatch",
            format!(
                "clusterName {:?} / resourceId {:?} do not match the subject ({:?}, {rid:?})",
                report.cluster_name, report.resource_id, parsed.cluster
            ),
        ));
    }
    let work = crate::keys::ObjectRef::new(parsed.cluster, report.work_name.as_str());
    if clusters.shared().works.get(&work.inventory_key()).is_none() {
        // In a recovery window it names the orphan (the work the restored store lacks).
        let generation = report.observed_generation;
        let recovery = &clusters.shared().recovery;
        recovery.offer(parsed.cluster, rid, &report.work_name, generation);
        return Err(Refused::new(
            "unknown_work",
            format!(
                "cluster {:?} has no work {:?}",
                parsed.cluster, report.work_name
            ),
        ));
    }
    Ok(report)
}

/// A report of a kind a controller family takes: of the kind's event type, handed to its
/// sink (the family here, or the hub holding the controllers) with whether its cluster is
/// accepted; a refusal is counted and acknowledged.
async fn route_report(
    clusters: &Clusters,
    config: &RouterConfig,
    refuser: &Refuser<'_>,
    (ty, parsed, rid): (&str, &StatusSubject<'_>, &str),
    event: Event,
    msg: jetstream::Message,
    in_flight: &mut InFlight,
) {
    let Some(sink) = config.reports.get(parsed.kind) else {
        return refuser.refuse(ty, unknown_type(ty, parsed), msg).await;
    };
    if event.event_type != (sink.kind().event_type)() {
        return refuser.refuse(ty, unknown_type(ty, parsed), msg).await;
    }
    let accepted = clusters
        .shared()
        .inventory
        .get(&event.cluster)
        .is_some_and(|c| rules::accepted(&c));
    let report = crate::report::Report {
        raw: msg.payload.clone(),
        event,
        resource_id: rid.to_string(),
        accepted,
    };
    let ack = crate::report::Ack::Stream(Box::new(msg));
    match sink.route(report, ack).await {
        Routed::Settled => {}
        Routed::Refused(refusal, ack) => {
            refuser.count(ty, &Refused::new(refusal.reason, refusal.why));
            ack.settle(crate::report::Outcome::Taken).await;
        }
        Routed::Forwarding(forward) => {
            let counter = refuser.owned();
            let ty = ty.to_string();
            in_flight.push(Box::pin(async move {
                if let Some((refusal, ack)) = forward.await {
                    counter.count(&ty, &Refused::new(refusal.reason, refusal.why));
                    ack.settle(crate::report::Outcome::Taken).await;
                }
            }));
        }
    }
}

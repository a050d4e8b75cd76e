//! `flotilla.peers.<cluster>`: the clusters' MirrorPeer requests, served by the hub holding the
//! controllers (no forwarding: no other hub subscribes). Each request is hostile until checked:
//! its reply subject (answered only on an inbox), that its subject names a known, accepted
//! cluster, that cluster's request rate ([`super::rules::limit`]: past it the cluster is told
//! to ask again later, before anything is decoded or reaches the task's mailbox), its envelope
//! and type, and that its envelope and payload name the same cluster (in secure mode only that
//! cluster's own credentials may publish there). The payload's parts are checked by
//! [`super::rules::check`]. Warnings about an accepted cluster's requests are logged at most
//! once per interval per cluster, with the number left out.

use super::MirrorPeers;
use super::rules::limit::{Limiter, RequestLimits};
use crate::metrics::Metrics;
use crate::router::{Request, RouterConfig};
use flotilla_api::v1::{PeerSyncRequest, PeerSyncResponse};
use flotilla_bus::envelope::Event;
use flotilla_bus::{peersecrets, subjects};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;

/// What the route works with.
pub struct Deps {
    /// Every cluster (only accepted ones are served).
    pub inventory: crate::inventory::ClusterInventory,
    /// Counts rejections and refusals at the limit.
    pub metrics: Arc<Metrics>,
    /// Router settings (the largest event, answers).
    pub router: RouterConfig,
    /// The per-cluster request and warning limits.
    pub limits: RequestLimits,
}

/// The metric label of a refusal at the request limit (`flotilla_hub_limit_refusals_total`).
pub const RATE_LIMIT: &str = "mirrorpeer_requests";

/// Serves the peers' requests until `shutdown` flips.
pub async fn run(
    nats: async_nats::Client,
    peers: MirrorPeers,
    deps: Deps,
    shutdown: watch::Receiver<bool>,
) {
    let answers = crate::router::answers(&nats, &deps.router);
    let ready = deps.router.ready.clone();
    let limiter = Mutex::new(Limiter::new(deps.limits));
    crate::router::serve(
        nats,
        peersecrets::PEERS_ALL,
        shutdown,
        ready,
        |_| true,
        |msg| {
            let (answers, peers, deps, limiter) = (&answers, &peers, &deps, &limiter);
            async move {
                let ty = peersecrets::request_type().to_string();
                let cluster = subjects::cluster_token(&msg.subject, "peers")
                    .unwrap_or_default()
                    .to_string();
                let Some(msg) = Request::check(msg, &deps.metrics, &ty, &cluster) else {
                    return;
                };
                let answer = match accepted(&msg, &cluster, &deps.inventory) {
                    Err((reason, why)) => {
                        // Not a cluster the hub serves: the hub-wide log budget only (no
                        // per-cluster state for names anyone may make up).
                        if deps.metrics.rejected(&ty, reason) {
                            tracing::warn!(subject = %msg.subject, reason, error = %why, "MirrorPeer request rejected");
                        }
                        refusal(why)
                    }
                    Ok(()) => served(&msg, &cluster, peers, deps, limiter, &ty).await,
                };
                crate::router::reply(answers, &msg, peersecrets::response_type(), &cluster, &answer)
                    .await;
            }
        },
    )
    .await;
}

fn refusal(error: String) -> PeerSyncResponse {
    PeerSyncResponse {
        error,
        ..Default::default()
    }
}

/// The answer to an accepted cluster's request: refused past its rate, or when it does not
/// decode, else the task's. A refusal is logged within the cluster's warning budget.
async fn served(
    msg: &Request,
    cluster: &str,
    peers: &MirrorPeers,
    deps: &Deps,
    limiter: &Mutex<Limiter>,
    ty: &str,
) -> PeerSyncResponse {
    let now = Instant::now();
    let (admitted, left_out) = {
        let mut l = limiter.lock().unwrap_or_else(|p| p.into_inner());
        let left_out = l.sweep(now, false);
        (l.admit(cluster, now), left_out)
    };
    for (cluster, left_out) in left_out {
        tracing::warn!(cluster, left_out, "MirrorPeer request warnings left out");
    }
    // Whether the hub-wide budget of rejection log lines has room (counted as before; a
    // refusal of the task's has no count of its own).
    let (answer, hub_wide) = match admitted {
        Err(why) => (refusal(why), deps.metrics.limit_refused(RATE_LIMIT)),
        Ok(()) => match decoded(msg, cluster, &deps.router) {
            Ok(request) => (peers.sync(cluster, request).await, true),
            Err((reason, why)) => (refusal(why), deps.metrics.rejected(ty, reason)),
        },
    };
    if !answer.error.is_empty() {
        let warn = limiter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .warn(cluster, Instant::now());
        if let Some(left_out) = warn
            && hub_wide
        {
            tracing::warn!(cluster, left_out, error = %answer.error, "MirrorPeer request refused");
        }
    }
    answer
}

/// Whether the subject names a cluster the hub serves: a valid name, known and accepted.
fn accepted(
    msg: &Request,
    cluster: &str,
    inventory: &crate::inventory::ClusterInventory,
) -> Result<(), (&'static str, String)> {
    if flotilla_api::names::validate_cluster_name(cluster).is_err() {
        return Err((
            "bad_subject",
            format!("subject {:?} names no cluster", msg.subject),
        ));
    }
    let known = inventory.get(cluster);
    if !known
        .as_deref()
        .is_some_and(crate::cluster::rules::accepted)
    {
        return Err((
            "unknown_cluster",
            format!("cluster {cluster:?} is not an accepted ManagedCluster"),
        ));
    }
    Ok(())
}

/// The request of `cluster` (accepted), or why it is refused (a metric reason and a message).
fn decoded(
    msg: &Request,
    cluster: &str,
    config: &RouterConfig,
) -> Result<PeerSyncRequest, (&'static str, String)> {
    let event = Event::decode(&msg.payload, config.max_event_bytes)
        .map_err(|e| ("bad_envelope", e.to_string()))?;
    if event.event_type != peersecrets::request_type() {
        return Err((
            "unknown_type",
            format!(
                "type {} is not accepted on {}",
                event.event_type, msg.subject
            ),
        ));
    }
    if event.cluster != cluster {
        return Err((
            "clustername_mismatch",
            format!(
                "clustername {:?} does not match the subject's cluster {cluster:?}",
                event.cluster
            ),
        ));
    }
    event
        .decode_data("PeerSyncRequest")
        .map_err(|e| ("bad_payload", e.to_string()))
}

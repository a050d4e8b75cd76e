//! `flotilla.peers.<cluster>`: the clusters' MirrorPeer requests, served by the hub holding the
//! controllers (no forwarding: no other hub subscribes). Each request is hostile until checked:
//! its reply subject (answered only on an inbox), its envelope and type, the cluster its
//! subject, envelope and payload name (the same one; in secure mode only that cluster's own
//! credentials may publish there), and that the cluster is known and accepted. The payload's
//! parts are checked by [`super::rules::check`].

use super::MirrorPeers;
use crate::metrics::Metrics;
use crate::router::{Request, RouterConfig};
use flotilla_api::v1::{PeerSyncRequest, PeerSyncResponse};
use flotilla_bus::envelope::Event;
use flotilla_bus::{peersecrets, subjects};
use std::sync::Arc;
use tokio::sync::watch;

/// Serves the peers' requests until `shutdown` flips.
pub async fn run(
    nats: async_nats::Client,
    peers: MirrorPeers,
    inventory: crate::inventory::ClusterInventory,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    shutdown: watch::Receiver<bool>,
) {
    let answers = crate::router::answers(&nats, &config);
    let ready = config.ready.clone();
    crate::router::serve(
        nats,
        peersecrets::PEERS_ALL,
        shutdown,
        ready,
        |_| true,
        |msg| {
            let (answers, peers, inventory, metrics, config) =
                (&answers, &peers, &inventory, &metrics, &config);
            async move {
                let ty = peersecrets::request_type().to_string();
                let Some(msg) = Request::check(msg, metrics, &ty) else {
                    return;
                };
                let cluster = subjects::cluster_token(&msg.subject, "peers")
                    .unwrap_or_default()
                    .to_string();
                let answer = match checked(&msg, &cluster, inventory, config) {
                    Ok(request) => peers.sync(&cluster, request).await,
                    Err((reason, why)) => {
                        if metrics.rejected(&ty, reason) {
                            tracing::warn!(subject = %msg.subject, reason, error = %why, "MirrorPeer request rejected");
                        }
                        PeerSyncResponse {
                            error: why,
                            ..Default::default()
                        }
                    }
                };
                crate::router::reply(answers, &msg, peersecrets::response_type(), &cluster, &answer)
                    .await;
            }
        },
    )
    .await;
}

/// The request of `cluster`, or why it is refused (a metric reason and a message).
fn checked(
    msg: &Request,
    cluster: &str,
    inventory: &crate::inventory::ClusterInventory,
    config: &RouterConfig,
) -> Result<PeerSyncRequest, (&'static str, String)> {
    if flotilla_api::names::validate_cluster_name(cluster).is_err() {
        return Err((
            "bad_subject",
            format!("subject {:?} names no cluster", msg.subject),
        ));
    }
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
    let request: PeerSyncRequest = event
        .decode_data("PeerSyncRequest")
        .map_err(|e| ("bad_payload", e.to_string()))?;
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
    Ok(request)
}

//! The add-on agents' NATS subjects, routed to the add-ons:
//! - `flotilla.addon.<addon>.<cluster>.lease`: lease renewals (Lease health);
//! - `flotilla.addon.<addon>.<cluster>.score`: AddOnPlacementScore reports for the cluster;
//! - `flotilla.addoncreds.<cluster>`: the cluster agent asks for an installed add-on agent's
//!   NATS credentials (secure mode).
//!
//! The subject names the add-on and the cluster; in secure mode the server only lets an
//! add-on agent publish on its own, so a payload naming another cluster or add-on is refused.

use super::handle::AddOns;
use crate::metrics::Metrics;
use crate::router::RouterConfig;
use flotilla_api::v1::{
    AddOnCredentialsRequest, AddOnCredentialsResponse, AddOnLeaseRenewal, AddOnPlacementScoreReport,
};
use flotilla_bus::addons::{self, AddOnSubject};
use flotilla_bus::envelope::{EnvelopeError, Event};
use std::sync::Arc;
use tokio::sync::watch;

/// Serves the add-on agents' subjects until `shutdown` flips.
pub async fn run(
    nats: async_nats::Client,
    addons: AddOns,
    scores: crate::placement::scores::Scores,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    shutdown: watch::Receiver<bool>,
) {
    let ready = config.ready.clone();
    // Only the hub holding the controllers runs this: every message is its own.
    crate::router::serve(
        nats,
        addons::ALL,
        shutdown,
        ready,
        |_| true,
        |msg| handle(&addons, &scores, &metrics, &config, msg),
    )
    .await;
}

/// Serves add-on credential requests until `shutdown` flips.
pub async fn run_credentials(
    nats: async_nats::Client,
    addons: AddOns,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    shutdown: watch::Receiver<bool>,
) {
    let answers = crate::router::answers(&nats, &config);
    let ready = config.ready.clone();
    let mine = |_: &str| true;
    crate::router::serve(
        nats,
        addons::CREDENTIALS_ALL,
        shutdown,
        ready,
        mine,
        |msg| credentials(&answers, &addons, &metrics, &config, msg),
    )
    .await;
}

async fn handle(
    addons: &AddOns,
    scores: &crate::placement::scores::Scores,
    metrics: &Metrics,
    config: &RouterConfig,
    msg: async_nats::Message,
) {
    let reject = |ty: &str, reason: &str, why: String| {
        if metrics.rejected(ty, reason) {
            tracing::warn!(subject = %msg.subject, reason, error = %why, "add-on message rejected");
        }
    };
    let subject = match AddOnSubject::parse(&msg.subject) {
        Ok(s) => s,
        Err(e) => return reject("", "bad_subject", e.to_string()),
    };
    let event = match Event::decode(&msg.payload, config.max_event_bytes) {
        Ok(e) => e,
        Err(e) => return reject("", "bad_envelope", e.to_string()),
    };
    let ty = event.event_type.to_string();
    if event.cluster != subject.cluster {
        return reject(
            &ty,
            "clustername_mismatch",
            format!(
                "clustername {:?} does not match the subject's cluster {:?}",
                event.cluster, subject.cluster
            ),
        );
    }
    if addons
        .get_cluster_addon(subject.cluster, subject.addon)
        .is_none()
    {
        return reject(
            &ty,
            "not_installed",
            format!(
                "add-on {:?} is not installed on cluster {:?}",
                subject.addon, subject.cluster
            ),
        );
    }
    match subject.kind {
        addons::KIND_LEASE if event.event_type == addons::lease_type() => {
            let lease = match event.decode_data::<AddOnLeaseRenewal>("AddOnLeaseRenewal") {
                Ok(l) => l,
                Err(e) => return reject(&ty, "bad_payload", e.to_string()),
            };
            if lease.cluster_name != subject.cluster || lease.addon_name != subject.addon {
                return reject(
                    &ty,
                    "clustername_mismatch",
                    format!(
                        "lease names {}/{}, the subject {}/{}",
                        lease.cluster_name, lease.addon_name, subject.cluster, subject.addon
                    ),
                );
            }
            // The hub's clock decides freshness: an agent's skewed clock must not keep a dead
            // add-on available, nor make a live one look stale.
            addons.renew_lease(subject.cluster, subject.addon, std::time::SystemTime::now());
        }
        addons::KIND_SCORE if event.event_type == flotilla_bus::scores::report_type() => {
            let report =
                match event.decode_data::<AddOnPlacementScoreReport>("AddOnPlacementScoreReport") {
                    Ok(r) => r,
                    Err(e) => return reject(&ty, "bad_payload", e.to_string()),
                };
            if report.cluster_name != subject.cluster {
                return reject(
                    &ty,
                    "clustername_mismatch",
                    format!(
                        "score for cluster {:?} on cluster {:?}'s subject",
                        report.cluster_name, subject.cluster
                    ),
                );
            }
            if let Err(why) = crate::placement::scores::validate_report(&report) {
                return reject(&ty, "invalid_status", why.to_string());
            }
            let report = crate::placement::scores::ScoreReport {
                report,
                sequence: event.sequence_id,
                ack: None,
            };
            if scores.try_report(report).is_err() {
                metrics.dropped("scores");
            }
        }
        other => reject(
            &ty,
            "unknown_kind",
            format!("{other:?} with event type {ty} is not an add-on message"),
        ),
    }
}

async fn credentials(
    nats: &flotilla_bus::publish::Publisher,
    addons: &AddOns,
    metrics: &Metrics,
    config: &RouterConfig,
    msg: async_nats::Message,
) {
    let ty = addons::credentials_request_type().to_string();
    let cluster = flotilla_bus::subjects::cluster_token(&msg.subject, "addoncreds")
        .unwrap_or_default()
        .to_string();
    let Some(msg) = crate::router::Request::check(msg, metrics, &ty, &cluster) else {
        return;
    };
    let answer = match credentials_for(addons, &cluster, &msg, config).await {
        Ok(r) => r,
        Err(why) => {
            if metrics.rejected(&addons::credentials_request_type().to_string(), "refused") {
                tracing::warn!(subject = %msg.subject, error = %why, "add-on credentials refused");
            }
            AddOnCredentialsResponse {
                message: why.to_string(),
                ..Default::default()
            }
        }
    };
    crate::router::reply(
        nats,
        &msg,
        addons::credentials_response_type(),
        &cluster,
        &answer,
    )
    .await;
}

async fn credentials_for(
    addons: &AddOns,
    cluster: &str,
    msg: &async_nats::Message,
    config: &RouterConfig,
) -> Result<AddOnCredentialsResponse, RequestError> {
    let event = Event::decode(&msg.payload, config.max_event_bytes)?;
    if event.event_type != addons::credentials_request_type() {
        return Err(RequestError::NotARequest(event.event_type.to_string()));
    }
    let req: AddOnCredentialsRequest = event.decode_data("AddOnCredentialsRequest")?;
    if req.cluster_name != cluster {
        return Err(RequestError::OtherCluster {
            given: req.cluster_name,
            cluster: cluster.into(),
        });
    }
    Ok(addons
        .issue_credentials(cluster, &req.addon_name, &req.public_key)
        .await?)
}

/// Why a credentials request is refused (the agent is told this text).
#[derive(Debug, thiserror::Error)]
enum RequestError {
    /// Not an envelope.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// An event of another type.
    #[error("event type {0} is not a credentials request")]
    NotARequest(String),
    /// A request naming another cluster than its subject.
    #[error("clusterName {given:?} does not match the subject's cluster {cluster:?}")]
    OtherCluster {
        /// The cluster the request names.
        given: String,
        /// The subject's.
        cluster: String,
    },
    /// The add-on's key gets no credentials.
    #[error(transparent)]
    Refused(#[from] super::agents::CredentialsError),
}

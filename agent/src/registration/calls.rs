//! The requests the agent makes of the hub — registration and spec resync — as calls in flight
//! that the registration loop polls beside its timers, and how their answers are read.

use crate::AgentConfig;
use flotilla_api::v1::{
    RegistrationRequest, RegistrationResponse, SpecResyncRequest, SpecResyncResponse,
};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::{PublishError, Publisher};
use flotilla_bus::subjects;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

/// A request to the hub in flight: polled by the loop beside everything else, so a hub slow to
/// answer (restarting, not yet holding this cluster's shard, on the far side of a bad link)
/// delays only its answer, never a lease renewal or a status report.
///
/// The `Mutex` only makes it `Sync` (the actor is borrowed across awaits by its `&self`
/// methods); it is polled through `get_mut`, which never locks.
pub(super) struct Call<T>(std::sync::Mutex<Pin<Box<dyn Future<Output = T> + Send>>>);

impl<T> Call<T> {
    pub(super) fn new(call: impl Future<Output = T> + Send + 'static) -> Self {
        Self(std::sync::Mutex::new(Box::pin(call)))
    }
}

/// The answer of the call in flight (never, without one). Cancel-safe: the call stays in its
/// slot when another branch of the loop wins.
pub(super) async fn answer_of<T>(call: &mut Option<Call<T>>) -> T {
    match call {
        Some(call) => {
            call.0
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .await
        }
        None => std::future::pending().await,
    }
}

/// Why a registration request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The request cannot be encoded (too large): asking again will not help soon.
    #[error("the registration request cannot be sent: {0}")]
    Encode(#[source] PublishError),
    /// No answer (hub or NATS away): retry with backoff.
    #[error("the registration request was not answered: {0}")]
    Unanswered(#[source] PublishError),
    /// An answer that cannot be read: retry with backoff.
    #[error("the registration answer is unreadable: {0}")]
    Unreadable(#[source] PublishError),
    /// An answer that is not the answer to this request (another cluster's, or another
    /// request's): retry with backoff.
    #[error("not the answer to this registration request: {0}")]
    NotOurs(String),
}

impl From<PublishError> for AskError {
    fn from(e: PublishError) -> Self {
        match e {
            e if e.is_permanent() => Self::Encode(e),
            e @ PublishError::Decode { .. } => Self::Unreadable(e),
            e => Self::Unanswered(e),
        }
    }
}

/// Why a spec resync came to nothing (logged where it happened).
pub(super) enum ResyncFailed {
    /// Refused or unreadable: the next resync interval tries again.
    Refused,
    /// The hub is busy answering others and did nothing: ask again after this long (its slot
    /// in the hub's queue).
    Busy(Duration),
    /// Not answered (hub or NATS away): tried again soon.
    Unanswered,
}

/// An answer and how long its request waited: the answer time when answered, the bound it had
/// when not.
pub(super) struct Timed<T> {
    pub(super) answer: T,
    pub(super) took: Duration,
}

impl<T> Timed<T> {
    /// Runs `call`, timing it.
    pub(super) async fn of(call: impl Future<Output = T>) -> Self {
        let start = Instant::now();
        let answer = call.await;
        Self {
            answer,
            took: start.elapsed(),
        }
    }
}

/// What a spec resync request needs, owned by the call in flight.
pub(super) struct ResyncCall {
    pub(super) requests: Publisher,
    pub(super) source: String,
    pub(super) cluster: String,
}

impl ResyncCall {
    /// The resync: `first`, and when the hub asks for it (its digest differs) the full map
    /// `versions` with the works' `uids`. The time is the last request's.
    pub(super) async fn run(
        self,
        first: SpecResyncRequest,
        versions: std::collections::HashMap<String, i64>,
        uids: std::collections::HashMap<String, String>,
    ) -> Timed<Result<SpecResyncResponse, ResyncFailed>> {
        let answer = Timed::of(self.send(&first)).await;
        match answer.answer {
            Ok(r) if r.send_versions => {
                let full = SpecResyncRequest {
                    versions,
                    uids,
                    digest: String::new(),
                    ..first
                };
                Timed::of(self.send(&full)).await
            }
            _ => answer,
        }
    }

    /// Sends one resync request and reads the answer.
    pub(super) async fn send(
        &self,
        request: &SpecResyncRequest,
    ) -> Result<SpecResyncResponse, ResyncFailed> {
        let ev = Event::new(
            flotilla_bus::works::resync_request_type(),
            self.source.clone(),
            &self.cluster,
            request,
        );
        let answer = self
            .requests
            .request::<SpecResyncResponse>(subjects::sync(&self.cluster), &ev, "SpecResyncResponse")
            .await;
        match answer {
            Ok(resp) if !resp.error.is_empty() => {
                tracing::warn!(error = %resp.error, "the hub rejected the spec resync request");
                Err(ResyncFailed::Refused)
            }
            Ok(resp) if resp.retry_after_ms > 0 => {
                tracing::debug!(
                    retry_after_ms = resp.retry_after_ms,
                    "the hub is busy with other resyncs; asking again then"
                );
                Err(ResyncFailed::Busy(super::busy_wait(resp.retry_after_ms)))
            }
            Ok(resp) => Ok(resp),
            Err(e @ PublishError::Decode { .. }) => {
                tracing::warn!(error = %e, "unreadable spec resync answer");
                Err(ResyncFailed::Refused)
            }
            Err(e) if e.is_permanent() => {
                tracing::error!(error = %e, "spec resync request cannot be sent");
                Err(ResyncFailed::Refused)
            }
            Err(e) => {
                tracing::debug!(error = %e, "spec resync not answered; retrying soon");
                Err(ResyncFailed::Unanswered)
            }
        }
    }
}

/// Sends one registration request over `client` and reads the hub's answer.
pub async fn ask_hub(
    client: &async_nats::Client,
    config: &AgentConfig,
    source: &str,
    request: &RegistrationRequest,
) -> Result<RegistrationResponse, AskError> {
    ask_hub_within(
        client,
        None,
        config,
        source,
        request,
        config.nats.request_timeout,
    )
    .await
}

/// [`ask_hub`], waiting at most `bound` for the answer, which comes through `spoke` when the
/// agent has one (its own connection on the prefix wire).
pub(super) async fn ask_hub_within(
    client: &async_nats::Client,
    spoke: Option<flotilla_bus::spoke::Spoke>,
    config: &AgentConfig,
    source: &str,
    request: &RegistrationRequest,
    bound: Duration,
) -> Result<RegistrationResponse, AskError> {
    let request_id = request.request_id.clone();
    let ev = Event::new(
        types::registration_request(),
        source.to_string(),
        &config.cluster_name,
        request,
    );
    let publisher = Publisher::new(client.clone(), config.max_event_bytes, bound).with_spoke(spoke);
    let response = publisher
        .request::<RegistrationResponse>(
            subjects::register(&config.cluster_name),
            &ev,
            "RegistrationResponse",
        )
        .await?;
    answers(&response, &config.cluster_name, &request_id)?;
    Ok(response)
}

/// Whether `response` answers this agent's request `request_id`: a reply can land on any
/// subject someone names, so an answer for another cluster or request is not taken.
fn answers(
    response: &RegistrationResponse,
    cluster: &str,
    request_id: &str,
) -> Result<(), AskError> {
    if response.cluster_name != cluster {
        return Err(AskError::NotOurs(format!(
            "an answer for cluster {:?}, not {cluster:?}",
            response.cluster_name
        )));
    }
    // A hub that predates request ids answers without in_reply_to.
    if !response.in_reply_to.is_empty() && response.in_reply_to != request_id {
        return Err(AskError::NotOurs(format!(
            "an answer to request {:?}, not {request_id:?}",
            response.in_reply_to
        )));
    }
    Ok(())
}

//! The router's hand-off of ManagedServiceAccount reports: decoded and checked against their
//! subject (cluster and resource id, bounded fields, cluster accepted), then handed to the
//! accounts' task with `try_send` — here while this hub runs the controllers, else forwarded
//! to the hub that does over NATS ([`FORWARD_SUBJECT`], hub account only). The task checks the
//! rest (an account that exists, a box that opens).
//!
//! A report is acknowledged in the status stream only once the task has dealt with it: stored,
//! refused for good, or found to change nothing. Bad input is refused, counted and
//! acknowledged. A full mailbox, a failed store write or an unanswered forward leaves the
//! message unacknowledged and asks JetStream to deliver it again after a backoff
//! ([`super::rules::retry_after`]): a forwarded report is answered [`TAKEN`] only after the
//! task's write, and `busy` when the mailbox is full or the write failed.

use super::ServiceAccounts;
use super::actor::{Outcome, Reply, ReportIn};
use flotilla_api::v1::ServiceAccountTokenReport;
use flotilla_bus::Event;

/// Why a report was refused (for the router's counters): `(reason, message)`.
pub type Refusal = (&'static str, String);

/// Where ManagedServiceAccount reports go to the controllers' hub.
pub const FORWARD_SUBJECT: &str = "flotilla.hub.controllers.msa";
/// Header of a forwarded report: the resource id of its status subject.
pub const RESOURCE_HEADER: &str = "Flotilla-Resource-Id";
/// Header of a forwarded report: `1` when its cluster is accepted.
pub const ACCEPTED_HEADER: &str = "Flotilla-Accepted";
/// The answer to a forwarded report the task has stored (or refused for good).
pub const TAKEN: &str = "taken";
/// The answer to a forwarded report the task could not take or store now: deliver it again.
pub const BUSY: &str = "busy";

/// Where a hub sends reports: the local accounts while it holds the controllers, the
/// controllers' hub otherwise.
#[derive(Clone)]
pub struct MsaSink {
    local: tokio::sync::watch::Receiver<Option<ServiceAccounts>>,
    nats: async_nats::Client,
}

impl std::fmt::Debug for MsaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsaSink")
            .field("local", &self.local.borrow().is_some())
            .finish()
    }
}

/// Sets the local accounts of an [`MsaSink`].
pub struct LocalAccounts(tokio::sync::watch::Sender<Option<ServiceAccounts>>);

impl LocalAccounts {
    /// Sets (or clears) the local accounts.
    pub fn set(&self, accounts: Option<ServiceAccounts>) {
        self.0.send_replace(accounts);
    }
}

impl MsaSink {
    /// A sink with no local accounts yet.
    pub fn new(nats: async_nats::Client) -> (LocalAccounts, Self) {
        let (tx, rx) = tokio::sync::watch::channel(None);
        (LocalAccounts(tx), Self { local: rx, nats })
    }

    /// Routes one report: checked ([`check`]), then handed to the local task or forwarded;
    /// `raw` is the event as received. `Err` is a refusal to count, with the message to
    /// acknowledge; otherwise the message is acknowledged once the report is stored, or left
    /// for a delayed redelivery.
    pub async fn route(
        &self,
        event: &Event,
        raw: &[u8],
        resource_id: &str,
        accepted: bool,
        msg: async_nats::jetstream::Message,
    ) -> Result<(), (Refusal, Option<async_nats::jetstream::Message>)> {
        let local = self.local.borrow().clone();
        if let Some(accounts) = local {
            let report = match check(event, resource_id, accepted) {
                Ok(r) => r,
                Err(refusal) => return Err((refusal, Some(msg))),
            };
            if let Err(back) = accounts.try_report(ReportIn {
                report,
                reply: Reply::Stream(Box::new(msg)),
            }) {
                tracing::debug!(
                    "ManagedServiceAccount report left for redelivery: the mailbox is full"
                );
                back.reply.settle(Outcome::Retry).await;
            }
            return Ok(());
        }
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(RESOURCE_HEADER, resource_id);
        headers.insert(ACCEPTED_HEADER, if accepted { "1" } else { "0" });
        let request = async_nats::Request::new()
            .payload(bytes::Bytes::copy_from_slice(raw))
            .headers(headers)
            .timeout(Some(std::time::Duration::from_secs(5)));
        match self.nats.send_request(FORWARD_SUBJECT, request).await {
            Ok(answer) => {
                let text = String::from_utf8_lossy(&answer.payload).to_string();
                if text == TAKEN {
                    let _ = msg.ack().await;
                    Ok(())
                } else if let Some((reason, why)) = text.split_once(':') {
                    Err(((refusal_reason(reason), why.to_string()), Some(msg)))
                } else {
                    // `busy` (or an answer from a newer hub this one does not know): not
                    // stored, so delivered again.
                    tracing::debug!(answer = %text, "the controllers' hub did not take a ManagedServiceAccount report");
                    Reply::Stream(Box::new(msg)).settle(Outcome::Retry).await;
                    Ok(())
                }
            }
            // No answer: the report may or may not be stored; delivered again either way (a
            // report the task already holds is found not newer and acknowledged).
            Err(e) => {
                tracing::debug!(error = %e, "forwarding a ManagedServiceAccount report failed");
                Reply::Stream(Box::new(msg)).settle(Outcome::Retry).await;
                Ok(())
            }
        }
    }
}

fn refusal_reason(reason: &str) -> &'static str {
    match reason {
        "invalid_status" => "invalid_status",
        "clustername_mismatch" => "clustername_mismatch",
        "not_accepted" => "not_accepted",
        _ => "refused",
    }
}

/// Takes forwarded reports into `accounts` until `stop` flips (run by the controllers). Each
/// is answered once the task is done with it ([`TAKEN`]), at once when it is refused
/// (`reason:message`) or the mailbox is full ([`BUSY`]), and [`BUSY`] when the task could not
/// store it. At most the mailbox's capacity of answers wait, as each waits for a report in the
/// mailbox.
pub async fn serve(
    nats: async_nats::Client,
    accounts: ServiceAccounts,
    max_event_bytes: usize,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt;
    use futures::stream::FuturesUnordered;
    let mut sub = match nats.subscribe(FORWARD_SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to forwarded ManagedServiceAccount reports failed");
            return;
        }
    };
    let mut waiting = FuturesUnordered::new();
    loop {
        let msg = tokio::select! {
            _ = stop.changed() => break,
            Some((reply, outcome)) = waiting.next(), if !waiting.is_empty() => {
                let answer = match outcome {
                    Ok(Outcome::Done) => TAKEN,
                    // Not stored, or the task ended before it got to it.
                    Ok(Outcome::Retry) | Err(_) => BUSY,
                };
                let _ = nats.publish(reply, answer.into()).await;
                continue;
            }
            m = sub.next() => match m { Some(m) => m, None => break },
        };
        let Some(reply) = msg.reply.clone() else {
            continue;
        };
        let header = |name: &str| {
            msg.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_string())
        };
        let checked = Event::decode(&msg.payload, max_event_bytes)
            .map_err(|e| ("invalid_status", e.to_string()))
            .and_then(|event| {
                let rid = header(RESOURCE_HEADER).unwrap_or_default();
                let accepted = header(ACCEPTED_HEADER).as_deref() == Some("1");
                check(&event, &rid, accepted)
            });
        let answer = match checked {
            Err((reason, why)) => format!("{reason}:{why}"),
            Ok(report) => {
                let (done, outcome) = tokio::sync::oneshot::channel();
                match accounts.try_report(ReportIn {
                    report,
                    reply: Reply::Forwarded(done),
                }) {
                    Ok(()) => {
                        waiting.push(async move { (reply, outcome.await) });
                        continue;
                    }
                    Err(_) => BUSY.to_string(),
                }
            }
        };
        let _ = nats.publish(reply, answer.into()).await;
    }
    let _ = sub.unsubscribe().await;
}

/// Decodes one report and checks it against its subject; `Err` is a refusal the router counts
/// and acknowledges.
pub fn check(
    event: &Event,
    resource_id: &str,
    accepted: bool,
) -> Result<ServiceAccountTokenReport, Refusal> {
    let report = event
        .decode_data::<ServiceAccountTokenReport>("ServiceAccountTokenReport")
        .map_err(|e| ("invalid_status", e.to_string()))?;
    if let Err(super::rules::Refusal(reason, why)) =
        super::rules::check_report(&report, &event.cluster, resource_id)
    {
        return Err((reason, why));
    }
    if !accepted {
        return Err((
            "not_accepted",
            format!("cluster {:?} is not accepted", event.cluster),
        ));
    }
    Ok(report)
}

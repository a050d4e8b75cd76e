//! The router's hand-off of ManagedServiceAccount reports: decoded and checked against their
//! subject (cluster and resource id, bounded fields, cluster accepted), then handed to the
//! accounts' task with `try_send` — here while this hub runs the controllers, else forwarded
//! to the hub that does over NATS ([`FORWARD_SUBJECT`], hub account only). Bad input is
//! refused, counted and acknowledged; a full mailbox or an unanswered forward leaves the
//! message for redelivery. The task checks the rest (an account that exists, a box that opens).

use super::ServiceAccounts;
use super::actor::ReportIn;
use flotilla_api::v1::ServiceAccountTokenReport;
use flotilla_bus::Event;

/// Why a report was refused (for the router's counters): `(reason, message)`.
pub type Refusal = (&'static str, String);

/// Where ManagedServiceAccount reports go to the controllers' hub.
pub const FORWARD_SUBJECT: &str = "flotilla.hub.controllers.msa";
const RESOURCE_HEADER: &str = "Flotilla-Resource-Id";
const ACCEPTED_HEADER: &str = "Flotilla-Accepted";
const TAKEN: &str = "taken";

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

    /// Routes one report (see [`route`]); `raw` is the event as received.
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
            return route(&accounts, event, resource_id, accepted, Some(msg));
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
                    Ok(())
                }
            }
            // Not acknowledged: redelivered after ack_wait.
            Err(e) => {
                tracing::debug!(error = %e, "forwarding a ManagedServiceAccount report failed");
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

/// Takes forwarded reports into `accounts` until `stop` flips (run by the controllers).
pub async fn serve(
    nats: async_nats::Client,
    accounts: ServiceAccounts,
    max_event_bytes: usize,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt;
    let mut sub = match nats.subscribe(FORWARD_SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to forwarded ManagedServiceAccount reports failed");
            return;
        }
    };
    loop {
        let msg = tokio::select! {
            _ = stop.changed() => break,
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
        let answer = match Event::decode(&msg.payload, max_event_bytes) {
            Err(e) => format!("invalid_status:{e}"),
            Ok(event) => {
                let rid = header(RESOURCE_HEADER).unwrap_or_default();
                let accepted = header(ACCEPTED_HEADER).as_deref() == Some("1");
                match route(&accounts, &event, &rid, accepted, None) {
                    Ok(()) => TAKEN.to_string(),
                    Err(((reason, why), _)) => format!("{reason}:{why}"),
                }
            }
        };
        let _ = nats.publish(reply, answer.into()).await;
    }
    let _ = sub.unsubscribe().await;
}

/// Checks one report against its subject and hands it to the task; `Err` is a refusal the
/// router counts and acknowledges (with the status message it was given, if any — handed back
/// whole, as the policy route does, rather than boxed per report).
#[allow(clippy::result_large_err)]
pub fn route(
    accounts: &ServiceAccounts,
    event: &Event,
    resource_id: &str,
    accepted: bool,
    msg: Option<async_nats::jetstream::Message>,
) -> Result<(), (Refusal, Option<async_nats::jetstream::Message>)> {
    let report = match event.decode_data::<ServiceAccountTokenReport>("ServiceAccountTokenReport") {
        Ok(r) => r,
        Err(e) => return Err((("invalid_status", e.to_string()), msg)),
    };
    if let Err(super::rules::Refusal(reason, why)) =
        super::rules::check_report(&report, &event.cluster, resource_id)
    {
        return Err(((reason, why), msg));
    }
    if !accepted {
        return Err((
            (
                "not_accepted",
                format!("cluster {:?} is not accepted", event.cluster),
            ),
            msg,
        ));
    }
    if !accounts.try_report(ReportIn { report, ack: msg }) {
        // The message went with the refused send, unacknowledged: JetStream redelivers it.
        tracing::debug!("ManagedServiceAccount report left for redelivery: the mailbox is full");
    }
    Ok(())
}

//! The router's hand-off of policy status reports: checked like every status kind (cluster and
//! resource id match the subject, bounded fields, cluster accepted), then handed to the
//! policy's actor with `try_send`. Bad input is rejected, counted and acknowledged; a full
//! mailbox leaves the message for redelivery; a report for a policy the hub does not have
//! tells the cluster to remove its copy.

use super::Policies;
use super::actor::ReportIn;
use crate::keys::ObjectRef;
use flotilla_api::v1::PolicyStatusReport;
use flotilla_bus::Event;

/// Why a report was refused (for the router's counters): `(reason, message)`.
pub type Refusal = (&'static str, String);

/// Where a hub sends policy status reports: the local policies while it holds the
/// controllers, the controllers' hub otherwise (over NATS, [`FORWARD_SUBJECT`], hub account
/// only). A forwarded report is acknowledged in the status stream once the controllers' hub
/// has taken it, and refused as that hub says; unanswered, it stays for redelivery.
#[derive(Clone)]
pub struct PolicySink {
    local: tokio::sync::watch::Receiver<Option<Policies>>,
    nats: async_nats::Client,
}

impl std::fmt::Debug for PolicySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySink")
            .field("local", &self.local.borrow().is_some())
            .finish()
    }
}

/// Sets the local policies of a [`PolicySink`].
pub struct LocalPolicies(tokio::sync::watch::Sender<Option<Policies>>);

impl LocalPolicies {
    /// Sets (or clears) the local policies.
    pub fn set(&self, policies: Option<Policies>) {
        self.0.send_replace(policies);
    }
}

/// Where policy reports go to the controllers' hub.
pub const FORWARD_SUBJECT: &str = "flotilla.hub.controllers.policy";
const RESOURCE_HEADER: &str = "Flotilla-Resource-Id";
const ACCEPTED_HEADER: &str = "Flotilla-Accepted";
const TAKEN: &str = "taken";

impl PolicySink {
    /// A sink with no local policies yet.
    pub fn new(nats: async_nats::Client) -> (LocalPolicies, Self) {
        let (tx, rx) = tokio::sync::watch::channel(None);
        (LocalPolicies(tx), Self { local: rx, nats })
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
        if let Some(policies) = local {
            return route(&policies, event, resource_id, accepted, Some(msg)).await;
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
                tracing::debug!(error = %e, "forwarding a policy report failed");
                Ok(())
            }
        }
    }
}

/// The `'static` reason for a refusal reported by the controllers' hub.
fn refusal_reason(reason: &str) -> &'static str {
    match reason {
        "invalid_status" => "invalid_status",
        "clustername_mismatch" => "clustername_mismatch",
        "not_accepted" => "not_accepted",
        _ => "refused",
    }
}

/// Takes forwarded policy reports into `policies` until `stop` flips (run by the controllers).
pub async fn serve(
    nats: async_nats::Client,
    policies: Policies,
    max_event_bytes: usize,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt;
    let mut sub = match nats.subscribe(FORWARD_SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to forwarded policy reports failed");
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
                match route(&policies, &event, &rid, accepted, None).await {
                    Ok(()) => TAKEN.to_string(),
                    Err(((reason, why), _)) => format!("{reason}:{why}"),
                }
            }
        };
        let _ = nats.publish(reply, answer.into()).await;
    }
    let _ = sub.unsubscribe().await;
}

/// Routes one report; `Err` is a refusal the router counts, purges and acknowledges (with the
/// status message it was given, if any).
pub async fn route(
    policies: &Policies,
    event: &Event,
    resource_id: &str,
    accepted: bool,
    msg: Option<async_nats::jetstream::Message>,
) -> Result<(), (Refusal, Option<async_nats::jetstream::Message>)> {
    let report = match event.decode_data::<PolicyStatusReport>("PolicyStatusReport") {
        Ok(r) => r,
        Err(e) => return Err(((reject(policies, "invalid_status"), e.to_string()), msg)),
    };
    let (ns, name) = match super::rules::check_report(&report, &event.cluster, resource_id) {
        Ok(x) => x,
        Err(why) => return Err(((reject(policies, "clustername_mismatch"), why), msg)),
    };
    if !accepted {
        return Err((
            (
                reject(policies, "not_accepted"),
                format!("cluster {:?} is not accepted", event.cluster),
            ),
            msg,
        ));
    }
    let key = ObjectRef::new(&ns, &name).inventory_key();
    let input = ReportIn {
        report,
        sequence: event.sequence_id,
        ack: msg,
    };
    match policies.try_report(&key, input) {
        Ok(()) => Ok(()),
        Err(super::TryReport::Full) => {
            // Not acknowledged: JetStream redelivers it after ack_wait.
            policies.inner.deps.metrics.dropped("policy");
            Ok(())
        }
        Err(super::TryReport::Unknown(input)) => {
            if !input.report.deleted {
                policies
                    .remove_stray(&input.report.cluster_name, &input.report.policy_name)
                    .await;
            }
            if let Some(m) = input.ack {
                let _ = m.ack().await;
            }
            Ok(())
        }
    }
}

fn reject(policies: &Policies, reason: &'static str) -> &'static str {
    policies.inner.metrics.reports_rejected.inc();
    reason
}

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

/// Routes one report; `Err` is a refusal the router counts, purges and acknowledges.
pub async fn route(
    policies: &Policies,
    event: &Event,
    resource_id: &str,
    accepted: bool,
    msg: async_nats::jetstream::Message,
) -> Result<(), (Refusal, async_nats::jetstream::Message)> {
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
        ack: Some(msg),
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

//! Policy status reports as the policies' family takes them ([`crate::report`]): checked like
//! every status kind (cluster and resource id match the subject, bounded fields, cluster
//! accepted), then handed to the policy's actor with `try_send`, which settles each once its
//! record is written. Bad input is refused and counted; a full mailbox hands the report back
//! for redelivery; a report for a policy the hub does not have tells the cluster to remove its
//! copy.

use super::Policies;
use super::actor::ReportIn;
use crate::keys::ObjectRef;
use crate::report::{Ack, Kind, Outcome, Refusal, Report, Taker};
use flotilla_api::v1::PolicyStatusReport;
use futures::future::BoxFuture;

/// The status kind of policy reports.
pub const KIND: Kind = Kind {
    name: flotilla_bus::policies::KIND_POLICY,
    event_type: flotilla_bus::policies::status_type,
};

/// Takes policy status reports into the policies' actors.
pub struct PolicyTaker(pub Policies);

impl Taker for PolicyTaker {
    fn take(&self, report: Report, ack: Ack) -> BoxFuture<'_, Result<(), (Refusal, Ack)>> {
        Box::pin(async move {
            match route(&self.0, &report) {
                Err(refusal) => Err((refusal, ack)),
                Ok((key, checked)) => {
                    let input = ReportIn {
                        report: checked,
                        sequence: report.event.sequence_id,
                        ack: Some(ack),
                    };
                    hand(&self.0, &key, input).await;
                    Ok(())
                }
            }
        })
    }
}

/// Decodes and checks one report; `Err` is a refusal the router counts and acknowledges.
fn route(policies: &Policies, r: &Report) -> Result<(String, PolicyStatusReport), Refusal> {
    let report = r
        .event
        .decode_data::<PolicyStatusReport>("PolicyStatusReport")
        .map_err(|e| reject(policies, "invalid_status", e.to_string()))?;
    let (ns, name) = super::rules::check_report(&report, &r.event.cluster, &r.resource_id)
        .map_err(|why| reject(policies, "clustername_mismatch", why))?;
    if !r.accepted {
        let why = format!("cluster {:?} is not accepted", r.event.cluster);
        return Err(reject(policies, "not_accepted", why));
    }
    Ok((ObjectRef::new(&ns, &name).inventory_key(), report))
}

/// Hands a checked report to its policy's actor.
async fn hand(policies: &Policies, key: &str, input: ReportIn) {
    match policies.try_report(key, input) {
        Ok(()) => {}
        Err(super::TryReport::Full(input)) => {
            policies.inner.deps.metrics.dropped("policy");
            crate::report::settle(input.ack, Outcome::Retry).await;
        }
        Err(super::TryReport::Unknown(input)) => {
            if !input.report.deleted {
                policies
                    .remove_stray(&input.report.cluster_name, &input.report.policy_name)
                    .await;
            }
            crate::report::settle(input.ack, Outcome::Taken).await;
        }
    }
}

fn reject(policies: &Policies, reason: &'static str, why: String) -> Refusal {
    policies.inner.metrics.reports_rejected.inc();
    Refusal::new(reason, why)
}

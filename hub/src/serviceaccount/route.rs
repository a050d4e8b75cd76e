//! ManagedServiceAccount reports as the accounts' family takes them ([`crate::report`]):
//! decoded and checked against their subject (cluster and resource id, bounded fields, cluster
//! accepted), then handed to the accounts' task with `try_send`. The task checks the rest (an
//! account that exists, a box that opens) and settles each report once it is stored, refused
//! for good, or found to change nothing; a full mailbox or a failed write hands it back for a
//! delayed redelivery ([`crate::report::retry_after`]).

use super::ServiceAccounts;
use super::actor::ReportIn;
use crate::report::{Ack, Kind, Outcome, Refusal, Report, Taker};
use flotilla_api::v1::ServiceAccountTokenReport;
use futures::future::BoxFuture;

/// The status kind of ManagedServiceAccount reports.
pub const KIND: Kind = Kind {
    name: flotilla_bus::serviceaccounts::KIND_MSA,
    event_type: flotilla_bus::serviceaccounts::status_type,
};

/// Takes ManagedServiceAccount reports into the accounts' task.
pub struct AccountTaker(pub ServiceAccounts);

impl Taker for AccountTaker {
    fn take(&self, report: Report, ack: Ack) -> BoxFuture<'_, Result<(), (Refusal, Ack)>> {
        Box::pin(async move {
            let report = match check(&report) {
                Ok(r) => r,
                Err(refusal) => return Err((refusal, ack)),
            };
            if let Err(back) = self.0.try_report(ReportIn { report, reply: ack }) {
                tracing::debug!(
                    "ManagedServiceAccount report handed back for redelivery: the mailbox is full"
                );
                back.reply.settle(Outcome::Retry).await;
            }
            Ok(())
        })
    }
}

/// Decodes one report and checks it against its subject; `Err` is a refusal the router counts
/// and acknowledges.
pub fn check(r: &Report) -> Result<ServiceAccountTokenReport, Refusal> {
    let report = r
        .event
        .decode_data::<ServiceAccountTokenReport>("ServiceAccountTokenReport")
        .map_err(|e| Refusal::new("invalid_status", e.to_string()))?;
    if let Err(super::rules::Refusal(reason, why)) =
        super::rules::check_report(&report, &r.event.cluster, &r.resource_id)
    {
        return Err(Refusal::new(reason, why));
    }
    if !r.accepted {
        return Err(Refusal::new(
            "not_accepted",
            format!("cluster {:?} is not accepted", r.event.cluster),
        ));
    }
    Ok(report)
}

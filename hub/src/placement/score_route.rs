//! AddOnPlacementScore reports as the placements' family takes them ([`crate::report`]):
//! checked against their subject (their own cluster and resource, valid, an accepted cluster),
//! then handed to the score actor without waiting, which settles each once stored.

use super::scores::{ScoreReport, Scores, validate_report};
use crate::report::{Ack, Kind, Outcome, Refusal, Report, Taker};
use flotilla_api::v1::AddOnPlacementScoreReport;
use futures::future::BoxFuture;

/// The status kind of score reports.
pub const KIND: Kind = Kind {
    name: flotilla_bus::scores::KIND_SCORE,
    event_type: flotilla_bus::scores::report_type,
};

/// Takes score reports into the score actor.
pub struct ScoreTaker {
    /// The score actor.
    pub scores: Scores,
    /// The hub's metrics (reports dropped at a full mailbox).
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
}

impl Taker for ScoreTaker {
    fn take(&self, report: Report, ack: Ack) -> BoxFuture<'_, Result<(), (Refusal, Ack)>> {
        Box::pin(async move {
            let sequence = report.event.sequence_id;
            let checked = match check(&report) {
                Ok(r) => r,
                Err(refusal) => return Err((refusal, ack)),
            };
            let handed = self.scores.try_report(ScoreReport {
                report: checked,
                sequence,
                ack: Some(ack),
            });
            if let Err(back) = handed {
                self.metrics.dropped("scores");
                crate::report::settle(back.ack, Outcome::Retry).await;
            }
            Ok(())
        })
    }
}

/// A score report decoded and checked against its subject.
pub fn check(r: &Report) -> Result<AddOnPlacementScoreReport, Refusal> {
    let report = r
        .event
        .decode_data::<AddOnPlacementScoreReport>("AddOnPlacementScoreReport")
        .map_err(|e| Refusal::new("invalid_status", e.to_string()))?;
    let cluster = &r.event.cluster;
    if report.cluster_name != *cluster
        || flotilla_bus::scores::resource_id(&report.cluster_name, &report.resource_name)
            != r.resource_id
    {
        return Err(Refusal::new(
            "clustername_mismatch",
            format!(
                "clusterName {:?} / resourceName {:?} do not match the subject ({cluster:?}, {:?})",
                report.cluster_name, report.resource_name, r.resource_id
            ),
        ));
    }
    validate_report(&report).map_err(|why| Refusal::new("invalid_status", why))?;
    if !r.accepted {
        return Err(Refusal::new(
            "not_accepted",
            format!("cluster {:?} is not accepted", report.cluster_name),
        ));
    }
    Ok(report)
}

//! AddOnPlacementScore reports, agent → hub: the event type and the status subject.
//!
//! A report travels like every other status: a CloudEvent of type
//! `io.flotilla.cluster.v1alpha1.addonplacementscore.status.update_request` (payload
//! `AddOnPlacementScoreReport`) on `flotilla.status.<shard>.<cluster>.score.<resourceid>`, in the
//! `FLOTILLA_STATUS` stream, so only the latest report of each score is kept. The resource id is
//! the UUIDv5 of (cluster, `AddOnPlacementScore`, cluster, resourceName): resource names may
//! contain dots, subject tokens may not.

use crate::envelope::{Action, Direction, EventType};

/// Status kind of score reports (followed by the score's resource id).
pub const KIND_SCORE: &str = "score";

/// Kind name used in the resource id.
pub const SCORE_KIND: &str = "AddOnPlacementScore";

/// Event type of a score report.
pub fn report_type() -> EventType {
    EventType::new(
        "cluster",
        "v1alpha1",
        "addonplacementscore",
        Direction::Status,
        Action::UpdateRequest,
    )
}

/// The resource id of score `name` of `cluster`.
pub fn resource_id(cluster: &str, name: &str) -> String {
    crate::ids::resource_id(cluster, SCORE_KIND, cluster, name)
}

/// The status subject of score `name` of `cluster`.
pub fn subject(cluster: &str, name: &str) -> String {
    crate::subjects::status(cluster, KIND_SCORE, Some(&resource_id(cluster, name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subjects::StatusSubject;

    #[test]
    fn score_subjects_parse_with_their_resource_id() {
        let s = subject("edge-1", "resource-usage-score");
        let p = StatusSubject::parse(&s).unwrap();
        assert_eq!(p.cluster, "edge-1");
        assert_eq!(p.kind, KIND_SCORE);
        assert_eq!(
            p.resource_id,
            Some(resource_id("edge-1", "resource-usage-score").as_str())
        );
        assert_eq!(
            report_type().to_string(),
            "io.flotilla.cluster.v1alpha1.addonplacementscore.status.update_request"
        );
        assert!(EventType::parse(&report_type().to_string()).is_ok());
    }
}

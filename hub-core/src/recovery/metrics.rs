//! The recovery window's gauges, computed at each scrape from what the hub follows:
//! `flotilla_hub_recovery_open` (1 while a window is open) and `flotilla_hub_orphans{kind,
//! decision}` (every kind and decision, 0 when none, so a dashboard always has its series).

use super::Recovery;
use flotilla_api::v1::{OrphanDecision, OrphanKind};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// Labels of the orphans gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OrphanLabels {
    /// `work` (the store lacks it), `ahead` (the store's is older), `behind` (newer, or being
    /// deleted) or `incarnation` (another one).
    kind: String,
    /// `undecided`, `delete`, `keep`, `revert`.
    decision: String,
}

const KINDS: [(OrphanKind, &str); 4] = [
    (OrphanKind::Work, "work"),
    (OrphanKind::Ahead, "ahead"),
    (OrphanKind::Behind, "behind"),
    (OrphanKind::Incarnation, "incarnation"),
];

const DECISIONS: [(OrphanDecision, &str); 4] = [
    (OrphanDecision::Undecided, "undecided"),
    (OrphanDecision::Delete, "delete"),
    (OrphanDecision::Keep, "keep"),
    (OrphanDecision::Revert, "revert"),
];

/// The collector over a hub's [`Recovery`].
pub(super) struct RecoveryMetrics(pub(super) Recovery);

impl std::fmt::Debug for RecoveryMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryMetrics")
    }
}

impl Collector for RecoveryMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let open = ConstGauge::new(i64::from(self.0.is_open()));
        let m = encoder.encode_descriptor(
            "recovery_open",
            "1 while a recovery window is open (after a restore: no spoke is told to delete a work the store lacks until an operator decides)",
            None,
            open.metric_type(),
        )?;
        open.encode(m)?;
        let counts = self.0.counts();
        let mut family = encoder.encode_descriptor(
            "orphans",
            "Orphans (works spokes hold that the restored store lacks, or holds older), by kind and decision",
            None,
            MetricType::Gauge,
        )?;
        for (kind, kind_label) in KINDS {
            for (decision, decision_label) in DECISIONS {
                let labels = OrphanLabels {
                    kind: kind_label.into(),
                    decision: decision_label.into(),
                };
                let n = counts.get(&(kind, decision)).copied().unwrap_or_default();
                ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

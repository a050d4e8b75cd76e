//! Placement metrics, registered on the hub's registry as `flotilla_hub_placement_…`.

use crate::metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use std::time::Instant;

/// Labels of the scheduling-run counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `changed` (decisions or status written), `unchanged`, `misconfigured` or `failed`
    /// (storage error; retried).
    pub outcome: String,
}

/// Counters and histograms of the placement machinery.
#[derive(Clone)]
pub struct PlacementMetrics {
    /// Scheduling runs, by outcome.
    pub schedules: Family<OutcomeLabels, Counter>,
    /// Seconds one scheduling run computes (filters, scores, selection, groups; not storage).
    pub schedule_seconds: Histogram,
    /// Fleet snapshots published (after cluster, set, binding or score changes).
    pub snapshots: Counter,
    /// Seconds publishing a snapshot takes (batched cluster removals, then a copy of the index).
    pub snapshot_seconds: Histogram,
    /// Placements woken because a change could affect them.
    pub wakeups: Counter,
    /// Placements whose set of decided clusters changed.
    pub decision_changes: Counter,
    /// AddOnPlacementScores written (API or agents).
    pub score_updates: Counter,
}

fn seconds_buckets() -> impl Iterator<Item = f64> {
    [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    ]
    .into_iter()
}

impl PlacementMetrics {
    /// The placement metrics of `hub` (created and registered once).
    pub fn new(hub: &Metrics) -> Self {
        hub.component("placement", Self::create)
    }

    fn create(hub: &Metrics) -> Self {
        let m = Self {
            schedules: Family::default(),
            schedule_seconds: Histogram::new(seconds_buckets()),
            snapshots: Counter::default(),
            snapshot_seconds: Histogram::new(seconds_buckets()),
            wakeups: Counter::default(),
            decision_changes: Counter::default(),
            score_updates: Counter::default(),
        };
        hub.register_component("placement", |r| {
            r.register(
                "schedules",
                "Placement scheduling runs, by outcome",
                m.schedules.clone(),
            );
            r.register(
                "schedule_seconds",
                "Seconds one placement scheduling run computes",
                m.schedule_seconds.clone(),
            );
            r.register(
                "snapshots",
                "Fleet snapshots published to placement actors",
                m.snapshots.clone(),
            );
            r.register(
                "snapshot_seconds",
                "Seconds publishing a fleet snapshot takes",
                m.snapshot_seconds.clone(),
            );
            r.register(
                "wakeups",
                "Placements woken because a change could affect them",
                m.wakeups.clone(),
            );
            r.register(
                "decision_changes",
                "Placements whose decided clusters changed",
                m.decision_changes.clone(),
            );
            r.register(
                "score_updates",
                "AddOnPlacementScores written",
                m.score_updates.clone(),
            );
        });
        m
    }

    /// Counts a scheduling run.
    pub fn outcome(&self, outcome: &str) {
        self.schedules
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Scheduling runs so far with this outcome.
    pub fn outcome_count(&self, outcome: &str) -> u64 {
        self.schedules
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .get()
    }

    /// Scheduling runs so far, every outcome.
    pub fn schedule_count(&self) -> u64 {
        ["changed", "unchanged", "misconfigured", "failed"]
            .iter()
            .map(|o| self.outcome_count(o))
            .sum()
    }
}

/// Records the time until drop into a histogram (controller-rs style).
pub struct Timer<'a> {
    histogram: &'a Histogram,
    started: Instant,
}

impl<'a> Timer<'a> {
    /// Starts timing.
    pub fn start(histogram: &'a Histogram) -> Self {
        Self {
            histogram,
            started: Instant::now(),
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_started_again_register_their_metrics_once() {
        let hub = crate::metrics::Metrics::new();
        let first = PlacementMetrics::new(&hub);
        let again = PlacementMetrics::new(&hub);
        first.outcome("changed");
        assert_eq!(again.outcome_count("changed"), 1, "the same counters");
        let text = hub.render(&crate::inventory::ClusterInventory::new(16));
        let families = text
            .lines()
            .filter(|l| l.starts_with("# TYPE flotilla_hub_placement_schedules "))
            .count();
        assert_eq!(families, 1, "{text}");
    }
}

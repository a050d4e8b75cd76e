//! Works by state, as a gauge (I/O-free; read from the works inventory every hub holds):
//! `flotilla_hub_works{state}`, one series per [`WorkState`] — five, whatever the fleet. Every
//! hub holds every work, so each hub exports the fleet's counts (take `max` over the hubs, not
//! `sum`). Failed or degraded works for minutes are alert `FlotillaWorksFailing`.
//!
//! A state is read from the work's conditions alone, in the order the dashboard's works list
//! uses: deleting first (the hub waits for the agent to remove it), then `Degraded=True`,
//! `Applied=False`, `Available=True`; anything else is still applying. A [`StoredWork`] reads
//! it when its status is set ([`StoredWork::state`]) and the works inventory keeps the counts
//! as works change ([`WorkInventory::states`]): a scrape reads five numbers, whatever the fleet
//! (it decoded and sorted every work before, 100,000 of them at every scrape).

use super::StoredWork;
use crate::inventory::WorkInventory;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::Condition;
use flotilla_api::work::conditions::{APPLIED, AVAILABLE, DEGRADED};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// The state of a work, as the gauge counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkState {
    /// `Available=True`.
    Available,
    /// Not yet available and nothing wrong reported: no `Applied` condition yet, or applied and
    /// waiting for `Available`.
    Applying,
    /// `Applied=False`: the agent could not apply it.
    Failed,
    /// `Degraded=True`.
    Degraded,
    /// Deleted on the hub, waiting for the agent to remove what it applied.
    Deleting,
}

impl WorkState {
    /// Every state, in the order the gauge lists them.
    pub const ALL: [WorkState; 5] = [
        WorkState::Available,
        WorkState::Applying,
        WorkState::Failed,
        WorkState::Degraded,
        WorkState::Deleting,
    ];

    /// The `state` label.
    pub fn label(self) -> &'static str {
        match self {
            WorkState::Available => "available",
            WorkState::Applying => "applying",
            WorkState::Failed => "failed",
            WorkState::Degraded => "degraded",
            WorkState::Deleting => "deleting",
        }
    }

    /// The state of a work that is `deleting` (has a deletion timestamp) with `conditions`.
    pub fn of(deleting: bool, conditions: &[Condition]) -> Self {
        let state = |ty: &str| meta::condition_status(conditions, ty);
        if deleting {
            WorkState::Deleting
        } else if state(DEGRADED) == Some(status::TRUE) {
            WorkState::Degraded
        } else if state(APPLIED) == Some(status::FALSE) {
            WorkState::Failed
        } else if state(AVAILABLE) == Some(status::TRUE) {
            WorkState::Available
        } else {
            WorkState::Applying
        }
    }

    /// The state of `work` (kept with it: [`StoredWork::state`]).
    pub fn of_work(work: &StoredWork) -> Self {
        work.state()
    }

    /// Its place in [`WorkState::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// How many of `works` are in each state, in [`WorkState::ALL`]'s order.
pub fn count<'a>(works: impl IntoIterator<Item = &'a StoredWork>) -> [u64; 5] {
    let mut counts = [0u64; 5];
    for w in works {
        counts[WorkState::of_work(w).index()] += 1;
    }
    counts
}

/// Labels of the works gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

/// `flotilla_hub_works{state}`.
pub struct WorksMetrics(pub WorkInventory);

impl std::fmt::Debug for WorksMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorksMetrics")
    }
}

impl Collector for WorksMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.0.states();
        let mut family = encoder.encode_descriptor(
            "works",
            "ManifestWorks by state (available, applying, failed: Applied=False, degraded: Degraded=True, deleting); every hub holds every work",
            None,
            MetricType::Gauge,
        )?;
        for state in WorkState::ALL {
            let n = i64::try_from(counts[state.index()]).unwrap_or(i64::MAX);
            let labels = StateLabels {
                state: state.label(),
            };
            ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{ManifestWorkStatus, ObjectMeta};

    fn condition(ty: &str, status: &str) -> Condition {
        Condition {
            r#type: ty.into(),
            status: status.into(),
            ..Default::default()
        }
    }

    fn work(name: &str, deleting: bool, conditions: &[(&str, &str)]) -> StoredWork {
        let mut w = StoredWork::default();
        w.metadata = Some(ObjectMeta {
            name: name.into(),
            deletion_timestamp: deleting.then(meta::now),
            ..Default::default()
        });
        if !conditions.is_empty() {
            w.set_status(Some(&ManifestWorkStatus {
                conditions: conditions.iter().map(|(t, s)| condition(t, s)).collect(),
                ..Default::default()
            }));
        }
        w
    }

    #[test]
    fn each_state_is_read_from_the_conditions_deleting_first() {
        let cases = [
            (work("new", false, &[]), WorkState::Applying),
            (
                work(
                    "applied",
                    false,
                    &[("Applied", "True"), ("Available", "False")],
                ),
                WorkState::Applying,
            ),
            (
                work("up", false, &[("Applied", "True"), ("Available", "True")]),
                WorkState::Available,
            ),
            (
                work("bad", false, &[("Applied", "False"), ("Available", "True")]),
                WorkState::Failed,
            ),
            (
                work(
                    "slow",
                    false,
                    &[
                        ("Applied", "False"),
                        ("Degraded", "True"),
                        ("Available", "True"),
                    ],
                ),
                WorkState::Degraded,
            ),
            (
                work("gone", true, &[("Applied", "False"), ("Degraded", "True")]),
                WorkState::Deleting,
            ),
        ];
        for (w, want) in &cases {
            assert_eq!(WorkState::of_work(w), *want, "{:?}", w.metadata);
        }
        let counts = count(cases.iter().map(|(w, _)| w));
        assert_eq!(counts, [1, 2, 1, 1, 1]);
    }

    #[test]
    fn the_gauge_has_five_series_whatever_the_fleet() {
        let works = WorkInventory::new(16);
        let render = |works: &WorkInventory| {
            let mut registry = prometheus_client::registry::Registry::with_prefix("flotilla_hub");
            registry.register_collector(Box::new(WorksMetrics(works.clone())));
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
            out
        };
        let empty = render(&works);
        assert_eq!(empty.matches("flotilla_hub_works{").count(), 5, "{empty}");
        assert!(
            empty.contains("flotilla_hub_works{state=\"failed\"} 0"),
            "{empty}"
        );
        works.upsert("c1/a", work("a", false, &[("Applied", "False")]));
        works.upsert("c2/a", work("a", false, &[("Applied", "False")]));
        works.upsert("c2/b", work("b", false, &[("Available", "True")]));
        let text = render(&works);
        assert_eq!(text.matches("flotilla_hub_works{").count(), 5, "{text}");
        assert!(
            text.contains("flotilla_hub_works{state=\"failed\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_hub_works{state=\"available\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_hub_works{state=\"deleting\"} 0"),
            "{text}"
        );
    }
}

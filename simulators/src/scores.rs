//! AddOnPlacementScores of simulated clusters. Every agent reports OCM's resource-usage score
//! (`cpuAvailable`, `memAvailable`, see [`flotilla_agent::scores`]) on its own connection, like
//! a real agent; this module makes the simulated clusters' load drift, deterministically per
//! cluster and tick, so that placements prioritising on these scores see them move.

use flotilla_agent::backend::sim::SimBackend;
use flotilla_api::v1::AddOnPlacementScoreItem;
use flotilla_bus::envelope::Event;
use flotilla_bus::scores;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

pub use flotilla_agent::scores::{
    CPU_AVAILABLE, MAX_CPU_CORES, MAX_MEMORY_GIB, MEM_AVAILABLE, RESOURCE_NAME, normalise,
    scores_for,
};

/// How the simulated fleet reports scores.
#[derive(Debug, Clone)]
pub struct ScoreConfig {
    /// Time between reports of one cluster (and between load changes).
    pub interval: Duration,
}

impl ScoreConfig {
    /// Reports every `interval` (each valid for three intervals).
    pub fn every(interval: Duration) -> Self {
        Self { interval }
    }
}

/// The load (0.0–0.79) of cluster `i` at report `tick`.
pub fn load(i: usize, tick: u64) -> f64 {
    let step = (i as u64)
        .wrapping_mul(37)
        .wrapping_add(tick.wrapping_mul(13))
        % 80;
    step as f64 / 100.0
}

/// A report event as a simulated cluster's agent sends it (for tests that forge reports).
pub fn report_event(
    cluster: &str,
    items: Vec<AddOnPlacementScoreItem>,
    valid_until: SystemTime,
    sequence: u64,
) -> Event {
    flotilla_agent::scores::report_event(
        &format!("flotilla-agent/{cluster}"),
        cluster,
        RESOURCE_NAME,
        items,
        valid_until,
        sequence,
    )
}

/// The subject a cluster's resource-usage report goes to.
pub fn report_subject(cluster: &str) -> String {
    scores::subject(cluster, RESOURCE_NAME)
}

/// Moves the load of every simulated cluster (backend, index) each interval until `stop` flips;
/// the agents report the resulting scores.
pub async fn drift(
    clusters: Vec<(Arc<SimBackend>, usize)>,
    config: ScoreConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick: u64 = 0;
    loop {
        for (backend, i) in &clusters {
            backend.set_load(load(*i, tick));
        }
        tick += 1;
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = ticker.tick() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_move_with_load_and_stay_in_range() {
        let idle = scores_for(Some("7600m"), Some("31744Mi"), 0.0);
        assert_eq!(idle[0].name, CPU_AVAILABLE);
        assert_eq!(idle[0].value, normalise(7.6, 0.0, MAX_CPU_CORES));
        let busy = scores_for(Some("7600m"), Some("31744Mi"), load(3, 1));
        assert!(busy[0].value <= idle[0].value);
        for i in 0..100 {
            for t in 0..10 {
                let l = load(i, t);
                assert!((0.0..0.8).contains(&l));
                for s in scores_for(Some("64"), Some("256Gi"), l) {
                    assert!((-100..=100).contains(&s.value));
                }
            }
        }
    }

    #[test]
    fn report_events_carry_the_score_resource_id() {
        let ev = report_event("sim-0001", vec![], SystemTime::now(), 7);
        assert_eq!(
            ev.resource_id.as_deref(),
            Some(scores::resource_id("sim-0001", RESOURCE_NAME).as_str())
        );
        assert_eq!(ev.event_type, scores::report_type());
        assert_eq!(ev.sequence_id, Some(7));
    }
}

//! AddOnPlacementScores from simulated clusters: every `interval`, each cluster reports an
//! AddOnPlacementScore named [`RESOURCE_NAME`] with `cpuAvailable` and `memAvailable` (as OCM's
//! resource-usage-collect add-on does), valid for `validity`, over NATS like any other status:
//! `flotilla.status.<shard>.<cluster>.score.<resourceid>` in the `FLOTILLA_STATUS` stream.
//!
//! Available = allocatable × (1 − load), where the load drifts deterministically per cluster and
//! tick, so placements that use these scores see them move. Raw values are normalised as OCM
//! asks: `200 × (x − min)/(max − min) − 100` over [0, [`MAX_CPU_CORES`]] cores and
//! [0, [`MAX_MEMORY_GIB`]] GiB.
//!
//! The reporter shares one NATS connection for the whole simulated fleet (a real agent would
//! publish on its own connection with its own credentials); the subjects, event type and payload
//! are the ones a real agent uses.

use anyhow::{Context, Result};
use flotilla_agent::backend::Backend;
use flotilla_api::v1::{AddOnPlacementScoreItem, AddOnPlacementScoreReport};
use flotilla_bus::envelope::{Event, headers};
use flotilla_bus::scores;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// Name of the reported AddOnPlacementScore (OCM's resource-usage-collect add-on's name).
pub const RESOURCE_NAME: &str = "resource-usage-score";
/// Score of available CPU.
pub const CPU_AVAILABLE: &str = "cpuAvailable";
/// Score of available memory.
pub const MEM_AVAILABLE: &str = "memAvailable";
/// Cores that normalise to 100.
pub const MAX_CPU_CORES: f64 = 64.0;
/// GiB that normalise to 100.
pub const MAX_MEMORY_GIB: f64 = 256.0;

/// How the simulated fleet reports scores.
#[derive(Debug, Clone)]
pub struct ScoreConfig {
    /// Time between reports of one cluster.
    pub interval: Duration,
    /// `validUntil` = report time + this (OCM providers use a few intervals).
    pub validity: Duration,
}

impl ScoreConfig {
    /// Reports every `interval`, valid for three intervals.
    pub fn every(interval: Duration) -> Self {
        Self {
            interval,
            validity: interval * 3,
        }
    }
}

/// `200 × (x − min)/(max − min) − 100`, clamped to [-100, 100].
pub fn normalise(x: f64, min: f64, max: f64) -> i32 {
    if max <= min || !x.is_finite() {
        return 0;
    }
    let v = 200.0 * (x - min) / (max - min) - 100.0;
    v.round().clamp(-100.0, 100.0) as i32
}

/// The load (0.0–0.79) of cluster `i` at report `tick`.
pub fn load(i: usize, tick: u64) -> f64 {
    let step = (i as u64)
        .wrapping_mul(37)
        .wrapping_add(tick.wrapping_mul(13))
        % 80;
    step as f64 / 100.0
}

/// The scores of a cluster with allocatable `cpu` (quantity) and `memory` (quantity).
pub fn scores_for(
    cpu: Option<&str>,
    memory: Option<&str>,
    load: f64,
) -> Vec<AddOnPlacementScoreItem> {
    let q = |s: Option<&str>| s.and_then(|s| flotilla_placement::parse_quantity(s).ok());
    let cpu = q(cpu).unwrap_or(0.0) * (1.0 - load);
    let mem_gib = q(memory).unwrap_or(0.0) * (1.0 - load) / (1024.0 * 1024.0 * 1024.0);
    vec![
        AddOnPlacementScoreItem {
            name: CPU_AVAILABLE.into(),
            value: normalise(cpu, 0.0, MAX_CPU_CORES),
        },
        AddOnPlacementScoreItem {
            name: MEM_AVAILABLE.into(),
            value: normalise(mem_gib, 0.0, MAX_MEMORY_GIB),
        },
    ]
}

/// The report event of one cluster.
pub fn report_event(
    cluster: &str,
    items: Vec<AddOnPlacementScoreItem>,
    valid_until: SystemTime,
    sequence: u64,
) -> Event {
    let report = AddOnPlacementScoreReport {
        cluster_name: cluster.to_string(),
        resource_name: RESOURCE_NAME.to_string(),
        scores: items,
        valid_until: Some(flotilla_api::meta::timestamp(valid_until)),
    };
    Event::new(
        scores::report_type(),
        format!("flotilla-sim/{cluster}"),
        cluster,
        &report,
    )
    .with_resource_id(scores::resource_id(cluster, RESOURCE_NAME))
    .with_sequence(sequence)
    .with_status_hash()
}

/// The subject a cluster's report goes to.
pub fn report_subject(cluster: &str) -> String {
    scores::subject(cluster, RESOURCE_NAME)
}

/// Publishes one report into the status stream and waits for JetStream's acknowledgement.
pub async fn publish(js: &async_nats::jetstream::Context, ev: &Event) -> Result<()> {
    let bytes = ev
        .encode(flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES)
        .context("encoding a score report")?;
    js.publish_with_headers(
        scores::subject(&ev.cluster, RESOURCE_NAME),
        headers(ev),
        bytes,
    )
    .await
    .context("publishing a score report")?
    .await
    .context("waiting for JetStream to store a score report")?;
    Ok(())
}

/// Reports scores for `clusters` (name, backend, index) until `stop` flips.
pub async fn run(
    nats: async_nats::Client,
    clusters: Vec<(String, Arc<dyn Backend>, usize)>,
    config: ScoreConfig,
    mut stop: watch::Receiver<bool>,
) {
    let js = async_nats::jetstream::new(nats);
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = ticker.tick() => {}
        }
        let now = SystemTime::now();
        // Wall-clock microseconds: a restarted simulator still sorts after its old reports.
        let sequence = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut failed = 0usize;
        for (name, backend, i) in &clusters {
            let info = backend.info();
            let items = scores_for(
                info.allocatable.get("cpu").map(String::as_str),
                info.allocatable.get("memory").map(String::as_str),
                load(*i, tick),
            );
            let ev = report_event(name, items, now + config.validity, sequence);
            if let Err(e) = publish(&js, &ev).await {
                failed += 1;
                tracing::debug!(cluster = %name, error = %e, "score report failed");
            }
            if *stop.borrow() {
                return;
            }
        }
        if failed > 0 {
            tracing::warn!(failed, "some score reports failed; retrying next interval");
        }
        tick += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_follows_ocm() {
        assert_eq!(normalise(0.0, 0.0, 64.0), -100);
        assert_eq!(normalise(32.0, 0.0, 64.0), 0);
        assert_eq!(normalise(64.0, 0.0, 64.0), 100);
        assert_eq!(normalise(640.0, 0.0, 64.0), 100);
        assert_eq!(normalise(1.0, 1.0, 1.0), 0);
    }

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

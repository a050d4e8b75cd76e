//! AddOnPlacementScores reported by the agent: every `--score-interval-seconds`, an accepted
//! agent publishes what its backend scores (for the simulated cluster, OCM's
//! resource-usage-collect `resource-usage-score` with `cpuAvailable` and `memAvailable`), valid
//! for three intervals, into the status stream on
//! `flotilla.status.<shard>.<cluster>.score.<resourceid>` — so placements that prioritise on these
//! scores follow the fleet, and a silent agent's scores expire at `validUntil`.

use flotilla_api::v1::{AddOnPlacementScoreItem, AddOnPlacementScoreReport};
use flotilla_bus::envelope::Event;
use flotilla_bus::scores;
use std::time::SystemTime;

/// Name of the resource-usage score (OCM's resource-usage-collect add-on's name).
pub const RESOURCE_NAME: &str = "resource-usage-score";
/// Score of available CPU.
pub const CPU_AVAILABLE: &str = "cpuAvailable";
/// Score of available memory.
pub const MEM_AVAILABLE: &str = "memAvailable";
/// Cores that normalise to 100.
pub const MAX_CPU_CORES: f64 = 64.0;
/// GiB that normalise to 100.
pub const MAX_MEMORY_GIB: f64 = 256.0;

/// `200 × (x − min)/(max − min) − 100`, clamped to [-100, 100] (OCM's normalisation).
pub fn normalise(x: f64, min: f64, max: f64) -> i32 {
    if max <= min || !x.is_finite() {
        return 0;
    }
    let v = 200.0 * (x - min) / (max - min) - 100.0;
    v.round().clamp(-100.0, 100.0) as i32
}

/// Parses a Kubernetes quantity (`7600m`, `32Gi`, `1.5G`) into a number.
fn quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n * mult)
}

/// The resource-usage scores of a cluster with allocatable `cpu` and `memory` (quantities) of
/// which the fraction `load` is in use.
pub fn scores_for(
    cpu: Option<&str>,
    memory: Option<&str>,
    load: f64,
) -> Vec<AddOnPlacementScoreItem> {
    let free = (1.0 - load).clamp(0.0, 1.0);
    let cpu = cpu.and_then(quantity).unwrap_or(0.0) * free;
    let mem_gib = memory.and_then(quantity).unwrap_or(0.0) * free / (1024.0 * 1024.0 * 1024.0);
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

/// The report event of one score of a cluster.
pub fn report_event(
    source: &str,
    cluster: &str,
    resource_name: &str,
    items: Vec<AddOnPlacementScoreItem>,
    valid_until: SystemTime,
    sequence: u64,
) -> Event {
    let report = AddOnPlacementScoreReport {
        cluster_name: cluster.to_string(),
        resource_name: resource_name.to_string(),
        scores: items,
        valid_until: Some(flotilla_api::meta::timestamp(valid_until)),
    };
    Event::new(scores::report_type(), source, cluster, &report)
        .with_resource_id(scores::resource_id(cluster, resource_name))
        .with_sequence(sequence)
        .with_status_hash()
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
    fn scores_follow_allocatable_and_load() {
        let idle = scores_for(Some("7600m"), Some("31744Mi"), 0.0);
        assert_eq!(idle[0].name, CPU_AVAILABLE);
        assert_eq!(idle[0].value, normalise(7.6, 0.0, MAX_CPU_CORES));
        assert_eq!(idle[1].value, normalise(31.0, 0.0, MAX_MEMORY_GIB));
        let busy = scores_for(Some("7600m"), Some("31744Mi"), 0.5);
        assert!(busy[0].value < idle[0].value);
        assert_eq!(scores_for(Some("64"), Some("256Gi"), 0.0)[0].value, 100);
        assert_eq!(scores_for(None, Some("garbage"), 0.0)[1].value, -100);
    }

    #[test]
    fn report_events_carry_the_score_resource_id() {
        let ev = report_event(
            "flotilla-agent/c1",
            "c1",
            RESOURCE_NAME,
            vec![],
            SystemTime::now(),
            7,
        );
        assert_eq!(
            ev.resource_id.as_deref(),
            Some(scores::resource_id("c1", RESOURCE_NAME).as_str())
        );
        assert_eq!(ev.event_type, scores::report_type());
        assert_eq!(ev.sequence_id, Some(7));
    }
}

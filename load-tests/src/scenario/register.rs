//! `register`: C simulated clusters register with a hub that auto-accepts; measured until the
//! hub shows every one Available. Latencies are per cluster from the fleet's start.

use super::Run;
use super::hub_metrics::KV_WRITES;
use crate::report::{Phase, Summary};
use anyhow::Result;

/// Runs the scenario.
pub async fn run(mut run: Run) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("register", run.fleet.clusters);
    let phase = Phase::begin(&run.topology).await;
    let (fleet, clusters, _) = run.start_fleet().await?;
    phase.end(&run.topology, &mut summary).await;
    summary.latencies(&clusters.first_available_ms(phase.started()));
    summary.converged = clusters.available() >= run.fleet.clusters;
    run.record_fleet_rss(&fleet, &mut summary);
    run.record_hub_rss_per_cluster(&mut summary);
    // The hub's acknowledged writes to its store (self-started hub only): what each joining
    // cluster costs the JetStream server, which is what bounds a large registration.
    if let Some(writes) = run.topology.hub_metric(KV_WRITES).await {
        summary.set("kv_writes", writes);
        summary.set(
            "kv_writes_per_cluster",
            (writes / run.fleet.clusters.max(1) as f64 * 100.0).round() / 100.0,
        );
    }
    fleet.stop().await;
    Ok((summary, run))
}

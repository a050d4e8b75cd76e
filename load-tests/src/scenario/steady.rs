//! `steady`: the fleet registered and idle, renewing its leases and reporting status, for a
//! fixed time: the hub's CPU share and the message rate through its NATS server. Converged
//! means no cluster stopped being Available meanwhile.

use super::Run;
use super::hub_metrics::{MAILBOX_DROPPED, SCORES_WRITTEN};
use crate::report::{Phase, Summary};
use crate::topology::Topology;
use anyhow::Result;
use std::time::Duration;

/// Runs the scenario for `seconds` of idle time.
pub async fn run(mut run: Run, seconds: u64) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("steady", run.fleet.clusters);
    let (fleet, clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    clusters.clear_lost();
    let before = counters(&run.topology).await;
    let phase = Phase::begin(&run.topology).await;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    phase.end(&run.topology, &mut summary).await;
    let after = counters(&run.topology).await;
    // With `--score-interval-seconds`, how the hub kept up with the fleet's score reports.
    if let ((Some(w0), Some(d0)), (Some(w1), Some(d1))) = (before, after) {
        summary.set("hub_scores_written", w1 - w0);
        summary.set("hub_mailbox_dropped", d1 - d0);
    }
    let lost = clusters.lost();
    summary.errors = lost.len() as u64;
    summary.converged = lost.is_empty() && clusters.available() >= run.fleet.clusters;
    if let Some(cpu) = summary.hub_cpu_seconds {
        summary.set(
            "hub_cpu_percent",
            (cpu / summary.seconds.max(1e-3) * 1000.0).round() / 10.0,
        );
    }
    run.record_hub_rss_per_cluster(&mut summary);
    fleet.stop().await;
    Ok((summary, run))
}

/// Scores written and mailbox drops so far on the self-started hub.
async fn counters(t: &Topology) -> (Option<f64>, Option<f64>) {
    (
        t.hub_metric(SCORES_WRITTEN).await,
        t.hub_metric(MAILBOX_DROPPED).await,
    )
}

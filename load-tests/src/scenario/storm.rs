//! `reconnect-storm`: the fleet converged on a work; every agent is cut off (its leaf server
//! killed, or — without leaf servers — every in-process agent's link taken down), the work is
//! changed for every cluster while they are away, and all reconnect at once. Measured from the
//! reconnect until every cluster reports the new generation Applied and Available.

use super::{Run, WORK, hub_metrics};
use crate::report::{Phase, Sampler, Summary};
use crate::watch::WorkWatch;
use anyhow::Result;
use std::time::{Duration, Instant};

/// The hub's counters reported for the storm, as summary key and metric.
const COUNTERS: [(&str, &str); 6] = [
    ("resyncs", hub_metrics::RESYNCS),
    // Every resync request, admitted or answered busy (issue 45): busy = this − resyncs.
    ("resync_requests", "flotilla_hub_resync_requests_total"),
    ("work_resends", hub_metrics::WORK_RESENDS),
    ("events_received", hub_metrics::EVENTS_RECEIVED),
    ("mailbox_dropped", hub_metrics::MAILBOX_DROPPED),
    ("leases_expired", hub_metrics::LEASES_EXPIRED),
];

async fn counters(run: &Run) -> Vec<Option<f64>> {
    let mut values = Vec::with_capacity(COUNTERS.len());
    for (_, metric) in COUNTERS {
        values.push(run.topology.hub_metric(metric).await);
    }
    values
}

/// Runs the scenario; `outage`: how long the fleet stays cut off, at least.
pub async fn run(mut run: Run, outage: Duration) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("reconnect-storm", run.fleet.clusters);
    let (fleet, clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    run.next_phase();
    let mut works = WorkWatch::start(run.topology.hub_endpoint.clone(), run.prefix(), WORK.into());
    // The first version is a fanout to the whole fleet: its time and control-plane CPU are
    // reported too (`first_version_*`), as the fanout scenario reports them.
    let first = Phase::begin(&run.topology).await;
    summary.errors += run.apply_all(1, &works).await?;
    if works
        .wait_done(run.fleet.clusters, run.deadline())
        .await
        .is_err()
    {
        anyhow::bail!(
            "the first version converged on only {} of {} clusters before the storm",
            works.done(),
            run.fleet.clusters
        );
    }
    summary.set(
        "first_version_seconds",
        (first.started().elapsed().as_secs_f64() * 100.0).round() / 100.0,
    );
    let cpu = first.cpu_so_far(&run.topology, run.fleet.clusters);
    summary.set("first_version_cpu_hub_s", cpu.cpu_hub_s);
    summary.set("first_version_cpu_jetstream_s", cpu.cpu_jetstream_s);
    summary.set(
        "first_version_cpu_control_plane_ms_per_cluster",
        cpu.cpu_control_plane_ms_per_cluster,
    );
    run.next_phase();
    let via_leaves = run.topology.leaf_count() > 0;
    summary.set(
        "cut",
        if via_leaves {
            "leaf servers killed"
        } else {
            "agent links down"
        },
    );
    // Re-sends into the cut (issue 45): the hub re-sends only to clusters heard from since.
    let resends_before_cut = run.topology.hub_metric(hub_metrics::WORK_RESENDS).await;
    if via_leaves {
        run.topology.cut_leaves();
    } else {
        fleet.all_links_down().await?;
    }
    let cut = Instant::now();
    summary.errors += run.apply_all(2, &works).await?;
    summary.set("apply_while_cut_seconds", cut.elapsed().as_secs_f64());
    // Let the hub notice the silence the way it would in the field: a second at least, the
    // whole outage asked for when it is longer.
    tokio::time::sleep_until(
        (cut + outage)
            .max(Instant::now() + Duration::from_secs(1))
            .into(),
    )
    .await;
    summary.set("outage_seconds", cut.elapsed().as_secs_f64());
    let w = works.clone();
    let sampler = Sampler::start(run.topology.hub_pid_cell(), move || w.done());
    let before = counters(&run).await;
    let resends_while_cut = run.topology.hub_metric(hub_metrics::WORK_RESENDS).await;
    if let (Some(after), Some(before)) = (resends_while_cut, resends_before_cut) {
        summary.set("work_resends_during_cut", after - before);
    }
    let phase = Phase::begin(&run.topology).await;
    let reconnect = Instant::now();
    for name in run.fleet.names() {
        works.restart_clock(&name, reconnect);
    }
    if via_leaves {
        run.topology.restore_leaves();
    } else {
        fleet.all_links_up().await?;
    }
    run.wait_works(&mut works, &mut summary).await;
    phase.end(&run.topology, &mut summary).await;
    // What the hub did for the storm (self-started hub only): how much of it was repeats.
    for ((key, _), (after, before)) in COUNTERS
        .iter()
        .zip(counters(&run).await.into_iter().zip(before))
    {
        if let (Some(after), Some(before)) = (after, before) {
            summary.set(key, after - before);
        }
    }
    let lost = clusters.lost();
    summary.set("clusters_marked_unavailable", lost.len());
    run.plot(&mut summary, &works, sampler)?;
    fleet.stop().await;
    Ok((summary, run))
}

//! `reconnect-storm`: the fleet converged on a work; every agent is cut off (its leaf server
//! killed, or — without leaf servers — every in-process agent's link taken down), the work is
//! changed for every cluster while they are away, and all reconnect at once. Measured from the
//! reconnect until every cluster reports the new generation Applied and Available.

use super::{Run, WORK};
use crate::report::{Phase, Sampler, Summary};
use crate::watch::WorkWatch;
use anyhow::Result;
use std::time::{Duration, Instant};

/// Runs the scenario.
pub async fn run(mut run: Run) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("reconnect-storm", run.fleet.clusters);
    let (fleet, clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    let mut works = WorkWatch::start(run.topology.hub_endpoint.clone(), run.prefix(), WORK.into());
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
    let via_leaves = run.topology.leaf_count() > 0;
    summary.set(
        "cut",
        if via_leaves {
            "leaf servers killed"
        } else {
            "agent links down"
        },
    );
    if via_leaves {
        run.topology.cut_leaves();
    } else {
        fleet.all_links_down().await?;
    }
    summary.errors += run.apply_all(2, &works).await?;
    // Let the hub notice the silence the way it would in the field (nothing to wait for: the
    // agents come back before their leases run out).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let w = works.clone();
    let sampler = Sampler::start(run.topology.hub_pid_cell(), move || w.done());
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
    let lost = clusters.lost();
    summary.set("clusters_marked_unavailable", lost.len());
    run.plot(&mut summary, &works, sampler)?;
    fleet.stop().await;
    Ok((summary, run))
}

//! `hub-restart`: the fleet Available, the first half of the clusters get their work; once a
//! quarter of the fleet has converged the hub is killed (`kill -9`) and the second half is
//! applied against the dead hub, then the hub is started again; the scenario keeps applying
//! (retrying what the dead hub could not take). Converged only if every cluster's work exists and reports Applied and
//! Available: nothing lost. Needs a self-started hub.

use super::{Run, WORK};
use crate::report::{Phase, Sampler, Summary};
use crate::watch::WorkWatch;
use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};

/// Runs the scenario.
pub async fn run(mut run: Run) -> Result<(Summary, Run)> {
    if !run.topology.owns_hub() {
        bail!("hub-restart kills the hub: run it without --nats-url/--hub so it starts its own");
    }
    let mut summary = Summary::new("hub-restart", run.fleet.clusters);
    let (fleet, _clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    let mut works = WorkWatch::start(run.topology.hub_endpoint.clone(), run.prefix(), WORK.into());
    let w = works.clone();
    let sampler = Sampler::start(run.topology.hub_pid_cell(), move || w.done());
    let phase = Phase::begin(&run.topology).await;
    let names = run.fleet.names();
    let half = names.len().div_ceil(2);
    let applier = run.applier()?;
    summary.errors += applier.apply(names[..half].to_vec(), 1, &works).await?;
    let quarter = names.len().div_ceil(4);
    if works.wait_done(quarter, run.deadline()).await.is_err() {
        bail!("only {} works converged before the kill", works.done());
    }
    // The kill lands while the first half's statuses are still arriving and before the second
    // half is applied: those calls meet a dead hub and are retried until it is back.
    let converged_at_kill = works.done();
    run.topology.kill_hub()?;
    let killed = Instant::now();
    let second = {
        let applier = applier.clone();
        let works = works.clone();
        let rest = names[half..].to_vec();
        tokio::spawn(async move { applier.apply(rest, 1, &works).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.topology.restart_hub().await?;
    summary.set("hub_down_seconds", killed.elapsed().as_secs_f64());
    summary.set("converged_at_kill", converged_at_kill);
    summary.errors += second.await.context("apply task")??;
    run.wait_works(&mut works, &mut summary).await;
    phase.end(&run.topology, &mut summary).await;
    run.plot(&mut summary, &works, sampler)?;
    fleet.stop().await;
    Ok((summary, run))
}

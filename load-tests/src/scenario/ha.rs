//! `ha --hubs N`: N hubs over one NATS share the fleet (docs/ha.md). The extra hubs start with
//! the first one's flags; once every hub holds some of the 33 units, the fleet registers and one
//! work goes to every cluster through the first hub (calls on clusters of other hubs' shards are
//! forwarded to them): `seconds` is that fanout. With two hubs or more the last one is then
//! killed (`kill -9`): `takeover_seconds` runs from the kill until the survivors hold every unit
//! again, and a second version of the work to every cluster must converge too
//! (`after_kill_seconds`) — nothing lost. The hubs share this machine's cores: the point is
//! correctness and takeover time, not throughput.

use super::{Run, WORK};
use crate::report::{Phase, Sampler, Summary};
use crate::watch::WorkWatch;
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Units: 32 status shards and the controllers.
const UNITS: usize = 33;

/// Runs the scenario.
pub async fn run(mut run: Run, hubs: usize) -> Result<(Summary, Run)> {
    if !run.topology.owns_hub() {
        bail!("ha starts its own hubs: run it without --nats-url/--hub");
    }
    if hubs == 0 {
        bail!("--hubs must be at least 1");
    }
    let mut summary = Summary::new("ha", run.fleet.clusters);
    summary.set("hubs", hubs);
    for _ in 1..hubs {
        run.topology.add_hub().await?;
    }
    let all: Vec<usize> = (0..hubs).collect();
    let spread = Instant::now();
    wait_held(&run, &all, true).await?;
    summary.set("spread_seconds", spread.elapsed().as_secs_f64());
    let (fleet, _clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    let mut works = WorkWatch::start(run.topology.hub_endpoint.clone(), run.prefix(), WORK.into());
    let w = works.clone();
    let sampler = Sampler::start(run.topology.hub_pid_cell(), move || w.done());
    let phase = Phase::begin(&run.topology).await;
    summary.errors += run.apply_all(1, &works).await?;
    run.wait_works(&mut works, &mut summary).await;
    phase.end(&run.topology, &mut summary).await;
    run.plot(&mut summary, &works, sampler)?;
    if hubs >= 2 {
        let victim = hubs - 1;
        let killed = Instant::now();
        run.topology.kill_extra_hub(victim)?;
        let survivors: Vec<usize> = (0..victim).collect();
        wait_held(&run, &survivors, false).await?;
        summary.set("takeover_seconds", killed.elapsed().as_secs_f64());
        let mut again =
            WorkWatch::start(run.topology.hub_endpoint.clone(), run.prefix(), WORK.into());
        let t = Instant::now();
        let errors = run.apply_all(2, &again).await?;
        let want = run.fleet.clusters;
        match again.wait_done(want, run.deadline()).await {
            Ok(()) => summary.set("after_kill_seconds", t.elapsed().as_secs_f64()),
            Err(n) => {
                summary.errors += errors + (want - n) as u64;
                summary.converged = false;
                summary.set("after_kill_not_converged", again.missing(5));
            }
        }
        summary.set("after_kill_total_seconds", killed.elapsed().as_secs_f64());
    }
    fleet.stop().await;
    Ok((summary, run))
}

/// Waits until hubs `hubs` together hold every unit (and, with `each`, every one of them some).
async fn wait_held(run: &Run, hubs: &[usize], each: bool) -> Result<()> {
    loop {
        let mut held = BTreeSet::new();
        let mut everyone = true;
        for &h in hubs {
            let units = run.topology.held_units(h).await.unwrap_or_default();
            everyone &= !units.is_empty();
            held.extend(units);
        }
        if held.len() == UNITS && (everyone || !each) {
            return Ok(());
        }
        if Instant::now() > run.deadline() {
            bail!(
                "the hubs held {} of {UNITS} units when the run's time was up",
                held.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

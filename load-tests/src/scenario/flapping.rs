//! `flapping`: a share of the fleet (20 % by default) flaps — its links go down and up with
//! exponential periods — for a fixed time while the work changes every few seconds. Checked:
//! the hub stays up, no cluster outside the flapping share is ever shown not Available, and
//! after the flapping ends every cluster converges on the last version.
//!
//! The flapping comes from the fleet profile's connectivity model (played by the simulator,
//! in this process or in `flotilla-sim` processes); without `--profile` the scenario writes a
//! profile with only `connectivity.flapping`.

use super::{Run, WORK};
use crate::report::{Phase, Sampler, Summary};
use crate::watch::WorkWatch;
use anyhow::{Context, Result, bail};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// How the fleet flaps.
pub struct Settings {
    /// Share of the fleet.
    pub share: f64,
    /// Seconds of flapping after the steady part of the fleet is Available.
    pub seconds: u64,
    /// Seconds between work changes.
    pub change_every: u64,
    /// Mean seconds up and down.
    pub mean_up: f64,
    /// Mean seconds down.
    pub mean_down: f64,
}

/// Runs the scenario.
pub async fn run(mut run: Run, s: Settings) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("flapping", run.fleet.clusters);
    // Flapping is timed from the fleet's start: leave the fleet time to register first.
    let start_seconds = run.fleet.clusters as f64 / f64::from(run.fleet.start_rate.max(1)) + 5.0;
    let for_seconds = start_seconds + s.seconds as f64;
    let dir = tempfile::tempdir().context("a directory for the generated profile")?;
    let profile = match run.fleet.load_profile()? {
        Some(p) => {
            if p.connectivity.flapping.is_none() {
                bail!("the --profile of a flapping run needs connectivity.flapping");
            }
            p
        }
        None => {
            let path = dir.path().join("flapping.yaml");
            std::fs::write(
                &path,
                format!(
                    "connectivity:\n  flapping: {{share: {}, meanUpSeconds: {}, meanDownSeconds: {}, forSeconds: {for_seconds}}}\n",
                    s.share, s.mean_up, s.mean_down
                ),
            )?;
            run.fleet.profile = Some(path);
            run.fleet.load_profile()?.context("the generated profile")?
        }
    };
    let flap = profile.connectivity.flapping.context("flapping")?;
    let flapping: HashSet<String> = (0..run.fleet.clusters)
        .filter(|n| profile.in_share(n + 1, "flapping", flap.share))
        .map(|n| run.fleet.name(n))
        .collect();
    let steady: Vec<String> = run
        .fleet
        .names()
        .into_iter()
        .filter(|n| !flapping.contains(n))
        .collect();
    summary.set("flapping_clusters", flapping.len());
    let fleet_started = Instant::now();
    let mut clusters =
        crate::watch::ClusterWatch::start(run.topology.hub_endpoint.clone(), run.prefix());
    let fleet = crate::fleet::LoadFleet::start(&run.topology, &run.fleet).await?;
    let deadline = run.deadline();
    // Every cluster is applied to: the flapping ones must have registered (between flaps)
    // before their work can be, or the apply is refused as for an unknown cluster.
    let all = run.fleet.names();
    while !steady.iter().all(|n| clusters.is_available(n))
        || !all.iter().all(|n| clusters.is_known(n))
    {
        if Instant::now() > deadline {
            bail!(
                "the steady clusters did not all become Available, or not every cluster registered"
            );
        }
        let _ = clusters
            .wait_available(
                run.fleet.clusters,
                Instant::now() + Duration::from_millis(500),
            )
            .await;
    }
    clusters.clear_lost();
    // The flapping and the convergence after it get a whole phase's budget of their own: at
    // 100,000 the fleet's start took a quarter of a 1,500 s budget counted from the run's start.
    run.next_phase();
    let flapping_ends =
        fleet_started + Duration::from_secs_f64(flap.for_seconds.unwrap_or(for_seconds));
    let mut works = WorkWatch::start(run.topology.hub_endpoint.clone(), run.prefix(), WORK.into());
    let w = works.clone();
    let sampler = Sampler::start(run.topology.hub_pid_cell(), move || w.done());
    let phase = Phase::begin(&run.topology).await;
    let mut version = 0;
    while Instant::now() < flapping_ends || version == 0 {
        version += 1;
        summary.errors += run.apply_all(version, &works).await?;
        tokio::time::sleep(Duration::from_secs(s.change_every)).await;
    }
    tokio::time::sleep_until(flapping_ends.into()).await;
    let settle = Instant::now();
    for name in run.fleet.names() {
        works.restart_clock(&name, settle);
    }
    run.wait_works(&mut works, &mut summary).await;
    phase.end(&run.topology, &mut summary).await;
    summary.set("versions", version);
    if let Some(downs) = fleet.link_downs() {
        summary.set("link_downs", downs);
    }
    let lost = clusters.lost();
    let steady_lost: Vec<&String> = lost.keys().filter(|c| !flapping.contains(*c)).collect();
    summary.set(
        "flapping_clusters_marked_unavailable",
        lost.len() - steady_lost.len(),
    );
    summary.set("steady_clusters_marked_unavailable", steady_lost.len());
    if !steady_lost.is_empty() {
        summary.errors += steady_lost.len() as u64;
        summary.converged = false;
    }
    let hub_alive = run.topology.hub_alive();
    summary.set("hub_stable", hub_alive);
    if !hub_alive {
        summary.errors += 1;
        summary.converged = false;
    }
    run.plot(&mut summary, &works, sampler)?;
    fleet.stop().await;
    Ok((summary, run))
}

//! The connectivity model of a fleet profile, played against a running [`Fleet`]: flapping
//! links (exponential up and down periods), scheduled outages of a share of the fleet, and
//! scheduled agent restarts with or without their state. Times count from the fleet's start;
//! which clusters take part is the profile's seeded draw, so runs are repeatable.

use crate::FleetConfig;
use crate::fleet::Fleet;
use crate::profile::{Flapping, Outage, Restart};
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::time::Instant;

/// Starts the profile's connectivity model (nothing without a profile or a `connectivity`).
pub(crate) fn start(fleet: &Fleet, config: &FleetConfig) {
    let Some(profile) = &config.profile else {
        return;
    };
    // The fleet's `n`-th cluster is cluster `first_index + n` of the profile's seeded draws, so
    // `flotilla-load` (and a second simulator process) computes the same members.
    let members = |what: &str, share: f64| -> Vec<usize> {
        (0..fleet.len())
            .filter(|n| profile.in_share(config.first_index + n, what, share))
            .collect()
    };
    let c = &profile.connectivity;
    let t0 = Instant::now();
    if let Some(f) = c.flapping {
        for n in members("flapping", f.share) {
            let seed = profile.seed ^ (config.first_index + n) as u64;
            fleet.spawn(flap(fleet.clone(), n, f, seed, t0));
        }
    }
    for (k, o) in c.outages.iter().enumerate() {
        let m = members(&format!("outage/{k}"), o.share);
        fleet.spawn(outage(fleet.clone(), m, *o, t0));
    }
    for (k, r) in c.restarts.iter().enumerate() {
        let m = members(&format!("restart/{k}"), r.share);
        fleet.spawn(restart(fleet.clone(), m, *r, t0));
    }
}

/// An exponentially distributed duration with this mean.
fn exponential(rng: &mut impl Rng, mean_seconds: f64) -> Duration {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    Duration::from_secs_f64((-u.ln() * mean_seconds).min(mean_seconds * 20.0))
}

async fn flap(fleet: Fleet, n: usize, f: Flapping, seed: u64, t0: Instant) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let end = f.for_seconds.map(|s| t0 + Duration::from_secs_f64(s));
    loop {
        let up_until = Instant::now() + exponential(&mut rng, f.mean_up_seconds);
        if end.is_some_and(|e| up_until >= e) {
            return;
        }
        tokio::time::sleep_until(up_until).await;
        fleet.link_down(n).await;
        let mut down_until = Instant::now() + exponential(&mut rng, f.mean_down_seconds);
        if let Some(e) = end {
            down_until = down_until.min(e);
        }
        tokio::time::sleep_until(down_until).await;
        fleet.link_up(n).await;
    }
}

async fn outage(fleet: Fleet, members: Vec<usize>, o: Outage, t0: Instant) {
    tokio::time::sleep_until(t0 + Duration::from_secs_f64(o.at_seconds)).await;
    tracing::info!(
        clusters = members.len(),
        seconds = o.for_seconds,
        "outage begins"
    );
    for_each(&fleet, &members, |f, n| async move { f.link_down(n).await }).await;
    tokio::time::sleep(Duration::from_secs_f64(o.for_seconds)).await;
    tracing::info!(clusters = members.len(), "outage ends");
    for_each(&fleet, &members, |f, n| async move { f.link_up(n).await }).await;
}

async fn restart(fleet: Fleet, members: Vec<usize>, r: Restart, t0: Instant) {
    tokio::time::sleep_until(t0 + Duration::from_secs_f64(r.at_seconds)).await;
    tracing::info!(
        clusters = members.len(),
        keep_state = r.keep_state,
        "restarting agents"
    );
    let keep = r.keep_state;
    for_each(&fleet, &members, move |f, n| async move {
        f.restart(n, keep).await
    })
    .await;
}

async fn for_each<F, Fut>(fleet: &Fleet, members: &[usize], f: F)
where
    F: Fn(Fleet, usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for n in members {
        set.spawn(f(fleet.clone(), *n));
    }
    while set.join_next().await.is_some() {}
}

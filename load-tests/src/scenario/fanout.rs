//! `fanout`: once the fleet is Available, one work to every cluster; measured until every work
//! is Applied and Available at the hub. Then the same number of request/reply round trips with
//! the same payload sizes over the same NATS topology ([`super::transport`]): `efficiency` is
//! that limit's time over the fanout's.

use super::hub_metrics::{RESYNCS, WORK_RESENDS};
use super::{Run, WORK, transport};
use crate::report::{Phase, Sampler, Summary};
use crate::watch::WorkWatch;
use anyhow::Result;
use prost::Message;

/// Runs the scenario.
pub async fn run(mut run: Run) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("fanout", run.fleet.clusters);
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
    // With every agent holding its work (the simulators' memory with one work per agent).
    run.record_fleet_rss(&fleet, &mut summary);
    summary.set("status_events", works.events());
    // Specs the hub sent again because no status came back in time, and resyncs it answered
    // (self-started hub only): how much of a slow tail is the hub repeating itself.
    summary.set("work_resends", run.topology.hub_metric(WORK_RESENDS).await);
    summary.set("resyncs", run.topology.hub_metric(RESYNCS).await);
    let request = super::load_work(&run.fleet.name(0), 1).encoded_len();
    let reply = transport::status_size(&run, &run.fleet.name(0)).await;
    let limit = transport::measure(&run.topology, run.fleet.clusters, request, reply).await;
    match limit {
        Ok(limit) => {
            summary.set("transport_limit_seconds", limit.as_secs_f64());
            summary.set(
                "efficiency",
                ((limit.as_secs_f64() / summary.seconds.max(1e-3)) * 1000.0).round() / 1000.0,
            );
        }
        Err(e) => {
            summary.set("efficiency", serde_json::Value::Null);
            summary.set("transport_limit_error", e.to_string());
        }
    }
    fleet.stop().await;
    Ok((summary, run))
}

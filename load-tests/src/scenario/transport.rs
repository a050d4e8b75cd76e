//! `transport-limit`: what the NATS topology alone can do — the fanout's round trips (one per
//! cluster: a request the size of the work's spec, a reply the size of its status) between a
//! client where the hub connects and responders where the agents connect (one per agent
//! server, so through the leaf servers when there are any), many in flight. No hub, no agent
//! logic, no JetStream: the floor under any fanout on this topology.

use super::Run;
use crate::report::{Phase, Summary};
use crate::topology::Topology;
use anyhow::{Context, Result, bail};
use futures::StreamExt;
use prost::Message;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Round trips in flight at once.
const IN_FLIGHT: usize = 1024;

/// The encoded size of `cluster`'s load work status at the hub (1 KiB when unknown).
pub async fn status_size(run: &Run, cluster: &str) -> usize {
    let Ok(channel) = run.channel() else {
        return 1024;
    };
    let mut api = flotilla_api::v1::work_service_client::WorkServiceClient::new(channel);
    api.get_work(flotilla_api::v1::GetWorkRequest {
        cluster: cluster.to_string(),
        name: super::WORK.to_string(),
    })
    .await
    .ok()
    .and_then(|w| w.into_inner().status.map(|s| s.encoded_len()))
    .unwrap_or(1024)
}

/// Times `round_trips` request/reply exchanges of the given sizes over the topology.
pub async fn measure(
    topology: &Topology,
    round_trips: usize,
    request_bytes: usize,
    reply_bytes: usize,
) -> Result<Duration> {
    let reply = bytes::Bytes::from(vec![b'r'; reply_bytes]);
    let mut responders = Vec::new();
    for url in topology.agent_urls() {
        let client = async_nats::connect(&url)
            .await
            .with_context(|| format!("connecting a responder to {url}"))?;
        let mut sub = client.subscribe("flotilla.load.echo.>").await?;
        let reply = reply.clone();
        let c = client.clone();
        responders.push(tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                if let Some(to) = msg.reply {
                    let _ = c.publish(to, reply.clone()).await;
                }
            }
        }));
    }
    let client = async_nats::connect(&topology.nats_url)
        .await
        .with_context(|| format!("connecting the requester to {}", topology.nats_url))?;
    let request = bytes::Bytes::from(vec![b'q'; request_bytes]);
    // Interest crosses the leaf connections asynchronously: wait until a request is answered.
    let ready = Instant::now();
    while client
        .request("flotilla.load.echo.ready", request.clone())
        .await
        .is_err()
    {
        if ready.elapsed() > Duration::from_secs(15) {
            bail!("no responder answered within 15 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sem = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    let t0 = Instant::now();
    for i in 0..round_trips {
        let permit = sem.clone().acquire_owned().await?;
        let client = client.clone();
        let request = request.clone();
        tasks.spawn(async move {
            let subject = format!("flotilla.load.echo.{i}");
            let mut tries = 0;
            loop {
                match client.request(subject.clone(), request.clone()).await {
                    Ok(_) => break Ok(()),
                    Err(e) if tries < 3 => {
                        tries += 1;
                        tracing::debug!(error = %e, "round trip retried");
                    }
                    Err(e) => break Err(e),
                }
            }
            .map(|()| drop(permit))
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("round trip task")?
            .context("a round trip failed three times")?;
    }
    let took = t0.elapsed();
    for r in responders {
        r.abort();
    }
    Ok(took)
}

/// Runs the transport limit alone, with the load work's size and a 1 KiB status.
pub async fn run(run: Run) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("transport-limit", run.fleet.clusters);
    let request = super::load_work(&run.fleet.name(0), 1).encoded_len();
    let phase = Phase::begin(&run.topology).await;
    let took = measure(&run.topology, run.fleet.clusters, request, 1024).await?;
    phase.end(&run.topology, &mut summary).await;
    summary.seconds = took.as_secs_f64();
    summary.converged = true;
    summary.set("request_bytes", request);
    summary.set("reply_bytes", 1024);
    summary.set(
        "round_trips_per_second",
        (run.fleet.clusters as f64 / took.as_secs_f64().max(1e-6)).round(),
    );
    Ok((summary, run))
}

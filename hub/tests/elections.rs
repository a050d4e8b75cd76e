//! Losing one NATS node costs nothing (issue 43), against real processes on nats-server 2.9.10
//! and the current release: two `flotilla-hub` processes with `--replicas 3` and their default
//! shard leases over a three-node JetStream, simulated clusters in the test. The node leading
//! the most streams is killed (SIGKILL), and at once:
//! - (a) a work is applied to every cluster through each surviving hub, with no retry by the
//!   client: every apply succeeds (the hubs ride through the elections);
//! - (b) a third hub is started: it never exits, its `/healthz` answers throughout, and it
//!   serves once the store answers;
//! - (c) neither running hub loses a shard lease.
//!
//! `FLOTILLA_ELECTION_RUNS=N` repeats the whole run N times per server version (the suite runs
//! it once); each run prints one `ELECTION …` line with what it measured
//! (`scripts/election-loop.sh` sums them up).

mod common;

use common::hubproc::{HubProc, PATIENCE};
use common::work::config_map_work;
use common::*;
use flotilla_testkit::{NatsCluster, NatsClusterOptions};
use std::time::{Duration, Instant};

/// Clusters simulated in each run.
const CLUSTERS: usize = 6;

/// The streams whose leaders the hubs need for (a) and (b).
const STREAMS: [&str; 4] = ["KV_clusters", "KV_works", "KV_hubleases", "FLOTILLA_STATUS"];

fn runs() -> usize {
    std::env::var("FLOTILLA_ELECTION_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// What one run measured.
#[derive(Debug, Default)]
struct Measured {
    /// From the kill until every stream the hubs need has a leader again.
    election: Duration,
    /// The longest apply through a surviving hub started at the kill.
    longest_apply: Duration,
    /// From the kill until the third hub served.
    new_hub_serving: Duration,
    /// What the third hub's `/healthz` said while it started, when it said more than "ok".
    said: Option<String>,
    /// The longest time between two acknowledged renewals of a lease on the running hubs.
    renewal_gap: Duration,
}

/// One apply per cluster through `hub`, all at once, no retry: how long the longest took.
async fn apply_all(hub: &HubProc, names: &[String], run: usize) -> Result<Duration, String> {
    let works = hub.works().await;
    let mut calls = tokio::task::JoinSet::new();
    for n in names {
        let mut api = works.clone();
        let w = config_map_work(n, &format!("during-{}-{run}", hub.id));
        let n = n.clone();
        calls.spawn(async move {
            let started = Instant::now();
            api.apply_work(w)
                .await
                .map(|_| started.elapsed())
                .map_err(|e| format!("apply to {n}: {} {}", e.code(), e.message()))
        });
    }
    let mut longest = Duration::ZERO;
    while let Some(done) = calls.join_next().await {
        longest = longest.max(done.map_err(|e| e.to_string())??);
    }
    Ok(longest)
}

/// Starts a hub and waits until it serves, checking it never exits and that `/healthz` answers
/// 200 throughout; what `/healthz` said while it waited.
async fn start_during(urls: &str, dir: &std::path::Path, id: &str) -> (HubProc, Option<String>) {
    let mut hub = HubProc::start(urls, dir, id, &[]);
    let deadline = Instant::now() + PATIENCE;
    let mut said = None;
    loop {
        assert!(
            hub.proc.is_running(),
            "hub {id} exited while the store elected its leaders:\n{}",
            hub.proc.output()
        );
        if let Ok((status, body)) =
            flotilla_testkit::http_get(&hub.metrics_addr(), "/healthz").await
        {
            assert_eq!(status, 200, "/healthz of a starting hub: {body}");
            // The most telling answer: what it waited for, else that it was starting.
            if body.starts_with("starting")
                && said.as_deref().is_none_or(|s: &str| !s.contains("waiting"))
            {
                said = Some(body.clone());
            }
            if body == "ok" && hub.channel().await.is_some() {
                let mut api = hub.clusters().await;
                if get(&mut api, "election-1").await.is_some() {
                    return (hub, said);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "hub {id} did not serve within {PATIENCE:?}:\n{}",
            hub.proc.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Events of `hub`'s shard log after `since_ms` other than acquisitions and hand-overs.
async fn lost_leases(hub: &HubProc, since_ms: u64) -> Vec<String> {
    let log = hub.shards().await.expect("the hub's shard log");
    log["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["at_ms"].as_u64().unwrap_or(0) >= since_ms)
        .filter(|e| e["event"] == "lost")
        .map(|e| e.to_string())
        .collect()
}

async fn one_run(binary: &std::path::Path, run: usize) -> Measured {
    let mut nats = NatsCluster::start(binary, NatsClusterOptions::default());
    let mut dir = tempfile::tempdir().unwrap();
    // FLOTILLA_ELECTION_LOGS keeps the hubs' logs.
    if std::env::var_os("FLOTILLA_ELECTION_LOGS").is_some() {
        dir.disable_cleanup(true);
        println!("logs in {}", dir.path().display());
    }
    let urls = nats.urls();
    let a = HubProc::start(&urls, dir.path(), "a", &[]);
    let b = HubProc::start(&urls, dir.path(), "b", &[]);
    let names: Vec<String> = (1..=CLUSTERS).map(|i| format!("election-{i}")).collect();
    let _agents: Vec<_> = names
        .iter()
        .map(|n| start_agent(agent_config(n, &urls)))
        .collect();
    let api_a = a.clusters().await;
    for n in &names {
        flotilla_testkit::eventually(PATIENCE, &format!("{n} Available"), || {
            let mut api = api_a.clone();
            async move { (available(&get(&mut api, n).await?)? == "True").then_some(()) }
        })
        .await;
    }
    // Both hubs hold shards, and every store path works before the loss.
    flotilla_testkit::eventually(PATIENCE, "both hubs holding shards", || async {
        let (ha, hb) = (a.held().await?, b.held().await?);
        (!ha.is_empty() && !hb.is_empty()).then_some(())
    })
    .await;
    apply_all(&a, &names, run)
        .await
        .expect("applies before the loss");

    // The node leading the most streams dies; at once, applies through both hubs and a new hub.
    let victim = nats.busiest().expect("a node leading streams");
    let killed_at = now_ms();
    let killed = Instant::now();
    nats.stop(victim);
    let elected = async {
        flotilla_testkit::eventually(PATIENCE, "every stream led again", || {
            let nats = &nats;
            async move {
                let led = tokio::task::block_in_place(|| nats.every_stream_led(&STREAMS));
                led.then(|| killed.elapsed())
            }
        })
        .await
    };
    let serving = async {
        let started = start_during(&urls, dir.path(), "c").await;
        (started, killed.elapsed())
    };
    let (through_a, through_b, ((c, said), new_hub_serving), election) = tokio::join!(
        apply_all(&a, &names, run),
        apply_all(&b, &names, run),
        serving,
        elected,
    );
    let through_a = through_a.unwrap_or_else(|e| panic!("through hub a after the loss: {e}"));
    let through_b = through_b.unwrap_or_else(|e| panic!("through hub b after the loss: {e}"));

    // No running hub lost a lease.
    let mut renewal_gap = Duration::ZERO;
    for hub in [&a, &b] {
        let lost = lost_leases(hub, killed_at).await;
        assert!(lost.is_empty(), "hub {} lost leases: {lost:?}", hub.id);
        let gap = hub.shards().await.expect("the hub's shards")["longest_renewal_gap_ms"]
            .as_u64()
            .expect("longest_renewal_gap_ms");
        renewal_gap = renewal_gap.max(Duration::from_millis(gap));
    }
    drop(c);
    Measured {
        election,
        longest_apply: through_a.max(through_b),
        new_hub_serving,
        said,
        renewal_gap,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_busiest_nats_node_costs_no_write_no_start_and_no_lease() {
    for (version, binary) in flotilla_testkit::nats_server_binaries() {
        for run in 1..=runs() {
            let m = one_run(&binary, run).await;
            println!(
                "ELECTION server={version} run={run} election_ms={} longest_apply_ms={} \
                 new_hub_serving_ms={} renewal_gap_ms={} healthz={:?}",
                m.election.as_millis(),
                m.longest_apply.as_millis(),
                m.new_hub_serving.as_millis(),
                m.renewal_gap.as_millis(),
                m.said.unwrap_or_default()
            );
        }
    }
}

//! `flotilla-load`: load scenarios against a running hub. Each prints a JSON summary.
//!
//! - `register`: C simulated clusters register with a hub running `--auto-accept`; measures the
//!   time until every cluster is accepted and Available, and this process's RSS per agent.
//! - `placement`: the hub's placement machinery in-process over a synthetic inventory of 10,000
//!   and 100,000 clusters, against a real nats-server ([`placement`]).

mod placement;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use flotilla_api::meta::{self, COND_AVAILABLE};
use flotilla_api::v1::ListClustersRequest;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_sim::{Fleet, FleetConfig};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Load scenarios for Flotilla.
#[derive(Parser, Debug)]
#[command(name = "flotilla-load", version)]
struct Args {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Debug)]
enum Scenario {
    /// Register C simulated clusters and wait until the hub shows all of them Available.
    Register {
        /// NATS URL.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// Hub gRPC endpoint (the hub must run with --auto-accept).
        #[arg(long, default_value = "http://127.0.0.1:50051")]
        hub: String,
        /// Number of clusters.
        #[arg(long, default_value_t = 1000)]
        clusters: usize,
        /// Name prefix.
        #[arg(long, default_value = "load")]
        name_prefix: String,
        /// Agents started per second.
        #[arg(long, default_value_t = 1000)]
        start_rate: u32,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_seconds: u64,
    },
    /// One placement with every prioritizer over C clusters, then P placements rescheduled after
    /// one cluster's label changes (in-process placement machinery, synthetic inventory).
    Placement {
        /// NATS URL of a dedicated nats-server (the scenario writes the placement buckets).
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// Fleet sizes of the one-placement measurement (repeatable).
        #[arg(long = "clusters", default_values_t = [10_000usize, 100_000])]
        clusters: Vec<usize>,
        /// Placements in the reschedule measurement.
        #[arg(long, default_value_t = 1000)]
        placements: usize,
        /// Fleet size of the reschedule measurement.
        #[arg(long, default_value_t = 10_000)]
        reschedule_clusters: usize,
        /// Dispatcher debounce in milliseconds.
        #[arg(long, default_value_t = 10)]
        debounce_ms: u64,
        /// Scheduling runs averaged for the compute time.
        #[arg(long, default_value_t = 20)]
        repeats: usize,
    },
}

#[derive(Serialize)]
struct RegisterSummary {
    scenario: &'static str,
    clusters: usize,
    agents_started_seconds: f64,
    all_available_seconds: f64,
    load_process_rss_bytes: Option<u64>,
    rss_per_agent_bytes: Option<u64>,
}

async fn count_available(
    client: &mut ClusterServiceClient<tonic::transport::Channel>,
    prefix: &str,
) -> Result<usize> {
    let mut token = String::new();
    let mut n = 0;
    loop {
        let page = client
            .list_clusters(ListClustersRequest {
                label_selector: String::new(),
                page_size: 5000,
                page_token: token,
            })
            .await
            .context("listing clusters")?
            .into_inner();
        n += page
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .as_ref()
                    .is_some_and(|m| m.name.starts_with(prefix))
            })
            .filter(|c| c.spec.as_ref().is_some_and(|s| s.hub_accepts_client))
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| meta::condition_status(&s.conditions, COND_AVAILABLE))
                    == Some("True")
            })
            .count();
        if page.next_page_token.is_empty() {
            return Ok(n);
        }
        token = page.next_page_token;
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match Args::parse().scenario {
        Scenario::Placement {
            nats_url,
            clusters,
            placements,
            reschedule_clusters,
            debounce_ms,
            repeats,
        } => {
            let summary = placement::run(placement::Settings {
                nats_url,
                clusters,
                placements,
                reschedule_clusters,
                debounce: Duration::from_millis(debounce_ms),
                repeats,
            })
            .await?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
        Scenario::Register {
            nats_url,
            hub,
            clusters,
            name_prefix,
            start_rate,
            timeout_seconds,
        } => {
            let mut client = ClusterServiceClient::connect(hub.clone())
                .await
                .with_context(|| format!("connecting to the hub at {hub}"))?;
            let rss_before = flotilla_bus::process::rss_bytes();
            let mut config = FleetConfig::new(&nats_url, clusters);
            config.name_prefix = name_prefix.clone();
            config.start_rate = start_rate;
            config.pending_poll = Duration::from_secs(2);
            // Registration only: no score reports competing for the hub.
            config.scores = None;
            let t0 = Instant::now();
            let fleet = Fleet::start(&config).await;
            let started = t0.elapsed();
            let deadline = t0 + Duration::from_secs(timeout_seconds);
            let prefix = format!("{name_prefix}-");
            loop {
                let n = count_available(&mut client, &prefix).await?;
                if n >= clusters {
                    break;
                }
                if Instant::now() > deadline {
                    fleet.stop().await;
                    bail!("only {n} of {clusters} clusters Available after {timeout_seconds} s");
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            let total = t0.elapsed();
            let rss = flotilla_bus::process::rss_bytes();
            let summary = RegisterSummary {
                scenario: "register",
                clusters,
                agents_started_seconds: started.as_secs_f64(),
                all_available_seconds: total.as_secs_f64(),
                load_process_rss_bytes: rss,
                rss_per_agent_bytes: rss
                    .zip(rss_before)
                    .map(|(a, b)| a.saturating_sub(b) / clusters.max(1) as u64),
            };
            println!("{}", serde_json::to_string_pretty(&summary)?);
            fleet.stop().await;
        }
    }
    Ok(())
}

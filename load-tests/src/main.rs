//! `flotilla-load`: load scenarios against a running hub. Each prints a JSON summary.
//!
//! - `register`: C simulated clusters register with a hub running `--auto-accept`; measures the
//!   time until every cluster is accepted and Available, and this process's RSS per agent.
//! - `fanout`: then one work per cluster; time until all are Applied and Available at the hub,
//!   per-cluster latency percentiles, hub CPU seconds and peak RSS.
//! - `placement`: the hub's placement machinery in-process over a synthetic inventory of 10,000
//!   and 100,000 clusters, against a real nats-server ([`placement`]).

mod placement;
mod rollout;

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
        /// Secure mode: the bootstrap credentials of the simulated agents.
        #[arg(long)]
        bootstrap_creds: Option<std::path::PathBuf>,
        /// CA that signed the NATS server's certificate (secure mode with --tls).
        #[arg(long)]
        nats_ca: Option<std::path::PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_seconds: u64,
    },
    /// Register C clusters, then send one work (Deployment + Service + ConfigMap) to each and
    /// measure until every work is Applied and Available at the hub.
    Fanout {
        /// NATS URL.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// Hub gRPC endpoint (the hub must run with --auto-accept).
        #[arg(long, default_value = "http://127.0.0.1:50051")]
        hub: String,
        /// PID of the hub process, to report its CPU seconds and peak RSS.
        #[arg(long)]
        hub_pid: Option<u32>,
        /// Number of clusters.
        #[arg(long, default_value_t = 1000)]
        clusters: usize,
        /// Name prefix.
        #[arg(long, default_value = "fan")]
        name_prefix: String,
        /// Concurrent ApplyWork calls.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Secure mode: the bootstrap credentials of the simulated agents.
        #[arg(long)]
        bootstrap_creds: Option<std::path::PathBuf>,
        /// CA that signed the NATS server's certificate (secure mode with --tls).
        #[arg(long)]
        nats_ca: Option<std::path::PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout_seconds: u64,
    },
    /// Roll one ManifestWorkReplicaSet over C clusters, decision group by decision group
    /// (ProgressivePerGroup), and time each group.
    Rollout {
        /// NATS URL.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// Hub gRPC endpoint (the hub must run with --auto-accept).
        #[arg(long, default_value = "http://127.0.0.1:50051")]
        hub: String,
        /// PID of the hub process, to report its CPU seconds and peak RSS.
        #[arg(long)]
        hub_pid: Option<u32>,
        /// Number of clusters.
        #[arg(long, default_value_t = 1000)]
        clusters: usize,
        /// Decision groups.
        #[arg(long, default_value_t = 10)]
        groups: usize,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 900)]
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
                page_size: 500,
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

#[derive(Serialize)]
struct FanoutSummary {
    scenario: &'static str,
    clusters: usize,
    register_seconds: f64,
    fanout_seconds: f64,
    latency_p50_seconds: f64,
    latency_p99_seconds: f64,
    latency_max_seconds: f64,
    hub_cpu_seconds_during_fanout: Option<f64>,
    hub_rss_bytes: Option<u64>,
    load_process_rss_bytes: Option<u64>,
}

/// CPU seconds (user + system) and RSS of a process, from /proc.
fn proc_stats(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((ticks / 100.0, rss_kib * 1024))
}

fn fanout_work(cluster: &str) -> flotilla_api::v1::ManifestWork {
    let yaml = format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: {cluster}, name: fanout}}
spec:
  workload:
    manifests:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: web-config, namespace: default}}, data: {{greeting: hello}}}}
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: web, namespace: default}}
        spec:
          replicas: 2
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec: {{containers: [{{name: web, image: nginx:1.27}}]}}
      - {{apiVersion: v1, kind: Service, metadata: {{name: web, namespace: default}}, spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}}}
"#
    );
    match flotilla_api::ocm::parse_documents(&yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::Work(w)) => w,
        other => panic!("the fanout work does not parse: {other:?}"),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[allow(clippy::too_many_arguments)]
/// Secure-mode settings of a simulated fleet.
struct Secure {
    bootstrap_creds: Option<std::path::PathBuf>,
    nats_ca: Option<std::path::PathBuf>,
}

impl Secure {
    fn apply(&self, config: &mut FleetConfig) {
        config.bootstrap_creds = self.bootstrap_creds.clone();
        config.nats.ca = self.nats_ca.clone();
    }
}

#[allow(clippy::too_many_arguments)]
async fn fanout(
    nats_url: String,
    hub: String,
    hub_pid: Option<u32>,
    clusters: usize,
    name_prefix: String,
    concurrency: usize,
    timeout_seconds: u64,
    secure: Secure,
) -> Result<()> {
    use flotilla_api::v1::WatchWorksRequest;
    use flotilla_api::v1::work_service_client::WorkServiceClient;
    use std::collections::HashMap;
    let channel = tonic::transport::Endpoint::from_shared(hub.clone())?
        .connect()
        .await
        .with_context(|| format!("connecting to the hub at {hub}"))?;
    let mut clusters_api = ClusterServiceClient::new(channel.clone());
    let works_api = WorkServiceClient::new(channel.clone());
    let mut config = FleetConfig::new(&nats_url, clusters);
    secure.apply(&mut config);
    config.name_prefix = name_prefix.clone();
    config.start_rate = 1000;
    config.pending_poll = Duration::from_secs(2);
    config.work_status_interval = Duration::from_millis(500);
    config.ready_delay = Duration::from_millis(200);
    let t0 = Instant::now();
    let fleet = Fleet::start(&config).await?;
    let prefix = format!("{name_prefix}-");
    let deadline = t0 + Duration::from_secs(timeout_seconds);
    loop {
        let n = count_available(&mut clusters_api, &prefix).await?;
        if n >= clusters {
            break;
        }
        if Instant::now() > deadline {
            fleet.stop().await;
            bail!("only {n} of {clusters} clusters Available");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let register = t0.elapsed();

    // Watch first, so that no convergence is missed.
    let mut watch = works_api
        .clone()
        .watch_works(WatchWorksRequest::default())
        .await
        .context("watching works")?
        .into_inner();
    let names: Vec<String> = (0..clusters)
        .map(|i| flotilla_sim::cluster_name(&name_prefix, config.first_index + i))
        .collect();
    let cpu_before = hub_pid.and_then(proc_stats).map(|s| s.0);
    let start = Instant::now();
    let sent: std::sync::Arc<std::sync::Mutex<HashMap<String, Instant>>> = Default::default();
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut apply_tasks = tokio::task::JoinSet::new();
    for name in names.clone() {
        let permit = sem.clone().acquire_owned().await?;
        let mut api = works_api.clone();
        let sent = sent.clone();
        apply_tasks.spawn(async move {
            let at = Instant::now();
            let r = api.apply_work(fanout_work(&name)).await;
            sent.lock().expect("sent lock").insert(name, at);
            drop(permit);
            r.map(|_| ())
                .map_err(|e| anyhow::anyhow!("apply failed: {e}"))
        });
    }
    let mut done: HashMap<String, Instant> = HashMap::new();
    let converged = |w: &flotilla_api::v1::ManifestWork| {
        let conds = w
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        w.metadata.as_ref().is_some_and(|m| m.name == "fanout")
            && meta::condition_status(conds, "Applied") == Some("True")
            && meta::condition_status(conds, "Available") == Some("True")
    };
    while done.len() < clusters {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = match tokio::time::timeout(left, watch.message()).await {
            Ok(Ok(Some(ev))) => ev,
            Ok(Ok(None)) => bail!("the hub closed the watch"),
            Ok(Err(e)) => bail!("watch failed: {e}"),
            Err(_) => {
                fleet.stop().await;
                bail!("only {} of {clusters} works converged in time", done.len());
            }
        };
        if let Some(w) = ev.work
            && converged(&w)
        {
            let cluster = w
                .metadata
                .as_ref()
                .map(|m| m.namespace.clone())
                .unwrap_or_default();
            done.entry(cluster).or_insert_with(Instant::now);
        }
    }
    let fanout_time = start.elapsed();
    while let Some(r) = apply_tasks.join_next().await {
        r??;
    }
    let cpu_after = hub_pid.and_then(proc_stats);
    let sent = sent.lock().expect("sent lock").clone();
    let mut lat: Vec<f64> = done
        .iter()
        .filter_map(|(c, t)| {
            sent.get(c)
                .map(|s| t.saturating_duration_since(*s).as_secs_f64())
        })
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let summary = FanoutSummary {
        scenario: "fanout",
        clusters,
        register_seconds: register.as_secs_f64(),
        fanout_seconds: fanout_time.as_secs_f64(),
        latency_p50_seconds: percentile(&lat, 0.5),
        latency_p99_seconds: percentile(&lat, 0.99),
        latency_max_seconds: lat.last().copied().unwrap_or(0.0),
        hub_cpu_seconds_during_fanout: cpu_before.zip(cpu_after.map(|s| s.0)).map(|(a, b)| b - a),
        hub_rss_bytes: cpu_after.map(|s| s.1),
        load_process_rss_bytes: flotilla_bus::process::rss_bytes(),
    };
    println!("{}", serde_json::to_string_pretty(&summary)?);
    fleet.stop().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Args::parse().scenario {
        Scenario::Fanout {
            nats_url,
            hub,
            hub_pid,
            clusters,
            name_prefix,
            concurrency,
            timeout_seconds,
            bootstrap_creds,
            nats_ca,
        } => {
            fanout(
                nats_url,
                hub,
                hub_pid,
                clusters,
                name_prefix,
                concurrency,
                timeout_seconds,
                Secure {
                    bootstrap_creds,
                    nats_ca,
                },
            )
            .await?
        }
        Scenario::Rollout {
            nats_url,
            hub,
            hub_pid,
            clusters,
            groups,
            timeout_seconds,
        } => {
            let summary = rollout::run(rollout::Settings {
                nats_url,
                hub,
                hub_pid,
                clusters,
                groups,
                timeout: Duration::from_secs(timeout_seconds),
            })
            .await?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
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
            bootstrap_creds,
            nats_ca,
        } => {
            let mut client = ClusterServiceClient::connect(hub.clone())
                .await
                .with_context(|| format!("connecting to the hub at {hub}"))?;
            let rss_before = flotilla_bus::process::rss_bytes();
            let mut config = FleetConfig::new(&nats_url, clusters);
            Secure {
                bootstrap_creds,
                nats_ca,
            }
            .apply(&mut config);
            config.name_prefix = name_prefix.clone();
            config.start_rate = start_rate;
            config.pending_poll = Duration::from_secs(2);
            // Registration only: no score reports competing for the hub.
            config.scores = None;
            let t0 = Instant::now();
            let fleet = Fleet::start(&config).await?;
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

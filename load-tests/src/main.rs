//! `flotilla-load`: load scenarios for Flotilla. Each prints a short human summary and, as the
//! last line of stdout, one JSON object (`scenario`, `clusters`, `converged`, `seconds`,
//! `p50_ms`, `p90_ms`, `p99_ms`, `hub_cpu_seconds`, `hub_peak_rss_bytes`, `msgs_per_second`,
//! `errors`, the measured phase's CPU per role — `cpu_hub_s`, `cpu_jetstream_s`,
//! `cpu_leaves_s`, `cpu_control_plane_s` and `cpu_control_plane_ms_per_cluster`,
//! `cpu_simulators_s`, `cpu_driver_s` — and the scenario's own fields).
//!
//! Without `--nats-url`/`--hub` a scenario starts its own nats-server (and `--leaf-nodes K`
//! leaf servers the agents connect to), a hub and the simulated fleet, and stops them all;
//! with both it attaches ([`topology`]). The fleet runs in this process or in `flotilla-sim`
//! processes ([`fleet`]); the hub is followed through its watch APIs ([`watch`]).
//!
//! - [`scenario`]: register, apply, fanout, reconnect-storm, hub-restart, ha, flapping, policy,
//!   steady, proxy, transport-limit.
//! - [`rollout`]: one ManifestWorkReplicaSet rolled out over decision groups.
//! - [`addons`]: one add-on installed by placement on every cluster, then a config change
//!   rolled out progressively.
//! - [`placement`]: the hub's placement machinery in-process over a synthetic inventory of
//!   10,000 and 100,000 clusters, against a real nats-server.
//! - [`report`], [`plots`]: the summary line and the PNG plots (`--out DIR`).
//! - [`cpu`], [`cpu_ledger`]: the CPU of every process of the run per role (the arithmetic,
//!   pure; the `/proc` readings).

mod addons;
mod cpu;
mod cpu_ledger;
mod fleet;
mod placement;
mod plots;
mod report;
mod rollout;
mod scenario;
mod topology;
mod watch;

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Parser, Subcommand};
use flotilla_api::meta::{self, COND_AVAILABLE};
use flotilla_api::v1::ListClustersRequest;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Load scenarios for Flotilla.
#[derive(Parser, Debug)]
#[command(name = "flotilla-load", version)]
struct Args {
    #[command(subcommand)]
    scenario: Scenario,
}

/// Where a fleet scenario runs and what the fleet is.
#[derive(ClapArgs, Debug, Clone)]
struct Common {
    /// Attach to this NATS server (with --hub); without both, start NATS and a hub.
    #[arg(long)]
    nats_url: Option<String>,
    /// Attach to this hub's gRPC endpoint (it must run with --auto-accept).
    #[arg(long)]
    hub: Option<String>,
    /// PID of the attached hub, for its CPU and memory.
    #[arg(long)]
    hub_pid: Option<u32>,
    /// Monitoring URL of the attached NATS server (http://host:8222), for message rates.
    #[arg(long)]
    nats_monitor: Option<String>,
    /// Self-started: leaf nats-servers for the agents (edge sites), round-robin.
    #[arg(long, default_value_t = 0)]
    leaf_nodes: usize,
    /// Self-started: an extra argument for flotilla-hub (repeatable).
    #[arg(long = "hub-arg", allow_hyphen_values = true)]
    hub_args: Vec<String>,
    /// Number of clusters.
    #[arg(long, default_value_t = 1000)]
    clusters: usize,
    /// Cluster name prefix.
    #[arg(long, default_value = "load")]
    name_prefix: String,
    /// Agents started per second over the whole fleet.
    #[arg(long, default_value_t = 1000)]
    start_rate: u32,
    /// Run the fleet in this many flotilla-sim processes (0 = in this process; needed past
    /// ~15,000 agents, the open-file limit of one process here).
    #[arg(long, default_value_t = 0)]
    sim_processes: usize,
    /// Milliseconds until simulated workloads are ready (0: the hub and agents alone are
    /// measured; a profile's readyDelayMs overrides it).
    #[arg(long, default_value_t = 0)]
    ready_delay_ms: u64,
    /// Milliseconds between each simulated agent's observations of its works' resources. The
    /// default is the agent's own (10 s); the harness used 500 ms until 2026-11-28, which made
    /// every simulated agent observe 20 times as often as a real one and the simulators, not
    /// the hub, the bottleneck of the shared two cores (BENCHMARKS.md).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..))]
    work_status_interval_ms: u64,
    /// Fleet profile (YAML) for the simulated clusters.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Seconds between AddOnPlacementScore reports of each agent (0 = none).
    #[arg(long, default_value_t = 0)]
    score_interval_seconds: u64,
    /// Niceness of the flotilla-sim processes (0–19). A real fleet does not share the hub's
    /// cores; on one machine the simulators of 100,000 agents took more of the two cores than
    /// the hub and its JetStream server together, and starved the store the scenario measures.
    /// A positive value lets the hub's side run first and the fleet take what is left.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    sim_nice: u8,
    /// Simulated agents per NATS connection (1: one each, like real clusters).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    share_connections: u64,
    /// Secure mode: the bootstrap credentials of the simulated agents.
    #[arg(long)]
    bootstrap_creds: Option<PathBuf>,
    /// CA that signed the NATS servers' certificates.
    #[arg(long)]
    nats_ca: Option<PathBuf>,
    /// Concurrent ApplyWork calls.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Apply works over this many ApplyWorks streams at once instead of one ApplyWork call
    /// each (0: calls, --concurrency at a time).
    #[arg(long, default_value_t = 0)]
    streams: usize,
    /// Bound of each phase of the run, in seconds (a storm's fleet start, its first version and
    /// the storm each get this much).
    #[arg(long, default_value_t = 900)]
    timeout_seconds: u64,
    /// Write PNG plots (latency CDF, convergence, hub RSS) into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Scenario {
    /// C clusters register; time until the hub shows all of them Available.
    Register(Common),
    /// One work to every cluster, until all are Applied and Available; then the transport
    /// limit of the same round trips for `efficiency`.
    Fanout(Common),
    /// Every agent cut off, the work changed, all reconnect at once.
    ReconnectStorm {
        #[command(flatten)]
        common: Common,
        /// Seconds the fleet stays cut off, at least (0: only as long as applying the change
        /// takes). Longer than the lease grace (5 × 60 s by default) has the hub mark every
        /// cluster Unknown first, as a site's long outage does.
        #[arg(long, default_value_t = 0)]
        outage_seconds: u64,
    },
    /// `kill -9` of the hub mid-fanout, restart, nothing lost (starts its own hub).
    HubRestart(Common),
    /// N hubs share the fleet: fanout through the first, then the last killed (`kill -9`):
    /// takeover time and a second fanout after it (starts its own hubs).
    Ha {
        #[command(flatten)]
        common: Common,
        /// Hubs of the control plane (1 to 3 on this machine).
        #[arg(long, default_value_t = 2)]
        hubs: usize,
    },
    /// A share of the fleet flapping while the work changes.
    Flapping {
        #[command(flatten)]
        common: Common,
        /// Share of the fleet that flaps.
        #[arg(long, default_value_t = 0.2)]
        share: f64,
        /// Seconds of flapping once the steady clusters are Available.
        #[arg(long, default_value_t = 60)]
        flap_seconds: u64,
        /// Seconds between work changes while flapping.
        #[arg(long, default_value_t = 10)]
        change_every_seconds: u64,
        /// Mean seconds a flapping link stays up.
        #[arg(long, default_value_t = 10.0)]
        mean_up_seconds: f64,
        /// Mean seconds a flapping link stays down.
        #[arg(long, default_value_t = 5.0)]
        mean_down_seconds: f64,
    },
    /// policy-collection's namespace policy over every cluster: inform until every cluster has
    /// reported, then enforce until every cluster is Compliant.
    Policy {
        #[command(flatten)]
        common: Common,
        /// A policy with hub templates (a value per cluster from a hub ConfigMap) and a
        /// managed-cluster template; after enforcing, every cluster's value changes.
        #[arg(long)]
        templated: bool,
    },
    /// The idle fleet renewing its leases: hub CPU and message rate.
    Steady {
        #[command(flatten)]
        common: Common,
        /// Seconds measured.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// The ApplyWork API alone: C clusters created ahead of their agents, then W works each from
    /// --concurrency callers; works per second and call latency.
    Apply {
        #[command(flatten)]
        common: Common,
        /// Works per cluster.
        #[arg(long, default_value_t = 1)]
        works_per_cluster: usize,
    },
    /// The cluster proxy: a list of --list-mib MiB through it (time, hub and agent RSS growth),
    /// then --watches watches open at once over the fleet (time to open, hub RSS, event
    /// latency, time to close), then with --sessions exec and port-forward sessions.
    Proxy {
        #[command(flatten)]
        common: Common,
        /// The attached hub's cluster proxy (plain, no tokens: `http://127.0.0.1:PORT`); a
        /// self-started hub gets `--cluster-proxy-listen` on a free port.
        #[arg(long)]
        proxy_url: Option<String>,
        /// Size of the list, in MiB.
        #[arg(long, default_value_t = 20)]
        list_mib: usize,
        /// Times the list is made.
        #[arg(long, default_value_t = 3)]
        list_repeats: usize,
        /// Watches open at once.
        #[arg(long, default_value_t = 1000)]
        watches: usize,
        /// Also list through a real `flotilla-agent` with the Kubernetes backend, on the
        /// testkit's API server in this process (the agent's own RSS growth).
        #[arg(long)]
        kube_agent: bool,
        /// Also measure exec and port-forward sessions: exec round trips, port-forward
        /// throughput and memory per open session through the hub, through a leaf (with
        /// --leaf-nodes) and directly on an API server, with real agents on the testkit's.
        #[arg(long)]
        sessions: bool,
        /// Small execs (`echo hi`) timed on each path.
        #[arg(long, default_value_t = 200)]
        session_execs: usize,
        /// Lines echoed through one open `cat` on each path.
        #[arg(long, default_value_t = 500)]
        session_echoes: usize,
        /// MiB echoed through each path's port-forward.
        #[arg(long, default_value_t = 64)]
        session_forward_mib: usize,
        /// Idle sessions held open on each agent for memory per session (at most 16: an agent
        /// serves one caller 16; 0 leaves the memory figures out).
        #[arg(long, default_value_t = 16)]
        session_idle: usize,
        /// Agents holding the idle sessions: the hub's and the leaf's, and more real agents on
        /// the hub's server up to this many (the hub's growth is read over all their sessions).
        #[arg(long, default_value_t = 4)]
        session_idle_agents: usize,
        /// The kubectl for port-forward (default: kubectl.1.32 beside the kubectl on PATH).
        #[arg(long)]
        kubectl: Option<PathBuf>,
    },
    /// C request/reply round trips the size of the fanout's over the same NATS topology,
    /// without hub or agents.
    TransportLimit(Common),
    /// Teams (issue 48): C clusters in --teams cluster sets, a member token admin of each,
    /// no agents; a team's lists, gets and watches against the fleet admin's, a set move, the
    /// set index and the proxy's grant decision (starts its own hub with the grants file).
    Teams {
        #[command(flatten)]
        common: Common,
        /// Cluster sets, one team each.
        #[arg(long, default_value_t = 100)]
        teams: usize,
    },
    /// A Git repository of --bundles bundles followed by a GitRepo over every cluster: the
    /// first commit until every bundle is Ready everywhere, then one commit changing every
    /// bundle, fetched at once, until every cluster runs it (starts its own hub).
    Gitops {
        #[command(flatten)]
        common: Common,
        /// Bundles (directories) in the repository.
        #[arg(long, default_value_t = 10)]
        bundles: usize,
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
    /// Install one add-on by placement on C clusters, then roll a config change out
    /// progressively; time both.
    Addons {
        /// NATS URL.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        /// Hub gRPC endpoint (the hub must run with --auto-accept).
        #[arg(long, default_value = "http://127.0.0.1:50051")]
        hub: String,
        /// PID of the hub process, to report its CPU seconds and RSS.
        #[arg(long)]
        hub_pid: Option<u32>,
        /// Number of clusters.
        #[arg(long, default_value_t = 1000)]
        clusters: usize,
        /// maxConcurrency of the upgrade (a count or a percentage).
        #[arg(long, default_value = "10%")]
        max_concurrency: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 1800)]
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
        /// JetStream replicas of the placement buckets (3 on a NATS cluster, at most 5).
        #[arg(
            long,
            default_value_t = 1,
            value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5)
        )]
        replicas: usize,
    },
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

async fn run_fleet_scenario(scenario: Scenario) -> Result<()> {
    let (common, kind) = match &scenario {
        Scenario::Register(c)
        | Scenario::Fanout(c)
        | Scenario::HubRestart(c)
        | Scenario::TransportLimit(c) => (c.clone(), &scenario),
        Scenario::Policy { common, .. } => (common.clone(), &scenario),
        Scenario::Flapping { common, .. }
        | Scenario::ReconnectStorm { common, .. }
        | Scenario::Ha { common, .. }
        | Scenario::Steady { common, .. }
        | Scenario::Apply { common, .. }
        | Scenario::Teams { common, .. }
        | Scenario::Gitops { common, .. }
        | Scenario::Proxy { common, .. } => (common.clone(), &scenario),
        Scenario::Rollout { .. } | Scenario::Addons { .. } | Scenario::Placement { .. } => {
            unreachable!("rollout, addons and placement run on their own")
        }
    };
    if common.clusters == 0 {
        anyhow::bail!("--clusters must be at least 1");
    }
    let mut common = common;
    // Bad input fails before anything starts: a profile is read here, not after the topology.
    if let Some(profile) = &common.profile {
        flotilla_sim::FleetProfile::load(profile).map_err(|e| anyhow::anyhow!("--profile {e}"))?;
    }
    if let Scenario::Proxy {
        sessions: true,
        session_execs,
        session_echoes,
        session_forward_mib,
        session_idle,
        session_idle_agents,
        ..
    } = kind
    {
        scenario::sessions::Settings {
            execs: *session_execs,
            echoes: *session_echoes,
            forward_mib: *session_forward_mib,
            idle_sessions: *session_idle,
            idle_agents: *session_idle_agents,
            kubectl: PathBuf::new(),
        }
        .check()?;
    }
    let proxy_url = match kind {
        Scenario::Proxy { proxy_url, .. } => match (proxy_url, &common.hub) {
            (Some(url), _) => Some(url.clone()),
            (None, Some(_)) => anyhow::bail!("an attached hub's proxy needs --proxy-url"),
            (None, None) => {
                let port = flotilla_testkit::free_port();
                common.hub_args.push("--cluster-proxy-listen".into());
                common.hub_args.push(format!("127.0.0.1:{port}"));
                // Every watch is the same anonymous caller: lift its share of the hub's calls
                // (the simulated agents keep theirs, 64 of a cluster's 256).
                common
                    .hub_args
                    .push("--cluster-proxy-calls-per-identity".into());
                common.hub_args.push("4096".into());
                // And its sessions (--sessions): a share and a byte budget that hold
                // every idle session of the memory figures.
                common.hub_args.extend(
                    [
                        "--cluster-proxy-sessions-per-identity",
                        "1024",
                        "--cluster-proxy-session-bytes-per-identity",
                        "4294967296",
                    ]
                    .map(String::from),
                );
                Some(format!("http://127.0.0.1:{port}"))
            }
        },
        _ => None,
    };
    let teams_files = match kind {
        Scenario::Teams { teams, .. } => {
            if common.hub.is_some() {
                anyhow::bail!("teams starts its own hub (with its token and grants files)");
            }
            let files = scenario::teams::TeamsFiles::write(*teams)?;
            anyhow::ensure!(
                common.clusters >= *teams,
                "--clusters must be at least --teams"
            );
            common.hub_args.extend(files.hub_args());
            Some(files)
        }
        _ => None,
    };
    let repository = match kind {
        Scenario::Gitops { bundles, .. } => {
            if common.hub.is_some() {
                anyhow::bail!("gitops starts its own hub (reading the repository it makes)");
            }
            let repository = scenario::gitops::Repository::create(*bundles)?;
            common.hub_args.extend(repository.hub_args());
            Some(repository)
        }
        _ => None,
    };
    let topology = topology::Topology::start(&topology::TopologyArgs {
        nats_url: common.nats_url.clone(),
        hub: common.hub.clone(),
        hub_pid: common.hub_pid,
        nats_monitor: common.nats_monitor.clone(),
        leaf_nodes: common.leaf_nodes,
        hub_args: common.hub_args.clone(),
    })
    .await?;
    let described = topology.describe();
    let run = scenario::Run {
        topology,
        fleet: fleet::FleetArgs {
            clusters: common.clusters,
            name_prefix: common.name_prefix.clone(),
            start_rate: common.start_rate,
            sim_processes: common.sim_processes,
            profile: common.profile.clone(),
            ready_delay: Duration::from_millis(common.ready_delay_ms),
            work_status_interval: Duration::from_millis(common.work_status_interval_ms),
            score_interval: (common.score_interval_seconds > 0)
                .then(|| Duration::from_secs(common.score_interval_seconds)),
            bootstrap_creds: common.bootstrap_creds.clone(),
            nats_ca: common.nats_ca.clone(),
            share_connections: common.share_connections as usize,
            sim_nice: common.sim_nice,
        },
        timeout: Duration::from_secs(common.timeout_seconds),
        concurrency: common.concurrency,
        streams: common.streams,
        out: common.out.clone(),
        started: Instant::now(),
    };
    let work = async move {
        match kind {
            Scenario::Register(_) => scenario::register::run(run).await,
            Scenario::Fanout(_) => scenario::fanout::run(run).await,
            Scenario::ReconnectStorm { outage_seconds, .. } => {
                scenario::storm::run(run, Duration::from_secs(*outage_seconds)).await
            }
            Scenario::HubRestart(_) => scenario::hub_restart::run(run).await,
            Scenario::Ha { hubs, .. } => scenario::ha::run(run, *hubs).await,
            Scenario::TransportLimit(_) => scenario::transport::run(run).await,
            Scenario::Policy { templated, .. } => scenario::policy::run(run, *templated).await,
            Scenario::Proxy {
                list_mib,
                list_repeats,
                watches,
                kube_agent,
                sessions,
                session_execs,
                session_echoes,
                session_forward_mib,
                session_idle,
                session_idle_agents,
                kubectl,
                ..
            } => {
                let sessions = sessions.then(|| scenario::sessions::Settings {
                    execs: *session_execs,
                    echoes: *session_echoes,
                    forward_mib: *session_forward_mib,
                    idle_sessions: *session_idle,
                    idle_agents: *session_idle_agents,
                    kubectl: kubectl
                        .clone()
                        .unwrap_or_else(scenario::sessions::kubectl_1_32),
                });
                let settings = scenario::proxy::Settings {
                    proxy_url: proxy_url.clone().expect("set for the proxy scenario"),
                    list_mib: *list_mib,
                    repeats: *list_repeats,
                    watches: *watches,
                    kube_agent: *kube_agent,
                    sessions,
                };
                scenario::proxy::run(run, settings).await
            }
            Scenario::Steady { seconds, .. } => scenario::steady::run(run, *seconds).await,
            Scenario::Teams { .. } => {
                let files = teams_files
                    .as_ref()
                    .expect("written for the teams scenario");
                scenario::teams::run(run, files).await
            }
            Scenario::Gitops { .. } => {
                let repository = repository.as_ref().expect("made for the gitops scenario");
                scenario::gitops::run(run, repository).await
            }
            Scenario::Apply {
                works_per_cluster, ..
            } => scenario::apply::run(run, (*works_per_cluster).max(1)).await,
            Scenario::Flapping {
                share,
                flap_seconds,
                change_every_seconds,
                mean_up_seconds,
                mean_down_seconds,
                ..
            } => {
                scenario::flapping::run(
                    run,
                    scenario::flapping::Settings {
                        share: *share,
                        seconds: *flap_seconds,
                        change_every: (*change_every_seconds).max(1),
                        mean_up: *mean_up_seconds,
                        mean_down: *mean_down_seconds,
                    },
                )
                .await
            }
            Scenario::Rollout { .. } | Scenario::Addons { .. } | Scenario::Placement { .. } => {
                unreachable!("rollout, addons and placement run on their own")
            }
        }
    };
    // Bounded in time, and Ctrl-C stops everything this run started (the topology and the
    // fleet are dropped, which kills their processes).
    let bound = Duration::from_secs(common.timeout_seconds * u64::from(scenario::PHASES) + 120);
    let (summary, run) = tokio::select! {
        r = tokio::time::timeout(bound, work) => r
            .with_context(|| format!("the run exceeded {} s", bound.as_secs()))??,
        () = flotilla_bus::process::shutdown_signal() => {
            anyhow::bail!("interrupted; every process this run started is stopped")
        }
    };
    summary.print(&described);
    drop(run);
    if summary.converged {
        Ok(())
    } else {
        std::process::exit(2)
    }
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
        Scenario::Addons {
            nats_url,
            hub,
            hub_pid,
            clusters,
            max_concurrency,
            timeout_seconds,
        } => {
            let summary = addons::run(addons::Settings {
                nats_url,
                hub,
                hub_pid,
                clusters,
                max_concurrency,
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
            replicas,
        } => {
            let summary = placement::run(placement::Settings {
                nats_url,
                clusters,
                placements,
                reschedule_clusters,
                debounce: Duration::from_millis(debounce_ms),
                repeats,
                replicas,
            })
            .await?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
        other => run_fleet_scenario(other).await?,
    }
    Ok(())
}

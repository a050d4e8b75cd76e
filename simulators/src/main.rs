//! `flotilla-sim`: run N simulated clusters, each a real agent, until interrupted.

use clap::Parser;
use flotilla_bus::connect::NatsArgs;
use flotilla_sim::{Fleet, FleetConfig};
use std::io::IsTerminal;
use std::time::Duration;

/// Run a fleet of simulated clusters (real agents on in-memory clusters) against a hub.
#[derive(Parser, Debug)]
#[command(name = "flotilla-sim", version)]
struct Args {
    #[command(flatten)]
    nats: NatsArgs,
    /// Keep each agent's state and simulated cluster in DIR/<cluster>/, so that a restarted
    /// simulator comes back as the same agents with their works (default: memory only).
    #[arg(long, env = "FLOTILLA_SIM_STATE_DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// Secure mode: the bootstrap credentials every simulated agent registers with.
    #[arg(long, env = "FLOTILLA_BOOTSTRAP_CREDS", conflicts_with = "creds")]
    bootstrap_creds: Option<std::path::PathBuf>,
    /// Agents per NATS connection (default 1: one each, like real clusters). Sharing cuts the
    /// fleet's memory and the server's connections for very large fleets; not in secure mode.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000), conflicts_with = "bootstrap_creds")]
    share_connections: u64,
    /// Number of clusters.
    #[arg(long, default_value_t = 10)]
    clusters: usize,
    /// Cluster name prefix (names are PREFIX-0001, PREFIX-0002, …).
    #[arg(long, default_value = "sim")]
    name_prefix: String,
    /// Index of the first cluster.
    #[arg(long, default_value_t = 1)]
    first_index: usize,
    /// Agents started per second (0 = all at once).
    #[arg(long, default_value_t = 500)]
    start_rate: u32,
    /// Seconds between registration retries while pending.
    #[arg(long, default_value_t = 5)]
    pending_poll_seconds: u64,
    /// Seconds between status checks.
    #[arg(long, default_value_t = 10)]
    status_interval_seconds: u64,
    /// Milliseconds between observations of work resources.
    #[arg(long, default_value_t = 2000)]
    work_status_interval_ms: u64,
    /// Seconds a work reports `Repaired` after resources changed on a simulated cluster (through
    /// the cluster proxy) were put back, as the agent's `--drift-window-seconds`.
    #[arg(long, default_value_t = 60)]
    drift_window_seconds: u64,
    /// Milliseconds until simulated workloads become ready.
    #[arg(long, default_value_t = 1000)]
    ready_delay_ms: u64,
    /// Seconds between AddOnPlacementScore reports (cpuAvailable, memAvailable); 0 = none.
    #[arg(long, default_value_t = 30)]
    score_interval_seconds: u64,
    /// A fleet profile (YAML): label, claim, capacity, taint and failure distributions and the
    /// connectivity model (flapping, outages, restarts, latency). Sections it omits stay
    /// built-in.
    #[arg(long, env = "FLOTILLA_SIM_PROFILE")]
    profile: Option<std::path::PathBuf>,
    /// Every cluster's link to NATS adds this round-trip time (ms), through a local relay;
    /// a profile's `connectivity.latency` classes come first.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=flotilla_sim::profile::MAX_RTT_MS))]
    link_latency_ms: Option<u64>,
    /// Serve Prometheus metrics of the whole simulated fleet (`/metrics`) on this address.
    #[arg(long, env = "FLOTILLA_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Run the add-on agents the simulated clusters' Deployments declare (image
    /// flotilla/fleet-metrics: lease renewals and fleet-metrics scores) inside the agents.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    simulate_addons: bool,
    /// Answer the hub's cluster-proxy calls (kubectl through `flotilla-hub
    /// --cluster-proxy-listen`) from each simulated cluster; off saves a channel per agent (a
    /// subscription with --legacy-wire) in very large fleets.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    cluster_proxy: bool,
    /// Play agents of the previous wire (flotilla.spec.<c>, flotilla.proxy.<c>,
    /// flotilla.kubeapi.<c> and an inbox: three or four subscriptions each) instead of one
    /// subscription under flotilla.to.<c>. — to test a hub's compatibility window.
    #[arg(long, env = "FLOTILLA_SIM_LEGACY_WIRE")]
    legacy_wire: bool,
    /// The longest ServiceAccount token a simulated cluster issues, in seconds (models a
    /// cloud's cap on token lifetimes; default: the validity asked).
    #[arg(long)]
    token_max_seconds: Option<u64>,
    /// Show a progress bar while the agents start (default: when stderr is a terminal).
    #[arg(long)]
    progress: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _tracing = flotilla_bus::trace::init("flotilla-sim", "warn,flotilla_sim=info");
    let args = Args::parse();
    if args.clusters == 0 {
        eprintln!("flotilla-sim: --clusters must be at least 1");
        std::process::exit(64);
    }
    let mut config = FleetConfig::new(&args.nats.url, args.clusters);
    config.nats = args.nats.clone();
    config.bootstrap_creds = args.bootstrap_creds.clone();
    config.share_connections = args.share_connections as usize;
    config.simulate_addons = args.simulate_addons;
    config.cluster_proxy = args.cluster_proxy;
    config.legacy_wire = args.legacy_wire;
    config.token_max_lifetime = args.token_max_seconds.map(Duration::from_secs);
    config.name_prefix = args.name_prefix;
    config.first_index = args.first_index;
    config.start_rate = args.start_rate;
    config.pending_poll = Duration::from_secs(args.pending_poll_seconds.max(1));
    config.status_interval = Duration::from_secs(args.status_interval_seconds.max(1));
    config.work_status_interval = Duration::from_millis(args.work_status_interval_ms.max(100));
    config.drift_window = Duration::from_secs(args.drift_window_seconds.max(1));
    config.ready_delay = Duration::from_millis(args.ready_delay_ms);
    config.scores = (args.score_interval_seconds > 0).then(|| {
        flotilla_sim::scores::ScoreConfig::every(Duration::from_secs(args.score_interval_seconds))
    });
    if let Some(e) = flotilla_api::names::validate_cluster_name(&flotilla_sim::cluster_name(
        &config.name_prefix,
        1,
    ))
    .err()
    {
        eprintln!(
            "flotilla-sim: --name-prefix {:?}: {}",
            config.name_prefix, e.reason
        );
        std::process::exit(64);
    }
    config.state_dir = args.state_dir;
    if let Some(path) = &args.profile {
        match flotilla_sim::FleetProfile::load(path) {
            Ok(p) => config = config.with_profile(p),
            Err(e) => {
                eprintln!("flotilla-sim: --profile {e}");
                std::process::exit(64);
            }
        }
    }
    if let Some(rtt_ms) = args.link_latency_ms {
        let mut profile = config.profile.take().unwrap_or_default();
        profile
            .connectivity
            .latency
            .push(flotilla_sim::profile::Latency { share: 1.0, rtt_ms });
        config.profile = Some(profile);
    }
    // Bound before the (possibly long) start, so a taken port fails at once.
    let metrics_listener = match args.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: {e}"))?,
        ),
        None => None,
    };
    let bar = if args.progress || std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(args.clusters as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} agents ({per_sec})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message("starting");
    // Ctrl-C during a long start stops the agents started so far instead of leaving the start
    // loop running to the end.
    let fleet = tokio::select! {
        fleet = Fleet::start_with_progress(&config, |n| bar.set_position(n as u64)) => fleet?,
        () = flotilla_bus::process::shutdown_signal() => {
            bar.abandon_with_message("interrupted");
            eprintln!("flotilla-sim: interrupted while starting; the agents started so far stop with the process");
            return Ok(());
        }
    };
    bar.finish_with_message("started");
    if let Some(listener) = metrics_listener {
        let (f, agents) = (fleet.clone(), config.metrics.clone());
        tokio::spawn(flotilla_bus::process::serve_metrics(
            listener,
            move || f.render_metrics(&agents),
            flotilla_bus::process::shutdown_signal(),
        ));
    }
    tracing::info!(clusters = args.clusters, nats = %args.nats.url, "simulated fleet running");
    flotilla_bus::process::shutdown_signal().await;
    tracing::info!("stopping simulated fleet");
    fleet.stop().await;
    Ok(())
}

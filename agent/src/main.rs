//! `flotilla-agent`: flags → tracing → [`flotilla_agent::run`].

use clap::Parser;
use flotilla_agent::backend::Backend;
use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::sim::{SimBackend, SimConfig};
use flotilla_agent::hubs::MultipleHubs;
use flotilla_agent::{AgentConfig, StateConfig};
use flotilla_api::v1::ClusterClaim;
use flotilla_bus::connect::NatsArgs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The Flotilla agent: registers this cluster with the hub, renews its lease and reports status.
#[derive(Parser, Debug)]
#[command(name = "flotilla-agent", version)]
struct Args {
    /// Name of this cluster (DNS-1123 label, at most 63 characters).
    #[arg(long, env = "FLOTILLA_CLUSTER_NAME")]
    cluster_name: String,
    /// NATS connection.
    #[command(flatten)]
    nats: NatsArgs,
    /// Serve Prometheus metrics (`/metrics`, `/healthz`) on this address (default: none).
    #[arg(long, env = "FLOTILLA_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Secure mode: the bootstrap credentials the hub admin handed out (they may only ask to
    /// register). Once accepted, the agent gets its own credentials, keeps them in
    /// STATE_DIR/cluster.creds, reconnects with them and renews them before they expire.
    #[arg(long, env = "FLOTILLA_BOOTSTRAP_CREDS", conflicts_with = "creds")]
    bootstrap_creds: Option<PathBuf>,
    /// Directory for durable agent state.
    #[arg(long, env = "FLOTILLA_STATE_DIR")]
    state_dir: PathBuf,
    /// Label asked for at registration (repeatable): key=value.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Custom cluster claim (repeatable): name=value.
    #[arg(long = "claim", value_name = "NAME=VALUE")]
    claims: Vec<String>,
    /// Cluster backend: `kubernetes` (the cluster the agent runs in or --kubeconfig points at)
    /// or `sim` (a simulated cluster kept in the state directory).
    #[arg(long, env = "FLOTILLA_BACKEND", default_value = "sim", value_parser = ["sim", "kubernetes"])]
    backend: String,
    /// Kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, env = "FLOTILLA_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Simulated CPU cores.
    #[arg(long, default_value_t = 8)]
    sim_cpu: u32,
    /// Simulated memory in GiB.
    #[arg(long, default_value_t = 32)]
    sim_memory_gib: u32,
    /// Simulated Kubernetes version.
    #[arg(long, default_value = "v1.30.2")]
    sim_kubernetes_version: String,
    /// Simulated platform claim (AWS, GCP, Azure, Other, …).
    #[arg(long, default_value = "Other")]
    sim_platform: String,
    /// Seconds between registration retries while pending.
    #[arg(long, default_value_t = 30)]
    pending_poll_seconds: u64,
    /// Seconds between status checks.
    #[arg(long, default_value_t = 10)]
    status_interval_seconds: u64,
    /// Seconds between observations of work resources (status, feedback).
    #[arg(long, default_value_t = 10)]
    work_status_interval_seconds: u64,
    /// Seconds a work reports `Repaired` after resources changed on the cluster were put back
    /// (a GitRepo's cluster shows `Modified` that long), and the span over which repeated
    /// repairs become a fight (`Contested`).
    #[arg(long, env = "FLOTILLA_DRIFT_WINDOW_SECONDS", default_value_t = 60)]
    drift_window_seconds: u64,
    /// Seconds between periodic spec resyncs (besides every reconnect).
    #[arg(long, default_value_t = 300)]
    resync_interval_seconds: u64,
    /// Seconds between AddOnPlacementScore reports (resource usage); 0 = none.
    #[arg(long, default_value_t = 60)]
    score_interval_seconds: u64,
    /// Feature gates, OCM's work-agent names (repeatable): NAME=true|false,… Known:
    /// RawFeedbackJsonString (report feedback values that are objects, lists or several matches
    /// as JSON text instead of failing StatusFeedbackSynced). All off by default.
    #[arg(long, env = "FLOTILLA_FEATURE_GATES", value_name = "NAME=BOOL,...")]
    feature_gates: Vec<String>,
    /// Milliseconds until simulated workloads become ready.
    #[arg(long, default_value_t = 2000)]
    sim_ready_delay_ms: u64,
    /// With the `sim` backend: run the add-on agents the simulated cluster's Deployments declare
    /// (image flotilla/fleet-metrics) inside the agent, as a kubelet would.
    #[arg(long)]
    simulate_addons: bool,
    /// The namespace of the ServiceAccounts the agent creates for ManagedServiceAccounts.
    #[arg(long, env = "FLOTILLA_SERVICE_ACCOUNT_NAMESPACE", default_value = flotilla_api::serviceaccount::DEFAULT_NAMESPACE)]
    service_account_namespace: String,
    /// With the `sim` backend: the longest ServiceAccount token the simulated cluster issues,
    /// in seconds (a cloud's cap on token lifetimes; default: what is asked).
    #[arg(long)]
    sim_token_max_seconds: Option<u64>,
    /// Several hubs (OCM's MultipleHubs): a YAML file listing at least two, tried in order —
    /// `hubs: [{name, natsUrl, ca, bootstrapCreds}]`. The agent registers with one at a time
    /// and switches when it stops answering or denies the cluster; each hub's state lives in
    /// STATE_DIR/hubs/<name>, and a switch leaves the previous hub's workloads on the cluster.
    #[arg(long, env = "FLOTILLA_HUBS", conflicts_with_all = ["url", "bootstrap_creds", "creds", "ca"])]
    hubs: Option<PathBuf>,
    /// With --hubs: how long the current hub may not answer before the agent switches
    /// (OCM's hubConnectionTimeoutSeconds; at least 180).
    #[arg(
        long,
        env = "FLOTILLA_HUB_CONNECTION_TIMEOUT_SECONDS",
        default_value_t = 600
    )]
    hub_connection_timeout_seconds: u64,
    /// With --hubs: what happens to the previous hub's works after a switch — `keep` them on
    /// the cluster (parked; they resume if the agent returns) or `delete` them per their delete
    /// options, as OCM does.
    #[arg(long, env = "FLOTILLA_HUB_SWITCH_CLEANUP", default_value = "keep", value_parser = ["keep", "delete"])]
    hub_switch_cleanup: String,
    /// Tests only: a connection timeout below OCM's minimum of 180 s.
    #[arg(long, hide = true)]
    unsafe_hub_connection_timeout_seconds: Option<u64>,
    /// Cluster-proxy calls the agent serves at once for one caller (the identity the hub
    /// names), of its 256; more are answered 429, so one token cannot take every slot.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_CALLS_PER_CALLER",
        default_value_t = flotilla_agent::kubeproxy::DEFAULT_CALLS_PER_CALLER,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    cluster_proxy_calls_per_caller: usize,
    /// Request-body bytes of cluster-proxy calls the agent holds at once, over every call and
    /// hub: what hubs sent that the cluster has not yet read (bodies stream to the API server;
    /// at least 3 MiB); a call past it is answered 429.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_BODY_BYTES",
        default_value_t = flotilla_agent::kubeproxy::DEFAULT_BODY_BYTES,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(flotilla_agent::kubeproxy::MIN_BODY_BYTES as u64..)
    )]
    cluster_proxy_body_bytes: usize,
    /// exec, attach and port-forward sessions the agent serves at once, over every caller (of
    /// its 256 calls); more are answered 503.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_SESSIONS",
        default_value_t = flotilla_agent::kubeproxy::MAX_SESSIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(1..=flotilla_agent::kubeproxy::MAX_CALLS as u64)
    )]
    cluster_proxy_sessions: usize,
    /// Sessions the agent serves at once for one caller (the identity the hub names); more are
    /// answered 429.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_SESSIONS_PER_CALLER",
        default_value_t = flotilla_agent::kubeproxy::SESSIONS_PER_CALLER,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(1..=flotilla_agent::kubeproxy::MAX_CALLS as u64)
    )]
    cluster_proxy_sessions_per_caller: usize,
}

/// The hubs of `--hubs`, checked (`None` without it).
fn multiple_hubs(args: &Args, errors: &mut Vec<String>) -> Option<MultipleHubs> {
    use flotilla_agent::hubs::{self, rules};
    let path = args.hubs.as_ref()?;
    let timeout = match args.unsafe_hub_connection_timeout_seconds {
        Some(s) => Duration::from_secs(s.max(1)),
        None => {
            let t = Duration::from_secs(args.hub_connection_timeout_seconds);
            if let Err(e) = rules::check_timeout(t) {
                errors.push(e);
            }
            t
        }
    };
    match hubs::file::read(path) {
        Ok(hubs) => Some(MultipleHubs {
            hubs,
            timeout,
            cleanup: if args.hub_switch_cleanup == "delete" {
                hubs::cleanup::Cleanup::Delete
            } else {
                hubs::cleanup::Cleanup::Keep
            },
        }),
        Err(es) => {
            errors.extend(es);
            None
        }
    }
}

fn pairs(flag: &str, raw: &[String], errors: &mut Vec<String>) -> Vec<(String, String)> {
    raw.iter()
        .filter_map(|s| match s.split_once('=') {
            Some((k, v)) => Some((k.to_string(), v.to_string())),
            None => {
                errors.push(format!("{flag} {s:?}: expected KEY=VALUE"));
                None
            }
        })
        .collect()
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flotilla-agent: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The OTLP exporter needs the runtime; logs and traces are set up inside it.
    let _tracing = {
        let _enter = runtime.enter();
        flotilla_bus::trace::init("flotilla-agent", "info")
    };
    let args = Args::parse();
    let (config, multi) = match configure(&args) {
        Ok(configured) => configured,
        Err(errors) => {
            for e in errors {
                eprintln!("flotilla-agent: {e}");
            }
            return ExitCode::from(64);
        }
    };
    let started = runtime.block_on(backend(&args)).and_then(|backend| {
        if let Some(addr) = args.metrics_listen {
            serve_metrics(&runtime, addr, &config)?;
        }
        Ok(backend)
    });
    let backend = match started {
        Ok(backend) => backend,
        Err(e) => {
            eprintln!("flotilla-agent: {e}");
            return ExitCode::from(64);
        }
    };
    let shutdown = flotilla_bus::process::shutdown_signal();
    let ran = match multi {
        Some(multi) => runtime.block_on(async {
            flotilla_agent::hubs::Supervisor::new(config, multi, backend)?
                .run(shutdown)
                .await
        }),
        None => runtime.block_on(flotilla_agent::run(config, backend, shutdown)),
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flotilla-agent: {e}");
            ExitCode::from(64)
        }
    }
}

/// The agent's configuration from its flags, and the hubs of `--hubs`; every mistake at once.
fn configure(args: &Args) -> Result<(AgentConfig, Option<MultipleHubs>), Vec<String>> {
    let mut errors = Vec::new();
    let mut config = AgentConfig::new(&args.cluster_name, &args.nats.url);
    args.nats.apply_to(&mut config.nats);
    config.state = StateConfig::Dir(args.state_dir.clone());
    config.bootstrap_creds = args.bootstrap_creds.clone();
    config.labels = pairs("--label", &args.labels, &mut errors)
        .into_iter()
        .collect();
    config.claims = pairs("--claim", &args.claims, &mut errors)
        .into_iter()
        .map(|(name, value)| ClusterClaim { name, value })
        .collect();
    config.proxy_limits = flotilla_agent::kubeproxy::Limits {
        calls_per_caller: args.cluster_proxy_calls_per_caller,
        body_bytes: args.cluster_proxy_body_bytes,
        sessions: args.cluster_proxy_sessions,
        sessions_per_caller: args.cluster_proxy_sessions_per_caller,
    };
    intervals(args, &mut config);
    match flotilla_agent::features::FeatureGates::parse(&args.feature_gates) {
        Ok(gates) => config.feature_gates = gates,
        Err(es) => errors.extend(es),
    }
    if args.simulate_addons && args.backend != "sim" {
        errors.push(
            "--simulate-addons needs --backend sim (a Kubernetes cluster runs its add-on agents itself)"
                .into(),
        );
    }
    config.simulate_addons = args.simulate_addons;
    config.service_account_namespace = args.service_account_namespace.clone();
    errors.extend(config.validate());
    let multi = multiple_hubs(args, &mut errors);
    transport(args, &mut config, &mut errors);
    if errors.is_empty() {
        Ok((config, multi))
    } else {
        Err(errors)
    }
}

/// How often the agent polls, reports and resyncs (each at least a second; no score reports
/// with `--score-interval-seconds 0`).
fn intervals(args: &Args, config: &mut AgentConfig) {
    config.pending_poll = Duration::from_secs(args.pending_poll_seconds.max(1));
    config.status_interval = Duration::from_secs(args.status_interval_seconds.max(1));
    config.work_status_interval = Duration::from_secs(args.work_status_interval_seconds.max(1));
    config.drift_window = Duration::from_secs(args.drift_window_seconds.max(1));
    config.resync_interval = Duration::from_secs(args.resync_interval_seconds.max(1));
    config.score_interval =
        (args.score_interval_seconds > 0).then(|| Duration::from_secs(args.score_interval_seconds));
}

/// Checks what `--nats-url` would expose (warnings logged, except with `--hubs`, whose file
/// names each hub's URL) and requires TLS where it is asked for.
fn transport(args: &Args, config: &mut AgentConfig, errors: &mut Vec<String>) {
    let ca = config.nats.tls_ca_file.is_some();
    let secure = config.bootstrap_creds.is_some() || config.nats.credentials_file.is_some();
    match flotilla_bus::connect::check_transport(&config.nats.url, ca, secure) {
        Ok(_) if args.hubs.is_some() => {}
        Ok(warnings) => {
            for w in warnings {
                tracing::warn!("{w}");
            }
        }
        Err(e) => errors.push(format!("--nats-url {e}")),
    }
    config.nats.require_tls = flotilla_bus::connect::tls_required(ca, &config.nats.url);
}

/// The cluster the agent manages (`--backend`): the Kubernetes cluster, or a simulated one kept
/// in the state directory, so it survives agent restarts.
async fn backend(args: &Args) -> Result<Arc<dyn Backend>, String> {
    if args.backend == "kubernetes" {
        let kube = KubeBackend::connect(args.kubeconfig.as_deref()).await;
        return Ok(Arc::new(kube.map_err(|e| e.to_string())?));
    }
    let sim = SimBackend::new(
        args.sim_cpu,
        args.sim_memory_gib,
        &args.sim_kubernetes_version,
    )
    .with_platform(&args.sim_platform)
    .with_config(SimConfig {
        ready_delay: Duration::from_millis(args.sim_ready_delay_ms),
        token_max_lifetime: args.sim_token_max_seconds.map(Duration::from_secs),
        ..SimConfig::default()
    });
    let sim_file = args.state_dir.join("sim-cluster.json");
    if let Some(dir) = sim_file.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return Err(format!("--state-dir {}: {e}", dir.display()));
    }
    Ok(Arc::new(
        sim.persisted(sim_file).map_err(|e| e.to_string())?,
    ))
}

/// Serves the agent's metrics on `addr` (`--metrics-listen`) until the process is told to stop.
fn serve_metrics(
    runtime: &tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    config: &AgentConfig,
) -> Result<(), String> {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
    let metrics = config.metrics.clone();
    runtime.spawn(flotilla_bus::process::serve_metrics(
        listener,
        move || metrics.render(),
        flotilla_bus::process::shutdown_signal(),
    ));
    Ok(())
}

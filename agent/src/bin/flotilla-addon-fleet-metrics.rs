//! `flotilla-addon-fleet-metrics`: the fleet-metrics add-on agent for a real cluster — renews the
//! add-on's lease and reports the cluster's `nodeCount` / `workCount` AddOnPlacementScore
//! (counted from the Kubernetes API) every interval, until interrupted. See
//! `flotilla_agent::addons::fleet_metrics`.

use clap::Parser;
use flotilla_agent::addons::fleet_metrics::{self, KubeSource, Reporter, ReporterConfig};
use flotilla_bus::connect::NatsConfig;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The fleet-metrics add-on agent: keeps the add-on's lease on the hub and reports the cluster's
/// node and ManifestWork counts as the `fleet-metrics` AddOnPlacementScore.
#[derive(Parser, Debug)]
#[command(name = "flotilla-addon-fleet-metrics", version)]
struct Args {
    /// NATS server URL(s) of the hub, comma-separated.
    #[arg(long, env = "FLOTILLA_NATS_URL", default_value = flotilla_bus::connect::DEFAULT_NATS_URL)]
    nats_url: String,
    /// The cluster this add-on runs on (DNS-1123 label).
    #[arg(long, env = "CLUSTER_NAME")]
    cluster_name: String,
    /// The add-on's name (as installed on the hub).
    #[arg(long, env = "ADDON_NAME", default_value = fleet_metrics::ADDON_NAME)]
    addon_name: String,
    /// Seconds between reports; scores are valid for three intervals.
    #[arg(long, env = "REPORT_INTERVAL", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    interval_seconds: u64,
    /// NATS credentials file (.creds) of the add-on (secure mode: credentials the hub issued for
    /// this add-on on this cluster).
    ///
    /// The file is read again at every (re)connect, so credentials renewed in place (a mounted
    /// Secret the agent renews) are taken without a restart.
    #[arg(long, env = "FLOTILLA_ADDON_CREDS")]
    creds: Option<PathBuf>,
    /// Use `--creds` only if the file exists: without it, connect without credentials (a hub
    /// without secure mode never delivers the optional Secret `<addon>-hub-credentials` that
    /// the template mounts). Without this flag a missing `--creds` file is an error.
    #[arg(long, env = "FLOTILLA_ADDON_CREDS_IF_PRESENT")]
    creds_if_present: bool,
    /// CA bundle to verify the NATS server's TLS certificate (required with credentials over
    /// TLS: it is what authenticates the server).
    #[arg(long, env = "FLOTILLA_NATS_CA")]
    nats_ca: Option<PathBuf>,
    /// Start TLS before the server's first line (a server with `handshake_first`).
    #[arg(long, env = "FLOTILLA_NATS_TLS_FIRST")]
    nats_tls_first: bool,
    /// Kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, env = "FLOTILLA_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
}

/// A credentials file read at every (re)connect.
#[derive(Debug)]
struct CredsFile(PathBuf);

impl flotilla_bus::connect::Authenticator for CredsFile {
    fn credentials(&self) -> Result<(String, String), String> {
        let text =
            std::fs::read_to_string(&self.0).map_err(|e| format!("{}: {e}", self.0.display()))?;
        let creds =
            flotilla_auth::Creds::parse(&text).map_err(|e| format!("{}: {e}", self.0.display()))?;
        Ok((creds.jwt, creds.seed.expose().to_string()))
    }

    fn refused(&self) {
        eprintln!(
            "flotilla-addon-fleet-metrics: the NATS server refused the credentials in {}; reading them again at the next connect",
            self.0.display()
        );
    }
}

/// Every problem with the flags.
fn validate(args: &Args) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = flotilla_api::names::validate_cluster_name(&args.cluster_name) {
        errors.push(format!(
            "--cluster-name {:?}: {}",
            args.cluster_name, e.reason
        ));
    }
    if let Err(e) = flotilla_api::names::validate_dns1123_label("addonName", &args.addon_name) {
        errors.push(format!("--addon-name {:?}: {}", args.addon_name, e.reason));
    }
    if args.nats_url.trim().is_empty() {
        errors.push("--nats-url: empty".into());
    }
    let creds = if args.creds_if_present {
        &None
    } else {
        &args.creds
    };
    for (flag, file) in [
        ("--creds", creds),
        ("--nats-ca", &args.nats_ca),
        ("--kubeconfig", &args.kubeconfig),
    ] {
        if let Some(f) = file
            && !f.is_file()
        {
            errors.push(format!("{flag} {}: no such file", f.display()));
        }
    }
    if let Some(f) = args.creds.as_ref().filter(|f| f.is_file())
        && let Err(e) = std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| flotilla_auth::Creds::parse(&t).map_err(|e| e.to_string()))
    {
        errors.push(format!("--creds {}: {e}", f.display()));
    }
    let secure = args
        .creds
        .as_ref()
        .is_some_and(|f| !args.creds_if_present || f.exists());
    match flotilla_bus::connect::check_transport(&args.nats_url, args.nats_ca.is_some(), secure) {
        Ok(warnings) => {
            for w in warnings {
                tracing::warn!("{w}");
            }
        }
        Err(e) => errors.push(format!("--nats-url {e}")),
    }
    errors
}

fn main() -> ExitCode {
    const NAME: &str = "flotilla-addon-fleet-metrics";
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{NAME}: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let _tracing = {
        let _enter = runtime.enter();
        flotilla_bus::trace::init(NAME, "info")
    };
    let args = Args::parse();
    let errors = validate(&args);
    if !errors.is_empty() {
        for e in errors {
            eprintln!("{NAME}: {e}");
        }
        return ExitCode::from(64);
    }
    let source = match runtime.block_on(KubeSource::connect(args.kubeconfig.as_deref())) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(64);
        }
    };
    let config = ReporterConfig::new(
        &args.addon_name,
        &args.cluster_name,
        Duration::from_secs(args.interval_seconds),
    );
    let mut nats = NatsConfig::new(&args.nats_url, config.source());
    match args.creds.clone() {
        Some(path) if !args.creds_if_present || path.exists() => {
            nats.auth = Some(Arc::new(CredsFile(path)));
        }
        Some(path) => {
            eprintln!(
                "{NAME}: {} absent: connecting without credentials",
                path.display()
            );
        }
        None => {}
    }
    nats.tls_ca_file = args.nats_ca.clone();
    nats.tls_first = args.nats_tls_first;
    nats.require_tls = flotilla_bus::connect::tls_required(args.nats_ca.is_some(), &args.nats_url);
    // The add-on's credentials allow replies only in its own inbox space.
    nats.inbox_prefix = Some(format!(
        "{}.addon.{}",
        flotilla_bus::subjects::inbox_prefix(&args.cluster_name),
        args.addon_name
    ));
    runtime.block_on(async move {
        let client = match flotilla_bus::connect::connect(&nats, None).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{NAME}: {e}");
                return ExitCode::from(64);
            }
        };
        let reporter = Reporter::new(config, client.clone(), Arc::new(source));
        tokio::select! {
            () = reporter.run() => {}
            () = flotilla_bus::process::shutdown_signal() => {}
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), client.drain()).await;
        ExitCode::SUCCESS
    })
}

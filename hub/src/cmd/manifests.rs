//! `flotilla-hub manifests`.

use flotilla_hub::install::{self, External, Plan, SecureFiles};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Prints what a management cluster needs to run Flotilla (docs/install.md): a NATS cluster
/// (StatefulSet, JetStream, TLS), the hubs (a Deployment whose pods never share a node, one
/// down at a time), Services, NetworkPolicies, a ServiceMonitor and alert rules, the Grafana
/// dashboards, and the secure directory as Secrets — the offline keys (operator identity, CA
/// key) stay out. Apply with `kubectl apply --server-side -f -`.
#[derive(clap::Args, Debug)]
pub struct Manifests {
    /// The secure directory `flotilla-hub init --tls` wrote (its server certificate must name
    /// the NATS Services; the command says which names are missing).
    #[arg(long, env = "FLOTILLA_SECURE_DIR")]
    secure_dir: Option<PathBuf>,
    /// The API tokens file the hubs serve (`TOKEN,NAME,ROLE` lines).
    #[arg(long, env = "FLOTILLA_API_TOKEN_FILE")]
    api_token_file: Option<PathBuf>,
    /// The API's TLS certificate chain (PEM), for the API, dashboard and cluster proxy.
    #[arg(long, env = "FLOTILLA_GRPC_TLS_CERT", requires = "grpc_tls_key")]
    grpc_tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, env = "FLOTILLA_GRPC_TLS_KEY", requires = "grpc_tls_cert")]
    grpc_tls_key: Option<PathBuf>,
    /// The namespace of every object.
    #[arg(long, default_value = "flotilla")]
    namespace: String,
    /// Hubs (2 or 3 is usual; never two on one node).
    #[arg(long, default_value_t = 2)]
    hubs: u8,
    /// NATS servers (1, 3 or 5).
    #[arg(long, default_value_t = 3)]
    nats_replicas: u8,
    /// The Flotilla image.
    #[arg(long, default_value = install::DEFAULT_IMAGE)]
    image: String,
    /// The NATS server image.
    #[arg(long, default_value = install::DEFAULT_NATS_IMAGE)]
    nats_image: String,
    /// The StorageClass of the JetStream volumes (default: the cluster's).
    #[arg(long)]
    storage_class: Option<String>,
    /// Each NATS server's JetStream volume.
    #[arg(long, default_value = "10Gi")]
    jetstream_size: String,
    /// How agents outside the cluster reach NATS.
    #[arg(long, value_enum, default_value_t = External::Loadbalancer)]
    nats_external: External,
    /// Serve the web dashboard (Service flotilla-dashboard, port 8080).
    #[arg(long)]
    dashboard: bool,
    /// Serve the cluster proxy (Service flotilla-cluster-proxy, port 8443).
    #[arg(long)]
    cluster_proxy: bool,
    /// Serve GitRepo push webhooks (Service flotilla-webhooks, port 8090; docs/gitops.md).
    #[arg(long)]
    webhooks: bool,
    /// Leave out the prometheus-operator objects (ServiceMonitor, PrometheusRule).
    #[arg(long)]
    no_prometheus_operator: bool,
    /// The namespace Prometheus scrapes from: the only one let in to the metrics ports.
    #[arg(long, default_value = "monitoring")]
    monitoring_namespace: String,
    /// Back the store up on this cron schedule (`0 3 * * *`): a CronJob running
    /// `flotilla-hub backup` into a volume of its own.
    #[arg(long)]
    backup_schedule: Option<String>,
    /// Scheduled backups kept (the newest).
    #[arg(long, default_value_t = 7)]
    backup_keep: u32,
    /// The backups volume's size.
    #[arg(long, default_value = "20Gi")]
    backup_size: String,
}

impl Manifests {
    pub fn run(self) -> ExitCode {
        let plan = Plan {
            namespace: self.namespace.clone(),
            hubs: self.hubs,
            nats_replicas: self.nats_replicas,
            image: self.image.clone(),
            nats_image: self.nats_image.clone(),
            storage_class: self.storage_class.clone(),
            jetstream_size: self.jetstream_size.clone(),
            external: self.nats_external,
            dashboard: self.dashboard,
            cluster_proxy: self.cluster_proxy,
            webhooks: self.webhooks,
            prometheus_operator: !self.no_prometheus_operator,
            monitoring_namespace: self.monitoring_namespace.clone(),
            backup: self
                .backup_schedule
                .clone()
                .map(|cron| install::backup::Schedule {
                    cron,
                    keep: self.backup_keep,
                    size: self.backup_size.clone(),
                }),
        };
        let files = match self.read() {
            Ok(files) => files,
            Err(problems) => return refuse(&problems),
        };
        match install::render(&plan, &files) {
            Ok(objects) => {
                print!("{}", install::to_yaml(&objects));
                eprintln!(
                    "flotilla-hub manifests: {} objects. Left out, keep them offline: {}.",
                    objects.len(),
                    install::secure::OFFLINE_FILES.join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(problems) => refuse(&problems.iter().map(ToString::to_string).collect::<Vec<_>>()),
        }
    }

    /// The secure directory's files and the API's, every unreadable one reported.
    fn read(&self) -> Result<SecureFiles, Vec<String>> {
        let Some(dir) = &self.secure_dir else {
            return Err(vec![
                "--secure-dir is needed: run flotilla-hub init --dir DIR --tls with the \
                 --tls-host names docs/install.md gives; a management cluster is not a loopback \
                 demo"
                    .into(),
            ]);
        };
        let mut problems = Vec::new();
        let mut files = SecureFiles::default();
        let wanted = install::secure::HUB_FILES
            .iter()
            .chain(install::secure::JWT_FILES)
            .chain(install::secure::NATS_TLS_FILES)
            .chain(std::iter::once(&install::secure::SERVER_CONF));
        for path in wanted {
            match read_optional(&dir.join(path)) {
                Ok(Some(bytes)) => {
                    files.files.insert(path.to_string(), bytes);
                }
                Ok(None) => {}
                Err(e) => problems.push(e),
            }
        }
        let mut required = |flag: &str, path: &Option<PathBuf>| -> Vec<u8> {
            match path.as_deref().map(read_optional) {
                Some(Ok(Some(bytes))) => bytes,
                Some(Ok(None)) => {
                    problems.push(format!("{flag} {}: no such file", show(path)));
                    Vec::new()
                }
                Some(Err(e)) => {
                    problems.push(e);
                    Vec::new()
                }
                None => Vec::new(),
            }
        };
        files.api_tokens = required("--api-token-file", &self.api_token_file);
        let cert = required("--grpc-tls-cert", &self.grpc_tls_cert);
        let key = required("--grpc-tls-key", &self.grpc_tls_key);
        if !cert.is_empty() && !key.is_empty() {
            files.api_tls = Some((cert, key));
        }
        if problems.is_empty() {
            Ok(files)
        } else {
            Err(problems)
        }
    }
}

fn show(path: &Option<PathBuf>) -> String {
    path.as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// A file's bytes, `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn refuse(problems: &[String]) -> ExitCode {
    for p in problems {
        eprintln!("flotilla-hub manifests: {p}");
    }
    ExitCode::from(64)
}

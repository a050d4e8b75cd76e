//! GitRepos as a controller family: their one task and its fetch pool; provides [`GitRepos`]
//! (after the replica sets it writes through, and the policies whose hub Secrets hold its
//! credentials). Its settings come from its [`Flags`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.GitRepoService` | | `GetGitRepo`, `ListGitRepos`, `ListGitRepoClusters` | | `ApplyGitRepo`, `DeleteGitRepo`, `SyncGitRepo`, `RolloutGitRepo` |

use super::{Buckets, Deps, GitOpsConfig, GitRepos};
use crate::controller::{Recipe, Start, StartError};
use crate::gitops::grpc::GitRepoApi;
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::placement::Placements;
use crate::policy::Policies;
use crate::replicaset::ReplicaSets;
use flotilla_api::v1::git_repo_service_server::GitRepoServiceServer;
use std::path::PathBuf;
use std::time::Duration;

/// The family.
pub struct GitRepoFamily;

impl Recipe for GitRepoFamily {
    const NAME: &'static str = "gitrepos";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.GitRepoService",
        &[
            ("ApplyGitRepo", Write, NAMESPACE_WRITE),
            ("GetGitRepo", Read, FILTERED),
            ("ListGitRepos", Read, FILTERED),
            ("ListGitRepoClusters", Read, FILTERED),
            ("DeleteGitRepo", Write, NAMESPACE_WRITE),
            ("SyncGitRepo", Write, NAMESPACE_WRITE),
            ("RolloutGitRepo", Write, NAMESPACE_WRITE),
        ],
    )];
    type Settings = GitOpsConfig;
    type Services = (GitRepoServiceServer<GitRepoApi>,);

    async fn start(
        config: &GitOpsConfig,
        cx: &mut Start<'_>,
    ) -> Result<Self::Services, StartError> {
        let buckets = Buckets::open(cx).await?;
        tokio::fs::create_dir_all(&config.cache_dir)
            .await
            .map_err(|source| {
                cx.failed(CacheDir {
                    dir: config.cache_dir.clone(),
                    source,
                })
            })?;
        let worker = config.worker_binary();
        if !worker.is_file() {
            tracing::warn!(
                worker = %worker.display(),
                "the GitRepo fetch worker is missing: every fetch will fail until it is installed \
                 (--gitops-fetch-worker)"
            );
        }
        let deps = Deps {
            replicasets: cx.need::<ReplicaSets>()?,
            placements: cx.need::<Placements>()?,
            secrets: cx.need::<Policies>()?.hubdata().clone(),
            config: config.clone(),
        };
        let (repos, task) = GitRepos::spawn(buckets, deps, cx.stop_signal())
            .await
            .map_err(|e| cx.failed(e))?;
        cx.adopt(task);
        // Webhooks other hubs received reach this hub's GitRepos here (their Secrets are here).
        let d = cx.deps();
        let hooks = super::webhook::forward::serve(
            d.nats.clone(),
            d.seal.clone(),
            repos.clone(),
            cx.stop_signal(),
        )
        .await
        .map_err(|e| cx.failed(e))?;
        cx.adopt(hooks);
        cx.provide(repos.clone());
        Ok((GitRepoServiceServer::new(GitRepoApi::new(repos)),))
    }
}

/// The fetch cache directory could not be made.
#[derive(Debug, thiserror::Error)]
#[error("--gitops-cache-dir {}: {source}", dir.display())]
struct CacheDir {
    dir: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The family's flags (flattened into the `flotilla-hub` binary's through
/// [`crate::controllers::Flags`]).
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Flags {
    /// The fetch worker binary (flotilla-git-fetch); default: next to flotilla-hub.
    #[arg(long, env = "FLOTILLA_GITOPS_FETCH_WORKER")]
    gitops_fetch_worker: Option<PathBuf>,
    /// Where GitRepos' shallow bare repositories are cached (one per GitRepo, removed with
    /// it); default: <temp dir>/flotilla-gitops.
    #[arg(long, env = "FLOTILLA_GITOPS_CACHE_DIR")]
    gitops_cache_dir: Option<PathBuf>,
    /// A directory under which file:// repositories may be read in place (repeatable); none:
    /// file:// is refused.
    #[arg(
        long = "gitops-file-root",
        env = "FLOTILLA_GITOPS_FILE_ROOTS",
        value_delimiter = ','
    )]
    gitops_file_roots: Vec<String>,
    /// Let fetches connect to loopback addresses (tests, single-machine labs); link-local
    /// addresses are refused whatever this says.
    #[arg(long, env = "FLOTILLA_GITOPS_ALLOW_LOOPBACK")]
    gitops_allow_loopback: bool,
    /// Fetch workers at once (at most one per host).
    #[arg(
        long,
        env = "FLOTILLA_GITOPS_FETCHES",
        default_value_t = 2,
        value_parser = clap::value_parser!(u16).range(1..=64)
    )]
    gitops_fetches: u16,
    /// Seconds one fetch may take; the worker is killed past it.
    #[arg(
        long,
        env = "FLOTILLA_GITOPS_FETCH_TIMEOUT_SECONDS",
        default_value_t = 120,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    gitops_fetch_timeout_seconds: u64,
    /// GitRepos the hub keeps at most.
    #[arg(
        long,
        env = "FLOTILLA_GITOPS_MAX_REPOS",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u32).range(1..=100_000)
    )]
    gitops_max_repos: u32,
    /// Serve push webhooks (GitHub, GitLab, Gitea) on this address, at /hooks/gitrepos: a
    /// verified push fetches the GitRepos following it at once. No token (a webhook proves
    /// itself by its GitRepo's webhookSecret); TLS with --grpc-tls-cert/--grpc-tls-key, plain
    /// HTTP only on loopback. Any hub may serve it.
    #[arg(long, env = "FLOTILLA_GITOPS_WEBHOOK_LISTEN")]
    gitops_webhook_listen: Option<std::net::SocketAddr>,
    /// Proxies (address blocks, comma-separated: 10.0.0.0/8,2001:db8::/32) in front of the
    /// webhook listener, such as an Ingress controller: from them, a webhook's rate is kept for
    /// the right-most X-Forwarded-For address that is not a trusted proxy, and they are not
    /// held to the per-address connection limit. None: the connection's address.
    #[arg(
        long,
        env = "FLOTILLA_GITOPS_WEBHOOK_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    gitops_webhook_trusted_proxies: Vec<String>,
}

impl Flags {
    /// The settings they give; each problem is pushed to `errors`.
    pub fn settings(&self, errors: &mut Vec<String>) -> GitOpsConfig {
        let mut config = GitOpsConfig {
            worker: self.gitops_fetch_worker.clone(),
            file_roots: self.gitops_file_roots.clone(),
            allow_loopback: self.gitops_allow_loopback,
            fetches: usize::from(self.gitops_fetches),
            fetch_timeout: Duration::from_secs(self.gitops_fetch_timeout_seconds),
            max_repos: self.gitops_max_repos as usize,
            ..GitOpsConfig::default()
        };
        config.webhook.listen = self.gitops_webhook_listen;
        for text in &self.gitops_webhook_trusted_proxies {
            match text.parse::<crate::webserver::Cidr>() {
                Ok(cidr) => config.webhook.trusted_proxies.push(cidr),
                Err(e) => errors.push(format!("--gitops-webhook-trusted-proxies: {e}")),
            }
        }
        config.webhook.limits.trusted = config.webhook.trusted_proxies.clone();
        if let Some(dir) = &self.gitops_cache_dir {
            config.cache_dir = dir.clone();
        }
        for root in &config.file_roots {
            if !std::path::Path::new(root).is_absolute() {
                errors.push(format!(
                    "--gitops-file-root {root}: must be an absolute directory"
                ));
            }
        }
        config
    }
}

//! GitRepos (`apps.flotilla.io/v1alpha1`, namespaced): Git repositories whose paths become
//! bundles, each delivered as one ManifestWorkReplicaSet over the GitRepo's targets (design:
//! docs/notes/issue-50-design.md §10).
//!
//! - [`rules`]: pure — when a GitRepo is fetched next (its polling interval, back-off after a
//!   failure, a spec change or a `sync`), which replica sets a rendered commit writes and which
//!   go, and the status.
//! - [`actor`]: the one task owning the `gitrepos` bucket: applies, deletes, syncs; runs each
//!   due fetch through the fetch pool (a `flotilla-git-fetch` child process per fetch, at most
//!   `--gitops-fetches` at once and one per host), renders on a blocking thread, writes the
//!   bundles' replica sets through [`crate::replicaset::ReplicaSets`] and the status.
//! - [`placements`]: the Placements of inline targets (`targets[].placement`), written and
//!   owned by their GitRepo through the placements family: a pure plan and its executor.
//! - [`credentials`]: the hub Secret a GitRepo's `clientSecretName` names, turned into the
//!   worker's credentials (handed over on its stdin only).
//! - [`grpc`]: `flotilla.v1.GitRepoService`; [`family`]: the family and its `--gitops-*` flags.
//! - [`webhook`]: push webhooks (GitHub, GitLab, Gitea) verified with a GitRepo's
//!   `webhookSecret`, each a fetch at once; any hub takes them, the controllers' hub checks them.
//!
//! A commit that fails to fetch or render changes nothing that runs: the replica sets keep the
//! last good commit's content and the status says what was refused and where. KV bucket:
//! `gitrepos` (`<namespace>.<name>`: the GitRepo and its status). The fetch cache (shallow bare
//! repositories under `--gitops-cache-dir`) is a cache only.

pub mod actor;
pub mod credentials;
pub mod family;
pub mod grpc;
pub mod placements;
pub mod rules;
pub mod webhook;

use crate::handle::{Gone, Handle};
use crate::keys::ObjectRef;
use crate::replicaset::rules::state::State;
use crate::store::StoreError;
use flotilla_api::v1::{GitRepo, GitRepoClusterRow};
use flotilla_gitfetch::protocol::Limits;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;

/// KV bucket of GitRepos (`<namespace>.<name>`).
pub const BUCKET: &str = "gitrepos";
/// The fetch worker's binary name (looked for next to the hub's own when not configured).
pub const WORKER_BINARY: &str = "flotilla-git-fetch";
/// Rows one `ListGitRepoClusters` answers at most.
pub const MAX_CLUSTER_ROWS: usize = 10_000;

/// Settings (the `--gitops-*` flags).
#[derive(Debug, Clone)]
pub struct GitOpsConfig {
    /// The `flotilla-git-fetch` binary; `None`: next to the hub's executable.
    pub worker: Option<PathBuf>,
    /// Where the shallow bare repositories are kept (one per GitRepo, removed with it).
    pub cache_dir: PathBuf,
    /// Directories under which `file://` repositories may be read in place (none: refused).
    pub file_roots: Vec<String>,
    /// Let fetches connect to loopback addresses (tests, single-machine labs).
    pub allow_loopback: bool,
    /// Fetch workers at once (default 2).
    pub fetches: usize,
    /// Wall-clock time of one fetch (default 120 s); the worker is killed past it.
    pub fetch_timeout: Duration,
    /// Address space of one worker (default 1 GiB).
    pub worker_memory: u64,
    /// The limits of one fetch (zero fields: their defaults).
    pub limits: Limits,
    /// The first wait after a failed fetch (default 15 s), doubling to
    /// [`GitOpsConfig::retry_max`].
    pub retry_min: Duration,
    /// The longest wait between failed fetches (default 10 min).
    pub retry_max: Duration,
    /// GitRepos the hub keeps at most (default 1,000).
    pub max_repos: usize,
    /// The push webhook listener (every hub may serve one; `--gitops-webhook-listen`).
    pub webhook: webhook::listener::WebhookConfig,
}

impl Default for GitOpsConfig {
    fn default() -> Self {
        Self {
            worker: None,
            cache_dir: std::env::temp_dir().join("flotilla-gitops"),
            file_roots: Vec::new(),
            allow_loopback: false,
            fetches: 2,
            fetch_timeout: Duration::from_secs(120),
            worker_memory: 1024 * 1024 * 1024,
            limits: Limits::default(),
            retry_min: Duration::from_secs(15),
            retry_max: Duration::from_secs(600),
            max_repos: 1000,
            webhook: webhook::listener::WebhookConfig::default(),
        }
    }
}

impl GitOpsConfig {
    /// The worker binary: the configured one, else `flotilla-git-fetch` next to the running
    /// executable (or one directory up, where `cargo test` binaries find the workspace's).
    pub fn worker_binary(&self) -> PathBuf {
        if let Some(w) = &self.worker {
            return w.clone();
        }
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
        let here = dir.join(WORKER_BINARY);
        match dir.parent() {
            Some(up) if !here.is_file() && up.join(WORKER_BINARY).is_file() => {
                up.join(WORKER_BINARY)
            }
            _ => here,
        }
    }
}

/// Why a call failed.
#[derive(Debug, Error)]
pub enum GitRepoError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such GitRepo.
    #[error("GitRepo {0} not found")]
    NotFound(String),
    /// The hub holds as many GitRepos as it may.
    #[error("{0} GitRepos at most (--gitops-max-repos)")]
    Exhausted(usize),
    /// The call is not possible in the GitRepo's state (nothing to undo to).
    #[error("{0}")]
    Refused(String),
    /// One of its replica sets could not be changed.
    #[error("its replica set {name} could not be changed: {source}; try again")]
    ReplicaSet {
        /// The replica set.
        name: String,
        /// Why.
        #[source]
        source: crate::replicaset::ReplicaSetError,
    },
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[from] StoreError),
    /// The task ended (hub shutting down or the controllers moved).
    #[error("GitRepos are not being served")]
    Gone,
}

impl From<Gone> for GitRepoError {
    fn from(_: Gone) -> Self {
        Self::Gone
    }
}

flotilla_hub_core::buckets! {
    /// The buckets.
    pub struct Buckets {
        /// The GitRepos and their status.
        repos: GitRepo = BUCKET,
    }
}

/// What the GitRepos work with.
#[derive(Clone)]
pub struct Deps {
    /// Where bundles are delivered.
    pub replicasets: crate::replicaset::ReplicaSets,
    /// Where inline targets' Placements are written ([`placements`]).
    pub placements: crate::placement::Placements,
    /// The hub Secrets a GitRepo's `clientSecretName` names ([`credentials`]).
    pub secrets: crate::policy::hubdata::HubData,
    /// Settings.
    pub config: GitOpsConfig,
}

/// The published GitRepos, by `<namespace>/<name>`.
type Views = crate::handle::Views<GitRepo>;

/// The hub's GitRepos (cheap to clone).
#[derive(Clone)]
pub struct GitRepos {
    handle: Handle<actor::Msg, GitRepo>,
    /// Where the bundles are (read for the per-cluster rows).
    sets: crate::replicaset::ReplicaSets,
    /// The hub Secrets (a GitRepo's `webhookSecret`).
    secrets: crate::policy::hubdata::HubData,
    /// Who follows which URL, the deliveries handled lately ([`webhook::hook`]).
    hooks: webhook::hook::Hooks,
}

impl std::fmt::Debug for GitRepos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitRepos").finish_non_exhaustive()
    }
}

/// The key of a GitRepo in the views (`<namespace>/<name>`).
fn key_of(r: &GitRepo) -> ObjectRef {
    let m = r.metadata.clone().unwrap_or_default();
    ObjectRef::new(&m.namespace, &m.name)
}

impl GitRepos {
    /// Loads the stored GitRepos and spawns the task (and its fetch pool); it ends when
    /// `shutdown` turns true or every handle is gone.
    pub async fn spawn(
        buckets: Buckets,
        deps: Deps,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), GitRepoError> {
        let stored = buckets.repos.load_all().await?;
        let views: Views = Arc::default();
        let sets = deps.replicasets.clone();
        let secrets = deps.secrets.clone();
        let hooks = webhook::hook::Hooks::default();
        let (tx, task) = actor::spawn(
            buckets,
            deps,
            views.clone(),
            hooks.clone(),
            stored,
            shutdown,
        );
        Ok((
            Self {
                handle: Handle::new(tx, views),
                sets,
                secrets,
                hooks,
            },
            task,
        ))
    }

    /// Creates or updates a GitRepo (validated: every problem named); a spec change fetches at
    /// once. Answered once stored.
    pub async fn apply(&self, repo: GitRepo) -> Result<GitRepo, GitRepoError> {
        let mut errors = flotilla_gitops::source::validate(&repo);
        errors.extend(placements::validate(&repo));
        if !errors.is_empty() {
            return Err(GitRepoError::Invalid(errors));
        }
        self.handle
            .ask(|r| actor::Msg::Apply(Box::new(repo), r))
            .await?
    }

    /// One GitRepo with its status.
    pub fn get(&self, namespace: &str, name: &str) -> Option<GitRepo> {
        self.handle
            .get(&ObjectRef::new(namespace, name).inventory_key())
    }

    /// The GitRepos of a namespace (every namespace when empty).
    pub fn list(&self, namespace: &str) -> Vec<GitRepo> {
        self.handle.list(&ObjectRef::prefix(namespace))
    }

    /// Deletes a GitRepo and its bundles' replica sets (their works go unless
    /// `keepResources`).
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), GitRepoError> {
        let key = ObjectRef::new(namespace, name);
        self.handle.ask(|r| actor::Msg::Delete(key, r)).await?
    }

    /// Fetches now, whatever the polling interval or back-off say; answers at once.
    pub async fn sync(&self, namespace: &str, name: &str) -> Result<GitRepo, GitRepoError> {
        let key = ObjectRef::new(namespace, name);
        self.handle.ask(|r| actor::Msg::Sync(key, r)).await?
    }

    /// Every bundle's decided clusters (bundle by bundle) with their state, the commit their
    /// work carries and why they are not Ready, computed now; only those in `state` when it is
    /// given. At most [`MAX_CLUSTER_ROWS`], and whether more were left out.
    pub fn clusters(
        &self,
        namespace: &str,
        name: &str,
        state: &str,
    ) -> Result<(Vec<GitRepoClusterRow>, bool), GitRepoError> {
        if !state.is_empty() && !State::ALL.iter().any(|s| s.name() == state) {
            let names: Vec<&str> = State::ALL.iter().map(|s| s.name()).collect();
            return Err(GitRepoError::Invalid(vec![format!(
                "state: {state:?} is not one of {}",
                names.join(", ")
            )]));
        }
        if self.get(namespace, name).is_none() {
            return Err(GitRepoError::NotFound(format!("{namespace}/{name}")));
        }
        let mut sets: Vec<_> = self
            .sets
            .list(namespace)
            .into_iter()
            .filter(|rs| rules::owned_by(rs, name))
            .collect();
        sets.sort_by(|a, b| {
            a.metadata
                .as_ref()
                .map(|m| &m.name)
                .cmp(&b.metadata.as_ref().map(|m| &m.name))
        });
        let mut rows = Vec::new();
        for rs in sets {
            let Some(m) = rs.metadata.as_ref() else {
                continue;
            };
            let bundle = m.labels.get(flotilla_gitops::source::BUNDLE_LABEL);
            let bundle = bundle.unwrap_or(&m.name);
            // Each set's works come from the works inventory's owner index (in their number,
            // not the fleet's: a page view once scanned every work per bundle).
            let found = self.sets.rows(namespace, &m.name).unwrap_or_default();
            for r in found {
                if !state.is_empty() && r.state.name() != state {
                    continue;
                }
                if rows.len() == MAX_CLUSTER_ROWS {
                    return Ok((rows, true));
                }
                rows.push(GitRepoClusterRow {
                    bundle: bundle.clone(),
                    cluster: r.cluster,
                    state: r.state.name().to_owned(),
                    commit: r.commit,
                    message: r.message,
                });
            }
        }
        Ok((rows, false))
    }

    /// `pause`, `resume` or `undo` every bundle's rollout (undo: the commit delivered before,
    /// pinned until resumed); answered once stored.
    pub async fn rollout(
        &self,
        namespace: &str,
        name: &str,
        action: &str,
    ) -> Result<GitRepo, GitRepoError> {
        let action: rules::Rollout = action
            .parse()
            .map_err(|e: String| GitRepoError::Invalid(vec![e]))?;
        let key = ObjectRef::new(namespace, name);
        self.handle
            .ask(|r| actor::Msg::Rollout(key, action, r))
            .await?
    }
}

//! ClusterImportPolicies (`cluster.flotilla.io/v1alpha1`): clusters that import themselves.
//! A policy names a source kind — the registration source (agents that registered and wait
//! for acceptance), or Kubernetes objects listed through the agents of some spokes (Cluster
//! API `Cluster`s on a management cluster) — and every source its CEL selector and creation
//! condition admit becomes an accepted cluster, labelled, tainted and put in its cluster set
//! by the policy's CEL template, with no admin step. An object source's cluster is created
//! ahead of its agent and deleted with its source. At most one policy holds a source kind.
//!
//! Whose word a policy decides on: a registration source's values (name, labels, claims,
//! capacity, version) are what the registrant sent — whoever holds `bootstrap.creds` chooses
//! them — minus the labels the hub reserves, which registration drops; an object source's are
//! what its spokes list, so a compromised source spoke decides which clusters its policy
//! creates and deletes (within the creation rate and cap; never a cluster the policy did not
//! create). A registrant's labels never name its set: the cluster is in `default` or in the
//! set the template names (docs/security.md, "Registration labels").
//!
//! - [`compiled`]: a policy's CEL, compiled once (variables `source`, `references`), and the
//!   source values.
//! - [`source`]: object sources listed (and their references read) through the spokes' agents.
//! - [`reason`]: pure — why something failed, as a status keeps it (cut to a bound).
//! - [`rules`]: pure — the plan (records, cluster creations, edits and deletions, counts) from
//!   a snapshot.
//! - [`actor`]: the one task that owns the policies and records: applies, deletes, polls the
//!   object sources, and carries plans out (records first, then the clusters' writes through
//!   their actors).
//!
//! KV buckets: `importpolicies` (`<name>`) and `importedclusters` (`<cluster>`: which policy
//! holds the cluster and from which source, whether it made or adopted it, the labels it set,
//! how many complete lists in a row missed its source).

pub mod actor;
pub mod compiled;
pub mod family;
pub mod grpc;
pub mod reason;
pub mod rules;
pub mod source;

use crate::store::StoreError;
use flotilla_api::v1::{ClusterImportPolicy, ImportRecord};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot, watch};

/// KV bucket of the policies.
pub const POLICIES: &str = "importpolicies";
/// KV bucket of the import records.
pub const RECORDS: &str = "importedclusters";

/// The default of [`ImportConfig::poll`], in seconds.
pub const DEFAULT_POLL_SECONDS: u64 = 10;
/// Default [`ImportConfig::max_created`].
pub const DEFAULT_MAX_CREATED: usize = 1_000;
/// Default [`ImportConfig::create_rate`].
pub const DEFAULT_CREATE_RATE: f64 = 10.0;
/// How long a spoke's agent has to answer a list.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings.
#[derive(Debug, Clone)]
pub struct ImportConfig {
    /// How long cluster changes gather before a pass (default 100 ms).
    pub debounce: Duration,
    /// A pass runs at least this often, to retry edits that failed (default 5 s).
    pub resync: Duration,
    /// Cluster calls and record writes in flight at once (default 64).
    pub concurrency: usize,
    /// The task's mailbox (default 256).
    pub mailbox: usize,
    /// How often object sources are listed on their spokes (default 10 s,
    /// `--import-poll-seconds`).
    pub poll: Duration,
    /// Live clusters one object-source policy may have created, at most (default 1,000,
    /// `--import-max-clusters`): a source spoke's lists decide how many clusters exist.
    pub max_created: usize,
    /// Clusters one object-source policy creates per second, at most (default 10, bursts of
    /// [`ImportConfig::create_burst`], `--import-create-rate`); the rest wait for later passes.
    pub create_rate: f64,
    /// Creations one policy may save up (default 100).
    pub create_burst: f64,
}

impl Default for ImportConfig {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(100),
            resync: Duration::from_secs(5),
            concurrency: 64,
            mailbox: 256,
            poll: Duration::from_secs(DEFAULT_POLL_SECONDS),
            max_created: DEFAULT_MAX_CREATED,
            create_rate: DEFAULT_CREATE_RATE,
            create_burst: 100.0,
        }
    }
}

/// Why a call failed.
#[derive(Debug, Error)]
pub enum ImportError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such policy.
    #[error("ClusterImportPolicy {0} not found")]
    NotFound(String),
    /// Another policy holds the source kind.
    #[error(
        "spec.source: {kind} is already imported by ClusterImportPolicy {owner:?} (one policy \
         per source kind); edit or delete that policy"
    )]
    Owned {
        /// `group/resource`.
        kind: String,
        /// The policy holding it.
        owner: String,
    },
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[from] StoreError),
    /// The task ended (hub shutting down).
    #[error("ClusterImportPolicies are not being served")]
    Gone,
}

flotilla_hub_core::buckets! {
    /// The buckets.
    pub struct Buckets {
        /// The policies.
        policies: ClusterImportPolicy = POLICIES,
        /// The records.
        records: ImportRecord = RECORDS,
    }
}

/// What the policies work with.
#[derive(Clone)]
pub struct Deps {
    /// Every cluster (followed).
    pub inventory: crate::inventory::ClusterInventory,
    /// Their actors (edits go through them).
    pub clusters: crate::cluster::Clusters,
    /// Secure mode: acceptance needs a bound agent key.
    pub secure: bool,
    /// Asks the spokes' agents (object sources), bounded by [`LIST_TIMEOUT`].
    pub agents: flotilla_bus::publish::Publisher,
    /// Settings.
    pub config: ImportConfig,
}

/// The published policies, by name (followed by `WatchImportPolicies`).
pub type Views = crate::inventory::Inventory<ClusterImportPolicy>;

/// The hub's ClusterImportPolicies (cheap to clone).
#[derive(Clone)]
pub struct ImportPolicies {
    tx: mpsc::Sender<actor::Msg>,
    views: Views,
}

impl std::fmt::Debug for ImportPolicies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportPolicies").finish_non_exhaustive()
    }
}

impl ImportPolicies {
    /// Loads the stored policies and records and spawns the task; it ends when `shutdown`
    /// turns true or every handle is gone.
    pub async fn spawn(
        buckets: Buckets,
        deps: Deps,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), ImportError> {
        let policies = buckets.policies.load_all().await?;
        let records = buckets.records.load_all().await?;
        let views = Views::new(256);
        let mut deps = deps;
        deps.agents = deps.agents.with_timeout(LIST_TIMEOUT);
        let (tx, task) = actor::spawn(buckets, deps, views.clone(), policies, records, shutdown);
        Ok((Self { tx, views }, task))
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> actor::Msg,
    ) -> Result<T, ImportError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| ImportError::Gone)?;
        rx.await.map_err(|_| ImportError::Gone)
    }

    /// Creates or updates a policy; answered once stored.
    pub async fn apply(
        &self,
        policy: ClusterImportPolicy,
    ) -> Result<ClusterImportPolicy, ImportError> {
        compiled::CompiledPolicy::new(&policy).map_err(ImportError::Invalid)?;
        self.ask(|r| actor::Msg::Apply(Box::new(policy), r)).await?
    }

    /// One policy.
    pub fn get(&self, name: &str) -> Option<ClusterImportPolicy> {
        self.views.get(name).map(|p| (*p).clone())
    }

    /// Every policy, by name.
    pub fn list(&self) -> Vec<ClusterImportPolicy> {
        let mut all: Vec<(std::sync::Arc<str>, std::sync::Arc<ClusterImportPolicy>)> =
            self.views.with_prefix("");
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter().map(|(_, p)| (*p).clone()).collect()
    }

    /// The policies as they change (for watches).
    pub fn views(&self) -> &Views {
        &self.views
    }

    /// Deletes a policy; its clusters stay (their records go).
    pub async fn delete(&self, name: &str) -> Result<(), ImportError> {
        let name = name.to_string();
        self.ask(|r| actor::Msg::Delete(name, r)).await?
    }
}

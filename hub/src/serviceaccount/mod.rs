//! ManagedServiceAccounts on the hub (`authentication.open-cluster-management.io/v1beta1`):
//! each names a cluster (its namespace); the hub delivers it with its public sealing key, the
//! cluster's agent creates the ServiceAccount, requests a token and reports it sealed to the
//! hub; the hub keeps the sealed box only, answers `flotilla kubeconfig --service-account` with
//! the opened token over the API's TLS, and lets the cluster proxy recognise the token by its
//! hash.
//!
//! - [`rules`]: pure — checks of reports, the status they make, `ttlSecondsAfterCreation`,
//!   re-delivery.
//! - [`actor`]: one task for every account — the only writer of both buckets: applies,
//!   deletes (kept with a `deletionTimestamp` until the cluster confirms the ServiceAccount is
//!   gone), reports, re-deliveries, TTL deletions, token reads.
//! - [`route`]: the router's hand-off of reports (checked against their subject, then to the
//!   controllers' hub).
//! - [`key`]: the hub's sealing key.
//! - [`TokenLookup`]: what the cluster proxy asks: is this bearer a current token of this
//!   cluster.
//!
//! KV buckets: `managedserviceaccounts` (`<cluster>.<name>`: the object and its status) and
//! `serviceaccounttokens` (`<cluster>.<sha256 of the token>`: the sealed box, its expiry and
//! whose it is — never the token).

pub mod actor;
pub mod family;
pub mod grpc;
pub use flotilla_hub_core::key;
pub mod route;
pub mod rules;

use crate::handle::{Gone, Handle};
use crate::keys::ObjectRef;
use crate::store::{Bucket, StoreError};
use flotilla_api::v1::{
    ManagedServiceAccount, ManagedServiceAccountToken, ServiceAccountTokenRecord,
};
use flotilla_bus::jetstream::StreamOptions;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use thiserror::Error;

/// KV bucket of ManagedServiceAccounts.
pub const ACCOUNTS: &str = "managedserviceaccounts";
/// KV bucket of their sealed tokens.
pub const TOKENS: &str = "serviceaccounttokens";

/// Settings.
#[derive(Debug, Clone)]
pub struct MsaConfig {
    /// The hub's sealing key (the same on every hub of the control plane).
    pub key: key::SealingKey,
    /// How often a confirmed account is delivered again (a restarted agent holds nothing).
    pub redeliver_every: Duration,
    /// The task's mailbox: requests and reports waiting at most (default 4096). A report
    /// that finds it full is delivered again later.
    pub mailbox: usize,
    /// How many reports of one cluster are taken (see [`rules::ReportRate`]).
    pub report_rate: rules::ReportRate,
}

impl Default for MsaConfig {
    fn default() -> Self {
        Self {
            key: key::SealingKey::ephemeral(),
            redeliver_every: Duration::from_secs(300),
            mailbox: 4096,
            report_rate: rules::ReportRate::default(),
        }
    }
}

/// Why a call failed.
#[derive(Debug, Error)]
pub enum MsaError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such account.
    #[error("{0} not found")]
    NotFound(String),
    /// The update carried a stale resourceVersion.
    #[error("{0}")]
    Conflict(String),
    /// No token to give (not reported yet, expired, being deleted).
    #[error("{0}")]
    NoToken(String),
    /// The caller may not.
    #[error("{0}")]
    Denied(String),
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] StoreError),
    /// The task ended (hub shutting down).
    #[error("ManagedServiceAccounts are not being served")]
    Gone,
}

impl From<StoreError> for MsaError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable(e)
    }
}

impl From<Gone> for MsaError {
    fn from(_: Gone) -> Self {
        Self::Gone
    }
}

flotilla_hub_core::buckets! {
    /// The buckets.
    pub struct Buckets {
        /// The accounts.
        accounts: ManagedServiceAccount = ACCOUNTS,
        /// Their sealed tokens.
        tokens: ServiceAccountTokenRecord = TOKENS,
    }
}

/// What the accounts work with.
#[derive(Clone)]
pub struct Deps {
    /// Every cluster (an account of a deleted cluster goes with it).
    pub clusters: crate::inventory::ClusterInventory,
    /// Sends spec events (`flotilla.spec.<cluster>`).
    pub publisher: flotilla_bus::publish::Publisher,
    /// The hub's metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Settings.
    pub config: MsaConfig,
}

/// The published accounts, by `<cluster>/<name>`.
type Views = crate::handle::Views<ManagedServiceAccount>;

/// The hub's ManagedServiceAccounts (cheap to clone).
#[derive(Clone)]
pub struct ServiceAccounts {
    handle: Handle<actor::Msg, ManagedServiceAccount>,
    task: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl std::fmt::Debug for ServiceAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccounts").finish_non_exhaustive()
    }
}

/// The key of an object's metadata.
pub(crate) fn object_key(m: Option<&flotilla_api::v1::ObjectMeta>) -> ObjectRef {
    let m = m.cloned().unwrap_or_default();
    ObjectRef::new(&m.namespace, &m.name)
}

/// Who asks for a token, for [`ServiceAccounts::token`]: `None` on an open API.
pub type Caller<'a> = Option<&'a crate::grpc::auth::Identity>;

impl ServiceAccounts {
    /// Loads every stored account and starts the task.
    pub async fn start(buckets: Buckets, deps: Deps) -> Result<Self, MsaError> {
        let accounts = buckets.accounts.load_all().await?;
        let tokens = buckets.tokens.load_all().await?;
        let views: Views = Arc::default();
        let (tx, task) = actor::spawn(buckets, deps, views.clone(), accounts, tokens);
        Ok(Self {
            handle: Handle::new(tx, views),
            task: Arc::new(std::sync::Mutex::new(Some(task))),
        })
    }

    /// Stops the task (this hub gave the controllers up), awaited (bounded).
    pub async fn stop(&self) {
        let _ = self.handle.send(actor::Msg::Stop).await;
        let task = self.task.lock().expect("task lock").take();
        if let Some(t) = task {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }

    /// Creates or updates an account; answered once stored.
    pub async fn apply(
        &self,
        account: ManagedServiceAccount,
    ) -> Result<ManagedServiceAccount, MsaError> {
        let ocm = flotilla_api::ocm::ManagedServiceAccount::from(&account);
        ocm.to_proto().map_err(MsaError::Invalid)?;
        self.handle
            .ask(|r| actor::Msg::Apply(Box::new(account), r))
            .await?
    }

    /// One account.
    pub fn get(&self, cluster: &str, name: &str) -> Option<ManagedServiceAccount> {
        self.handle
            .get(&ObjectRef::new(cluster, name).inventory_key())
    }

    /// The accounts of a cluster (every cluster when empty).
    pub fn list(&self, cluster: &str) -> Vec<ManagedServiceAccount> {
        self.handle.list(&ObjectRef::prefix(cluster))
    }

    /// Deletes an account: its token is refused at once, its cluster deletes the
    /// ServiceAccount, and it goes once the cluster confirms.
    pub async fn delete(&self, cluster: &str, name: &str) -> Result<(), MsaError> {
        let key = ObjectRef::new(cluster, name);
        self.handle.ask(|r| actor::Msg::Delete(key, r)).await?
    }

    /// The current token, opened, for `caller`: admins, and deployers that may act as the
    /// ServiceAccount on the cluster (an execute-as grant covering
    /// `<its namespace>/<name>`) — a token gives them nothing they could not do already.
    pub async fn token(
        &self,
        cluster: &str,
        name: &str,
        caller: Caller<'_>,
    ) -> Result<ManagedServiceAccountToken, MsaError> {
        let key = ObjectRef::new(cluster, name);
        let token = self.handle.ask(|r| actor::Msg::Token(key, r)).await??;
        if let Some(who) = caller {
            let executor = flotilla_api::work::Executor {
                namespace: token.service_account_namespace.clone(),
                name: token.name.clone(),
            };
            if who.role() == crate::grpc::auth::Role::ReadOnly
                || who.may_execute_as(Some(&executor)).is_err()
            {
                tracing::info!(caller = %who.name(), role = %who.role(), cluster.name = %cluster, account = %name, "ManagedServiceAccount token refused");
                return Err(MsaError::Denied(format!(
                    "{} ({}) may not fetch the token of ManagedServiceAccount {cluster}/{name}: \
                     only admins, and deployers with an execute-as grant covering {executor} \
                     (the ServiceAccount on the cluster), may",
                    who.name(),
                    who.role()
                )));
            }
            tracing::info!(caller = %who.name(), role = %who.role(), cluster.name = %cluster, account = %name, "ManagedServiceAccount token fetched");
        }
        Ok(token)
    }

    /// Hands a checked report to the task without waiting (the router must never block); the
    /// report comes back when the mailbox is full or the task has ended, for its source to be
    /// told [`actor::Outcome::Retry`].
    pub fn try_report(&self, report: actor::ReportIn) -> Result<(), Box<actor::ReportIn>> {
        match self.handle.try_send(actor::Msg::Report(Box::new(report))) {
            Ok(()) => Ok(()),
            Err(e) => match e.into_inner() {
                actor::Msg::Report(back) => Err(back),
                _ => unreachable!("the message sent was a report"),
            },
        }
    }
}

/// What the cluster proxy asks: whether a bearer token is a current ManagedServiceAccount
/// token of a cluster, by its hash (the token itself is hashed at once and never kept). Every
/// hub has one, whoever runs the controllers.
///
/// Two KV reads: the token's record (`<cluster>.<hash>`), then its account, which must exist,
/// not be being deleted, and name this token as its current one (its status'
/// `tokenSecretRef.lastRefreshTimestamp` is the record's `issuedAt`; the hub takes only
/// strictly newer tokens, so no two tokens of an account share it). A record left behind — its
/// removal failed, or is still to come — therefore opens nothing.
#[derive(Clone)]
pub struct TokenLookup {
    tokens: Bucket<ServiceAccountTokenRecord>,
    accounts: Bucket<ManagedServiceAccount>,
}

/// A recognised token: whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    /// The cluster.
    pub cluster: String,
    /// The ManagedServiceAccount.
    pub name: String,
    /// The ServiceAccount's namespace on the cluster.
    pub namespace: String,
    /// When the token expires (a session made with it ends then: `kubeproxy::credential`).
    pub expires: SystemTime,
}

impl TokenLookup {
    /// Opens (creating if needed) both buckets.
    pub async fn open(
        js: &async_nats::jetstream::Context,
        opts: StreamOptions,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            tokens: Bucket::open(js, TOKENS, opts).await?,
            accounts: Bucket::open(js, ACCOUNTS, opts).await?,
        })
    }

    /// The owner of `token` when it is the current token of one of `cluster`'s accounts;
    /// `Ok(None)` otherwise (not shaped like a ServiceAccount token, another cluster's,
    /// expired, replaced, its account deleted or being deleted, unknown). A bearer that is not
    /// [`jwt_shaped`](flotilla_bus::serviceaccounts::jwt_shaped) costs no lookup; the lookup is
    /// bounded by [`LOOKUP_TIMEOUT`], and a store that does not answer is an error (the caller
    /// may be a valid account: the proxy answers 503, not 401).
    pub async fn owner(
        &self,
        cluster: &str,
        token: &str,
    ) -> Result<Option<TokenOwner>, LookupError> {
        if !flotilla_bus::serviceaccounts::jwt_shaped(token)
            || flotilla_api::names::validate_dns1123_label("cluster", cluster).is_err()
        {
            return Ok(None);
        }
        tokio::time::timeout(LOOKUP_TIMEOUT, self.find(cluster, token))
            .await
            .map_err(|_| LookupError::TimedOut(LOOKUP_TIMEOUT))?
            .map_err(LookupError::Store)
    }

    async fn find(&self, cluster: &str, token: &str) -> Result<Option<TokenOwner>, StoreError> {
        let hash = flotilla_bus::serviceaccounts::token_hash(token);
        let Some((record, _)) = self.tokens.get(&token_key(cluster, &hash)).await? else {
            return Ok(None);
        };
        let expires = record
            .expiration_timestamp
            .as_ref()
            .map(flotilla_api::meta::system_time);
        let Some(expires) = expires.filter(|t| *t > SystemTime::now()) else {
            return Ok(None);
        };
        if record.cluster_name != cluster {
            return Ok(None);
        }
        let Some((account, _)) = self
            .accounts
            .get(&ObjectRef::new(cluster, &record.name).store_key())
            .await?
        else {
            return Ok(None);
        };
        let deleting = account
            .metadata
            .as_ref()
            .is_none_or(|m| m.deletion_timestamp.is_some());
        let issued = record
            .issued_at
            .as_ref()
            .map(flotilla_api::meta::system_time);
        if deleting || issued.is_none() || rules::refreshed_at(account.status.as_ref()) != issued {
            return Ok(None);
        }
        Ok(Some(TokenOwner {
            cluster: record.cluster_name,
            name: record.name,
            namespace: record.service_account_namespace,
            expires,
        }))
    }
}

/// How long the proxy waits for a token's lookup (two KV reads).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a token could not be looked up.
#[derive(Debug, Error)]
pub enum LookupError {
    /// The store answered with an error.
    #[error("the ManagedServiceAccount token store failed: {0}")]
    Store(#[source] StoreError),
    /// The store did not answer in time.
    #[error("the ManagedServiceAccount token store did not answer within {0:?}")]
    TimedOut(Duration),
}

/// The KV key of a token record.
pub(crate) fn token_key(cluster: &str, hash: &str) -> String {
    format!("{cluster}.{hash}")
}

//! The Kubernetes backend (kube-rs): applies, reads, deletes and lists any kind through the
//! cluster's API, found by discovery, and reports the cluster's facts from the cluster itself.
//!
//! - Kinds are resolved per group/version/kind with a one-group discovery request, cached, and
//!   looked up again when unknown, so a CRD applied earlier in the same work is usable at once.
//! - `ServerSideApply` is an apply patch with the strategy's field manager and `force`; a
//!   conflict is reported with the fields and managers the server names. `Update` reads and
//!   creates or replaces with the live `resourceVersion` (unchanged objects are not written);
//!   `CreateOnly` creates when absent; `ReadOnly` never writes.
//! - Every resource a work would delete gets an owner reference to the work's anchor, an
//!   AppliedManifestWork (as in OCM), so the cluster's garbage collector removes what is left of
//!   a work whose anchor is deleted, and never a resource another work's anchor still owns.
//! - Deletes use `Foreground` propagation, so a resource stays visible until its own dependents
//!   are gone and the work's Foreground deletion waits for all of it.
//! - A work that names an executor (OCM's `spec.executor`, a ServiceAccount) is served as that
//!   ServiceAccount: its writes (server-side apply, update, create), the reads its status,
//!   feedback and applies need, and the deletes of what it owns are made with Kubernetes
//!   impersonation, `Impersonate-User: system:serviceaccount:<ns>:<name>` and no
//!   `Impersonate-Group` (the API server gives a ServiceAccount its groups itself), so the agent
//!   needs `impersonate` on that ServiceAccount and nothing on `groups`. The spoke's RBAC, with
//!   its escalation rules for Roles and bindings, decides what the work may do, not the agent's
//!   own rights; its refusal is reported with the API server's message (an escalation named
//!   as such). One client per executor, at most [`MAX_EXECUTOR_CLIENTS`]: the least recently
//!   used goes, with its watch caches.
//! - A work without an executor is served as the agent itself. Under `flotilla join`'s
//!   least-privilege default the agent may write none of a work's kinds, so such a manifest
//!   fails with the API server's 403, reported verbatim in its `Applied` condition: intended —
//!   the spoke's admin decides through executors what works may do.
//! - The executor is also checked before each manifest is applied (OCM's executor check): one
//!   SubjectAccessReview per verb for the ServiceAccount's user and groups on the manifest's
//!   resource, namespace and name. Impersonated writes are the authority; the review stays
//!   because it refuses, before anything is written and with a message naming the verb, a
//!   manifest its executor could create but not also update, or not delete when the work owns
//!   it (a write alone cannot tell that a later deletion would fail). Allowed answers are cached
//!   for [`ALLOWED_TTL`] (as OCM's executor cache does), so a resync of a large work asks nothing
//!   again; a right revoked meanwhile is refused by the write itself. Denials are not cached, so
//!   a right granted later takes effect on the next apply. The escalation dry run made before
//!   writes were impersonated is gone: the write itself meets RBAC's escalation rules.
//! - Watch caches are per identity: an executor's reads come from a list and watch made as the
//!   executor (it needs `list` and `watch` for that; without them each read is a GET as the
//!   executor).
//! - [`Backend::list`] (what policies judge, the Deployments the add-on supervisor follows) is
//!   served from a cluster-wide list and watch per kind, started on its first list; every event
//!   of those watches is [`Backend::changes`], so policies are evaluated again when what they
//!   judge changes, instead of on a poll.
//! - Cluster facts: `/version`, capacity and allocatable summed over nodes, the node count, the `id.k8s.io`
//!   claim from the kube-system namespace's UID, platform from the nodes' provider IDs, product
//!   from the version string and node labels, health from `/readyz`.
//! - ManagedServiceAccounts ([`serviceaccount`]): the ServiceAccount created, tokens from the
//!   TokenRequest API (the answered expiry is trusted, never the validity asked), and cluster
//!   proxy calls with a caller's token made without the agent's credentials ([`proxy`]).
//! - The cluster proxy's exec, attach and port-forward sessions ([`session`]): the same
//!   upgrade on the API server through kube-rs, as the caller.
//! - Strict validation before a policy writes ([`validate`]): a dry run of the create or
//!   update with `fieldValidation=Strict`, the server's refusal reported verbatim.
//!
//! Modules, one concern each (I/O unless said):
//! - `kinds`: discovery of a group/version/kind, cached; an object's API.
//! - `clients`: the agent's client and the executors' impersonating ones, bounded.
//! - `objects`: reads (watch cache, else the API server), writes by strategy, deletes.
//! - `access`: the executor's SubjectAccessReviews before an apply, allowed answers cached.
//! - `anchor`: the AppliedManifestWork that owns a work's resources.
//! - `listing`: cluster-wide list and watch per kind, and its change signal.
//! - `info`: the cluster's facts; `facts` the pure rules they are computed with.
//! - `cache`: the watch caches; `errors`: the API server's refusals as [`BackendError`]s
//!   (pure); `validate`: the strict dry run; `proxy`, `session`, `serviceaccount` as above.

mod access;
mod anchor;
pub mod cache;
mod clients;
mod errors;
pub mod facts;
mod info;
mod kinds;
mod listing;
mod objects;
pub mod proxy;
pub mod serviceaccount;
pub mod session;
mod validate;

pub use access::ALLOWED_TTL;
pub use anchor::{ANCHOR_API_VERSION, ANCHOR_KIND};
pub use clients::MAX_EXECUTOR_CLIENTS;
pub use errors::parse_conflicts;

use super::{ApplyOutcome, Backend, BackendError, ClusterInfo, Strategy};
use access::AccessKey;
use cache::Cache;
use flotilla_api::work::{Executor, ManifestId};
use kinds::KindKey;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use kube::{Client, Config};
use listing::ListCache;
use objects::CacheKey;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// A cluster reached through its Kubernetes API.
pub struct KubeBackend {
    client: Client,
    kinds: Mutex<HashMap<KindKey, (ApiResource, ApiCapabilities)>>,
    /// Watch caches by identity, kind and namespace.
    caches: Mutex<HashMap<CacheKey, Arc<Cache>>>,
    /// Cluster-wide watch caches of the kinds listed ([`Backend::list`]: what policies judge
    /// and the add-on supervisor follows), by the name they were listed under. Their events
    /// are [`Backend::changes`].
    lists: Mutex<HashMap<String, ListCache>>,
    /// Bumped on every event of a list cache.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// SubjectAccessReviews that allowed, and when they were asked.
    allowed: Mutex<HashMap<AccessKey, Instant>>,
    /// How the agent reaches the cluster, to impersonate executors.
    config: Config,
    /// The cluster proxy's client (request bodies stream through it).
    upstream: proxy::Upstream,
    /// Clients impersonating executors, by user name, with the use that last took each (of
    /// [`KubeBackend::uses`]).
    impersonating: Mutex<HashMap<String, (Client, u64)>>,
    /// Uses of impersonating clients so far: the least recently used has the lowest stamp.
    uses: AtomicU64,
    /// Clients impersonating the cluster proxy's session callers.
    sessions: session::Clients,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend").finish_non_exhaustive()
    }
}

fn unavailable(e: impl std::fmt::Display) -> BackendError {
    BackendError::Unavailable(e.to_string())
}

/// How to reach the cluster: `kubeconfig`, or `KUBECONFIG`/`~/.kube/config`/in-cluster config
/// when `None` (errors name the flag `--kubeconfig`). Installs the process-wide rustls crypto
/// provider (ring) first, which kube-rs needs; shared by the backend and the add-on agents.
pub async fn client_config(kubeconfig: Option<&Path>) -> Result<Config, String> {
    // rustls needs one process-wide crypto provider; the agent uses ring everywhere.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))
        }
        None => Config::infer().await.map_err(|e| {
            format!("no Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster): {e}")
        }),
    }
}

impl KubeBackend {
    /// Connects with `kubeconfig`, or `KUBECONFIG`/`~/.kube/config`/in-cluster config when
    /// `None`.
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, String> {
        let config = client_config(kubeconfig).await?;
        let client =
            Client::try_from(config.clone()).map_err(|e| format!("Kubernetes client: {e}"))?;
        let upstream =
            proxy::Upstream::new(&config).map_err(|e| format!("Kubernetes client: {e}"))?;
        Ok(Self {
            client,
            config,
            upstream,
            impersonating: Mutex::new(HashMap::new()),
            uses: AtomicU64::new(0),
            sessions: session::Clients::default(),
            kinds: Mutex::new(HashMap::new()),
            caches: Mutex::new(HashMap::new()),
            lists: Mutex::new(HashMap::new()),
            changed: Arc::new(tokio::sync::watch::Sender::new(0)),
            allowed: Mutex::new(HashMap::new()),
        })
    }
}

#[async_trait::async_trait]
impl Backend for KubeBackend {
    /// Made on the API server with the agent's client, impersonating whom the hub names.
    async fn serve_api(
        self: Arc<Self>,
        request: super::api::ApiRequest,
    ) -> super::api::ApiResponse {
        proxy::serve(&self.upstream, &self.config, request).await
    }

    /// Opened on the API server with kube-rs ([`session`]).
    async fn open_session(
        self: Arc<Self>,
        request: super::session::SessionRequest,
    ) -> Result<super::session::Session, super::api::ApiResponse> {
        session::open(&self, request).await
    }

    async fn info(&self) -> ClusterInfo {
        info::gather(&self.client).await
    }

    async fn apply(
        &self,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        self.apply_as(None, id, object, strategy).await
    }

    async fn apply_as(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        self.write(executor, id, object, strategy).await
    }

    /// A dry run on the API server with `fieldValidation=Strict` ([`validate`]).
    async fn validate(
        &self,
        id: &ManifestId,
        object: &Value,
        create: bool,
    ) -> Result<(), BackendError> {
        let (resource, caps) = self.resolve(&id.group, &id.version, &id.kind).await?;
        validate::dry_run(&self.client, &resource, &caps.scope, id, object, create).await
    }

    async fn follow(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
        signal: &crate::backend::DriftSignal,
    ) {
        match self.cache(id, executor).await {
            Ok(cache) => cache.follow(&id.name, signal.downgrade()),
            Err(e) => tracing::debug!(resource = %id.describe(), error = %e, "not following"),
        }
    }

    async fn authorize(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
        _object: &Value,
        verbs: &[&'static str],
    ) -> Result<(), BackendError> {
        self.check_access(executor, id, verbs).await
    }

    async fn get(&self, id: &ManifestId) -> Result<Option<Value>, BackendError> {
        self.get_object(id, None).await
    }

    async fn get_as(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
    ) -> Result<Option<Value>, BackendError> {
        self.get_object(id, executor).await
    }

    async fn delete(&self, id: &ManifestId) -> Result<bool, BackendError> {
        self.delete_as(None, id).await
    }

    async fn delete_as(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
    ) -> Result<bool, BackendError> {
        self.delete_object(executor, id).await
    }

    async fn ensure_anchor(
        &self,
        work_resource_id: &str,
        work_name: &str,
    ) -> Result<Option<Value>, BackendError> {
        self.make_anchor(work_resource_id, work_name).await
    }

    async fn delete_anchor(
        &self,
        work_resource_id: &str,
        orphan: bool,
    ) -> Result<(), BackendError> {
        self.remove_anchor(work_resource_id, orphan).await
    }

    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.changed.subscribe())
    }

    async fn ensure_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), BackendError> {
        serviceaccount::ensure(&self.client, namespace, name).await
    }

    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        validity: Duration,
    ) -> Result<super::IssuedToken, BackendError> {
        serviceaccount::token(&self.client, namespace, name, validity).await
    }

    async fn delete_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<bool, BackendError> {
        serviceaccount::delete(&self.client, namespace, name).await
    }

    /// From discovery ([`KubeBackend::discover`]).
    async fn served(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<super::Scope>, BackendError> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Ok(self
            .discover(group, version, kind)
            .await?
            .map(|(_, caps)| match caps.scope {
                Scope::Namespaced => super::Scope::Namespaced,
                Scope::Cluster => super::Scope::Cluster,
            }))
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>, BackendError> {
        self.list_from(None, kind, namespace).await
    }

    async fn list_in_group(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, BackendError> {
        self.list_from(Some(group), kind, namespace).await
    }
}

#[cfg(test)]
mod tests;

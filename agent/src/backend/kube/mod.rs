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

pub mod cache;
mod errors;
pub mod facts;
pub mod proxy;
pub mod serviceaccount;
pub mod session;
mod validate;

pub use errors::parse_conflicts;
use errors::{map_error, write_error};

use facts::{platform, product, sum_quantities};

use super::{ApplyOutcome, Backend, BackendError, ClusterInfo, Strategy};
use cache::Cache;
use flotilla_api::work::{Executor, ManifestId};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Client, Config};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Group, version and kind.
type KindKey = (String, String, String);

/// How long a SubjectAccessReview that allowed an executor is trusted (by the pre-check; the
/// write, made as the executor, is judged anew by the API server).
pub const ALLOWED_TTL: Duration = Duration::from_secs(300);
/// Executors with a client of their own kept at once; the least recently used goes first.
pub const MAX_EXECUTOR_CLIENTS: usize = 64;
/// Cached answers beyond which expired ones are dropped.
const ACCESS_CACHE_PRUNE: usize = 10_000;

/// The group of the kinds whose writing can escalate rights.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What the API server's refusal of a Role or binding that grants more than its writer holds
/// says (RBAC's escalation check).
const ESCALATION_REFUSED: &str = "attempting to grant RBAC permissions not currently held";

/// Whether writing an object of this plural resource of [`RBAC_GROUP`] can grant rights.
fn escalates(plural: &str) -> bool {
    matches!(
        plural,
        "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
    )
}

/// One question to the authorizer: user, verb, group, resource, namespace, name.
type AccessKey = (String, &'static str, String, String, String, String);

/// A watch cache's key: the identity it reads as (the executor's user name, `""` for the
/// agent), the kind, and the namespace (`""` for cluster-scoped kinds).
type CacheKey = (String, KindKey, String);

/// The user name requests for `executor` go as; `""` for the agent itself.
fn identity(executor: Option<&Executor>) -> String {
    executor.map(Executor::username).unwrap_or_default()
}

/// The anchor of a work's resources: OCM's cluster-scoped AppliedManifestWork, whose CRD the
/// install manifests (`flotilla join`) carry.
pub const ANCHOR_API_VERSION: &str = "work.open-cluster-management.io/v1";
/// Kind of the anchor.
pub const ANCHOR_KIND: &str = "AppliedManifestWork";

/// The anchor of the work with this resource id (named after it, as OCM names them after the
/// hub and the work).
fn anchor_id(work_resource_id: &str) -> ManifestId {
    ManifestId {
        group: "work.open-cluster-management.io".into(),
        version: "v1".into(),
        kind: ANCHOR_KIND.into(),
        namespace: String::new(),
        name: format!("flotilla-{work_resource_id}"),
    }
}

/// A cluster-wide watch cache of one kind, with the kind's API resource and scope.
type ListCache = (ApiResource, Scope, Arc<Cache>);

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

    /// The cluster-wide watch cache of the kind `query` names (started on first use: kind
    /// resolved by discovery, then listed and watched), or `NotFound` when the cluster serves
    /// no such kind. Its events bump [`KubeBackend::changed`].
    async fn list_cache(
        &self,
        group: Option<&str>,
        query: &str,
    ) -> Result<ListCache, BackendError> {
        let name = match group {
            Some(g) => format!("{g}/{}", query.to_ascii_lowercase()),
            None => query.to_ascii_lowercase(),
        };
        if let Some(found) = self.lists.lock().expect("lists lock").get(&name) {
            return Ok(found.clone());
        }
        let discovery = discovery::Discovery::new(self.client.clone())
            .run()
            .await
            .map_err(unavailable)?;
        let found = discovery
            .groups()
            .filter(|g| group.is_none_or(|want| g.name() == want))
            .find_map(|g| {
                g.recommended_resources().into_iter().find(|(ar, _)| {
                    super::kind_matches(query, &ar.kind) || ar.plural.eq_ignore_ascii_case(query)
                })
            });
        let Some((ar, caps)) = found else {
            return Err(BackendError::NotFound(match group {
                Some(g) => {
                    format!("the cluster serves no kind or resource named {query:?} in group {g:?}")
                }
                None => format!("the cluster serves no kind or resource named {query:?}"),
            }));
        };
        let mut lists = self.lists.lock().expect("lists lock");
        let entry = lists.entry(name).or_insert_with(|| {
            let cache = Arc::new(Cache::across_namespaces());
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            cache::spawn(api, &cache, Some(self.changed.clone()));
            (ar, caps.scope, cache)
        });
        Ok(entry.clone())
    }

    /// The API resource of a group/version/kind: cached, or discovered now.
    async fn resolve(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), BackendError> {
        self.discover(group, version, kind).await?.ok_or_else(|| {
            BackendError::Invalid(format!(
                "the cluster serves no {kind} in {}",
                if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                }
            ))
        })
    }

    /// [`KubeBackend::resolve`], `None` when the API server does not serve the group version
    /// (404) or the group version has no such kind. Found kinds are cached; a kind not served
    /// is asked again next time (its CRD may have been installed since).
    async fn discover(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Option<(ApiResource, ApiCapabilities)>, BackendError> {
        let key = (group.to_string(), version.to_string(), kind.to_string());
        if let Some(found) = self.kinds.lock().expect("kinds lock").get(&key) {
            return Ok(Some(found.clone()));
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        match discovery::pinned_kind(&self.client, &gvk).await {
            Ok(found) => {
                self.kinds
                    .lock()
                    .expect("kinds lock")
                    .insert(key, found.clone());
                Ok(Some(found))
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(kube::Error::Discovery(e)) => {
                tracing::debug!(%kind, %group, %version, error = %e, "kind not served");
                Ok(None)
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The client whose requests go as `executor` (impersonating it), or as the agent for
    /// `None`.
    fn client_as(&self, executor: Option<&Executor>) -> Result<Client, BackendError> {
        let Some(executor) = executor else {
            return Ok(self.client.clone());
        };
        let user = executor.username();
        let stamp = self.uses.fetch_add(1, Ordering::Relaxed);
        if let Some((client, used)) = self
            .impersonating
            .lock()
            .expect("clients lock")
            .get_mut(&user)
        {
            *used = stamp;
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        // The user alone: the API server adds a ServiceAccount's groups itself, so the agent
        // needs no right to impersonate groups.
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups = None;
        let client = Client::try_from(config).map_err(unavailable)?;
        let (client, evicted) = {
            let mut clients = self.impersonating.lock().expect("clients lock");
            let evicted = if clients.len() >= MAX_EXECUTOR_CLIENTS && !clients.contains_key(&user) {
                let oldest = clients
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(u, _)| u.clone());
                oldest.inspect(|u| {
                    clients.remove(u);
                })
            } else {
                None
            };
            let (client, _) = clients.entry(user).or_insert((client, stamp));
            (client.clone(), evicted)
        };
        if let Some(gone) = evicted {
            // Its watch caches go with it (their tasks end once the caches are dropped).
            self.caches
                .lock()
                .expect("caches lock")
                .retain(|(who, _, _), _| *who != gone);
        }
        Ok(client)
    }

    /// The object's API, with requests going as `executor` (the agent for `None`).
    async fn api(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Api<DynamicObject>, BackendError> {
        let (ar, caps) = self.resolve(&id.group, &id.version, &id.kind).await?;
        let client = self.client_as(executor)?;
        Ok(match caps.scope {
            Scope::Namespaced => {
                let ns = if id.namespace.is_empty() {
                    "default"
                } else {
                    &id.namespace
                };
                Api::namespaced_with(client, ns, &ar)
            }
            Scope::Cluster => Api::all_with(client, &ar),
        })
    }

    /// The watch cache of the object's kind and namespace as `executor` sees them, started on
    /// first use.
    async fn cache(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Arc<Cache>, BackendError> {
        let (_, caps) = self.resolve(&id.group, &id.version, &id.kind).await?;
        let namespace = match caps.scope {
            Scope::Namespaced if id.namespace.is_empty() => "default".to_string(),
            Scope::Namespaced => id.namespace.clone(),
            Scope::Cluster => String::new(),
        };
        let key = (
            identity(executor),
            (id.group.clone(), id.version.clone(), id.kind.clone()),
            namespace,
        );
        if let Some(c) = self.caches.lock().expect("caches lock").get(&key) {
            return Ok(c.clone());
        }
        let api = self.api(id, executor).await?;
        let mut caches = self.caches.lock().expect("caches lock");
        let cache = caches.entry(key).or_insert_with(|| {
            let c = Arc::new(Cache::default());
            cache::spawn(api, &c, None);
            c
        });
        Ok(cache.clone())
    }

    /// Reads an object as `executor`: from its watch cache once synced, else from the API
    /// server.
    async fn get_object(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Option<Value>, BackendError> {
        if let Some(found) = self.cache(id, executor).await?.get(&id.name) {
            return Ok(found);
        }
        self.get_live(id, executor).await
    }

    /// Reads an object from the API server as `executor`, bypassing the cache.
    async fn get_live(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Option<Value>, BackendError> {
        let api = self.api(id, executor).await?;
        match api.get_opt(&id.name).await {
            Ok(Some(o)) => serde_json::to_value(o)
                .map(Some)
                .map_err(|e| BackendError::Invalid(e.to_string())),
            Ok(None) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }
}

impl KubeBackend {
    /// Asks the API server whether `executor` may `verb` the resource (a SubjectAccessReview);
    /// `Err(reason)` when it may not.
    async fn review(
        &self,
        executor: &Executor,
        verb: &str,
        attributes: &ResourceAttributes,
    ) -> Result<Result<(), String>, BackendError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(executor.username()),
                groups: Some(executor.groups()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.to_string()),
                    ..attributes.clone()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| match e {
                kube::Error::Api(r) if r.code == 403 => BackendError::Forbidden(format!(
                    "the agent may not create SubjectAccessReviews to check the executor: {}",
                    r.message
                )),
                e => map_error(e),
            })?;
        let status = answer.status.unwrap_or_default();
        if status.allowed && !status.denied.unwrap_or(false) {
            Ok(Ok(()))
        } else {
            Ok(Err(status
                .reason
                .filter(|r| !r.is_empty())
                .or(status.evaluation_error.filter(|e| !e.is_empty()))
                .unwrap_or_default()))
        }
    }

    /// Puts what the server answered to a write as `executor` into that identity's cache.
    async fn remember(&self, id: &ManifestId, executor: Option<&Executor>, object: DynamicObject) {
        if let (Ok(cache), Ok(v)) = (self.cache(id, executor).await, serde_json::to_value(object)) {
            cache.put(v);
        }
    }
}

/// Whether every field `declared` sets has the same value in `live` (status and server-set
/// metadata ignored).
fn declared_matches(declared: &Value, live: &Value) -> bool {
    match (declared, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, v)| {
            if matches!(k.as_str(), "status") {
                return true;
            }
            l.get(k).is_some_and(|lv| declared_matches(v, lv))
        }),
        (d, l) => d == l,
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
        let mut info = ClusterInfo {
            healthy: true,
            ..ClusterInfo::default()
        };
        match self.client.apiserver_version().await {
            Ok(v) => info.kubernetes_version = v.git_version,
            Err(e) => {
                info.healthy = false;
                info.health_message = format!("the API server does not answer: {e}");
                return info;
            }
        }
        let ready = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| e.to_string());
        match ready {
            Ok(req) => match self.client.request_text(req).await {
                Ok(body) if body.trim() == "ok" || body.contains("passed") => {}
                Ok(body) => {
                    info.healthy = false;
                    info.health_message = format!("/readyz: {}", body.trim());
                }
                Err(e) => {
                    info.healthy = false;
                    info.health_message = format!("/readyz: {e}");
                }
            },
            Err(e) => info.health_message = e,
        }
        let nodes: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
        );
        if let Ok(list) = nodes.list(&ListParams::default()).await {
            let objects: Vec<Value> = list
                .items
                .into_iter()
                .filter_map(|n| serde_json::to_value(n).ok())
                .collect();
            info.nodes = u32::try_from(objects.len()).ok();
            for (field, into) in [
                ("capacity", &mut info.capacity),
                ("allocatable", &mut info.allocatable),
            ] {
                for resource in ["cpu", "memory", "pods", "ephemeral-storage"] {
                    let values: Vec<&str> = objects
                        .iter()
                        .filter_map(|n| n["status"][field][resource].as_str())
                        .collect();
                    if !values.is_empty() {
                        into.insert(
                            resource.to_string(),
                            sum_quantities(
                                &values,
                                resource == "memory" || resource == "ephemeral-storage",
                            ),
                        );
                    }
                }
            }
            info.platform = objects
                .iter()
                .filter_map(|n| n["spec"]["providerID"].as_str())
                .map(platform)
                .next()
                .unwrap_or("Other")
                .to_string();
            let labels: Vec<&serde_json::Map<String, Value>> = objects
                .iter()
                .filter_map(|n| n["metadata"]["labels"].as_object())
                .collect();
            info.product = product(&info.kubernetes_version, &labels).to_string();
        }
        let namespaces: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        );
        if let Ok(ns) = namespaces.get("kube-system").await
            && let Some(uid) = ns.metadata.uid
        {
            info.cluster_id = uid;
        }
        info
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
        let api = self.api(id, executor).await?;
        match strategy {
            Strategy::ReadOnly => Ok(ApplyOutcome::Skipped),
            Strategy::ServerSideApply {
                force,
                field_manager,
            } => {
                let before = self.get_live(id, executor).await?;
                let mut params = PatchParams::apply(field_manager);
                params.force = *force;
                let after = api
                    .patch(&id.name, &params, &Patch::Apply(object))
                    .await
                    .map_err(|e| write_error(executor, id, "patch", e))?;
                let after = serde_json::to_value(after).unwrap_or_default();
                self.cache(id, executor).await?.put(after.clone());
                Ok(match before {
                    None => ApplyOutcome::Created,
                    Some(b)
                        if b["metadata"]["resourceVersion"]
                            == after["metadata"]["resourceVersion"] =>
                    {
                        ApplyOutcome::Unchanged
                    }
                    Some(_) => ApplyOutcome::Updated,
                })
            }
            Strategy::CreateOnly | Strategy::Update => {
                let live = self.get_live(id, executor).await?;
                let typed: DynamicObject = serde_json::from_value(object.clone())
                    .map_err(|e| BackendError::Invalid(e.to_string()))?;
                match live {
                    None => {
                        let created = api
                            .create(&PostParams::default(), &typed)
                            .await
                            .map_err(|e| write_error(executor, id, "create", e))?;
                        self.remember(id, executor, created).await;
                        Ok(ApplyOutcome::Created)
                    }
                    Some(_) if *strategy == Strategy::CreateOnly => Ok(ApplyOutcome::Skipped),
                    Some(live) if declared_matches(object, &live) => Ok(ApplyOutcome::Unchanged),
                    Some(live) => {
                        let mut next = typed;
                        next.metadata.resource_version = live["metadata"]["resourceVersion"]
                            .as_str()
                            .map(str::to_string);
                        // Owners other works (or others) set stay: a shared resource keeps
                        // every work's anchor.
                        let live_owners: Vec<
                            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
                        > = serde_json::from_value(live["metadata"]["ownerReferences"].clone())
                            .unwrap_or_default();
                        let mut owners = next.metadata.owner_references.take().unwrap_or_default();
                        for o in live_owners {
                            if !owners.iter().any(|x| x.uid == o.uid) {
                                owners.push(o);
                            }
                        }
                        next.metadata.owner_references = (!owners.is_empty()).then_some(owners);
                        let replaced = api
                            .replace(&id.name, &PostParams::default(), &next)
                            .await
                            .map_err(|e| write_error(executor, id, "update", e))?;
                        self.remember(id, executor, replaced).await;
                        Ok(ApplyOutcome::Updated)
                    }
                }
            }
        }
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
        let Some(executor) = executor else {
            return Ok(());
        };
        let (ar, caps) = &self.resolve(&id.group, &id.version, &id.kind).await?;
        let namespace = match caps.scope {
            Scope::Namespaced if id.namespace.is_empty() => "default".to_string(),
            Scope::Namespaced => id.namespace.clone(),
            Scope::Cluster => String::new(),
        };
        let attributes = ResourceAttributes {
            group: Some(id.group.clone()),
            version: Some(id.version.clone()),
            resource: Some(ar.plural.clone()),
            namespace: Some(namespace.clone()),
            name: Some(id.name.clone()),
            ..ResourceAttributes::default()
        };
        let user = executor.username();
        for verb in verbs {
            let key: AccessKey = (
                user.clone(),
                verb,
                id.group.clone(),
                ar.plural.clone(),
                namespace.clone(),
                id.name.clone(),
            );
            let fresh = self
                .allowed
                .lock()
                .expect("access cache lock")
                .get(&key)
                .is_some_and(|at| at.elapsed() < ALLOWED_TTL);
            if fresh {
                continue;
            }
            match self.review(executor, verb, &attributes).await? {
                Ok(()) => {
                    let mut allowed = self.allowed.lock().expect("access cache lock");
                    if allowed.len() >= ACCESS_CACHE_PRUNE {
                        allowed.retain(|_, at| at.elapsed() < ALLOWED_TTL);
                    }
                    allowed.insert(key, Instant::now());
                }
                Err(reason) => {
                    let resource = if id.group.is_empty() {
                        ar.plural.clone()
                    } else {
                        format!("{}.{}", ar.plural, id.group)
                    };
                    let scope = if namespace.is_empty() {
                        "(cluster-scoped)".to_string()
                    } else {
                        format!("in namespace {namespace}")
                    };
                    return Err(BackendError::Forbidden(format!(
                        "the executor {user} lacks permission to {verb} {resource} {:?} {scope}{}",
                        id.name,
                        if reason.is_empty() {
                            String::new()
                        } else {
                            format!(" ({reason})")
                        }
                    )));
                }
            }
        }
        Ok(())
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
        let api = self.api(id, executor).await?;
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..DeleteParams::default()
        };
        match api.delete(&id.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(r)) if r.code == 404 => Ok(false),
            Err(e) => Err(map_error(e)),
        }
    }

    async fn ensure_anchor(
        &self,
        work_resource_id: &str,
        work_name: &str,
    ) -> Result<Option<Value>, BackendError> {
        let id = anchor_id(work_resource_id);
        let anchor = match self.get_live(&id, None).await {
            Ok(Some(a)) => a,
            Ok(None) => {
                let api = self.api(&id, None).await?;
                let object: DynamicObject = serde_json::from_value(serde_json::json!({
                    "apiVersion": ANCHOR_API_VERSION,
                    "kind": ANCHOR_KIND,
                    "metadata": {"name": id.name},
                    "spec": {"manifestWorkName": work_name, "agentID": "flotilla"},
                }))
                .map_err(|e| BackendError::Invalid(e.to_string()))?;
                let created = api
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(map_error)?;
                serde_json::to_value(created).map_err(|e| BackendError::Invalid(e.to_string()))?
            }
            // No AppliedManifestWork CRD on this cluster: resources get no owner.
            Err(BackendError::Invalid(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(serde_json::json!({
            "apiVersion": ANCHOR_API_VERSION,
            "kind": ANCHOR_KIND,
            "name": id.name,
            "uid": anchor["metadata"]["uid"],
        })))
    }

    async fn delete_anchor(
        &self,
        work_resource_id: &str,
        orphan: bool,
    ) -> Result<(), BackendError> {
        let id = anchor_id(work_resource_id);
        let api = match self.api(&id, None).await {
            Ok(api) => api,
            Err(BackendError::Invalid(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let params = DeleteParams {
            propagation_policy: Some(if orphan {
                PropagationPolicy::Orphan
            } else {
                PropagationPolicy::Background
            }),
            ..DeleteParams::default()
        };
        match api.delete(&id.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
            Err(e) => Err(map_error(e)),
        }
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

impl KubeBackend {
    /// Lists a kind from the first group serving it, or from `group` only.
    async fn list_from(
        &self,
        group: Option<&str>,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, BackendError> {
        let (ar, scope, cache) = self.list_cache(group, kind).await?;
        // A cluster-scoped kind has no namespaces to choose from.
        let namespace = namespace.filter(|_| scope == Scope::Namespaced);
        let typed = |mut v: Value| {
            v["apiVersion"] = Value::String(ar.api_version.clone());
            v["kind"] = Value::String(ar.kind.clone());
            v
        };
        // From the watch cache once it has listed; until then from the API server.
        if let Some(all) = cache.list() {
            return Ok(all
                .into_iter()
                .filter(|o| {
                    namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns))
                })
                .map(typed)
                .collect());
        }
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let list = api.list(&ListParams::default()).await.map_err(map_error)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .map(typed)
            .collect())
    }
}

#[cfg(test)]
mod tests;

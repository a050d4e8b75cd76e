//! The local cluster an agent manages. [`sim::SimBackend`] simulates one in memory (optionally
//! persisted to a file) for the simulator and tests; a Kubernetes backend (kube-rs, server-side
//! apply) implements the same trait for real spokes.
//!
//! Calls are async: the simulated cluster answers from memory at once, the Kubernetes backend
//! over HTTP.
//!
//! A work's manifests are written, read and deleted through the `*_as` calls
//! ([`Backend::apply_as`], [`Backend::get_as`], [`Backend::delete_as`]) naming the work's
//! executor: a backend with access control acts as that identity, so the cluster's own
//! authorizer bounds what a work may do. The plain calls are the agent's own identity, for what
//! the agent does for itself (managed namespaces, add-on credentials, proxy reads).
//!
//! The cluster proxy hands whole Kubernetes API requests to [`Backend::serve_api`] ([`api`]):
//! the Kubernetes backend makes them on its API server, the simulated cluster answers them
//! from its objects ([`sim_api`]). Its exec, attach and port-forward sessions go to
//! [`Backend::open_session`] ([`session`]).

pub mod api;
pub mod kube;
pub mod session;
pub mod sim;
pub mod sim_api;
pub mod sim_container;

use flotilla_api::work::{Executor, ManifestId};
use serde_json::Value;
use std::collections::HashMap;
use thiserror::Error;

/// What the agent reports about its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterInfo {
    /// Capacity (`cpu`, `memory`, `pods`, …) in Kubernetes quantities.
    pub capacity: HashMap<String, String>,
    /// Allocatable resources.
    pub allocatable: HashMap<String, String>,
    /// Kubernetes version (`v1.30.2`).
    pub kubernetes_version: String,
    /// Value of the `platform.open-cluster-management.io` claim.
    pub platform: String,
    /// Value of the `product.open-cluster-management.io` claim.
    pub product: String,
    /// Whether the cluster's control plane is healthy.
    pub healthy: bool,
    /// Why it is unhealthy.
    pub health_message: String,
    /// Number of nodes, when the backend knows it (the `nodes.flotilla.io` claim).
    pub nodes: Option<u32>,
    /// The cluster's own identity for the `id.k8s.io` claim (the kube-system namespace's UID);
    /// empty when the backend has none and the agent's generated id is used.
    pub cluster_id: String,
}

/// How a manifest is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Create, or replace what the work declares (the default).
    Update,
    /// Create if missing; never change an existing resource.
    CreateOnly,
    /// Server-side apply with field ownership.
    ServerSideApply {
        /// Take ownership of fields another manager owns.
        force: bool,
        /// Field manager name.
        field_manager: String,
    },
    /// Never write; only observe.
    ReadOnly,
}

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The resource was created.
    Created,
    /// The resource was changed.
    Updated,
    /// The resource already matched.
    Unchanged,
    /// Nothing was written (CreateOnly on an existing resource, ReadOnly).
    Skipped,
}

/// A ServiceAccount token as the cluster issued it.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The token.
    pub token: String,
    /// When the cluster says it expires (clouds cap lifetimes: never the validity asked).
    pub expires: std::time::SystemTime,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("token", &"<redacted>")
            .field("expires", &self.expires)
            .finish()
    }
}

/// A backend call that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BackendError {
    /// The resource (or its namespace) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Server-side apply conflict: fields owned by another manager.
    #[error("apply conflict: fields {fields:?} are owned by {manager:?}; use force to take them")]
    Conflict {
        /// The conflicting fields.
        fields: Vec<String>,
        /// Their owner.
        manager: String,
    },
    /// The cluster refused the object.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The cluster could not be reached.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Not allowed: the cluster's API server refused the request (its message, verbatim), or a
    /// SubjectAccessReview said the work's executor may not.
    #[error("forbidden: {0}")]
    Forbidden(String),
}

/// The verbs OCM's work agent checks an executor for before applying a manifest: what an apply
/// may need, plus `delete` when the work owns the resource (its delete option would delete it),
/// so that a later deletion never needs a right the executor lacked. A `ReadOnly` manifest is
/// only read, so only `get` is checked (OCM checks the write verbs for it too).
pub fn executor_verbs(strategy: &Strategy, owned: bool) -> Vec<&'static str> {
    if *strategy == Strategy::ReadOnly {
        return vec!["get"];
    }
    let mut verbs = vec!["create", "update", "patch", "get"];
    if owned {
        verbs.push("delete");
    }
    verbs
}

/// Whether a kind's objects live in namespaces ([`Backend::served`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Objects live in a namespace.
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

/// A client of the cluster's API following its changes ([`Backend::follow_api`]); dropping it
/// ends the following.
pub struct ApiFollow {
    /// Bumped on every change.
    pub changes: tokio::sync::watch::Receiver<u64>,
    /// Whatever the backend keeps alive while the client follows.
    pub _held: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// A cluster the agent observes and applies work to.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The cluster's current facts.
    async fn info(&self) -> ClusterInfo;
    /// Writes one object with a strategy.
    async fn apply(
        &self,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError>;
    /// Reads one object (with its status), `None` when absent.
    async fn get(&self, id: &ManifestId) -> Result<Option<Value>, BackendError>;
    /// Deletes one object; `Ok(false)` when it was already gone.
    async fn delete(&self, id: &ManifestId) -> Result<bool, BackendError>;
    /// Writes one object for a work as its `executor` (`None`: the agent's own identity). A
    /// backend with access control makes the request as that identity, so the cluster, not the
    /// agent's rights, decides whether the work may; a backend without (the simulated cluster)
    /// writes as [`Backend::apply`] does, which is the default.
    async fn apply_as(
        &self,
        _executor: Option<&Executor>,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        self.apply(id, object, strategy).await
    }
    /// Reads one object for a work as its `executor` (status, feedback, what an apply compares
    /// with); [`Backend::get`] by default.
    async fn get_as(
        &self,
        _executor: Option<&Executor>,
        id: &ManifestId,
    ) -> Result<Option<Value>, BackendError> {
        self.get(id).await
    }
    /// Deletes one object a work owns as its `executor`, so a work never deletes what its
    /// executor could not; [`Backend::delete`] by default.
    async fn delete_as(
        &self,
        _executor: Option<&Executor>,
        id: &ManifestId,
    ) -> Result<bool, BackendError> {
        self.delete(id).await
    }
    /// Whether the work's `executor` may do each of `verbs` to `id` (whose manifest is
    /// `object`), checked before the agent applies a manifest (OCM's executor check), so that a
    /// manifest its executor could not also update or delete later is refused up front with a
    /// message naming what is missing. `None` is the agent's own identity. A refusal is
    /// [`BackendError::Forbidden`] naming the verb, the resource and the executor. Allowed by
    /// default: a backend without access control (the simulated cluster) treats every executor
    /// as allowed.
    async fn authorize(
        &self,
        _executor: Option<&Executor>,
        _id: &ManifestId,
        _object: &Value,
        _verbs: &[&'static str],
    ) -> Result<(), BackendError> {
        Ok(())
    }
    /// Whether the cluster would accept `object` as `id` under strict field validation, writing
    /// nothing: a create when `create`, else an update of the existing object. A field its kind
    /// does not define is [`BackendError::Invalid`] in the API server's words (`Deployment in
    /// version "v1" cannot be handled as a Deployment: strict decoding error: unknown field
    /// "spec.replcas"`) — what OCM's policy controller asks before it writes. The Kubernetes
    /// backend makes a dry run on its API server (`dryRun=All&fieldValidation=Strict`); the
    /// simulated cluster checks the built-in kinds' fields
    /// ([`flotilla_kubemem::schema`]). Accepted by default.
    async fn validate(
        &self,
        _id: &ManifestId,
        _object: &Value,
        _create: bool,
    ) -> Result<(), BackendError> {
        Ok(())
    }
    /// The AddOnPlacementScores this cluster reports: `(resource name, scores)`. None by default.
    fn scores(&self) -> Vec<(String, Vec<flotilla_api::v1::AddOnPlacementScoreItem>)> {
        Vec::new()
    }
    /// A signal that the cluster's objects changed (its value is a change counter), for
    /// watchers that would otherwise poll [`Backend::list`] — policies and the in-process
    /// add-on supervisor. The simulated cluster signals every change to its store; the
    /// Kubernetes backend every event of the watches behind [`Backend::list`] (the kinds
    /// listed so far). `None` (the default): no signal, poll.
    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// [`Backend::changes`] for a client of the cluster's API (a watch, a followed log through
    /// the proxy), who also wants to hear of status that changes without a write (the simulated
    /// cluster's readiness). By default the same signal.
    fn follow_api(&self) -> Option<ApiFollow> {
        self.changes().map(|changes| ApiFollow {
            changes,
            _held: None,
        })
    }

    /// Bumps `signal` whenever someone else changes or deletes `id` on the cluster (as
    /// `executor` sees it), so a work repairs drift when it happens rather than at its next
    /// periodic re-apply. The agent's own writes do not bump it. Following again is harmless;
    /// dropping the signal's receiver ends it. The Kubernetes backend follows through its watch
    /// caches; by default nothing is followed (the periodic re-apply still repairs).
    async fn follow(&self, _executor: Option<&Executor>, _id: &ManifestId, _signal: &DriftSignal) {}

    /// Serves one Kubernetes API request of the cluster proxy (`flotilla-hub
    /// --cluster-proxy-listen`), streaming the response; a backend that cannot answers 501.
    async fn serve_api(self: std::sync::Arc<Self>, _request: api::ApiRequest) -> api::ApiResponse {
        api::ApiResponse::status(
            http::StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            "this cluster's backend does not serve the Kubernetes API",
        )
    }

    /// Opens an exec, attach or port-forward session of the cluster proxy; a refusal is the
    /// answer to the client's upgrade (a `Status`). A backend that cannot answers 501.
    async fn open_session(
        self: std::sync::Arc<Self>,
        _request: session::SessionRequest,
    ) -> Result<session::Session, api::ApiResponse> {
        Err(session::not_served())
    }

    /// Creates the ServiceAccount `namespace/name` of a ManagedServiceAccount (and its
    /// namespace) unless it exists.
    async fn ensure_service_account(
        &self,
        namespace: &str,
        _name: &str,
    ) -> Result<(), BackendError> {
        Err(BackendError::Invalid(format!(
            "this cluster's backend issues no ServiceAccount tokens (namespace {namespace})"
        )))
    }
    /// Requests a token of the ServiceAccount valid for `validity` (the TokenRequest API's
    /// `expirationSeconds`); the cluster may grant less: the answer's expiry is what counts.
    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        _validity: std::time::Duration,
    ) -> Result<IssuedToken, BackendError> {
        Err(BackendError::Invalid(format!(
            "this cluster's backend issues no ServiceAccount tokens ({namespace}/{name})"
        )))
    }
    /// Deletes the ServiceAccount (its tokens stop working); false when it was not there.
    async fn delete_service_account(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> Result<bool, BackendError> {
        Ok(false)
    }

    /// Whether the cluster serves `kind` in exactly `api_version` (`batch/v1beta1`), and its
    /// scope; `Ok(None)` when it does not — a version its Kubernetes release removed, a CRD not
    /// installed — which OCM reports as `couldn't find mapping resource …`. The simulated
    /// cluster answers from `flotilla-kubemem`'s table for the version it reports plus its
    /// CRDs, the Kubernetes backend from discovery. By default every kind is served (scope as
    /// [`flotilla_api::work::is_cluster_scoped`] guesses it).
    async fn served(&self, api_version: &str, kind: &str) -> Result<Option<Scope>, BackendError> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Ok(Some(
            if flotilla_api::work::is_cluster_scoped(group, kind) {
                Scope::Cluster
            } else {
                Scope::Namespaced
            },
        ))
    }

    /// Lists objects of a kind (matched case-insensitively against kind, plural resource or
    /// short name), optionally in one namespace.
    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>, BackendError>;
    /// Lists objects of a kind served by one API group only (`""`: the core group), so that
    /// two groups' kinds of one name (`cluster.x-k8s.io` Clusters and another group's) are
    /// never confused. The default filters [`Backend::list`] by each object's `apiVersion`.
    async fn list_in_group(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, BackendError> {
        Ok(self
            .list(kind, namespace)
            .await?
            .into_iter()
            .filter(|o| group_of(o) == group)
            .collect())
    }
    /// The anchor of a work's resources on the cluster, created if missing: an owner reference
    /// the agent adds to every resource the work would delete. `None` when the backend has no
    /// garbage collector (the simulated cluster).
    async fn ensure_anchor(
        &self,
        _work_resource_id: &str,
        _work_name: &str,
    ) -> Result<Option<Value>, BackendError> {
        Ok(None)
    }
    /// Removes a work's anchor once its resources were handled; `orphan` keeps what it still
    /// owns on the cluster.
    async fn delete_anchor(
        &self,
        _work_resource_id: &str,
        _orphan: bool,
    ) -> Result<(), BackendError> {
        Ok(())
    }
}

/// A work's signal that one of its objects was changed on the cluster by someone else
/// ([`Backend::follow`]); its value counts the changes. Backends hold it weakly.
#[derive(Debug, Clone)]
pub struct DriftSignal(std::sync::Arc<tokio::sync::watch::Sender<u64>>);

impl DriftSignal {
    /// A signal and the receiver its owner waits on.
    pub fn new() -> (Self, tokio::sync::watch::Receiver<u64>) {
        let (tx, rx) = tokio::sync::watch::channel(0);
        (Self(std::sync::Arc::new(tx)), rx)
    }

    /// A handle that does not keep the signal alive.
    pub fn downgrade(&self) -> WeakDriftSignal {
        WeakDriftSignal(std::sync::Arc::downgrade(&self.0))
    }
}

/// A [`DriftSignal`] held by a backend: bumping it after its owner is gone does nothing.
#[derive(Debug, Clone)]
pub struct WeakDriftSignal(std::sync::Weak<tokio::sync::watch::Sender<u64>>);

impl WeakDriftSignal {
    /// Bumps the signal; `false` when its owner is gone (drop this handle).
    pub fn bump(&self) -> bool {
        match self.0.upgrade() {
            Some(tx) => {
                tx.send_modify(|n| *n = n.wrapping_add(1));
                !tx.is_closed()
            }
            None => false,
        }
    }

    /// Whether both handles are of the same signal.
    pub fn same(&self, other: &WeakDriftSignal) -> bool {
        std::sync::Weak::ptr_eq(&self.0, &other.0)
    }
}

/// The API group of an object's `apiVersion` (`""` for the core group's `v1`).
pub fn group_of(o: &Value) -> &str {
    o["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g)
}

/// Whether `query` names `kind`: the kind, its plural resource or a common short name, in any
/// case (`Deployment`, `deployments`, `deploy`).
pub fn kind_matches(query: &str, kind: &str) -> bool {
    let q = query.to_ascii_lowercase();
    let k = kind.to_ascii_lowercase();
    if q == k || q == flotilla_api::work::kind_to_resource(kind) {
        return true;
    }
    let short = match k.as_str() {
        "deployment" => "deploy",
        "configmap" => "cm",
        "namespace" => "ns",
        "service" => "svc",
        "pod" => "po",
        "daemonset" => "ds",
        "serviceaccount" => "sa",
        "persistentvolumeclaim" => "pvc",
        "statefulset" => "sts",
        "customresourcedefinition" => "crd",
        _ => return false,
    };
    q == short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executors_are_checked_for_the_verbs_ocms_work_agent_checks() {
        assert_eq!(
            executor_verbs(&Strategy::Update, false),
            ["create", "update", "patch", "get"]
        );
        // A resource the work would delete: the right to delete it is checked up front.
        assert_eq!(
            executor_verbs(&Strategy::CreateOnly, true),
            ["create", "update", "patch", "get", "delete"]
        );
        assert_eq!(executor_verbs(&Strategy::ReadOnly, true), ["get"]);
    }

    #[test]
    fn kinds_match_by_kind_plural_and_short_name() {
        for q in ["Deployment", "deployments", "deploy", "DEPLOYMENT"] {
            assert!(kind_matches(q, "Deployment"), "{q}");
        }
        assert!(kind_matches("cm", "ConfigMap"));
        assert!(!kind_matches("pods", "Deployment"));
    }
}

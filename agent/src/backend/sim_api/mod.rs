//! The Kubernetes API of a simulated cluster, for the cluster proxy: the shared in-memory API's
//! request engine ([`flotilla_kubemem::engine`]: paths, discovery and OpenAPI documents, get,
//! list with selectors, create, update with optimistic concurrency, every patch type,
//! server-side apply with field managers and conflicts, delete, `deletecollection`, the `status`
//! and `scale` subresources, watch, `Status` errors) over the sim's compact store through any
//! [`Backend`]'s object calls ([`SimObjects`]: [`Backend::get`], [`Backend::list`],
//! [`Backend::apply`], [`Backend::delete`], [`Backend::changes`]) — enough of the real wire
//! format that `kubectl` works against `flotilla-sim`.
//!
//! Not served: OpenAPI schemas (only the least kubectl needs to leave validation to the
//! server), tables (kubectl prints what it prints for plain lists), exec, port-forward, and RBAC
//! (the simulated cluster has none). Pods' logs are the simulated kubelet's ([`logs`]).
//!
//! - [`watch`]: watch streams, from the cluster's changes.
//! - [`logs`]: pods' logs, followed.

pub mod logs;
pub mod watch;

use super::api::{ApiRequest, ApiResponse, GatherError, RequestBody};
use super::{Backend, BackendError, Strategy};
use flotilla_api::work::ManifestId;
use flotilla_kubemem::engine::{self, Answer, Lines, Objects, Route, Target, Watch};
use flotilla_kubemem::store::Propagation;
use flotilla_kubemem::{ApiError, Resource, resources};
use http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;

/// Largest request body the simulated API server reads (a Kubernetes API server's default).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The response of an error: its `Status`.
fn failure(e: &ApiError) -> ApiResponse {
    respond(Answer::error(e))
}

fn bad_request(message: &str) -> ApiResponse {
    failure(&ApiError::bad_request(message.to_string()))
}

/// The response of an engine's answer.
fn respond(answer: Answer) -> ApiResponse {
    match answer {
        Answer::Json(code, v) => ApiResponse::json(
            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            &v,
        ),
        Answer::Text(text) => ApiResponse::bytes(StatusCode::OK, "text/plain", text.into()),
        Answer::Lines(lines) => {
            let mut headers = http::HeaderMap::new();
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            ApiResponse {
                status: StatusCode::OK,
                headers,
                body: Box::pin(futures::StreamExt::map(lines, Ok::<_, std::io::Error>)),
            }
        }
    }
}

/// Serves one request, reading its body whole first (as an API server does, up to
/// [`MAX_BODY`]).
pub async fn serve(backend: Arc<dyn Backend>, mut request: ApiRequest) -> ApiResponse {
    let body = std::mem::replace(&mut request.body, RequestBody::empty());
    let body = match body.gather(MAX_BODY).await {
        Ok(whole) => whole,
        Err(e @ GatherError::TooLarge(_)) => {
            return failure(&ApiError::new(413, "RequestEntityTooLarge", e.to_string()));
        }
        Err(e @ GatherError::BrokeOff(_)) => return bad_request(&e.to_string()),
    };
    let call = engine::Request::new(
        request.method.clone(),
        &request.path,
        &request.query,
        request.header("content-type").unwrap_or_default(),
        body,
    );
    let objects = SimObjects { backend };
    let resources = objects.resources().await;
    match engine::route(&call.segments(), &resources) {
        Route::Resource(t) if t.subresource == "log" && is_pods(&t) && !t.name.is_empty() => {
            if call.method != http::Method::GET {
                return respond(engine::resource(&objects, &call, t).await);
            }
            logs::serve(objects, t, &request).await
        }
        Route::Resource(t) => respond(engine::resource(&objects, &call, t).await),
        Route::Version => respond(engine::version(&objects.git_version().await)),
        other => engine::document(&other, &resources).map_or_else(
            || failure(&ApiError::new(404, "NotFound", "not served".into())),
            respond,
        ),
    }
}

fn is_pods(target: &Target) -> bool {
    target.resource.group.is_empty() && target.resource.plural == "pods"
}

/// The simulated cluster's objects as the request engine reads and writes them: through a
/// [`Backend`]'s object calls, so the sim's compact store stays as it is.
#[derive(Clone)]
pub struct SimObjects {
    /// The cluster.
    pub backend: Arc<dyn Backend>,
}

/// The backend's identity of the target's object.
fn id(t: &Target) -> ManifestId {
    ManifestId {
        group: t.resource.group.clone(),
        version: t.resource.version.clone(),
        kind: t.resource.kind.clone(),
        namespace: if t.resource.namespaced {
            t.namespace.clone()
        } else {
            String::new()
        },
        name: t.name.clone(),
    }
}

/// A backend error as the API server would word it.
fn from_backend(t: &Target, e: BackendError) -> ApiError {
    let r = &t.resource;
    match e {
        BackendError::NotFound(m) => ApiError::new(404, "NotFound", m),
        BackendError::Conflict { fields, manager } => {
            let conflicts: Vec<(String, String)> = fields
                .iter()
                .map(|f| (manager.clone(), format!(".{f}")))
                .collect();
            ApiError::apply_conflict(&r.api_version(), &conflicts).about(r, &t.name)
        }
        BackendError::Invalid(m) => ApiError::new(
            422,
            "Invalid",
            format!("{} {:?} is invalid: {m}", r.kind, t.name),
        )
        .about(r, &t.name),
        BackendError::Forbidden(m) => ApiError::new(403, "Forbidden", m),
        BackendError::Unavailable(m) => ApiError::new(503, "ServiceUnavailable", m),
    }
}

impl SimObjects {
    /// The objects of the target's resource in its namespace (all when the path names none),
    /// served at the version asked for (the simulated cluster stores one shape).
    async fn objects(&self, t: &Target) -> Result<Vec<Value>, ApiError> {
        let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
        let items = self
            .backend
            .list(&t.resource.kind, ns)
            .await
            .map_err(|e| from_backend(t, e))?;
        let api_version = t.resource.api_version();
        Ok(items
            .into_iter()
            .filter(|o| {
                super::group_of(o) == t.resource.group && o["kind"] == t.resource.kind.as_str()
            })
            .map(|mut o| {
                o["apiVersion"] = Value::String(api_version.clone());
                o
            })
            .collect())
    }

    async fn write(
        &self,
        t: &Target,
        object: Value,
        strategy: Strategy,
    ) -> Result<Value, ApiError> {
        self.backend
            .apply(&id(t), &object, &strategy)
            .await
            .map_err(|e| from_backend(t, e))?;
        self.get(t).await?.ok_or_else(|| t.not_found(&t.name))
    }
}

#[async_trait::async_trait]
impl Objects for SimObjects {
    fn cluster(&self) -> &str {
        "the simulated cluster"
    }

    async fn git_version(&self) -> String {
        self.backend.info().await.kubernetes_version
    }

    /// The built-ins of the cluster's Kubernetes version and the CRDs'.
    async fn resources(&self) -> Vec<Resource> {
        let mut all = resources::builtin_of(&self.git_version().await);
        if let Ok(crds) = self.backend.list("CustomResourceDefinition", None).await {
            for crd in &crds {
                all.extend(resources::from_crd(crd));
            }
        }
        all
    }

    async fn get(&self, t: &Target) -> Result<Option<Value>, ApiError> {
        if let Some(mut o) = self
            .backend
            .get(&id(t))
            .await
            .map_err(|e| from_backend(t, e))?
        {
            o["apiVersion"] = Value::String(t.resource.api_version());
            return Ok(Some(o));
        }
        // The namespaces every cluster has are listed although never stored.
        if t.resource.group.is_empty() && t.resource.kind == "Namespace" {
            return Ok(self
                .objects(t)
                .await?
                .into_iter()
                .find(|o| o["metadata"]["name"] == t.name.as_str()));
        }
        Ok(None)
    }

    /// The list's resourceVersion: the highest of its objects' and the cluster's counter.
    async fn list(&self, t: &Target) -> Result<(Vec<Value>, String), ApiError> {
        let items = self.objects(t).await?;
        let counter = self.backend.changes().map_or(0, |rx| *rx.borrow());
        let version = items
            .iter()
            .filter_map(|o| o["metadata"]["resourceVersion"].as_str()?.parse().ok())
            .fold(counter, u64::max);
        Ok((items, version.to_string()))
    }

    async fn create(&self, t: &Target, object: Value, _: &str) -> Result<Value, ApiError> {
        self.write(t, object, Strategy::Update).await
    }

    async fn update(&self, t: &Target, object: Value, _: &str) -> Result<Value, ApiError> {
        self.write(t, object, Strategy::Update).await
    }

    /// The simulated cluster computes its objects' status: a write through `status` is a
    /// write of the object.
    async fn update_status(&self, t: &Target, object: Value) -> Result<Value, ApiError> {
        self.write(t, object, Strategy::Update).await
    }

    async fn apply(
        &self,
        t: &Target,
        object: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        let strategy = Strategy::ServerSideApply {
            force,
            field_manager: manager.to_string(),
        };
        self.write(t, object, strategy).await
    }

    /// Answered with a `Status` of success (the sim keeps no copy of what it deleted); the
    /// simulated cluster has no garbage collector, so `propagation` changes nothing.
    async fn delete(&self, t: &Target, _: Propagation) -> Result<Option<Value>, ApiError> {
        let gone = self
            .backend
            .delete(&id(t))
            .await
            .map_err(|e| from_backend(t, e))?;
        let r = &t.resource;
        Ok(gone.then(|| {
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": t.name, "group": r.group, "kind": r.plural, "uid": ""}})
        }))
    }

    async fn watch(&self, t: &Target, w: Watch) -> Result<Lines, ApiError> {
        watch::lines(self.clone(), t.clone(), w).await
    }
}

#[cfg(test)]
mod tests;

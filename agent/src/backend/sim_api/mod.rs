//! The Kubernetes API of a simulated cluster, for the cluster proxy: the sim backend's glue to
//! the shared in-memory API ([`flotilla_kubemem`]: resource table and discovery documents,
//! OpenAPI, patch types, selectors, watch events), enough of the real wire format that
//! `kubectl` works against `flotilla-sim` — discovery (legacy `/api`, `/apis`,
//! resource lists, `/version`), get and list (label and `metadata.name`/`metadata.namespace`
//! field selectors), create, update (optimistic concurrency on `resourceVersion`), patch
//! (JSON, merge, strategic merge [approximated](patch), server-side apply with field managers
//! and conflicts), delete, `deletecollection`, the `scale` subresource, and watch (streamed
//! events). Served from any [`Backend`]'s object calls ([`Backend::get`], [`Backend::list`],
//! [`Backend::apply`], [`Backend::delete`], [`Backend::changes`]); errors are Kubernetes
//! `Status` objects as a real API server words them.
//!
//! Not served: OpenAPI schemas (only the [`openapi`] kubectl needs to leave validation to the
//! server), tables (kubectl prints what it prints for plain lists), exec, port-forward, and RBAC
//! (the simulated cluster has none). Pods' logs are the simulated kubelet's ([`logs`]).
//!
//! - [`watch`]: watch streams, from the cluster's changes.
//! - [`logs`]: pods' logs, followed.

pub mod logs;
pub mod watch;

use super::api::{ApiRequest, ApiResponse, GatherError, RequestBody, status_object};
use super::{Backend, BackendError, Strategy};
use flotilla_api::work::ManifestId;
use flotilla_kubemem::select::Selectors;
use flotilla_kubemem::{openapi, patch, resources};
use http::{Method, StatusCode};
use resources::Resource;
use serde_json::{Value, json};
use std::sync::Arc;

/// What a resource path names.
#[derive(Debug, Clone)]
struct Target {
    resource: Resource,
    namespace: String,
    name: String,
    subresource: String,
}

impl Target {
    fn id(&self, name: &str) -> ManifestId {
        ManifestId {
            group: self.resource.group.clone(),
            version: self.resource.version.clone(),
            kind: self.resource.kind.clone(),
            namespace: if self.resource.namespaced {
                self.namespace.clone()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }

    fn not_found(&self, name: &str) -> ApiResponse {
        let r = &self.resource;
        failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("{} {name:?} not found", r.qualified()),
            Some(json!({"name": name, "group": r.group, "kind": r.plural})),
        )
    }
}

fn failure(code: StatusCode, reason: &str, message: &str, details: Option<Value>) -> ApiResponse {
    ApiResponse::json(code, &status_object(code, reason, message, details))
}

fn bad_request(message: &str) -> ApiResponse {
    ApiResponse::status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

/// A backend error as the API server would word it.
fn from_backend(target: &Target, name: &str, e: BackendError) -> ApiResponse {
    match e {
        BackendError::NotFound(m) => failure(StatusCode::NOT_FOUND, "NotFound", &m, None),
        BackendError::Conflict { fields, manager } => {
            let list: Vec<String> = fields.iter().map(|f| format!(".{f}")).collect();
            failure(
                StatusCode::CONFLICT,
                "Conflict",
                &format!(
                    "Apply failed with {} conflict{}: conflict with {manager:?}: {}",
                    fields.len(),
                    if fields.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
                Some(
                    json!({"name": name, "group": target.resource.group, "kind": target.resource.plural}),
                ),
            )
        }
        BackendError::Invalid(m) => failure(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            &format!("{} {name:?} is invalid: {m}", target.resource.kind),
            Some(
                json!({"name": name, "group": target.resource.group, "kind": target.resource.kind}),
            ),
        ),
        BackendError::Forbidden(m) => failure(StatusCode::FORBIDDEN, "Forbidden", &m, None),
        BackendError::Unavailable(m) => failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            &m,
            None,
        ),
    }
}

/// Every resource the cluster serves now: the built-ins and its CRDs'.
async fn resources(backend: &dyn Backend) -> Vec<Resource> {
    let mut all = resources::builtin();
    if let Ok(crds) = backend.list("CustomResourceDefinition", None).await {
        for crd in &crds {
            all.extend(resources::from_crd(crd));
        }
    }
    all
}

/// Largest request body the simulated API server reads (a Kubernetes API server's default).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Serves one request, reading its body whole first (as an API server does, up to
/// [`MAX_BODY`]).
pub async fn serve(backend: Arc<dyn Backend>, mut request: ApiRequest) -> ApiResponse {
    let body = std::mem::replace(&mut request.body, RequestBody::empty());
    request.body = match body.gather(MAX_BODY).await {
        Ok(whole) => RequestBody::whole(whole),
        Err(e @ GatherError::TooLarge(_)) => {
            return failure(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                &e.to_string(),
                None,
            );
        }
        Err(e @ GatherError::BrokeOff(_)) => return bad_request(&e.to_string()),
    };
    let parts: Vec<&str> = request.path.split('/').filter(|p| !p.is_empty()).collect();
    match (request.method.clone(), parts.as_slice()) {
        (Method::GET, ["version"]) => {
            let info = backend.info().await;
            let v = info.kubernetes_version.trim_start_matches('v').to_string();
            let mut it = v.split('.');
            let (major, minor) = (it.next().unwrap_or("1"), it.next().unwrap_or("0"));
            ApiResponse::json(
                StatusCode::OK,
                &json!({"major": major, "minor": minor, "gitVersion": info.kubernetes_version,
                    "platform": "linux/amd64", "compiler": "gc", "goVersion": "go1.23",
                    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z"}),
            )
        }
        (Method::GET, ["healthz" | "readyz" | "livez"]) => {
            ApiResponse::bytes(StatusCode::OK, "text/plain", "ok".into())
        }
        (Method::GET, ["api"]) => ApiResponse::json(
            StatusCode::OK,
            &json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "simulated:443"}]}),
        ),
        (Method::GET, ["apis"]) => ApiResponse::json(
            StatusCode::OK,
            &resources::group_list(&resources(backend.as_ref()).await),
        ),
        (Method::GET, ["openapi", "v3"]) => ApiResponse::json(
            StatusCode::OK,
            &openapi::root(&resources(backend.as_ref()).await),
        ),
        (Method::GET, ["openapi", "v3", rest @ ..]) => {
            match openapi::group_version(&rest.join("/"), &resources(backend.as_ref()).await) {
                Some(doc) => ApiResponse::json(StatusCode::OK, &doc),
                None => failure(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "no such OpenAPI document",
                    None,
                ),
            }
        }
        (Method::GET, ["api", version]) => discovery(backend.as_ref(), version).await,
        (Method::GET, ["apis", group, version]) => {
            discovery(backend.as_ref(), &format!("{group}/{version}")).await
        }
        (_, ["api", version, rest @ ..]) => {
            resource_request(backend, &request, "", version, rest).await
        }
        (_, ["apis", group, version, rest @ ..]) => {
            resource_request(backend, &request, group, version, rest).await
        }
        _ => failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
            None,
        ),
    }
}

async fn discovery(backend: &dyn Backend, api_version: &str) -> ApiResponse {
    match resources::resource_list(api_version, &resources(backend).await) {
        Some(list) => ApiResponse::json(StatusCode::OK, &list),
        None => failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("the server could not find the requested resource ({api_version})"),
            None,
        ),
    }
}

async fn resource_request(
    backend: Arc<dyn Backend>,
    request: &ApiRequest,
    group: &str,
    version: &str,
    rest: &[&str],
) -> ApiResponse {
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => ((*ns).to_string(), tail),
        _ => (String::new(), rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, "", ""),
        [plural, name] => (*plural, *name, ""),
        [plural, name, sub] => (*plural, *name, *sub),
        _ => return bad_request(&format!("path {:?} is not a resource path", request.path)),
    };
    let all = resources(backend.as_ref()).await;
    let Some(resource) = all
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
    else {
        return failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!(
                "the server could not find the requested resource ({plural} in {group}/{version})"
            ),
            None,
        );
    };
    let target = Target {
        resource,
        namespace,
        name: name.to_string(),
        subresource: subresource.to_string(),
    };
    let watching = matches!(request.param("watch").as_deref(), Some("true" | "1"));
    match (&request.method, target.name.is_empty()) {
        (&Method::GET, false) if target.subresource == "log" && is_pods(&target) => {
            logs::serve(backend, target, request).await
        }
        (&Method::GET, true) if watching => watch::serve(backend, target.clone(), request).await,
        (&Method::GET, true) => list(backend.as_ref(), &target, request).await,
        (&Method::GET, false) => get(backend.as_ref(), &target).await,
        (&Method::POST, true) => create(backend.as_ref(), &target, request).await,
        (&Method::PUT, false) => update(backend.as_ref(), &target, request).await,
        (&Method::PATCH, false) => patch_object(backend.as_ref(), &target, request).await,
        (&Method::DELETE, false) => delete(backend.as_ref(), &target).await,
        (&Method::DELETE, true) => delete_collection(backend.as_ref(), &target, request).await,
        (method, _) => failure(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            &format!("{method} is not supported on {}", request.path),
            None,
        ),
    }
}

fn is_pods(target: &Target) -> bool {
    target.resource.group.is_empty() && target.resource.plural == "pods"
}

/// The objects of a resource, in its namespace (all when the path names none).
async fn objects(backend: &dyn Backend, target: &Target) -> Result<Vec<Value>, BackendError> {
    let ns = (!target.namespace.is_empty()).then_some(target.namespace.as_str());
    let items = backend.list(&target.resource.kind, ns).await?;
    let api_version = target.resource.api_version();
    Ok(items
        .into_iter()
        .filter(|o| {
            let group = o["apiVersion"]
                .as_str()
                .and_then(|v| v.rsplit_once('/'))
                .map_or("", |(g, _)| g);
            group == target.resource.group && o["kind"] == target.resource.kind.as_str()
        })
        .map(|mut o| {
            // Served at the version asked for (the simulated cluster stores one shape).
            o["apiVersion"] = Value::String(api_version.clone());
            o
        })
        .collect())
}

/// The collection's resourceVersion: the highest of its objects' and the cluster's counter.
fn list_version(backend: &dyn Backend, items: &[Value]) -> u64 {
    let counter = backend.changes().map_or(0, |rx| *rx.borrow());
    items
        .iter()
        .filter_map(|o| o["metadata"]["resourceVersion"].as_str()?.parse().ok())
        .fold(counter, u64::max)
}

/// The request's selectors, or a 400 naming the bad one.
fn selectors(request: &ApiRequest) -> Result<Selectors, ApiResponse> {
    Selectors::parse(
        request.param("labelSelector").as_deref(),
        request.param("fieldSelector").as_deref(),
    )
    .map_err(|e| bad_request(&e.to_string()))
}

/// The objects of the target's collection that the request's selectors select.
async fn selection(
    backend: &dyn Backend,
    target: &Target,
    request: &ApiRequest,
) -> Result<Vec<Value>, ApiResponse> {
    let selectors = selectors(request)?;
    let items = objects(backend, target)
        .await
        .map_err(|e| from_backend(target, "", e))?;
    Ok(items.into_iter().filter(|o| selectors.matches(o)).collect())
}

async fn list(backend: &dyn Backend, target: &Target, request: &ApiRequest) -> ApiResponse {
    let items = match selection(backend, target, request).await {
        Ok(items) => items,
        Err(resp) => return resp,
    };
    let version = list_version(backend, &items);
    ApiResponse::json(
        StatusCode::OK,
        &json!({
            "apiVersion": target.resource.api_version(),
            "kind": format!("{}List", target.resource.kind),
            "metadata": {"resourceVersion": version.to_string()},
            "items": items,
        }),
    )
}

/// The current object, when it exists.
async fn current(
    backend: &dyn Backend,
    target: &Target,
    name: &str,
) -> Result<Option<Value>, BackendError> {
    if let Some(mut o) = backend.get(&target.id(name)).await? {
        o["apiVersion"] = Value::String(target.resource.api_version());
        return Ok(Some(o));
    }
    // The namespaces every cluster has are listed although never stored.
    if target.resource.group.is_empty() && target.resource.kind == "Namespace" {
        return Ok(objects(backend, target)
            .await?
            .into_iter()
            .find(|o| o["metadata"]["name"] == name));
    }
    Ok(None)
}

async fn get(backend: &dyn Backend, target: &Target) -> ApiResponse {
    match current(backend, target, &target.name).await {
        Ok(Some(o)) if target.subresource == "scale" => {
            ApiResponse::json(StatusCode::OK, &scale_of(&o))
        }
        Ok(Some(o)) => ApiResponse::json(StatusCode::OK, &o),
        Ok(None) => target.not_found(&target.name),
        Err(e) => from_backend(target, &target.name, e),
    }
}

fn scale_of(o: &Value) -> Value {
    let replicas = o["spec"]["replicas"].as_i64().unwrap_or(1);
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": o["metadata"]["name"], "namespace": o["metadata"]["namespace"],
            "resourceVersion": o["metadata"]["resourceVersion"]},
        "spec": {"replicas": replicas},
        "status": {"replicas": o["status"]["replicas"].as_i64().unwrap_or(0)},
    })
}

/// The request body as a JSON object (YAML for apply patches).
fn body_object(request: &ApiRequest) -> Result<Value, ApiResponse> {
    let value: Value = match serde_json::from_slice(request.body.bytes()) {
        Ok(v) => v,
        Err(json_error) => serde_yaml::from_slice(request.body.bytes()).map_err(|_| {
            bad_request(&format!(
                "the request body is not JSON (or YAML): {json_error}"
            ))
        })?,
    };
    if value.is_object() || value.is_array() {
        Ok(value)
    } else {
        Err(bad_request("the request body must be an object"))
    }
}

/// Checks that a written object's identity matches the path, filling what the path implies.
fn identity(target: &Target, object: &mut Value, name: &str) -> Result<String, ApiResponse> {
    if !object.is_object() {
        return Err(bad_request("the request body must be an object"));
    }
    let r = &target.resource;
    if object["kind"].as_str().is_some_and(|k| k != r.kind) {
        return Err(bad_request(&format!(
            "the object's kind {} does not match the path's {}",
            object["kind"], r.kind
        )));
    }
    object["kind"] = Value::String(r.kind.clone());
    object["apiVersion"] = Value::String(r.api_version());
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let body_name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = match (name, body_name.as_str()) {
        ("", "") => {
            let prefix = object["metadata"]["generateName"]
                .as_str()
                .unwrap_or_default();
            if prefix.is_empty() {
                return Err(failure(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    &format!(
                        "{} is invalid: metadata.name: Required value: name or generateName is required",
                        r.kind
                    ),
                    None,
                ));
            }
            format!(
                "{prefix}{}",
                &uuid::Uuid::new_v4().simple().to_string()[..5]
            )
        }
        ("", n) => n.to_string(),
        (p, "") => p.to_string(),
        (p, n) if p == n => p.to_string(),
        (p, n) => {
            return Err(bad_request(&format!(
                "the name of the object ({n}) does not match the name on the URL ({p})"
            )));
        }
    };
    object["metadata"]["name"] = Value::String(name.clone());
    if r.namespaced {
        let ns = match (
            target.namespace.as_str(),
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
        ) {
            ("", "") => "default".to_string(),
            ("", n) => n.to_string(),
            (p, "") => p.to_string(),
            (p, n) if p == n => p.to_string(),
            (p, n) => {
                return Err(bad_request(&format!(
                    "the namespace of the object ({n}) does not match the namespace on the request ({p})"
                )));
            }
        };
        object["metadata"]["namespace"] = Value::String(ns);
    } else if let Some(m) = object["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    Ok(name)
}

async fn write(
    backend: &dyn Backend,
    target: &Target,
    name: &str,
    object: &Value,
    strategy: Strategy,
    created: bool,
) -> ApiResponse {
    match backend.apply(&target.id(name), object, &strategy).await {
        Ok(_) => match current(backend, target, name).await {
            Ok(Some(o)) => ApiResponse::json(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                &o,
            ),
            Ok(None) => target.not_found(name),
            Err(e) => from_backend(target, name, e),
        },
        Err(e) => from_backend(target, name, e),
    }
}

/// Whether the request is a dry run (`dryRun=All`): answered, never stored.
fn dry_run(request: &ApiRequest) -> bool {
    request.param("dryRun").is_some_and(|d| d == "All")
}

async fn create(backend: &dyn Backend, target: &Target, request: &ApiRequest) -> ApiResponse {
    let mut object = match body_object(request) {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    let name = match identity(target, &mut object, "") {
        Ok(n) => n,
        Err(resp) => return resp,
    };
    let mut target = target.clone();
    if let Some(ns) = object["metadata"]["namespace"].as_str() {
        target.namespace = ns.to_string();
    }
    match current(backend, &target, &name).await {
        Ok(Some(_)) => {
            let r = &target.resource;
            return failure(
                StatusCode::CONFLICT,
                "AlreadyExists",
                &format!("{} {name:?} already exists", r.qualified()),
                Some(json!({"name": name, "group": r.group, "kind": r.plural})),
            );
        }
        Ok(None) => {}
        Err(e) => return from_backend(&target, &name, e),
    }
    if dry_run(request) {
        return ApiResponse::json(StatusCode::CREATED, &object);
    }
    write(backend, &target, &name, &object, Strategy::Update, true).await
}

async fn update(backend: &dyn Backend, target: &Target, request: &ApiRequest) -> ApiResponse {
    let body = match body_object(request) {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    let existing = match current(backend, target, &target.name).await {
        Ok(Some(o)) => o,
        Ok(None) => return target.not_found(&target.name),
        Err(e) => return from_backend(target, &target.name, e),
    };
    let mut object = if target.subresource == "scale" {
        let mut o = existing.clone();
        o["spec"]["replicas"] = body["spec"]["replicas"].clone();
        o
    } else {
        body
    };
    let name = match identity(target, &mut object, &target.name) {
        Ok(n) => n,
        Err(resp) => return resp,
    };
    if let Some(rv) = object["metadata"]["resourceVersion"].as_str()
        && Some(rv) != existing["metadata"]["resourceVersion"].as_str()
    {
        let r = &target.resource;
        return failure(
            StatusCode::CONFLICT,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                r.qualified()
            ),
            Some(json!({"name": name, "group": r.group, "kind": r.plural})),
        );
    }
    if dry_run(request) {
        return ApiResponse::json(StatusCode::OK, &object);
    }
    let resp = write(backend, target, &name, &object, Strategy::Update, false).await;
    scaled(target, resp).await
}

/// The scale subresource answers with a Scale.
async fn scaled(target: &Target, resp: ApiResponse) -> ApiResponse {
    if target.subresource != "scale" || !resp.status.is_success() {
        return resp;
    }
    let mut body = resp.body;
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = futures::StreamExt::next(&mut body).await {
        bytes.extend_from_slice(&chunk);
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(o) => ApiResponse::json(StatusCode::OK, &scale_of(&o)),
        Err(e) => ApiResponse::status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &format!("the scaled object: {e}"),
        ),
    }
}

async fn patch_object(backend: &dyn Backend, target: &Target, request: &ApiRequest) -> ApiResponse {
    let content_type = request
        .header("content-type")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let body = match body_object(request) {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    let existing = match current(backend, target, &target.name).await {
        Ok(o) => o,
        Err(e) => return from_backend(target, &target.name, e),
    };
    if content_type == "application/apply-patch+yaml" {
        let mut object = body;
        let name = match identity(target, &mut object, &target.name) {
            Ok(n) => n,
            Err(resp) => return resp,
        };
        let manager = match request.param("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m,
            None => {
                return bad_request(
                    "PATCH of type application/apply-patch+yaml needs a fieldManager parameter",
                );
            }
        };
        let force = request.param("force").as_deref() == Some("true");
        if dry_run(request) {
            return ApiResponse::json(StatusCode::OK, &object);
        }
        let created = existing.is_none();
        return write(
            backend,
            target,
            &name,
            &object,
            Strategy::ServerSideApply {
                force,
                field_manager: manager,
            },
            created,
        )
        .await;
    }
    let Some(existing) = existing else {
        return target.not_found(&target.name);
    };
    let mut object = if target.subresource == "scale" {
        scale_of(&existing)
    } else {
        existing.clone()
    };
    let patched = match content_type.as_str() {
        "application/json-patch+json" => {
            patch::json_patch(&mut object, &body).map_err(|e| e.to_string())
        }
        "application/merge-patch+json" => {
            patch::merge(&mut object, &body);
            Ok(())
        }
        "application/strategic-merge-patch+json" => {
            patch::strategic(&mut object, &body);
            Ok(())
        }
        other => {
            return failure(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                &format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (not {other:?})"
                ),
                None,
            );
        }
    };
    if let Err(e) = patched {
        return failure(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            &format!(
                "the patch of {} {:?} cannot be applied: {e}",
                target.resource.qualified(),
                target.name
            ),
            None,
        );
    }
    if target.subresource == "scale" {
        let replicas = object["spec"]["replicas"].clone();
        object = existing;
        object["spec"]["replicas"] = replicas;
    }
    let name = match identity(target, &mut object, &target.name) {
        Ok(n) => n,
        Err(resp) => return resp,
    };
    if dry_run(request) {
        return ApiResponse::json(StatusCode::OK, &object);
    }
    let resp = write(backend, target, &name, &object, Strategy::Update, false).await;
    scaled(target, resp).await
}

async fn delete(backend: &dyn Backend, target: &Target) -> ApiResponse {
    match backend.delete(&target.id(&target.name)).await {
        Ok(true) => {
            let r = &target.resource;
            ApiResponse::json(
                StatusCode::OK,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": target.name, "group": r.group, "kind": r.plural, "uid": ""}}),
            )
        }
        Ok(false) => target.not_found(&target.name),
        Err(e) => from_backend(target, &target.name, e),
    }
}

async fn delete_collection(
    backend: &dyn Backend,
    target: &Target,
    request: &ApiRequest,
) -> ApiResponse {
    let items = match selection(backend, target, request).await {
        Ok(items) => items,
        Err(resp) => return resp,
    };
    let mut deleted = Vec::new();
    for o in items {
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut one = target.clone();
        one.namespace = o["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Err(e) = backend.delete(&one.id(&name)).await {
            return from_backend(&one, &name, e);
        }
        deleted.push(o);
    }
    ApiResponse::json(
        StatusCode::OK,
        &json!({"apiVersion": target.resource.api_version(), "kind": format!("{}List", target.resource.kind),
            "metadata": {}, "items": deleted}),
    )
}

#[cfg(test)]
mod tests;

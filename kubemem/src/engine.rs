//! One request engine for an in-memory Kubernetes API (no I/O of its own: it reads and writes
//! through a store's [`Objects`]). It parses a request's path ([`target::route`]: group,
//! version, resource, namespace, name, subresource), answers the documents (`/version`,
//! health, discovery, OpenAPI), and dispatches the verbs — get, list (label and field
//! selectors), create, update (optimistic concurrency on `resourceVersion`), patch (JSON,
//! merge, strategic merge, server-side apply with field managers and conflicts), delete,
//! `deletecollection`, the `status` and `scale` subresources, watch — answering errors as
//! `Status` objects ([`ApiError`]). `dryRun` answers what a write would, storing nothing.
//! `fieldValidation=Strict` refuses a create, update or patch leaving a field its kind does not
//! define ([`schema`]: 400 on a body, 422 on a patch, in the API server's words); without it
//! unknown fields are kept (a real server's default, `Warn`, drops them with a warning).
//!
//! Two stores plug in: kubemem's [`Store`](crate::store::Store) behind a mutex (the testkit's
//! API server, [`crate::server`]), and the agent's simulated cluster over its compact store
//! (sized for 10,000s of clusters a process). Each names itself ([`Objects::cluster`]) in the
//! refusals that say what it cannot do.
//!
//! - [`target`]: paths and the identity of written objects (pure).

pub mod target;

use crate::openapi;
use crate::patch;
use crate::resources::{self, Resource};
use crate::schema;
use crate::select::Selectors;
use crate::status::ApiError;
use crate::store::Propagation;
use bytes::Bytes;
use futures::Stream;
use http::Method;
use serde_json::{Value, json};
use std::pin::Pin;
pub use target::{Route, Target, identity, route};

/// A stream of lines (watch events).
pub type Lines = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

/// One request, read whole.
#[derive(Debug, Clone)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path.
    pub path: String,
    /// The decoded query parameters.
    pub query: Vec<(String, String)>,
    /// `Content-Type` without its parameters (`""` when there is none).
    pub content_type: String,
    /// The body.
    pub body: Bytes,
}

impl Request {
    /// A request; `raw_query` as sent (no `?`), `content_type` as the header says it.
    pub fn new(
        method: Method,
        path: &str,
        raw_query: &str,
        content_type: &str,
        body: Bytes,
    ) -> Self {
        Self {
            method,
            path: path.to_string(),
            query: query(raw_query),
            content_type: content_type
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
            body,
        }
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<String> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// Whether boolean parameter `name` is `true` (or `1`).
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.param(name).as_deref(), Some("true" | "1"))
    }

    /// The path's segments (none empty).
    pub fn segments(&self) -> Vec<&str> {
        self.path.split('/').filter(|p| !p.is_empty()).collect()
    }
}

/// Decoded `key=value` pairs of a query string.
pub fn query(qs: &str) -> Vec<(String, String)> {
    qs.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent- and `+`-decoding of a query component (a bad escape stays as written).
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 3;
                }
                Err(_) => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An answer, for the caller to write in its own response type.
pub enum Answer {
    /// A JSON body with this status code.
    Json(u16, Value),
    /// A `200 OK` plain-text body.
    Text(&'static str),
    /// A `200 OK` stream of JSON lines (a watch).
    Lines(Lines),
}

impl Answer {
    /// The `Status` answer of an error.
    pub fn error(e: &ApiError) -> Self {
        Self::Json(e.code, e.status())
    }
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Json(code, v) => write!(f, "Json({code}, {v})"),
            Self::Text(t) => write!(f, "Text({t:?})"),
            Self::Lines(_) => f.write_str("Lines"),
        }
    }
}

/// What a watch asks for.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The request's selectors.
    pub selectors: Selectors,
    /// `resourceVersion`: the version the client has seen (`None`: none).
    pub since: Option<u64>,
    /// `timeoutSeconds` (`None`: the store's default).
    pub timeout: Option<u64>,
}

/// The operations the engine needs of a store. Writes name the object by a [`Target`] whose
/// `name` and `namespace` are the object's ([`identity`] checked them against the body).
#[async_trait::async_trait]
pub trait Objects: Send + Sync {
    /// How the cluster names itself in what it refuses ("the simulated cluster").
    fn cluster(&self) -> &str;
    /// The `gitVersion` of `/version`.
    async fn git_version(&self) -> String;
    /// Every resource served now (the built-ins and those of the CRDs stored).
    async fn resources(&self) -> Vec<Resource>;
    /// The object `target.name`, at the version the target asks for; `None` when absent.
    async fn get(&self, target: &Target) -> Result<Option<Value>, ApiError>;
    /// The objects of the target's resource in its namespace (all when `""`), and the list's
    /// `resourceVersion`.
    async fn list(&self, target: &Target) -> Result<(Vec<Value>, String), ApiError>;
    /// Creates an object as `manager`; the stored object.
    async fn create(
        &self,
        target: &Target,
        object: Value,
        manager: &str,
    ) -> Result<Value, ApiError>;
    /// Replaces an object as `manager` (the engine checked its `resourceVersion`).
    async fn update(
        &self,
        target: &Target,
        object: Value,
        manager: &str,
    ) -> Result<Value, ApiError>;
    /// Writes an object through its `status` subresource.
    async fn update_status(&self, target: &Target, object: Value) -> Result<Value, ApiError>;
    /// Server-side apply of `object` as `manager` (`force`: take fields others own).
    async fn apply(
        &self,
        target: &Target,
        object: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApiError>;
    /// Deletes an object: what to answer (the object, or a `Status` of success), `None` when
    /// it was not there.
    async fn delete(
        &self,
        target: &Target,
        propagation: Propagation,
    ) -> Result<Option<Value>, ApiError>;
    /// A watch of the target's collection.
    async fn watch(&self, target: &Target, watch: Watch) -> Result<Lines, ApiError>;
}

/// Serves one request.
pub async fn serve(objects: &dyn Objects, request: &Request) -> Answer {
    let resources = objects.resources().await;
    match route(&request.segments(), &resources) {
        Route::Version => version(&objects.git_version().await),
        Route::Resource(target) => resource(objects, request, target).await,
        other => document(&other, &resources)
            .unwrap_or_else(|| Answer::error(&ApiError::new(404, "NotFound", "not served".into()))),
    }
}

/// `(major, minor)` of a `gitVersion` (`v1.30.2+k3s1` → `1`, `30`).
pub fn parse_version(git: &str) -> (String, String) {
    let v = git.trim_start_matches('v');
    let mut parts = v.split(['.', '+', '-']);
    (
        parts.next().unwrap_or("1").to_string(),
        parts.next().unwrap_or("30").to_string(),
    )
}

/// `/version`'s document for `git_version`.
pub fn version(git_version: &str) -> Answer {
    let (major, minor) = parse_version(git_version);
    Answer::Json(
        200,
        json!({
            "major": major, "minor": minor, "gitVersion": git_version,
            "platform": "linux/amd64", "goVersion": "go1.23", "compiler": "gc",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
        }),
    )
}

/// The answer of a path that is not a resource's (`None` for [`Route::Version`] and
/// [`Route::Resource`]), with `resources` served.
pub fn document(route: &Route, resources: &[Resource]) -> Option<Answer> {
    let not_found = |message: String| Answer::error(&ApiError::new(404, "NotFound", message));
    let answer = match route {
        Route::Version | Route::Resource(_) => return None,
        Route::Health => Answer::Text("ok"),
        Route::Api => Answer::Json(
            200,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        Route::Groups => Answer::Json(200, resources::group_list(resources)),
        Route::Discovery(gv) => match resources::resource_list(gv, resources) {
            Some(list) => Answer::Json(200, list),
            None => not_found(format!(
                "the server could not find the requested resource ({gv})"
            )),
        },
        Route::OpenApiRoot => Answer::Json(200, openapi::root(resources)),
        Route::OpenApi(path) => match openapi::group_version(path, resources) {
            Some(doc) => Answer::Json(200, doc),
            None => not_found("no such OpenAPI document".into()),
        },
        Route::Unknown(message) => not_found(message.clone()),
    };
    Some(answer)
}

/// The RBAC verb of a resource request (`watch`, `list`, `get`, `create`, …).
pub fn verb(request: &Request, target: &Target) -> &'static str {
    match (&request.method, target.name.is_empty()) {
        (&Method::GET, true) if request.flag("watch") => "watch",
        (&Method::GET, true) => "list",
        (&Method::GET, false) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "deletecollection",
        (&Method::DELETE, false) => "delete",
        _ => "unknown",
    }
}

/// Serves a request on a resource path.
pub async fn resource(objects: &dyn Objects, request: &Request, target: Target) -> Answer {
    match dispatch(objects, request, target).await {
        Ok(answer) => answer,
        Err(e) => Answer::error(&e),
    }
}

async fn dispatch(
    objects: &dyn Objects,
    request: &Request,
    target: Target,
) -> Result<Answer, ApiError> {
    if !matches!(target.subresource.as_str(), "" | "status" | "scale") {
        return Err(ApiError::new(
            404,
            "NotFound",
            format!(
                "the server could not find the requested resource ({})",
                request.path
            ),
        ));
    }
    let t = &target;
    match (verb(request, t), t.name.is_empty()) {
        ("watch", _) => watch(objects, request, t).await,
        ("list", _) => list(objects, request, t).await,
        ("get", _) => get(objects, t).await,
        ("create", true) => create(objects, request, t).await,
        ("update", false) => update(objects, request, t).await,
        ("patch", false) if request.content_type.starts_with("application/apply-patch") => {
            apply(objects, request, t).await
        }
        ("patch", false) => patch_object(objects, request, t).await,
        ("delete", _) => delete(objects, request, t).await,
        ("deletecollection", _) => delete_collection(objects, request, t).await,
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{} is not supported on {}", request.method, request.path),
        )),
    }
}

/// The request's selectors, or a 400 naming the bad one as the cluster says it.
fn selectors(objects: &dyn Objects, request: &Request) -> Result<Selectors, ApiError> {
    Selectors::parse(
        request.param("labelSelector").as_deref(),
        request.param("fieldSelector").as_deref(),
    )
    .map_err(|e| ApiError::bad_request(e.worded_for(objects.cluster())))
}

/// The request body as JSON (or YAML, as kubectl may send an apply patch): an object or an
/// array.
fn body(request: &Request) -> Result<Value, ApiError> {
    let value: Value = match serde_json::from_slice(&request.body) {
        Ok(v) => v,
        Err(json_error) => serde_yaml::from_slice(&request.body).map_err(|_| {
            ApiError::bad_request(format!(
                "the request body is not JSON (or YAML): {json_error}"
            ))
        })?,
    };
    if value.is_object() || value.is_array() {
        Ok(value)
    } else {
        Err(ApiError::bad_request(
            "the request body must be an object".into(),
        ))
    }
}

/// Whether the request is a dry run: answered, never stored.
fn dry_run(request: &Request) -> bool {
    request.param("dryRun").is_some()
}

/// The fields of `object` its kind does not define, when the request asks for strict field
/// validation (`fieldValidation=Strict`); none otherwise, or for a kind without a schema.
fn unknown_fields(request: &Request, t: &Target, object: &Value) -> Vec<String> {
    if request.param("fieldValidation").as_deref() != Some("Strict") {
        return Vec::new();
    }
    let r = &t.resource;
    schema::unknown_fields(&r.api_version(), &r.kind, object).unwrap_or_default()
}

/// A create or update body refused under strict field validation (400, as the API server's
/// decoder refuses it).
fn check_body(request: &Request, t: &Target, object: &Value) -> Result<(), ApiError> {
    let fields = unknown_fields(request, t, object);
    if fields.is_empty() {
        return Ok(());
    }
    let r = &t.resource;
    Err(ApiError::bad_request(schema::refused_body(
        &r.kind, &r.version, &fields,
    )))
}

/// A patch whose result is refused under strict field validation (422, as the API server's
/// patcher refuses it).
fn check_patch(
    request: &Request,
    t: &Target,
    patch: &Value,
    patched: &Value,
) -> Result<(), ApiError> {
    let fields = unknown_fields(request, t, patched);
    if fields.is_empty() {
        return Ok(());
    }
    Err(ApiError::new(
        422,
        "Invalid",
        schema::refused_patch(patch, &fields),
    ))
}

fn manager(request: &Request) -> String {
    request
        .param("fieldManager")
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The `propagationPolicy` of a delete, from the query or the `DeleteOptions` body.
fn propagation(request: &Request) -> Propagation {
    let from_body = serde_json::from_slice::<Value>(&request.body)
        .ok()
        .and_then(|v| v["propagationPolicy"].as_str().map(str::to_string));
    match request.param("propagationPolicy").or(from_body).as_deref() {
        Some("Orphan") => Propagation::Orphan,
        Some("Foreground") => Propagation::Foreground,
        _ => Propagation::Background,
    }
}

/// The `Scale` of an object with `spec.replicas`.
pub fn scale_of(o: &Value) -> Value {
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

/// The answer of a write: the object, or its `Scale` when written through `scale`.
fn written(t: &Target, code: u16, o: Value) -> Answer {
    if t.subresource == "scale" {
        Answer::Json(code, scale_of(&o))
    } else {
        Answer::Json(code, o)
    }
}

/// The objects of the target's collection that the request's selectors select.
async fn selection(
    objects: &dyn Objects,
    request: &Request,
    t: &Target,
) -> Result<(Vec<Value>, String), ApiError> {
    let selectors = selectors(objects, request)?;
    let (items, version) = objects.list(t).await?;
    let items = items.into_iter().filter(|o| selectors.matches(o)).collect();
    Ok((items, version))
}

fn list_of(t: &Target, items: Vec<Value>, metadata: Value) -> Answer {
    Answer::Json(
        200,
        json!({
            "apiVersion": t.resource.api_version(),
            "kind": format!("{}List", t.resource.kind),
            "metadata": metadata,
            "items": items,
        }),
    )
}

async fn list(objects: &dyn Objects, request: &Request, t: &Target) -> Result<Answer, ApiError> {
    let (items, version) = selection(objects, request, t).await?;
    Ok(list_of(t, items, json!({"resourceVersion": version})))
}

async fn get(objects: &dyn Objects, t: &Target) -> Result<Answer, ApiError> {
    let o = objects.get(t).await?.ok_or_else(|| t.not_found(&t.name))?;
    Ok(written(t, 200, o))
}

async fn create(objects: &dyn Objects, request: &Request, t: &Target) -> Result<Answer, ApiError> {
    let mut object = body(request)?;
    check_body(request, t, &object)?;
    let (name, namespace) = identity(t, &mut object, "")?;
    let one = t.named(&name, &namespace);
    if objects.get(&one).await?.is_some() {
        let r = &t.resource;
        return Err(ApiError::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", r.qualified()),
        )
        .about(r, &name));
    }
    if dry_run(request) {
        return Ok(Answer::Json(201, object));
    }
    let stored = objects.create(&one, object, &manager(request)).await?;
    Ok(Answer::Json(201, stored))
}

/// A 409 unless the object's `resourceVersion` (when it names one) is the current one.
fn check_version(t: &Target, object: &Value, current: &Value) -> Result<(), ApiError> {
    let sent = object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if sent.is_empty() || Some(sent) == current["metadata"]["resourceVersion"].as_str() {
        return Ok(());
    }
    let r = &t.resource;
    Err(ApiError::new(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} {:?}: the object has been modified; please apply your changes to the latest version and try again",
            r.qualified(),
            t.name
        ),
    )
    .about(r, &t.name))
}

/// Writes a replaced or patched object: through `status` or as a whole.
async fn replace(
    objects: &dyn Objects,
    request: &Request,
    t: &Target,
    mut object: Value,
) -> Result<Answer, ApiError> {
    let (name, namespace) = identity(t, &mut object, &t.name)?;
    if dry_run(request) {
        return Ok(Answer::Json(200, object));
    }
    let one = t.named(&name, &namespace);
    let stored = if t.subresource == "status" {
        objects.update_status(&one, object).await?
    } else {
        objects.update(&one, object, &manager(request)).await?
    };
    Ok(written(t, 200, stored))
}

async fn update(objects: &dyn Objects, request: &Request, t: &Target) -> Result<Answer, ApiError> {
    let sent = body(request)?;
    if t.subresource != "scale" {
        check_body(request, t, &sent)?;
    }
    let existing = objects.get(t).await?.ok_or_else(|| t.not_found(&t.name))?;
    let object = if t.subresource == "scale" {
        let mut o = existing.clone();
        o["spec"]["replicas"] = sent["spec"]["replicas"].clone();
        o
    } else {
        sent
    };
    check_version(t, &object, &existing)?;
    replace(objects, request, t, object).await
}

async fn apply(objects: &dyn Objects, request: &Request, t: &Target) -> Result<Answer, ApiError> {
    let mut object = body(request)?;
    let (name, namespace) = identity(t, &mut object, &t.name)?;
    let Some(manager) = request.param("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request(
            "PATCH of type application/apply-patch+yaml needs a fieldManager parameter".into(),
        ));
    };
    let existing = objects.get(t).await?;
    if dry_run(request) {
        return Ok(Answer::Json(200, object));
    }
    let one = t.named(&name, &namespace);
    let stored = objects
        .apply(&one, object, &manager, request.flag("force"))
        .await?;
    Ok(Answer::Json(
        if existing.is_none() { 201 } else { 200 },
        stored,
    ))
}

async fn patch_object(
    objects: &dyn Objects,
    request: &Request,
    t: &Target,
) -> Result<Answer, ApiError> {
    let body = body(request)?;
    let patch_of = |object: &mut Value| -> Result<(), String> {
        match request.content_type.as_str() {
            "application/json-patch+json" => {
                patch::json_patch(object, &body).map_err(|e| e.to_string())
            }
            "application/merge-patch+json" => {
                patch::merge(object, &body);
                Ok(())
            }
            _ => {
                patch::strategic(object, &body);
                Ok(())
            }
        }
    };
    let ct = request.content_type.as_str();
    if !matches!(
        ct,
        "application/json-patch+json"
            | "application/merge-patch+json"
            | "application/strategic-merge-patch+json"
    ) {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (not {ct:?})"
            ),
        ));
    }
    let existing = objects.get(t).await?.ok_or_else(|| t.not_found(&t.name))?;
    let scaling = t.subresource == "scale";
    let mut object = if scaling {
        scale_of(&existing)
    } else {
        existing.clone()
    };
    patch_of(&mut object).map_err(|e| {
        ApiError::new(
            422,
            "Invalid",
            format!(
                "the patch of {} {:?} cannot be applied: {e}",
                t.resource.qualified(),
                t.name
            ),
        )
    })?;
    if !scaling {
        check_patch(request, t, &body, &object)?;
    }
    if scaling {
        let replicas = object["spec"]["replicas"].clone();
        object = existing;
        object["spec"]["replicas"] = replicas;
    }
    replace(objects, request, t, object).await
}

async fn delete(objects: &dyn Objects, request: &Request, t: &Target) -> Result<Answer, ApiError> {
    match objects.delete(t, propagation(request)).await? {
        Some(gone) => Ok(Answer::Json(200, gone)),
        None => Err(t.not_found(&t.name)),
    }
}

async fn delete_collection(
    objects: &dyn Objects,
    request: &Request,
    t: &Target,
) -> Result<Answer, ApiError> {
    let (items, _) = selection(objects, request, t).await?;
    let mut deleted = Vec::new();
    for o in items {
        let one = t.named(
            o["metadata"]["name"].as_str().unwrap_or_default(),
            o["metadata"]["namespace"].as_str().unwrap_or_default(),
        );
        // A dependent of an earlier one may be gone already.
        if objects.delete(&one, propagation(request)).await?.is_some() {
            deleted.push(o);
        }
    }
    Ok(list_of(t, deleted, json!({})))
}

async fn watch(objects: &dyn Objects, request: &Request, t: &Target) -> Result<Answer, ApiError> {
    let watch = Watch {
        selectors: selectors(objects, request)?,
        since: request
            .param("resourceVersion")
            .and_then(|v| v.parse().ok()),
        timeout: request.param("timeoutSeconds").and_then(|s| s.parse().ok()),
    };
    Ok(Answer::Lines(objects.watch(t, watch).await?))
}

#[cfg(test)]
mod tests;

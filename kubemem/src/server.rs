//! The HTTP serving of a [`Store`] (I/O): `/version`, health, discovery (`/api`, `/apis`,
//! `/api/v1`, `/apis/<group>/<version>`), OpenAPI v3 ([`crate::openapi`]), and for every
//! resource the collection and item paths (namespaced and cluster-scoped) with GET (list and
//! get with label and field selectors, `?watch=true`), POST (`dryRun` answered without storing),
//! PUT (`/status` too), PATCH (server-side apply, merge, strategic merge, JSON patch), DELETE
//! (with `propagationPolicy`) and `deletecollection`, answering errors as `Status` objects;
//! and pod logs (`GET …/pods/<name>/log`: numbered lines, with `follow=true` one every 100 ms
//! until the client goes away, counted in [`Store::log_streams`]).
//!
//! Who may do what is not this module's: a [`Gate`] sees every request first ([`Gate::front`]:
//! it may answer it, and says whom it acts as) and judges every resource request made as
//! someone ([`Gate::judge`]). [`Open`] lets everything through; the testkit's gate holds its
//! access rules, tokens and request log.

use crate::Options;
use crate::openapi;
use crate::resources::{self, Resource};
use crate::select::Selectors;
use crate::status::ApiError;
use crate::store::{ObjectKey, PatchType, Propagation, Store};
use crate::watch;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest request body the server reads, as a Kubernetes API server's default (`3 MiB`).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// How long a watch that names no `timeoutSeconds` runs.
pub const DEFAULT_WATCH_TIMEOUT: u64 = 60;

/// One request, read whole.
#[derive(Debug)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path.
    pub path: String,
    /// The query string as sent (`None` when there is none).
    pub raw_query: Option<String>,
    /// The decoded query parameters.
    pub query: Vec<(String, String)>,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Request {
    /// A request for `uri`.
    pub fn new(method: Method, uri: &Uri, headers: HeaderMap, body: Bytes) -> Self {
        Self {
            method,
            path: uri.path().to_string(),
            raw_query: uri.query().map(str::to_string),
            query: query(uri.query().unwrap_or_default()),
            headers,
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

    /// `METHOD /path?query`, as request logs show it.
    pub fn line(&self) -> String {
        match &self.raw_query {
            Some(qs) => format!("{} {}?{qs}", self.method, self.path),
            None => format!("{} {}", self.method, self.path),
        }
    }

    /// The path's segments.
    pub fn segments(&self) -> Vec<&str> {
        self.path.trim_matches('/').split('/').collect()
    }
}

/// Who a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user name.
    pub user: String,
    /// Its groups.
    pub groups: Vec<String>,
}

/// What a resource request asks to do, for [`Gate::judge`].
#[derive(Debug)]
pub struct Check<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'static str,
    /// The resource's group.
    pub group: &'a str,
    /// The resource's plural.
    pub plural: &'a str,
    /// `""` for cluster-scoped resources and requests across namespaces.
    pub namespace: &'a str,
    /// The object's name (`""` for a collection).
    pub name: String,
    /// The body (`null` when there is none).
    pub object: &'a Value,
}

/// What [`Gate::front`] decided.
pub enum Front {
    /// Answer the request with this.
    Answer(Response),
    /// Serve it, as this caller (`None`: not judged).
    Pass(Option<Caller>),
}

/// Who may do what: the policy a server is started with.
pub trait Gate: Send + Sync + 'static {
    /// Sees every request first, under the store's lock.
    fn front(&self, store: &mut Store, options: &Options, request: &Request) -> Front;
    /// Judges a resource request made as `caller`: a 403 `Forbidden` refuses it.
    fn judge(&self, store: &Store, caller: &Caller, check: &Check<'_>) -> Result<(), ApiError>;
}

/// The gate that lets every request through, unjudged.
#[derive(Debug, Clone, Copy, Default)]
pub struct Open;

impl Gate for Open {
    fn front(&self, store: &mut Store, options: &Options, request: &Request) -> Front {
        if request.path == "/version" {
            return Front::Answer(version(options));
        }
        match open(store, request) {
            Some(resp) => Front::Answer(resp),
            None => Front::Pass(None),
        }
    }

    fn judge(&self, _: &Store, _: &Caller, _: &Check<'_>) -> Result<(), ApiError> {
        Ok(())
    }
}

struct Shared {
    store: Arc<Mutex<Store>>,
    options: Options,
    gate: Arc<dyn Gate>,
}

/// The router of a server over `store`, with `gate` in front.
pub fn router(store: Arc<Mutex<Store>>, options: Options, gate: Arc<dyn Gate>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(Shared {
            store,
            options,
            gate,
        }))
}

/// A JSON answer.
pub fn json_response(code: u16, v: &Value) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// An error answer: its `Status`.
pub fn error(e: &ApiError) -> Response {
    json_response(e.code, &e.status())
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

/// `(major, minor)` of a `gitVersion` (`v1.30.2+k3s1` → `1`, `30`).
pub fn parse_version(git: &str) -> (String, String) {
    let v = git.trim_start_matches('v');
    let mut parts = v.split(['.', '+', '-']);
    (
        parts.next().unwrap_or("1").to_string(),
        parts.next().unwrap_or("30").to_string(),
    )
}

/// `/version`.
pub fn version(options: &Options) -> Response {
    let (major, minor) = parse_version(&options.git_version);
    json_response(
        200,
        &json!({
            "major": major, "minor": minor, "gitVersion": options.git_version,
            "platform": "linux/amd64", "goVersion": "go1.22", "compiler": "gc",
            "gitCommit": "0000000", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        }),
    )
}

/// The paths open to everyone: pod logs, health, `/api`, `/apis`, `/api/v1` and OpenAPI;
/// `None` for every other path.
pub fn open(store: &Store, request: &Request) -> Option<Response> {
    let segs = request.segments();
    if request.method == Method::GET
        && let ["api", "v1", "namespaces", _, "pods", pod, "log"] = segs.as_slice()
    {
        return Some(pod_log(
            pod,
            request.flag("follow"),
            store.log_streams.clone(),
        ));
    }
    let resp = match segs.as_slice() {
        ["readyz" | "livez" | "healthz"] => (StatusCode::OK, "ok").into_response(),
        ["api"] => json_response(
            200,
            &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        ["apis"] => json_response(200, &resources::group_list(store.resources())),
        ["api", "v1"] => json_response(
            200,
            &resources::resource_list("v1", store.resources()).unwrap_or(Value::Null),
        ),
        ["openapi", "v3"] => json_response(200, &openapi::root(store.resources())),
        ["openapi", "v3", rest @ ..] => {
            match openapi::group_version(&rest.join("/"), store.resources()) {
                Some(doc) => json_response(200, &doc),
                None => error(&ApiError::new(
                    404,
                    "NotFound",
                    "no such OpenAPI document".into(),
                )),
            }
        }
        _ => return None,
    };
    Some(resp)
}

/// Counts an open log stream while it lives.
struct LogGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A pod's log: `<pod> line <n>` lines, three of them, or with `follow` one every 100 ms for as
/// long as the client reads (counted in `open` meanwhile).
fn pod_log(pod: &str, follow: bool, open: Arc<std::sync::atomic::AtomicUsize>) -> Response {
    open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let guard = LogGuard(open);
    let pod = pod.to_string();
    let lines = futures::stream::unfold((1u64, guard), move |(n, guard)| {
        let pod = pod.clone();
        async move {
            if !follow && n > 3 {
                return None;
            }
            if n > 1 && follow {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let line = Ok::<_, std::convert::Infallible>(Bytes::from(format!("{pod} line {n}\n")));
            Some((line, (n + 1, guard)))
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(lines),
    )
        .into_response()
}

/// What a resource path names.
struct Target {
    resource: Resource,
    namespace: String,
    name: Option<String>,
    status: bool,
}

impl Target {
    fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(
            &self.resource.group,
            &self.resource.plural,
            &self.namespace,
            name,
        )
    }
}

fn parse_target(store: &Store, segs: &[&str]) -> Option<Target> {
    // `/api/v1/namespaces/<name>` is the Namespace object itself.
    let namespace_object = match segs {
        ["api", "v1", "namespaces"] => Some((None, false)),
        ["api", "v1", "namespaces", name] => Some((Some(name.to_string()), false)),
        ["api", "v1", "namespaces", name, "status"] => Some((Some(name.to_string()), true)),
        _ => None,
    };
    if let Some((name, status)) = namespace_object {
        return store
            .resource("", "v1", "namespaces")
            .map(|resource| Target {
                resource,
                namespace: String::new(),
                name,
                status,
            });
    }
    let (group, version, rest) = match segs {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, rest): (&str, &[&str]) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (*ns, tail),
        _ => ("", rest),
    };
    let (plural, name, status) = match rest {
        [plural] => (*plural, None, false),
        [plural, name] => (*plural, Some(name.to_string()), false),
        [plural, name, "status"] => (*plural, Some(name.to_string()), true),
        _ => return None,
    };
    let resource = store.resource(group, version, plural)?;
    if !resource.namespaced && !namespace.is_empty() {
        return None;
    }
    Some(Target {
        resource,
        namespace: namespace.to_string(),
        name,
        status,
    })
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = Request::new(method, &uri, headers, body);
    let mut store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
    let caller = match shared.gate.front(&mut store, &shared.options, &request) {
        Front::Answer(resp) => return resp,
        Front::Pass(caller) => caller,
    };
    let segs = request.segments();
    if let ["apis", group, version] = segs.as_slice() {
        let gv = format!("{group}/{version}");
        return match resources::resource_list(&gv, store.resources()) {
            Some(list) => json_response(200, &list),
            None => error(&ApiError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource ({gv})"),
            )),
        };
    }
    let Some(t) = parse_target(&store, &segs) else {
        return error(&ApiError::new(
            404,
            "NotFound",
            format!(
                "the server could not find the requested resource ({})",
                request.path
            ),
        ));
    };
    if let Some(caller) = &caller {
        let object: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let check = Check {
            verb: verb(&request, &t),
            group: &t.resource.group,
            plural: &t.resource.plural,
            namespace: &t.namespace,
            name: t
                .name
                .clone()
                .or_else(|| object["metadata"]["name"].as_str().map(str::to_string))
                .unwrap_or_default(),
            object: &object,
        };
        if let Err(e) = shared.gate.judge(&store, caller, &check) {
            return error(&e);
        }
    }
    if request.method == Method::GET && t.name.is_none() && request.flag("watch") {
        return start_watch(store, &request, t);
    }
    let result = serve(&mut store, &request, &t);
    match result {
        Ok(v) => json_response(
            if request.method == Method::POST {
                201
            } else {
                200
            },
            &v,
        ),
        Err(e) => error(&e),
    }
}

/// The RBAC verb of a resource request.
fn verb(request: &Request, t: &Target) -> &'static str {
    match (&request.method, &t.name) {
        (&Method::GET, None) if request.flag("watch") => "watch",
        (&Method::GET, None) => "list",
        (&Method::GET, Some(_)) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, None) => "deletecollection",
        (&Method::DELETE, Some(_)) => "delete",
        _ => "unknown",
    }
}

fn selectors(request: &Request) -> Result<Selectors, ApiError> {
    Selectors::parse(
        request.param("labelSelector").as_deref(),
        request.param("fieldSelector").as_deref(),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The request body: JSON, or YAML for an apply patch (as kubectl may send it).
fn body_json(request: &Request, yaml: bool) -> Result<Value, ApiError> {
    serde_json::from_slice(&request.body).or_else(|e| {
        let parsed = yaml
            .then(|| serde_yaml::from_slice::<Value>(&request.body).ok())
            .flatten();
        parsed.ok_or_else(|| ApiError::bad_request(format!("body is not JSON: {e}")))
    })
}

fn missing(name: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("\"{name}\" not found"))
}

/// Serves a resource request but a watch.
fn serve(store: &mut Store, request: &Request, t: &Target) -> Result<Value, ApiError> {
    let method = &request.method;
    if *method == Method::POST && request.param("dryRun").is_some() {
        // A dry run answers as a create would, and stores nothing.
        let mut obj = body_json(request, false)?;
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if store.get(&t.key(&name)).is_some() {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", t.resource.plural),
            ));
        }
        if !t.namespace.is_empty() {
            obj["metadata"]["namespace"] = Value::String(t.namespace.clone());
        }
        return Ok(obj);
    }
    let manager = request
        .param("fieldManager")
        .unwrap_or_else(|| "unknown".into());
    match (method, &t.name) {
        (&Method::GET, None) => {
            let selectors = selectors(request)?;
            let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
            let (items, rv) = store.list(&t.resource.group, &t.resource.plural, ns);
            let items: Vec<Value> = items.into_iter().filter(|o| selectors.matches(o)).collect();
            Ok(json!({
                "apiVersion": t.resource.api_version(),
                "kind": format!("{}List", t.resource.kind),
                "metadata": {"resourceVersion": rv},
                "items": items,
            }))
        }
        (&Method::GET, Some(name)) => store.get(&t.key(name)).cloned().ok_or_else(|| ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{name}\" not found", t.resource.plural),
            causes: Vec::new(),
        }),
        (&Method::POST, None) => {
            let obj = body_json(request, false)?;
            store.create(
                &t.resource.group,
                &t.resource.plural,
                &t.namespace,
                obj,
                &manager,
            )
        }
        (&Method::PUT, Some(name)) if t.status => {
            let obj = body_json(request, false)?;
            if store.set_status(&t.key(name), obj["status"].clone()) {
                store
                    .get(&t.key(name))
                    .cloned()
                    .ok_or_else(|| missing(name))
            } else {
                Err(missing(name))
            }
        }
        (&Method::PUT, Some(name)) => {
            let obj = body_json(request, false)?;
            store.replace(&t.key(name), obj, &manager)
        }
        (&Method::PATCH, Some(name)) => {
            let ct = request
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let ct = ct.split(';').next().unwrap_or_default().trim();
            let kind = match ct {
                "application/apply-patch+yaml" | "application/apply-patch+json" => None,
                "application/merge-patch+json" => Some(PatchType::Merge),
                "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
                "application/json-patch+json" => Some(PatchType::Json),
                other => {
                    return Err(ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        format!(
                            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (not {other:?})"
                        ),
                    ));
                }
            };
            let patch = body_json(request, kind.is_none())?;
            match kind {
                None => store.apply(&t.key(name), patch, &manager, request.flag("force")),
                Some(kind) => store.patch(&t.key(name), kind, &patch, &manager),
            }
        }
        (&Method::DELETE, Some(name)) => store.delete(&t.key(name), propagation(request)),
        (&Method::DELETE, None) => {
            let selectors = selectors(request)?;
            let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
            let (items, _) = store.list(&t.resource.group, &t.resource.plural, ns);
            let mut deleted = Vec::new();
            for o in items.into_iter().filter(|o| selectors.matches(o)) {
                let key = ObjectKey::new(
                    &t.resource.group,
                    &t.resource.plural,
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default(),
                );
                // A dependent of an earlier one may be gone already.
                if let Ok(gone) = store.delete(&key, propagation(request)) {
                    deleted.push(gone);
                }
            }
            Ok(json!({
                "apiVersion": t.resource.api_version(),
                "kind": format!("{}List", t.resource.kind),
                "metadata": {},
                "items": deleted,
            }))
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {}", request.path),
        )),
    }
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

/// Starts a watch: subscribes and reads the history under the store's lock, so nothing falls
/// between, then streams without it.
fn start_watch(store: std::sync::MutexGuard<'_, Store>, request: &Request, t: Target) -> Response {
    let selectors = match selectors(request) {
        Ok(s) => s,
        Err(e) => return error(&e),
    };
    let timeout = request
        .param("timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let rx = store.events.subscribe();
    let replay = match request
        .param("resourceVersion")
        .and_then(|v| v.parse::<u64>().ok())
    {
        Some(from) => store.events_since(from),
        None => Some(Vec::new()),
    };
    drop(store);
    let Some(replay) = replay else {
        return (
            StatusCode::OK,
            String::from_utf8_lossy(&watch::expired()).into_owned(),
        )
            .into_response();
    };
    let filter = watch::Filter {
        group: t.resource.group,
        plural: t.resource.plural,
        namespace: t.namespace,
        selectors,
    };
    let until = watch::deadline(tokio::time::Instant::now(), timeout);
    let lines = futures::StreamExt::map(watch::from_history(rx, replay, filter, until), |b| {
        Ok::<_, std::convert::Infallible>(b)
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(lines),
    )
        .into_response()
}

#[cfg(test)]
mod tests;

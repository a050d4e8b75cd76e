//! The HTTP serving of a [`Store`] (I/O): the [`engine`](crate::engine)'s requests over a
//! store behind a mutex ([`Served`], the engine's [`Objects`] of a [`Store`]), with a [`Gate`]
//! in front; and pod logs (`GET …/pods/<name>/log`: numbered lines, with `follow=true` one every
//! 100 ms until the client goes away, counted in [`Store::log_streams`]).
//!
//! Who may do what is not this module's: a [`Gate`] sees every request first ([`Gate::front`]:
//! it may answer it, and says whom it acts as) and judges every resource request made as
//! someone ([`Gate::judge`]). [`Open`] lets everything through; the testkit's gate holds its
//! access rules, tokens and request log.

use crate::Options;
use crate::engine::{self, Answer, Lines, Objects, Route, Target, Watch};
use crate::resources::Resource;
use crate::status::ApiError;
use crate::store::{ObjectKey, Propagation, Store};
use crate::watch;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::engine::{decode, parse_version, query};

/// Largest request body the server reads, as a Kubernetes API server's default (`3 MiB`).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// How long a watch that names no `timeoutSeconds` runs.
pub const DEFAULT_WATCH_TIMEOUT: u64 = 60;

/// One request, read whole: the engine's request (its fields through `Deref`), with the query
/// as sent and the headers, for a [`Gate`].
#[derive(Debug)]
pub struct Request {
    /// What the engine serves.
    pub call: engine::Request,
    /// The query string as sent (`None` when there is none).
    pub raw_query: Option<String>,
    /// The headers.
    pub headers: HeaderMap,
}

impl Request {
    /// A request for `uri`.
    pub fn new(method: Method, uri: &Uri, headers: HeaderMap, body: Bytes) -> Self {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        Self {
            call: engine::Request::new(
                method,
                uri.path(),
                uri.query().unwrap_or_default(),
                content_type,
                body,
            ),
            raw_query: uri.query().map(str::to_string),
            headers,
        }
    }

    /// `METHOD /path?query`, as request logs show it.
    pub fn line(&self) -> String {
        match &self.raw_query {
            Some(qs) => format!("{} {}?{qs}", self.method, self.path),
            None => format!("{} {}", self.method, self.path),
        }
    }
}

impl std::ops::Deref for Request {
    type Target = engine::Request;

    fn deref(&self) -> &engine::Request {
        &self.call
    }
}

impl std::ops::DerefMut for Request {
    fn deref_mut(&mut self) -> &mut engine::Request {
        &mut self.call
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
    served: Served,
    gate: Arc<dyn Gate>,
}

/// The router of a server over `store`, with `gate` in front.
pub fn router(store: Arc<Mutex<Store>>, options: Options, gate: Arc<dyn Gate>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(Shared {
            served: Served { store, options },
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

/// The response of an engine's answer.
pub fn respond(answer: Answer) -> Response {
    match answer {
        Answer::Json(code, v) => json_response(code, &v),
        Answer::Text(text) => (StatusCode::OK, text).into_response(),
        Answer::Lines(lines) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(futures::StreamExt::map(lines, |b| {
                Ok::<_, std::convert::Infallible>(b)
            })),
        )
            .into_response(),
    }
}

/// `/version`.
pub fn version(options: &Options) -> Response {
    respond(engine::version(&options.git_version))
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
    let route = engine::route(&segs, store.resources());
    match &route {
        Route::Health | Route::Api | Route::Groups | Route::OpenApiRoot | Route::OpenApi(_) => {}
        Route::Discovery(gv) if gv == "v1" => {}
        _ => return None,
    }
    engine::document(&route, store.resources()).map(respond)
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

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = Request::new(method, &uri, headers, body);
    let (caller, resources) = {
        let mut store = shared.served.lock();
        match shared
            .gate
            .front(&mut store, &shared.served.options, &request)
        {
            Front::Answer(resp) => return resp,
            Front::Pass(caller) => (caller, store.resources().to_vec()),
        }
    };
    let target = match engine::route(&request.segments(), &resources) {
        Route::Resource(target) => target,
        Route::Version => return version(&shared.served.options),
        other => {
            return engine::document(&other, &resources)
                .map_or_else(|| version(&shared.served.options), respond);
        }
    };
    if let Some(caller) = &caller
        && let Err(e) = judge(&shared, caller, &request, &target)
    {
        return error(&e);
    }
    respond(engine::resource(&shared.served, &request, target).await)
}

/// The gate's judgement of a resource request made as `caller`.
fn judge(
    shared: &Shared,
    caller: &Caller,
    call: &engine::Request,
    t: &Target,
) -> Result<(), ApiError> {
    let object: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
    let name = if t.name.is_empty() {
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    } else {
        t.name.clone()
    };
    let check = Check {
        verb: engine::verb(call, t),
        group: &t.resource.group,
        plural: &t.resource.plural,
        namespace: &t.namespace,
        name,
        object: &object,
    };
    shared.gate.judge(&shared.served.lock(), caller, &check)
}

/// A [`Store`] behind a mutex, with its server's options: the engine's [`Objects`] (each
/// operation under the lock, none held across an await).
pub struct Served {
    /// The store.
    pub store: Arc<Mutex<Store>>,
    /// The server's options (`/version`).
    pub options: Options,
}

impl Served {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn key(t: &Target) -> ObjectKey {
    ObjectKey::new(&t.resource.group, &t.resource.plural, &t.namespace, &t.name)
}

#[async_trait::async_trait]
impl Objects for Served {
    fn cluster(&self) -> &str {
        "an in-memory cluster"
    }

    async fn git_version(&self) -> String {
        self.options.git_version.clone()
    }

    async fn resources(&self) -> Vec<Resource> {
        self.lock().resources().to_vec()
    }

    async fn get(&self, t: &Target) -> Result<Option<Value>, ApiError> {
        Ok(self.lock().get(&key(t)).cloned())
    }

    async fn list(&self, t: &Target) -> Result<(Vec<Value>, String), ApiError> {
        let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
        Ok(self.lock().list(&t.resource.group, &t.resource.plural, ns))
    }

    async fn create(&self, t: &Target, object: Value, manager: &str) -> Result<Value, ApiError> {
        let r = &t.resource;
        self.lock()
            .create(&r.group, &r.plural, &t.namespace, object, manager)
    }

    async fn update(&self, t: &Target, object: Value, manager: &str) -> Result<Value, ApiError> {
        self.lock().replace(&key(t), object, manager)
    }

    async fn update_status(&self, t: &Target, object: Value) -> Result<Value, ApiError> {
        let mut store = self.lock();
        if !store.set_status(&key(t), object["status"].clone()) {
            return Err(t.not_found(&t.name));
        }
        store
            .get(&key(t))
            .cloned()
            .ok_or_else(|| t.not_found(&t.name))
    }

    async fn apply(
        &self,
        t: &Target,
        object: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        self.lock().apply(&key(t), object, manager, force)
    }

    async fn delete(
        &self,
        t: &Target,
        propagation: Propagation,
    ) -> Result<Option<Value>, ApiError> {
        match self.lock().delete(&key(t), propagation) {
            Ok(gone) => Ok(Some(gone)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Subscribes and reads the history under the store's lock, so nothing falls between;
    /// streams without it. A watch that names no timeout runs [`DEFAULT_WATCH_TIMEOUT`].
    async fn watch(&self, t: &Target, w: Watch) -> Result<Lines, ApiError> {
        let (rx, replay) = {
            let store = self.lock();
            let rx = store.events.subscribe();
            let replay = match w.since {
                Some(from) => store.events_since(from),
                None => Some(Vec::new()),
            };
            (rx, replay)
        };
        let Some(replay) = replay else {
            return Ok(Box::pin(futures::stream::iter([watch::expired()])));
        };
        let filter = watch::Filter {
            group: t.resource.group.clone(),
            plural: t.resource.plural.clone(),
            namespace: t.namespace.clone(),
            selectors: w.selectors,
        };
        let timeout = w.timeout.unwrap_or(DEFAULT_WATCH_TIMEOUT);
        let until = watch::deadline(tokio::time::Instant::now(), timeout);
        Ok(Box::pin(watch::from_history(rx, replay, filter, until)))
    }
}

#[cfg(test)]
mod tests;

//! The fake server's HTTP routes: `/version`, `/readyz`, discovery (`/api`, `/apis`,
//! `/api/v1`, `/apis/<group>/<version>`), and for every resource the collection and item paths
//! (namespaced and cluster-scoped) with GET (list, get, `?watch=true`), POST, PUT, PATCH (apply,
//! merge) and DELETE, answering errors as `Status` objects; and the SubjectAccessReview create
//! (`POST /apis/authorization.k8s.io/v1/subjectaccessreviews`); and pod logs
//! (`GET /api/v1/namespaces/<ns>/pods/<name>/log`, not judged): numbered lines, with
//! `follow=true` one every 100 ms until the client goes away ([`pod_log`]). Resource requests and reviews
//! are judged ([`authorize`]) as the user they impersonate, or as the caller the test named;
//! version, health and discovery are open to all.

use super::FakeOptions;
use super::resources::{self, Resource};
use super::store::{ApiError, ObjectKey, Propagation, Store};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Shared = (Arc<Mutex<Store>>, Arc<FakeOptions>);

/// Largest request body the fake reads, as a Kubernetes API server's default (`3 MiB`).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The router of a fake server over `state`.
pub fn router(state: Arc<Mutex<Store>>, options: FakeOptions) -> Router {
    Router::new()
        .fallback(handle)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state((state, Arc::new(options)))
}

fn json_response(code: u16, v: &Value) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn error(e: &ApiError) -> Response {
    json_response(e.code, &e.status())
}

fn query(uri: &Uri) -> Vec<(String, String)> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
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

/// What a resource path names.
/// Counts an open log stream while it lives.
struct Open(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A pod's log: `<pod> line <n>` lines, three of them, or with `follow` one every 100 ms for as
/// long as the client reads (counted in `open` meanwhile).
fn pod_log(pod: &str, follow: bool, open: Arc<std::sync::atomic::AtomicUsize>) -> Response {
    open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let guard = Open(open);
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

struct Target {
    resource: Resource,
    namespace: String,
    name: Option<String>,
    status: bool,
}

fn parse_target(store: &Store, path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
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
    // `/api/v1/namespaces/<name>` is the Namespace object itself.
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

fn namespace_object_path(path: &str) -> Option<(String, bool)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["api", "v1", "namespaces"] => Some((String::new(), false)),
        ["api", "v1", "namespaces", name] => Some((name.to_string(), false)),
        ["api", "v1", "namespaces", name, "status"] => Some((name.to_string(), true)),
        _ => None,
    }
}

async fn handle(
    State((state, options)): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let q = query(&uri);
    let param = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut store = state.lock().unwrap_or_else(|p| p.into_inner());
    let line = match uri.query() {
        Some(qs) => format!("{method} {path}?{qs}"),
        None => format!("{method} {path}"),
    };
    store.requests.push(line.clone());
    if path == "/version" {
        let (major, minor) = parse_version(&options.git_version);
        return json_response(
            200,
            &json!({
                "major": major, "minor": minor, "gitVersion": options.git_version,
                "platform": "linux/amd64", "goVersion": "go1.22", "compiler": "gc",
                "gitCommit": "0000000", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            }),
        );
    }
    if store.unavailable {
        return json_response(
            503,
            &ApiError {
                code: 503,
                reason: "ServiceUnavailable",
                message: "the server is currently unable to handle the request".into(),
                causes: Vec::new(),
            }
            .status(),
        );
    }
    if method == Method::GET
        && let ["api", "v1", "namespaces", _, "pods", pod, "log"] = path
            .trim_matches('/')
            .split('/')
            .collect::<Vec<_>>()
            .as_slice()
    {
        let follow = param("follow").as_deref() == Some("true");
        return pod_log(pod, follow, store.log_streams.clone());
    }
    match path.as_str() {
        "/readyz" | "/livez" | "/healthz" => return (StatusCode::OK, "ok").into_response(),
        "/api" => {
            return json_response(
                200,
                &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            );
        }
        "/apis" => return json_response(200, &resources::group_list(store.resources())),
        "/api/v1" => return json_response(200, &resources::resource_list("v1", store.resources())),
        _ => {}
    }
    if method == Method::POST
        && let [
            "api",
            "v1",
            "namespaces",
            ns,
            "serviceaccounts",
            name,
            "token",
        ] = path
            .trim_matches('/')
            .split('/')
            .collect::<Vec<_>>()
            .as_slice()
    {
        return token_request(&mut store, &options, ns, name, &body);
    }
    // A ServiceAccount token this server issued acts as its ServiceAccount (while it exists
    // and the token has not expired); any other bearer but the kubeconfig's is refused.
    let service_account = match headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        Some(token) if token != FAKE_TOKEN => match authenticate(&store, token) {
            Some(user) => Some(user),
            None => {
                return error(&ApiError {
                    code: 401,
                    reason: "Unauthorized",
                    message: "Unauthorized".into(),
                    causes: Vec::new(),
                });
            }
        },
        _ => None,
    };
    // Who the request acts as: a ServiceAccount token's owner, the impersonated user (if its
    // caller may impersonate it), or the caller the test named; `None`: not judged.
    let acting = match service_account {
        Some(user) => {
            let groups = super::access::implicit_groups(&user);
            Some((user, groups))
        }
        None => match headers
            .get("impersonate-user")
            .and_then(|v| v.to_str().ok())
        {
            Some(user) => {
                let sent: Vec<String> = headers
                    .get_all("impersonate-group")
                    .iter()
                    .filter_map(|v| v.to_str().ok().map(str::to_string))
                    .collect();
                if let Err(e) = may_impersonate(&store, user, &sent) {
                    return error(&e);
                }
                store.impersonations.push(super::access::Impersonation {
                    request: line,
                    user: user.to_string(),
                    groups: sent.clone(),
                });
                // Named groups, plus system:authenticated; none named: the ServiceAccount's own.
                let groups = if sent.is_empty() {
                    super::access::implicit_groups(user)
                } else {
                    let mut groups = sent;
                    if !groups.iter().any(|g| g == "system:authenticated") {
                        groups.push("system:authenticated".into());
                    }
                    groups
                };
                Some((user.to_string(), groups))
            }
            None => store.caller.clone().map(|caller| {
                let groups = super::access::implicit_groups(&caller);
                (caller, groups)
            }),
        },
    };
    let judge = |store: &Store, check: &Check<'_>| match &acting {
        Some((user, groups)) => {
            let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
            authorize(store, check, user, &groups)
        }
        None => Ok(()),
    };
    if path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
        let review = Check {
            verb: "create",
            group: "authorization.k8s.io",
            plural: "subjectaccessreviews",
            namespace: "",
            name: String::new(),
            object: &Value::Null,
        };
        if let Err(e) = judge(&store, &review) {
            return error(&e);
        }
        if method != Method::POST {
            return error(&ApiError {
                code: 405,
                reason: "MethodNotAllowed",
                message: format!("{method} is not supported on {path}: create reviews with POST"),
                causes: Vec::new(),
            });
        }
        let answer = serde_json::from_slice::<Value>(&body)
            .map_err(|e| format!("body is not JSON: {e}"))
            .and_then(|review| super::access::review(&store.access, &review));
        return match answer {
            Ok(v) => {
                store.reviews.push(v.clone());
                json_response(201, &v)
            }
            Err(message) => error(&ApiError {
                code: 400,
                reason: "BadRequest",
                message,
                causes: Vec::new(),
            }),
        };
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let ["apis", group, version] = segs.as_slice() {
        let gv = format!("{group}/{version}");
        if !store.resources().iter().any(|r| r.group_version() == gv) {
            return error(&ApiError {
                code: 404,
                reason: "NotFound",
                message: format!("the server could not find the requested resource ({gv})"),
                causes: Vec::new(),
            });
        }
        return json_response(200, &resources::resource_list(&gv, store.resources()));
    }
    let target = match namespace_object_path(&path) {
        Some((name, status)) => store
            .resource("", "v1", "namespaces")
            .map(|resource| Target {
                resource,
                namespace: String::new(),
                name: (!name.is_empty()).then_some(name),
                status,
            }),
        None => parse_target(&store, &path),
    };
    let Some(t) = target else {
        return error(&ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("the server could not find the requested resource ({path})"),
            causes: Vec::new(),
        });
    };
    let body_json = || -> Result<Value, ApiError> {
        serde_json::from_slice(&body).map_err(|e| ApiError {
            code: 400,
            reason: "BadRequest",
            message: format!("body is not JSON: {e}"),
            causes: Vec::new(),
        })
    };
    if acting.is_some() {
        let object: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let name = t
            .name
            .clone()
            .or_else(|| object["metadata"]["name"].as_str().map(str::to_string))
            .unwrap_or_default();
        let verb = match (&method, &t.name) {
            (&Method::GET, None) if matches!(param("watch").as_deref(), Some("true" | "1")) => {
                "watch"
            }
            (&Method::GET, None) => "list",
            (&Method::GET, Some(_)) => "get",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, _) => "delete",
            _ => "unknown",
        };
        let check = Check {
            verb,
            group: &t.resource.group,
            plural: &t.resource.plural,
            namespace: &t.namespace,
            name,
            object: &object,
        };
        if let Err(e) = judge(&store, &check) {
            return error(&e);
        }
    }
    if method == Method::POST && param("dryRun").is_some() {
        // A dry run answers as a create would, and stores nothing.
        let dry = body_json().and_then(|mut obj| {
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let at = ObjectKey::new(&t.resource.group, &t.resource.plural, &t.namespace, &name);
            if store.get(&at).is_some() {
                return Err(ApiError {
                    code: 409,
                    reason: "AlreadyExists",
                    message: format!("{} \"{name}\" already exists", t.resource.plural),
                    causes: Vec::new(),
                });
            }
            if !t.namespace.is_empty() {
                obj["metadata"]["namespace"] = Value::String(t.namespace.clone());
            }
            Ok(obj)
        });
        return match dry {
            Ok(v) => json_response(201, &v),
            Err(e) => error(&e),
        };
    }
    let manager = param("fieldManager").unwrap_or_else(|| "unknown".into());
    let key =
        |name: &str| ObjectKey::new(&t.resource.group, &t.resource.plural, &t.namespace, name);
    let result: Result<Value, ApiError> = match (&method, &t.name) {
        (&Method::GET, None) => {
            if matches!(param("watch").as_deref(), Some("true" | "1")) {
                let timeout = param("timeoutSeconds")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(60u64);
                // Subscribe and read the history under one lock: nothing falls between.
                let rx = store.events.subscribe();
                let replay = match param("resourceVersion").and_then(|v| v.parse::<u64>().ok()) {
                    Some(from) => store.events_since(from),
                    None => Some(Vec::new()),
                };
                drop(store);
                let Some(replay) = replay else {
                    let gone = json!({"type": "ERROR", "object": {
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "too old resource version", "reason": "Expired", "code": 410,
                    }});
                    return (StatusCode::OK, format!("{gone}\n")).into_response();
                };
                return watch(rx, replay, t, Duration::from_secs(timeout));
            }
            let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
            let (items, rv) = store.list(&t.resource.group, &t.resource.plural, ns);
            Ok(json!({
                "apiVersion": t.resource.group_version(),
                "kind": format!("{}List", t.resource.kind),
                "metadata": {"resourceVersion": rv},
                "items": items,
            }))
        }
        (&Method::GET, Some(name)) => store.get(&key(name)).cloned().ok_or_else(|| ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{name}\" not found", t.resource.plural),
            causes: Vec::new(),
        }),
        (&Method::POST, None) => body_json().and_then(|obj| {
            store.create(
                &t.resource.group,
                &t.resource.plural,
                &t.namespace,
                obj,
                &manager,
            )
        }),
        (&Method::PUT, Some(name)) if t.status => body_json().and_then(|obj| {
            if store.set_status(&key(name), obj["status"].clone()) {
                store.get(&key(name)).cloned().ok_or_else(|| missing(name))
            } else {
                Err(missing(name))
            }
        }),
        (&Method::PUT, Some(name)) => {
            body_json().and_then(|obj| store.replace(&key(name), obj, &manager))
        }
        (&Method::PATCH, Some(name)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let force = matches!(param("force").as_deref(), Some("true" | "1"));
            body_json().and_then(|patch| {
                if ct.starts_with("application/apply-patch") {
                    store.apply(&key(name), patch, &manager, force)
                } else {
                    store.merge_patch(&key(name), &patch, &manager)
                }
            })
        }
        (&Method::DELETE, Some(name)) => {
            let from_body = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["propagationPolicy"].as_str().map(str::to_string));
            let policy = param("propagationPolicy").or(from_body);
            let propagation = match policy.as_deref() {
                Some("Orphan") => Propagation::Orphan,
                Some("Foreground") => Propagation::Foreground,
                _ => Propagation::Background,
            };
            store.delete(&key(name), propagation)
        }
        _ => Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: format!("{method} is not supported on {path}"),
            causes: Vec::new(),
        }),
    };
    match result {
        Ok(v) => json_response(if method == Method::POST { 201 } else { 200 }, &v),
        Err(e) => error(&e),
    }
}

/// What a request asks to do.
struct Check<'a> {
    verb: &'static str,
    group: &'a str,
    plural: &'a str,
    /// `""` for cluster-scoped resources.
    namespace: &'a str,
    /// The object's name (`""` for a list or watch).
    name: String,
    /// The body (`null` when there is none).
    object: &'a Value,
}

/// A 403 `Forbidden` as the API server words it: `<plural>[.<group>] "<name>" is forbidden:
/// <why>`.
/// The kubeconfig's token ([`super::kubeconfig`]): the caller the test names.
const FAKE_TOKEN: &str = "fake-token";

/// The ServiceAccount a bearer token issued here acts as, if it is current.
fn authenticate(store: &Store, token: &str) -> Option<String> {
    let issued = store.tokens.iter().find(|t| t.token == token)?;
    let exists = store
        .get(&ObjectKey::new(
            "",
            "serviceaccounts",
            &issued.namespace,
            &issued.name,
        ))
        .is_some();
    (exists && issued.expires > std::time::SystemTime::now())
        .then(|| format!("system:serviceaccount:{}:{}", issued.namespace, issued.name))
}

/// `POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`: a TokenRequest answered as
/// the API server does — `status.token` and `status.expirationTimestamp`, the lifetime capped
/// by [`super::FakeOptions::token_max_seconds`].
fn token_request(
    store: &mut Store,
    options: &FakeOptions,
    namespace: &str,
    name: &str,
    body: &[u8],
) -> Response {
    if store
        .get(&ObjectKey::new("", "serviceaccounts", namespace, name))
        .is_none()
    {
        return error(&missing(name));
    }
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return error(&ApiError {
                code: 400,
                reason: "BadRequest",
                message: format!("the TokenRequest is not JSON: {e}"),
                causes: Vec::new(),
            });
        }
    };
    if request["kind"]
        .as_str()
        .is_some_and(|k| k != "TokenRequest")
    {
        return error(&ApiError {
            code: 400,
            reason: "BadRequest",
            message: format!("expected a TokenRequest, got {}", request["kind"]),
            causes: Vec::new(),
        });
    }
    let asked = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(3600);
    if asked < 600 {
        return error(&ApiError {
            code: 422,
            reason: "Invalid",
            message: "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes".into(),
            causes: vec![("spec.expirationSeconds".into(), "may not specify a duration less than 10 minutes".into())],
        });
    }
    let granted = options
        .token_max_seconds
        .map_or(asked, |cap| asked.min(cap));
    let expires = std::time::SystemTime::now()
        + std::time::Duration::from_secs(u64::try_from(granted).unwrap_or(0));
    let token = format!("fake-sa.{namespace}.{name}.{}", store.tokens.len() + 1);
    store.tokens.push(super::store::IssuedToken {
        namespace: namespace.to_string(),
        name: name.to_string(),
        token: token.clone(),
        asked_seconds: asked,
        granted_seconds: granted,
        expires,
    });
    json_response(
        201,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
            "spec": {
                "audiences": request["spec"]["audiences"].clone(),
                "expirationSeconds": granted,
                "boundObjectRef": null,
            },
            "status": {
                "token": token,
                "expirationTimestamp": super::store::rfc3339(expires),
            },
        }),
    )
}

fn forbidden(group: &str, plural: &str, name: &str, why: String) -> ApiError {
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: format!(
            "{plural}{} {name:?} is forbidden: {why}",
            if group.is_empty() {
                String::new()
            } else {
                format!(".{group}")
            }
        ),
        causes: Vec::new(),
    }
}

/// `User "<user>" cannot <verb> resource "<plural>" in API group "<group>" <scope>`.
fn cannot(user: &str, verb: &str, group: &str, plural: &str, namespace: &str) -> String {
    format!(
        "User {user:?} cannot {verb} resource {plural:?} in API group {group:?}{}",
        if namespace.is_empty() {
            " at the cluster scope".to_string()
        } else {
            format!(" in the namespace {namespace:?}")
        }
    )
}

/// Whether the caller the test named may impersonate `user` and the `groups` sent, as the API
/// server checks before acting as them (nothing is checked when the test named no caller).
fn may_impersonate(store: &Store, user: &str, groups: &[String]) -> Result<(), ApiError> {
    let Some(caller) = &store.caller else {
        return Ok(());
    };
    let caller_groups = super::access::implicit_groups(caller);
    let caller_groups: Vec<&str> = caller_groups.iter().map(String::as_str).collect();
    let (plural, namespace, name) = match super::access::service_account(user) {
        Some((ns, name)) => ("serviceaccounts", ns, name),
        None => ("users", "", user),
    };
    let mut asked = vec![(plural, namespace, name)];
    asked.extend(groups.iter().map(|g| ("groups", "", g.as_str())));
    for (plural, namespace, name) in asked {
        let may = super::access::allowed(
            &store.access,
            caller,
            &caller_groups,
            "impersonate",
            "",
            plural,
            namespace,
            name,
        );
        if !may {
            return Err(forbidden(
                "",
                plural,
                name,
                cannot(caller, "impersonate", "", plural, namespace),
            ));
        }
    }
    Ok(())
}

/// Judges a request made as `user` (in `groups`) with the test's access rules, and RBAC's
/// escalation rules for writes of Roles and bindings: a 403 `Forbidden` as the API server words
/// it.
fn authorize(store: &Store, c: &Check<'_>, user: &str, groups: &[&str]) -> Result<(), ApiError> {
    let allowed = super::access::allowed(
        &store.access,
        user,
        groups,
        c.verb,
        c.group,
        c.plural,
        c.namespace,
        &c.name,
    );
    if !allowed {
        return Err(forbidden(
            c.group,
            c.plural,
            &c.name,
            cannot(user, c.verb, c.group, c.plural, c.namespace),
        ));
    }
    if c.group == "rbac.authorization.k8s.io"
        && super::access::escalates(c.plural)
        && matches!(c.verb, "create" | "update" | "patch")
    {
        let role = |kind: &str, role_name: &str| {
            let (plural, ns) = if kind == "Role" {
                ("roles", c.namespace)
            } else {
                ("clusterroles", "")
            };
            store
                .get(&ObjectKey::new(
                    "rbac.authorization.k8s.io",
                    plural,
                    ns,
                    role_name,
                ))
                .cloned()
        };
        super::access::escalation(
            &store.access,
            user,
            groups,
            c.plural,
            c.namespace,
            c.object,
            role,
        )
        .map_err(|why| forbidden(c.group, c.plural, &c.name, why))?;
    }
    Ok(())
}

fn missing(name: &str) -> ApiError {
    ApiError {
        code: 404,
        reason: "NotFound",
        message: format!("\"{name}\" not found"),
        causes: Vec::new(),
    }
}

fn parse_version(git: &str) -> (String, String) {
    let v = git.trim_start_matches('v');
    let mut parts = v.split(['.', '+', '-']);
    (
        parts.next().unwrap_or("1").to_string(),
        parts.next().unwrap_or("30").to_string(),
    )
}

/// A watch stream: the replayed events, then live ones, one JSON event per line until
/// `timeout`.
fn watch(
    rx: tokio::sync::broadcast::Receiver<super::store::WatchEvent>,
    replay: Vec<super::store::WatchEvent>,
    t: Target,
    timeout: Duration,
) -> Response {
    struct State {
        rx: tokio::sync::broadcast::Receiver<super::store::WatchEvent>,
        replay: std::collections::VecDeque<super::store::WatchEvent>,
        target: Target,
        last: u64,
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let state = State {
        rx,
        last: 0,
        replay: replay.into(),
        target: t,
    };
    let stream = futures::stream::unfold(state, move |mut st| async move {
        loop {
            let next = match st.replay.pop_front() {
                Some(ev) => Ok(Ok(ev)),
                None => tokio::time::timeout_at(deadline, st.rx.recv()).await,
            };
            let ev = match next {
                Err(_) | Ok(Err(_)) => return None,
                Ok(Ok(ev)) => ev,
            };
            // Live events already replayed from the history are skipped.
            if ev.revision <= st.last {
                continue;
            }
            st.last = ev.revision;
            let t = &st.target;
            if ev.group != t.resource.group
                || ev.resource != t.resource.plural
                || (!t.namespace.is_empty() && ev.namespace != t.namespace)
            {
                continue;
            }
            let line = format!("{}\n", json!({"type": ev.kind, "object": ev.object}));
            return Some((Ok::<_, std::convert::Infallible>(Bytes::from(line)), st));
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

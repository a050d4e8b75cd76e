//! The testkit's gate in front of the shared in-memory API server
//! ([`flotilla_kubemem::server::Gate`]): the request log, the "unavailable" switch, the
//! TokenRequest API and the tokens it issued, who a request acts as (an issued ServiceAccount
//! token's owner, an impersonated user if its caller may impersonate it, or the caller the test
//! named), SubjectAccessReviews (`POST /apis/authorization.k8s.io/v1/subjectaccessreviews`),
//! and the judgement of resource requests by the test's access rules ([`super::access`]) with
//! RBAC's escalation rules. Version, health, discovery and pod logs are open to all.

use super::access::{AccessRule, Impersonation};
use flotilla_kubemem::server::{self, Caller, Check, Front, Gate, Request, error, json_response};
use flotilla_kubemem::{ApiError, ObjectKey, Options, Store};
use serde_json::{Value, json};
use std::sync::{Mutex, MutexGuard};

/// What the testkit's gate holds.
#[derive(Debug, Default)]
pub struct Rules {
    /// Every request served: `METHOD /path?query`.
    pub requests: Vec<String>,
    /// Answer 503 to everything but `/version`.
    pub unavailable: bool,
    /// What SubjectAccessReviews allow.
    pub access: Vec<AccessRule>,
    /// Who requests that impersonate no one come from, judged by [`Rules::access`]; `None`:
    /// not judged (any token may do anything).
    pub caller: Option<String>,
    /// Every request that impersonated someone, as it was asked.
    pub impersonations: Vec<Impersonation>,
    /// Every SubjectAccessReview answered, as answered.
    pub reviews: Vec<Value>,
    /// ServiceAccount tokens issued (the TokenRequest API); a bearer token among them acts as
    /// its ServiceAccount until it expires or the ServiceAccount goes.
    pub tokens: Vec<IssuedToken>,
}

/// A ServiceAccount token the fake issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
    /// The token.
    pub token: String,
    /// `spec.expirationSeconds` as asked.
    pub asked_seconds: i64,
    /// The lifetime granted (the cap applied), in seconds.
    pub granted_seconds: i64,
    /// When it expires.
    pub expires: std::time::SystemTime,
}

/// The testkit's gate.
#[derive(Debug, Default)]
pub struct TestGate {
    rules: Mutex<Rules>,
    /// The cap of issued tokens' lifetimes ([`super::FakeOptions::token_max_seconds`]).
    token_max_seconds: Option<i64>,
}

impl TestGate {
    /// A gate with no rules, capping tokens at `token_max_seconds`.
    pub fn new(token_max_seconds: Option<i64>) -> Self {
        Self {
            rules: Mutex::default(),
            token_max_seconds,
        }
    }

    /// Its rules and records.
    pub fn rules(&self) -> MutexGuard<'_, Rules> {
        self.rules.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Gate for TestGate {
    fn front(&self, store: &mut Store, options: &Options, request: &Request) -> Front {
        let mut rules = self.rules();
        let line = request.line();
        rules.requests.push(line.clone());
        if request.path == "/version" {
            return Front::Answer(server::version(options));
        }
        if rules.unavailable {
            return Front::Answer(error(&ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request".into(),
            )));
        }
        if let Some(resp) = server::open(store, request) {
            return Front::Answer(resp);
        }
        if request.method == axum::http::Method::POST
            && let [
                "api",
                "v1",
                "namespaces",
                ns,
                "serviceaccounts",
                name,
                "token",
            ] = request.segments().as_slice()
        {
            return Front::Answer(token_request(
                store,
                &mut rules,
                self.token_max_seconds,
                ns,
                name,
                &request.body,
            ));
        }
        let caller = match acting(store, &mut rules, request, line) {
            Ok(caller) => caller,
            Err(e) => return Front::Answer(error(&e)),
        };
        if request.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
            return Front::Answer(subject_access_review(store, &mut rules, request, caller));
        }
        Front::Pass(caller)
    }

    fn judge(&self, store: &Store, caller: &Caller, check: &Check<'_>) -> Result<(), ApiError> {
        let rules = self.rules();
        let groups: Vec<&str> = caller.groups.iter().map(String::as_str).collect();
        authorize(store, &rules.access, check, &caller.user, &groups)
    }
}

/// Who the request acts as: a ServiceAccount token's owner, the impersonated user (if its
/// caller may impersonate it), or the caller the test named; `None`: not judged. A bearer token
/// that is neither the kubeconfig's nor a current issued one is a 401.
fn acting(
    store: &Store,
    rules: &mut Rules,
    request: &Request,
    line: String,
) -> Result<Option<Caller>, ApiError> {
    let headers = &request.headers;
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = bearer.filter(|t| *t != FAKE_TOKEN) {
        let Some(user) = authenticate(store, rules, token) else {
            return Err(ApiError::new(401, "Unauthorized", "Unauthorized".into()));
        };
        let groups = super::access::implicit_groups(&user);
        return Ok(Some(Caller { user, groups }));
    }
    let Some(user) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(rules.caller.clone().map(|caller| {
            let groups = super::access::implicit_groups(&caller);
            Caller {
                user: caller,
                groups,
            }
        }));
    };
    let sent: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    may_impersonate(rules, user, &sent)?;
    rules.impersonations.push(Impersonation {
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
    Ok(Some(Caller {
        user: user.to_string(),
        groups,
    }))
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`, judged as its caller's create.
fn subject_access_review(
    store: &Store,
    rules: &mut Rules,
    request: &Request,
    caller: Option<Caller>,
) -> axum::response::Response {
    let review = Check {
        verb: "create",
        group: "authorization.k8s.io",
        plural: "subjectaccessreviews",
        namespace: "",
        name: String::new(),
        object: &Value::Null,
    };
    if let Some(caller) = &caller {
        let groups: Vec<&str> = caller.groups.iter().map(String::as_str).collect();
        if let Err(e) = authorize(store, &rules.access, &review, &caller.user, &groups) {
            return error(&e);
        }
    }
    if request.method != axum::http::Method::POST {
        return error(&ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "{} is not supported on {}: create reviews with POST",
                request.method, request.path
            ),
        ));
    }
    let answer = serde_json::from_slice::<Value>(&request.body)
        .map_err(|e| format!("body is not JSON: {e}"))
        .and_then(|review| super::access::review(&rules.access, &review));
    match answer {
        Ok(v) => {
            rules.reviews.push(v.clone());
            json_response(201, &v)
        }
        Err(message) => error(&ApiError::bad_request(message)),
    }
}

/// The kubeconfig's token ([`super::kubeconfig`]): the caller the test names.
const FAKE_TOKEN: &str = "fake-token";

/// The ServiceAccount a bearer token issued here acts as, if it is current.
fn authenticate(store: &Store, rules: &Rules, token: &str) -> Option<String> {
    let issued = rules.tokens.iter().find(|t| t.token == token)?;
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
    store: &Store,
    rules: &mut Rules,
    token_max_seconds: Option<i64>,
    namespace: &str,
    name: &str,
    body: &[u8],
) -> axum::response::Response {
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
                details: Default::default(),
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
            details: Default::default(),
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
            details: Default::default(),
        });
    }
    let granted = token_max_seconds.map_or(asked, |cap| asked.min(cap));
    let expires = std::time::SystemTime::now()
        + std::time::Duration::from_secs(u64::try_from(granted).unwrap_or(0));
    let token = format!("fake-sa.{namespace}.{name}.{}", rules.tokens.len() + 1);
    rules.tokens.push(IssuedToken {
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
                "expirationTimestamp": flotilla_kubemem::store::rfc3339(expires),
            },
        }),
    )
}

/// A 403 `Forbidden` as the API server words it: `<plural>[.<group>] "<name>" is forbidden:
/// <why>`.
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
        details: Default::default(),
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
fn may_impersonate(rules: &Rules, user: &str, groups: &[String]) -> Result<(), ApiError> {
    let Some(caller) = &rules.caller else {
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
            &rules.access,
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
fn authorize(
    store: &Store,
    access: &[AccessRule],
    c: &Check<'_>,
    user: &str,
    groups: &[&str],
) -> Result<(), ApiError> {
    let allowed = super::access::allowed(
        access,
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
        super::access::escalation(access, user, groups, c.plural, c.namespace, c.object, role)
            .map_err(|why| forbidden(c.group, c.plural, &c.name, why))?;
    }
    Ok(())
}

fn missing(name: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("\"{name}\" not found"))
}

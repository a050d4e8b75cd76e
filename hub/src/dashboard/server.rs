//! The dashboard's HTTP(S) server (I/O): an [`axum::Router`] with one handler per page or
//! action, authentication ([`super::auth`]'s pure rules) as an extractor, the host check and
//! the security headers as a middleware layer; each handler reads the hub's in-memory views
//! and renders ([`super::overview`], [`super::clusters`], …) — nothing here reads the store.
//! Connections are accepted, bounded and served by [`crate::webserver`] like the cluster proxy.

use super::auth::{self, Refusal, Sessions, Via, Viewer};
use super::html::{self, Frame, Nav, U};
use super::live::Live;
use super::route::{self, NoRoute};
use super::{act, cluster, clusters, overview, placements, policies, rollouts, work, works};
use crate::grants::{Target, Verb};
use crate::grpc::guard::Visibility;
use crate::inventory::{ClusterInventory, WorkInventory};
use crate::keys::ObjectRef;
use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use http_body_util::StreamBody;
use hyper::body::Incoming;
use maud::{Markup, html};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::watch;
use tower::ServiceExt;
use tracing::Instrument;

/// The largest form the dashboard reads (sign-in, actions).
const MAX_FORM: usize = 16 * 1024;
/// The most cluster names a page may follow live.
const MAX_FOLLOWED: usize = 1000;

/// The script and the stylesheet, compiled into the binary.
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// What pages may load and where forms may go: this server only, no inline script — a value
/// that escaped its escaping still would not run.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; connect-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// What the server reads and whom it lets in.
pub struct Deps {
    /// On an open hub (no tokens), the hosts it answers ([`crate::hosts`]): DNS rebinding.
    pub hosts: Option<crate::hosts::AllowedHosts>,
    /// Every cluster.
    pub inventory: ClusterInventory,
    /// Every work.
    pub works: WorkInventory,
    /// The controllers, while this hub holds them.
    pub units: Arc<crate::units::Units>,
    /// Tokens and sessions.
    pub sessions: Sessions,
    /// The live feed and the history.
    pub live: Live,
    /// Served over TLS (cookies are `Secure`).
    pub tls: bool,
    /// The sign-in with the OIDC issuer, when offered ([`super::oidc`]).
    pub sign_in: Option<Arc<super::oidc::SignIn>>,
    /// Ends the live streams.
    pub shutdown: watch::Receiver<bool>,
}

/// The handlers' shared state.
type D = State<Arc<Deps>>;

/// The dashboard as [`crate::webserver`] serves it: the router over [`Deps`].
pub struct Dashboard {
    router: Router,
}

impl Dashboard {
    /// The dashboard reading and authenticating with `deps`.
    pub fn new(deps: Arc<Deps>) -> Self {
        Self {
            router: router(deps),
        }
    }
}

impl crate::webserver::Handler for Dashboard {
    type Body = Body;
    type BodyError = axum::Error;
    const NAME: &'static str = "dashboard";

    async fn handle(
        self: Arc<Self>,
        req: http::Request<Incoming>,
        _peer: std::net::SocketAddr,
    ) -> Response {
        let mut req = req.map(Body::new);
        if let Some(uri) = without_trailing_slash(req.uri()) {
            *req.uri_mut() = uri;
        }
        let span = tracing::debug_span!(
            "dashboard",
            http.method = %req.method(),
            http.path = %req.uri().path()
        );
        match self.router.clone().oneshot(req).instrument(span).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }
}

/// `uri` without the slashes that end its path (`/clusters/` is `/clusters`), when it has any.
fn without_trailing_slash(uri: &Uri) -> Option<Uri> {
    let path = uri.path();
    let trimmed = path.trim_end_matches('/');
    if trimmed.len() == path.len() || trimmed.is_empty() {
        return None;
    }
    let pq = match uri.query() {
        Some(q) => format!("{trimmed}?{q}"),
        None => trimmed.to_string(),
    };
    pq.parse().ok()
}

/// Every page and action, one handler each; what matches no route or no method gets the
/// dashboard's own 404 / 405 page ([`route::route`] knows which methods a path takes).
pub fn router(deps: Arc<Deps>) -> Router {
    Router::new()
        .route("/", get(overview_page))
        .route("/clusters", get(clusters_page))
        .route("/clusters/{name}", get(cluster_page))
        .route("/clusters/{name}/registration", post(registration))
        .route("/clusters/{cluster}/works/{name}", get(work_page))
        .route("/works", get(works_page))
        .route("/placements", get(placements_page))
        .route("/placements/{namespace}/{name}", get(placement_page))
        .route("/rollouts", get(rollouts_page))
        .route(
            "/rollouts/{namespace}/{name}",
            get(rollout_page).post(rollout_action),
        )
        .route("/addons/{name}", get(addon_page))
        .route("/policies", get(policies_page))
        .route("/events", get(events))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/oidc/start", get(super::oidc::start_route))
        .route("/oidc/callback", get(super::oidc::callback_route))
        .route("/assets/app.js", get(script))
        .route("/assets/style.css", get(style))
        .fallback(no_route)
        .method_not_allowed_fallback(no_route)
        .layer(axum::middleware::from_fn_with_state(deps.clone(), guard))
        .with_state(deps)
}

/// Around every request: an open hub answers only requests addressed to this machine, and
/// every answer carries the security headers.
async fn guard(State(d): D, req: Request, next: Next) -> Response {
    let mut resp = match d.hosts.map(|h| h.check(crate::hosts::of_request(&req))) {
        Some(Err(refusal)) => {
            tracing::info!(%refusal, "dashboard request refused");
            full(
                StatusCode::FORBIDDEN,
                "text/plain; charset=utf-8",
                refusal.to_string(),
            )
        }
        _ => next.run(req).await,
    };
    let h = resp.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    resp
}

/// No page here, or not with this method.
async fn no_route(method: Method, uri: Uri) -> Response {
    match route::route(&method, uri.path()) {
        Err(NoRoute::Method(allowed)) => {
            let mut resp = problem(StatusCode::METHOD_NOT_ALLOWED, None, "Method not allowed.");
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allowed));
            resp
        }
        _ => problem(StatusCode::NOT_FOUND, None, "No such page."),
    }
}

/// The path's `N` segments, percent-decoded: a segment that is not UTF-8, hides a `/` or is
/// empty names no page (404, before anyone is authenticated).
struct Segments<const N: usize>([String; N]);

impl<const N: usize> FromRequestParts<Arc<Deps>> for Segments<N> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Deps>) -> Result<Self, Response> {
        let not_found = || problem(StatusCode::NOT_FOUND, None, "No such page.");
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found())?;
        // axum has percent-decoded them (and refused what is not UTF-8).
        let decoded: Option<Vec<String>> = raw
            .iter()
            .map(|(_, v)| (!v.is_empty() && !v.contains('/')).then(|| v.to_string()))
            .collect();
        let segments: [String; N] = decoded
            .and_then(|d| d.try_into().ok())
            .ok_or_else(not_found)?;
        Ok(Self(segments))
    }
}

/// The query's pairs, decoded.
struct Params(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(route::query(parts.uri.query())))
    }
}

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        route::param(&self.0, key)
    }
}

/// Who is asking ([`Sessions::authenticate`]): a browser opening a page without a session
/// is sent to sign in and back; anything else refused gets 401.
impl FromRequestParts<Arc<Deps>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, d: &Arc<Deps>) -> Result<Self, Response> {
        let refusal = match d.sessions.authenticate(&parts.headers) {
            Ok(mut v) => {
                let recovery = &d.units.clusters.shared().recovery;
                v.banner = recovery
                    .is_open()
                    .then(|| crate::recovery::banner::banner(&recovery.status()))
                    .flatten();
                return Ok(v);
            }
            Err(refusal) => refusal,
        };
        let path = parts.uri.path();
        tracing::debug!(%path, %refusal, "dashboard request refused");
        let browser_page =
            parts.method == Method::GET && path != "/events" && refusal != Refusal::UnknownToken;
        if browser_page {
            let here = match parts.uri.query() {
                Some(q) => format!("{path}?{q}"),
                None => path.to_string(),
            };
            return Err(redirect(&format!("/login?next={}", U(&here))));
        }
        let mut resp = problem(StatusCode::UNAUTHORIZED, None, &refusal.to_string());
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"flotilla\""),
        );
        Err(resp)
    }
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn redirect(to: &str) -> Response {
    let mut resp = full(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        String::new(),
    );
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

/// A redirect that also sets (or, with `None`, clears) the session cookie.
fn redirect_with_cookie(to: &str, d: &Deps, session: Option<&str>) -> Response {
    let mut resp = redirect(to);
    if let Ok(v) = HeaderValue::from_str(&auth::set_cookie(session, d.tls, d.sessions.ttl())) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

fn frame(viewer: &Viewer) -> Frame<'_> {
    Frame {
        who: Some((viewer.identity.name(), role_name(viewer))),
        csrf: &viewer.csrf,
        session: matches!(viewer.via, Via::Session(_)),
        banner: viewer.banner.as_deref(),
    }
}

/// The frame of someone not signed in.
const ANONYMOUS: Frame<'static> = Frame {
    who: None,
    csrf: "",
    session: false,
    banner: None,
};

fn role_name(viewer: &Viewer) -> &'static str {
    match viewer.identity.role() {
        crate::grpc::auth::Role::Admin => "admin",
        crate::grpc::auth::Role::Deployer => "deployer",
        crate::grpc::auth::Role::ReadOnly => "read-only",
        crate::grpc::auth::Role::Member => "member",
    }
}

/// A whole page as an answer.
fn html_response(status: StatusCode, page: Markup) -> Response {
    full(status, "text/html; charset=utf-8", page.into_string())
}

fn page(status: StatusCode, title: &str, nav: Nav, viewer: &Viewer, body: Markup) -> Response {
    html_response(status, html::page(title, nav, &frame(viewer), body))
}

/// 200, or 400 when the query had mistakes (the page shows them).
fn ok_unless(errors: &[String]) -> StatusCode {
    if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    }
}

fn problem(status: StatusCode, viewer: Option<&Viewer>, message: &str) -> Response {
    let body = html! { h1 { (status) } p.error { (message) } };
    let f = viewer.map_or(ANONYMOUS, frame);
    let title = status.canonical_reason().unwrap_or("Error");
    html_response(status, html::page(title, Nav::None, &f, body))
}

fn login_page(d: &Deps, status: StatusCode, next: &str, error: Option<&str>) -> Response {
    let issuer = d.sign_in.as_ref().map(|s| s.issuer_host());
    let body = html! {
        form class="login" method="post" action="/login" {
            h1 { "Sign in" }
            @if let Some(e) = error { p.error { (e) } }
            @if let Some(issuer) = &issuer {
                p { a id="sign-in-oidc" href={ "/oidc/start?next=" (U(next)) } { "Sign in with " (issuer) } }
                p.muted { "or with an API token:" }
            }
            label for="token" { "API token" }
            input type="password" id="token" name="token" autocomplete="current-password" autofocus;
            input type="hidden" name="next" value=(next);
            button type="submit" id="sign-in" { "Sign in" }
            p.muted {
                "The token is one of the hub's " code { "--api-token-file" }
                "; a read-only token is enough to look."
            }
        }
    };
    html_response(status, html::page("Sign in", Nav::None, &ANONYMOUS, body))
}

/// A form's fields (at most [`MAX_FORM`] bytes).
async fn form(body: Body) -> Result<Vec<(String, String)>, String> {
    let bytes = axum::body::to_bytes(body, MAX_FORM)
        .await
        .map_err(|e| format!("reading the form: {e}"))?;
    Ok(form_urlencoded::parse(&bytes)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect())
}

/// A browser's form to act on: its fields, once its CSRF token and origin are checked.
async fn checked_form(
    viewer: &Viewer,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<(String, String)>, Response> {
    let fields = form(body)
        .await
        .map_err(|e| problem(StatusCode::BAD_REQUEST, Some(viewer), &e))?;
    auth::check_post(viewer, route::param(&fields, "csrf"), headers)
        .map_err(|why| problem(StatusCode::FORBIDDEN, Some(viewer), &why))?;
    Ok(fields)
}

fn not_here(viewer: &Viewer) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(viewer),
        "This hub does not hold the controllers (placements, rollouts, policies) right now; \
         open the dashboard of the hub that does (see /debug/shards on the hubs' metrics port).",
    )
}

/// `GET /assets/app.js`.
async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /assets/style.css`.
async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, text: &'static str) -> Response {
    let mut resp = full(StatusCode::OK, content_type, text);
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    resp
}

/// The clusters of `snapshot` `sees` admits (all of them for a fleet role).
fn seen(
    sees: &Visibility,
    snapshot: Vec<Arc<flotilla_api::v1::ManagedCluster>>,
) -> Vec<Arc<flotilla_api::v1::ManagedCluster>> {
    if sees.is_all() {
        return snapshot;
    }
    snapshot
        .into_iter()
        .filter(|c| sees.cluster(crate::inventory::name(c)))
        .collect()
}

/// Whether `sees` admits the object `<cluster or namespace>/<name>` of `key`.
fn seen_key(sees: &Visibility, key: &str, by_cluster: bool) -> bool {
    match key.split_once('/') {
        Some((c, _)) if by_cluster => sees.cluster(c),
        Some((ns, _)) => sees.namespace(ns),
        None => sees.is_all(),
    }
}

/// `None` when `viewer` may read `target`, else a 403 page naming the grant it lacks (a hidden
/// object and a missing one read alike: the refusal is [`crate::grants::decide`]'s, issue 48
/// review §9). The refusal is an audit line.
fn refused_read(viewer: &Viewer, target: Target<'_>, action: &str) -> Option<Response> {
    if viewer.sees.sees(&target) {
        return None;
    }
    let refused = viewer
        .teams
        .allow(Some(&viewer.identity), Verb::Read, target, action);
    match refused {
        Ok(_) => None,
        Err(status) => Some(problem(
            StatusCode::FORBIDDEN,
            Some(viewer),
            status.message(),
        )),
    }
}

/// `GET /`.
async fn overview_page(State(d): D, viewer: Viewer, q: Params) -> Response {
    let snapshot = seen(&viewer.sees, d.inventory.snapshot());
    let o = d.live.read(|h| match &viewer.sees {
        Visibility::All => overview::build(&snapshot, h),
        sees => overview::build_seen(&snapshot, h, |c| sees.cluster(c)),
    });
    let gate = |method| viewer.identity.may_call(&viewer.access, method);
    let (accept, deny) = (gate(overview::ACCEPT_METHOD), gate(overview::DENY_METHOD));
    // Past the gate, a row's buttons by the grants on its cluster.
    let refused = if accept.is_ok() || deny.is_ok() {
        (o.pending.iter())
            .filter(|p| {
                let target = Target::Cluster { name: &p.name };
                let action = format!("accept cluster {}", p.name);
                act::may(
                    &viewer,
                    overview::ACCEPT_METHOD,
                    Verb::Write,
                    target,
                    &action,
                )
                .is_err()
            })
            .map(|p| p.name.clone())
            .collect()
    } else {
        HashSet::new()
    };
    let may = overview::Registrations {
        accept,
        deny,
        refused,
        csrf: &viewer.csrf,
    };
    let notice = match (q.get("done"), q.get("cluster")) {
        (Some(a @ ("accepted" | "denied")), Some(c)) => Some(format!("Cluster {c} {a}.")),
        _ => None,
    };
    let body = overview::render(&o, &may, notice.as_deref());
    page(StatusCode::OK, "Overview", Nav::Overview, &viewer, body)
}

/// `GET /works`.
async fn works_page(State(d): D, viewer: Viewer, q: Params) -> Response {
    let (q, errors) = works::WorksQuery::parse(&q.0);
    // Statuses are held encoded: the page decodes each work's.
    let all: Vec<_> = d
        .works
        .with_prefix("")
        .into_iter()
        .filter(|(key, _)| seen_key(&viewer.sees, key, true))
        .map(|(key, w)| (key, Arc::new(w.to_work())))
        .collect();
    let list = works::build(&all, &q);
    let body = works::render(&list, &q, &errors);
    page(ok_unless(&errors), "Works", Nav::Works, &viewer, body)
}

/// `GET /clusters`.
async fn clusters_page(State(d): D, viewer: Viewer, q: Params) -> Response {
    let (q, errors) = clusters::ListQuery::parse(&q.0);
    let list = clusters::build(&seen(&viewer.sees, d.inventory.snapshot()), &q);
    let body = clusters::render(&list, &q, &errors);
    page(ok_unless(&errors), "Clusters", Nav::Clusters, &viewer, body)
}

/// `GET /clusters/<name>`.
async fn cluster_page(State(d): D, Segments([name]): Segments<1>, viewer: Viewer) -> Response {
    let target = Target::Cluster { name: &name };
    if let Some(refused) = refused_read(&viewer, target, &format!("view cluster {name}")) {
        return refused;
    }
    let Some(c) = d.inventory.get(&name) else {
        let why = format!("No managed cluster {name:?}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let works: Vec<_> = d
        .works
        .with_prefix(&ObjectRef::prefix(&name))
        .into_iter()
        .map(|(_, w)| Arc::new(w.to_work()))
        .collect();
    let controlled = (d.units.controllers()).map(|ctl| controlled(&ctl, &name, &viewer.sees));
    let body = cluster::render(&c, &works, controlled.as_ref());
    page(StatusCode::OK, &name, Nav::Clusters, &viewer, body)
}

/// `GET /clusters/<cluster>/works/<name>`.
async fn work_page(
    State(d): D,
    Segments([cluster, name]): Segments<2>,
    viewer: Viewer,
) -> Response {
    let target = Target::Cluster { name: &cluster };
    let action = format!("view ManifestWork {cluster}/{name}");
    if let Some(refused) = refused_read(&viewer, target, &action) {
        return refused;
    }
    let key = ObjectRef::new(cluster.as_str(), name.as_str()).inventory_key();
    let Some(w) = d.works.get(&key) else {
        let why = format!("No ManifestWork {name:?} on cluster {cluster:?}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let title = format!("{cluster}/{name}");
    page(
        StatusCode::OK,
        &title,
        Nav::Clusters,
        &viewer,
        work::render(&cluster, &w.to_work()),
    )
}

/// `GET /addons/<name>`.
async fn addon_page(State(d): D, Segments([name]): Segments<1>, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let addons = ctl.get::<crate::addon::AddOns>();
    let Some(cma) = addons.get_addon(&name) else {
        let why = format!("No ClusterManagementAddOn {name:?}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let installed = installed_seen(&addons, &name, &viewer.sees);
    // A team sees its own placements' rollout, not the fleet's counts over time.
    let (cma, history) = match &viewer.sees {
        Visibility::All => (cma, d.live.progress(&format!("addon:{name}"))),
        sees => (
            Arc::new(rollouts::fenced_addon(&cma, |ns| sees.namespace(ns))),
            Vec::new(),
        ),
    };
    let body = rollouts::render_addon(&cma, &installed, &history);
    page(StatusCode::OK, &name, Nav::Rollouts, &viewer, body)
}

/// `GET /placements`.
async fn placements_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let mut list = ctl.get::<crate::placement::Placements>().list("");
    list.retain(|v| {
        (v.placement.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace))
    });
    let body = placements::render_list(&list);
    page(StatusCode::OK, "Placements", Nav::Placements, &viewer, body)
}

/// `GET /placements/<namespace>/<name>`: the placement and the scheduler's reasons.
async fn placement_page(
    State(d): D,
    Segments([namespace, name]): Segments<2>,
    viewer: Viewer,
) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let action = format!("view Placement {namespace}/{name}");
    if let Some(refused) = refused_read(&viewer, Target::Namespace { name: &namespace }, &action) {
        return refused;
    }
    let placements = ctl.get::<crate::placement::Placements>();
    let Some(view) = placements.get(&namespace, &name) else {
        let why = format!("No Placement {namespace}/{name}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let debug = placements.debug(&namespace, &name).await;
    let debug = debug.map_err(|e| e.to_string());
    let body = placements::render(&view, debug.as_ref().map_err(String::as_str));
    let title = format!("{namespace}/{name}");
    page(StatusCode::OK, &title, Nav::Placements, &viewer, body)
}

/// `GET /rollouts`: replica sets and add-ons.
async fn rollouts_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let addons = ctl.get::<crate::addon::AddOns>();
    let with_installed: Vec<_> = addons
        .list_addons()
        .into_iter()
        .map(|a| {
            let name = a
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            let installed = installed_seen(&addons, &name, &viewer.sees);
            let a = match &viewer.sees {
                Visibility::All => a,
                sees => Arc::new(rollouts::fenced_addon(&a, |ns| sees.namespace(ns))),
            };
            (a, installed)
        })
        .collect();
    let mut sets = ctl.get::<crate::replicaset::ReplicaSets>().list("");
    sets.retain(|rs| (rs.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace)));
    let body = rollouts::render_list(&sets, &with_installed);
    page(StatusCode::OK, "Rollouts", Nav::Rollouts, &viewer, body)
}

/// `GET /rollouts/<namespace>/<name>`: a replica set's rollout, with its controls.
async fn rollout_page(
    State(d): D,
    Segments([namespace, name]): Segments<2>,
    viewer: Viewer,
    q: Params,
) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let action = format!("view ManifestWorkReplicaSet {namespace}/{name}");
    if let Some(refused) = refused_read(&viewer, Target::Namespace { name: &namespace }, &action) {
        return refused;
    }
    let Some(rs) = ctl
        .get::<crate::replicaset::ReplicaSets>()
        .get(&namespace, &name)
    else {
        let why = format!("No ManifestWorkReplicaSet {namespace}/{name}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let notice = q
        .get("done")
        .filter(|a| rollouts::ACTIONS.contains(a))
        .map(|a| format!("Rollout {a}: done."));
    let history = d.live.progress(&format!("rollout:{namespace}/{name}"));
    let may = act::may(
        &viewer,
        rollouts::ROLLOUT_METHOD,
        Verb::Write,
        Target::Namespace { name: &namespace },
        &format!("change the rollout of ManifestWorkReplicaSet {namespace}/{name}"),
    );
    let body = rollouts::render(&rs, may, &viewer.csrf, notice.as_deref(), &history);
    let title = format!("{namespace}/{name}");
    page(StatusCode::OK, &title, Nav::Rollouts, &viewer, body)
}

/// `GET /policies`.
async fn policies_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let mut list = ctl.get::<crate::policy::Policies>().list_policies("");
    list.retain(|p| (p.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace)));
    let body = policies::render(&list);
    page(StatusCode::OK, "Policies", Nav::Policies, &viewer, body)
}

/// `GET /events`: the live feed (Server-Sent Events) for the clusters and objects the page
/// follows.
async fn events(State(d): D, viewer: Viewer, q: Params) -> Response {
    let followed: Option<HashSet<String>> = q.get("clusters").map(|s| {
        s.split(',')
            .filter(|n| !n.is_empty())
            .take(MAX_FOLLOWED)
            .map(str::to_string)
            .collect()
    });
    let follows = q
        .get("follow")
        .map(|f| super::live::Follows::parse(f, MAX_FOLLOWED))
        .unwrap_or_default();
    let shutdown = d.shutdown.clone();
    match d.live.stream(
        (&viewer.identity, &viewer.teams),
        followed,
        follows,
        shutdown,
    ) {
        Ok(events) => {
            let mut resp = Response::new(Body::new(StreamBody::new(events)));
            let h = resp.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            h.insert("x-accel-buffering", HeaderValue::from_static("no"));
            resp
        }
        Err(busy) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(&viewer),
            &busy.to_string(),
        ),
    }
}

/// `GET /login`: the sign-in form (a hub without tokens has nothing to sign in to).
async fn login_form(State(d): D, q: Params) -> Response {
    if !d.sessions.guarded() {
        return redirect("/");
    }
    login_page(&d, StatusCode::OK, auth::safe_next(q.get("next")), None)
}

/// `POST /logout`.
async fn logout(State(d): D, viewer: Viewer, headers: HeaderMap, body: Body) -> Response {
    if let Err(refused) = checked_form(&viewer, &headers, body).await {
        return refused;
    }
    if let Via::Session(id) = &viewer.via {
        d.sessions.sign_out(id);
    }
    redirect_with_cookie("/login", &d, None)
}

/// The add-on `name` installed on the clusters `sees` admits.
fn installed_seen(
    addons: &crate::addon::AddOns,
    name: &str,
    sees: &Visibility,
) -> Vec<Arc<flotilla_api::v1::ManagedClusterAddOn>> {
    let mut installed = addons.list_cluster_addons("", name);
    installed.retain(|a| (a.metadata.as_ref()).is_some_and(|m| sees.cluster(&m.namespace)));
    installed
}

/// What the controllers know of cluster `name`, of the namespaces `sees` admits.
fn controlled(
    ctl: &crate::controller::Controllers,
    name: &str,
    sees: &Visibility,
) -> cluster::Controlled {
    let in_sight =
        |m: Option<&flotilla_api::v1::ObjectMeta>| m.is_some_and(|m| sees.namespace(&m.namespace));
    let policies = ctl
        .get::<crate::policy::Policies>()
        .list_policies("")
        .iter()
        .filter(|p| in_sight(p.metadata.as_ref()))
        .filter_map(|p| {
            let c = p
                .status
                .as_ref()?
                .status
                .iter()
                .find(|c| c.cluster_name == name)?;
            let m = p.metadata.as_ref()?;
            Some((m.namespace.clone(), m.name.clone(), c.compliant.clone()))
        })
        .collect();
    let placements = ctl
        .get::<crate::placement::Placements>()
        .list("")
        .iter()
        .filter(|v| v.clusters().contains(name) && in_sight(v.placement.metadata.as_ref()))
        .filter_map(|v| {
            v.placement
                .metadata
                .as_ref()
                .map(|m| (m.namespace.clone(), m.name.clone()))
        })
        .collect();
    cluster::Controlled {
        addons: ctl
            .get::<crate::addon::AddOns>()
            .list_cluster_addons(name, ""),
        policies,
        placements,
    }
}

/// `POST /login`: signs in with a token and goes back to the page asked for.
async fn login(State(d): D, headers: HeaderMap, body: Body) -> Response {
    if !d.sessions.guarded() {
        return redirect("/");
    }
    if auth::cross_site(&headers) {
        return login_page(
            &d,
            StatusCode::FORBIDDEN,
            "/",
            Some("Refused: the form was sent from another site."),
        );
    }
    let fields = match form(body).await {
        Ok(f) => f,
        Err(e) => return login_page(&d, StatusCode::BAD_REQUEST, "/", Some(&e)),
    };
    let next = auth::safe_next(route::param(&fields, "next")).to_string();
    match d
        .sessions
        .sign_in(route::param(&fields, "token").unwrap_or_default())
    {
        Some(id) => redirect_with_cookie(&next, &d, Some(&id)),
        None => login_page(
            &d,
            StatusCode::UNAUTHORIZED,
            &next,
            Some("That token is not known to this hub."),
        ),
    }
}

/// `POST /clusters/<name>/registration`: accepts or denies a pending registration (the
/// overview's buttons): the same CSRF rules as every form, and what the API's
/// `AcceptClusters` / `DenyClusters` need.
async fn registration(
    State(d): D,
    Segments([name]): Segments<1>,
    viewer: Viewer,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (viewer, name) = (&viewer, name.as_str());
    let fields = match checked_form(viewer, &headers, body).await {
        Ok(f) => f,
        Err(refused) => return refused,
    };
    let action = route::param(&fields, "action").unwrap_or_default();
    let (method, edit, done) = match action {
        "accept" => {
            let key = route::param(&fields, "key")
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string);
            (
                overview::ACCEPT_METHOD,
                crate::cluster::AdminEdit::Accept(key),
                "accepted",
            )
        }
        "deny" => (
            overview::DENY_METHOD,
            crate::cluster::AdminEdit::Deny,
            "denied",
        ),
        _ => {
            return problem(
                StatusCode::BAD_REQUEST,
                Some(viewer),
                &format!("action {action:?} is not accept or deny"),
            );
        }
    };
    let what = format!("{action} cluster {name}");
    let target = Target::Cluster { name };
    if let Err(why) = act::act(viewer, method, Verb::Write, target, &what) {
        return problem(StatusCode::FORBIDDEN, Some(viewer), &why);
    }
    let Some(handle) = d
        .units
        .clusters
        .get(name)
        .filter(|_| d.inventory.get(name).is_some())
    else {
        return problem(
            StatusCode::NOT_FOUND,
            Some(viewer),
            &format!("No managed cluster {name:?}."),
        );
    };
    tracing::info!(caller = %viewer.identity.name(), cluster = %name, action, "dashboard registration action");
    match handle.edit(edit).await {
        Ok(_) => redirect(&format!("/?done={done}&cluster={}", U(name))),
        Err(e) => {
            use crate::cluster::ClusterError as C;
            let code = match &e {
                C::NotFound(_) | C::Gone(_) => StatusCode::NOT_FOUND,
                C::Invalid(_) => StatusCode::BAD_REQUEST,
                C::Conflict(_) | C::Precondition(_) => StatusCode::CONFLICT,
                C::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            problem(code, Some(viewer), &e.to_string())
        }
    }
}

/// `POST /rollouts/<namespace>/<name>`: pause, resume or undo.
async fn rollout_action(
    State(d): D,
    Segments([namespace, name]): Segments<2>,
    viewer: Viewer,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (viewer, namespace, name) = (&viewer, namespace.as_str(), name.as_str());
    let fields = match checked_form(viewer, &headers, body).await {
        Ok(f) => f,
        Err(refused) => return refused,
    };
    let action = route::param(&fields, "action").unwrap_or_default();
    if !rollouts::ACTIONS.contains(&action) {
        return problem(
            StatusCode::BAD_REQUEST,
            Some(viewer),
            &format!("action {action:?} is not pause, resume or undo"),
        );
    }
    let what = format!("{action} the rollout of ManifestWorkReplicaSet {namespace}/{name}");
    let target = Target::Namespace { name: namespace };
    let method = rollouts::ROLLOUT_METHOD;
    if let Err(why) = act::act(viewer, method, Verb::Write, target, &what) {
        return problem(StatusCode::FORBIDDEN, Some(viewer), &why);
    }
    let Some(ctl) = d.units.controllers() else {
        return not_here(viewer);
    };
    tracing::info!(caller = %viewer.identity.name(), %namespace, %name, action, "dashboard rollout action");
    match ctl
        .get::<crate::replicaset::ReplicaSets>()
        .rollout(namespace, name, action)
        .await
    {
        Ok(_) => redirect(&format!(
            "/rollouts/{}/{}?done={action}",
            U(namespace),
            U(name)
        )),
        Err(e) => {
            let status = match e {
                crate::replicaset::ReplicaSetError::Invalid(_) => StatusCode::BAD_REQUEST,
                crate::replicaset::ReplicaSetError::NotFound(_) => StatusCode::NOT_FOUND,
                crate::replicaset::ReplicaSetError::Unavailable(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
            };
            problem(status, Some(viewer), &e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_matches_no_route_is_404_or_405_with_the_method_allowed() {
        let resp = no_route(Method::GET, Uri::from_static("/logout")).await;
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(resp.headers()[header::ALLOW], "POST");
        let resp = no_route(Method::POST, Uri::from_static("/clusters")).await;
        assert_eq!(resp.headers()[header::ALLOW], "GET");
        let resp = no_route(Method::GET, Uri::from_static("/nope")).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn a_trailing_slash_names_the_same_page() {
        let trimmed = without_trailing_slash(&Uri::from_static("/clusters/?q=a"));
        assert_eq!(trimmed, Some(Uri::from_static("/clusters?q=a")));
        assert_eq!(without_trailing_slash(&Uri::from_static("/")), None);
        assert_eq!(without_trailing_slash(&Uri::from_static("/works")), None);
    }
}

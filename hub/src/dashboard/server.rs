//! The dashboard's HTTP(S) server: route, authenticate ([`super::auth`]), read the hub's
//! in-memory views, render ([`super::overview`], [`super::clusters`], …) — nothing here reads
//! the store. Served by [`crate::webserver`] like the cluster proxy.

use super::auth::{self, Refusal, Sessions, Via, Viewer};
use super::html::{self, E, Frame, Nav, U};
use super::live::Live;
use super::route::{self, Asset, NoRoute, Route};
use super::{cluster, clusters, overview, placements, policies, rollouts, work, works};
use crate::inventory::{ClusterInventory, WorkInventory};
use crate::keys::ObjectRef;
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::watch;

/// A response body: a page, or the live stream.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

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
    /// Ends the live streams.
    pub shutdown: watch::Receiver<bool>,
}

impl crate::webserver::Handler for Deps {
    type Body = Body;
    type BodyError = Infallible;
    const NAME: &'static str = "dashboard";

    async fn handle(
        self: Arc<Self>,
        req: http::Request<Incoming>,
        _peer: std::net::SocketAddr,
    ) -> http::Response<Body> {
        let host = self.hosts.map(|h| h.check(crate::hosts::of_request(&req)));
        let mut resp = match host {
            Some(Err(refusal)) => {
                tracing::info!(%refusal, "dashboard request refused");
                full(
                    StatusCode::FORBIDDEN,
                    "text/plain; charset=utf-8",
                    refusal.to_string(),
                )
            }
            _ => handle(&self, req).await,
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
}

fn full(status: StatusCode, content_type: &'static str, body: String) -> http::Response<Body> {
    let mut resp = http::Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn redirect(to: &str) -> http::Response<Body> {
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

fn frame(viewer: &Viewer) -> Frame<'_> {
    Frame {
        who: Some((viewer.identity.name.as_str(), role_name(viewer))),
        csrf: &viewer.csrf,
        session: matches!(viewer.via, Via::Session(_)),
    }
}

fn role_name(viewer: &Viewer) -> &'static str {
    match viewer.identity.role {
        crate::grpc::auth::Role::Admin => "admin",
        crate::grpc::auth::Role::Deployer => "deployer",
        crate::grpc::auth::Role::ReadOnly => "read-only",
    }
}

fn page(
    status: StatusCode,
    title: &str,
    nav: Nav,
    viewer: &Viewer,
    body: &str,
) -> http::Response<Body> {
    full(
        status,
        "text/html; charset=utf-8",
        html::page(title, nav, &frame(viewer), body),
    )
}

fn problem(status: StatusCode, viewer: Option<&Viewer>, message: &str) -> http::Response<Body> {
    let body = format!("<h1>{}</h1><p class=\"error\">{}</p>", status, E(message));
    let anonymous = Frame {
        who: None,
        csrf: "",
        session: false,
    };
    let f = viewer.map_or(anonymous, frame);
    full(
        status,
        "text/html; charset=utf-8",
        html::page(
            status.canonical_reason().unwrap_or("Error"),
            Nav::None,
            &f,
            &body,
        ),
    )
}

fn login_page(status: StatusCode, next: &str, error: Option<&str>) -> http::Response<Body> {
    let error = error.map_or(String::new(), |e| {
        format!("<p class=\"error\">{}</p>", E(e))
    });
    let body = format!(
        "<form class=\"login\" method=\"post\" action=\"/login\"><h1>Sign in</h1>{error}\
         <label for=\"token\">API token</label>\
         <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" autofocus>\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <button type=\"submit\" id=\"sign-in\">Sign in</button>\
         <p class=\"muted\">The token is one of the hub's <code>--api-token-file</code>; a \
         read-only token is enough to look.</p></form>",
        E(next)
    );
    let anonymous = Frame {
        who: None,
        csrf: "",
        session: false,
    };
    full(
        status,
        "text/html; charset=utf-8",
        html::page("Sign in", Nav::None, &anonymous, &body),
    )
}

/// A form's fields (at most [`MAX_FORM`] bytes).
async fn form(body: Incoming) -> Result<Vec<(String, String)>, String> {
    let bytes = Limited::new(body, MAX_FORM)
        .collect()
        .await
        .map_err(|e| format!("reading the form: {e}"))?
        .to_bytes();
    Ok(form_urlencoded::parse(&bytes)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect())
}

async fn handle(d: &Deps, req: http::Request<Incoming>) -> http::Response<Body> {
    let path = req.uri().path().to_string();
    let query = route::query(req.uri().query());
    let route = match route::route(req.method(), &path) {
        Ok(r) => r,
        Err(NoRoute::NotFound) => return problem(StatusCode::NOT_FOUND, None, "No such page."),
        Err(NoRoute::Method(allowed)) => {
            let mut resp = problem(StatusCode::METHOD_NOT_ALLOWED, None, "Method not allowed.");
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allowed));
            return resp;
        }
    };
    match route {
        Route::Asset(a) => {
            let (ct, text) = match a {
                Asset::Script => ("text/javascript; charset=utf-8", SCRIPT),
                Asset::Style => ("text/css; charset=utf-8", STYLE),
            };
            let mut resp = full(StatusCode::OK, ct, text.to_string());
            resp.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            );
            return resp;
        }
        Route::LoginForm => {
            if !d.sessions.guarded() {
                return redirect("/");
            }
            return login_page(
                StatusCode::OK,
                auth::safe_next(route::param(&query, "next")),
                None,
            );
        }
        Route::Login => return login(d, req).await,
        _ => {}
    }
    let viewer = match d.sessions.authenticate(req.headers()) {
        Ok(v) => v,
        Err(refusal) => {
            tracing::debug!(%path, %refusal, "dashboard request refused");
            let browser_page = req.method() == Method::GET
                && route != Route::Events
                && refusal != Refusal::UnknownToken;
            if browser_page {
                let here = match req.uri().query() {
                    Some(q) => format!("{path}?{q}"),
                    None => path.clone(),
                };
                return redirect(&format!("/login?next={}", U(&here)));
            }
            let mut resp = problem(StatusCode::UNAUTHORIZED, None, &refusal.to_string());
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"flotilla\""),
            );
            return resp;
        }
    };
    match route {
        Route::Overview => {
            let snapshot = d.inventory.snapshot();
            let o = d.live.read(|h| overview::build(&snapshot, h));
            let may = overview::Registrations {
                accept: viewer.may(overview::ACCEPT_METHOD),
                deny: viewer.may(overview::DENY_METHOD),
                csrf: &viewer.csrf,
            };
            let notice = match (
                route::param(&query, "done"),
                route::param(&query, "cluster"),
            ) {
                (Some(a @ ("accepted" | "denied")), Some(c)) => Some(format!("Cluster {c} {a}.")),
                _ => None,
            };
            page(
                StatusCode::OK,
                "Overview",
                Nav::Overview,
                &viewer,
                &overview::render(&o, &may, notice.as_deref()),
            )
        }
        Route::Registration(name) => registration(d, &viewer, req, &name).await,
        Route::Works => {
            let (q, errors) = works::WorksQuery::parse(&query);
            let list = works::build(&d.works.with_prefix(""), &q);
            page(
                if errors.is_empty() {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                },
                "Works",
                Nav::Works,
                &viewer,
                &works::render(&list, &q, &errors),
            )
        }
        Route::AddOn(name) => {
            let Some(ctl) = d.units.controllers() else {
                return not_here(&viewer);
            };
            let Some(cma) = ctl.get::<crate::addon::AddOns>().get_addon(&name) else {
                return problem(
                    StatusCode::NOT_FOUND,
                    Some(&viewer),
                    &format!("No ClusterManagementAddOn {name:?}."),
                );
            };
            let installed = ctl
                .get::<crate::addon::AddOns>()
                .list_cluster_addons("", &name);
            let history = d.live.progress(&format!("addon:{name}"));
            page(
                StatusCode::OK,
                &name,
                Nav::Rollouts,
                &viewer,
                &rollouts::render_addon(&cma, &installed, &history),
            )
        }
        Route::Clusters => {
            let (q, errors) = clusters::ListQuery::parse(&query);
            let list = clusters::build(&d.inventory.snapshot(), &q);
            page(
                if errors.is_empty() {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                },
                "Clusters",
                Nav::Clusters,
                &viewer,
                &clusters::render(&list, &q, &errors),
            )
        }
        Route::Cluster(name) => {
            let Some(c) = d.inventory.get(&name) else {
                return problem(
                    StatusCode::NOT_FOUND,
                    Some(&viewer),
                    &format!("No managed cluster {name:?}."),
                );
            };
            let works: Vec<_> = d
                .works
                .with_prefix(&ObjectRef::prefix(&name))
                .into_iter()
                .map(|(_, w)| w)
                .collect();
            let controlled = d.units.controllers().map(|ctl| controlled(&ctl, &name));
            page(
                StatusCode::OK,
                &name,
                Nav::Clusters,
                &viewer,
                &cluster::render(&c, &works, controlled.as_ref()),
            )
        }
        Route::Work { cluster, name } => match d
            .works
            .get(&ObjectRef::new(cluster.as_str(), name.as_str()).inventory_key())
        {
            Some(w) => page(
                StatusCode::OK,
                &format!("{cluster}/{name}"),
                Nav::Clusters,
                &viewer,
                &work::render(&cluster, &w),
            ),
            None => problem(
                StatusCode::NOT_FOUND,
                Some(&viewer),
                &format!("No ManifestWork {name:?} on cluster {cluster:?}."),
            ),
        },
        Route::Placements => match d.units.controllers() {
            Some(ctl) => page(
                StatusCode::OK,
                "Placements",
                Nav::Placements,
                &viewer,
                &placements::render_list(&ctl.get::<crate::placement::Placements>().list("")),
            ),
            None => not_here(&viewer),
        },
        Route::Placement { namespace, name } => {
            let Some(ctl) = d.units.controllers() else {
                return not_here(&viewer);
            };
            let Some(view) = ctl
                .get::<crate::placement::Placements>()
                .get(&namespace, &name)
            else {
                return problem(
                    StatusCode::NOT_FOUND,
                    Some(&viewer),
                    &format!("No Placement {namespace}/{name}."),
                );
            };
            let debug = ctl
                .get::<crate::placement::Placements>()
                .debug(&namespace, &name)
                .await;
            let debug = debug.map_err(|e| e.to_string());
            page(
                StatusCode::OK,
                &format!("{namespace}/{name}"),
                Nav::Placements,
                &viewer,
                &placements::render(&view, debug.as_ref().map_err(String::as_str)),
            )
        }
        Route::Rollouts => {
            let Some(ctl) = d.units.controllers() else {
                return not_here(&viewer);
            };
            let addons: Vec<_> = ctl
                .get::<crate::addon::AddOns>()
                .list_addons()
                .into_iter()
                .map(|a| {
                    let name = a
                        .metadata
                        .as_ref()
                        .map(|m| m.name.clone())
                        .unwrap_or_default();
                    let installed = ctl
                        .get::<crate::addon::AddOns>()
                        .list_cluster_addons("", &name);
                    (a, installed)
                })
                .collect();
            page(
                StatusCode::OK,
                "Rollouts",
                Nav::Rollouts,
                &viewer,
                &rollouts::render_list(
                    &ctl.get::<crate::replicaset::ReplicaSets>().list(""),
                    &addons,
                ),
            )
        }
        Route::Rollout { namespace, name } => {
            let Some(ctl) = d.units.controllers() else {
                return not_here(&viewer);
            };
            let Some(rs) = ctl
                .get::<crate::replicaset::ReplicaSets>()
                .get(&namespace, &name)
            else {
                return problem(
                    StatusCode::NOT_FOUND,
                    Some(&viewer),
                    &format!("No ManifestWorkReplicaSet {namespace}/{name}."),
                );
            };
            let notice = route::param(&query, "done")
                .filter(|a| rollouts::ACTIONS.contains(a))
                .map(|a| format!("Rollout {a}: done."));
            let history = d.live.progress(&format!("rollout:{namespace}/{name}"));
            page(
                StatusCode::OK,
                &format!("{namespace}/{name}"),
                Nav::Rollouts,
                &viewer,
                &rollouts::render(
                    &rs,
                    viewer.may(rollouts::ROLLOUT_METHOD),
                    &viewer.csrf,
                    notice.as_deref(),
                    &history,
                ),
            )
        }
        Route::RolloutAction { namespace, name } => {
            rollout_action(d, &viewer, req, &namespace, &name).await
        }
        Route::Policies => match d.units.controllers() {
            Some(ctl) => page(
                StatusCode::OK,
                "Policies",
                Nav::Policies,
                &viewer,
                &policies::render(&ctl.get::<crate::policy::Policies>().list_policies("")),
            ),
            None => not_here(&viewer),
        },
        Route::Events => {
            let followed: Option<HashSet<String>> = route::param(&query, "clusters").map(|s| {
                s.split(',')
                    .filter(|n| !n.is_empty())
                    .take(MAX_FOLLOWED)
                    .map(str::to_string)
                    .collect()
            });
            let follows = route::param(&query, "follow")
                .map(|f| super::live::Follows::parse(f, MAX_FOLLOWED))
                .unwrap_or_default();
            match d
                .live
                .stream(&viewer.identity.name, followed, follows, d.shutdown.clone())
            {
                Ok(events) => {
                    let mut resp = http::Response::new(StreamBody::new(events).boxed_unsync());
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
        Route::Logout => {
            let headers = req.headers().clone();
            let fields = match form(req.into_body()).await {
                Ok(f) => f,
                Err(e) => return problem(StatusCode::BAD_REQUEST, Some(&viewer), &e),
            };
            if let Err(why) = auth::check_post(&viewer, route::param(&fields, "csrf"), &headers) {
                return problem(StatusCode::FORBIDDEN, Some(&viewer), &why);
            }
            if let Via::Session(id) = &viewer.via {
                d.sessions.sign_out(id);
            }
            let mut resp = redirect("/login");
            if let Ok(v) = HeaderValue::from_str(&auth::set_cookie(None, d.tls, d.sessions.ttl())) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Route::LoginForm | Route::Login | Route::Asset(_) => unreachable_route(),
    }
}

/// Routes answered before authentication never reach the second match.
fn unreachable_route() -> http::Response<Body> {
    problem(StatusCode::NOT_FOUND, None, "No such page.")
}

fn not_here(viewer: &Viewer) -> http::Response<Body> {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(viewer),
        "This hub does not hold the controllers (placements, rollouts, policies) right now; \
         open the dashboard of the hub that does (see /debug/shards on the hubs' metrics port).",
    )
}

/// What the controllers know of cluster `name`.
fn controlled(ctl: &crate::controller::Controllers, name: &str) -> cluster::Controlled {
    let policies = ctl
        .get::<crate::policy::Policies>()
        .list_policies("")
        .iter()
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
        .filter(|v| v.clusters().contains(name))
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

async fn login(d: &Deps, req: http::Request<Incoming>) -> http::Response<Body> {
    if !d.sessions.guarded() {
        return redirect("/");
    }
    if auth::cross_site(req.headers()) {
        return login_page(
            StatusCode::FORBIDDEN,
            "/",
            Some("Refused: the form was sent from another site."),
        );
    }
    let fields = match form(req.into_body()).await {
        Ok(f) => f,
        Err(e) => return login_page(StatusCode::BAD_REQUEST, "/", Some(&e)),
    };
    let next = auth::safe_next(route::param(&fields, "next")).to_string();
    match d
        .sessions
        .sign_in(route::param(&fields, "token").unwrap_or_default())
    {
        Some(id) => {
            let mut resp = redirect(&next);
            if let Ok(v) =
                HeaderValue::from_str(&auth::set_cookie(Some(&id), d.tls, d.sessions.ttl()))
            {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        None => login_page(
            StatusCode::UNAUTHORIZED,
            &next,
            Some("That token is not known to this hub."),
        ),
    }
}

/// Accepts or denies a pending registration (the overview's buttons): the same CSRF rules as
/// every form, and what the API's `AcceptClusters` / `DenyClusters` need.
async fn registration(
    d: &Deps,
    viewer: &Viewer,
    req: http::Request<Incoming>,
    name: &str,
) -> http::Response<Body> {
    let headers = req.headers().clone();
    let fields = match form(req.into_body()).await {
        Ok(f) => f,
        Err(e) => return problem(StatusCode::BAD_REQUEST, Some(viewer), &e),
    };
    if let Err(why) = auth::check_post(viewer, route::param(&fields, "csrf"), &headers) {
        return problem(StatusCode::FORBIDDEN, Some(viewer), &why);
    }
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
    if let Err(why) = viewer.may(method) {
        tracing::info!(caller = %viewer.identity.name, cluster = %name, action, "dashboard registration action refused");
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
    tracing::info!(caller = %viewer.identity.name, cluster = %name, action, "dashboard registration action");
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

async fn rollout_action(
    d: &Deps,
    viewer: &Viewer,
    req: http::Request<Incoming>,
    namespace: &str,
    name: &str,
) -> http::Response<Body> {
    let headers = req.headers().clone();
    let fields = match form(req.into_body()).await {
        Ok(f) => f,
        Err(e) => return problem(StatusCode::BAD_REQUEST, Some(viewer), &e),
    };
    if let Err(why) = auth::check_post(viewer, route::param(&fields, "csrf"), &headers) {
        return problem(StatusCode::FORBIDDEN, Some(viewer), &why);
    }
    if let Err(why) = viewer.may(rollouts::ROLLOUT_METHOD) {
        tracing::info!(caller = %viewer.identity.name, %namespace, %name, "dashboard rollout action refused");
        return problem(StatusCode::FORBIDDEN, Some(viewer), &why);
    }
    let action = route::param(&fields, "action").unwrap_or_default();
    if !rollouts::ACTIONS.contains(&action) {
        return problem(
            StatusCode::BAD_REQUEST,
            Some(viewer),
            &format!("action {action:?} is not pause, resume or undo"),
        );
    }
    let Some(ctl) = d.units.controllers() else {
        return not_here(viewer);
    };
    tracing::info!(caller = %viewer.identity.name, %namespace, %name, action, "dashboard rollout action");
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

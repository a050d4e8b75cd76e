//! The dashboard's HTTP(S) server (I/O): an [`axum::Router`] with one handler per page or
//! action, authentication ([`super::auth`]'s pure rules) as an extractor, the host check and
//! the security headers as a middleware layer; each handler reads the hub's in-memory views
//! and renders ([`super::overview`], [`super::clusters`], …) — nothing here reads the store.
//! Connections are accepted, bounded and served by [`crate::webserver`] like the cluster proxy.
//!
//! - `extract`: what a handler takes from a request — the path's segments decoded, the query,
//!   and who is asking (the viewer, authenticated).
//! - `respond`: the answers — a page in the frame, a problem page, a redirect, the assets.
//! - `session`: signing in with a token and out, and the CSRF-checked forms actions post.
//! - `pages`: one handler per page, each showing what the viewer may see.
//! - `actions`: the forms that change something (accept or deny a registration, pause, resume
//!   or undo a rollout), checked by the API's gate and the object's grants.
//! - `events`: the live feed (Server-Sent Events).

mod actions;
mod events;
mod extract;
mod pages;
mod respond;
mod session;

use super::auth::Sessions;
use super::live::Live;
use super::route::{self, NoRoute};
use crate::inventory::{ClusterInventory, WorkInventory};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use http::{HeaderValue, Method, StatusCode, Uri, header};
use hyper::body::Incoming;
use pages::{
    addon_page, cluster_page, clusters_page, gitrepo_page, gitrepos_page, overview_page,
    placement_page, placements_page, policies_page, rollout_page, rollouts_page, work_page,
    works_page,
};
use respond::{full, problem};
use std::sync::Arc;
use tokio::sync::watch;
use tower::ServiceExt;
use tracing::Instrument;

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
        .route("/clusters/{name}/registration", post(actions::registration))
        .route("/clusters/{cluster}/works/{name}", get(work_page))
        .route("/works", get(works_page))
        .route("/placements", get(placements_page))
        .route("/placements/{namespace}/{name}", get(placement_page))
        .route("/rollouts", get(rollouts_page))
        .route(
            "/rollouts/{namespace}/{name}",
            get(rollout_page).post(actions::rollout_action),
        )
        .route("/addons/{name}", get(addon_page))
        .route("/policies", get(policies_page))
        .route("/gitrepos", get(gitrepos_page))
        .route("/gitrepos/{namespace}/{name}", get(gitrepo_page))
        .route("/events", get(events::events))
        .route("/login", get(session::login_form).post(session::login))
        .route("/logout", post(session::logout))
        .route("/oidc/start", get(super::oidc::start_route))
        .route("/oidc/callback", get(super::oidc::callback_route))
        .route("/assets/app.js", get(respond::script))
        .route("/assets/style.css", get(respond::style))
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

//! The dashboard's answers: a page in the frame (who is signed in, the CSRF token, the
//! recovery banner), a problem page, a redirect, and the compiled-in script and stylesheet.

use super::Deps;
use crate::dashboard::auth::{self, Via, Viewer};
use crate::dashboard::html::{self, Frame, Nav};
use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use maud::{Markup, html};

/// The script and the stylesheet, compiled into the binary.
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/style.css");

pub(super) fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Body>,
) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

pub(super) fn redirect(to: &str) -> Response {
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
pub(super) fn redirect_with_cookie(to: &str, d: &Deps, session: Option<&str>) -> Response {
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
pub(super) const ANONYMOUS: Frame<'static> = Frame {
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
pub(super) fn html_response(status: StatusCode, page: Markup) -> Response {
    full(status, "text/html; charset=utf-8", page.into_string())
}

pub(super) fn page(
    status: StatusCode,
    title: &str,
    nav: Nav,
    viewer: &Viewer,
    body: Markup,
) -> Response {
    html_response(status, html::page(title, nav, &frame(viewer), body))
}

/// 200, or 400 when the query had mistakes (the page shows them).
pub(super) fn ok_unless(errors: &[String]) -> StatusCode {
    if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    }
}

pub(super) fn problem(status: StatusCode, viewer: Option<&Viewer>, message: &str) -> Response {
    let body = html! { h1 { (status) } p.error { (message) } };
    let f = viewer.map_or(ANONYMOUS, frame);
    let title = status.canonical_reason().unwrap_or("Error");
    html_response(status, html::page(title, Nav::None, &f, body))
}

pub(super) fn not_here(viewer: &Viewer) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(viewer),
        "This hub does not hold the controllers (placements, rollouts, policies) right now; \
         open the dashboard of the hub that does (see /debug/shards on the hubs' metrics port).",
    )
}

/// `GET /assets/app.js`.
pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /assets/style.css`.
pub(super) async fn style() -> Response {
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

//! Signing in with an API token and out: the sign-in form, its session cookie, and the
//! CSRF-checked forms every action posts (the rules are [`crate::dashboard::auth`]'s).

use super::D;
use super::Deps;
use super::extract::Params;
use super::respond::{ANONYMOUS, html_response, problem, redirect, redirect_with_cookie};
use crate::dashboard::auth::{self, Via, Viewer};
use crate::dashboard::html::{self, Nav, U};
use crate::dashboard::route;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use maud::html;

/// The largest form the dashboard reads (sign-in, actions).
const MAX_FORM: usize = 16 * 1024;

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
pub(super) async fn checked_form(
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

/// `GET /login`: the sign-in form (a hub without tokens has nothing to sign in to).
pub(super) async fn login_form(State(d): D, q: Params) -> Response {
    if !d.sessions.guarded() {
        return redirect("/");
    }
    login_page(&d, StatusCode::OK, auth::safe_next(q.get("next")), None)
}

/// `POST /logout`.
pub(super) async fn logout(
    State(d): D,
    viewer: Viewer,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(refused) = checked_form(&viewer, &headers, body).await {
        return refused;
    }
    if let Via::Session(id) = &viewer.via {
        d.sessions.sign_out(id);
    }
    redirect_with_cookie("/login", &d, None)
}

/// `POST /login`: signs in with a token and goes back to the page asked for.
pub(super) async fn login(State(d): D, headers: HeaderMap, body: Body) -> Response {
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

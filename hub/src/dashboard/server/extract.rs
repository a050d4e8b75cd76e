//! What a handler takes from a request: the path's segments decoded ([`Segments`]), the
//! query ([`Params`]), and who is asking ([`Viewer`], by [`Sessions::authenticate`]).
//!
//! [`Sessions::authenticate`]: crate::dashboard::auth::Sessions::authenticate

use super::Deps;
use super::respond::{problem, redirect};
use crate::dashboard::auth::{Refusal, Viewer};
use crate::dashboard::html::U;
use crate::dashboard::route;
use axum::extract::{FromRequestParts, RawPathParams};
use axum::response::Response;
use http::request::Parts;
use http::{HeaderValue, Method, StatusCode, header};
use std::sync::Arc;

/// The path's `N` segments, percent-decoded: a segment that is not UTF-8, hides a `/` or is
/// empty names no page (404, before anyone is authenticated).
pub(super) struct Segments<const N: usize>(pub(super) [String; N]);

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
pub(super) struct Params(pub(super) Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(route::query(parts.uri.query())))
    }
}

impl Params {
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        route::param(&self.0, key)
    }
}

/// Who is asking (`Sessions::authenticate`): a browser opening a page without a session is
/// sent to sign in and back; anything else refused gets 401.
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

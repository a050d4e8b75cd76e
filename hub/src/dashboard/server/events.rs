//! The live feed: Server-Sent Events of the clusters and objects a page follows, as the
//! viewer's grants allow ([`crate::dashboard::live`]).

use super::D;
use super::extract::Params;
use super::respond::problem;
use crate::dashboard::auth::Viewer;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use http_body_util::StreamBody;
use std::collections::HashSet;

/// The most cluster names a page may follow live.
const MAX_FOLLOWED: usize = 1000;

/// `GET /events`: the live feed (Server-Sent Events) for the clusters and objects the page
/// follows.
pub(super) async fn events(State(d): D, viewer: Viewer, q: Params) -> Response {
    let followed: Option<HashSet<String>> = q.get("clusters").map(|s| {
        s.split(',')
            .filter(|n| !n.is_empty())
            .take(MAX_FOLLOWED)
            .map(str::to_string)
            .collect()
    });
    let follows = q
        .get("follow")
        .map(|f| crate::dashboard::live::Follows::parse(f, MAX_FOLLOWED))
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

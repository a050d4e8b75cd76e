//! The forms that change something: accept or deny a registration, pause, resume or undo a
//! rollout — each CSRF-checked, then allowed by the API's gate and the object's grants
//! ([`crate::dashboard::act`]), and an audit line.

use super::D;
use super::extract::Segments;
use super::respond::{not_here, problem, redirect};
use super::session::checked_form;
use crate::dashboard::auth::Viewer;
use crate::dashboard::html::U;
use crate::dashboard::{act, overview, rollouts, route};
use crate::grants::{Target, Verb};
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderMap, StatusCode};

/// `POST /clusters/<name>/registration`: accepts or denies a pending registration (the
/// overview's buttons): the same CSRF rules as every form, and what the API's
/// `AcceptClusters` / `DenyClusters` need.
pub(super) async fn registration(
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
pub(super) async fn rollout_action(
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
                crate::replicaset::ReplicaSetError::Refused(_) => StatusCode::CONFLICT,
                crate::replicaset::ReplicaSetError::Unavailable(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
            };
            problem(status, Some(viewer), &e.to_string())
        }
    }
}

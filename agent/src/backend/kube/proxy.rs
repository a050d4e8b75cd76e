//! The Kubernetes backend's side of the cluster proxy: the hub's request is made on the
//! cluster's API server with the agent's own client (its credentials, TLS and base URL), as
//! the caller's impersonated identity when the hub names one, and the answer — errors
//! included, verbatim — streams back as the API server sends it.

use crate::backend::api::{ApiRequest, ApiResponse};
use futures::TryStreamExt;
use http_body_util::BodyExt;
use kube::Client;

/// Response headers that stay on this side (framing, hop-by-hop).
const DROPPED: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
];

/// Makes `request` on the cluster's API server: with the agent's `client`, or — when the caller
/// presented a ManagedServiceAccount token — with a client made from `config` without the
/// agent's credentials, the token as `Authorization: Bearer`, so the API server authenticates
/// the ServiceAccount (and its RBAC decides).
pub async fn serve(client: &Client, config: &kube::Config, request: ApiRequest) -> ApiResponse {
    let bearer_client;
    let client = match &request.bearer {
        None => client,
        Some(_) => {
            let mut anonymous = config.clone();
            anonymous.auth_info = kube::config::AuthInfo::default();
            match Client::try_from(anonymous) {
                Ok(c) => {
                    bearer_client = c;
                    &bearer_client
                }
                Err(e) => {
                    return ApiResponse::status(
                        http::StatusCode::BAD_GATEWAY,
                        "InternalError",
                        &format!("the agent could not make a client for the caller's token: {e}"),
                    );
                }
            }
        }
    };
    let uri = if request.query.is_empty() {
        request.path.clone()
    } else {
        format!("{}?{}", request.path, request.query)
    };
    let mut builder = http::Request::builder()
        .method(request.method.clone())
        .uri(uri);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    if let Some(bearer) = &request.bearer {
        builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {}", bearer.0));
    } else if let Some(who) = &request.impersonate {
        builder = builder.header("Impersonate-User", who.user.as_str());
        for group in &who.groups {
            builder = builder.header("Impersonate-Group", group.as_str());
        }
    }
    let http_request = match builder.body(kube::client::Body::from(request.body.to_vec())) {
        Ok(r) => r,
        Err(e) => {
            return ApiResponse::status(
                http::StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("request {} {}: {e}", request.method, request.path),
            );
        }
    };
    match client.send(http_request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let mut headers = parts.headers;
            for h in DROPPED {
                headers.remove(h);
            }
            ApiResponse {
                status: parts.status,
                headers,
                body: Box::pin(body.into_data_stream().map_err(std::io::Error::other)),
            }
        }
        Err(e) => ApiResponse::status(
            http::StatusCode::BAD_GATEWAY,
            "InternalError",
            &format!("the agent could not reach its cluster's API server: {e}"),
        ),
    }
}

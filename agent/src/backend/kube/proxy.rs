//! The Kubernetes backend's side of the cluster proxy: the hub's request is made on the
//! cluster's API server with the agent's own connection settings (its credentials, TLS and
//! base URL), as the caller's impersonated identity when the hub names one; the request body
//! streams to the API server as the caller sends it, and the answer — errors included,
//! verbatim — streams back as the API server sends it.
//!
//! `kube::Client` takes only whole request bodies, so the proxy has its own HTTP client
//! ([`Upstream`]) built from the same `kube::Config` with kube's own layers (base URL,
//! authentication, extra headers) over a body that streams.

use crate::backend::api::{ApiRequest, ApiResponse, BodyStream};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use kube::client::ConfigExt;
use std::sync::Mutex;
use tower::{BoxError, ServiceBuilder, ServiceExt, util::BoxCloneService};

/// Response headers that stay on this side (framing, hop-by-hop).
const DROPPED: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
];

/// A request body that streams.
pub struct Body(BodyStream);

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        self.0
            .poll_next_unpin(cx)
            .map(|chunk| chunk.map(|c| c.map(http_body::Frame::data)))
    }
}

type Service =
    BoxCloneService<http::Request<Body>, http::Response<hyper::body::Incoming>, BoxError>;

/// An HTTP client for the cluster's API server that streams request bodies: pooled
/// connections, the config's TLS, base URL, authentication and extra headers.
pub struct Upstream {
    service: Mutex<Service>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").finish_non_exhaustive()
    }
}

impl Upstream {
    /// A client for `config`.
    pub fn new(config: &kube::Config) -> Result<Self, String> {
        if let Some(proxy) = &config.proxy_url {
            return Err(format!(
                "the kubeconfig names the proxy {proxy}: the agent reaches its API server directly"
            ));
        }
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(config.connect_timeout);
        let https = config
            .rustls_https_connector_with_connector(http)
            .map_err(|e| format!("TLS to the API server: {e}"))?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build::<_, Body>(https);
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(
                config
                    .auth_layer()
                    .map_err(|e| format!("credentials for the API server: {e}"))?,
            )
            .layer(
                config
                    .extra_headers_layer()
                    .map_err(|e| format!("the kubeconfig's extra headers: {e}"))?,
            )
            .service(ServiceExt::<http::Request<Body>>::map_err(
                client,
                BoxError::from,
            ));
        Ok(Self {
            service: Mutex::new(BoxCloneService::new(service)),
        })
    }

    async fn send(
        &self,
        request: http::Request<Body>,
    ) -> Result<http::Response<hyper::body::Incoming>, BoxError> {
        let service = self
            .service
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        service.oneshot(request).await
    }
}

/// Makes `request` on the cluster's API server through `upstream` (the agent's credentials),
/// or — when the caller presented a ManagedServiceAccount token — through a client made from
/// `config` without the agent's credentials, the token as `Authorization: Bearer`, so the API
/// server authenticates the ServiceAccount (and its RBAC decides).
pub async fn serve(upstream: &Upstream, config: &kube::Config, request: ApiRequest) -> ApiResponse {
    let bearer_upstream;
    let upstream = match &request.bearer {
        None => upstream,
        Some(_) => {
            let mut anonymous = config.clone();
            anonymous.auth_info = kube::config::AuthInfo::default();
            match Upstream::new(&anonymous) {
                Ok(u) => {
                    bearer_upstream = u;
                    &bearer_upstream
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
    let (method, path) = (request.method.clone(), request.path.clone());
    let http_request = match builder.body(Body(request.body.into_stream())) {
        Ok(r) => r,
        Err(e) => {
            return ApiResponse::status(
                http::StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("request {method} {path}: {e}"),
            );
        }
    };
    match upstream.send(http_request).await {
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

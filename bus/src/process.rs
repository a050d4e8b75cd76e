//! Process helpers shared by the binaries.

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, whichever comes first.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}

/// Resident set size of this process in bytes (Linux `/proc/self/status`), if known.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Serves `GET /metrics` (OpenMetrics text from `render`) and `GET /healthz` on an already-bound
/// listener until `shutdown` resolves: the hub's, the agent's and the simulator's endpoint.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    render: impl Fn() -> String + Clone + Send + Sync + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_metrics_with(listener, render, Vec::new(), shutdown).await
}

/// Serves a process still starting on an already-bound listener until `shutdown` resolves:
/// `GET /healthz` answers 200 with what `health` says (alive: a liveness probe leaves it be),
/// everything else 503 `starting` (`/readyz` included).
pub async fn serve_starting(
    listener: tokio::net::TcpListener,
    health: impl Fn() -> String + Clone + Send + Sync + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::{Router, http::StatusCode, routing::get};
    let app = Router::new()
        .route(
            "/healthz",
            get(move || {
                let body = health();
                async move { body }
            }),
        )
        .fallback(|| async { (StatusCode::SERVICE_UNAVAILABLE, "starting") });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// A JSON document served next to `/metrics` (e.g. `/debug/shards`).
pub type JsonRoute = (
    &'static str,
    std::sync::Arc<dyn Fn() -> String + Send + Sync>,
);

/// [`serve_metrics`] plus JSON documents at `extra` paths.
pub async fn serve_metrics_with(
    listener: tokio::net::TcpListener,
    render: impl Fn() -> String + Clone + Send + Sync + 'static,
    extra: Vec<JsonRoute>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::{Router, http::header, response::IntoResponse, routing::get};
    let mut app = Router::new();
    for (path, doc) in extra {
        app = app.route(
            path,
            get(move || {
                let body = doc();
                async move { ([(header::CONTENT_TYPE, "application/json")], body).into_response() }
            }),
        );
    }
    let app = app
        .route(
            "/metrics",
            get(move || {
                let body = render();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        body,
                    )
                        .into_response()
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

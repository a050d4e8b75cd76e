//! The web dashboard: `--dashboard-listen` serves the fleet as pages an operator opens in a
//! browser — server-rendered HTML, one URL per view, a small script compiled into the binary
//! that follows the hub's changes live. Same rules as the API and the cluster proxy: the API's
//! tokens and TLS certificate, plain HTTP and an open server on loopback only.
//!
//! - [`server`]: the HTTP layer (I/O) — an axum `Router` with one handler per page or action,
//!   authentication as an extractor, the host check and security headers as a middleware layer.
//! - [`route`]: which paths and methods exist, for the 404/405 answers; path segments decoded
//!   (pure).
//! - [`auth`]: bearer tokens, the sign-in form's sessions, CSRF (pure rules + the session map).
//! - [`html`]: the page frame and shared components, in maud — every spliced value escaped
//!   (pure).
//! - [`history`]: availability per cluster, transitions, counts over time (pure).
//! - [`fence`]: what one viewer's live stream may show by its grants (issue 48).
//! - [`act`]: whether a viewer may take an action (accept a cluster, pause a rollout) on one
//!   object, by the API's gate and the object's grants (issue 48).
//! - [`live`]: the task that follows the inventory and the controllers' views, and the
//!   Server-Sent Events streams.
//! - [`overview`], [`clusters`], [`cluster`], [`placements`], [`rollouts`], [`policies`],
//!   [`gitrepos`]: each view, built from the hub's in-memory views (pure).
//! - [`work`]: one ManifestWork's conditions and feedback per manifest (pure); [`works`]: every
//!   work of the fleet, filtered and paged (pure).
//! - [`progress`]: rollouts' progress as the dashboard saw it change (pure).
//! - [`plot`]: inline SVG pictures (pure).
//!
//! Reads come from the inventories and the controllers' views, never from the store: a page of
//! 10,000 clusters is a filter and a sort in memory.

pub mod act;
pub mod auth;
pub mod cluster;
pub mod clusters;
pub mod fence;
pub mod gitrepos;
pub mod history;
pub mod html;
pub mod live;
pub mod oidc;
pub mod overview;
pub mod placements;
pub mod plot;
pub mod policies;
pub mod progress;
pub mod rollouts;
pub mod route;
pub mod server;
pub mod work;
pub mod works;

#[cfg(test)]
mod tests;

use crate::inventory::{ClusterInventory, WorkInventory};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Settings of the dashboard.
#[derive(Debug, Clone, Default)]
pub struct DashboardConfig {
    /// Where to listen (`None`: no dashboard).
    pub listen: Option<std::net::SocketAddr>,
    /// How client connections are bounded.
    pub connections: crate::webserver::Limits,
    /// How the live feed is bounded.
    pub live: live::LiveConfig,
    /// How sign-in sessions are bounded.
    pub sessions: auth::SessionConfig,
    /// The sign-in with the OIDC issuer (`--dashboard-oidc-client-id`; `None`: tokens only).
    pub sign_in: Option<oidc::SignInConfig>,
}

/// What the dashboard reads.
pub struct Sources {
    /// Every cluster.
    pub inventory: ClusterInventory,
    /// Every work.
    pub works: WorkInventory,
    /// The controllers, while this hub holds them.
    pub units: Arc<crate::units::Units>,
    /// The API's tokens (`None`: open — loopback only).
    pub tokens: Option<crate::grpc::auth::Tokens>,
    /// Where refused live streams are counted.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The sign-in with the OIDC issuer, when offered.
    pub sign_in: Option<Arc<oidc::SignIn>>,
}

/// Starts the live feed and the server on `listener` (TLS when `tls`); both tasks end on
/// `shutdown`, the server's connections and streams with it.
pub fn start(
    config: &DashboardConfig,
    sources: Sources,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let (live, feed) = live::Live::start(
        sources.inventory.clone(),
        sources.units.watch_controllers(),
        config.live.clone(),
        shutdown.clone(),
    );
    // An open dashboard (no tokens) answers only requests addressed to this machine.
    let hosts = match (&sources.tokens, listener.local_addr()) {
        (None, Ok(listen)) => Some(crate::hosts::AllowedHosts::open_server(listen)),
        _ => None,
    };
    let live = live.count_refusals_in(sources.metrics.clone());
    let deps = Arc::new(server::Deps {
        hosts,
        inventory: sources.inventory,
        works: sources.works,
        units: sources.units,
        sessions: auth::Sessions::new(sources.tokens, config.sessions.clone()),
        live,
        tls: tls.is_some(),
        sign_in: sources.sign_in,
        shutdown: shutdown.clone(),
    });
    let dashboard = Arc::new(server::Dashboard::new(deps));
    let server = crate::webserver::serve(
        listener,
        tls,
        config.connections.clone(),
        dashboard,
        shutdown,
    );
    vec![feed, server]
}

//! The webhook listener (`--gitops-webhook-listen`): every hub may serve it. Thin: the path and
//! method, the source's rate (the connection's address, or behind a trusted proxy the one
//! [`super::forwarded::client`] reads), a place among the [`IN_FLIGHT`] deliveries taken at
//! once — at most [`PER_SOURCE`] of them reading a body for one source (an IPv4 address or an
//! IPv6 /48), none for [`pool::PENALTY`] after a body too slow or too large ([`super::pool`])
//! — the body's size and pace ([`super::pace`]), then the [`Delivery`] goes to
//! [`Route::deliver`] and its [`Answer`] back to the sender as JSON
//! (`{"result": …, "message": …}`). Served by [`crate::webserver`] (TLS with the API's
//! certificate, plain HTTP on loopback only) with at most [`PER_ADDRESS`] connections from one
//! source and one HTTP/2 stream per connection. No token: a webhook proves itself by its
//! signature, checked by the controllers' hub. Counted in `flotilla_hub_gitops_webhooks_total`
//! by provider and result; nothing of a secret or signature is logged.

use super::forward::Route;
use super::pool::{self, Full, Place, Pool};
use super::rate::Rates;
use super::{Answer, Delivery, MAX_BODY, Outcome, pace, verify};
use crate::keys::ObjectRef;
use crate::metrics::Metrics;
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use super::pace::BODY_TIME;

/// The path prefix.
pub const PATH: &str = "/hooks/gitrepos";
/// Deliveries taken at once by one hub (their bodies read, or waiting on their answer); past it
/// a delivery is answered 503 at once. Bounds the bodies held: `IN_FLIGHT` × [`MAX_BODY`].
pub const IN_FLIGHT: usize = 16;
/// Of the [`IN_FLIGHT`] deliveries, those one source ([`pool::holder_of`]: an IPv4 address or
/// an IPv6 /48) may have *reading a body* at once; past it its delivery is answered 503 at
/// once. A real sender's body comes in milliseconds, and once whole its delivery no longer
/// counts here (however long its answer takes); it takes `IN_FLIGHT / PER_SOURCE` sources
/// sending slow bodies to fill the hub, each refused every place for [`pool::PENALTY`] once
/// answered 408. Behind a trusted proxy the forwarded address is the source.
pub const PER_SOURCE: usize = 2;
/// Connections one source (an IPv4 address or an IPv6 /64) may hold at once, so one address
/// cannot take every connection slot from the senders that matter; trusted proxies excepted.
pub const PER_ADDRESS: usize = 8;

/// Settings of the listener.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where to listen (`None`: no listener).
    pub listen: Option<SocketAddr>,
    /// Webhooks a second per source address.
    pub rate: f64,
    /// Webhooks at once per source address.
    pub burst: f64,
    /// Proxies whose `X-Forwarded-For` is read (`--gitops-webhook-trusted-proxies`).
    pub trusted_proxies: Vec<crate::webserver::Cidr>,
    /// Connections, header and handshake times.
    pub limits: crate::webserver::Limits,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            listen: None,
            rate: super::rate::RATE,
            burst: super::rate::BURST,
            trusted_proxies: Vec::new(),
            limits: crate::webserver::Limits {
                max_connections: 64,
                header_read: Duration::from_secs(5),
                h2_max_streams: Some(1),
                per_address: PER_ADDRESS,
                ..crate::webserver::Limits::default()
            },
        }
    }
}

/// Labels of the webhook counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// `github`, `gitlab`, `gitea`, or `unknown` (no sender header, or refused before it was
    /// read).
    pub provider: &'static str,
    /// [`Outcome::label`].
    pub result: &'static str,
}

/// The listener's metrics (`flotilla_hub_gitops_webhooks_total`).
#[derive(Clone, Default)]
pub struct WebhookMetrics {
    /// Webhooks answered, by provider and result.
    pub webhooks: Family<WebhookLabels, Counter>,
}

impl WebhookMetrics {
    /// The metrics of `hub` (made and registered once).
    pub fn new(hub: &Metrics) -> Self {
        hub.component("gitops_webhooks", |hub| {
            let m = Self::default();
            hub.register_component("gitops", |r| {
                r.register(
                    "webhooks",
                    "GitRepo push webhooks answered, by provider and result (triggered, ignored, \
                     ping, replayed, unauthorized, unknown_repo, wrong_event, bad_request, \
                     too_large, too_slow, rate_limited, not_found, unavailable, busy)",
                    m.webhooks.clone(),
                );
            });
            m
        })
    }

    fn count(&self, a: &Answer) {
        let provider = a.provider.map_or("unknown", verify::Provider::name);
        self.webhooks
            .get_or_create(&WebhookLabels {
                provider,
                result: a.outcome.label(),
            })
            .inc();
    }
}

/// The listener's handler.
pub struct Webhooks {
    route: Route,
    rates: Mutex<Rates>,
    trusted: Vec<crate::webserver::Cidr>,
    in_flight: Arc<Mutex<Pool>>,
    metrics: WebhookMetrics,
}

impl Webhooks {
    /// A handler handing deliveries to `route`.
    pub fn new(config: &WebhookConfig, route: Route, metrics: &Metrics) -> Self {
        Self {
            route,
            rates: Mutex::new(Rates::new(config.rate, config.burst)),
            trusted: config.trusted_proxies.clone(),
            in_flight: Arc::new(Mutex::new(Pool::new(IN_FLIGHT, PER_SOURCE))),
            metrics: WebhookMetrics::new(metrics),
        }
    }

    async fn answer(&self, req: http::Request<Incoming>, peer: SocketAddr) -> Answer {
        let target = match target(req.uri().path()) {
            Ok(t) => t,
            Err(why) => return Answer::new(Outcome::NotFound, None, why),
        };
        if req.method() != http::Method::POST {
            return Answer::new(Outcome::NotFound, None, "webhooks are POSTed");
        }
        let forwarded: Vec<&str> = req
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let source = super::forwarded::client(peer.ip(), &forwarded, &self.trusted);
        let admitted = self
            .rates
            .lock()
            .expect("rates lock")
            .admit(source, Instant::now());
        if !admitted {
            return Answer::new(
                Outcome::RateLimited,
                None,
                "too many webhooks from this address; try again in a second",
            );
        }
        // Held until answered (or the sender is gone): bodies in flight are bounded whoever
        // sends them. Counted in the source's share only while its body is read: the phase
        // its sender controls (session-17 review M1).
        let mut place = match Place::take(&self.in_flight, source, Instant::now()) {
            Ok(place) => place,
            Err(full) => return busy(full),
        };
        let headers = req
            .headers()
            .iter()
            .filter(|(k, _)| verify::HEADERS.contains(&k.as_str()))
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let body = read_body(req.into_body()).await;
        place.body_read();
        let body = match body {
            Ok(body) => body,
            Err(answer) => {
                // A body too slow or too large costs its source every place for a while.
                self.in_flight
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .penalise(source, answer.outcome, Instant::now());
                return answer;
            }
        };
        self.route
            .deliver(Delivery {
                headers,
                body,
                target,
            })
            .await
    }
}

/// What a delivery refused a place is told.
fn busy(full: Full) -> Answer {
    match full {
        Full::Hub => Answer::new(
            Outcome::Busy,
            None,
            format!(
                "this hub is taking {IN_FLIGHT} webhooks at once already; try again in a few \
                 seconds"
            ),
        ),
        Full::Source => Answer::new(
            Outcome::Busy,
            None,
            format!(
                "this address has {PER_SOURCE} webhook bodies being sent here already, its share \
                 of the {IN_FLIGHT} this hub takes; try again once they are sent"
            ),
        ),
        Full::Penalised { why: _, left } => {
            let sent = "a body too slowly";
            let left = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            Answer::new(
                Outcome::RateLimited,
                None,
                format!(
                    "this address sent {sent} lately and is refused for {} s after it; try \
                     again in {left} s (a webhook's body is sent whole and at once)",
                    pool::PENALTY.as_secs()
                ),
            )
        }
    }
}

/// Reads a body of at most [`MAX_BODY`] bytes at [`pace`]'s pace: after each frame it may wait
/// for the next until [`pace::deadline`] of what came so far.
async fn read_body(body: Incoming) -> Result<Bytes, Answer> {
    let start = tokio::time::Instant::now();
    let mut body = Limited::new(body, MAX_BODY);
    let mut bytes = BytesMut::new();
    loop {
        let until = start + pace::deadline(bytes.len() as u64);
        match tokio::time::timeout_at(until, body.frame()).await {
            Ok(None) => return Ok(bytes.freeze()),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(Answer::new(
                    Outcome::TooLarge,
                    None,
                    format!("a webhook body may have at most {MAX_BODY} bytes"),
                ));
            }
            Ok(Some(Err(e))) => {
                return Err(Answer::new(
                    Outcome::BadRequest,
                    None,
                    format!("reading the body: {e}"),
                ));
            }
            Err(_) => {
                let message = pace::too_slow(bytes.len() as u64, start.elapsed());
                return Err(Answer::new(Outcome::TooSlow, None, message));
            }
        }
    }
}

/// The GitRepo a path names: `/hooks/gitrepos` (none: matched by URL) or
/// `/hooks/gitrepos/{namespace}/{name}`.
pub fn target(path: &str) -> Result<Option<ObjectRef>, String> {
    let rest = path
        .strip_prefix(PATH)
        .ok_or_else(|| format!("webhooks are POSTed to {PATH} or {PATH}/NAMESPACE/NAME"))?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() {
        return Ok(None);
    }
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        [ns, name]
            if rest.starts_with('/')
                && flotilla_api::names::validate_dns1123_label("namespace", ns).is_ok()
                && flotilla_api::names::validate_dns1123_subdomain("name", name).is_ok() =>
        {
            Ok(Some(ObjectRef::new(*ns, *name)))
        }
        _ => Err(format!(
            "webhooks are POSTed to {PATH} or {PATH}/NAMESPACE/NAME"
        )),
    }
}

impl crate::webserver::Handler for Webhooks {
    type Body = http_body_util::Full<Bytes>;
    type BodyError = std::convert::Infallible;
    const NAME: &'static str = "gitops webhooks";

    async fn handle(
        self: Arc<Self>,
        req: http::Request<Incoming>,
        peer: SocketAddr,
    ) -> http::Response<http_body_util::Full<Bytes>> {
        let answer = self.answer(req, peer).await;
        self.metrics.count(&answer);
        if answer.outcome.status() >= 400 {
            let provider = answer.provider.map_or("unknown", verify::Provider::name);
            tracing::info!(%peer, provider, result = answer.outcome.label(), message = %answer.message, "webhook refused");
            if !answer.detail.is_empty() {
                tracing::debug!(%peer, provider, detail = %answer.detail, "webhook refused: why");
            }
        } else {
            tracing::debug!(%peer, result = answer.outcome.label(), message = %answer.message, "webhook answered");
        }
        http::Response::builder()
            .status(answer.outcome.status())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(Bytes::from(answer.body())))
            .expect("a valid response")
    }
}

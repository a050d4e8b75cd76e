//! The cluster proxy's metrics (`flotilla_hub_cluster_proxy_…`): requests by verb and status
//! code class, calls open now, frames from spokes that were dropped, by reason, requests
//! refused at a limit, by limit, and the request-body bytes in flight to agents.

use crate::metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// Labels of the request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, …).
    pub verb: String,
    /// Status class (`2xx`, `4xx`, `5xx`).
    pub code: String,
}

/// Labels of the dropped-frame counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    /// Why (`reply_subject` — it carried one, which the spoke chose —, `subject`, `no_call` —
    /// its cluster has no open call, dropped undecoded —, `decode`, `unknown_stream`,
    /// `other_cluster`, `over_credit`).
    pub reason: &'static str,
}

/// Labels of the refusal counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// Which limit (`body_on_read` — a body on a GET, HEAD or watch —, `body_bytes` — the
    /// cluster's request-body bytes in flight —, `identity_calls` — the caller's share of
    /// calls —, `calls` — the hub's calls).
    pub reason: &'static str,
}

/// The cluster proxy's metrics (cloneable; families share their counters).
#[derive(Clone, Default)]
pub struct ProxyMetrics {
    /// Requests answered, by verb and status class.
    pub requests: Family<RequestLabels, Counter>,
    /// Calls to agents open now.
    pub open_calls: Gauge,
    /// Frames from spokes dropped, by reason.
    pub frames_dropped: Family<DropLabels, Counter>,
    /// Requests refused at a limit, by limit.
    pub refusals: Family<RefusalLabels, Counter>,
    /// Request-body bytes read from clients and on their way to agents, not yet answered.
    pub body_bytes_in_flight: Gauge,
    /// Exec, attach and port-forward sessions ([`super::streams`]).
    pub sessions: super::streams::SessionMetrics,
}

impl ProxyMetrics {
    /// The proxy metrics of `hub` (created and registered once).
    pub fn new(hub: &Metrics) -> Self {
        hub.component("cluster_proxy", |hub| {
            let m = Self::default();
            hub.register_component("cluster_proxy", |r| {
                r.register(
                    "requests",
                    "Cluster proxy requests answered, by verb and status class",
                    m.requests.clone(),
                );
                r.register(
                    "open_calls",
                    "Cluster proxy calls to agents open now",
                    m.open_calls.clone(),
                );
                r.register(
                    "frames_dropped",
                    "Cluster proxy frames from spokes dropped, by reason",
                    m.frames_dropped.clone(),
                );
                r.register(
                    "refusals",
                    "Cluster proxy requests refused at a limit, by limit",
                    m.refusals.clone(),
                );
                r.register(
                    "body_bytes_in_flight",
                    "Cluster proxy request-body bytes on their way to agents, not yet answered",
                    m.body_bytes_in_flight.clone(),
                );
                m.sessions.register(r);
            });
            m
        })
    }

    /// Counts a request answered with `status`.
    pub fn answered(&self, verb: &str, status: http::StatusCode) {
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.to_string(),
                code: format!("{}xx", status.as_u16() / 100),
            })
            .inc();
    }

    /// Counts a request refused at limit `reason`.
    pub fn refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&RefusalLabels { reason }).inc();
    }

    /// Counts a dropped frame.
    pub fn dropped(&self, reason: &'static str) {
        self.frames_dropped
            .get_or_create(&DropLabels { reason })
            .inc();
    }
}

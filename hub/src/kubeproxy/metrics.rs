//! The cluster proxy's metrics (`flotilla_hub_cluster_proxy_…`): requests by verb and status
//! code class, calls open now, and frames from spokes that were dropped, by reason.

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
    /// Why (`subject`, `no_call` — its cluster has no open call, dropped undecoded —,
    /// `decode`, `unknown_stream`, `other_cluster`, `over_credit`).
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

    /// Counts a dropped frame.
    pub fn dropped(&self, reason: &'static str) {
        self.frames_dropped
            .get_or_create(&DropLabels { reason })
            .inc();
    }
}

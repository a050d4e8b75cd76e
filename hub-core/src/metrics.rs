//! Prometheus metrics of the hub (prefix `flotilla_hub_`) and the `/metrics` endpoint.

use crate::inventory::ClusterInventory;
use flotilla_api::meta::{self, COND_AVAILABLE};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Labels of per-event-type counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// Event type (bounded: unknown types are counted as `unknown`).
    pub r#type: String,
}

/// Labels of rejected-event counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabels {
    /// Event type (bounded).
    pub r#type: String,
    /// Short reason (`decode`, `clustername_mismatch`, …).
    pub reason: String,
}

/// Labels of rejected gRPC calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiRejectLabels {
    /// `/package.Service/Method` (bounded: unknown paths are `other`).
    pub method: String,
    /// gRPC status code name (`InvalidArgument`, `NotFound`, …).
    pub code: String,
}

/// Rejected-input log lines allowed per second.
pub const REJECT_LOGS_PER_SECOND: u32 = 20;

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A per-second budget of log lines.
#[derive(Debug, Default)]
pub struct LogBudget {
    second: AtomicU64,
    used: AtomicU32,
    suppressed: AtomicU64,
}

impl LogBudget {
    /// Whether a line may be logged in second `now`; reports what the previous seconds left out.
    pub fn allow(&self, now: u64) -> bool {
        if self.second.swap(now, Ordering::Relaxed) != now {
            self.used.store(0, Ordering::Relaxed);
            let left_out = self.suppressed.swap(0, Ordering::Relaxed);
            if left_out > 0 {
                tracing::warn!(
                    left_out,
                    "rejected input: log lines left out (every rejection is counted in flotilla_hub_events_rejected_total)"
                );
            }
        }
        if self.used.fetch_add(1, Ordering::Relaxed) < REJECT_LOGS_PER_SECOND {
            true
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

/// Labels of mailbox counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActorLabels {
    /// Actor kind (`cluster`).
    pub actor: String,
}

/// Labels of the cluster gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// `hubAcceptsClient`.
    pub accepted: String,
    /// Status of ManagedClusterConditionAvailable (`True`, `False`, `Unknown`).
    pub available: String,
}

/// Labels of the agent-version gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AgentVersionLabels {
    /// The version the clusters' agents reported (`""` when an agent sent none).
    pub version: String,
}

/// The hub's metrics.
pub struct Metrics {
    registry: Mutex<Registry>,
    /// Components' metrics by key ([`Metrics::component`]).
    components:
        Mutex<std::collections::HashMap<&'static str, Box<dyn std::any::Any + Send + Sync>>>,
    /// Metrics exported under the name another project gave them (OCM's
    /// `policy_governance_info`), without the `flotilla_hub` prefix.
    unprefixed: Mutex<Registry>,
    /// Events received, by type.
    pub events_received: Family<TypeLabels, Counter>,
    /// Events rejected, by type and reason.
    pub events_rejected: Family<RejectLabels, Counter>,
    /// gRPC calls answered with an error, by method and code.
    pub api_rejected: Family<ApiRejectLabels, Counter>,
    /// Messages dropped because an actor's mailbox was full.
    pub mailbox_dropped: Family<ActorLabels, Counter>,
    /// Budget of rejected-input log lines.
    reject_logs: LogBudget,
    /// Clusters by acceptance and availability (computed at scrape time).
    pub clusters: Family<ClusterLabels, Gauge>,
    /// Clusters by the agent version they last registered with (computed at scrape time; a
    /// series per version, not per cluster).
    pub agent_versions: Family<AgentVersionLabels, Gauge>,
    /// KV write latency in seconds.
    pub kv_write_seconds: Histogram,
    /// Lease expiries (clusters turned Unknown).
    pub lease_expired: Counter,
    /// Cluster actors running in a task; the others are parked (idle, no task).
    pub cluster_actor_tasks: Gauge,
    /// Cluster NATS credentials issued (secure mode).
    pub credentials_issued: Counter,
    /// Seconds from the API accepting a work generation to the agent reporting it Applied and
    /// Available.
    pub work_latency_seconds: Histogram,
    /// Work specs re-sent because no status came back in time.
    pub work_resends: Counter,
    /// The same re-sends by reason (`cluster::resend::Reason::label`).
    pub work_resends_by_reason: Family<ReasonLabels, Counter>,
    /// Re-sends due but put off to the actor's next tick: the hub-wide budget was spent.
    pub work_resends_deferred: Counter,
    /// Spec resync requests answered.
    pub resyncs: Counter,
    /// Spec resync requests by kind of request (`digest`: the digest only; `full`: the version
    /// map) and outcome (`admitted`: handed to the cluster actor; `busy`: answered with a time
    /// to ask again; `dropped`: an agent of the previous wire at a full mailbox; `outlived`:
    /// admitted but still unanswered after the agents' longest wait, dropped by its actor).
    pub resync_requests: Family<ResyncLabels, Counter>,
    /// Registration requests refused without a change, by reason (another key for a known
    /// name, a denied cluster, a bad reply subject).
    pub registration_refusals: Family<ReasonLabels, Counter>,
    /// Input refused because a limit was reached, by limit.
    pub limit_refusals: Family<LimitLabels, Counter>,
    /// Registrations answered busy (ask again later; nothing stored), by reason: `in_flight`
    /// (the admission gate is full), `mailbox` (the cluster actor's mailbox is full), `store`
    /// (the cluster could not be written).
    pub registration_busy: Family<ReasonLabels, Counter>,
    /// Labels of first registrations the hub dropped because it reserves them, by kind
    /// (`clusterset`: the cluster set label; `reserved`: another hub-owned key).
    pub registration_labels_dropped: Family<ReasonLabels, Counter>,
}

/// Labels of a refusal counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Why.
    pub reason: String,
}

/// Labels of the resync request counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResyncLabels {
    /// `digest` or `full`.
    pub request: String,
    /// `admitted`, `busy`, `dropped` or `outlived`.
    pub outcome: String,
}

/// Labels of a limit counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// Which limit (`bootstrap_pending`, `bootstrap_rate`, `status_unknown`).
    pub limit: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("flotilla_hub");
        let m = Self {
            registry: Mutex::new(Registry::default()),
            components: Mutex::new(std::collections::HashMap::new()),
            unprefixed: Mutex::new(Registry::default()),
            events_received: Family::default(),
            events_rejected: Family::default(),
            api_rejected: Family::default(),
            mailbox_dropped: Family::default(),
            reject_logs: LogBudget::default(),
            clusters: Family::default(),
            agent_versions: Family::default(),
            kv_write_seconds: Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
            ]),
            lease_expired: Counter::default(),
            cluster_actor_tasks: Gauge::default(),
            credentials_issued: Counter::default(),
            work_latency_seconds: Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
            work_resends: Counter::default(),
            work_resends_by_reason: Family::default(),
            work_resends_deferred: Counter::default(),
            resyncs: Counter::default(),
            resync_requests: Family::default(),
            registration_refusals: Family::default(),
            limit_refusals: Family::default(),
            registration_busy: Family::default(),
            registration_labels_dropped: Family::default(),
        };
        m.register(&mut registry);
        let store = registry.sub_registry_with_prefix("store");
        crate::store::ride::METRICS.register(store);
        crate::store::quarantine::METRICS.register(store);
        *m.registry.lock().expect("metrics registry lock") = registry;
        m
    }

    /// Registers the hub's own metrics (those `new` makes) in `registry`.
    fn register(&self, registry: &mut Registry) {
        let m = self;
        registry.register(
            "events_received",
            "Events received from agents, by type",
            m.events_received.clone(),
        );
        registry.register(
            "events_rejected",
            "Events rejected, by type and reason",
            m.events_rejected.clone(),
        );
        registry.register(
            "api_rejected",
            "gRPC calls answered with an error status, by method and code",
            m.api_rejected.clone(),
        );
        registry.register(
            "mailbox_dropped",
            "Messages dropped because an actor mailbox was full",
            m.mailbox_dropped.clone(),
        );
        registry.register(
            "clusters",
            "Managed clusters by acceptance and availability",
            m.clusters.clone(),
        );
        registry.register(
            "agent_versions",
            "Managed clusters by the agent version they registered with",
            m.agent_versions.clone(),
        );
        registry.register(
            "kv_write_seconds",
            "JetStream KV write latency",
            m.kv_write_seconds.clone(),
        );
        registry.register(
            "work_latency_seconds",
            "Work accepted by the API until Applied and Available are reported",
            m.work_latency_seconds.clone(),
        );
        registry.register(
            "work_resends",
            "Work specs re-sent because no status came back in time",
            m.work_resends.clone(),
        );
        registry.register(
            "work_resends_by_reason",
            "Work specs re-sent, by reason (unconfirmed, received_not_applied, resumed, not_sent_here)",
            m.work_resends_by_reason.clone(),
        );
        registry.register(
            "work_resends_deferred",
            "Work spec re-sends put off to a later tick because the hub-wide re-send budget was spent",
            m.work_resends_deferred.clone(),
        );
        registry.register(
            "resyncs",
            "Spec resync requests answered",
            m.resyncs.clone(),
        );
        registry.register(
            "resync_requests",
            "Spec resync requests by request (digest, full) and outcome (admitted, busy, dropped, outlived)",
            m.resync_requests.clone(),
        );
        registry.register(
            "lease_expired",
            "Leases that expired (cluster became Unknown)",
            m.lease_expired.clone(),
        );
        registry.register(
            "cluster_actor_tasks",
            "Cluster actors running in a task; the others are parked (idle: nothing but a lease \
             deadline or a TTL ahead) and cost no task",
            m.cluster_actor_tasks.clone(),
        );
        registry.register(
            "credentials_issued",
            "Cluster NATS credentials issued with registration replies (secure mode)",
            m.credentials_issued.clone(),
        );
        registry.register(
            "registration_refusals",
            "Registration requests refused without changing anything, by reason",
            m.registration_refusals.clone(),
        );
        registry.register(
            "limit_refusals",
            "Input refused because a configured limit was reached, by limit",
            m.limit_refusals.clone(),
        );
        registry.register(
            "registration_busy",
            "Registrations answered busy (nothing stored, the agent told when to ask again), by reason",
            m.registration_busy.clone(),
        );
        registry.register(
            "registration_labels_dropped",
            "Labels a new cluster's registrant asked for that the hub reserves (dropped), by kind: clusterset or reserved",
            m.registration_labels_dropped.clone(),
        );
    }

    /// A component's metrics, made (and registered) the first time and the same ones after: the
    /// controllers start again on a hub that took their unit back, and registering their
    /// metrics twice would export every family twice.
    pub fn component<T: Clone + Send + Sync + 'static>(
        &self,
        key: &'static str,
        make: impl FnOnce(&Metrics) -> T,
    ) -> T {
        if let Some(m) = self
            .components
            .lock()
            .expect("components lock")
            .get(key)
            .and_then(|m| m.downcast_ref::<T>())
        {
            return m.clone();
        }
        let m = make(self);
        self.components
            .lock()
            .expect("components lock")
            .insert(key, Box::new(m.clone()));
        m
    }

    /// Registers a component's own metrics under `flotilla_hub_<prefix>_…`, so components
    /// (placement) keep their metrics next to their code.
    pub fn register_component(&self, prefix: &str, register: impl FnOnce(&mut Registry)) {
        let mut registry = self.registry.lock().expect("metrics registry lock");
        register(registry.sub_registry_with_prefix(prefix));
    }

    /// Registers a collector whose metrics are computed at each scrape, under
    /// `flotilla_hub_…` (a gauge over state kept elsewhere costs nothing between scrapes).
    pub fn register_collector(&self, collector: Box<dyn prometheus_client::collector::Collector>) {
        let mut registry = self.registry.lock().expect("metrics registry lock");
        registry.register_collector(collector);
    }

    /// Registers metrics under their own names (no `flotilla_hub` prefix), for names that
    /// dashboards already know from OCM.
    pub fn register_unprefixed(&self, register: impl FnOnce(&mut Registry)) {
        register(&mut self.unprefixed.lock().expect("metrics registry lock"));
    }

    /// Counts a received event.
    pub fn received(&self, event_type: &str) {
        self.events_received
            .get_or_create(&TypeLabels {
                r#type: bounded_type(event_type),
            })
            .inc();
    }

    /// Counts a gRPC call answered with an error.
    pub fn api_rejected(&self, method: &str, code: tonic::Code) {
        self.api_rejected
            .get_or_create(&ApiRejectLabels {
                method: method.to_string(),
                code: format!("{code:?}"),
            })
            .inc();
    }

    /// Counts a rejected event; returns whether to log it too. Every rejection is counted,
    /// but at most [`REJECT_LOGS_PER_SECOND`] are logged each second — a flood of bad input
    /// (a broken or hostile client) must not drown the log — and the number left out is logged
    /// once the next second begins.
    pub fn rejected(&self, event_type: &str, reason: &str) -> bool {
        self.events_rejected
            .get_or_create(&RejectLabels {
                r#type: bounded_type(event_type),
                reason: reason.to_string(),
            })
            .inc();
        self.reject_logs.allow(unix_seconds())
    }

    /// Counts a refused registration; returns whether to log it (rate-limited like
    /// [`Metrics::rejected`]).
    pub fn registration_refused(&self, reason: &str) -> bool {
        self.registration_refusals
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
        self.reject_logs.allow(unix_seconds())
    }

    /// Counts the reserved labels dropped from a new cluster's registration.
    pub fn registration_labels_dropped<'a>(&self, keys: impl IntoIterator<Item = &'a String>) {
        for key in keys {
            let kind = if key == flotilla_api::meta::CLUSTERSET_LABEL {
                "clusterset"
            } else {
                "reserved"
            };
            self.registration_labels_dropped
                .get_or_create(&ReasonLabels {
                    reason: kind.to_string(),
                })
                .inc();
        }
    }

    /// Counts a spec resync request of `request` kind by `outcome`.
    pub fn resync_request(&self, request: &str, outcome: &str) {
        self.resync_requests
            .get_or_create(&ResyncLabels {
                request: request.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Counts a work spec re-sent for `reason`.
    pub fn work_resent(&self, reason: &str) {
        self.work_resends.inc();
        self.work_resends_by_reason
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts a registration answered busy.
    pub fn registration_busy(&self, reason: &str) {
        self.registration_busy
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts input refused at a limit; returns whether to log it (rate-limited).
    pub fn limit_refused(&self, limit: &str) -> bool {
        self.limit_refusals
            .get_or_create(&LimitLabels {
                limit: limit.to_string(),
            })
            .inc();
        self.reject_logs.allow(unix_seconds())
    }

    /// Counts a mailbox drop.
    pub fn dropped(&self, actor: &str) {
        self.mailbox_dropped
            .get_or_create(&ActorLabels {
                actor: actor.to_string(),
            })
            .inc();
    }

    /// Renders the text exposition, refreshing the cluster gauge from the inventory.
    pub fn render(&self, inventory: &ClusterInventory) -> String {
        self.clusters.clear();
        self.agent_versions.clear();
        for c in inventory.snapshot() {
            let agent = c.status.as_ref().and_then(|s| s.version.as_ref());
            self.agent_versions
                .get_or_create(&AgentVersionLabels {
                    version: agent.map(|v| v.agent.clone()).unwrap_or_default(),
                })
                .inc();
            let accepted = c.spec.as_ref().is_some_and(|s| s.hub_accepts_client);
            let available = c
                .status
                .as_ref()
                .and_then(|s| meta::condition_status(&s.conditions, COND_AVAILABLE))
                .unwrap_or(meta::status::UNKNOWN)
                .to_string();
            self.clusters
                .get_or_create(&ClusterLabels {
                    accepted: accepted.to_string(),
                    available,
                })
                .inc();
        }
        let mut out = String::new();
        let registry = self.registry.lock().expect("metrics registry lock");
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        let mut plain = String::new();
        let unprefixed = self.unprefixed.lock().expect("metrics registry lock");
        if prometheus_client::encoding::text::encode(&mut plain, &unprefixed).is_ok()
            && plain.trim() != "# EOF"
            && let Some(head) = out.strip_suffix("# EOF\n")
        {
            // One exposition: the prefixed metrics, then the unprefixed ones and their EOF.
            out = format!("{head}{plain}");
        }
        out
    }
}

/// Keeps label cardinality bounded: only well-formed Flotilla types are used as labels.
fn bounded_type(t: &str) -> String {
    if flotilla_bus::EventType::parse(t).is_ok() && t.len() <= 80 {
        t.to_string()
    } else {
        "unknown".to_string()
    }
}

/// The newest live hub's version when this hub waits beside it ([`crate::ha::skew::waits`]).
fn waiting(shards: &crate::ha::shards::Shards) -> Option<String> {
    let live = shards.live();
    let versions: Vec<&str> = live.iter().map(|h| h.version.as_str()).collect();
    crate::ha::skew::waits(&shards.me().version, &versions).map(|newest| newest.to_string())
}

/// Serves `GET /metrics` on an already-bound listener until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    inventory: ClusterInventory,
    shards: crate::ha::shards::Shards,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let debug: flotilla_bus::process::JsonRoute = (
        "/debug/shards",
        Arc::new(move || {
            serde_json::json!({
                "hub": shards.me().hub,
                "incarnation": shards.me().incarnation,
                "held": shards.ownership().held(),
                "live": shards.live().into_iter().map(|h| h.hub).collect::<Vec<_>>(),
                "version": shards.me().version,
                "versions": shards.live().into_iter()
                    .map(|h| (h.hub, h.version))
                    .collect::<std::collections::BTreeMap<_, _>>(),
                "skew": crate::ha::skew::skewed(shards.me(), &shards.live()),
                // The newest live version when this hub waits beside it (takes no new units).
                "waiting": waiting(&shards),
                "events": shards.log().events(),
                "longest_renewal_gap_ms":
                    crate::ha::keeper::longest_renewal_gap().as_millis() as u64,
            })
            .to_string()
        }),
    );
    let store: flotilla_bus::process::JsonRoute = (
        "/debug/store",
        Arc::new(|| {
            let ride = &crate::store::ride::METRICS;
            serde_json::json!({
                "quarantined": crate::store::quarantine::list(),
                "election_retries": ride.retries(),
                "longest_election_wait_ms": ride.longest().as_millis() as u64,
            })
            .to_string()
        }),
    );
    flotilla_bus::process::serve_metrics_with(
        listener,
        move || metrics.render(&inventory),
        vec![debug, store],
        shutdown,
    )
    .await
}

/// The bound address of a listener, for logs.
pub fn addr(l: &tokio::net::TcpListener) -> Option<SocketAddr> {
    l.local_addr().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_rejections_logs_at_most_the_budget_per_second() {
        let budget = LogBudget::default();
        let logged = (0..1000).filter(|_| budget.allow(100)).count();
        assert_eq!(logged, REJECT_LOGS_PER_SECOND as usize);
        // A new second brings a new budget.
        assert!(budget.allow(101));
    }
}

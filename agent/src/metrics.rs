//! The agent's Prometheus metrics. One [`AgentMetrics`] per agent process — shared by every
//! agent of a simulator process, so `flotilla-sim` reports its whole fleet on one endpoint with
//! bounded cardinality (no per-cluster labels).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Mutex;

/// A result label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `ok` or `error`.
    pub result: &'static str,
}

/// The version label of `flotilla_agent_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

const OK: Outcome = Outcome { result: "ok" };
const ERROR: Outcome = Outcome { result: "error" };

/// Which limit refused a cluster-proxy call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProxyRefusal {
    /// `calls` (the agent's 256), `caller_calls` (one caller's share), `body_bytes` (the
    /// request-body bytes held), `body_on_read` (a body on a GET or HEAD).
    pub reason: &'static str,
}

/// The kind of a cluster-proxy session (`exec`, `attach`, `portforward`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SessionKind {
    /// The pod subresource.
    pub kind: &'static str,
}

/// Why an agent left a hub (MultipleHubs).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwitchReason {
    /// `unanswered` or `denied`.
    pub reason: &'static str,
}

/// Counters and gauges of one or many agents.
pub struct AgentMetrics {
    registry: Mutex<Registry>,
    /// Agents whose NATS connection is up.
    pub connected: Gauge,
    /// Connections established (first ones and reconnects).
    pub connections: Counter,
    /// Connections lost.
    pub disconnections: Counter,
    /// Work spec events received from the hub.
    pub spec_events: Counter,
    /// Messages on the spec subject dropped: unreadable, or an answer to someone's request
    /// (a reply subject anyone may name).
    pub spec_dropped: Counter,
    /// Times the NATS client dropped messages because a subscription's buffer was full (each
    /// makes the agent resync: a dropped message may have been a spec).
    pub slow_consumer: Counter,
    /// Manifest applies, by result.
    pub applies: Family<Outcome, Counter>,
    /// Work status events, by whether the hub's stream took them.
    pub status_events: Family<Outcome, Counter>,
    /// Works held.
    pub works: Gauge,
    /// Resources a work wrote back because someone else had changed or deleted them.
    pub drift_repairs: Counter,
    /// Fights over a work's resources (repairs backing off, `Contested`) that began.
    pub drift_fights: Counter,
    /// Switches from one hub to another (MultipleHubs), by why.
    pub hub_switches: Family<SwitchReason, Counter>,
    /// Work actors whose task ended without finishing their work, or that stayed stuck: started
    /// again from their record (forgotten, for the next resync, when they had none).
    pub work_actor_restarts: Counter,
    /// Work actors found running one handler for longer than the stall bound.
    pub work_actor_stalls: Counter,
    /// Cluster-proxy calls refused at a limit, by limit.
    pub proxy_refusals: Family<ProxyRefusal, Counter>,
    /// Request-body bytes of cluster-proxy calls held now.
    pub proxy_body_bytes: Gauge,
    /// Cluster-proxy sessions (exec, attach, port-forward) open now, by kind.
    pub proxy_sessions: Family<SessionKind, Gauge>,
}

impl std::fmt::Debug for AgentMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentMetrics")
            .field("connected", &self.connected.get())
            .field("works", &self.works.get())
            .finish_non_exhaustive()
    }
}

impl Default for AgentMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("flotilla_agent");
        let m = Self {
            registry: Mutex::new(Registry::default()),
            connected: Gauge::default(),
            connections: Counter::default(),
            disconnections: Counter::default(),
            spec_events: Counter::default(),
            spec_dropped: Counter::default(),
            slow_consumer: Counter::default(),
            applies: Family::default(),
            status_events: Family::default(),
            works: Gauge::default(),
            drift_repairs: Counter::default(),
            drift_fights: Counter::default(),
            hub_switches: Family::default(),
            work_actor_restarts: Counter::default(),
            work_actor_stalls: Counter::default(),
            proxy_refusals: Family::default(),
            proxy_body_bytes: Gauge::default(),
            proxy_sessions: Family::default(),
        };
        registry.register(
            "connected",
            "Agents whose NATS connection is up",
            m.connected.clone(),
        );
        registry.register(
            "connections",
            "NATS connections established (first ones and reconnects)",
            m.connections.clone(),
        );
        registry.register(
            "disconnections",
            "NATS connections lost",
            m.disconnections.clone(),
        );
        registry.register(
            "spec_events",
            "Work spec events received",
            m.spec_events.clone(),
        );
        registry.register(
            "spec_dropped",
            "Messages on the spec subject dropped (unreadable, or not the hub's notification)",
            m.spec_dropped.clone(),
        );
        registry.register(
            "slow_consumer",
            "Times the NATS client dropped messages of a full subscription (each makes the agent resync)",
            m.slow_consumer.clone(),
        );
        registry.register("applies", "Manifest applies by result", m.applies.clone());
        registry.register(
            "status_events",
            "Work status events by whether the hub's stream took them",
            m.status_events.clone(),
        );
        registry.register("works", "Works held", m.works.clone());
        registry.register(
            "drift_repairs",
            "Resources written back by their work after someone else changed or deleted them",
            m.drift_repairs.clone(),
        );
        registry.register(
            "drift_fights",
            "Fights over a work's resources that began (repairs backing off, Contested)",
            m.drift_fights.clone(),
        );
        registry.register(
            "hub_switches",
            "Switches from one hub to another (MultipleHubs) by reason: unanswered for the connection timeout, or denied",
            m.hub_switches.clone(),
        );
        registry.register(
            "work_actor_restarts",
            "Work actors that died or stayed stuck, started again from their record (or forgotten for the next resync without one)",
            m.work_actor_restarts.clone(),
        );
        registry.register(
            "work_actor_stalls",
            "Work actors found running one handler (apply, observe, publish...) for over a minute",
            m.work_actor_stalls.clone(),
        );
        registry.register(
            "proxy_refusals",
            "Cluster-proxy calls refused at a limit, by limit",
            m.proxy_refusals.clone(),
        );
        registry.register(
            "proxy_body_bytes",
            "Request-body bytes of cluster-proxy calls held now",
            m.proxy_body_bytes.clone(),
        );
        registry.register(
            "proxy_sessions",
            "Cluster-proxy sessions (exec, attach, port-forward) open now, by kind",
            m.proxy_sessions.clone(),
        );
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: flotilla_api::version::VERSION,
            })
            .set(1);
        registry.register(
            "build_info",
            "1, labelled with the agent's version (the hub accepts or refuses it at registration)",
            build,
        );
        *m.registry.lock().expect("registry lock") = registry;
        m
    }
}

impl AgentMetrics {
    /// Counts one apply.
    pub fn apply(&self, ok: bool) {
        self.applies
            .get_or_create(if ok { &OK } else { &ERROR })
            .inc();
    }

    /// Counts one status publish.
    pub fn status(&self, ok: bool) {
        self.status_events
            .get_or_create(if ok { &OK } else { &ERROR })
            .inc();
    }

    /// Counts a cluster-proxy call refused at limit `reason`.
    pub fn proxy_refused(&self, reason: &'static str) {
        self.proxy_refusals
            .get_or_create(&ProxyRefusal { reason })
            .inc();
    }

    /// The OpenMetrics text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().expect("registry lock");
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_metric_with_its_prefix() {
        let m = AgentMetrics::default();
        m.connected.inc();
        m.apply(true);
        m.apply(false);
        m.status(true);
        let text = m.render();
        for line in [
            "flotilla_agent_connected 1",
            "flotilla_agent_applies_total{result=\"ok\"} 1",
            "flotilla_agent_applies_total{result=\"error\"} 1",
            "flotilla_agent_status_events_total{result=\"ok\"} 1",
            "flotilla_agent_connections_total 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}

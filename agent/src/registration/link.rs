//! The agent's share of the connected gauge (I/O on metrics only): up while its link is, released
//! when the registration loop ends.

use std::sync::Arc;

/// Whether this agent's link is up, kept in the shared connected gauge (released on drop).
pub(super) struct Link {
    metrics: Arc<crate::metrics::AgentMetrics>,
    up: bool,
}

impl Link {
    pub(super) fn up(metrics: Arc<crate::metrics::AgentMetrics>) -> Self {
        metrics.connected.inc();
        metrics.connections.inc();
        Self { metrics, up: true }
    }

    pub(super) fn connected(&mut self) {
        if !self.up {
            self.up = true;
            self.metrics.connected.inc();
            self.metrics.connections.inc();
        }
    }

    pub(super) fn disconnected(&mut self) {
        if self.up {
            self.up = false;
            self.metrics.connected.dec();
            self.metrics.disconnections.inc();
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if self.up {
            self.metrics.connected.dec();
        }
    }
}

//! ManagedClusters: `get clusters` in clusteradm's columns and `describe cluster`.

use super::Kind;
use crate::output::conditions_block;
use flotilla_api::meta::{self, CLUSTERSET_LABEL, COND_AVAILABLE};
use flotilla_api::ocm;
use flotilla_api::v1::{ManagedCluster, ObjectMeta};

impl Kind for ManagedCluster {
    type Ocm = ocm::ManagedCluster;
    const COLUMNS: &'static [&'static str] = &[
        "NAME",
        "ACCEPTED",
        "AVAILABLE",
        "CLUSTERSET",
        "CPU",
        "MEMORY",
        "KUBERNETES VERSION",
    ];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let m = self.metadata.clone().unwrap_or_default();
        let st = self.status.clone().unwrap_or_default();
        vec![
            m.name,
            self.spec
                .as_ref()
                .is_some_and(|s| s.hub_accepts_client)
                .to_string(),
            meta::condition_status(&st.conditions, COND_AVAILABLE)
                .unwrap_or("Unknown")
                .to_string(),
            m.labels.get(CLUSTERSET_LABEL).cloned().unwrap_or_default(),
            st.capacity.get("cpu").cloned().unwrap_or_default(),
            st.capacity.get("memory").cloned().unwrap_or_default(),
            st.version.map(|v| v.kubernetes).unwrap_or_default(),
        ]
    }

    fn to_ocm(&self) -> ocm::ManagedCluster {
        ocm::ManagedCluster::from(self)
    }
}

/// A human description of one cluster (`describe cluster`).
pub fn describe(c: &ManagedCluster) -> String {
    let o = ocm::ManagedCluster::from(c);
    let mut s = String::new();
    s.push_str(&format!("Name:                {}\n", o.metadata.name));
    s.push_str(&format!("UID:                 {}\n", o.metadata.uid));
    s.push_str(&format!(
        "Created:             {}\n",
        o.metadata.creation_timestamp
    ));
    s.push_str(&format!(
        "Hub accepts client:  {}\n",
        o.spec.hub_accepts_client
    ));
    s.push_str(&format!(
        "Lease duration:      {}s\n",
        o.spec.lease_duration_seconds
    ));
    s.push_str("Labels:\n");
    for (k, v) in &o.metadata.labels {
        s.push_str(&format!("  {k}={v}\n"));
    }
    s.push_str("Taints:\n");
    for t in &o.spec.taints {
        s.push_str(&format!(
            "  {}={}:{} (added {})\n",
            t.key, t.value, t.effect, t.time_added
        ));
    }
    s.push_str(&format!(
        "Kubernetes version:  {}\n",
        o.status.version.kubernetes
    ));
    s.push_str("Capacity:\n");
    for (k, v) in &o.status.capacity {
        let alloc = o.status.allocatable.get(k).cloned().unwrap_or_default();
        s.push_str(&format!("  {k}: {v} (allocatable {alloc})\n"));
    }
    s.push_str("Claims:\n");
    for c in &o.status.cluster_claims {
        s.push_str(&format!("  {}={}\n", c.name, c.value));
    }
    s.push_str("Managed namespaces:\n");
    for n in &o.status.managed_namespaces {
        let state = n
            .conditions
            .iter()
            .find(|c| c.type_ == meta::COND_NAMESPACE_AVAILABLE)
            .map_or_else(
                || "waiting for the agent".to_string(),
                |c| {
                    let mut text = format!("{}={} ({})", c.type_, c.status, c.reason);
                    if c.status != meta::status::TRUE && !c.message.is_empty() {
                        text.push_str(&format!(": {}", c.message));
                    }
                    text
                },
            );
        s.push_str(&format!("  {} (set {}): {state}\n", n.name, n.cluster_set));
    }
    s.push_str(&conditions_block(&o.status.conditions));
    s
}

//! ManagedClusters: `get clusters` in clusteradm's columns and `describe cluster`.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use crate::output::conditions_block;
use flotilla_api::meta::{self, CLUSTERSET_LABEL, COND_AVAILABLE};
use flotilla_api::v1::{ManagedCluster, ObjectMeta};
use flotilla_api::{fingerprint, ocm};

/// Clusters asked for per page.
const CLUSTER_PAGE_SIZE: u32 = 1000;

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

    const WIDE_COLUMNS: &'static [&'static str] = &["AGENT", "KEY", "WAITING KEY", "LABELS"];

    fn wide_row(&self) -> Vec<String> {
        let hub = self.hub.clone().unwrap_or_default();
        let show = |k: &str| match fingerprint::of(k) {
            fp if fp.is_empty() => "-".to_string(),
            fp => fp,
        };
        let status = self.status.as_ref();
        let agent = status
            .and_then(|s| s.version.as_ref())
            .map(|v| v.agent.as_str())
            .filter(|v| !v.is_empty())
            .unwrap_or("-");
        // The hub refused that version (AgentVersionAccepted=False; describe says why).
        let refused = status.is_some_and(|s| {
            meta::condition_status(&s.conditions, meta::COND_AGENT_VERSION_ACCEPTED)
                == Some("False")
        });
        vec![
            if refused {
                format!("{agent} (refused)")
            } else {
                agent.to_string()
            },
            show(&hub.agent_public_key),
            show(&hub.requested_public_key),
            other_labels(self),
        ]
    }

    fn to_ocm(&self) -> ocm::ManagedCluster {
        ocm::ManagedCluster::from(self)
    }

    fn none(query: &super::Query, endpoint: &str) -> Option<String> {
        Some(if query.pending {
            format!("No registrations waiting on {endpoint}.")
        } else {
            format!("No clusters found on {endpoint}.")
        })
    }

    /// The named clusters, or every cluster matching the selector, sorted by name; only the
    /// pending ones with `--pending`.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let mut items = if query.names.is_empty() {
            crate::pager::all(|page_token| {
                let r = flotilla_api::v1::ListClustersRequest {
                    label_selector: query.selector.clone(),
                    page_size: CLUSTER_PAGE_SIZE,
                    page_token,
                };
                async move {
                    hub.idempotent(async || hub.clusters().list_clusters(r.clone()).await)
                        .await
                }
            })
            .await?
        } else {
            let mut items = Vec::new();
            for name in &query.names {
                let r = flotilla_api::v1::GetClusterRequest { name: name.clone() };
                items.push(
                    hub.idempotent(async || hub.clusters().get_cluster(r.clone()).await)
                        .await?,
                );
            }
            items
        };
        items.sort_by_key(Kind::name);
        if query.pending {
            items.retain(pending);
        }
        Ok(items)
    }
}

/// Whether the cluster waits for an admin: neither accepted nor denied.
pub fn pending(c: &ManagedCluster) -> bool {
    let accepted = c.spec.as_ref().is_some_and(|s| s.hub_accepts_client);
    let denied = c
        .status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, meta::COND_HUB_DENIED))
        == Some(meta::status::TRUE);
    !accepted && !denied
}

/// The labels but the set's (`CLUSTERSET` shows that one) as `k=v,…`, sorted; `-` for none.
pub fn other_labels(c: &ManagedCluster) -> String {
    let mut labels: Vec<String> = c
        .metadata
        .as_ref()
        .map(|m| &m.labels)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != CLUSTERSET_LABEL)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if labels.is_empty() {
        return "-".into();
    }
    labels.sort();
    labels.join(",")
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
    s.push_str(&identity_block(c));
    s.push_str(&conditions_block(&o.status.conditions));
    s
}

/// The agent identity part of `describe cluster`: the bound and waiting keys by fingerprint, an
/// outstanding join credential, the last refused registration, and what created the cluster.
fn identity_block(c: &ManagedCluster) -> String {
    let hub = c.hub.clone().unwrap_or_default();
    let shown = |k: &str| {
        if k.is_empty() {
            "none".to_string()
        } else {
            format!("{} ({k})", fingerprint::of(k))
        }
    };
    let mut s = String::from(
        "Agent identity:
",
    );
    s.push_str(&format!(
        "  Key:               {}
",
        shown(&hub.agent_public_key)
    ));
    if !hub.requested_public_key.is_empty() {
        s.push_str(&format!(
            "  Waiting key:       {}  (flotilla accept {} --key {})\n",
            shown(&hub.requested_public_key),
            c.metadata.as_ref().map_or("", |m| m.name.as_str()),
            fingerprint::of(&hub.requested_public_key)
        ));
    }
    if !hub.join_key.is_empty() {
        let until = hub
            .join_expires
            .as_ref()
            .map(meta::rfc3339)
            .unwrap_or_default();
        s.push_str(&format!(
            "  Join credential:   {} until {until}{}\n",
            shown(&hub.join_key),
            if hub.join_accept {
                ", pre-approved"
            } else {
                ""
            }
        ));
    }
    if !hub.join_cluster_set.is_empty() {
        s.push_str(&format!(
            "  Join cluster set:  {} (when an agent registers with the join credential)\n",
            hub.join_cluster_set
        ));
    }
    if !hub.dropped_labels.is_empty() {
        let mut dropped: Vec<String> = hub
            .dropped_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        dropped.sort();
        s.push_str(&format!(
            "  Dropped labels:    {} (asked for at registration; reserved for the hub)\n",
            dropped.join(", ")
        ));
    }
    if !hub.last_refusal.is_empty() {
        s.push_str(&format!("  Last refusal:      {}\n", hub.last_refusal));
    }
    use flotilla_api::v1::ClusterOrigin;
    let origin = match ClusterOrigin::try_from(hub.origin).unwrap_or_default() {
        ClusterOrigin::Registration => "its agent's registration",
        ClusterOrigin::Document => "a ManagedCluster document",
        ClusterOrigin::Join => "a join credential",
        ClusterOrigin::Import => "a ClusterImportPolicy (deleted with its source)",
        ClusterOrigin::Unspecified => "unknown (by hand, or before origins were recorded)",
    };
    s.push_str(&format!("  Created from:      {origin}\n"));
    s
}

impl Delete for ManagedCluster {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::DeleteClusterRequest { name: target.name };
        let d = hub
            .delete(async || hub.clusters().delete_cluster(r.clone()).await)
            .await?;
        Ok(Gone::new(d, format!("managedcluster/{} deleted", r.name)))
    }
}

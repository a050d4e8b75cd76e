//! `cluster.open-cluster-management.io/v1 ManagedCluster`: shown as OCM shows it, and applied
//! to create a cluster ahead of its agent (labels, taints, `hubAcceptsClient`,
//! `leaseDurationSeconds`) or to edit one. Status is the hub's and ignored on input.

use super::CLUSTER_V1;
use super::meta::{Condition, Metadata, conditions};
use crate::meta::rfc3339;
use crate::v1;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// ManagedCluster in the OCM shape (output only: clusters are created by registration).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedCluster {
    /// `cluster.open-cluster-management.io/v1`.
    pub api_version: String,
    /// `ManagedCluster`.
    pub kind: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ManagedClusterSpec,
    /// Status.
    #[serde(default)]
    pub status: ManagedClusterStatus,
}

/// ManagedCluster spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSpec {
    /// Hub side of the double opt-in.
    #[serde(default)]
    pub hub_accepts_client: bool,
    /// Lease renewal period in seconds.
    #[serde(default)]
    pub lease_duration_seconds: i32,
    /// Taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// A taint.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// NoSelect, PreferNoSelect or NoSelectIfNew.
    pub effect: String,
    /// When the hub added it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub time_added: String,
}

/// ManagedCluster status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, String>,
    /// Allocatable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, String>,
    /// Version.
    #[serde(default)]
    pub version: Version,
    /// Claims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_claims: Vec<Claim>,
    /// Namespaces managed on the cluster by the sets it belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_namespaces: Vec<ClusterSetManagedNamespace>,
}

/// One entry of `status.managedNamespaces`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSetManagedNamespace {
    /// Namespace name.
    pub name: String,
    /// The set that manages it.
    pub cluster_set: String,
    /// `NamespaceAvailable`, once the agent applied it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Spoke version.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Version {
    /// Kubernetes version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes: String,
    /// The Flotilla agent's version (a Flotilla extension to OCM's shape).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
}

/// A cluster claim.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Claim {
    /// Claim name.
    pub name: String,
    /// Claim value.
    pub value: String,
}

/// Taint effects OCM knows.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSelect", "PreferNoSelect", "NoSelectIfNew"];

impl ManagedCluster {
    /// The document as the hub's type, checked field by field (`path: message` on error).
    pub fn to_proto(&self) -> Result<v1::ManagedCluster, String> {
        let name = self.metadata.name.clone();
        crate::names::validate_cluster_name(&name)
            .map_err(|e| format!("metadata.name: {}", e.reason))?;
        let labels: std::collections::HashMap<String, String> =
            self.metadata.labels.clone().into_iter().collect();
        if let Some(e) = crate::names::validate_labels("metadata.labels", &labels)
            .into_iter()
            .next()
        {
            let text = e.to_string();
            return Err(match text.split_once(": ") {
                Some((path, rest)) => format!("{path}: {rest}"),
                None => format!("metadata.labels: {text}"),
            });
        }
        if !(0..=3600).contains(&self.spec.lease_duration_seconds) {
            return Err(format!(
                "spec.leaseDurationSeconds: {} is outside 0..=3600 (0 = the hub's default)",
                self.spec.lease_duration_seconds
            ));
        }
        let mut taints = Vec::with_capacity(self.spec.taints.len());
        for (i, t) in self.spec.taints.iter().enumerate() {
            crate::names::validate_label_key(&format!("spec.taints[{i}].key"), &t.key)
                .map_err(|e| e.to_string())?;
            if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
                return Err(format!(
                    "spec.taints[{i}].effect: {:?} is not NoSelect, PreferNoSelect or NoSelectIfNew",
                    t.effect
                ));
            }
            taints.push(v1::Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
                time_added: None,
            });
        }
        Ok(v1::ManagedCluster {
            metadata: Some(v1::ObjectMeta {
                name,
                labels,
                ..Default::default()
            }),
            spec: Some(v1::ManagedClusterSpec {
                hub_accepts_client: self.spec.hub_accepts_client,
                lease_duration_seconds: self.spec.lease_duration_seconds,
                taints,
            }),
            status: None,
            hub: None,
        })
    }
}

impl From<&v1::ManagedCluster> for ManagedCluster {
    fn from(c: &v1::ManagedCluster) -> Self {
        let spec = c.spec.clone().unwrap_or_default();
        let status = c.status.clone().unwrap_or_default();
        Self {
            api_version: CLUSTER_V1.into(),
            kind: "ManagedCluster".into(),
            metadata: c.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ManagedClusterSpec {
                hub_accepts_client: spec.hub_accepts_client,
                lease_duration_seconds: spec.lease_duration_seconds,
                taints: spec
                    .taints
                    .iter()
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                        time_added: t.time_added.as_ref().map(rfc3339).unwrap_or_default(),
                    })
                    .collect(),
            },
            status: ManagedClusterStatus {
                conditions: conditions(&status.conditions),
                capacity: status.capacity.into_iter().collect(),
                allocatable: status.allocatable.into_iter().collect(),
                version: status
                    .version
                    .map(|v| Version {
                        kubernetes: v.kubernetes,
                        agent: v.agent,
                    })
                    .unwrap_or_default(),
                cluster_claims: status
                    .cluster_claims
                    .into_iter()
                    .map(|c| Claim {
                        name: c.name,
                        value: c.value,
                    })
                    .collect(),
                managed_namespaces: status
                    .managed_namespaces
                    .iter()
                    .map(|n| ClusterSetManagedNamespace {
                        name: n.name.clone(),
                        cluster_set: n.cluster_set.clone(),
                        conditions: conditions(&n.conditions),
                    })
                    .collect(),
            },
        }
    }
}

//! `cluster.open-cluster-management.io/v1beta2 ManagedClusterSet` and
//! `ManagedClusterSetBinding`.

use super::CLUSTER_V1BETA2;
use super::meta::{Condition, LabelSelector, Metadata, conditions};
use crate::v1;
use serde::{Deserialize, Serialize};

/// ManagedClusterSet (v1beta2).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSet {
    /// `cluster.open-cluster-management.io/v1beta2`.
    pub api_version: String,
    /// `ManagedClusterSet`.
    pub kind: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ManagedClusterSetSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "ConditionsStatus::is_empty")]
    pub status: ConditionsStatus,
}

/// ManagedClusterSet spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSetSpec {
    /// How members are chosen.
    #[serde(default)]
    pub cluster_selector: ClusterSelector,
    /// Namespaces created on every member cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_namespaces: Vec<ManagedNamespace>,
}

/// One entry of `spec.managedNamespaces`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedNamespace {
    /// The namespace (a DNS-1123 label).
    #[serde(default)]
    pub name: String,
}

/// ManagedClusterSet selector.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelector {
    /// ExclusiveClusterSetLabel (default) or LabelSelector.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector_type: String,
    /// Selector for type LabelSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// A status made only of conditions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConditionsStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl ConditionsStatus {
    fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }
}

impl From<&v1::ManagedClusterSet> for ManagedClusterSet {
    fn from(s: &v1::ManagedClusterSet) -> Self {
        let sel = s
            .spec
            .as_ref()
            .and_then(|s| s.cluster_selector.clone())
            .unwrap_or_default();
        Self {
            api_version: CLUSTER_V1BETA2.into(),
            kind: "ManagedClusterSet".into(),
            metadata: s.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ManagedClusterSetSpec {
                cluster_selector: ClusterSelector {
                    selector_type: sel.selector_type,
                    label_selector: sel.label_selector.as_ref().map(LabelSelector::from),
                },
                managed_namespaces: s
                    .spec
                    .as_ref()
                    .map(|s| {
                        s.managed_namespaces
                            .iter()
                            .map(|n| ManagedNamespace {
                                name: n.name.clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            status: ConditionsStatus {
                conditions: s
                    .status
                    .as_ref()
                    .map(|st| conditions(&st.conditions))
                    .unwrap_or_default(),
            },
        }
    }
}

impl ManagedClusterSet {
    /// Converts to protobuf (status is dropped: the hub derives it).
    pub fn to_proto(&self) -> Result<v1::ManagedClusterSet, String> {
        Ok(v1::ManagedClusterSet {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ManagedClusterSetSpec {
                cluster_selector: Some(v1::ManagedClusterSelector {
                    selector_type: self.spec.cluster_selector.selector_type.clone(),
                    label_selector: self
                        .spec
                        .cluster_selector
                        .label_selector
                        .as_ref()
                        .map(v1::LabelSelector::from),
                }),
                managed_namespaces: self
                    .spec
                    .managed_namespaces
                    .iter()
                    .map(|n| v1::ManagedNamespaceConfig {
                        name: n.name.clone(),
                    })
                    .collect(),
            }),
            status: None,
        })
    }
}

/// ManagedClusterSetBinding (v1beta2).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetBinding {
    /// `cluster.open-cluster-management.io/v1beta2`.
    pub api_version: String,
    /// `ManagedClusterSetBinding`.
    pub kind: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: BindingSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "ConditionsStatus::is_empty")]
    pub status: ConditionsStatus,
}

/// Binding spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingSpec {
    /// The bound set; must equal the binding's name.
    #[serde(default)]
    pub cluster_set: String,
}

impl From<&v1::ManagedClusterSetBinding> for ManagedClusterSetBinding {
    fn from(b: &v1::ManagedClusterSetBinding) -> Self {
        Self {
            api_version: CLUSTER_V1BETA2.into(),
            kind: "ManagedClusterSetBinding".into(),
            metadata: b.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: BindingSpec {
                cluster_set: b
                    .spec
                    .as_ref()
                    .map(|s| s.cluster_set.clone())
                    .unwrap_or_default(),
            },
            status: ConditionsStatus {
                conditions: b
                    .status
                    .as_ref()
                    .map(|st| conditions(&st.conditions))
                    .unwrap_or_default(),
            },
        }
    }
}

impl ManagedClusterSetBinding {
    /// Converts to protobuf.
    pub fn to_proto(&self) -> Result<v1::ManagedClusterSetBinding, String> {
        Ok(v1::ManagedClusterSetBinding {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ManagedClusterSetBindingSpec {
                cluster_set: self.spec.cluster_set.clone(),
            }),
            status: None,
        })
    }
}

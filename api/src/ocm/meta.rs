//! Kubernetes object metadata, conditions and label selectors in the YAML shape.

use crate::meta::{parse_rfc3339, rfc3339};
use crate::v1;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Object metadata in the Kubernetes shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Namespace (namespaced kinds only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Hub-assigned UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Stored revision, as a decimal string like Kubernetes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Spec generation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: i64,
    /// Creation time (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub creation_timestamp: String,
    /// Deletion time (RFC 3339), while deleting.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deletion_timestamp: String,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl From<&v1::ObjectMeta> for Metadata {
    fn from(m: &v1::ObjectMeta) -> Self {
        Self {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            labels: m
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            annotations: m
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            uid: m.uid.clone(),
            resource_version: if m.resource_version == 0 {
                String::new()
            } else {
                m.resource_version.to_string()
            },
            generation: m.generation,
            creation_timestamp: m
                .creation_timestamp
                .as_ref()
                .map(rfc3339)
                .unwrap_or_default(),
            deletion_timestamp: m
                .deletion_timestamp
                .as_ref()
                .map(rfc3339)
                .unwrap_or_default(),
        }
    }
}

impl Metadata {
    /// Converts to protobuf metadata; a non-numeric resourceVersion is an error.
    pub fn to_proto(&self) -> Result<v1::ObjectMeta, String> {
        let resource_version = if self.resource_version.is_empty() {
            0
        } else {
            self.resource_version.parse().map_err(|_| {
                format!(
                    "metadata.resourceVersion: {:?} is not a number",
                    self.resource_version
                )
            })?
        };
        Ok(v1::ObjectMeta {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            labels: self.labels.clone().into_iter().collect(),
            annotations: self.annotations.clone().into_iter().collect(),
            uid: self.uid.clone(),
            resource_version,
            generation: self.generation,
            creation_timestamp: parse_rfc3339(&self.creation_timestamp),
            deletion_timestamp: parse_rfc3339(&self.deletion_timestamp),
        })
    }
}

/// metav1.Condition.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
    /// Generation the condition was computed for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
}

impl From<&v1::Condition> for Condition {
    fn from(c: &v1::Condition) -> Self {
        Self {
            type_: c.r#type.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: c
                .last_transition_time
                .as_ref()
                .map(rfc3339)
                .unwrap_or_default(),
            observed_generation: c.observed_generation,
        }
    }
}

/// Converts a list of conditions.
pub fn conditions(cs: &[v1::Condition]) -> Vec<Condition> {
    cs.iter().map(Condition::from).collect()
}

/// metav1.LabelSelector.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Exact label matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// metav1.LabelSelectorRequirement.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// In, NotIn, Exists or DoesNotExist.
    pub operator: String,
    /// Values for In/NotIn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl From<&v1::LabelSelector> for LabelSelector {
    fn from(s: &v1::LabelSelector) -> Self {
        Self {
            match_labels: s
                .match_labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            match_expressions: s
                .match_expressions
                .iter()
                .map(|r| Requirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: r.values.clone(),
                })
                .collect(),
        }
    }
}

impl From<&LabelSelector> for v1::LabelSelector {
    fn from(s: &LabelSelector) -> Self {
        Self {
            match_labels: s.match_labels.clone().into_iter().collect(),
            match_expressions: s
                .match_expressions
                .iter()
                .map(|r| v1::LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: r.values.clone(),
                })
                .collect(),
        }
    }
}

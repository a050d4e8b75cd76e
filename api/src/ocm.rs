//! Conversion between Flotilla's protobuf types and the YAML/JSON shapes OCM users read and
//! write (`cluster.open-cluster-management.io/v1 ManagedCluster`, `v1beta2 ManagedClusterSet`,
//! …), so that OCM YAML applies unchanged and `-o yaml` prints what `kubectl get -o yaml` would.

use crate::meta::{parse_rfc3339, rfc3339};
use crate::v1;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

pub mod placement;

pub use placement::{AddOnPlacementScore, Placement, PlacementDecision};

/// API group/version of clusters.
pub const CLUSTER_V1: &str = "cluster.open-cluster-management.io/v1";
/// API group/version of sets and bindings.
pub const CLUSTER_V1BETA2: &str = "cluster.open-cluster-management.io/v1beta2";

/// A document that cannot be applied.
#[derive(Debug, Error)]
pub enum DocError {
    /// The text is not YAML.
    #[error("document {doc}: invalid YAML: {source}")]
    Yaml {
        /// 1-based document index in the input.
        doc: usize,
        /// The parser's error (with line and column).
        #[source]
        source: serde_yaml::Error,
    },
    /// A field has the wrong shape.
    #[error("document {doc} ({kind} {name}): {path}: {message}")]
    Field {
        /// 1-based document index.
        doc: usize,
        /// The document's kind.
        kind: String,
        /// The object's name, when known.
        name: String,
        /// Path of the bad field (`spec.clusterSelector.selectorType`).
        path: String,
        /// What was wrong.
        message: String,
    },
    /// apiVersion/kind is not one Flotilla accepts.
    #[error(
        "document {doc}: unsupported apiVersion/kind {api_version:?}/{kind:?} (supported: {supported})"
    )]
    Unsupported {
        /// 1-based document index.
        doc: usize,
        /// The document's apiVersion.
        api_version: String,
        /// The document's kind.
        kind: String,
        /// What is supported.
        supported: String,
    },
}

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
}

/// Spoke version.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Version {
    /// Kubernetes version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes: String,
}

/// A cluster claim.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Claim {
    /// Claim name.
    pub name: String,
    /// Claim value.
    pub value: String,
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
                version: Version {
                    kubernetes: status.version.map(|v| v.kubernetes).unwrap_or_default(),
                },
                cluster_claims: status
                    .cluster_claims
                    .into_iter()
                    .map(|c| Claim {
                        name: c.name,
                        value: c.value,
                    })
                    .collect(),
            },
        }
    }
}

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

/// A `kind: List` like kubectl prints for several objects.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    /// `v1`.
    pub api_version: &'static str,
    /// `List`.
    pub kind: &'static str,
    /// The objects.
    pub items: Vec<T>,
}

impl<T> List<T> {
    /// Wraps items in a List.
    pub fn new(items: Vec<T>) -> Self {
        Self {
            api_version: "v1",
            kind: "List",
            items,
        }
    }
}

/// One object read from an apply document.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// A ManagedClusterSet.
    ClusterSet(v1::ManagedClusterSet),
    /// A ManagedClusterSetBinding.
    Binding(v1::ManagedClusterSetBinding),
    /// A ManifestWork.
    Work(v1::ManifestWork),
    /// A Placement.
    Placement(v1::Placement),
    /// An AddOnPlacementScore.
    Score(v1::AddOnPlacementScore),
}

const SUPPORTED: &str = "cluster.open-cluster-management.io/v1beta2 ManagedClusterSet, \
cluster.open-cluster-management.io/v1beta2 ManagedClusterSetBinding, \
work.open-cluster-management.io/v1 ManifestWork, \
cluster.open-cluster-management.io/v1beta1 Placement, \
cluster.open-cluster-management.io/v1alpha1 AddOnPlacementScore";

/// Parses multi-document YAML (or JSON) into objects. Every document is parsed; the result has
/// one entry per non-empty document, in order, so a caller can report all errors at once and
/// apply nothing when any document is bad.
pub fn parse_documents(text: &str) -> Vec<Result<Document, DocError>> {
    let mut out = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let doc = i + 1;
        let value = match serde_yaml::Value::deserialize(de) {
            Ok(serde_yaml::Value::Null) => continue,
            Ok(v) => v,
            Err(source) => {
                out.push(Err(DocError::Yaml { doc, source }));
                // After a syntax error the rest of the stream cannot be trusted.
                break;
            }
        };
        out.push(parse_document(doc, value));
    }
    out
}

fn str_field(v: &serde_yaml::Value, key: &str) -> String {
    v.get(key)
        .and_then(|x| x.as_str())
        .unwrap_or_default()
        .to_string()
}

fn typed<T: serde::de::DeserializeOwned>(
    doc: usize,
    kind: &str,
    name: &str,
    value: serde_yaml::Value,
) -> Result<T, DocError> {
    serde_path_to_error::deserialize(value).map_err(|e| DocError::Field {
        doc,
        kind: kind.to_string(),
        name: name.to_string(),
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

fn parse_document(doc: usize, value: serde_yaml::Value) -> Result<Document, DocError> {
    let api_version = str_field(&value, "apiVersion");
    let kind = str_field(&value, "kind");
    let name = value
        .get("metadata")
        .map(|m| str_field(m, "name"))
        .unwrap_or_default();
    let field_err = |path: &str, message: String| DocError::Field {
        doc,
        kind: kind.clone(),
        name: name.clone(),
        path: path.to_string(),
        message,
    };
    let is_set_group = matches!(
        api_version.as_str(),
        "cluster.open-cluster-management.io/v1beta2" | "cluster.open-cluster-management.io/v1beta1"
    );
    match (is_set_group, kind.as_str()) {
        (true, "ManagedClusterSet") => {
            let s: ManagedClusterSet = typed(doc, &kind, &name, value)?;
            s.to_proto()
                .map(Document::ClusterSet)
                .map_err(|m| field_err("metadata.resourceVersion", m))
        }
        (true, "ManagedClusterSetBinding") => {
            let b: ManagedClusterSetBinding = typed(doc, &kind, &name, value)?;
            b.to_proto()
                .map(Document::Binding)
                .map_err(|m| field_err("metadata.resourceVersion", m))
        }
        _ if api_version == WORK_V1 && kind == "ManifestWork" => {
            let w: ManifestWork = typed(doc, &kind, &name, value)?;
            w.to_proto()
                .map(Document::Work)
                .map_err(|m| field_err("", m))
        }
        _ if api_version == placement::CLUSTER_V1BETA1 && kind == "Placement" => {
            let p: Placement = typed(doc, &kind, &name, value)?;
            p.to_proto()
                .map(Document::Placement)
                .map_err(|m| field_err("metadata.resourceVersion", m))
        }
        _ if api_version == placement::CLUSTER_V1ALPHA1 && kind == "AddOnPlacementScore" => {
            let s: AddOnPlacementScore = typed(doc, &kind, &name, value)?;
            s.to_proto()
                .map(Document::Score)
                .map_err(|m| match m.split_once(": ") {
                    Some((path, message)) => field_err(path, message.to_string()),
                    None => field_err("", m),
                })
        }
        _ => Err(DocError::Unsupported {
            doc,
            api_version,
            kind,
            supported: SUPPORTED.into(),
        }),
    }
}

/// API group/version of works.
pub const WORK_V1: &str = "work.open-cluster-management.io/v1";

/// ManifestWork in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWork {
    /// `work.open-cluster-management.io/v1`.
    pub api_version: String,
    /// `ManifestWork`.
    pub kind: String,
    /// Metadata (namespace = cluster name).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: WorkSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkStatus>,
}

/// ManifestWork spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkSpec {
    /// The manifests.
    #[serde(default)]
    pub workload: Workload,
    /// What happens to resources on deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    /// Per-resource options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfig>,
    /// OCM's executor field: accepted and ignored (Flotilla's agent applies with its own identity).
    #[serde(default, skip_serializing)]
    pub executor: Option<serde_json::Value>,
}

/// The manifests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Kubernetes objects.
    #[serde(default)]
    pub manifests: Vec<serde_json::Value>,
}

/// Delete option.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteOption {
    /// Foreground, Orphan or SelectivelyOrphan.
    #[serde(default)]
    pub propagation_policy: String,
    /// Rules for SelectivelyOrphan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectively_orphans: Option<SelectivelyOrphans>,
    /// Delete the work this long after it is Complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i64>,
}

/// SelectivelyOrphan rules.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectivelyOrphans {
    /// Resources to keep.
    #[serde(default)]
    pub orphaning_rules: Vec<ResourceIdentifier>,
}

/// Selects a resource by group, resource, namespace and name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResourceIdentifier {
    /// API group ("" for core).
    #[serde(default)]
    pub group: String,
    /// Plural resource (deployments).
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// Per-resource options.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestConfig {
    /// Which resource.
    pub resource_identifier: ResourceIdentifier,
    /// Status feedback rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback_rules: Vec<FeedbackRule>,
    /// Update strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// OCM condition rules: accepted and ignored for now.
    #[serde(default, skip_serializing)]
    pub condition_rules: Option<serde_json::Value>,
}

/// A feedback rule.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackRule {
    /// WellKnownStatus or JSONPaths.
    #[serde(rename = "type")]
    pub type_: String,
    /// Paths for JSONPaths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<JsonPath>,
}

/// A named JSONPath.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JsonPath {
    /// Value name.
    pub name: String,
    /// Path.
    pub path: String,
    /// Version of the resource the path applies to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}

/// Update strategy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStrategy {
    /// Update, CreateOnly, ServerSideApply or ReadOnly.
    #[serde(rename = "type")]
    pub type_: String,
    /// Options for ServerSideApply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApply>,
}

/// ServerSideApply options.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerSideApply {
    /// Take ownership of conflicting fields.
    #[serde(default)]
    pub force: bool,
    /// Field manager name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_manager: String,
    /// OCM ignoreFields: accepted and ignored for now.
    #[serde(default, skip_serializing)]
    pub ignore_fields: Option<serde_json::Value>,
}

/// ManifestWork status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    /// Work conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per-manifest status.
    #[serde(default)]
    pub resource_status: ResourceStatus,
}

/// Per-manifest status list.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ResourceStatus {
    /// One entry per manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<ManifestStatus>,
}

/// Status of one manifest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestStatus {
    /// Which resource.
    pub resource_meta: ResourceMeta,
    /// Feedback values.
    #[serde(default)]
    pub status_feedback: StatusFeedback,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Identity of a manifest in status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ResourceMeta {
    /// Index in the work.
    pub ordinal: i32,
    /// Group.
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// Feedback values.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StatusFeedback {
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<FeedbackValue>,
}

/// One feedback value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    /// Name.
    pub name: String,
    /// Typed value.
    pub field_value: FieldValue,
}

/// A typed value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    /// Integer, String, Boolean or JsonRaw.
    #[serde(rename = "type")]
    pub type_: String,
    /// Integer value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<i64>,
    /// String value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// Boolean value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boolean: Option<bool>,
    /// Raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_raw: Option<String>,
}

impl ManifestWork {
    /// Converts to protobuf; manifests become JSON bytes.
    pub fn to_proto(&self) -> Result<v1::ManifestWork, String> {
        let s = &self.spec;
        let manifests = s
            .workload
            .manifests
            .iter()
            .enumerate()
            .map(|(i, m)| {
                serde_json::to_vec(m)
                    .map(|raw| v1::Manifest { raw })
                    .map_err(|e| format!("spec.workload.manifests[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rid = |r: &ResourceIdentifier| v1::ResourceIdentifier {
            group: r.group.clone(),
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        };
        Ok(v1::ManifestWork {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ManifestWorkSpec {
                workload: Some(v1::ManifestsTemplate { manifests }),
                delete_option: s.delete_option.as_ref().map(|d| v1::DeleteOption {
                    propagation_policy: d.propagation_policy.clone(),
                    selectively_orphans: d.selectively_orphans.as_ref().map(|so| {
                        v1::SelectivelyOrphan {
                            orphaning_rules: so
                                .orphaning_rules
                                .iter()
                                .map(|r| v1::OrphaningRule {
                                    group: r.group.clone(),
                                    resource: r.resource.clone(),
                                    namespace: r.namespace.clone(),
                                    name: r.name.clone(),
                                })
                                .collect(),
                        }
                    }),
                    ttl_seconds_after_finished: d.ttl_seconds_after_finished,
                }),
                manifest_configs: s
                    .manifest_configs
                    .iter()
                    .map(|c| v1::ManifestConfigOption {
                        resource_identifier: Some(rid(&c.resource_identifier)),
                        feedback_rules: c
                            .feedback_rules
                            .iter()
                            .map(|r| v1::FeedbackRule {
                                r#type: r.type_.clone(),
                                json_paths: r
                                    .json_paths
                                    .iter()
                                    .map(|p| v1::JsonPath {
                                        name: p.name.clone(),
                                        path: p.path.clone(),
                                        version: p.version.clone(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                        update_strategy: c.update_strategy.as_ref().map(|u| v1::UpdateStrategy {
                            r#type: u.type_.clone(),
                            server_side_apply: u.server_side_apply.as_ref().map(|ssa| {
                                v1::ServerSideApplyConfig {
                                    force: ssa.force,
                                    field_manager: ssa.field_manager.clone(),
                                }
                            }),
                        }),
                    })
                    .collect(),
            }),
            status: None,
            hub: None,
        })
    }
}

impl From<&v1::ManifestWork> for ManifestWork {
    fn from(w: &v1::ManifestWork) -> Self {
        let spec = w.spec.clone().unwrap_or_default();
        let rid = |r: &v1::ResourceIdentifier| ResourceIdentifier {
            group: r.group.clone(),
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        };
        let status = w.status.as_ref().map(|st| WorkStatus {
            conditions: conditions(&st.conditions),
            resource_status: ResourceStatus {
                manifests: st
                    .resource_status
                    .as_ref()
                    .map(|rs| {
                        rs.manifests
                            .iter()
                            .map(|m| {
                                let rm = m.resource_meta.clone().unwrap_or_default();
                                ManifestStatus {
                                    resource_meta: ResourceMeta {
                                        ordinal: rm.ordinal,
                                        group: rm.group,
                                        version: rm.version,
                                        kind: rm.kind,
                                        resource: rm.resource,
                                        namespace: rm.namespace,
                                        name: rm.name,
                                    },
                                    status_feedback: StatusFeedback {
                                        values: m
                                            .status_feedback
                                            .as_ref()
                                            .map(|f| {
                                                f.values
                                                    .iter()
                                                    .map(|v| {
                                                        let fv = v
                                                            .field_value
                                                            .clone()
                                                            .unwrap_or_default();
                                                        FeedbackValue {
                                                            name: v.name.clone(),
                                                            field_value: FieldValue {
                                                                type_: fv.r#type,
                                                                integer: fv.integer,
                                                                string: fv.string,
                                                                boolean: fv.boolean,
                                                                json_raw: fv.json_raw,
                                                            },
                                                        }
                                                    })
                                                    .collect()
                                            })
                                            .unwrap_or_default(),
                                    },
                                    conditions: conditions(&m.conditions),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        });
        Self {
            api_version: WORK_V1.into(),
            kind: "ManifestWork".into(),
            metadata: w.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: WorkSpec {
                workload: Workload {
                    manifests: spec
                        .workload
                        .map(|wl| {
                            wl.manifests
                                .iter()
                                .map(|m| {
                                    serde_json::from_slice(&m.raw)
                                        .unwrap_or(serde_json::Value::Null)
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                },
                delete_option: spec.delete_option.map(|d| DeleteOption {
                    propagation_policy: d.propagation_policy,
                    selectively_orphans: d.selectively_orphans.map(|so| SelectivelyOrphans {
                        orphaning_rules: so
                            .orphaning_rules
                            .iter()
                            .map(|r| ResourceIdentifier {
                                group: r.group.clone(),
                                resource: r.resource.clone(),
                                namespace: r.namespace.clone(),
                                name: r.name.clone(),
                            })
                            .collect(),
                    }),
                    ttl_seconds_after_finished: d.ttl_seconds_after_finished,
                }),
                manifest_configs: spec
                    .manifest_configs
                    .iter()
                    .map(|c| ManifestConfig {
                        resource_identifier: c
                            .resource_identifier
                            .as_ref()
                            .map(rid)
                            .unwrap_or_default(),
                        feedback_rules: c
                            .feedback_rules
                            .iter()
                            .map(|r| FeedbackRule {
                                type_: r.r#type.clone(),
                                json_paths: r
                                    .json_paths
                                    .iter()
                                    .map(|p| JsonPath {
                                        name: p.name.clone(),
                                        path: p.path.clone(),
                                        version: p.version.clone(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                        update_strategy: c.update_strategy.as_ref().map(|u| UpdateStrategy {
                            type_: u.r#type.clone(),
                            server_side_apply: u.server_side_apply.as_ref().map(|s| {
                                ServerSideApply {
                                    force: s.force,
                                    field_manager: s.field_manager.clone(),
                                    ignore_fields: None,
                                }
                            }),
                        }),
                        condition_rules: None,
                    })
                    .collect(),
                executor: None,
            },
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_hello_work_demo_seed_example() {
        let text = r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: cluster1
  name: hello-work-demo
spec:
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: hello
          namespace: default
        spec:
          selector:
            matchLabels:
              app: hello
          template:
            metadata:
              labels:
                app: hello
            spec:
              containers:
                - name: hello
                  image: quay.io/asmacdo/busybox
                  command: ["sh", "-c", 'echo "Hello, Kubernetes!" && sleep 3600']
  manifestConfigs:
    - resourceIdentifier:
        group: apps
        resource: deployments
        namespace: default
        name: hello
      feedbackRules:
        - type: WellKnownStatus
        - type: JSONPaths
          jsonPaths:
            - name: isAvailable
              path: '.status.conditions[?(@.type=="Available")].status'
"#;
        let docs = parse_documents(text);
        let Ok(Document::Work(w)) = &docs[0] else {
            panic!("{docs:?}")
        };
        assert_eq!(w.metadata.as_ref().unwrap().namespace, "cluster1");
        let spec = w.spec.as_ref().unwrap();
        assert_eq!(spec.workload.as_ref().unwrap().manifests.len(), 1);
        assert_eq!(spec.manifest_configs[0].feedback_rules.len(), 2);
        let back = ManifestWork::from(w);
        assert_eq!(back.spec.workload.manifests[0]["metadata"]["name"], "hello");
        assert_eq!(back.to_proto().unwrap().spec, w.spec);
    }

    #[test]
    fn parses_sets_and_bindings_as_ocm_users_write_them() {
        let text = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: prod
spec:
  clusterSelector:
    selectorType: LabelSelector
    labelSelector:
      matchLabels:
        env: prod
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: prod
  namespace: default
spec:
  clusterSet: prod
"#;
        let docs: Vec<_> = parse_documents(text)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(docs.len(), 2);
        let Document::ClusterSet(set) = &docs[0] else {
            panic!("first document should be a set")
        };
        let sel = set
            .spec
            .as_ref()
            .unwrap()
            .cluster_selector
            .as_ref()
            .unwrap();
        assert_eq!(sel.selector_type, "LabelSelector");
        assert_eq!(
            sel.label_selector.as_ref().unwrap().match_labels["env"],
            "prod"
        );
        let Document::Binding(b) = &docs[1] else {
            panic!("second document should be a binding")
        };
        assert_eq!(b.metadata.as_ref().unwrap().namespace, "default");
    }

    #[test]
    fn bad_fields_name_document_and_path() {
        let text = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata:\n  name: s\nspec:\n  clusterSelector:\n    selectorTyp: X\n";
        let err = parse_documents(text).remove(0).unwrap_err().to_string();
        assert!(err.contains("document 1"), "{err}");
        assert!(err.contains("spec.clusterSelector"), "{err}");
        assert!(err.contains("selectorTyp"), "{err}");
    }

    #[test]
    fn unknown_kinds_and_broken_yaml_are_reported() {
        let errs = parse_documents("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n");
        assert!(matches!(errs[0], Err(DocError::Unsupported { .. })));
        let errs = parse_documents("a: [b\n");
        assert!(matches!(errs[0], Err(DocError::Yaml { .. })));
    }
}

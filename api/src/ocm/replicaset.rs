//! `work.open-cluster-management.io/v1alpha1 ManifestWorkReplicaSet` in the shape OCM users
//! write and `kubectl get -o yaml` prints.

use super::meta::{Condition, Metadata, conditions};
use super::work::{ManifestWork, WORK_V1, WorkSpec};
use crate::v1;
use serde::{Deserialize, Serialize};

/// API group/version of replica sets.
pub const WORK_V1ALPHA1: &str = "work.open-cluster-management.io/v1alpha1";

/// ManifestWorkReplicaSet in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSet {
    /// `work.open-cluster-management.io/v1alpha1`.
    pub api_version: String,
    /// `ManifestWorkReplicaSet`.
    pub kind: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ReplicaSetSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReplicaSetStatus>,
}

/// Spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaSetSpec {
    /// The ManifestWork spec every cluster gets.
    #[serde(default)]
    pub manifest_work_template: WorkSpec,
    /// Placements (in the replica set's namespace) and their rollout strategies.
    #[serde(default)]
    pub placement_refs: Vec<PlacementRef>,
    /// `Background` (default) or `Orphan`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cascade_deletion_policy: String,
}

/// A placement and its rollout strategy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementRef {
    /// Placement name.
    pub name: String,
    /// Rollout strategy (default `All`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
}

/// OCM's `RolloutStrategy`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutStrategy {
    /// `All`, `Progressive` or `ProgressivePerGroup`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Settings of `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<RolloutConfig>,
    /// Settings of `Progressive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<RolloutConfig>,
    /// Settings of `ProgressivePerGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<RolloutConfig>,
}

/// An `IntOrString` (`2` or `"25%"`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum IntOrString {
    /// A number.
    Int(i64),
    /// A string.
    Str(String),
}

impl IntOrString {
    fn text(&self) -> String {
        match self {
            Self::Int(i) => i.to_string(),
            Self::Str(s) => s.clone(),
        }
    }

    fn from_text(s: &str) -> Option<Self> {
        if s.is_empty() {
            None
        } else if let Ok(i) = s.parse() {
            Some(Self::Int(i))
        } else {
            Some(Self::Str(s.to_string()))
        }
    }
}

/// The settings of a rollout type.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutConfig {
    /// Soak time before a succeeded cluster frees its slot (`5m`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_success_time: String,
    /// How long a cluster may take (`10m`, `None`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub progress_deadline: String,
    /// Failures tolerated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<IntOrString>,
    /// Clusters in flight at once (Progressive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<IntOrString>,
    /// Groups rolled out first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryGroup>,
}

/// A mandatory decision group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MandatoryGroup {
    /// `groupName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group_name: String,
    /// `groupIndex`.
    #[serde(default)]
    pub group_index: i32,
}

/// Status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Counts of works.
    #[serde(default)]
    pub summary: Summary,
    /// Per placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements_summary: Vec<PlacementSummary>,
}

/// Counts of works.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Works.
    pub total: i32,
    /// Applied.
    pub applied: i32,
    /// Available.
    pub available: i32,
    /// Degraded.
    pub degraded: i32,
    /// Progressing.
    pub progressing: i32,
}

/// One placement's part.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    /// Placement name.
    pub name: String,
    /// Counts of its works.
    pub available_decision_groups: String,
    /// Counts.
    pub summary: Summary,
}

fn config_to_proto(c: &Option<RolloutConfig>) -> Option<v1::RolloutConfig> {
    c.as_ref().map(|c| v1::RolloutConfig {
        min_success_time: c.min_success_time.clone(),
        progress_deadline: c.progress_deadline.clone(),
        max_failures: c
            .max_failures
            .as_ref()
            .map(IntOrString::text)
            .unwrap_or_default(),
        max_concurrency: c
            .max_concurrency
            .as_ref()
            .map(IntOrString::text)
            .unwrap_or_default(),
        mandatory_decision_groups: c
            .mandatory_decision_groups
            .iter()
            .map(|g| v1::MandatoryDecisionGroup {
                group_name: g.group_name.clone(),
                group_index: g.group_index,
            })
            .collect(),
    })
}

fn config_from_proto(c: &Option<v1::RolloutConfig>) -> Option<RolloutConfig> {
    c.as_ref().map(|c| RolloutConfig {
        min_success_time: c.min_success_time.clone(),
        progress_deadline: c.progress_deadline.clone(),
        max_failures: IntOrString::from_text(&c.max_failures),
        max_concurrency: IntOrString::from_text(&c.max_concurrency),
        mandatory_decision_groups: c
            .mandatory_decision_groups
            .iter()
            .map(|g| MandatoryGroup {
                group_name: g.group_name.clone(),
                group_index: g.group_index,
            })
            .collect(),
    })
}

impl RolloutStrategy {
    /// Converts to protobuf (also the rollout strategy of an add-on's placement).
    pub fn to_proto(&self) -> v1::RolloutStrategy {
        v1::RolloutStrategy {
            r#type: self.kind.clone(),
            all: config_to_proto(&self.all),
            progressive: config_to_proto(&self.progressive),
            progressive_per_group: config_to_proto(&self.progressive_per_group),
        }
    }
}

impl From<&v1::RolloutStrategy> for RolloutStrategy {
    fn from(r: &v1::RolloutStrategy) -> Self {
        Self {
            kind: r.r#type.clone(),
            all: config_from_proto(&r.all),
            progressive: config_from_proto(&r.progressive),
            progressive_per_group: config_from_proto(&r.progressive_per_group),
        }
    }
}

fn summary(s: &v1::ReplicaSetSummary) -> Summary {
    Summary {
        total: s.total,
        applied: s.applied,
        available: s.available,
        degraded: s.degraded,
        progressing: s.progressing,
    }
}

impl ManifestWorkReplicaSet {
    /// Converts to protobuf.
    pub fn to_proto(&self) -> Result<v1::ManifestWorkReplicaSet, String> {
        // The template converts as a ManifestWork would (errors name its fields).
        let work = ManifestWork {
            api_version: WORK_V1.into(),
            kind: "ManifestWork".into(),
            metadata: Metadata::default(),
            spec: self.spec.manifest_work_template.clone(),
            status: None,
        }
        .to_proto()
        .map_err(|e| format!("spec.manifestWorkTemplate: {e}"))?;
        Ok(v1::ManifestWorkReplicaSet {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ManifestWorkReplicaSetSpec {
                manifest_work_template: work.spec,
                placement_refs: self
                    .spec
                    .placement_refs
                    .iter()
                    .map(|p| v1::LocalPlacementReference {
                        name: p.name.clone(),
                        rollout_strategy: p
                            .rollout_strategy
                            .as_ref()
                            .map(RolloutStrategy::to_proto),
                    })
                    .collect(),
                cascade_deletion_policy: self.spec.cascade_deletion_policy.clone(),
            }),
            status: None,
            hub: None,
        })
    }
}

impl From<&v1::ManifestWorkReplicaSet> for ManifestWorkReplicaSet {
    fn from(r: &v1::ManifestWorkReplicaSet) -> Self {
        let spec = r.spec.clone().unwrap_or_default();
        let template = ManifestWork::from(&v1::ManifestWork {
            metadata: None,
            spec: spec.manifest_work_template.clone(),
            status: None,
            hub: None,
        })
        .spec;
        Self {
            api_version: WORK_V1ALPHA1.into(),
            kind: "ManifestWorkReplicaSet".into(),
            metadata: r.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ReplicaSetSpec {
                manifest_work_template: template,
                placement_refs: spec
                    .placement_refs
                    .iter()
                    .map(|p| PlacementRef {
                        name: p.name.clone(),
                        rollout_strategy: p.rollout_strategy.as_ref().map(RolloutStrategy::from),
                    })
                    .collect(),
                cascade_deletion_policy: spec.cascade_deletion_policy.clone(),
            },
            status: r.status.as_ref().map(|s| ReplicaSetStatus {
                conditions: conditions(&s.conditions),
                summary: s.summary.as_ref().map(summary).unwrap_or_default(),
                placements_summary: s
                    .placement_summaries
                    .iter()
                    .map(|p| {
                        // OCM's wording: "<groups done> (<available> / <total> clusters applied)".
                        let done = p
                            .decision_groups
                            .iter()
                            .filter(|g| g.total > 0 && g.available == g.total)
                            .count();
                        let (available, total) = p
                            .decision_groups
                            .iter()
                            .fold((0, 0), |(a, t), g| (a + g.available, t + g.total));
                        PlacementSummary {
                            name: p.name.clone(),
                            available_decision_groups: format!(
                                "{done} ({available} / {total} clusters applied)"
                            ),
                            summary: p.summary.as_ref().map(summary).unwrap_or_default(),
                        }
                    })
                    .collect(),
            }),
        }
    }
}

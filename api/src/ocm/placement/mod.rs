//! Placement (`cluster.open-cluster-management.io/v1beta1`), PlacementDecision (output only) and
//! AddOnPlacementScore (`v1alpha1`) in the shapes OCM users write and `kubectl get -o yaml`
//! prints.

use super::meta::{Condition, LabelSelector, Metadata, conditions};
use crate::meta::{parse_rfc3339, rfc3339};
use crate::v1;
use serde::{Deserialize, Serialize};

/// API group/version of placements and placement decisions.
pub const CLUSTER_V1BETA1: &str = "cluster.open-cluster-management.io/v1beta1";
/// API group/version of AddOnPlacementScores.
pub const CLUSTER_V1ALPHA1: &str = "cluster.open-cluster-management.io/v1alpha1";

/// Placement in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// `cluster.open-cluster-management.io/v1beta1`.
    pub api_version: String,
    /// `Placement`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: PlacementSpec,
    /// Status (ignored on input: the hub computes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PlacementStatus>,
}

/// Placement spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementSpec {
    /// Restricts the bound sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    /// How many clusters to select (unset = every feasible one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_clusters: Option<i32>,
    /// ORed predicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<ClusterPredicate>,
    /// Prioritizers and weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prioritizer_policy: Option<PrioritizerPolicy>,
    /// Tolerations of cluster taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Decision groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_strategy: Option<DecisionStrategy>,
    /// Spread constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_policy: Option<SpreadPolicy>,
    /// `ClusterName` (default) or `Score`: the order of the decisions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sort_by: String,
    /// How often score-only changes reach the decisions (`^[0-9]+[hms]$`, default `1m`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub score_rate_limit: String,
}

/// Label selector AND claim selector AND CEL expressions (predicates only).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelector {
    /// Matched against labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Matched against claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_selector: Option<LabelSelector>,
    /// CEL expressions over `managedCluster`; only in predicates (OCM's decision groups have no
    /// `celSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_selector: Option<CelSelector>,
}

/// `celSelector`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelSelector {
    /// Every one must evaluate to true.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
}

/// One predicate.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterPredicate {
    /// The selector.
    #[serde(default)]
    pub required_cluster_selector: ClusterSelector,
}

/// `spec.prioritizerPolicy`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrioritizerPolicy {
    /// Additive (default) or Exact.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// Weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<PrioritizerConfig>,
}

/// One prioritizer configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrioritizerConfig {
    /// Which score.
    #[serde(default)]
    pub score_coordinate: ScoreCoordinate,
    /// Weight in [-10, 10]; unset = 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// `scoreCoordinate`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreCoordinate {
    /// BuiltIn (default) or AddOn.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Built-in prioritizer name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub built_in: String,
    /// AddOn score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on: Option<AddOnScore>,
}

/// `scoreCoordinate.addOn`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddOnScore {
    /// AddOnPlacementScore name.
    #[serde(default)]
    pub resource_name: String,
    /// Score name inside it.
    #[serde(default)]
    pub score_name: String,
}

/// A toleration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    /// Taint key (empty = every key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Equal (default) or Exists.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    /// Value compared by Equal.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect (empty = every effect).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub effect: String,
    /// How long after the taint's timeAdded the toleration holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// `spec.decisionStrategy`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionStrategy {
    /// Grouping.
    #[serde(default)]
    pub group_strategy: GroupStrategy,
}

/// `decisionStrategy.groupStrategy`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupStrategy {
    /// Named groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroup>,
    /// Count or percentage (default "100%").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters_per_decision_group: Option<IntOrString>,
}

/// A named decision group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionGroup {
    /// Group name.
    #[serde(default)]
    pub group_name: String,
    /// Which selected clusters join the group.
    #[serde(default)]
    pub group_cluster_selector: ClusterSelector,
}

/// Kubernetes IntOrString (`150` or `"25%"`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum IntOrString {
    /// A number.
    Int(i64),
    /// A string.
    String(String),
}

impl IntOrString {
    /// The protobuf form: the text, and whether it is a string that reads as a number (`"3"`),
    /// which only that flag tells apart from the number 3.
    pub fn to_proto(&self) -> (String, bool) {
        match self {
            Self::Int(n) => (n.to_string(), false),
            Self::String(s) => (s.clone(), s.parse::<i64>().is_ok()),
        }
    }

    /// From the protobuf form: numbers print as numbers unless `is_string` says they were
    /// written as strings.
    pub fn from_proto(s: &str, is_string: bool) -> Option<Self> {
        if s.is_empty() {
            return None;
        }
        Some(match s.parse::<i64>() {
            Ok(n) if !is_string => Self::Int(n),
            _ => Self::String(s.to_string()),
        })
    }
}

/// `spec.spreadPolicy`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadPolicy {
    /// Constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread_constraints: Vec<SpreadConstraint>,
}

/// A spread constraint.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadConstraint {
    /// Label or claim naming the domains.
    #[serde(default)]
    pub topology_key: String,
    /// Label (default) or Claim.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub topology_key_type: String,
    /// Largest allowed skew (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_skew: Option<i32>,
    /// DoNotSchedule (default) or ScheduleAnyway.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when_unsatisfiable: String,
}

/// Placement status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// Selected clusters.
    #[serde(default)]
    pub number_of_selected_clusters: i32,
    /// Decision groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroupStatus>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When the decisions' scores were last written (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_score_update_time: String,
}

/// One decision group in the status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupStatus {
    /// Index from 0.
    #[serde(default)]
    pub decision_group_index: i32,
    /// Name (empty for unnamed groups).
    #[serde(default)]
    pub decision_group_name: String,
    /// PlacementDecision names.
    #[serde(default)]
    pub decisions: Vec<String>,
    /// Clusters in the group.
    #[serde(default)]
    pub cluster_count: i32,
}

fn selector_to_proto(s: &ClusterSelector) -> v1::ClusterSelector {
    v1::ClusterSelector {
        label_selector: s.label_selector.as_ref().map(v1::LabelSelector::from),
        claim_selector: s.claim_selector.as_ref().map(v1::LabelSelector::from),
    }
}

fn selector_from_proto(s: &v1::ClusterSelector) -> ClusterSelector {
    let non_empty = |l: &Option<v1::LabelSelector>| {
        l.as_ref()
            .filter(|l| !l.match_labels.is_empty() || !l.match_expressions.is_empty())
            .map(LabelSelector::from)
    };
    ClusterSelector {
        label_selector: non_empty(&s.label_selector),
        claim_selector: non_empty(&s.claim_selector),
        cel_selector: None,
    }
}

impl Toleration {
    /// The protobuf form.
    pub fn to_proto(&self) -> v1::Toleration {
        v1::Toleration {
            key: self.key.clone(),
            operator: self.operator.clone(),
            value: self.value.clone(),
            effect: self.effect.clone(),
            toleration_seconds: self.toleration_seconds,
        }
    }
}

impl From<&v1::Toleration> for Toleration {
    fn from(t: &v1::Toleration) -> Self {
        Self {
            key: t.key.clone(),
            operator: t.operator.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            toleration_seconds: t.toleration_seconds,
        }
    }
}

impl DecisionStrategy {
    /// The protobuf form of `d` (none: the default, every cluster in one group); a decision
    /// group selecting by `celSelector` is refused, named under `at`
    /// (`spec.decisionStrategy`).
    pub fn to_proto(d: Option<&Self>, at: &str) -> Result<v1::DecisionStrategy, String> {
        let groups = d.map(|d| d.group_strategy.clone()).unwrap_or_default();
        for (i, g) in groups.decision_groups.iter().enumerate() {
            if g.group_cluster_selector.cel_selector.is_some() {
                return Err(format!(
                    "{at}.groupStrategy.decisionGroups[{i}].groupClusterSelector.celSelector: \
                     decision groups select by labelSelector and claimSelector only"
                ));
            }
        }
        let (per_group, per_group_is_string) = groups
            .clusters_per_decision_group
            .as_ref()
            .map(IntOrString::to_proto)
            .unwrap_or_default();
        Ok(v1::DecisionStrategy {
            group_strategy: Some(v1::GroupStrategy {
                decision_groups: groups
                    .decision_groups
                    .iter()
                    .map(|g| v1::DecisionGroup {
                        group_name: g.group_name.clone(),
                        group_cluster_selector: Some(selector_to_proto(&g.group_cluster_selector)),
                    })
                    .collect(),
                clusters_per_decision_group: per_group,
                clusters_per_decision_group_is_string: per_group_is_string,
            }),
        })
    }

    /// From the protobuf form; `None` when it says nothing (no groups, no group size).
    pub fn from_proto(d: Option<&v1::DecisionStrategy>) -> Option<Self> {
        let groups = d.and_then(|d| d.group_strategy.clone()).unwrap_or_default();
        (!groups.decision_groups.is_empty() || !groups.clusters_per_decision_group.is_empty()).then(
            || Self {
                group_strategy: GroupStrategy {
                    decision_groups: groups
                        .decision_groups
                        .iter()
                        .map(|g| DecisionGroup {
                            group_name: g.group_name.clone(),
                            group_cluster_selector: g
                                .group_cluster_selector
                                .as_ref()
                                .map(selector_from_proto)
                                .unwrap_or_default(),
                        })
                        .collect(),
                    clusters_per_decision_group: IntOrString::from_proto(
                        &groups.clusters_per_decision_group,
                        groups.clusters_per_decision_group_is_string,
                    ),
                },
            },
        )
    }
}

impl Placement {
    /// Converts to protobuf (status is dropped: the hub computes it).
    pub fn to_proto(&self) -> Result<v1::Placement, String> {
        let s = &self.spec;
        let policy = s.prioritizer_policy.clone().unwrap_or_default();
        let decision_strategy =
            DecisionStrategy::to_proto(s.decision_strategy.as_ref(), "spec.decisionStrategy")?;
        let mut predicate_cel_selectors: Vec<v1::CelSelector> = s
            .predicates
            .iter()
            .map(|p| v1::CelSelector {
                cel_expressions: p
                    .required_cluster_selector
                    .cel_selector
                    .as_ref()
                    .map(|c| c.cel_expressions.clone())
                    .unwrap_or_default(),
            })
            .collect();
        while predicate_cel_selectors
            .last()
            .is_some_and(|c| c.cel_expressions.is_empty())
        {
            predicate_cel_selectors.pop();
        }
        Ok(v1::Placement {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::PlacementSpec {
                cluster_sets: s.cluster_sets.clone(),
                number_of_clusters: s.number_of_clusters,
                predicates: s
                    .predicates
                    .iter()
                    .map(|p| v1::ClusterPredicate {
                        required_cluster_selector: Some(selector_to_proto(
                            &p.required_cluster_selector,
                        )),
                    })
                    .collect(),
                prioritizer_policy: Some(v1::PrioritizerPolicy {
                    mode: policy.mode,
                    configurations: policy
                        .configurations
                        .iter()
                        .map(|c| v1::PrioritizerConfig {
                            score_coordinate: Some(v1::ScoreCoordinate {
                                r#type: c.score_coordinate.type_.clone(),
                                built_in: c.score_coordinate.built_in.clone(),
                                add_on: c.score_coordinate.add_on.as_ref().map(|a| {
                                    v1::AddOnScoreCoordinate {
                                        resource_name: a.resource_name.clone(),
                                        score_name: a.score_name.clone(),
                                    }
                                }),
                            }),
                            weight: c.weight,
                        })
                        .collect(),
                }),
                tolerations: s.tolerations.iter().map(Toleration::to_proto).collect(),
                decision_strategy: Some(decision_strategy),
                predicate_cel_selectors,
                sort_by: s.sort_by.clone(),
                score_rate_limit: s.score_rate_limit.clone(),
                spread_policy: Some(v1::SpreadPolicy {
                    spread_constraints: s
                        .spread_policy
                        .clone()
                        .unwrap_or_default()
                        .spread_constraints
                        .iter()
                        .map(|c| v1::SpreadConstraint {
                            topology_key: c.topology_key.clone(),
                            topology_key_type: c.topology_key_type.clone(),
                            max_skew: c.max_skew,
                            when_unsatisfiable: c.when_unsatisfiable.clone(),
                        })
                        .collect(),
                }),
            }),
            status: None,
        })
    }
}

impl From<&v1::Placement> for Placement {
    fn from(p: &v1::Placement) -> Self {
        let spec = p.spec.clone().unwrap_or_default();
        let policy = spec.prioritizer_policy.unwrap_or_default();
        let spread = spec.spread_policy.unwrap_or_default();
        Self {
            api_version: CLUSTER_V1BETA1.into(),
            kind: "Placement".into(),
            metadata: p.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: PlacementSpec {
                cluster_sets: spec.cluster_sets,
                number_of_clusters: spec.number_of_clusters,
                predicates: spec
                    .predicates
                    .iter()
                    .enumerate()
                    .map(|(i, pr)| {
                        let mut required_cluster_selector = pr
                            .required_cluster_selector
                            .as_ref()
                            .map(selector_from_proto)
                            .unwrap_or_default();
                        required_cluster_selector.cel_selector = spec
                            .predicate_cel_selectors
                            .get(i)
                            .filter(|c| !c.cel_expressions.is_empty())
                            .map(|c| CelSelector {
                                cel_expressions: c.cel_expressions.clone(),
                            });
                        ClusterPredicate {
                            required_cluster_selector,
                        }
                    })
                    .collect(),
                prioritizer_policy: (!policy.mode.is_empty() || !policy.configurations.is_empty())
                    .then(|| PrioritizerPolicy {
                        mode: policy.mode.clone(),
                        configurations: policy
                            .configurations
                            .iter()
                            .map(|c| {
                                let sc = c.score_coordinate.clone().unwrap_or_default();
                                PrioritizerConfig {
                                    score_coordinate: ScoreCoordinate {
                                        type_: sc.r#type,
                                        built_in: sc.built_in,
                                        add_on: sc.add_on.map(|a| AddOnScore {
                                            resource_name: a.resource_name,
                                            score_name: a.score_name,
                                        }),
                                    },
                                    weight: c.weight,
                                }
                            })
                            .collect(),
                    }),
                tolerations: spec.tolerations.iter().map(Toleration::from).collect(),
                decision_strategy: DecisionStrategy::from_proto(spec.decision_strategy.as_ref()),
                spread_policy: (!spread.spread_constraints.is_empty()).then(|| SpreadPolicy {
                    spread_constraints: spread
                        .spread_constraints
                        .iter()
                        .map(|c| SpreadConstraint {
                            topology_key: c.topology_key.clone(),
                            topology_key_type: c.topology_key_type.clone(),
                            max_skew: c.max_skew,
                            when_unsatisfiable: c.when_unsatisfiable.clone(),
                        })
                        .collect(),
                }),
                sort_by: spec.sort_by,
                score_rate_limit: spec.score_rate_limit,
            },
            status: p.status.as_ref().map(|st| PlacementStatus {
                number_of_selected_clusters: st.number_of_selected_clusters,
                decision_groups: st
                    .decision_groups
                    .iter()
                    .map(|g| DecisionGroupStatus {
                        decision_group_index: g.decision_group_index,
                        decision_group_name: g.decision_group_name.clone(),
                        decisions: g.decisions.clone(),
                        cluster_count: g.cluster_count,
                    })
                    .collect(),
                conditions: conditions(&st.conditions),
                last_score_update_time: st
                    .last_score_update_time
                    .as_ref()
                    .map(rfc3339)
                    .unwrap_or_default(),
            }),
        }
    }
}

/// PlacementDecision in the OCM shape (output only: the hub writes them).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecision {
    /// `cluster.open-cluster-management.io/v1beta1`.
    pub api_version: String,
    /// `PlacementDecision`.
    pub kind: String,
    /// Metadata with the placement and decision-group labels.
    pub metadata: Metadata,
    /// The decisions.
    #[serde(default)]
    pub status: DecisionStatus,
}

/// PlacementDecision status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DecisionStatus {
    /// Selected clusters (at most 100).
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
}

/// One decision.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    /// Cluster name.
    pub cluster_name: String,
    /// Why (OCM leaves it empty).
    #[serde(default)]
    pub reason: String,
    /// The cluster's total score (left out when 0, as OCM's `omitzero`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub score: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl From<&v1::PlacementDecision> for PlacementDecision {
    fn from(d: &v1::PlacementDecision) -> Self {
        Self {
            api_version: CLUSTER_V1BETA1.into(),
            kind: "PlacementDecision".into(),
            metadata: d.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            status: DecisionStatus {
                decisions: d
                    .status
                    .as_ref()
                    .map(|s| {
                        s.decisions
                            .iter()
                            .map(|c| ClusterDecision {
                                cluster_name: c.cluster_name.clone(),
                                reason: c.reason.clone(),
                                score: c.score,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        }
    }
}

/// AddOnPlacementScore in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AddOnPlacementScore {
    /// `cluster.open-cluster-management.io/v1alpha1`.
    pub api_version: String,
    /// `AddOnPlacementScore`.
    pub kind: String,
    /// Metadata (namespace = cluster name).
    pub metadata: Metadata,
    /// The scores (OCM keeps them in status).
    #[serde(default)]
    pub status: ScoreStatus,
}

/// AddOnPlacementScore status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreStatus {
    /// Conditions (informational).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The scores.
    #[serde(default)]
    pub scores: Vec<ScoreItem>,
    /// After this (RFC 3339) the scores count as 0; unset = never expires.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub valid_until: String,
}

/// One score.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScoreItem {
    /// Score name.
    pub name: String,
    /// Value in [-100, 100].
    pub value: i32,
}

impl AddOnPlacementScore {
    /// Converts to protobuf; a `validUntil` that is not RFC 3339 is an error.
    pub fn to_proto(&self) -> Result<v1::AddOnPlacementScore, String> {
        let valid_until = if self.status.valid_until.is_empty() {
            None
        } else {
            Some(parse_rfc3339(&self.status.valid_until).ok_or_else(|| {
                format!(
                    "status.validUntil: {:?} is not an RFC 3339 time (like 2021-10-29T18:31:39Z)",
                    self.status.valid_until
                )
            })?)
        };
        Ok(v1::AddOnPlacementScore {
            metadata: Some(self.metadata.to_proto()?),
            status: Some(v1::AddOnPlacementScoreStatus {
                conditions: self
                    .status
                    .conditions
                    .iter()
                    .map(|c| v1::Condition {
                        r#type: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        last_transition_time: parse_rfc3339(&c.last_transition_time),
                        observed_generation: c.observed_generation,
                    })
                    .collect(),
                scores: self
                    .status
                    .scores
                    .iter()
                    .map(|s| v1::AddOnPlacementScoreItem {
                        name: s.name.clone(),
                        value: s.value,
                    })
                    .collect(),
                valid_until,
            }),
        })
    }
}

impl From<&v1::AddOnPlacementScore> for AddOnPlacementScore {
    fn from(s: &v1::AddOnPlacementScore) -> Self {
        let st = s.status.clone().unwrap_or_default();
        Self {
            api_version: CLUSTER_V1ALPHA1.into(),
            kind: "AddOnPlacementScore".into(),
            metadata: s.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            status: ScoreStatus {
                conditions: conditions(&st.conditions),
                scores: st
                    .scores
                    .iter()
                    .map(|i| ScoreItem {
                        name: i.name.clone(),
                        value: i.value,
                    })
                    .collect(),
                valid_until: st.valid_until.as_ref().map(rfc3339).unwrap_or_default(),
            },
        }
    }
}

#[cfg(test)]
mod tests;

//! The Placement spec as plain Rust types (the hub converts its API objects into these).
//!
//! Field names serialise in OCM's camelCase so that OCM YAML maps one to one, and every field
//! that OCM defaults has the same default here.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::cel::CelExpressions;
use crate::cluster::TaintEffect;
use crate::selector::LabelSelector;

/// A Placement: where it lives and what it asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Namespace; only ManagedClusterSets bound here are eligible.
    pub namespace: String,
    /// Name; PlacementDecisions are named `<name>-decision-<n>`.
    pub name: String,
    /// `spec.clusterSets`: restricts the bound sets; empty means all bound sets.
    #[serde(default)]
    pub cluster_sets: Vec<String>,
    /// `spec.numberOfClusters`: unset selects every feasible cluster.
    #[serde(default)]
    pub number_of_clusters: Option<i32>,
    /// `spec.predicates`: ORed; none means every candidate passes.
    #[serde(default)]
    pub predicates: Vec<ClusterPredicate>,
    /// `spec.prioritizerPolicy`.
    #[serde(default)]
    pub prioritizer_policy: PrioritizerPolicy,
    /// `spec.tolerations`.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// `spec.decisionStrategy`.
    #[serde(default)]
    pub decision_strategy: DecisionStrategy,
    /// `spec.spreadPolicy`.
    #[serde(default)]
    pub spread_policy: SpreadPolicy,
    /// `spec.sortBy`: the order of the decisions.
    #[serde(default)]
    pub sort_by: SortBy,
    /// `spec.scoreRateLimit` as written (`^[0-9]+[hms]$`); `None` is OCM's default, `1m`.
    #[serde(default)]
    pub score_rate_limit: Option<String>,
}

impl Placement {
    /// An empty placement: every cluster of every bound set, default prioritizers.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Placement {
            namespace: namespace.into(),
            name: name.into(),
            cluster_sets: Vec::new(),
            number_of_clusters: None,
            predicates: Vec::new(),
            prioritizer_policy: PrioritizerPolicy::default(),
            tolerations: Vec::new(),
            decision_strategy: DecisionStrategy::default(),
            spread_policy: SpreadPolicy::default(),
            sort_by: SortBy::default(),
            score_rate_limit: None,
        }
    }

    /// Adds a cluster set to `spec.clusterSets`.
    pub fn cluster_set(mut self, set: impl Into<String>) -> Self {
        self.cluster_sets.push(set.into());
        self
    }

    /// Sets `spec.numberOfClusters`.
    pub fn number_of_clusters(mut self, n: i32) -> Self {
        self.number_of_clusters = Some(n);
        self
    }

    /// Adds a predicate.
    pub fn predicate(
        mut self,
        label_selector: LabelSelector,
        claim_selector: LabelSelector,
    ) -> Self {
        self.predicates.push(ClusterPredicate {
            required_cluster_selector: ClusterSelector {
                label_selector,
                claim_selector,
                cel_expressions: CelExpressions::default(),
            },
        });
        self
    }

    /// Adds a predicate made of a whole cluster selector (labels, claims and CEL).
    pub fn predicate_selector(mut self, selector: ClusterSelector) -> Self {
        self.predicates.push(ClusterPredicate {
            required_cluster_selector: selector,
        });
        self
    }

    /// Adds a toleration.
    pub fn toleration(mut self, toleration: Toleration) -> Self {
        self.tolerations.push(toleration);
        self
    }

    /// Sets the prioritizer mode.
    pub fn mode(mut self, mode: PrioritizerMode) -> Self {
        self.prioritizer_policy.mode = mode;
        self
    }

    /// Adds a prioritizer configuration.
    pub fn prioritizer(mut self, score_coordinate: ScoreCoordinate, weight: i32) -> Self {
        self.prioritizer_policy
            .configurations
            .push(PrioritizerConfig {
                score_coordinate,
                weight,
            });
        self
    }

    /// Adds a named decision group.
    pub fn decision_group(mut self, name: impl Into<String>, selector: ClusterSelector) -> Self {
        self.decision_strategy
            .group_strategy
            .decision_groups
            .push(DecisionGroup {
                group_name: name.into(),
                group_cluster_selector: selector,
            });
        self
    }

    /// Sets `clustersPerDecisionGroup`.
    pub fn clusters_per_decision_group(mut self, value: IntOrString) -> Self {
        self.decision_strategy
            .group_strategy
            .clusters_per_decision_group = value;
        self
    }

    /// Adds a spread constraint.
    pub fn spread(mut self, constraint: SpreadConstraint) -> Self {
        self.spread_policy.spread_constraints.push(constraint);
        self
    }

    /// Sets `spec.sortBy`.
    pub fn sort_by(mut self, sort_by: SortBy) -> Self {
        self.sort_by = sort_by;
        self
    }

    /// Sets `spec.scoreRateLimit`.
    pub fn score_rate_limit(mut self, limit: impl Into<String>) -> Self {
        self.score_rate_limit = Some(limit.into());
        self
    }

    /// `spec.scoreRateLimit` as a duration: OCM's default (one minute) when unset, `None` when
    /// it does not match OCM's pattern ([`parse_score_rate_limit`]).
    pub fn score_rate_limit_duration(&self) -> Option<Duration> {
        match &self.score_rate_limit {
            None => Some(DEFAULT_SCORE_RATE_LIMIT),
            Some(s) => parse_score_rate_limit(s),
        }
    }
}

/// `spec.sortBy`: how the decisions are ordered (OCM api v1beta1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortBy {
    /// By cluster name (OCM's default).
    #[default]
    ClusterName,
    /// By score, highest first; ties by cluster name.
    Score,
}

impl SortBy {
    /// Parses OCM's spelling; `""` is the default. OCM's CRD rejects any other value.
    pub fn parse(s: &str) -> Option<SortBy> {
        match s {
            "" | "ClusterName" => Some(SortBy::ClusterName),
            "Score" => Some(SortBy::Score),
            _ => None,
        }
    }
}

/// `scoreRateLimit` when the spec leaves it out (OCM's CRD default `1m`).
pub const DEFAULT_SCORE_RATE_LIMIT: Duration = Duration::from_secs(60);

/// OCM's CRD pattern for `scoreRateLimit`.
pub const SCORE_RATE_LIMIT_PATTERN: &str = "^[0-9]+[hms]$";

/// Parses a `scoreRateLimit` (`30s`, `5m`, `1h`: digits and one unit); `None` when it does not
/// match [`SCORE_RATE_LIMIT_PATTERN`] or overflows.
pub fn parse_score_rate_limit(s: &str) -> Option<Duration> {
    let unit = s.chars().last()?;
    let digits = &s[..s.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let seconds = match unit {
        's' => n,
        'm' => n.checked_mul(60)?,
        'h' => n.checked_mul(3600)?,
        _ => return None,
    };
    Some(Duration::from_secs(seconds))
}

/// One predicate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPredicate {
    /// The selector a cluster must match for this predicate to pass.
    #[serde(default)]
    pub required_cluster_selector: ClusterSelector,
}

/// Label selector AND claim selector; the empty selector matches every cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSelector {
    /// Matched against the cluster's labels.
    #[serde(default)]
    pub label_selector: LabelSelector,
    /// Matched against the cluster's claims (name → value). OCM only allows
    /// `matchExpressions` here; `matchLabels` also works.
    #[serde(default)]
    pub claim_selector: LabelSelector,
    /// `celSelector.celExpressions`, all of which must hold ([`crate::cel`]). Only predicates
    /// have them: OCM's decision groups select by labels and claims only.
    #[serde(default)]
    pub cel_expressions: CelExpressions,
}

impl ClusterSelector {
    /// A selector on labels only.
    pub fn labels(label_selector: LabelSelector) -> Self {
        ClusterSelector {
            label_selector,
            claim_selector: LabelSelector::default(),
            cel_expressions: CelExpressions::default(),
        }
    }

    /// Adds CEL expressions (builder style).
    pub fn cel(mut self, expressions: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut all = self.cel_expressions.expressions().to_vec();
        all.extend(expressions.into_iter().map(Into::into));
        self.cel_expressions = CelExpressions::new(all);
        self
    }
}

/// `Additive` keeps the default weights (Balance 1, Steady 1) and overrides them; `Exact` uses
/// only what is configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PrioritizerMode {
    /// Defaults plus overrides (OCM's default, also for `""`).
    #[default]
    Additive,
    /// Only configured prioritizers.
    Exact,
    /// Any other mode. OCM's CRD accepts any string here; the placement is then misconfigured
    /// ([`crate::validate`]).
    Other(String),
}

/// `spec.prioritizerPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerPolicy {
    /// Additive (default) or Exact.
    #[serde(default)]
    pub mode: PrioritizerMode,
    /// Weights per score coordinate; a later entry for the same coordinate wins.
    #[serde(default)]
    pub configurations: Vec<PrioritizerConfig>,
}

fn default_weight() -> i32 {
    1
}

/// One prioritizer and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerConfig {
    /// Which score.
    pub score_coordinate: ScoreCoordinate,
    /// In [-10, 10]; 0 disables, negative prefers low scores. Defaults to 1 as in OCM.
    #[serde(default = "default_weight")]
    pub weight: i32,
}

/// Where a score comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScoreCoordinateType {
    /// A built-in prioritizer named by `builtIn`.
    #[default]
    BuiltIn,
    /// An AddOnPlacementScore named by `addOn`.
    AddOn,
}

/// `scoreCoordinate`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreCoordinate {
    /// BuiltIn (default) or AddOn.
    #[serde(rename = "type", default)]
    pub type_: ScoreCoordinateType,
    /// Built-in prioritizer name: Balance, Steady, ResourceAllocatableCPU,
    /// ResourceAllocatableMemory. Kept as a string so that unknown names can be reported.
    #[serde(default)]
    pub built_in: String,
    /// Required when the type is AddOn.
    #[serde(default)]
    pub add_on: Option<AddOnScoreRef>,
}

impl ScoreCoordinate {
    /// A built-in coordinate.
    pub fn built_in(name: impl Into<String>) -> Self {
        ScoreCoordinate {
            type_: ScoreCoordinateType::BuiltIn,
            built_in: name.into(),
            add_on: None,
        }
    }

    /// An AddOn coordinate.
    pub fn add_on(resource_name: impl Into<String>, score_name: impl Into<String>) -> Self {
        ScoreCoordinate {
            type_: ScoreCoordinateType::AddOn,
            built_in: String::new(),
            add_on: Some(AddOnScoreRef {
                resource_name: resource_name.into(),
                score_name: score_name.into(),
            }),
        }
    }
}

/// Names one score of one AddOnPlacementScore.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnScoreRef {
    /// The AddOnPlacementScore's name (in each cluster's namespace).
    pub resource_name: String,
    /// The entry in its `status.scores`.
    pub score_name: String,
}

/// How a toleration compares values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Key and value must both match (OCM default).
    #[default]
    Equal,
    /// Any value; with an empty key, any taint.
    Exists,
    /// Any other operator. OCM's CRD accepts any string here and such a toleration matches no
    /// taint (with an empty key the placement is misconfigured, see [`crate::validate`]).
    Other(String),
}

/// `spec.tolerations[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Taint key; empty matches every key (operator must then be Exists).
    #[serde(default)]
    pub key: String,
    /// Equal (default) or Exists.
    #[serde(default)]
    pub operator: TolerationOperator,
    /// Compared with the taint value by Equal; must be empty for Exists.
    #[serde(default)]
    pub value: String,
    /// Only taints with this effect; `None` matches every effect.
    #[serde(default)]
    pub effect: Option<TaintEffect>,
    /// The toleration holds until the taint's `timeAdded` plus this many seconds (a cluster
    /// already decided needs no toleration for a NoSelectIfNew taint). `None` = forever.
    #[serde(default)]
    pub toleration_seconds: Option<i64>,
}

impl Toleration {
    /// `key = value` with operator Equal.
    pub fn equal(key: impl Into<String>, value: impl Into<String>) -> Self {
        Toleration {
            key: key.into(),
            operator: TolerationOperator::Equal,
            value: value.into(),
            ..Toleration::default()
        }
    }

    /// `key` with operator Exists (an empty key tolerates every taint).
    pub fn exists(key: impl Into<String>) -> Self {
        Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        }
    }

    /// Restricts the toleration to one effect.
    pub fn effect(mut self, effect: TaintEffect) -> Self {
        self.effect = Some(effect);
        self
    }

    /// Limits how long the toleration holds after the taint was added.
    pub fn seconds(mut self, seconds: i64) -> Self {
        self.toleration_seconds = Some(seconds);
        self
    }
}

/// `spec.decisionStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionStrategy {
    /// How decisions are grouped.
    #[serde(default)]
    pub group_strategy: GroupStrategy,
}

/// `decisionStrategy.groupStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStrategy {
    /// Named groups, filled first, in order.
    #[serde(default)]
    pub decision_groups: Vec<DecisionGroup>,
    /// Size of each group: a count or a percentage of the selected clusters. Default `"100%"`.
    #[serde(default = "IntOrString::hundred_percent")]
    pub clusters_per_decision_group: IntOrString,
}

/// A named decision group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroup {
    /// Written to the `decision-group-name` label and the status.
    pub group_name: String,
    /// Selected clusters matching this go to the group (if no earlier group took them).
    #[serde(default)]
    pub group_cluster_selector: ClusterSelector,
}

/// Kubernetes `IntOrString`, as used by `clustersPerDecisionGroup` (`150` or `"25%"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    /// An absolute count.
    Int(i64),
    /// A string: normally `"N%"`; a plain number string is accepted too.
    String(String),
}

impl IntOrString {
    /// `"100%"`, the default group size (one group with every remaining cluster).
    pub fn hundred_percent() -> Self {
        IntOrString::String("100%".to_owned())
    }
}

impl Default for IntOrString {
    fn default() -> Self {
        Self::hundred_percent()
    }
}

/// `spec.spreadPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadPolicy {
    /// Constraints; earlier ones take precedence when they pull in different directions.
    #[serde(default)]
    pub spread_constraints: Vec<SpreadConstraint>,
}

/// Whether the topology key is a label or a claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopologyKeyType {
    /// `metadata.labels[topologyKey]`.
    #[default]
    Label,
    /// `status.clusterClaims[topologyKey]`.
    Claim,
}

/// What to do when a pick would exceed `maxSkew`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// Never exceed the skew, even if fewer clusters get selected (Kubernetes' default).
    #[default]
    DoNotSchedule,
    /// Prefer picks that keep the skew; exceed it when nothing else is left.
    ScheduleAnyway,
}

fn default_max_skew() -> i32 {
    1
}

/// One spread constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraint {
    /// Label or claim whose values name the topology domains.
    pub topology_key: String,
    /// Label (default) or Claim.
    #[serde(default)]
    pub topology_key_type: TopologyKeyType,
    /// Largest allowed difference between the most and the least selected domain; ≥ 1,
    /// default 1.
    #[serde(default = "default_max_skew")]
    pub max_skew: i32,
    /// DoNotSchedule (default) or ScheduleAnyway.
    #[serde(default)]
    pub when_unsatisfiable: WhenUnsatisfiable,
}

impl SpreadConstraint {
    /// A label constraint with the given skew and behaviour.
    pub fn label(topology_key: impl Into<String>, max_skew: i32, when: WhenUnsatisfiable) -> Self {
        SpreadConstraint {
            topology_key: topology_key.into(),
            topology_key_type: TopologyKeyType::Label,
            max_skew,
            when_unsatisfiable: when,
        }
    }

    /// A claim constraint with the given skew and behaviour.
    pub fn claim(topology_key: impl Into<String>, max_skew: i32, when: WhenUnsatisfiable) -> Self {
        SpreadConstraint {
            topology_key_type: TopologyKeyType::Claim,
            ..Self::label(topology_key, max_skew, when)
        }
    }
}

//! What the scheduler thought of each cluster, like OCM's `/debug/placements/<ns>/<name>`:
//! every filter's verdict and why it failed, each prioritizer's raw score and weight, the total,
//! the rank and why a feasible cluster was not selected.

use serde::{Deserialize, Serialize};

use crate::score::Weighted;

/// A filter a cluster goes through, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Filter {
    /// Clusters being deleted are never candidates.
    Deleting,
    /// `spec.predicates` (ORed).
    Predicates,
    /// Taints against `spec.tolerations`.
    TaintToleration,
}

/// One filter's verdict on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterResult {
    /// Which filter.
    pub filter: Filter,
    /// Whether the cluster got through.
    pub passed: bool,
    /// Why not (or, for a passed taint filter, what it relies on), for people.
    pub reason: Option<String>,
}

/// One prioritizer's score for one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreDetail {
    /// OCM name: `Balance`, …, `AddOn/<resource>/<score>`.
    pub prioritizer: String,
    /// The weight it ran with.
    pub weight: i32,
    /// Its raw score in [-100, 100].
    pub score: i64,
}

/// Everything about one candidate cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDebug {
    /// Cluster name.
    pub name: String,
    /// Filters in order, up to and including the first that failed.
    pub filters: Vec<FilterResult>,
    /// Prioritizer scores (feasible clusters only).
    pub scores: Vec<ScoreDetail>,
    /// Σ weight × score (feasible clusters only).
    pub total: Option<i64>,
    /// Ranked after unpenalised clusters because of an untolerated PreferNoSelect taint.
    pub prefer_no_select_penalty: bool,
    /// Position among feasible clusters, 0 = best (feasible clusters only).
    pub rank: Option<u32>,
    /// In the new decisions.
    pub selected: bool,
    /// Why a feasible cluster was not selected.
    pub not_selected_reason: Option<String>,
}

/// The debug view of one scheduling run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleDebug {
    /// Eligible set names.
    pub eligible_sets: Vec<String>,
    /// Prioritizers that ran, with weights.
    pub prioritizers: Vec<Weighted>,
    /// Every member of an eligible set (deleting ones included), sorted by name.
    pub clusters: Vec<ClusterDebug>,
}

impl ScheduleDebug {
    /// The entry for a cluster.
    pub fn cluster(&self, name: &str) -> Option<&ClusterDebug> {
        self.clusters
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.clusters[i])
    }
}

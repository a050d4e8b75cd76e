//! Placement status: conditions and their OCM reasons (step 7 of the algorithm).

use std::fmt;

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::groups::DecisionGroupStatus;

/// The condition types a placement carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionType {
    /// Whether the placement got what it asked for.
    PlacementSatisfied,
    /// Whether the spec has problems OCM reports instead of rejecting.
    PlacementMisconfigured,
}

/// Condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// Condition reasons, spelled as OCM spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reason {
    /// No ManagedClusterSetBinding in the namespace names an existing set.
    NoManagedClusterSetBindings,
    /// None of `spec.clusterSets` is bound in the namespace.
    NoIntersection,
    /// The eligible sets have no (non-deleting) member.
    AllManagedClusterSetsEmpty,
    /// No candidate passed the predicates and taints.
    NoManagedClusterMatched,
    /// Every requested decision was made.
    AllDecisionsScheduled,
    /// Fewer clusters than requested were selected, or scheduling failed.
    NotAllDecisionsScheduled,
    /// The spec is misconfigured (`PlacementMisconfigured=True`).
    Misconfigured,
    /// The spec is fine (`PlacementMisconfigured=False`); OCM's spelling.
    Succeedconfigured,
}

impl Reason {
    /// The reason string as written to the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoManagedClusterSetBindings => "NoManagedClusterSetBindings",
            Reason::NoIntersection => "NoIntersection",
            Reason::AllManagedClusterSetsEmpty => "AllManagedClusterSetsEmpty",
            Reason::NoManagedClusterMatched => "NoManagedClusterMatched",
            Reason::AllDecisionsScheduled => "AllDecisionsScheduled",
            Reason::NotAllDecisionsScheduled => "NotAllDecisionsScheduled",
            Reason::Misconfigured => "Misconfigured",
            Reason::Succeedconfigured => "Succeedconfigured",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status condition (without timestamps; the hub sets `lastTransitionTime`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Which condition.
    #[serde(rename = "type")]
    pub type_: ConditionType,
    /// True or False.
    pub status: ConditionStatus,
    /// Machine-readable reason.
    pub reason: Reason,
    /// For people.
    pub message: String,
}

impl Condition {
    /// A condition from its parts.
    pub fn new(
        type_: ConditionType,
        status: impl Into<ConditionStatus>,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_,
            status: status.into(),
            reason,
            message: message.into(),
        }
    }

    /// `PlacementMisconfigured=False`, as OCM writes it when the spec is fine.
    pub fn well_configured() -> Self {
        Condition::new(
            ConditionType::PlacementMisconfigured,
            false,
            Reason::Succeedconfigured,
            "Placement configurations check pass",
        )
    }
}

/// The placement's `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// Clusters in the decisions.
    pub number_of_selected_clusters: u32,
    /// One entry per decision group.
    pub decision_groups: Vec<DecisionGroupStatus>,
    /// `PlacementSatisfied` and `PlacementMisconfigured`.
    pub conditions: Vec<Condition>,
    /// `lastScoreUpdateTime`: when the decisions' scores were last written
    /// ([`crate::schedule`] under `scoreRateLimit`).
    pub last_score_update: Option<SystemTime>,
}

impl PlacementStatus {
    /// The condition of the given type, if present.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// What step 7 needs to know to explain the outcome.
pub(crate) struct Outcome<'a> {
    pub(crate) spec_cluster_sets: &'a [String],
    pub(crate) eligible_sets: &'a [&'a str],
    pub(crate) valid_bindings: usize,
    pub(crate) candidates: usize,
    pub(crate) feasible: usize,
    pub(crate) selected: usize,
    pub(crate) requested: Option<i32>,
    /// Feasible clusters a `DoNotSchedule` spread constraint kept out.
    pub(crate) spread_excluded: usize,
}

/// `PlacementSatisfied`, in OCM's order of precedence.
pub(crate) fn satisfied_condition(o: &Outcome<'_>) -> Condition {
    let cond = |ok: bool, reason, message: String| {
        Condition::new(ConditionType::PlacementSatisfied, ok, reason, message)
    };
    if o.valid_bindings == 0 {
        return cond(
            false,
            Reason::NoManagedClusterSetBindings,
            "No valid ManagedClusterSetBindings found in placement namespace".to_owned(),
        );
    }
    if o.eligible_sets.is_empty() {
        return cond(
            false,
            Reason::NoIntersection,
            format!(
                "None of ManagedClusterSets [{}] is bound to placement namespace",
                o.spec_cluster_sets.join(",")
            ),
        );
    }
    if o.candidates == 0 {
        return cond(
            false,
            Reason::AllManagedClusterSetsEmpty,
            format!(
                "All ManagedClusterSets [{}] have no member ManagedCluster",
                o.eligible_sets.join(",")
            ),
        );
    }
    if o.feasible == 0 {
        return cond(
            false,
            Reason::NoManagedClusterMatched,
            "No ManagedCluster matches any of the cluster predicate".to_owned(),
        );
    }
    let unscheduled = o
        .requested
        .map_or(0, |n| i64::from(n) - o.selected as i64)
        .max(0);
    if unscheduled == 0 {
        let mut message = "All cluster decisions scheduled".to_owned();
        if o.spread_excluded > 0 {
            message.push_str(&format!(
                " ({} feasible clusters left out to respect spread constraints)",
                o.spread_excluded
            ));
        }
        return cond(true, Reason::AllDecisionsScheduled, message);
    }
    let mut message = format!("{unscheduled} cluster decisions unscheduled");
    if o.spread_excluded > 0 {
        message.push_str(&format!(
            " ({} feasible clusters left out to respect spread constraints)",
            o.spread_excluded
        ));
    }
    cond(false, Reason::NotAllDecisionsScheduled, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome<'static> {
        Outcome {
            spec_cluster_sets: &[],
            eligible_sets: &["prod"],
            valid_bindings: 1,
            candidates: 5,
            feasible: 5,
            selected: 3,
            requested: Some(3),
            spread_excluded: 0,
        }
    }

    #[test]
    fn reasons_follow_ocm_precedence() {
        let o = Outcome {
            valid_bindings: 0,
            eligible_sets: &[],
            candidates: 0,
            ..outcome()
        };
        assert_eq!(
            satisfied_condition(&o).reason,
            Reason::NoManagedClusterSetBindings
        );
        let o = Outcome {
            spec_cluster_sets: &[],
            eligible_sets: &[],
            ..outcome()
        };
        assert_eq!(satisfied_condition(&o).reason, Reason::NoIntersection);
        let o = Outcome {
            candidates: 0,
            feasible: 0,
            ..outcome()
        };
        let c = satisfied_condition(&o);
        assert_eq!(c.reason, Reason::AllManagedClusterSetsEmpty);
        assert_eq!(
            c.message,
            "All ManagedClusterSets [prod] have no member ManagedCluster"
        );
        let o = Outcome {
            feasible: 0,
            selected: 0,
            ..outcome()
        };
        assert_eq!(
            satisfied_condition(&o).reason,
            Reason::NoManagedClusterMatched
        );
        let c = satisfied_condition(&outcome());
        assert_eq!(
            (c.status, c.reason),
            (ConditionStatus::True, Reason::AllDecisionsScheduled)
        );
        let o = Outcome {
            requested: Some(5),
            ..outcome()
        };
        let c = satisfied_condition(&o);
        assert_eq!(
            (c.status, c.reason),
            (ConditionStatus::False, Reason::NotAllDecisionsScheduled)
        );
        assert_eq!(c.message, "2 cluster decisions unscheduled");
    }

    #[test]
    fn unset_number_of_clusters_is_satisfied_by_every_feasible_cluster() {
        let o = Outcome {
            requested: None,
            spread_excluded: 2,
            ..outcome()
        };
        let c = satisfied_condition(&o);
        assert_eq!(c.status, ConditionStatus::True);
        assert!(
            c.message.contains("2 feasible clusters left out"),
            "{}",
            c.message
        );
    }
}

//! Prioritizers: which ones run with which weight, and the score each gives a cluster.
//!
//! Every score is an integer in [-100, 100]; a cluster's total is Σ weight × score. The
//! formulas are OCM's, including Go's truncation toward zero when a float becomes an integer,
//! so that totals (and so decisions) agree with OCM's for the same inputs.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::placement::{AddOnScoreRef, PrioritizerMode, PrioritizerPolicy, ScoreCoordinateType};

/// Highest score a prioritizer gives.
pub const MAX_SCORE: i64 = 100;
/// Lowest score a prioritizer gives.
pub const MIN_SCORE: i64 = -100;

/// The built-in prioritizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BuiltIn {
    /// Favours clusters with few decisions from other placements.
    Balance,
    /// Favours clusters this placement already selected.
    Steady,
    /// Favours clusters with more allocatable CPU.
    ResourceAllocatableCPU,
    /// Favours clusters with more allocatable memory.
    ResourceAllocatableMemory,
}

impl BuiltIn {
    /// All built-ins, in the order debug output lists them.
    pub const ALL: [BuiltIn; 4] = [
        BuiltIn::Balance,
        BuiltIn::Steady,
        BuiltIn::ResourceAllocatableCPU,
        BuiltIn::ResourceAllocatableMemory,
    ];

    /// Looks a built-in up by its OCM name (case-sensitive, as OCM).
    pub fn from_name(name: &str) -> Option<BuiltIn> {
        BuiltIn::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The OCM name.
    pub fn name(self) -> &'static str {
        match self {
            BuiltIn::Balance => "Balance",
            BuiltIn::Steady => "Steady",
            BuiltIn::ResourceAllocatableCPU => "ResourceAllocatableCPU",
            BuiltIn::ResourceAllocatableMemory => "ResourceAllocatableMemory",
        }
    }
}

/// A prioritizer that runs for a placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Prioritizer {
    /// A built-in one.
    BuiltIn(BuiltIn),
    /// A score read from AddOnPlacementScores.
    AddOn(AddOnScoreRef),
}

/// OCM's names: `Balance`, …, `AddOn/<resourceName>/<scoreName>`.
impl fmt::Display for Prioritizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prioritizer::BuiltIn(b) => f.write_str(b.name()),
            Prioritizer::AddOn(a) => write!(f, "AddOn/{}/{}", a.resource_name, a.score_name),
        }
    }
}

/// A prioritizer with a non-zero weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weighted {
    /// Which prioritizer.
    pub prioritizer: Prioritizer,
    /// Its weight, non-zero.
    pub weight: i32,
}

/// Step 3: the prioritizers that run and their weights.
///
/// `Additive` starts from Balance 1 and Steady 1; `Exact` from nothing (an unknown mode counts
/// as Additive here; validation reports it). Configurations then set
/// the weight of their coordinate (a later one for the same coordinate wins). Weight 0 disables.
/// Coordinates that fail validation (unknown built-in, AddOn without `addOn`) are skipped; the
/// scheduler never gets here with such a spec. The order is stable: built-ins in
/// [`BuiltIn::ALL`] order, then AddOn scores in the order first configured.
pub fn effective_weights(policy: &PrioritizerPolicy) -> Vec<Weighted> {
    let mut weights: Vec<(Prioritizer, i32)> = match policy.mode {
        // An unknown mode never gets scheduled (validation); Additive keeps the reads of
        // `crate::change` on the safe side meanwhile.
        PrioritizerMode::Additive | PrioritizerMode::Other(_) => vec![
            (Prioritizer::BuiltIn(BuiltIn::Balance), 1),
            (Prioritizer::BuiltIn(BuiltIn::Steady), 1),
        ],
        PrioritizerMode::Exact => Vec::new(),
    };
    for config in &policy.configurations {
        let sc = &config.score_coordinate;
        let p = match sc.type_ {
            ScoreCoordinateType::BuiltIn => match BuiltIn::from_name(&sc.built_in) {
                Some(b) => Prioritizer::BuiltIn(b),
                None => continue,
            },
            ScoreCoordinateType::AddOn => match &sc.add_on {
                Some(a) => Prioritizer::AddOn(a.clone()),
                None => continue,
            },
        };
        match weights.iter_mut().find(|(q, _)| *q == p) {
            Some(entry) => entry.1 = config.weight,
            None => weights.push((p, config.weight)),
        }
    }
    let rank = |p: &Prioritizer| match p {
        Prioritizer::BuiltIn(b) => *b as usize,
        Prioritizer::AddOn(_) => BuiltIn::ALL.len(),
    };
    // Stable sort: AddOns keep their configuration order.
    weights.sort_by_key(|(p, _)| rank(p));
    weights
        .into_iter()
        .filter(|&(_, w)| w != 0)
        .map(|(prioritizer, weight)| Weighted {
            prioritizer,
            weight,
        })
        .collect()
}

/// Balance: `2 × trunc(100 × (0.5 − count/max))`; 100 when the cluster has no decisions in other
/// placements (or nobody has any).
pub fn balance_score(count: u32, max_count: u32) -> i64 {
    if count == 0 || max_count == 0 {
        return MAX_SCORE;
    }
    let usage = f64::from(count) / f64::from(max_count);
    2 * ((MAX_SCORE as f64) * (0.5 - usage)) as i64
}

/// Balance's maximum: the highest count of decisions in other placements over *every* cluster
/// that appears in one, feasible for this placement or not (as OCM's Balance plugin, which counts
/// every PlacementDecision but the placement's own).
///
/// `counts` may also count this placement's `current` decisions once each
/// (`includes_current`); those are subtracted without walking `current` against every entry:
/// the maximum is the raw maximum `m` unless every cluster at `m` is one of ours, then `m − 1`.
pub(crate) fn balance_max_count<'a>(
    counts: &HashMap<String, u32>,
    current: impl IntoIterator<Item = &'a String>,
    includes_current: bool,
) -> u32 {
    let max = counts.values().copied().max().unwrap_or(0);
    if !includes_current || max == 0 {
        return max;
    }
    let at_max = counts.values().filter(|&&n| n == max).count();
    let ours_at_max = current
        .into_iter()
        .filter(|c| counts.get(c.as_str()) == Some(&max))
        .count();
    if at_max > ours_at_max { max } else { max - 1 }
}

/// Steady: 100 for a cluster this placement already selected, else 0.
pub fn steady_score(decided: bool) -> i64 {
    if decided { MAX_SCORE } else { 0 }
}

/// ResourceAllocatableCPU / Memory: `trunc(((v − min)/(max − min) − 0.5) × 2 × 100)`; 100 for
/// everybody when max == min; 0 for a cluster that did not report the resource.
pub fn resource_score(value: Option<f64>, min: f64, max: f64) -> i64 {
    let Some(v) = value.filter(|v| v.is_finite()) else {
        return 0;
    };
    if max - min == 0.0 {
        return MAX_SCORE;
    }
    let ratio = (v - min) / (max - min);
    ((ratio - 0.5) * 2.0 * 100.0) as i64
}

/// An `AddOnPlacementScore` object (namespace = cluster name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnPlacementScore {
    /// The cluster (the object's namespace).
    pub cluster: String,
    /// The object's name, matched by `addOn.resourceName`.
    pub resource_name: String,
    /// `status.scores` as name → value.
    #[serde(default)]
    pub scores: BTreeMap<String, i32>,
    /// `status.validUntil`; `None` never expires.
    #[serde(default)]
    pub valid_until: Option<SystemTime>,
}

impl AddOnPlacementScore {
    /// A score object with no entries (builder style).
    pub fn new(cluster: impl Into<String>, resource_name: impl Into<String>) -> Self {
        AddOnPlacementScore {
            cluster: cluster.into(),
            resource_name: resource_name.into(),
            scores: BTreeMap::new(),
            valid_until: None,
        }
    }

    /// Adds a score entry.
    pub fn score(mut self, name: impl Into<String>, value: i32) -> Self {
        self.scores.insert(name.into(), value);
        self
    }

    /// Sets `validUntil`.
    pub fn valid_until(mut self, t: SystemTime) -> Self {
        self.valid_until = Some(t);
        self
    }

    /// Whether the scores still count at `now`. Flotilla treats `validUntil` as exclusive (the
    /// score is stale from that instant on) so that re-evaluating exactly at `validUntil` sees
    /// it expired; OCM's `now.After(validUntil)` differs only at that one instant.
    pub fn is_valid_at(&self, now: SystemTime) -> bool {
        self.valid_until.is_none_or(|t| now < t)
    }
}

/// AddOn: the named score, clamped to [-100, 100] (values outside can only come from a broken
/// provider); 0 when the object or the entry is missing or expired.
pub fn addon_score(score: Option<&AddOnPlacementScore>, score_name: &str, now: SystemTime) -> i64 {
    score
        .filter(|s| s.is_valid_at(now))
        .and_then(|s| s.scores.get(score_name))
        .map_or(0, |&v| clamp_score(v))
}

/// A provider's raw value clamped into [-100, 100].
pub(crate) fn clamp_score(value: i32) -> i64 {
    i64::from(value).clamp(MIN_SCORE, MAX_SCORE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{PrioritizerConfig, ScoreCoordinate};
    use std::time::Duration;

    fn policy(mode: PrioritizerMode, configs: &[(ScoreCoordinate, i32)]) -> PrioritizerPolicy {
        PrioritizerPolicy {
            mode,
            configurations: configs
                .iter()
                .map(|(sc, w)| PrioritizerConfig {
                    score_coordinate: sc.clone(),
                    weight: *w,
                })
                .collect(),
        }
    }

    fn names(ws: &[Weighted]) -> Vec<(String, i32)> {
        ws.iter()
            .map(|w| (w.prioritizer.to_string(), w.weight))
            .collect()
    }

    #[test]
    fn additive_defaults_are_balance_and_steady_weight_one() {
        let ws = effective_weights(&PrioritizerPolicy::default());
        assert_eq!(names(&ws), [("Balance".into(), 1), ("Steady".into(), 1)]);
    }

    #[test]
    fn additive_configurations_override_defaults_and_zero_disables() {
        let p = policy(
            PrioritizerMode::Additive,
            &[
                (ScoreCoordinate::built_in("Balance"), 0),
                (ScoreCoordinate::add_on("default", "cpuratio"), 2),
                (ScoreCoordinate::built_in("ResourceAllocatableMemory"), 3),
                (ScoreCoordinate::built_in("Steady"), 5),
                (ScoreCoordinate::built_in("Steady"), 4),
            ],
        );
        assert_eq!(
            names(&effective_weights(&p)),
            [
                ("Steady".into(), 4),
                ("ResourceAllocatableMemory".into(), 3),
                ("AddOn/default/cpuratio".into(), 2)
            ]
        );
    }

    #[test]
    fn exact_mode_uses_only_configured_prioritizers() {
        let p = policy(
            PrioritizerMode::Exact,
            &[
                (ScoreCoordinate::built_in("ResourceAllocatableMemory"), 1),
                (ScoreCoordinate::built_in("Steady"), 3),
                (ScoreCoordinate::add_on("default", "cpuratio"), 1),
            ],
        );
        assert_eq!(
            names(&effective_weights(&p)),
            [
                ("Steady".into(), 3),
                ("ResourceAllocatableMemory".into(), 1),
                ("AddOn/default/cpuratio".into(), 1)
            ]
        );
        assert!(effective_weights(&policy(PrioritizerMode::Exact, &[])).is_empty());
    }

    #[test]
    fn unknown_builtin_is_skipped_by_weights() {
        let p = policy(
            PrioritizerMode::Exact,
            &[(ScoreCoordinate::built_in("Nope"), 1)],
        );
        assert!(effective_weights(&p).is_empty());
    }

    #[test]
    fn balance_matches_ocm_formula() {
        assert_eq!(balance_score(0, 0), 100);
        assert_eq!(balance_score(0, 5), 100);
        assert_eq!(balance_score(5, 5), -100);
        // 100 × (0.5 − 1/3) = 16.67 → 16 → 32
        assert_eq!(balance_score(1, 3), 32);
        // 100 × (0.5 − 2/3) = −16.67 → −16 (toward zero) → −32
        assert_eq!(balance_score(2, 3), -32);
        assert_eq!(balance_score(1, 2), 0);
    }

    #[test]
    fn balance_max_is_over_every_counted_cluster_minus_own_decisions() {
        let counts: HashMap<String, u32> = [("a", 3), ("b", 3), ("c", 1)]
            .map(|(k, v)| (k.to_owned(), v))
            .into();
        let none: [String; 0] = [];
        let a = ["a".to_owned()];
        let ab = ["a".to_owned(), "b".to_owned()];
        assert_eq!(balance_max_count(&counts, &none, false), 3);
        assert_eq!(
            balance_max_count(&counts, &ab, false),
            3,
            "others' counts as given"
        );
        assert_eq!(balance_max_count(&counts, &a, true), 3, "b still holds 3");
        assert_eq!(
            balance_max_count(&counts, &ab, true),
            2,
            "both maxima were ours"
        );
        let one: HashMap<String, u32> = [("a".to_owned(), 1)].into();
        assert_eq!(
            balance_max_count(&one, &a, true),
            0,
            "only our own decision"
        );
        assert_eq!(balance_max_count(&HashMap::new(), &a, true), 0);
    }

    #[test]
    fn steady_is_100_for_decided_clusters() {
        assert_eq!(steady_score(true), 100);
        assert_eq!(steady_score(false), 0);
    }

    #[test]
    fn resource_score_normalises_to_plus_minus_100() {
        assert_eq!(resource_score(Some(2.0), 2.0, 10.0), -100);
        assert_eq!(resource_score(Some(10.0), 2.0, 10.0), 100);
        assert_eq!(resource_score(Some(6.0), 2.0, 10.0), 0);
        // ((3−2)/8 − 0.5) × 200 = −75
        assert_eq!(resource_score(Some(3.0), 2.0, 10.0), -75);
        assert_eq!(resource_score(Some(4.0), 4.0, 4.0), 100, "all equal → 100");
        assert_eq!(resource_score(None, 2.0, 10.0), 0, "unreported → 0");
    }

    #[test]
    fn addon_score_is_zero_when_missing_or_expired() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let s = AddOnPlacementScore::new("c1", "default")
            .score("cpuratio", 70)
            .score("wild", 500)
            .valid_until(t0);
        assert_eq!(
            addon_score(Some(&s), "cpuratio", t0 - Duration::from_secs(1)),
            70
        );
        assert_eq!(
            addon_score(Some(&s), "cpuratio", t0),
            0,
            "expired at validUntil"
        );
        assert_eq!(addon_score(Some(&s), "other", SystemTime::UNIX_EPOCH), 0);
        assert_eq!(addon_score(None, "cpuratio", SystemTime::UNIX_EPOCH), 0);
        assert_eq!(
            addon_score(Some(&s), "wild", SystemTime::UNIX_EPOCH),
            100,
            "clamped"
        );
    }
}

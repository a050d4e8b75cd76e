//! Steps 3–4: the effective weights ([`crate::score::effective_weights`]) and each feasible
//! cluster's total over the prioritizers ([`crate::score`]).

use std::time::SystemTime;

use crate::fleet::Fleet;
use crate::score::{
    BuiltIn, Prioritizer, Weighted, balance_max_count, balance_score, clamp_score,
    effective_weights, resource_score, steady_score,
};

use super::PlacementInput;
use super::explain::Explain;
use super::filter::{Feasible, NOT_FEASIBLE};
use super::min_time;

/// The feasible clusters' scores.
pub(super) struct Scores {
    /// The prioritizers that ran, with their weights.
    pub(super) weights: Vec<Weighted>,
    /// Per feasible cluster (in [`Feasible::clusters`] order): the weighted total.
    pub(super) totals: Vec<i64>,
    /// The earliest `validUntil` of an AddOn score a total uses.
    pub(super) expires_at: Option<SystemTime>,
}

/// Scores the feasible clusters; with a sink, keeps each prioritizer's column.
pub(super) fn score(
    fleet: &Fleet,
    input: &PlacementInput<'_>,
    decided: &[bool],
    feasible: &Feasible,
    mut sink: Option<&mut Explain>,
) -> Scores {
    let clusters = fleet.clusters();
    let now = input.now;
    let weights = effective_weights(&input.placement.prioritizer_policy);
    let mut totals = vec![0i64; feasible.clusters.len()];
    let mut expires_at: Option<SystemTime> = None;
    let mut column = vec![0i64; feasible.clusters.len()];
    for w in &weights {
        match &w.prioritizer {
            Prioritizer::BuiltIn(BuiltIn::Balance) => {
                let counts: Vec<u32> = match input.other_decision_counts {
                    Some(m) if !m.is_empty() => feasible
                        .clusters
                        .iter()
                        .map(|&i| {
                            let n = m
                                .get(clusters[i as usize].name.as_str())
                                .copied()
                                .unwrap_or(0);
                            let own =
                                u32::from(input.counts_include_current && decided[i as usize]);
                            n.saturating_sub(own)
                        })
                        .collect(),
                    _ => vec![0; feasible.clusters.len()],
                };
                let max = input.other_decision_counts.map_or(0, |m| {
                    balance_max_count(
                        m,
                        input.current_decisions.into_iter().flatten(),
                        input.counts_include_current,
                    )
                });
                for (s, &c) in column.iter_mut().zip(&counts) {
                    *s = balance_score(c, max);
                }
            }
            Prioritizer::BuiltIn(BuiltIn::Steady) => {
                for (s, &i) in column.iter_mut().zip(&feasible.clusters) {
                    *s = steady_score(decided[i as usize]);
                }
            }
            Prioritizer::BuiltIn(
                b @ (BuiltIn::ResourceAllocatableCPU | BuiltIn::ResourceAllocatableMemory),
            ) => {
                let values = if *b == BuiltIn::ResourceAllocatableCPU {
                    &fleet.cpu
                } else {
                    &fleet.memory
                };
                let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
                for &i in &feasible.clusters {
                    if let Some(v) = values[i as usize] {
                        min = min.min(v);
                        max = max.max(v);
                    }
                }
                for (s, &i) in column.iter_mut().zip(&feasible.clusters) {
                    *s = resource_score(values[i as usize], min, max);
                }
            }
            Prioritizer::AddOn(a) => {
                column.fill(0);
                for v in fleet.score_values(&a.resource_name, &a.score_name) {
                    let k = feasible.position[v.cluster as usize];
                    if k != NOT_FEASIBLE && v.valid_until.is_none_or(|t| now < t) {
                        column[k as usize] = clamp_score(v.value);
                        expires_at = min_time(expires_at, v.valid_until);
                    }
                }
            }
        }
        let weight = i64::from(w.weight);
        for (t, s) in totals.iter_mut().zip(&column) {
            *t += weight * s;
        }
        if let Some(sink) = sink.as_deref_mut() {
            sink.column(&column);
        }
    }
    Scores {
        weights,
        totals,
        expires_at,
    }
}

//! The explanation sink of [`crate::Fleet::explain`]: each stage records into it only when one
//! is given, so [`crate::Fleet::schedule`] builds no strings.

use std::collections::{BTreeSet, HashMap};

use crate::debug::{ClusterDebug, ScheduleDebug, ScoreDetail};
use crate::fleet::Fleet;
use crate::placement::Placement;
use crate::spread::SpreadReason;

use super::candidates::Candidates;
use super::filter::Feasible;
use super::scores::Scores;
use super::select::Selection;

/// What the stages recorded.
#[derive(Default)]
pub(super) struct Explain {
    /// Every candidate's filter verdicts (then scores and rank), in candidate order.
    clusters: Vec<ClusterDebug>,
    /// Fleet index → position in `clusters`.
    at: HashMap<u32, usize>,
    /// Each prioritizer's scores, in [`Feasible::clusters`] order.
    columns: Vec<Vec<i64>>,
}

impl Explain {
    /// Records a candidate's filter verdicts.
    pub(super) fn cluster(&mut self, idx: u32, entry: ClusterDebug) {
        self.at.insert(idx, self.clusters.len());
        self.clusters.push(entry);
    }

    /// Records a prioritizer's scores.
    pub(super) fn column(&mut self, scores: &[i64]) {
        self.columns.push(scores.to_vec());
    }

    /// The explanation: per ranked cluster its scores, total, rank, and why it was not
    /// selected; every candidate sorted by name.
    pub(super) fn finish(
        mut self,
        fleet: &Fleet,
        p: &Placement,
        candidates: &Candidates<'_>,
        feasible: &Feasible,
        scores: &Scores,
        selection: &Selection,
    ) -> ScheduleDebug {
        let constraints = &p.spread_policy.spread_constraints;
        let is_selected: BTreeSet<u32> = selection.selected.iter().copied().collect();
        for (rank, &idx) in selection.ranked.iter().enumerate() {
            let Some(e) = self.at.get(&idx).map(|&at| &mut self.clusters[at]) else {
                continue;
            };
            let k = feasible.position[idx as usize] as usize;
            e.scores = scores
                .weights
                .iter()
                .zip(&self.columns)
                .map(|(w, col)| ScoreDetail {
                    prioritizer: w.prioritizer.to_string(),
                    weight: w.weight,
                    score: col[k],
                })
                .collect();
            e.total = Some(scores.totals[k]);
            e.rank = Some(u32::try_from(rank).unwrap_or(u32::MAX));
            e.selected = is_selected.contains(&idx);
            if !e.selected {
                e.not_selected_reason = Some(
                    match selection.spread_reasons.get(rank).cloned().flatten() {
                        Some(SpreadReason::MissingKey(j)) => format!(
                            "missing topology key {:?} of spread constraint {j} (DoNotSchedule)",
                            constraints[j].topology_key
                        ),
                        Some(SpreadReason::Skew(j, value)) => format!(
                            "selecting it would exceed maxSkew {} in domain {}={} (spread constraint {j})",
                            constraints[j].max_skew,
                            constraints[j].topology_key,
                            fleet.strings.name(value)
                        ),
                        Some(SpreadReason::NotNeeded) | None => match p.number_of_clusters {
                            Some(n) => format!("rank {rank} is beyond numberOfClusters {n}"),
                            None => "not selected".to_owned(),
                        },
                    },
                );
            }
        }
        self.clusters.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        ScheduleDebug {
            eligible_sets: candidates
                .eligible
                .sets
                .iter()
                .map(|s| s.name.clone())
                .collect(),
            prioritizers: scores.weights.clone(),
            clusters: self.clusters,
        }
    }
}

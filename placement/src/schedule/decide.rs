//! Steps 6–7: the recorded scores (`scoreRateLimit`, [`crate::rate_limit`]), the selection in
//! `sortBy` order cut into groups and pages ([`crate::groups`]), and the status.

use crate::fleet::Fleet;
use crate::groups::group_sorted;
use crate::placement::{ClusterSelector, DEFAULT_SCORE_RATE_LIMIT, SortBy};
use crate::rate_limit;
use crate::status::{Condition, Outcome, PlacementStatus, satisfied_condition};

use super::candidates::Candidates;
use super::filter::Feasible;
use super::predicate::compile_all;
use super::scores::Scores;
use super::select::Selection;
use super::{PlacementInput, Schedule, ScheduleError, min_time};

/// The schedule of the selection: decisions with their recorded scores, groups and pages, and
/// the placement's status.
pub(super) fn decide(
    fleet: &Fleet,
    input: &PlacementInput<'_>,
    candidates: &Candidates<'_>,
    feasible: &Feasible,
    scores: &Scores,
    selection: &Selection,
) -> Result<Schedule, ScheduleError> {
    let p = input.placement;
    let clusters = fleet.clusters();
    let decided = &candidates.decided;
    // Step 6: recorded scores, then groups and pages from the selection in `sortBy` order.
    let mut by_rank: Vec<u32> = selection
        .selected
        .iter()
        .map(|&i| fleet.name_rank[i as usize])
        .collect();
    by_rank.sort_unstable();
    let by_name: Vec<u32> = by_rank.iter().map(|&r| fleet.by_name[r as usize]).collect();
    let same_set = input
        .current_decisions
        .is_some_and(|c| c.len() == by_name.len())
        && by_name.iter().all(|&i| decided[i as usize]);
    let fresh: Vec<(&str, i64)> = by_name
        .iter()
        .map(|&i| {
            (
                clusters[i as usize].name.as_str(),
                scores.totals[feasible.position[i as usize] as usize],
            )
        })
        .collect();
    let recorded = rate_limit::record(
        &fresh,
        same_set,
        input.recorded_scores,
        input.last_score_update,
        p.score_rate_limit_duration()
            .unwrap_or(DEFAULT_SCORE_RATE_LIMIT),
        input.now,
    );
    let mut score_of = vec![0i64; clusters.len()];
    for (&i, &score) in by_name.iter().zip(&recorded.scores) {
        score_of[i as usize] = score;
    }
    let mut sorted = by_name;
    if p.sort_by == SortBy::Score {
        // Stable: ties stay in name order.
        sorted.sort_by_key(|&i| std::cmp::Reverse(score_of[i as usize]));
    }
    let group_selectors: Vec<&ClusterSelector> = p
        .decision_strategy
        .group_strategy
        .decision_groups
        .iter()
        .map(|g| &g.group_cluster_selector)
        .collect();
    let group_matchers = compile_all(
        fleet,
        p,
        &group_selectors,
        "spec.decisionStrategy.groupStrategy.decisionGroups",
    )?;
    let decisions = group_sorted(
        p,
        &sorted,
        |idx| (clusters[idx as usize].name.as_str(), score_of[idx as usize]),
        |g, idx| group_matchers[g].matches_labels_and_claims(fleet, idx),
    );

    // Step 7: status.
    let eligible_names: Vec<&str> = candidates
        .eligible
        .sets
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let satisfied = satisfied_condition(&Outcome {
        spec_cluster_sets: &p.cluster_sets,
        eligible_sets: &eligible_names,
        valid_bindings: candidates.eligible.valid_bindings,
        candidates: feasible.candidates,
        feasible: feasible.clusters.len(),
        selected: selection.selected.len(),
        requested: p.number_of_clusters,
        spread_excluded: selection.spread_excluded,
    });
    let status = PlacementStatus {
        number_of_selected_clusters: u32::try_from(selection.selected.len()).unwrap_or(u32::MAX),
        decision_groups: decisions.groups,
        conditions: vec![satisfied, Condition::well_configured()],
        last_score_update: recorded.last_update,
    };
    Ok(Schedule {
        pages: decisions.pages,
        status,
        requeue_at: min_time(
            min_time(feasible.toleration_expires_at, scores.expires_at),
            recorded.requeue_at,
        ),
        toleration_expires_at: feasible.toleration_expires_at,
    })
}

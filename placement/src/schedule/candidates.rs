//! Step 1: the eligible cluster sets, their members (the candidates before any filter) and
//! which clusters the placement decides today.

use std::borrow::Cow;

use crate::clusterset::{EligibleSets, eligible_cluster_sets};
use crate::fleet::Fleet;

use super::PlacementInput;

/// The members of the placement's eligible sets.
pub(super) struct Candidates<'f> {
    /// The eligible sets and how many bindings were valid.
    pub(super) eligible: EligibleSets<'f>,
    /// Members of any eligible set (fleet indexes, ascending).
    pub(super) members: Cow<'f, [u32]>,
    /// Per fleet index: in the placement's current decisions.
    pub(super) decided: Vec<bool>,
}

/// The candidates of `input`'s placement in `fleet`.
pub(super) fn candidates<'f>(fleet: &'f Fleet, input: &PlacementInput<'_>) -> Candidates<'f> {
    let p = input.placement;
    let clusters = fleet.clusters();
    let eligible = eligible_cluster_sets(
        &p.namespace,
        &p.cluster_sets,
        fleet.sets(),
        fleet.bindings(),
    );
    let positions: Vec<usize> = eligible
        .sets
        .iter()
        .filter_map(|s| fleet.set_position(s))
        .collect();
    let members: Cow<'f, [u32]> = match positions.as_slice() {
        [] => Cow::Borrowed(&[]),
        [one] => Cow::Borrowed(fleet.members(*one)),
        many => {
            let mut in_any = vec![false; clusters.len()];
            for &s in many {
                for &i in fleet.members(s) {
                    in_any[i as usize] = true;
                }
            }
            Cow::Owned(
                in_any
                    .iter()
                    .enumerate()
                    .filter(|&(_, &b)| b)
                    .map(|(i, _)| i as u32)
                    .collect(),
            )
        }
    };
    let mut decided = vec![false; clusters.len()];
    if let Some(current) = input.current_decisions {
        for name in current {
            if let Some(i) = fleet.index_of(name) {
                decided[i as usize] = true;
            }
        }
    }
    Candidates {
        eligible,
        members,
        decided,
    }
}

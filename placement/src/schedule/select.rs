//! Step 5: order and select. Clusters with an untolerated `PreferNoSelect` taint rank after
//! all others, then by total descending and name ascending; `numberOfClusters` are taken,
//! through the spread constraints if any ([`crate::spread`]).

use crate::fleet::Fleet;
use crate::placement::{Placement, TopologyKeyType};
use crate::spread::{self, SpreadReason};

use super::filter::Feasible;
use super::scores::Scores;

/// What was selected.
pub(super) struct Selection {
    /// The selected clusters (fleet indexes).
    pub(super) selected: Vec<u32>,
    /// Every feasible cluster in rank order (only with spread constraints or when explaining).
    pub(super) ranked: Vec<u32>,
    /// Per position in `ranked` not picked: why (spread constraints, when explaining).
    pub(super) spread_reasons: Vec<Option<SpreadReason>>,
    /// How many of the wanted clusters the spread constraints left out.
    pub(super) spread_excluded: usize,
}

/// Sort key: tier (penalised last), total descending, name ascending — all in one integer.
fn sort_key(penalized: bool, total: i64, name_rank: u32) -> u128 {
    let ascending = (total as u64) ^ (1 << 63);
    let descending = !ascending;
    (u128::from(penalized) << 96) | (u128::from(descending) << 32) | u128::from(name_rank)
}

/// Selects from the feasible clusters; `explain` ranks them all.
pub(super) fn select(
    fleet: &Fleet,
    p: &Placement,
    feasible: &Feasible,
    scores: &Scores,
    explain: bool,
) -> Selection {
    let target = p
        .number_of_clusters
        .map_or(feasible.clusters.len(), |n| usize::try_from(n).unwrap_or(0))
        .min(feasible.clusters.len());
    let mut keys: Vec<u128> = feasible
        .clusters
        .iter()
        .zip(&feasible.penalized)
        .zip(&scores.totals)
        .map(|((&i, &pen), &t)| sort_key(pen, t, fleet.name_rank[i as usize]))
        .collect();
    let idx_of_key = |k: u128| fleet.by_name[(k as u32) as usize];
    let constraints = &p.spread_policy.spread_constraints;
    let mut spread_reasons: Vec<Option<SpreadReason>> = Vec::new();
    let mut ranked: Vec<u32> = Vec::new();
    let selected: Vec<u32> = if !constraints.is_empty() || explain {
        keys.sort_unstable();
        ranked = keys.iter().map(|&k| idx_of_key(k)).collect();
        if constraints.is_empty() {
            ranked[..target].to_vec()
        } else {
            let key_ids: Vec<Option<u32>> = constraints
                .iter()
                .map(|c| fleet.strings.get(&c.topology_key))
                .collect();
            let value = |idx: u32, j: usize| {
                let table = match constraints[j].topology_key_type {
                    TopologyKeyType::Label => &fleet.labels,
                    TopologyKeyType::Claim => &fleet.claims,
                };
                key_ids[j].and_then(|k| table.get(idx, k))
            };
            let s = spread::select(&ranked, constraints, target, explain, value);
            spread_reasons = s.reasons;
            s.picked.iter().map(|&pos| ranked[pos as usize]).collect()
        }
    } else {
        if target > 0 && target < keys.len() {
            keys.select_nth_unstable(target - 1);
        }
        keys[..target].iter().map(|&k| idx_of_key(k)).collect()
    };
    Selection {
        spread_excluded: target - selected.len(),
        selected,
        ranked,
        spread_reasons,
    }
}

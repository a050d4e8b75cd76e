//! The recovery window's rules (pure): what a spoke is told to delete, what becomes an orphan,
//! which orphan records are settled, and what the resync digest covers.

use flotilla_api::v1::{Orphan, OrphanDecision};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Orphans one cluster may have recorded; strangers past it are withheld but not recorded (a
/// spoke cannot make the hub store without bound).
pub const MAX_ORPHANS_PER_CLUSTER: usize = 1000;

/// What a full resync answer does with the works the agent holds and the store lacks.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Resource ids the agent is told to delete, sorted.
    pub delete: Vec<String>,
    /// Strangers seen for the first time in the window: recorded as undecided orphans, with
    /// the generation the agent holds.
    pub record: Vec<(String, i64)>,
    /// Orphan records whose work the agent no longer holds or the store has again (OCM's
    /// cancel on reappearance): removed.
    pub settle: Vec<String>,
}

/// The answer to an agent's full map, from `deletes` (ids it holds that the store lacks, as
/// `resync_diff` gives them), the generations it holds, whether the window is `open`, and the
/// cluster's orphan records (`known`). With the window closed and no record this is
/// `deletes` unchanged: the hub's behaviour without a restore.
pub fn answer(
    open: bool,
    deletes: Vec<String>,
    agent: &HashMap<String, i64>,
    known: &BTreeMap<String, OrphanDecision>,
) -> Answer {
    let strangers: BTreeSet<&str> = deletes.iter().map(String::as_str).collect();
    let settle = known
        .keys()
        .filter(|id| !strangers.contains(id.as_str()))
        .cloned()
        .collect();
    let mut out = Answer {
        settle,
        ..Answer::default()
    };
    let room = MAX_ORPHANS_PER_CLUSTER.saturating_sub(known.len());
    for id in deletes {
        match known.get(&id) {
            Some(OrphanDecision::Delete) => out.delete.push(id),
            Some(_) => {}
            None if open => {
                if out.record.len() < room {
                    let generation = agent.get(&id).copied().unwrap_or_default();
                    out.record.push((id, generation));
                }
            }
            None => out.delete.push(id),
        }
    }
    out
}

/// What the hub compares an agent's digest against.
#[derive(Debug, PartialEq, Eq)]
pub enum Digest {
    /// Ask for the full map: an orphan is undecided or to be deleted, and only the full map
    /// says whether the agent still holds it.
    Full,
    /// The store's works plus these kept orphans at the generation the agent holds: an agent
    /// holding exactly those is in sync (kept works are never resent nor deleted).
    With(Vec<(String, i64)>),
}

/// The digest rule for a cluster with orphan records `known`.
pub fn digest(known: &BTreeMap<String, Orphan>) -> Digest {
    if known.values().any(|o| o.decision() != OrphanDecision::Keep) {
        return Digest::Full;
    }
    Digest::With(
        known
            .iter()
            .map(|(id, o)| (id.clone(), o.agent_generation))
            .collect(),
    )
}

/// Whether the orphans of `of` (by name or resource id, or every one with `all`) are chosen
/// by `names`; the names chosen that match no orphan.
pub fn choose<'a>(
    of: &'a BTreeMap<String, Orphan>,
    names: &[String],
    all: bool,
) -> (Vec<&'a Orphan>, Vec<String>) {
    if all {
        return (of.values().collect(), Vec::new());
    }
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        let found: Vec<&Orphan> = of
            .values()
            .filter(|o| &o.name == name || &o.resource_id == name)
            .collect();
        if found.is_empty() {
            missing.push(name.clone());
        }
        chosen.extend(found);
    }
    chosen.sort_by(|a, b| a.resource_id.cmp(&b.resource_id));
    chosen.dedup_by(|a, b| a.resource_id == b.resource_id);
    (chosen, missing)
}

#[cfg(test)]
mod tests;

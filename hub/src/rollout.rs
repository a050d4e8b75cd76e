//! One placement's rollout round, shared by ManifestWorkReplicaSets and add-on upgrades: the
//! strategy parsed from OCM's `rolloutStrategy`, the step (`flotilla_rollout::step`) over the
//! placement's clusters, and what both report of it — who starts now (nobody while paused), who
//! waits, why it stopped, the strategy's notes and the summary per decision group. Pure: the
//! actors gather the clusters and apply the works.

use flotilla_api::v1::{DecisionGroupSummary, RolloutConfig, RolloutStrategy};
use flotilla_rollout::strategy::{IntOrString, RawStrategy};
use flotilla_rollout::{Cluster, Status, Step, Strategy};
use std::collections::{BTreeMap, HashSet};
use std::time::SystemTime;

/// A placement's rollout strategy, parsed; errors name the field under `path`.
pub fn strategy(r: Option<&RolloutStrategy>, path: &str) -> Result<Strategy, Vec<String>> {
    let r = r.cloned().unwrap_or_default();
    // The parser names the type's field itself (`<path>.progressive.maxConcurrency`).
    let config = match r.r#type.as_str() {
        "" | "All" => r.all,
        "Progressive" => r.progressive,
        "ProgressivePerGroup" => r.progressive_per_group,
        other => {
            return Err(vec![format!(
                "{path}.type: {other:?} is not one of All, Progressive, ProgressivePerGroup"
            )]);
        }
    };
    let c: RolloutConfig = config.unwrap_or_default();
    let raw = RawStrategy {
        kind: r.r#type.clone(),
        max_concurrency: int_or_string(&c.max_concurrency),
        mandatory_groups: c
            .mandatory_decision_groups
            .iter()
            .map(|g| (g.group_name.clone(), i64::from(g.group_index)))
            .collect(),
        min_success_time: c.min_success_time,
        progress_deadline: c.progress_deadline,
        max_failures: int_or_string(&c.max_failures),
    };
    raw.parse(path)
        .map_err(|errs| errs.into_iter().map(|e| e.to_string()).collect())
}

fn int_or_string(s: &str) -> Option<IntOrString> {
    if s.is_empty() {
        None
    } else if let Ok(n) = s.parse::<i64>() {
        Some(IntOrString::Int(n))
    } else {
        Some(IntOrString::Str(s.to_string()))
    }
}

/// One round of a placement's rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// The step as decided.
    pub step: Step,
    /// The clusters to put at the new target now: the step's, or none while paused.
    pub start: Vec<String>,
    /// The clusters waiting for their turn (to apply, not started this round).
    pub waiting: Vec<String>,
    /// Why the rollout stopped (empty: it did not).
    pub stopped_reason: String,
    /// The strategy's notes, each naming its field under the strategy's path.
    pub notes: Vec<String>,
    /// Per decision group: its clusters and how many succeeded.
    pub groups: Vec<DecisionGroupSummary>,
}

/// The round of a placement whose strategy (at `path`) is `strategy`, over its `clusters`.
pub fn round(
    strategy: &Strategy,
    path: &str,
    clusters: &[Cluster],
    now: SystemTime,
    paused: bool,
) -> Round {
    let step = flotilla_rollout::step(strategy, clusters, now);
    let start = if paused {
        Vec::new()
    } else {
        step.start.clone()
    };
    let starting: HashSet<&str> = start.iter().map(String::as_str).collect();
    let waiting = clusters
        .iter()
        .filter(|c| c.status == Status::ToApply && !starting.contains(c.name.as_str()))
        .map(|c| c.name.clone())
        .collect();
    let mut groups: BTreeMap<(u32, &str), (i32, i32)> = BTreeMap::new();
    for c in clusters {
        let g = groups
            .entry((c.group.index, c.group.name.as_str()))
            .or_default();
        g.0 += 1;
        if c.status == Status::Succeeded {
            g.1 += 1;
        }
    }
    Round {
        stopped_reason: step
            .breach
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        notes: step.notes.iter().map(|n| format!("{path}: {n}")).collect(),
        groups: groups
            .into_iter()
            .map(|((index, name), (total, available))| DecisionGroupSummary {
                index: index as i32,
                name: name.to_string(),
                total,
                available,
            })
            .collect(),
        start,
        waiting,
        step,
    }
}

#[cfg(test)]
mod tests;

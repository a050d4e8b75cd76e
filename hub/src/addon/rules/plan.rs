//! The add-on's rollout plan for one round: which installations get the new configs now, which
//! wait, and each placement's install progression. Pure: the actor gathers the installations
//! (their configs resolved, their works' status) and renders and applies what the plan starts.

use crate::rollout::Round;
use flotilla_api::addon::conditions as cond;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{
    ConfigSpecHash, DefaultConfigReference, InstallConfigReference, InstallProgression,
    PlacementStrategy,
};
use flotilla_rollout::{Cluster, GroupKey, Status, Strategy};
use std::time::{Duration, SystemTime};

/// One installed add-on, as the plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// Its cluster.
    pub cluster: String,
    /// The install strategy's placement that decided it (`None`: installed by hand).
    pub placement: Option<usize>,
    /// Its decision group in that placement.
    pub group: GroupKey,
    /// Where its work stands against the configs it should have.
    pub status: Status,
    /// Since when.
    pub since: Option<SystemTime>,
}

/// One placement's part of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementRound {
    /// Index into the install strategy's placements.
    pub placement: usize,
    /// Indexes of its installations.
    pub members: Vec<usize>,
    /// Its rollout round.
    pub round: Round,
}

/// What one round of the add-on does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Indexes of the installations to render and apply now.
    pub start: Vec<usize>,
    /// Per installation: its configs are due and it waits for its turn.
    pub waiting: Vec<bool>,
    /// Each placement's round (placements whose strategy is refused have none).
    pub rounds: Vec<PlacementRound>,
    /// Placements whose rollout strategy is refused, with the reasons (each naming its field).
    pub refused: Vec<(usize, Vec<String>)>,
    /// When to plan again even if nothing changes (a soak ends, a deadline passes).
    pub recheck: Option<Duration>,
}

/// The path of a placement's rollout strategy in the ClusterManagementAddOn.
pub fn strategy_path(placement: usize) -> String {
    format!("spec.installStrategy.placements[{placement}].rolloutStrategy")
}

/// The plan over `installations`: one rollout per placement of the install strategy, and one
/// (`All`) for the add-ons installed by hand.
pub fn plan(
    placements: &[PlacementStrategy],
    installations: &[Installation],
    now: SystemTime,
) -> Plan {
    let mut out = Plan {
        waiting: vec![false; installations.len()],
        ..Default::default()
    };
    for p in 0..=placements.len() {
        let placement = (p < placements.len()).then_some(p);
        let members: Vec<usize> = (0..installations.len())
            .filter(|&i| installations[i].placement == placement)
            .collect();
        let (strategy, path) = match placement {
            Some(i) => {
                let path = strategy_path(i);
                match crate::rollout::strategy(placements[i].rollout_strategy.as_ref(), &path) {
                    Ok(s) => (s, path),
                    Err(e) => {
                        out.refused.push((i, e));
                        continue;
                    }
                }
            }
            None => (Strategy::default(), String::new()),
        };
        let clusters: Vec<Cluster> = members
            .iter()
            .map(|&i| {
                let x = &installations[i];
                Cluster {
                    name: x.cluster.clone(),
                    group: x.group.clone(),
                    status: x.status,
                    since: x.since,
                }
            })
            .collect();
        let round = crate::rollout::round(&strategy, &path, &clusters, now, false);
        if let Some(r) = round.step.recheck_after {
            out.recheck = Some(out.recheck.map_or(r, |x| x.min(r)));
        }
        // The round names clusters; an installation is one cluster's, so names are unique.
        let starting: std::collections::HashSet<&str> =
            round.start.iter().map(String::as_str).collect();
        for &i in &members {
            if installations[i].status == Status::ToApply {
                if starting.contains(installations[i].cluster.as_str()) {
                    out.start.push(i);
                } else {
                    out.waiting[i] = true;
                }
            }
        }
        if let Some(placement) = placement {
            out.rounds.push(PlacementRound {
                placement,
                members,
                round,
            });
        }
    }
    out
}

/// What a placement's install progression is made from.
pub struct ProgressionInput<'a> {
    /// The placement of the install strategy.
    pub placement: &'a PlacementStrategy,
    /// Every installation of the round.
    pub installations: &'a [Installation],
    /// The placement's round.
    pub round: &'a PlacementRound,
    /// The add-on's default configs (with their spec hashes).
    pub defaults: &'a [DefaultConfigReference],
    /// The spec hash of a config by (resource, namespace, name); empty when not known.
    pub hash: &'a dyn Fn(&str, &str, &str) -> String,
    /// The progression last written for this placement.
    pub previous: Option<&'a InstallProgression>,
}

/// A placement's install progression: counts, decision groups, why it stopped, the configs
/// its clusters get (last applied and last known good once the rollout completed) and the
/// `Progressing` condition.
pub fn progression(input: &ProgressionInput<'_>) -> InstallProgression {
    let p = input.placement;
    let round = &input.round.round;
    let members = &input.round.members;
    let count = |s: Status| {
        members
            .iter()
            .filter(|&&i| input.installations[i].status == s)
            .count() as i32
    };
    let total = members.len() as i32;
    let updated = count(Status::Succeeded);
    let failed = count(Status::Failed);
    // The placement's configs over the defaults, as the placement's clusters get them.
    let mut refs: Vec<InstallConfigReference> = input
        .defaults
        .iter()
        .filter(|d| {
            !p.configs
                .iter()
                .any(|c| c.group == d.group && c.resource == d.resource)
        })
        .map(|d| InstallConfigReference {
            group: d.group.clone(),
            resource: d.resource.clone(),
            desired_config: d.desired_config.clone(),
            ..Default::default()
        })
        .collect();
    for c in &p.configs {
        refs.push(InstallConfigReference {
            group: c.group.clone(),
            resource: c.resource.clone(),
            desired_config: Some(ConfigSpecHash {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                spec_hash: (input.hash)(&c.resource, &c.namespace, &c.name),
            }),
            ..Default::default()
        });
    }
    if round.step.complete && total > 0 {
        for r in &mut refs {
            r.last_applied_config = r.desired_config.clone();
            r.last_known_good_config = r.desired_config.clone();
        }
    } else if let Some(old) = input.previous {
        for r in &mut refs {
            if let Some(o) = old
                .config_references
                .iter()
                .find(|o| o.group == r.group && o.resource == r.resource)
            {
                r.last_applied_config = o.last_applied_config.clone();
                r.last_known_good_config = o.last_known_good_config.clone();
            }
        }
    }
    refs.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    let (reason, message) = if round.step.breach.is_some() {
        ("Failed", round.stopped_reason.clone())
    } else if round.step.complete {
        (
            "Completed",
            format!("{updated}/{total} completed with no errors, 0 failed 0 timeout."),
        )
    } else if total == 0 {
        ("Completed", "the placement selects no cluster".into())
    } else {
        (
            "Progressing",
            format!("{updated}/{total} progressing..., {failed} failed 0 timeout."),
        )
    };
    let mut conditions = input
        .previous
        .map(|x| x.conditions.clone())
        .unwrap_or_default();
    meta::set_condition(
        &mut conditions,
        cond::PROGRESSING,
        if reason == "Progressing" {
            status::TRUE
        } else {
            status::FALSE
        },
        reason,
        &message,
    );
    InstallProgression {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        config_references: refs,
        conditions,
        decision_groups: round.groups.clone(),
        stopped_reason: round.stopped_reason.clone(),
        notes: round.notes.clone(),
        total,
        updated,
        failed,
    }
}

#[cfg(test)]
mod tests;

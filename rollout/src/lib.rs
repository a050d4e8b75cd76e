//! The rollout step function: given a strategy and where each cluster stands, which clusters
//! start now, which timed out, whether the rollout must stop, and when to look again.
//!
//! Pure, no I/O and no clock: `now` is passed in, so it runs under paused time in tests and the
//! caller (the ManifestWorkReplicaSet actor, later the add-on actors) owns the timers — it calls
//! [`step`] again after [`Step::recheck_after`] or when a cluster's status changes.
//!
//! - [`strategy`]: the strategy (`All`, `Progressive`, `ProgressivePerGroup` with
//!   `maxConcurrency`, `mandatoryDecisionGroups`, `minSuccessTime`, `progressDeadline`,
//!   `maxFailures`) parsed and validated from OCM's fields, every error naming its field.
//! - [`step`] (this module): the decision.
//!
//! Semantics follow OCM's `RolloutHandler` (sdk-go `cluster/v1alpha1/rollout.go`):
//! - a cluster is `ToApply` (its work is not at the current template yet), `Progressing`,
//!   `Succeeded`, `Failed` or `Skip`; `Progressing` and `Failed` past `progressDeadline` count
//!   as timed out; failures and time-outs above `maxFailures` stop the rollout — nothing new
//!   starts, what already started goes on;
//! - a `Succeeded` cluster keeps its slot until `minSuccessTime` has passed (soak);
//! - a `Failed` cluster counts against `maxFailures` at once and frees its slot (its agent keeps
//!   retrying; if it recovers it becomes `Succeeded`);
//! - `Progressive`: mandatory decision groups first with no failure tolerated, then the other
//!   clusters in name order, at most `maxConcurrency` (count or percentage of those clusters,
//!   rounded up) in flight;
//! - `ProgressivePerGroup`: mandatory groups first, then decision groups in index order, a whole
//!   group at a time; the next group starts when no cluster of the current one is in flight;
//!   `maxFailures` applies per group;
//! - `All`: every cluster at once.
//!
//! Where Flotilla differs from OCM (on purpose):
//! - a failed cluster frees its slot: OCM keeps it in flight until `progressDeadline`, so with
//!   the default deadline ("None") a single tolerated failure stalls a Progressive rollout
//!   forever — `maxFailures` would tolerate nothing;
//! - a `maxFailures` or `maxConcurrency` larger than the clusters it applies to is clamped and
//!   reported in [`Step::notes`] (OCM silently falls back to 0 failures / all clusters);
//! - a mandatory decision group that names no existing group is reported in [`Step::notes`]
//!   instead of being skipped silently;
//! - the caller decides success from the work's own status (Applied and Available at the current
//!   generation), so no condition rules are needed to advance (see `OCM-SEMANTICS.md`).

#![deny(missing_docs)]

pub mod strategy;

pub use strategy::{GroupSelector, Kind, Strategy, StrategyError, Threshold};

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Where one cluster's work stands against the current template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Not at the current template yet (no work, or an older one).
    ToApply,
    /// At the current template, not yet Applied and Available.
    Progressing,
    /// Applied and Available at the current generation.
    Succeeded,
    /// Degraded, or a manifest failed to apply.
    Failed,
    /// Left out of this rollout.
    Skip,
}

/// The decision group of a cluster (PlacementDecision labels).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupKey {
    /// `decisionGroupIndex`.
    pub index: u32,
    /// `decisionGroupName` (may be empty).
    pub name: String,
}

/// One cluster the rollout covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// Cluster name.
    pub name: String,
    /// Its decision group.
    pub group: GroupKey,
    /// Where its work stands.
    pub status: Status,
    /// When `status` last changed (the deadline and the soak run from here). `None` for
    /// `ToApply`, or when unknown (then the deadline and soak run from `now`).
    pub since: Option<SystemTime>,
}

/// Why the rollout stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// Clusters whose work failed.
    pub failed: Vec<String>,
    /// Clusters that did not succeed within `progressDeadline`.
    pub timed_out: Vec<String>,
    /// The `maxFailures` in effect where it was breached.
    pub max_failures: u32,
    /// Which phase breached: `mandatory decision groups`, `decision group <i>`, or `clusters`.
    pub phase: String,
}

impl std::fmt::Display for Breach {
    /// `stopped in <phase>: failed [..], timed out [..] (maxFailures N)`, naming only the lists
    /// that are not empty.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped in {}:", self.phase)?;
        let mut sep = " ";
        for (what, names) in [("failed", &self.failed), ("timed out", &self.timed_out)] {
            if !names.is_empty() {
                write!(f, "{sep}{what} {names:?}")?;
                sep = ", ";
            }
        }
        write!(f, " (maxFailures {})", self.max_failures)
    }
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    /// Clusters whose work must be put at the current template now (they were `ToApply`).
    pub start: Vec<String>,
    /// Clusters in flight: started and not yet done (progressing within the deadline, or
    /// succeeded but still soaking).
    pub in_flight: Vec<String>,
    /// Clusters whose work failed (within the deadline; they count against `maxFailures`).
    pub failed: Vec<String>,
    /// Clusters past `progressDeadline`.
    pub timed_out: Vec<String>,
    /// Set when failures and time-outs exceed `maxFailures`: nothing new starts.
    pub breach: Option<Breach>,
    /// Every cluster (but skipped ones) succeeded and finished soaking.
    pub complete: bool,
    /// Nothing is left to start or in flight: the rollout is over, complete or with failures
    /// it tolerated (or stopped by a breach once what had started is done).
    pub finished: bool,
    /// When to call [`step`] again even if nothing changes (a soak ends, a deadline passes).
    pub recheck_after: Option<Duration>,
    /// Settings that were clamped or did not apply, each naming its field.
    pub notes: Vec<String>,
}

/// A cluster's status as of `now`: progressing or failed past the deadline is timed out; a
/// success still soaking is in flight. Returns the recheck instant when one is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    ToApply,
    InFlight,
    Failed,
    TimedOut,
    Done,
    Skip,
}

fn phase(strategy: &Strategy, c: &Cluster, now: SystemTime) -> (Phase, Option<SystemTime>) {
    let since = c.since.unwrap_or(now);
    match c.status {
        Status::ToApply => (Phase::ToApply, None),
        Status::Skip => (Phase::Skip, None),
        Status::Succeeded => {
            let soaked = since + strategy.min_success_time;
            if now < soaked {
                (Phase::InFlight, Some(soaked))
            } else {
                (Phase::Done, None)
            }
        }
        Status::Progressing | Status::Failed => match strategy.progress_deadline {
            Some(deadline) if now >= since + deadline => (Phase::TimedOut, None),
            deadline => {
                let recheck = deadline.map(|d| since + d);
                if c.status == Status::Failed {
                    (Phase::Failed, recheck)
                } else {
                    (Phase::InFlight, recheck)
                }
            }
        },
    }
}

/// Resolves a threshold against `total` clusters, clamping it to `[floor, total]` and noting
/// where it did not fit.
fn resolve(
    t: Threshold,
    total: usize,
    field: &str,
    floor: usize,
    notes: &mut Vec<String>,
) -> usize {
    let n = t.resolve(total);
    if n > total && total > 0 {
        notes.push(format!(
            "{field}: {t} is more than the {total} clusters it applies to; using {total}"
        ));
        total
    } else {
        n.max(floor)
    }
}

/// The rollout decision for `clusters` under `strategy` at `now`.
pub fn step(strategy: &Strategy, clusters: &[Cluster], now: SystemTime) -> Step {
    let mut out = Step::default();
    let mut recheck: Option<SystemTime> = None;
    let mut phases: BTreeMap<&str, (Phase, &Cluster)> = BTreeMap::new();
    for c in clusters {
        let (p, at) = phase(strategy, c, now);
        if let Some(at) = at {
            recheck = Some(recheck.map_or(at, |r: SystemTime| r.min(at)));
        }
        if p == Phase::TimedOut {
            out.timed_out.push(c.name.clone());
        }
        match p {
            Phase::InFlight => out.in_flight.push(c.name.clone()),
            Phase::Failed => out.failed.push(c.name.clone()),
            _ => {}
        }
        phases.insert(c.name.as_str(), (p, c));
    }
    let (mandatory, rest): (Vec<_>, Vec<_>) = phases
        .values()
        .partition(|(_, c)| strategy.is_mandatory(&c.group));
    for sel in &strategy.mandatory_groups {
        if !clusters.iter().any(|c| sel.matches(&c.group)) {
            out.notes.push(format!(
                "mandatoryDecisionGroups: {sel} matches no decision group of the placement"
            ));
        }
    }

    match strategy.kind {
        Kind::All => {
            let max = resolve(
                strategy.max_failures,
                clusters.len(),
                "maxFailures",
                0,
                &mut out.notes,
            );
            let all: Vec<_> = phases.values().copied().collect();
            if !breached(&mut out, &all, max, "clusters") {
                start_all(&mut out, &all);
            }
        }
        Kind::Progressive | Kind::ProgressivePerGroup => {
            // Mandatory groups first, group by group, tolerating no failure.
            let mandatory_open = mandatory.iter().any(|(p, _)| {
                matches!(
                    p,
                    Phase::ToApply | Phase::InFlight | Phase::Failed | Phase::TimedOut
                )
            });
            if mandatory_open {
                per_group(
                    &mut out,
                    &mandatory,
                    |_| Threshold::Count(0),
                    "mandatory decision group",
                );
            } else if strategy.kind == Kind::Progressive {
                progressive(strategy, &mut out, &rest);
            } else {
                per_group(&mut out, &rest, |_| strategy.max_failures, "decision group");
            }
        }
    }

    out.complete = phases
        .values()
        .all(|(p, _)| *p == Phase::Done || *p == Phase::Skip);
    out.finished = out.in_flight.is_empty()
        && (out.breach.is_some() || !phases.values().any(|(p, _)| *p == Phase::ToApply));
    out.recheck_after = recheck.map(|r| r.duration_since(now).unwrap_or_default());
    out
}

/// `Progressive` after the mandatory groups: clusters in name order, at most `maxConcurrency`
/// in flight.
fn progressive(strategy: &Strategy, out: &mut Step, rest: &[(Phase, &Cluster)]) {
    let max = resolve(
        strategy.max_failures,
        rest.len(),
        "maxFailures",
        0,
        &mut out.notes,
    );
    if breached(out, rest, max, "clusters") {
        return;
    }
    let capacity = match strategy.max_concurrency {
        Some(t) => resolve(t, rest.len(), "maxConcurrency", 1, &mut out.notes),
        None => rest.len(),
    };
    let mut in_flight = rest.iter().filter(|(p, _)| *p == Phase::InFlight).count();
    // `rest` is in name order (the values of a map keyed by name).
    for (p, c) in rest {
        if in_flight >= capacity {
            break;
        }
        if *p == Phase::ToApply {
            out.start.push(c.name.clone());
            in_flight += 1;
        }
    }
}

/// Group by group in index order: the first group that is not done is rolled out whole; the
/// next waits until none of its clusters is in flight. `max_failures` applies per group.
fn per_group(
    out: &mut Step,
    members: &[(Phase, &Cluster)],
    max_failures: impl Fn(&GroupKey) -> Threshold,
    what: &str,
) {
    let mut groups: BTreeMap<&GroupKey, Vec<(Phase, &Cluster)>> = BTreeMap::new();
    for (p, c) in members {
        groups.entry(&c.group).or_default().push((*p, c));
    }
    for (key, members) in groups {
        let max = resolve(
            max_failures(key),
            members.len(),
            "maxFailures",
            0,
            &mut out.notes,
        );
        if breached(out, &members, max, &format!("{what} {}", key.index)) {
            return;
        }
        let open = members
            .iter()
            .any(|(p, _)| matches!(p, Phase::ToApply | Phase::InFlight));
        if open {
            start_all(out, &members);
            return;
        }
    }
}

fn start_all(out: &mut Step, members: &[(Phase, &Cluster)]) {
    out.start.extend(
        members
            .iter()
            .filter(|(p, _)| *p == Phase::ToApply)
            .map(|(_, c)| c.name.clone()),
    );
}

/// Records a breach when failures and time-outs among `members` exceed `max`.
fn breached(out: &mut Step, members: &[(Phase, &Cluster)], max: usize, phase: &str) -> bool {
    let failed: Vec<String> = members
        .iter()
        .filter(|(p, _)| *p == Phase::Failed)
        .map(|(_, c)| c.name.clone())
        .collect();
    let timed_out: Vec<String> = members
        .iter()
        .filter(|(p, _)| *p == Phase::TimedOut)
        .map(|(_, c)| c.name.clone())
        .collect();
    if failed.len() + timed_out.len() > max {
        out.breach = Some(Breach {
            failed,
            timed_out,
            max_failures: max as u32,
            phase: phase.to_string(),
        });
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests;

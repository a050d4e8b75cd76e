//! What one reconcile of a replica set does, decided from plain values (pure): its spec, its
//! works by cluster (what the rules read of each: [`WorkFacts`]) and what each of its
//! placements decides. The rollout round of every placement says which clusters get the
//! current template now; clusters that left every placement's decisions lose their work; the
//! status follows. The executor in [`super`] gathers, applies and deletes works, and writes the
//! status.

use super::super::rules;
use super::super::rules::WorkFacts;
use super::super::rules::variant::{self, Picks};
use super::{COND_MANIFESTWORK_APPLIED, COND_PLACEMENT_ROLLED_OUT, COND_PLACEMENT_VERIFIED};
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{
    LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, PlacementSummary,
};
use flotilla_rollout::{Cluster, GroupKey};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// How soon a placement not scheduled yet is looked at again.
pub const UNSCHEDULED_RECHECK: Duration = Duration::from_secs(1);

/// What one placement of the replica set decides, as gathered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decided {
    /// The placement has scheduled (it has a `PlacementSatisfied` condition).
    pub scheduled: bool,
    /// Its decided clusters, each with its decision group.
    pub clusters: Vec<(String, GroupKey)>,
}

/// What a reconcile does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// `(cluster, placement)`: the clusters to give the current template now.
    pub start: Vec<(String, String)>,
    /// Clusters that left every placement's decisions: their work (not being deleted) goes.
    pub remove: Vec<String>,
    /// Per placement found: its rollout's summary.
    pub summaries: Vec<PlacementSummary>,
    /// Placements that do not exist.
    pub missing: Vec<String>,
    /// Every placement's rollout is complete (and some cluster is decided).
    pub rolled_out: bool,
    /// Why rollouts stopped (bad strategies, stopped rollouts, a pause).
    pub stopped: Vec<String>,
    /// No cluster is decided at all.
    pub empty: bool,
    /// When to look again sooner than the resync.
    pub recheck: Option<Duration>,
}

fn sooner(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

fn paused(rs: &ManifestWorkReplicaSet) -> bool {
    rs.hub.as_ref().is_some_and(|h| h.paused)
}

/// Decides a reconcile of `rs` at `now`. `hash`: its template's; `picks`: the template each
/// decided cluster wants when the set has per-target variants (absent: the template);
/// `works`: its works by cluster; `placements`: what each of `spec.placementRefs` decides, in
/// order (`None`: the placement does not exist).
pub fn plan(
    rs: &ManifestWorkReplicaSet,
    hash: &str,
    picks: &Picks,
    works: &BTreeMap<String, WorkFacts>,
    placements: &[Option<Decided>],
    now: SystemTime,
) -> Plan {
    let mut p = Planner {
        rs,
        hash,
        picks,
        works,
        now,
        plan: Plan {
            rolled_out: true,
            ..Plan::default()
        },
        wanted: BTreeMap::new(),
    };
    let refs = rs.spec.as_ref().map(|s| s.placement_refs.as_slice());
    for (i, (pref, decided)) in refs.unwrap_or_default().iter().zip(placements).enumerate() {
        match decided {
            None => {
                p.plan.missing.push(pref.name.clone());
                p.plan.rolled_out = false;
            }
            Some(d) if !d.scheduled => p.unscheduled(&pref.name),
            Some(d) => p.roll(i, pref, d),
        }
    }
    p.finish()
}

/// A reconcile being decided.
struct Planner<'a> {
    rs: &'a ManifestWorkReplicaSet,
    hash: &'a str,
    picks: &'a Picks,
    works: &'a BTreeMap<String, WorkFacts>,
    now: SystemTime,
    plan: Plan,
    /// Each cluster kept or decided, and the placement that put it there (the first).
    wanted: BTreeMap<String, String>,
}

impl Planner<'_> {
    /// A placement not scheduled yet has no decisions to go by: wait for them (an empty
    /// decision set now does not mean a complete rollout), and keep the works it has.
    fn unscheduled(&mut self, placement: &str) {
        self.plan.rolled_out = false;
        for (cluster, w) in self.works {
            if w.view().placement() == Some(placement) {
                self.wanted
                    .entry(cluster.clone())
                    .or_insert(placement.to_string());
            }
        }
        self.plan.recheck = sooner(self.plan.recheck, UNSCHEDULED_RECHECK);
    }

    /// The rollout round of the `i`th placement, which decided `decided`.
    fn roll(&mut self, i: usize, pref: &LocalPlacementReference, decided: &Decided) {
        let path = format!("spec.placementRefs[{i}].rolloutStrategy");
        let strategy = match crate::rollout::strategy(pref.rollout_strategy.as_ref(), &path) {
            Ok(s) => s,
            Err(e) => {
                self.plan.stopped.push(e.join("; "));
                self.plan.rolled_out = false;
                return;
            }
        };
        let mut clusters = Vec::new();
        let mut hashes = BTreeMap::new();
        for (c, group) in &decided.clusters {
            if self.wanted.contains_key(c) {
                continue; // an earlier placement already covers it
            }
            let pick = variant::pick_of(self.picks, c);
            let Some(hash) = variant::hash(self.rs, self.hash, pick) else {
                continue; // a customization deploys nothing there: its work goes
            };
            self.wanted.insert(c.clone(), pref.name.clone());
            hashes.insert(c.as_str(), hash);
            let (status, since) = rules::status_of(self.works.get(c).map(WorkFacts::view), hash);
            clusters.push(Cluster {
                name: c.clone(),
                group: group.clone(),
                status,
                since,
            });
        }
        let round = crate::rollout::round(&strategy, &path, &clusters, self.now, paused(self.rs));
        let plan = &mut self.plan;
        plan.start
            .extend(round.start.iter().map(|c| (c.clone(), pref.name.clone())));
        if !round.step.complete {
            plan.rolled_out = false;
        }
        if !round.stopped_reason.is_empty() {
            plan.stopped
                .push(format!("{}: {}", pref.name, round.stopped_reason));
        }
        let placement_works = clusters
            .iter()
            .filter_map(|c| self.works.get(&c.name).map(WorkFacts::view));
        let states = rules::state::count(clusters.iter().map(|c| {
            rules::state::of(
                self.works.get(&c.name).map(WorkFacts::view),
                hashes[c.name.as_str()],
            )
        }));
        plan.summaries.push(PlacementSummary {
            name: pref.name.clone(),
            summary: Some(rules::summary(placement_works)),
            states: Some(states),
            waiting: round.waiting.len() as i32,
            stopped_reason: round.stopped_reason,
            notes: round.notes,
            decision_groups: round.groups,
        });
        if let Some(r) = round.step.recheck_after {
            plan.recheck = sooner(plan.recheck, r);
        }
    }

    /// Clusters that left every placement's decisions lose their work; no cluster decided is
    /// not a complete rollout; a paused one says so.
    fn finish(mut self) -> Plan {
        let wanted = &self.wanted;
        self.plan.remove = self
            .works
            .iter()
            .filter(|(cluster, w)| !wanted.contains_key(*cluster) && !w.view().deleting())
            .map(|(cluster, _)| cluster.clone())
            .collect();
        let plan = &mut self.plan;
        // No cluster decided yet (a new placement, or one selecting nothing): not rolled out.
        plan.empty = self.wanted.is_empty();
        if plan.empty {
            plan.rolled_out = false;
        }
        if paused(self.rs) && !plan.rolled_out {
            plan.stopped.push("paused (flotilla rollout resume)".into());
        }
        self.plan
    }
}

/// The status a reconcile's `plan` gives `rs` (its works by cluster in `works`); its placement
/// summaries are taken from the plan.
pub fn status(
    rs: &ManifestWorkReplicaSet,
    plan: &mut Plan,
    works: &BTreeMap<String, WorkFacts>,
) -> ManifestWorkReplicaSetStatus {
    let generation = rs.metadata.as_ref().map_or(0, |m| m.generation);
    let total = rules::summary(works.values().map(WorkFacts::view));
    let mut st = rs.status.clone().unwrap_or_default();
    let mut set = |t: &str, ok: bool, reason: &str, message: String| {
        meta::set_condition(
            &mut st.conditions,
            t,
            if ok { status::TRUE } else { status::FALSE },
            reason,
            &message,
        );
        if let Some(c) = st.conditions.iter_mut().find(|c| c.r#type == t) {
            c.observed_generation = generation;
        }
    };
    if plan.missing.is_empty() {
        set(COND_PLACEMENT_VERIFIED, true, "AsExpected", String::new());
    } else {
        let message = format!(
            "spec.placementRefs: placement(s) {} not found",
            plan.missing.join(", ")
        );
        set(
            COND_PLACEMENT_VERIFIED,
            false,
            "PlacementDecisionNotFound",
            message,
        );
    }
    let (ok, reason, message) = if plan.rolled_out {
        (true, "Complete", String::new())
    } else if plan.empty && plan.missing.is_empty() {
        let why = "the placements select no cluster yet";
        (false, "NoDecisions", why.to_string())
    } else if paused(rs) {
        (false, "Paused", plan.stopped.join("; "))
    } else if !plan.stopped.is_empty() {
        (false, "Stopped", plan.stopped.join("; "))
    } else {
        (false, "Progressing", String::new())
    };
    set(COND_PLACEMENT_ROLLED_OUT, ok, reason, message);
    let applied = total.total > 0 && total.applied == total.total;
    set(
        COND_MANIFESTWORK_APPLIED,
        applied,
        if applied {
            "AsExpected"
        } else {
            "NotAsExpected"
        },
        format!("{}/{} works applied", total.applied, total.total),
    );
    st.summary = Some(total);
    st.placement_summaries = std::mem::take(&mut plan.summaries);
    st.states = Some(
        st.placement_summaries
            .iter()
            .filter_map(|p| p.states.as_ref())
            .fold(Default::default(), |sum, s| rules::state::sum(&sum, s)),
    );
    st
}

#[cfg(test)]
mod tests;

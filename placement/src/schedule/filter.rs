//! Step 2: the filters — clusters being deleted, the predicates (ORed), then taints and
//! tolerations ([`crate::taint`]).

use std::time::SystemTime;

use crate::cluster::Cluster;
use crate::debug::{ClusterDebug, Filter, FilterResult};
use crate::fleet::Fleet;
use crate::taint::{Rejection, TaintCheck, check_taints};

use super::PlacementInput;
use super::candidates::Candidates;
use super::explain::Explain;
use super::min_time;
use super::predicate::{CelInputs, Predicate, predicate_failure};

/// A fleet index that is not feasible, in [`Feasible::position`].
pub(super) const NOT_FEASIBLE: u32 = u32::MAX;

/// The clusters that passed every filter.
pub(super) struct Feasible {
    /// Their fleet indexes, in candidate order.
    pub(super) clusters: Vec<u32>,
    /// Per feasible cluster: an untolerated `PreferNoSelect` taint ranks it after the others.
    pub(super) penalized: Vec<bool>,
    /// Per fleet index: its position in `clusters`, or [`NOT_FEASIBLE`].
    pub(super) position: Vec<u32>,
    /// Candidates that are not being deleted.
    pub(super) candidates: usize,
    /// The earliest expiry of a toleration a feasible cluster relies on.
    pub(super) toleration_expires_at: Option<SystemTime>,
}

/// Filters the candidates; with a sink, records every verdict and its reason.
pub(super) fn filter(
    fleet: &Fleet,
    input: &PlacementInput<'_>,
    candidates: &Candidates<'_>,
    predicates: &[Predicate],
    mut sink: Option<&mut Explain>,
) -> Feasible {
    let p = input.placement;
    let clusters = fleet.clusters();
    let members = &candidates.members;
    let explain = sink.is_some();
    let mut cel_inputs = CelInputs::new(fleet, predicates);
    let mut out = Feasible {
        clusters: Vec::with_capacity(members.len()),
        penalized: Vec::with_capacity(members.len()),
        position: Vec::new(),
        candidates: 0,
        toleration_expires_at: None,
    };
    for &idx in members.iter() {
        let i = idx as usize;
        let mut entry = explain.then(|| ClusterDebug {
            name: clusters[i].name.clone(),
            filters: Vec::new(),
            scores: Vec::new(),
            total: None,
            prefer_no_select_penalty: false,
            rank: None,
            selected: false,
            not_selected_reason: None,
        });
        let record = |e: &mut Option<ClusterDebug>, filter, passed, reason: Option<String>| {
            if let Some(e) = e {
                e.filters.push(FilterResult {
                    filter,
                    passed,
                    reason,
                });
            }
        };
        let verdict = 'verdict: {
            if fleet.deleting[i] {
                record(
                    &mut entry,
                    Filter::Deleting,
                    false,
                    Some("cluster is being deleted".into()),
                );
                break 'verdict None;
            }
            record(&mut entry, Filter::Deleting, true, None);
            out.candidates += 1;
            if !predicates.is_empty()
                && !predicates
                    .iter()
                    .any(|pr| pr.matches(fleet, idx, &mut cel_inputs))
            {
                let why =
                    explain.then(|| predicate_failure(fleet, predicates, idx, &mut cel_inputs));
                record(&mut entry, Filter::Predicates, false, why);
                break 'verdict None;
            }
            record(&mut entry, Filter::Predicates, true, None);
            if !fleet.tainted[i] {
                record(&mut entry, Filter::TaintToleration, true, None);
                break 'verdict Some((false, None));
            }
            let c = &clusters[i];
            match check_taints(&c.taints, &p.tolerations, candidates.decided[i], input.now) {
                TaintCheck::Rejected { taint, why } => {
                    let reason = explain.then(|| match why {
                        Rejection::NotTolerated => {
                            format!("taint {} is not tolerated", taint_text(c, taint))
                        }
                        Rejection::ToleranceExpired => format!(
                            "toleration of taint {} expired (tolerationSeconds)",
                            taint_text(c, taint)
                        ),
                    });
                    record(&mut entry, Filter::TaintToleration, false, reason);
                    None
                }
                TaintCheck::Tolerated { penalized, until } => {
                    let reason = explain.then(|| {
                        let mut notes = Vec::new();
                        if penalized {
                            notes.push(
                                "untolerated PreferNoSelect taint: ranked after untainted clusters"
                                    .to_owned(),
                            );
                        }
                        if let Some(t) = until {
                            notes.push(format!("relies on a toleration until {t:?}"));
                        }
                        notes.join("; ")
                    });
                    record(
                        &mut entry,
                        Filter::TaintToleration,
                        true,
                        reason.filter(|r| !r.is_empty()),
                    );
                    Some((penalized, until))
                }
            }
        };
        if let Some((pen, until)) = verdict {
            out.clusters.push(idx);
            out.penalized.push(pen);
            out.toleration_expires_at = min_time(out.toleration_expires_at, until);
        }
        if let (Some(sink), Some(mut e)) = (sink.as_deref_mut(), entry) {
            e.prefer_no_select_penalty = verdict.is_some_and(|(pen, _)| pen);
            sink.cluster(idx, e);
        }
    }
    out.position = vec![NOT_FEASIBLE; clusters.len()];
    for (k, &idx) in out.clusters.iter().enumerate() {
        out.position[idx as usize] = k as u32;
    }
    out
}

fn taint_text(c: &Cluster, i: usize) -> String {
    let t = &c.taints[i];
    format!("{}={}:{}", t.key, t.value, t.effect.as_str())
}

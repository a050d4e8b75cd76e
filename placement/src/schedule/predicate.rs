//! Compiled predicates: a placement's (and its decision groups') cluster selectors over the
//! fleet's interned strings, with the CEL inputs each cluster needs built once per run.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::cel::{self, CompiledCel, ScoreUse};
use crate::error::{ErrorKind, FieldError};
use crate::fleet::Fleet;
use crate::index::IdSelector;
use crate::placement::{ClusterSelector, Placement};
use crate::selector::SelectorError;

use super::{ScheduleError, misconfigured};

/// A compiled predicate: label selector AND claim selector, over the fleet's interned strings,
/// AND the CEL expressions if any.
pub(super) struct Predicate {
    labels: IdSelector,
    claims: IdSelector,
    cel: Option<Arc<CompiledCel>>,
}

impl Predicate {
    fn compile(fleet: &Fleet, sel: &ClusterSelector) -> Result<Self, String> {
        let cel = if sel.cel_expressions.is_empty() {
            None
        } else {
            let compiled = sel.cel_expressions.compiled().map_err(|errors| {
                let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
                messages.join("; ")
            })?;
            Some(compiled.clone())
        };
        let selector =
            |s| IdSelector::new(&fleet.strings, s).map_err(|e: SelectorError| e.to_string());
        Ok(Predicate {
            labels: selector(&sel.label_selector)?,
            claims: selector(&sel.claim_selector)?,
            cel,
        })
    }

    /// Label and claim selectors only (decision groups have no CEL).
    #[inline]
    pub(super) fn matches_labels_and_claims(&self, fleet: &Fleet, idx: u32) -> bool {
        self.labels.matches(&fleet.labels, idx) && self.claims.matches(&fleet.claims, idx)
    }

    /// The whole predicate; CEL last, as it is the expensive part.
    pub(super) fn matches(&self, fleet: &Fleet, idx: u32, cel: &mut CelInputs<'_>) -> bool {
        self.matches_labels_and_claims(fleet, idx)
            && self.cel.as_ref().is_none_or(|c| cel.matches(c, idx))
    }
}

/// The CEL inputs of each cluster, built once per run on first need.
pub(super) struct CelInputs<'f> {
    fleet: &'f Fleet,
    /// The AddOnPlacementScores any predicate's `scores(..)` reads.
    scores: ScoreUse,
    built: HashMap<u32, (cel::Value, Arc<BTreeMap<String, cel::Value>>)>,
}

impl<'f> CelInputs<'f> {
    pub(super) fn new(fleet: &'f Fleet, predicates: &[Predicate]) -> Self {
        let mut scores = ScoreUse::Nothing;
        for c in predicates.iter().filter_map(|p| p.cel.as_ref()) {
            scores.add(c.score_use().clone());
        }
        CelInputs {
            fleet,
            scores,
            built: HashMap::new(),
        }
    }

    fn matches(&mut self, compiled: &CompiledCel, idx: u32) -> bool {
        let fleet = self.fleet;
        let scores = &self.scores;
        let (value, table) = self.built.entry(idx).or_insert_with(|| {
            let cluster = &fleet.clusters()[idx as usize];
            let table = match scores {
                ScoreUse::Nothing => BTreeMap::new(),
                ScoreUse::Named(names) => {
                    cel::scores_value(names.iter().filter_map(|n| fleet.score(&cluster.name, n)))
                }
                ScoreUse::Any => cel::scores_value(fleet.scores_of(&cluster.name)),
            };
            (cel::cluster_value(cluster), Arc::new(table))
        });
        compiled.matches(value, table)
    }
}

/// Compiles selectors; validation has already accepted them, so failure is only defensive.
pub(super) fn compile_all(
    fleet: &Fleet,
    p: &Placement,
    selectors: &[&ClusterSelector],
    path: &str,
) -> Result<Vec<Predicate>, ScheduleError> {
    selectors
        .iter()
        .enumerate()
        .map(|(i, sel)| {
            Predicate::compile(fleet, sel).map_err(|e| {
                misconfigured(
                    p,
                    vec![FieldError::new(
                        format!("{path}[{i}]"),
                        ErrorKind::Misconfigured,
                        e,
                    )],
                )
            })
        })
        .collect()
}

/// Why no predicate matched, predicate by predicate.
pub(super) fn predicate_failure(
    fleet: &Fleet,
    predicates: &[Predicate],
    idx: u32,
    cel: &mut CelInputs<'_>,
) -> String {
    let parts: Vec<String> = predicates
        .iter()
        .enumerate()
        .map(|(i, pr)| {
            let labels = pr.labels.matches(&fleet.labels, idx);
            let claims = pr.claims.matches(&fleet.claims, idx);
            let what = match (labels, claims) {
                (false, false) => "labelSelector and claimSelector do not match",
                (false, true) => "labelSelector does not match",
                (true, false) => "claimSelector does not match",
                (true, true) if pr.matches(fleet, idx, cel) => "matches",
                (true, true) => "celSelector does not match",
            };
            format!("predicates[{i}]: {what}")
        })
        .collect();
    format!("no predicate matched ({})", parts.join("; "))
}

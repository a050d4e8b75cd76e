//! The scheduler: one placement against a [`Fleet`], steps 1–7 of the OCM algorithm.
//!
//! 1. **Eligible sets**: sets bound in the placement's namespace (bindings to missing sets are
//!    ignored) ∩ `spec.clusterSets` (all bound sets when empty). **Candidates**: their members,
//!    minus clusters being deleted.
//! 2. **Filters**: predicates (ORed; each ANDs its label and claim selector; none = all pass),
//!    then taints ([`crate::taint`]).
//! 3. **Weights**: [`crate::score::effective_weights`].
//! 4. **Scores**: Balance, Steady, ResourceAllocatableCPU/Memory, AddOn ([`crate::score`]).
//!    Balance's maximum count is taken, as OCM does, over every cluster in another placement's
//!    decisions, feasible for this placement or not: a busy cluster this placement cannot use
//!    still sets the scale, which decides whether Steady keeps an existing decision. The counts
//!    come from decisions, not from cluster data, so a change to a cluster that is not feasible
//!    still cannot move anybody's decisions. The resource minimum/maximum are taken over the
//!    feasible clusters (as OCM). Together this is what lets
//!    [`crate::change::placement_may_be_affected`] stay exact.
//! 5. **Order**: clusters with an untolerated `PreferNoSelect` taint rank after all others (a
//!    separate tier rather than a score penalty: no weight configuration can make a tainted
//!    cluster win over an untainted one, and scores within each tier stay comparable with OCM's);
//!    within a tier by total descending, then name ascending. Take `numberOfClusters` (unset =
//!    all feasible), through the spread constraints if any ([`crate::spread`]).
//! 6. **Recorded scores, groups and pages**: each decision records its total score, held back
//!    under `scoreRateLimit` when only scores moved (`crate::rate_limit`); the selection is put
//!    in `sortBy` order and cut into groups and pages ([`crate::groups`]).
//! 7. **Status**: `PlacementSatisfied` with OCM's reasons and `PlacementMisconfigured=False`.
//!    A spec with any validation error is not scheduled at all: [`ScheduleError`] carries the
//!    conditions to write, and the hub keeps the existing decisions (OCM instead empties them).
//!
//! **Re-evaluation**: [`Schedule::requeue_at`] is the earliest moment the result can change
//! with time alone: a toleration with `tolerationSeconds` that a feasible cluster relies on
//! expires (the cluster drops out, or its PreferNoSelect penalty comes back), or an AddOn score
//! that a feasible cluster's total uses reaches its `validUntil`, or `scoreRateLimit` runs out
//! on a held-back score change. Expiries of infeasible clusters cannot change anything and are
//! not reported.
//!
//! **Cost**: one pass over the candidates with precompiled selectors, no per-cluster allocation;
//! ties are broken by a name rank precomputed by the [`Fleet`], so sorting compares `u128` keys;
//! with `numberOfClusters` set and no spread constraint only a partial selection
//! (`select_nth_unstable`) is done. Debug output is built only by [`Fleet::explain`].

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cel::{self, CompiledCel, ScoreUse};

use crate::cluster::Cluster;
use crate::clusterset::eligible_cluster_sets;
use crate::debug::{ClusterDebug, Filter, FilterResult, ScheduleDebug, ScoreDetail};
use crate::error::{ErrorKind, FieldError};
use crate::fleet::Fleet;
use crate::groups::{PlacementDecision, group_sorted};
use crate::index::IdSelector;
use crate::placement::{
    ClusterSelector, DEFAULT_SCORE_RATE_LIMIT, Placement, SortBy, TopologyKeyType,
};
use crate::rate_limit;
use crate::score::{
    BuiltIn, Prioritizer, balance_max_count, balance_score, clamp_score, effective_weights,
    resource_score, steady_score,
};
use crate::selector::SelectorError;
use crate::spread::{self, SpreadReason};
use crate::status::{
    Condition, ConditionType, Outcome, PlacementStatus, Reason, satisfied_condition,
};
use crate::taint::{Rejection, TaintCheck, check_taints};
use crate::validate::validate;

/// Per-placement input to a scheduling run.
#[derive(Debug, Clone, Copy)]
pub struct PlacementInput<'a> {
    /// The placement.
    pub placement: &'a Placement,
    /// Clusters in the placement's current PlacementDecisions (for Steady and NoSelectIfNew).
    pub current_decisions: Option<&'a BTreeSet<String>>,
    /// Per cluster: decisions in all *other* placements (for Balance). Absent = 0.
    pub other_decision_counts: Option<&'a HashMap<String, u32>>,
    /// `other_decision_counts` also counts this placement's `current_decisions` (one per
    /// decided cluster), which the scheduler subtracts: lets a caller share one fleet-wide count
    /// map between every placement instead of building one map per placement.
    pub counts_include_current: bool,
    /// The scores recorded in the current PlacementDecisions (for `scoreRateLimit`). Absent
    /// = none recorded.
    pub recorded_scores: Option<&'a HashMap<String, i64>>,
    /// `status.lastScoreUpdateTime`: when the recorded scores were last written.
    pub last_score_update: Option<SystemTime>,
    /// The time to evaluate tolerations and score expiry at.
    pub now: SystemTime,
}

impl<'a> PlacementInput<'a> {
    /// Input for a placement with no current decisions and no decisions elsewhere.
    pub fn new(placement: &'a Placement, now: SystemTime) -> Self {
        PlacementInput {
            placement,
            current_decisions: None,
            other_decision_counts: None,
            counts_include_current: false,
            recorded_scores: None,
            last_score_update: None,
            now,
        }
    }

    /// Sets the scores recorded in the current decisions and when they were written
    /// (`status.lastScoreUpdateTime`), which `scoreRateLimit` holds back.
    pub fn recorded_scores(
        mut self,
        scores: &'a HashMap<String, i64>,
        last_update: Option<SystemTime>,
    ) -> Self {
        self.recorded_scores = Some(scores);
        self.last_score_update = last_update;
        self
    }

    /// Sets the current decisions.
    pub fn current_decisions(mut self, decisions: &'a BTreeSet<String>) -> Self {
        self.current_decisions = Some(decisions);
        self
    }

    /// Sets the decision counts of other placements.
    pub fn other_decision_counts(mut self, counts: &'a HashMap<String, u32>) -> Self {
        self.other_decision_counts = Some(counts);
        self.counts_include_current = false;
        self
    }

    /// Sets the decision counts of *every* placement, this one included: the scheduler
    /// subtracts this placement's own [`PlacementInput::current_decisions`].
    pub fn all_decision_counts(mut self, counts: &'a HashMap<String, u32>) -> Self {
        self.other_decision_counts = Some(counts);
        self.counts_include_current = true;
        self
    }
}

/// The result of scheduling one placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The PlacementDecision objects to create or update (delete any other page of this
    /// placement).
    pub pages: Vec<PlacementDecision>,
    /// The placement's new status.
    pub status: PlacementStatus,
    /// Earliest moment the result can change with time alone; schedule again then.
    pub requeue_at: Option<SystemTime>,
    /// The toleration part of `requeue_at`: earliest expiry of a toleration that a feasible
    /// cluster relies on.
    pub toleration_expires_at: Option<SystemTime>,
}

impl Schedule {
    /// Selected cluster names, in page order (sorted by name within each page).
    pub fn selected(&self) -> impl Iterator<Item = &str> {
        self.pages.iter().flat_map(PlacementDecision::cluster_names)
    }

    /// Selected cluster names as a set, e.g. to feed back as the next run's current decisions.
    pub fn selected_set(&self) -> BTreeSet<String> {
        self.selected().map(str::to_owned).collect()
    }

    /// `requeue_at` as a delay from `now` (zero when already due).
    pub fn requeue_after(&self, now: SystemTime) -> Option<Duration> {
        self.requeue_at
            .map(|t| t.duration_since(now).unwrap_or(Duration::ZERO))
    }
}

/// Why a placement was not scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The spec failed validation; nothing was scheduled. Write [`ScheduleError::conditions`]
    /// and keep the existing PlacementDecisions.
    #[error("placement {namespace}/{name} is misconfigured: {}", join(.errors))]
    Misconfigured {
        /// Placement namespace.
        namespace: String,
        /// Placement name.
        name: String,
        /// Every problem found.
        errors: Vec<FieldError>,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ScheduleError {
    /// The validation errors.
    pub fn errors(&self) -> &[FieldError] {
        match self {
            ScheduleError::Misconfigured { errors, .. } => errors,
        }
    }

    /// True when OCM would have accepted the spec and reported it only as misconfigured
    /// (every error is of kind [`ErrorKind::Misconfigured`]).
    pub fn accepted_by_ocm(&self) -> bool {
        self.errors()
            .iter()
            .all(|e| e.kind == ErrorKind::Misconfigured)
    }

    /// `PlacementMisconfigured=True` listing every error, and `PlacementSatisfied=False`.
    pub fn conditions(&self) -> Vec<Condition> {
        let message = join(self.errors());
        vec![
            Condition::new(
                ConditionType::PlacementSatisfied,
                false,
                Reason::NotAllDecisionsScheduled,
                format!("placement is misconfigured, decisions left unchanged: {message}"),
            ),
            Condition::new(
                ConditionType::PlacementMisconfigured,
                true,
                Reason::Misconfigured,
                message,
            ),
        ]
    }
}

impl Fleet {
    /// Schedules one placement.
    pub fn schedule(&self, input: &PlacementInput<'_>) -> Result<Schedule, ScheduleError> {
        run(self, input, false).map(|(s, _)| s)
    }

    /// Schedules one placement and explains every candidate's fate (slower: builds strings for
    /// every candidate).
    pub fn explain(
        &self,
        input: &PlacementInput<'_>,
    ) -> Result<(Schedule, ScheduleDebug), ScheduleError> {
        run(self, input, true).map(|(s, d)| (s, d.unwrap_or_else(empty_debug)))
    }
}

fn empty_debug() -> ScheduleDebug {
    ScheduleDebug {
        eligible_sets: Vec::new(),
        prioritizers: Vec::new(),
        clusters: Vec::new(),
    }
}

/// A compiled predicate: label selector AND claim selector, over the fleet's interned strings,
/// AND the CEL expressions if any.
struct Predicate {
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
    fn matches_labels_and_claims(&self, fleet: &Fleet, idx: u32) -> bool {
        self.labels.matches(&fleet.labels, idx) && self.claims.matches(&fleet.claims, idx)
    }

    /// The whole predicate; CEL last, as it is the expensive part.
    fn matches(&self, fleet: &Fleet, idx: u32, cel: &mut CelInputs<'_>) -> bool {
        self.matches_labels_and_claims(fleet, idx)
            && self.cel.as_ref().is_none_or(|c| cel.matches(c, idx))
    }
}

/// The CEL inputs of each cluster, built once per run on first need.
struct CelInputs<'f> {
    fleet: &'f Fleet,
    /// The AddOnPlacementScores any predicate's `scores(..)` reads.
    scores: ScoreUse,
    built: HashMap<u32, (cel::Value, Arc<BTreeMap<String, cel::Value>>)>,
}

impl<'f> CelInputs<'f> {
    fn new(fleet: &'f Fleet, predicates: &[Predicate]) -> Self {
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

fn misconfigured(p: &Placement, errors: Vec<FieldError>) -> ScheduleError {
    ScheduleError::Misconfigured {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        errors,
    }
}

/// Compiles selectors; validation has already accepted them, so failure is only defensive.
fn compile_all(
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

fn min_time(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Sort key: tier (penalised last), total descending, name ascending — all in one integer.
fn sort_key(penalized: bool, total: i64, name_rank: u32) -> u128 {
    let ascending = (total as u64) ^ (1 << 63);
    let descending = !ascending;
    (u128::from(penalized) << 96) | (u128::from(descending) << 32) | u128::from(name_rank)
}

fn taint_text(c: &Cluster, i: usize) -> String {
    let t = &c.taints[i];
    format!("{}={}:{}", t.key, t.value, t.effect.as_str())
}

const NOT_FEASIBLE: u32 = u32::MAX;

fn run(
    fleet: &Fleet,
    input: &PlacementInput<'_>,
    explain: bool,
) -> Result<(Schedule, Option<ScheduleDebug>), ScheduleError> {
    let p = input.placement;
    let errors = validate(p);
    if !errors.is_empty() {
        return Err(misconfigured(p, errors));
    }
    let now = input.now;
    let clusters = fleet.clusters();

    // Step 1: eligible sets and their members.
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
    let members: Cow<'_, [u32]> = match positions.as_slice() {
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

    let predicate_selectors: Vec<&ClusterSelector> = p
        .predicates
        .iter()
        .map(|pr| &pr.required_cluster_selector)
        .collect();
    let predicates = compile_all(fleet, p, &predicate_selectors, "spec.predicates")?;
    let mut cel_inputs = CelInputs::new(fleet, &predicates);

    // Step 2: filters.
    let mut debug: Vec<ClusterDebug> = Vec::new();
    // Cluster index → position in `debug` (explain only).
    let mut debug_at: HashMap<u32, usize> = HashMap::new();
    let mut feasible: Vec<u32> = Vec::with_capacity(members.len());
    let mut penalized: Vec<bool> = Vec::with_capacity(members.len());
    let mut toleration_expires_at: Option<SystemTime> = None;
    let mut candidates = 0usize;
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
            candidates += 1;
            if !predicates.is_empty()
                && !predicates
                    .iter()
                    .any(|pr| pr.matches(fleet, idx, &mut cel_inputs))
            {
                let why =
                    explain.then(|| predicate_failure(fleet, &predicates, idx, &mut cel_inputs));
                record(&mut entry, Filter::Predicates, false, why);
                break 'verdict None;
            }
            record(&mut entry, Filter::Predicates, true, None);
            if !fleet.tainted[i] {
                record(&mut entry, Filter::TaintToleration, true, None);
                break 'verdict Some((false, None));
            }
            let c = &clusters[i];
            match check_taints(&c.taints, &p.tolerations, decided[i], now) {
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
            feasible.push(idx);
            penalized.push(pen);
            toleration_expires_at = min_time(toleration_expires_at, until);
        }
        if let Some(mut e) = entry {
            e.prefer_no_select_penalty = verdict.is_some_and(|(pen, _)| pen);
            debug_at.insert(idx, debug.len());
            debug.push(e);
        }
    }
    // Cluster index → position in `feasible`.
    let mut position = vec![NOT_FEASIBLE; clusters.len()];
    for (k, &idx) in feasible.iter().enumerate() {
        position[idx as usize] = k as u32;
    }

    // Steps 3–4: weights and scores.
    let weights = effective_weights(&p.prioritizer_policy);
    let mut totals = vec![0i64; feasible.len()];
    let mut columns: Vec<Vec<i64>> = Vec::new();
    let mut score_expires_at: Option<SystemTime> = None;
    let mut column = vec![0i64; feasible.len()];
    for w in &weights {
        match &w.prioritizer {
            Prioritizer::BuiltIn(BuiltIn::Balance) => {
                let counts: Vec<u32> = match input.other_decision_counts {
                    Some(m) if !m.is_empty() => feasible
                        .iter()
                        .map(|&i| {
                            let n = m
                                .get(clusters[i as usize].name.as_str())
                                .copied()
                                .unwrap_or(0);
                            let own =
                                u32::from(input.counts_include_current && decided[i as usize]);
                            n.saturating_sub(own)
                        })
                        .collect(),
                    _ => vec![0; feasible.len()],
                };
                let max = input.other_decision_counts.map_or(0, |m| {
                    balance_max_count(
                        m,
                        input.current_decisions.into_iter().flatten(),
                        input.counts_include_current,
                    )
                });
                for (s, &c) in column.iter_mut().zip(&counts) {
                    *s = balance_score(c, max);
                }
            }
            Prioritizer::BuiltIn(BuiltIn::Steady) => {
                for (s, &i) in column.iter_mut().zip(&feasible) {
                    *s = steady_score(decided[i as usize]);
                }
            }
            Prioritizer::BuiltIn(
                b @ (BuiltIn::ResourceAllocatableCPU | BuiltIn::ResourceAllocatableMemory),
            ) => {
                let values = if *b == BuiltIn::ResourceAllocatableCPU {
                    &fleet.cpu
                } else {
                    &fleet.memory
                };
                let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
                for &i in &feasible {
                    if let Some(v) = values[i as usize] {
                        min = min.min(v);
                        max = max.max(v);
                    }
                }
                for (s, &i) in column.iter_mut().zip(&feasible) {
                    *s = resource_score(values[i as usize], min, max);
                }
            }
            Prioritizer::AddOn(a) => {
                column.fill(0);
                for v in fleet.score_values(&a.resource_name, &a.score_name) {
                    let k = position[v.cluster as usize];
                    if k != NOT_FEASIBLE && v.valid_until.is_none_or(|t| now < t) {
                        column[k as usize] = clamp_score(v.value);
                        score_expires_at = min_time(score_expires_at, v.valid_until);
                    }
                }
            }
        }
        let weight = i64::from(w.weight);
        for (t, s) in totals.iter_mut().zip(&column) {
            *t += weight * s;
        }
        if explain {
            columns.push(column.clone());
        }
    }

    // Step 5: order and select.
    let target = p
        .number_of_clusters
        .map_or(feasible.len(), |n| usize::try_from(n).unwrap_or(0))
        .min(feasible.len());
    let mut keys: Vec<u128> = feasible
        .iter()
        .zip(&penalized)
        .zip(&totals)
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
    let spread_excluded = target - selected.len();

    // Step 6: recorded scores (`scoreRateLimit`), then groups and pages from the selection in
    // `sortBy` order.
    let mut by_rank: Vec<u32> = selected
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
                totals[position[i as usize] as usize],
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
        now,
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
    let eligible_names: Vec<&str> = eligible.sets.iter().map(|s| s.name.as_str()).collect();
    let satisfied = satisfied_condition(&Outcome {
        spec_cluster_sets: &p.cluster_sets,
        eligible_sets: &eligible_names,
        valid_bindings: eligible.valid_bindings,
        candidates,
        feasible: feasible.len(),
        selected: selected.len(),
        requested: p.number_of_clusters,
        spread_excluded,
    });
    let status = PlacementStatus {
        number_of_selected_clusters: u32::try_from(selected.len()).unwrap_or(u32::MAX),
        decision_groups: decisions.groups,
        conditions: vec![satisfied, Condition::well_configured()],
        last_score_update: recorded.last_update,
    };
    let schedule = Schedule {
        pages: decisions.pages,
        status,
        requeue_at: min_time(
            min_time(toleration_expires_at, score_expires_at),
            recorded.requeue_at,
        ),
        toleration_expires_at,
    };

    if !explain {
        return Ok((schedule, None));
    }
    let is_selected: BTreeSet<u32> = selected.iter().copied().collect();
    for (rank, &idx) in ranked.iter().enumerate() {
        let Some(e) = debug_at.get(&idx).map(|&at| &mut debug[at]) else {
            continue;
        };
        let k = position[idx as usize] as usize;
        e.scores = weights
            .iter()
            .zip(&columns)
            .map(|(w, col)| ScoreDetail {
                prioritizer: w.prioritizer.to_string(),
                weight: w.weight,
                score: col[k],
            })
            .collect();
        e.total = Some(totals[k]);
        e.rank = Some(u32::try_from(rank).unwrap_or(u32::MAX));
        e.selected = is_selected.contains(&idx);
        if !e.selected {
            e.not_selected_reason = Some(match spread_reasons.get(rank).cloned().flatten() {
                Some(SpreadReason::MissingKey(j)) => format!(
                    "missing topology key {:?} of spread constraint {j} (DoNotSchedule)",
                    constraints[j].topology_key
                ),
                Some(SpreadReason::Skew(j, value)) => format!(
                    "selecting it would exceed maxSkew {} in domain {}={} (spread constraint {j})",
                    constraints[j].max_skew,
                    constraints[j].topology_key,
                    fleet.strings.name(value)
                ),
                Some(SpreadReason::NotNeeded) | None => match p.number_of_clusters {
                    Some(n) => format!("rank {rank} is beyond numberOfClusters {n}"),
                    None => "not selected".to_owned(),
                },
            });
        }
    }
    debug.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok((
        schedule,
        Some(ScheduleDebug {
            eligible_sets: eligible_names.iter().map(|s| (*s).to_owned()).collect(),
            prioritizers: weights.clone(),
            clusters: debug,
        }),
    ))
}

fn predicate_failure(
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

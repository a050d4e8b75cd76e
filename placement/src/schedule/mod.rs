//! The scheduler: one placement against a [`Fleet`], steps 1–7 of the OCM algorithm, each a
//! stage of its own (`candidates`, `filter`, `scores`, `select`, `decide`) returning a typed
//! result to the next; [`Fleet::explain`] passes them a sink (`explain`) to record into.
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

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use crate::debug::ScheduleDebug;
use crate::error::{ErrorKind, FieldError};
use crate::fleet::Fleet;
use crate::groups::PlacementDecision;
use crate::placement::{ClusterSelector, Placement};
use crate::status::{Condition, ConditionType, PlacementStatus, Reason};
use crate::validate::validate;

mod candidates;
mod decide;
mod explain;
mod filter;
mod predicate;
mod scores;
mod select;

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

fn min_time(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn misconfigured(p: &Placement, errors: Vec<FieldError>) -> ScheduleError {
    ScheduleError::Misconfigured {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        errors,
    }
}

/// The steps, each a stage of its own; the explanation is a sink the stages record into only
/// when one is asked for.
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
    let mut sink = explain.then(explain::Explain::default);
    let candidates = candidates::candidates(fleet, input);
    let selectors: Vec<&ClusterSelector> = p
        .predicates
        .iter()
        .map(|pr| &pr.required_cluster_selector)
        .collect();
    let predicates = predicate::compile_all(fleet, p, &selectors, "spec.predicates")?;
    let feasible = filter::filter(fleet, input, &candidates, &predicates, sink.as_mut());
    let scores = scores::score(fleet, input, &candidates.decided, &feasible, sink.as_mut());
    let selection = select::select(fleet, p, &feasible, &scores, explain);
    let schedule = decide::decide(fleet, input, &candidates, &feasible, &scores, &selection)?;
    let debug = sink.map(|s| s.finish(fleet, p, &candidates, &feasible, &scores, &selection));
    Ok((schedule, debug))
}

//! Flotilla's placement scheduler: OCM's Placement → PlacementDecision algorithm as pure,
//! deterministic Rust over plain input types. No I/O, no clock: time is a parameter.
//!
//! The hub converts its API objects into these types, builds a [`Fleet`] (clusters, sets,
//! bindings, AddOn scores) and keeps it up to date with [`Fleet::upsert_cluster`] and friends,
//! calls [`Fleet::schedule`] per placement — only for placements a change can affect
//! ([`ChangeFilter`]) — writes the returned PlacementDecision pages and status, and sets a timer
//! at [`Schedule::requeue_at`].
//!
//! ```
//! use std::time::SystemTime;
//! use flotilla_placement::*;
//!
//! let fleet = Fleet::new(
//!     vec![Cluster::new("c1").in_set("prod").label("purpose", "test")],
//!     vec![ManagedClusterSet::exclusive("prod")],
//!     vec![ManagedClusterSetBinding::new("default", "prod")],
//!     vec![],
//! );
//! let placement = Placement::new("default", "placement1")
//!     .predicate(parse_selector("purpose=test").unwrap(), LabelSelector::everything());
//! let result = fleet.schedule(&PlacementInput::new(&placement, SystemTime::now())).unwrap();
//! assert_eq!(result.selected().collect::<Vec<_>>(), ["c1"]);
//! assert_eq!(result.pages[0].name, "placement1-decision-1");
//! ```
//!
//! Where Flotilla deliberately differs from OCM (each explained in its module):
//!
//! - `PreferNoSelect` taints rank a cluster after every cluster without one ([`schedule`]);
//!   OCM ignores them.
//! - `spreadPolicy` is implemented ([`spread`]); OCM only defines it.
//! - A misconfigured spec leaves the existing decisions alone ([`ScheduleError`]); OCM empties
//!   them.
//! - A negative `numberOfClusters` is misconfigured ([`validate`](mod@validate)); OCM's CRD accepts
//!   it and its scheduler then fails on every run.
//! - When several tolerations match a taint, the longest-holding one counts ([`taint`]).
//! - AddOn scores are clamped to [-100, 100] and stale from `validUntil` on ([`score`]), and
//!   [`Schedule::requeue_at`] includes their expiry.
//! - `sortBy` and `scoreRateLimit` (OCM api 2026) are defined by OCM's API only; its controller
//!   does not implement them yet. How Flotilla reads them is stated in `rate_limit` and
//!   [`groups`]; with `sortBy: Score` decision groups are cut from the score order.
//!
//! Modules, in the order the algorithm uses them:
//!
//! - [`error`], [`labels`]: field errors and well-known label keys (leaf modules).
//! - [`selector`]: label selectors — matching, validation, the `a=b,c in (d)` string form.
//! - [`cel`]: CEL selectors (`celSelector.celExpressions`), compiled once per spec.
//! - [`quantity`]: Kubernetes quantities (`500m`, `16Gi`) → `f64`.
//! - [`pairs`]: a cluster's labels or claims as one sorted slice of shared strings, and the
//!   [`Labels`] trait selectors read (also implemented by `BTreeMap<String, String>`).
//! - [`cluster`]: the scheduler's view of a ManagedCluster (labels, claims, taints, allocatable).
//! - [`clusterset`]: ManagedClusterSets, bindings, and which sets a placement may use.
//! - [`placement`]: the Placement spec.
//! - [`validate`](mod@validate): spec validation with field paths; rejection vs `PlacementMisconfigured`.
//! - [`fleet`]: the indexed inputs shared by many scheduling runs (labels and claims interned
//!   by the private `index` module).
//! - [`taint`]: taints and tolerations, with expiry.
//! - [`score`]: prioritizer weights and the Balance, Steady, resource and AddOn scores.
//! - [`spread`]: spread constraints (maxSkew over topology domains).
//! - `rate_limit`: which scores the decisions record under `scoreRateLimit`.
//! - [`groups`]: decision groups and PlacementDecision pages, in `sortBy` order.
//! - [`status`]: conditions and reasons.
//! - [`schedule`]: the algorithm end to end; [`debug`]: why each cluster was or was not picked.
//! - [`change`]: decision diffs and which placements a cluster change can affect.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cel;
pub mod change;
pub mod cluster;
pub mod clusterset;
pub mod debug;
pub mod error;
pub mod fleet;
pub mod groups;
mod index;
pub mod labels;
pub mod pairs;
pub mod placement;
pub mod quantity;
mod rate_limit;
pub mod schedule;
pub mod score;
pub mod selector;
pub mod spread;
pub mod status;
pub mod taint;
pub mod validate;

#[cfg(test)]
mod tests;

pub use change::{ChangeFilter, DecisionDiff, decisions_changed, placement_may_be_affected};
pub use cluster::{Allocatable, Cluster, Taint, TaintEffect};
pub use clusterset::{
    ClusterSetSelector, DEFAULT_SET, EligibleSets, GLOBAL_SET, ManagedClusterSet,
    ManagedClusterSetBinding, eligible_cluster_sets,
};
pub use debug::{ClusterDebug, Filter, FilterResult, ScheduleDebug, ScoreDetail};
pub use error::{ErrorKind, FieldError};
pub use fleet::Fleet;
pub use groups::{
    ClusterDecision, DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, DecisionGroupStatus,
    Decisions, GroupSize, MAX_DECISIONS_PER_PAGE, PLACEMENT_LABEL, PlacementDecision,
    group_decisions,
};
pub use labels::CLUSTERSET_LABEL;
pub use pairs::{Labels, Pairs, Text};
pub use placement::{
    AddOnScoreRef, ClusterPredicate, ClusterSelector, DEFAULT_SCORE_RATE_LIMIT, DecisionGroup,
    DecisionStrategy, GroupStrategy, IntOrString, Placement, PrioritizerConfig, PrioritizerMode,
    PrioritizerPolicy, ScoreCoordinate, ScoreCoordinateType, SortBy, SpreadConstraint,
    SpreadPolicy, Toleration, TolerationOperator, TopologyKeyType, WhenUnsatisfiable,
    parse_score_rate_limit,
};
pub use quantity::{QuantityError, parse_quantity};
pub use schedule::{PlacementInput, Schedule, ScheduleError};
pub use score::{AddOnPlacementScore, BuiltIn, Prioritizer, Weighted, effective_weights};
pub use selector::{
    CompiledSelector, LabelSelector, Operator, ParseSelectorError, Requirement, SelectorError,
    parse_selector,
};
pub use status::{Condition, ConditionStatus, ConditionType, PlacementStatus, Reason};
pub use taint::{TaintCheck, check_taints};
pub use validate::validate;

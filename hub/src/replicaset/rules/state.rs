//! Rancher Fleet's deployment states of the clusters a replica set decided (pure; design
//! docs/notes/issue-50-design.md §5.4), from each cluster's work against the set's template —
//! the first that holds:
//!
//! | State | When |
//! |---|---|
//! | `Pending` | no work yet |
//! | `OutOfSync` | its work is of an earlier template: not started yet (its turn, a pause) |
//! | `ErrApplied` | `Degraded` True or `Applied` False at the work's generation |
//! | `WaitApplied` | not `Applied` at its generation yet |
//! | `NotReady` | applied, not `Available` |
//! | `Modified` | changed on the cluster and put back: within the agent's drift window (`Repaired`), or while someone keeps changing it (`Contested`) |
//! | `Ready` | otherwise |
//!
//! Fleet ranks them ErrApplied, WaitApplied, Modified, OutOfSync, Pending, NotReady, Ready (its
//! `StateRank`); a GitRepo shows the highest present.

use super::{COMMIT_ANNOTATION, WorkView};
use flotilla_api::meta::status;
use flotilla_api::v1::{ClusterStates, Condition, ManifestWork};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE, DEGRADED};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use flotilla_api::work::conditions::{CONTESTED, REPAIRED};

/// One cluster's state, ordered by Fleet's rank (the last is the worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Applied and available at the current template.
    Ready,
    /// Applied, not available.
    NotReady,
    /// Decided, no work yet.
    Pending,
    /// Its work is of an earlier template.
    OutOfSync,
    /// Put back after changes on the cluster, lately or repeatedly.
    Modified,
    /// Being applied.
    WaitApplied,
    /// The apply failed.
    ErrApplied,
}

impl State {
    /// Every state, best first.
    pub const ALL: [State; 7] = [
        State::Ready,
        State::NotReady,
        State::Pending,
        State::OutOfSync,
        State::Modified,
        State::WaitApplied,
        State::ErrApplied,
    ];

    /// Fleet's name.
    pub const fn name(self) -> &'static str {
        match self {
            State::Ready => "Ready",
            State::NotReady => "NotReady",
            State::Pending => "Pending",
            State::OutOfSync => "OutOfSync",
            State::Modified => "Modified",
            State::WaitApplied => "WaitApplied",
            State::ErrApplied => "ErrApplied",
        }
    }

    /// Its count in `counts`.
    pub fn of(self, counts: &ClusterStates) -> i32 {
        let mut c = *counts;
        *self.slot(&mut c)
    }

    fn slot(self, counts: &mut ClusterStates) -> &mut i32 {
        match self {
            State::Ready => &mut counts.ready,
            State::NotReady => &mut counts.not_ready,
            State::Pending => &mut counts.pending,
            State::OutOfSync => &mut counts.out_of_sync,
            State::Modified => &mut counts.modified,
            State::WaitApplied => &mut counts.wait_applied,
            State::ErrApplied => &mut counts.err_applied,
        }
    }
}

/// The state of a decided cluster whose work is `work` (`None`: none yet), against the
/// template with `hash`, and why it is not Ready (empty when it is). The why quotes the
/// spoke's condition messages, cut to 4 KiB: a spoke's report is not trusted to be short.
pub fn state(work: Option<&ManifestWork>, hash: &str) -> (State, String) {
    let (state, why) = state_of(work, hash);
    let why = match flotilla_api::policy::history::cut(&why) {
        std::borrow::Cow::Borrowed(_) => why,
        std::borrow::Cow::Owned(cut) => cut,
    };
    (state, why)
}

/// [`state`] without the why, of a work as the rules read it (its manifests' statuses, which
/// only the why of `ErrApplied` quotes, are not needed).
pub fn of(work: Option<WorkView<'_>>, hash: &str) -> State {
    judge(work, hash).0
}

fn state_of(work: Option<&ManifestWork>, hash: &str) -> (State, String) {
    let (state, said) = judge(work.map(WorkView::from), hash);
    let message = || said.map(|c| c.message.clone());
    let why = match state {
        State::Pending => "no work yet: waiting for its turn".into(),
        State::OutOfSync => {
            "runs an earlier template: not started yet (waiting for its turn, or paused)".into()
        }
        // The work's condition only counts its manifests; the first that failed says why.
        State::ErrApplied => work
            .and_then(failed_manifest)
            .or_else(message)
            .unwrap_or_default(),
        State::WaitApplied => "being applied".into(),
        State::NotReady => message()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "not available yet".into()),
        State::Modified => message().unwrap_or_default(),
        State::Ready => String::new(),
    };
    (state, why)
}

/// The state of `work` against `hash`, with the condition whose message says why (when one
/// does).
fn judge<'a>(work: Option<WorkView<'a>>, hash: &str) -> (State, Option<&'a Condition>) {
    let Some(w) = work else {
        return (State::Pending, None);
    };
    if w.template_hash() != Some(hash) {
        return (State::OutOfSync, None);
    }
    let generation = w.generation();
    let at = |c: &&Condition| c.observed_generation >= generation;
    let is = |t: &str, s: &str| w.condition(t).filter(at).filter(|c| c.status == s);
    if let Some(c) = is(APPLIED, status::FALSE).or_else(|| is(DEGRADED, status::TRUE)) {
        return (State::ErrApplied, Some(c));
    }
    if is(APPLIED, status::TRUE).is_none() {
        return (State::WaitApplied, None);
    }
    if is(AVAILABLE, status::TRUE).is_none() {
        return (State::NotReady, w.condition(AVAILABLE));
    }
    // A fight says more than one repair; either is Modified.
    let modified = |t: &str| w.condition(t).filter(|c| c.status == status::TRUE);
    if let Some(c) = modified(CONTESTED).or_else(|| modified(REPAIRED)) {
        return (State::Modified, Some(c));
    }
    (State::Ready, None)
}

/// `manifest 0 (v1 ConfigMap default/web): <the agent's message>` of the first manifest whose
/// `Applied` is False, or failed on the cluster (`Degraded`).
fn failed_manifest(w: &ManifestWork) -> Option<String> {
    let manifests = &w.status.as_ref()?.resource_status.as_ref()?.manifests;
    let failed = |m: &&flotilla_api::v1::ManifestCondition| {
        let c = |t: &str, s: &str| m.conditions.iter().any(|c| c.r#type == t && c.status == s);
        c(APPLIED, status::FALSE) || c(DEGRADED, status::TRUE)
    };
    let m = manifests.iter().find(failed)?;
    let message = m
        .conditions
        .iter()
        .filter(|c| !c.message.is_empty())
        .find(|c| c.status == status::FALSE && (c.r#type == APPLIED || c.r#type == AVAILABLE))
        .map_or("", |c| c.message.as_str());
    let r = m.resource_meta.clone().unwrap_or_default();
    let api = if r.group.is_empty() {
        r.version
    } else {
        format!("{}/{}", r.group, r.version)
    };
    let name = if r.namespace.is_empty() {
        r.name
    } else {
        format!("{}/{}", r.namespace, r.name)
    };
    Some(format!(
        "manifest {} ({api} {} {name}): {message}",
        r.ordinal, r.kind
    ))
}

/// The counts of `states`.
pub fn count(states: impl IntoIterator<Item = State>) -> ClusterStates {
    let mut out = ClusterStates::default();
    for s in states {
        *s.slot(&mut out) += 1;
    }
    out
}

/// `a` + `b`.
pub fn sum(a: &ClusterStates, b: &ClusterStates) -> ClusterStates {
    let mut out = *a;
    for s in State::ALL {
        *s.slot(&mut out) += s.of(b);
    }
    out
}

/// The clusters counted in `counts`.
pub fn total(counts: &ClusterStates) -> i32 {
    State::ALL.iter().map(|s| s.of(counts)).sum()
}

/// The highest-ranked state counted (Fleet's display state); `None` when nothing is.
pub fn worst(counts: &ClusterStates) -> Option<State> {
    State::ALL.into_iter().rev().find(|s| s.of(counts) > 0)
}

/// One decided cluster: its name, state, the commit its work carries and why it is not Ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The cluster.
    pub cluster: String,
    /// Its state.
    pub state: State,
    /// The commit its work carries (a GitRepo's bundle; "" when none).
    pub commit: String,
    /// Why it is not Ready.
    pub message: String,
}

/// The rows of the clusters `decided` (each once, in order), their works in `works`.
pub fn rows(
    decided: &[String],
    works: &BTreeMap<String, Arc<ManifestWork>>,
    hash: &str,
) -> Vec<Row> {
    rows_by(decided, works, |_| Some(hash.to_owned()))
}

/// [`rows`] with each cluster's own template hash (per-target variants); a cluster whose hash is
/// `None` gets no work by design and has no row.
pub fn rows_by(
    decided: &[String],
    works: &BTreeMap<String, Arc<ManifestWork>>,
    hash: impl Fn(&str) -> Option<String>,
) -> Vec<Row> {
    let mut seen = std::collections::BTreeSet::new();
    decided
        .iter()
        .filter(|c| seen.insert(c.as_str()))
        .filter_map(|c| {
            let work = works.get(c).map(|w| &**w);
            let (state, message) = state(work, &hash(c)?);
            let commit = work
                .and_then(|w| w.metadata.as_ref())
                .and_then(|m| m.annotations.get(COMMIT_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            Some(Row {
                cluster: c.clone(),
                state,
                commit,
                message,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;

//! An installation's agent works (`addon-<name>-deploy-0`, `-1`, …): where they stand together in
//! the rollout of the add-on's configs, and how a cluster goes from the works it has to the ones
//! just rendered.
//!
//! The split is greedy in manifest order (`flotilla_api::addon::render`), so an upgrade may move
//! a manifest from one work to another. The agent deletes a resource when the last work
//! declaring it lets it go, so a move is a hand-over: the work that gives a manifest away (or a
//! trailing work that goes) waits until the work taking it over is applied at its generation;
//! until then the resource is declared by both. The first work is applied last: once it carries
//! the target hashes, every work of the render was applied.

use super::{Hashes, released};
use flotilla_api::addon;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::ManifestWork;
use flotilla_api::work::ManifestId;
use flotilla_rollout::Status;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

/// The agent works of add-on `addon` among a cluster's `works`, by index.
pub fn deploy_works(
    addon: &str,
    works: impl IntoIterator<Item = Arc<ManifestWork>>,
) -> Vec<Arc<ManifestWork>> {
    let mut found: Vec<(usize, Arc<ManifestWork>)> = works
        .into_iter()
        .filter_map(|w| Some((addon::work_index(addon, name_ref(&w))?, w)))
        .collect();
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().map(|(_, w)| w).collect()
}

/// Where an installation stands in the rollout of `target` (the hashes its configs have now),
/// over all its works: `ToApply` while none carries the target hashes; once some do, `Failed`
/// when one of those failed, `Succeeded` when every work carries them and succeeded (since the
/// last one did), `Progressing` otherwise — a render still being applied, a manifest being
/// handed over, a trailing work not gone yet.
pub fn rollout_status(works: &[&ManifestWork], target: &Hashes) -> (Status, Option<SystemTime>) {
    let at_target: Vec<(Status, Option<SystemTime>)> = works
        .iter()
        .copied()
        .filter(|w| carries(w, target))
        .map(crate::replicaset::rules::progress)
        .collect();
    if at_target.is_empty() {
        return (Status::ToApply, None);
    }
    let since = |s: Status| {
        at_target
            .iter()
            .filter(move |(x, _)| *x == s)
            .map(|(_, t)| *t)
    };
    if at_target.iter().any(|(s, _)| *s == Status::Failed) {
        return (Status::Failed, since(Status::Failed).flatten().min());
    }
    let all = at_target.len() == works.len();
    if all && at_target.iter().all(|(s, _)| *s == Status::Succeeded) {
        return (Status::Succeeded, since(Status::Succeeded).flatten().max());
    }
    let started = at_target.iter().filter_map(|(_, t)| *t).min();
    (Status::Progressing, started)
}

/// Whether an installation was started at `target` and is not done moving to it: some of its
/// works carry the target hashes, others do not (the hub carries on with it whatever the
/// rollout decides).
pub fn unfinished(works: &[&ManifestWork], target: &Hashes) -> bool {
    let at = works.iter().filter(|w| carries(w, target)).count();
    at > 0 && at < works.len()
}

/// Whether a work was rendered from `target`.
fn carries(w: &ManifestWork, target: &Hashes) -> bool {
    released(Some(w)).as_ref() == Some(target)
}

/// How a cluster goes from its `current` agent works to the `desired` ones this round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sync {
    /// Indexes into `desired` to apply now, in this order (the highest index first).
    pub apply: Vec<usize>,
    /// Names of current works to delete now (trailing works the render no longer has).
    pub delete: Vec<String>,
    /// Some apply or delete waits for a work taking over its manifests to be applied.
    pub held: bool,
}

/// The moves of this round (see the module documentation). A desired work that is already on
/// the cluster as rendered is left alone; one whose current version gives manifests away to
/// another desired work, and a trailing work whose manifests another desired work declares, wait
/// until that work is applied at its generation. When everything waits and nothing is on its way
/// (works handing manifests to each other: a template that swapped two manifests between works),
/// the applies go ahead: the resources may then be re-created once.
pub fn sync(desired: &[ManifestWork], current: &[&ManifestWork]) -> Sync {
    let by_name: BTreeMap<&str, &ManifestWork> =
        current.iter().map(|w| (name_ref(w), *w)).collect();
    let hand_over = HandOver {
        desired,
        ids: desired.iter().map(ids_of).collect(),
        current: &by_name,
    };
    let mut plan = Sync::default();
    let mut held = Vec::new();
    let mut pending = false;
    for (i, d) in desired.iter().enumerate().rev() {
        let receivers = match by_name.get(name_ref(d)) {
            Some(c) if deleting(c) => {
                // Applied again once the agent confirmed the deletion.
                (plan.held, pending) = (true, true);
                continue;
            }
            Some(c) if same(d, c) => continue,
            Some(c) => {
                let given = ids_of(c).difference(&hand_over.ids[i]).cloned().collect();
                hand_over.receivers(&given, Some(i))
            }
            None => Receivers::Ready,
        };
        match receivers {
            Receivers::Ready => plan.apply.push(i),
            Receivers::Pending => {
                held.push(i);
                pending = true;
            }
            Receivers::Blocked => held.push(i),
        }
    }
    let wanted: HashSet<&str> = desired.iter().map(name_ref).collect();
    for (name, c) in by_name.iter().rev() {
        if wanted.contains(name) || deleting(c) {
            continue;
        }
        match hand_over.receivers(&ids_of(c), None) {
            Receivers::Ready => plan.delete.push(name.to_string()),
            Receivers::Pending => (plan.held, pending) = (true, true),
            Receivers::Blocked => plan.held = true,
        }
    }
    if !held.is_empty() {
        if plan.apply.is_empty() && plan.delete.is_empty() && !pending {
            plan.apply = held;
        } else {
            plan.held = true;
        }
    }
    plan
}

/// The desired works that take over manifests given away, and where they stand.
struct HandOver<'a> {
    desired: &'a [ManifestWork],
    ids: Vec<HashSet<ManifestId>>,
    current: &'a BTreeMap<&'a str, &'a ManifestWork>,
}

/// Where the works taking over some manifests stand.
enum Receivers {
    /// Applied at their generation (or there are none).
    Ready,
    /// On the cluster as rendered, not applied yet: waiting for the agent.
    Pending,
    /// One of them is not on the cluster as rendered yet.
    Blocked,
}

impl HandOver<'_> {
    fn receivers(&self, given: &HashSet<ManifestId>, giver: Option<usize>) -> Receivers {
        let mut verdict = Receivers::Ready;
        for (j, d) in self.desired.iter().enumerate() {
            if Some(j) == giver || self.ids[j].is_disjoint(given) {
                continue;
            }
            match self.current.get(name_ref(d)) {
                Some(c) if same(d, c) && applied(c) => {}
                Some(c) if same(d, c) => verdict = Receivers::Pending,
                _ => return Receivers::Blocked,
            }
        }
        verdict
    }
}

/// Whether the work on the cluster is the one rendered (what the cluster actor compares to
/// leave an apply alone).
fn same(desired: &ManifestWork, current: &ManifestWork) -> bool {
    let (d, c) = (meta_of(desired), meta_of(current));
    desired.spec == current.spec && d.labels == c.labels && d.annotations == c.annotations
}

/// Whether the agent applied the work at its generation.
fn applied(w: &ManifestWork) -> bool {
    let generation = meta_of(w).generation;
    w.status.as_ref().is_some_and(|s| {
        meta::find_condition(&s.conditions, flotilla_api::work::conditions::APPLIED)
            .is_some_and(|c| c.status == status::TRUE && c.observed_generation >= generation)
    })
}

fn deleting(w: &ManifestWork) -> bool {
    meta_of(w).deletion_timestamp.is_some()
}

fn ids_of(w: &ManifestWork) -> HashSet<ManifestId> {
    w.spec
        .iter()
        .flat_map(|s| s.workload.iter().flat_map(|t| t.manifests.iter()))
        .filter_map(id_of)
        .collect()
}

fn id_of(m: &flotilla_api::v1::Manifest) -> Option<ManifestId> {
    flotilla_api::work::read_manifest_id(&m.raw).ok()
}

fn meta_of(w: &ManifestWork) -> &flotilla_api::v1::ObjectMeta {
    static NONE: std::sync::LazyLock<flotilla_api::v1::ObjectMeta> =
        std::sync::LazyLock::new(Default::default);
    w.metadata.as_ref().unwrap_or(&NONE)
}

fn name_ref(w: &ManifestWork) -> &str {
    w.metadata.as_ref().map_or("", |m| m.name.as_str())
}

#[cfg(test)]
mod tests;

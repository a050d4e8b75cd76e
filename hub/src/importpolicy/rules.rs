//! The pure plan of import policies: from the compiled policies, the clusters, the import
//! records and the object sources' latest lists, which records to write or drop, which clusters
//! to create, edit or delete. No I/O; [`super::actor`] carries a [`Plan`] out.
//!
//! Rules:
//! - A cluster without a record is matched against the registration policies: the selector
//!   and the creation condition must both hold. A match makes a record: **created** when the
//!   cluster was pending (the policy imports it), **adopted** when it was already accepted
//!   (a hand-made or admin-accepted cluster: access fields only).
//! - An object source's object that the selector admits names a cluster (`nameTemplate`); when
//!   its references were read and the creation condition holds, a cluster of that name that
//!   does not exist is **created** (ahead of its agent, origin IMPORT) and one that exists is
//!   **adopted**. A name another source or policy holds is an error, never a takeover.
//! - Own (created) clusters carry the template's labels, cluster set, taints and lease; labels
//!   the policy set before and no longer wants are removed, nobody else's. Adopted ones are
//!   only accepted.
//! - Acceptance: never a denied cluster, never one with a second agent key waiting, and in
//!   secure mode only one whose agent key is bound (a policy never binds keys).
//! - An object source absent from **two consecutive complete** lists of its spoke: the cluster
//!   is deleted when the policy created it (record `created` and origin IMPORT — a hand-made
//!   or adopted cluster never is), else only its record goes. A failed list changes nothing;
//!   a list counts once (only the first pass after it, `fresh`, moves the counters).
//! - A record whose cluster or policy is gone is dropped (deleting a policy orphans its
//!   clusters), and so is one whose spoke left the policy's `source.clusters`; a stored
//!   policy that does not compile keeps its records and changes nothing.

use super::compiled::{CompiledPolicy, Template, registration_value};
use super::reason::Reason;
use crate::cluster::rules::{accepted, denied};
use flotilla_api::importpolicy::{
    MAX_STATUS_ERRORS, REGISTRATION_GROUP, REGISTRATIONS, source_kind,
};
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::taints::is_hub_taint;
use flotilla_api::v1::{ImportRecord, ImportSourceRef, ManagedCluster, Taint};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// A source absent from this many consecutive complete lists is gone.
pub const MISSING_LISTS_TO_DELETE: u32 = 2;

mod objects;
#[cfg(test)]
mod tests;

pub use objects::{judge, origin};

/// What a plan is computed from.
pub struct Snapshot<'a> {
    /// The policies that compiled.
    pub policies: &'a [CompiledPolicy],
    /// Every stored policy's name, compiled or not: a policy that no longer compiles (after an
    /// upgrade) keeps its records, it only imports nothing meanwhile.
    pub stored: &'a BTreeSet<String>,
    /// Every cluster.
    pub clusters: &'a [Arc<ManagedCluster>],
    /// The records, by cluster.
    pub records: &'a BTreeMap<String, ImportRecord>,
    /// Secure mode: acceptance needs a bound agent key.
    pub secure: bool,
    /// Object sources: the latest list of each spoke, by policy then spoke (none yet: the
    /// spoke was not polled since the policy changed or the hub started).
    pub lists: &'a BTreeMap<String, BTreeMap<String, Listing>>,
    /// Clusters each object-source policy may create in this pass (its creation rate's tokens;
    /// a policy not named creates none).
    pub budget: &'a BTreeMap<String, usize>,
    /// Live clusters one policy may have created and hold, at most (`--import-max-clusters`).
    pub max_created: usize,
}

/// One spoke's latest list of a policy's source: the objects as judged when listed (the plan
/// reads only these), or, in [`source`](super::source) before judging, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing<T = Judged> {
    /// Not seen by a plan yet: absences count only once per list.
    pub fresh: bool,
    /// The objects (every object of the kind and versions, checked), or why the list failed.
    pub result: Result<Vec<T>, Reason>,
}

/// A source object as read from its spoke, with the references read for it. Judged at once
/// ([`judge`]) and dropped: the hub keeps no spoke's objects, only what it made of them.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceObject {
    /// Namespace (empty: cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The object.
    pub object: serde_json::Value,
    /// The references by key (empty when the selector does not admit the object), or why one
    /// could not be read.
    pub references: Result<Vec<(String, serde_json::Value)>, Reason>,
}

/// A listed source object as the policy judged it: its identity and the verdict — all the plan
/// needs, a few hundred bytes however large the object and its references were.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// Namespace (empty: cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// What the policy makes of it.
    pub verdict: Verdict,
}

impl Judged {
    /// About how many bytes the hub keeps for it (bounded per list by
    /// [`super::source::MAX_LIST_WEIGHT`]).
    pub fn weight(&self) -> usize {
        fn text<T>(r: &Result<T, Reason>) -> usize {
            r.as_ref().err().map_or(0, |e| e.len())
        }
        let verdict = match &self.verdict {
            Verdict::Skipped => 0,
            Verdict::Failed(e) => e.len(),
            Verdict::Selected(s) => {
                let template = s.template.as_ref().map_or(0, |t| {
                    t.labels
                        .iter()
                        .map(|(k, v)| 48 + k.len() + v.len())
                        .sum::<usize>()
                        + t.taints
                            .iter()
                            .flatten()
                            .map(|t| 64 + t.key.len() + t.value.len() + t.effect.len())
                            .sum::<usize>()
                        + t.cluster_set.as_ref().map_or(0, String::len)
                });
                64 + s.cluster.len() + text(&s.condition) + text(&s.template) + template
            }
        };
        96 + self.namespace.len() + self.name.len() + self.uid.len() + verdict
    }
}

/// What a policy makes of one source object.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The selector does not admit it.
    Skipped,
    /// It could not be judged (the selector, the name template or a reference failed): why.
    Failed(Reason),
    /// It names a cluster.
    Selected(Box<Selected>),
}

/// A selected object's cluster, creation condition and template.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// The cluster it names (`nameTemplate`).
    pub cluster: String,
    /// Whether the creation condition holds, or why it could not be evaluated.
    pub condition: Result<bool, Reason>,
    /// The template for its cluster, or why it could not be evaluated.
    pub template: Result<Template, Reason>,
}

/// One cluster's change, one write: created, or labelled, tainted, leased and accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit {
    /// The cluster.
    pub cluster: String,
    /// Labels to set.
    pub set_labels: HashMap<String, String>,
    /// Label keys to remove.
    pub remove_labels: Vec<String>,
    /// Accept it.
    pub accept: bool,
    /// Create it ahead of its agent (an object source's new cluster).
    pub create: bool,
    /// The template's taints replace the cluster's admin taints.
    pub taints: Option<Vec<Taint>>,
    /// The template's lease duration.
    pub lease_seconds: Option<i32>,
}

impl Edit {
    fn is_noop(&self) -> bool {
        *self
            == Edit {
                cluster: self.cluster.clone(),
                ..Default::default()
            }
    }
}

/// A policy's counts and errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Clusters it imported.
    pub imported: i32,
    /// Clusters it adopted.
    pub adopted: i32,
    /// Clusters whose acceptance waits for their agent key.
    pub waiting: i32,
    /// Evaluation errors (at most [`MAX_STATUS_ERRORS`]).
    pub errors: Vec<String>,
    /// An object source: whether it has [`Tally::unlisted`] and [`Tally::sources`].
    pub object_source: bool,
    /// Objects in the spokes' last complete lists.
    pub sources: i32,
    /// Spokes whose last list failed (or was not made yet), with why.
    pub unlisted: Vec<(String, String)>,
    /// Clusters not created in this pass for the creation rate (created in the next ones).
    pub deferred: i32,
    /// Clusters not created because the policy holds [`Snapshot::max_created`].
    pub over_cap: i32,
}

impl Tally {
    /// Keeps an error, up to [`MAX_STATUS_ERRORS`].
    /// Each is cut to [`super::reason::MAX_ERROR_LEN`] bytes: CEL errors print the values
    /// they failed on, which a spoke chooses.
    pub fn error(&mut self, e: String) {
        if self.errors.len() < MAX_STATUS_ERRORS {
            self.errors.push(super::reason::cut(e));
        }
    }
}

/// What to do.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Records to write (before the cluster's edit: a crash re-applies).
    pub records_put: Vec<(String, ImportRecord)>,
    /// Records to drop.
    pub records_delete: Vec<String>,
    /// Cluster edits (and creations).
    pub edits: Vec<Edit>,
    /// Clusters to delete (their records go once they are gone).
    pub deletes: Vec<String>,
    /// Per policy.
    pub statuses: BTreeMap<String, Tally>,
    /// Clusters each object-source policy creates in this plan (spent from its budget).
    pub created: BTreeMap<String, usize>,
}

/// The plan.
pub fn plan(s: &Snapshot) -> Plan {
    let mut plan = Plan {
        statuses: s
            .policies
            .iter()
            .map(|p| {
                let tally = Tally {
                    object_source: p.is_object_source(),
                    ..Default::default()
                };
                (p.name.clone(), tally)
            })
            .collect(),
        ..Default::default()
    };
    let policy = |name: &str| s.policies.iter().find(|p| p.name == name);
    let live: HashMap<&str, &ManagedCluster> = s
        .clusters
        .iter()
        .map(|c| (crate::inventory::name(c), c.as_ref()))
        .collect();
    for (cluster, r) in s.records {
        if !live.contains_key(cluster.as_str()) || !s.stored.contains(&r.policy) {
            plan.records_delete.push(cluster.clone());
        }
    }
    for c in s.clusters.iter().filter(|c| !deleting(c)) {
        let name = crate::inventory::name(c);
        let record = s.records.get(name).filter(|r| s.stored.contains(&r.policy));
        let held = match record {
            // Held by a stored policy that does not compile: left alone.
            Some(r) => match policy(&r.policy) {
                // Object sources are planned from their lists below.
                Some(p) if p.is_object_source() => continue,
                Some(p) => Some((p, r.clone())),
                None => continue,
            },
            None => matched(s.policies, c, &mut plan.statuses),
        };
        let Some((p, record)) = held else {
            continue;
        };
        let tally = plan.statuses.entry(p.name.clone()).or_default();
        let template = match p.template(&registration_value(c)) {
            Ok(t) => t,
            Err(e) => {
                tally.error(format!("cluster {name}: {e}"));
                continue;
            }
        };
        count(tally, &record);
        let (edit, next) = shape(p, c, &record, &template, s.secure, tally);
        if s.records.get(name) != Some(&next) {
            plan.records_put.push((name.to_string(), next));
        }
        if !edit.is_noop() {
            plan.edits.push(edit);
        }
    }
    let mut claimed: HashSet<String> = s
        .records
        .iter()
        .filter(|(k, _)| live.contains_key(k.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    // And the clusters a registration policy took in this very pass (not stored yet).
    claimed.extend(plan.records_put.iter().map(|(k, _)| k.clone()));
    for p in s.policies.iter().filter(|p| p.is_object_source()) {
        let lists = s.lists.get(&p.name);
        objects::records(s, p, lists, &live, &mut plan);
        objects::matches(s, p, lists, &live, &mut claimed, &mut plan);
    }
    plan
}

fn count(tally: &mut Tally, record: &ImportRecord) {
    if record.created {
        tally.imported += 1;
    } else {
        tally.adopted += 1;
    }
}

fn source_ref(r: &ImportRecord) -> ImportSourceRef {
    r.source_ref.clone().unwrap_or_default()
}

fn deleting(c: &ManagedCluster) -> bool {
    c.metadata
        .as_ref()
        .is_some_and(|m| m.deletion_timestamp.is_some())
}

/// The first registration policy admitting `c`, with the record it makes.
fn matched<'p>(
    policies: &'p [CompiledPolicy],
    c: &ManagedCluster,
    tallies: &mut BTreeMap<String, Tally>,
) -> Option<(&'p CompiledPolicy, ImportRecord)> {
    let registrations = format!("{REGISTRATION_GROUP}/{REGISTRATIONS}");
    let name = crate::inventory::name(c);
    let value = registration_value(c);
    for p in policies.iter().filter(|p| p.source_kind == registrations) {
        match p.admits(&value) {
            Ok(true) => {
                let record = ImportRecord {
                    policy: p.name.clone(),
                    source_ref: Some(ImportSourceRef {
                        group: REGISTRATION_GROUP.into(),
                        resource: REGISTRATIONS.into(),
                        name: name.to_string(),
                        uid: c
                            .metadata
                            .as_ref()
                            .map(|m| m.uid.clone())
                            .unwrap_or_default(),
                        ..Default::default()
                    }),
                    created: !accepted(c),
                    ..Default::default()
                };
                return Some((p, record));
            }
            Ok(false) => {}
            Err(e) => tallies
                .entry(p.name.clone())
                .or_default()
                .error(format!("registration {name}: {e}")),
        }
    }
    None
}

/// The edit the policy makes of a cluster it holds, and the record after it.
fn shape(
    p: &CompiledPolicy,
    c: &ManagedCluster,
    record: &ImportRecord,
    template: &Template,
    secure: bool,
    tally: &mut Tally,
) -> (Edit, ImportRecord) {
    let name = crate::inventory::name(c);
    let mut next = record.clone();
    next.policy_generation = p.generation;
    let mut edit = Edit {
        cluster: name.to_string(),
        ..Default::default()
    };
    if record.created {
        let desired = desired_labels(template);
        (edit.set_labels, edit.remove_labels) = relabel(c, &record.applied_labels, &desired);
        next.applied_labels = desired;
        if let Some(wanted) = &template.taints
            && !same_taints(c, wanted)
        {
            edit.taints = Some(wanted.clone());
        }
        let lease = c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds);
        edit.lease_seconds = template.lease_seconds.filter(|l| *l != lease);
    }
    // In secure mode an object source's policy accepts only a cluster it created ahead of any
    // agent: a bound key there came from a join credential or an admin. A pending cluster it
    // adopts may hold the key of whoever registered the name first with the bootstrap
    // credential; the admin (or a join credential) decides that one.
    let vouched = !(secure && p.is_object_source() && !record.created);
    if template.accept && !accepted(c) && !denied(c) {
        if key_ready(c, secure) && vouched {
            edit.accept = true;
        } else {
            tally.waiting += 1;
        }
    }
    (edit, next)
}

/// Whether the cluster's admin taints are `wanted` (by key, value and effect).
fn same_taints(c: &ManagedCluster, wanted: &[Taint]) -> bool {
    let key = |t: &Taint| (t.key.clone(), t.value.clone(), t.effect.clone());
    let have: BTreeSet<_> = c
        .spec
        .as_ref()
        .map(|s| s.taints.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|t| !is_hub_taint(&t.key))
        .map(key)
        .collect();
    have == wanted.iter().map(key).collect()
}

/// The labels a template puts on its own clusters (its cluster set as the set label).
pub fn desired_labels(t: &Template) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = t.labels.clone().into_iter().collect();
    if let Some(set) = &t.cluster_set {
        out.insert(CLUSTERSET_LABEL.into(), set.clone());
    }
    out
}

/// Labels to set (missing or different) and keys to remove (set by the policy before, no longer
/// wanted, still there).
fn relabel(
    c: &ManagedCluster,
    applied: &HashMap<String, String>,
    desired: &HashMap<String, String>,
) -> (HashMap<String, String>, Vec<String>) {
    let current = c.metadata.as_ref().map(|m| &m.labels);
    let has = |k: &str| current.and_then(|l| l.get(k));
    let set = desired
        .iter()
        .filter(|(k, v)| has(k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut remove: Vec<String> = applied
        .keys()
        .filter(|k| !desired.contains_key(*k) && has(k).is_some())
        .cloned()
        .collect();
    remove.sort();
    (set, remove)
}

/// Whether a policy may accept the cluster's agent key: no second key waits, and in secure
/// mode a key is bound (as `AutoAccept` at registration: a policy never binds keys).
pub fn key_ready(c: &ManagedCluster, secure: bool) -> bool {
    let hub = c.hub.clone().unwrap_or_default();
    hub.requested_public_key.is_empty() && (!secure || !hub.agent_public_key.is_empty())
}

/// The policy already holding `kind` other than `name`, if any.
pub fn owner_of<'a>(
    kind: &str,
    name: &str,
    policies: impl IntoIterator<Item = &'a flotilla_api::v1::ClusterImportPolicy>,
) -> Option<String> {
    policies.into_iter().find_map(|p| {
        let other = p.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or("");
        let source = p.spec.as_ref().and_then(|s| s.source.as_ref())?;
        (other != name && source_kind(source) == kind).then(|| other.to_string())
    })
}

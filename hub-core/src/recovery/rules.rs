//! The recovery window's rules (pure): what a spoke is told to delete or sent again, what
//! becomes an orphan (a work the store lacks, holds older or newer than the spoke, or holds as
//! another incarnation), which orphan records are settled, which decisions fit which orphan,
//! and what the resync digest covers.

use flotilla_api::v1::{Orphan, OrphanDecision, OrphanKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Orphans one cluster may have recorded; strangers past it are withheld but not recorded (a
/// spoke cannot make the hub store without bound).
pub const MAX_ORPHANS_PER_CLUSTER: usize = 1000;

/// Orphans the whole fleet may have recorded (a 10,000-cluster fleet restored from a backup a
/// day old, ~10 works added per cluster; records of ~150 B: ~15 MiB in every hub's memory).
/// Past it strangers are withheld but not recorded, as past [`MAX_ORPHANS_PER_CLUSTER`]. Each
/// hub checks against the records it has seen, so hubs recording at once may pass it by a few
/// resyncs' worth.
pub const MAX_ORPHANS: usize = 100_000;

/// Orphans whose status a resync answer asks the agent to publish again (their names come
/// from it); the rest at the next resync.
pub const REPUBLISH_PER_ANSWER: usize = 100;

/// A work seen for the first time in the window, to record as an undecided orphan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stranger {
    /// Its resource id.
    pub id: String,
    /// Missing from the store (`Work`), older there (`Ahead`), newer or being deleted there
    /// (`Behind`), or another incarnation there (`Incarnation`).
    pub kind: OrphanKind,
    /// The generation the agent holds.
    pub agent_generation: i64,
    /// The store's generation (0 for `Work`).
    pub store_generation: i64,
}

/// What a full resync answer does with the works the agent holds and the store lacks or
/// holds older.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Resource ids the agent is told to delete, sorted.
    pub delete: Vec<String>,
    /// Works seen for the first time in the window: recorded as undecided orphans.
    pub record: Vec<Stranger>,
    /// Orphan records whose case is over (OCM's cancel on reappearance): the agent no longer
    /// holds the work, the store has it again, or the store's generation caught up. Removed;
    /// the id is considered afresh at the next resync.
    pub settle: Vec<String>,
    /// The store's spec sent again above the generation the agent holds (`(id, held)`):
    /// `Ahead` and `Incarnation` orphans decided `Revert`, and another incarnation the spoke
    /// holds while no window covers the cluster (the store wins).
    pub revert: Vec<(String, i64)>,
    /// Strangers left unrecorded for want of room ([`MAX_ORPHANS_PER_CLUSTER`]): withheld, and
    /// the resync does not count as the cluster's first since the recovery (so they stay
    /// withheld after the window closes, until decided records make room).
    pub overflow: bool,
    /// Ids whose store spec (or deletion) is not sent again while the window covers the
    /// cluster: `Behind` and `Incarnation` ones undecided or kept, or seen now.
    pub hold: Vec<String>,
}

/// The ids of `agent` (the uids of the works an agent holds) whose uid is not the store's
/// (`store`): the spoke runs another incarnation of the work (deleted and created again under
/// its name). Only where both sides know a uid: agents before uids send none, and records of
/// a store before uids may lack one.
pub fn other_incarnations<'a>(
    agent: &HashMap<String, String>,
    store: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeSet<String> {
    store
        .into_iter()
        .filter(|(id, uid)| {
            !uid.is_empty()
                && agent
                    .get(*id)
                    .is_some_and(|held| !held.is_empty() && held != uid)
        })
        .map(|(id, _)| id.to_string())
        .collect()
}

/// An orphan record as [`answer`] reads it.
pub type Known = BTreeMap<String, (OrphanKind, OrphanDecision)>;

/// The answer to an agent's full map, from `deletes` (ids it holds that the store lacks, as
/// `resync_diff` gives them), the generations it holds (`agent`), the store's generations
/// (`store`), which of those it is deleting (`deleting`) and which the spoke holds as another
/// incarnation (`other`, [`other_incarnations`]), whether the window covers the cluster
/// (`open`), and the cluster's orphan records (`known`). With the window closed, no record
/// and no other incarnation this is `deletes` unchanged: the hub's behaviour without a
/// restore.
pub fn answer(
    open: bool,
    deletes: Vec<String>,
    agent: &HashMap<String, i64>,
    store: &BTreeMap<String, i64>,
    deleting: &BTreeSet<String>,
    other: &BTreeSet<String>,
    known: &Known,
) -> Answer {
    let strangers: BTreeSet<&str> = deletes.iter().map(String::as_str).collect();
    // Generations compare only within one incarnation: another one is judged by its uid.
    let same = |id: &str| !other.contains(id);
    let ahead = held_where(agent, store, |id, held, stored| {
        same(id) && !deleting.contains(id) && stored < held
    });
    let behind = held_where(agent, store, |id, held, stored| {
        same(id) && (deleting.contains(id) || stored > held)
    });
    let reborn = held_where(agent, store, |id, _, _| !same(id));
    let settle = known
        .iter()
        .filter(|(id, (kind, _))| match kind {
            OrphanKind::Work => !strangers.contains(id.as_str()),
            OrphanKind::Ahead => !ahead.contains_key(id.as_str()),
            OrphanKind::Behind => !behind.contains_key(id.as_str()),
            OrphanKind::Incarnation => !reborn.contains_key(id.as_str()),
        })
        .map(|(id, _)| id.clone())
        .collect();
    let mut out = Answer {
        settle,
        ..Answer::default()
    };
    let room = MAX_ORPHANS_PER_CLUSTER.saturating_sub(known.len());
    for id in deletes {
        match known.get(&id) {
            Some((OrphanKind::Work, OrphanDecision::Delete)) => out.delete.push(id),
            // Kept, undecided, or a record of the other kind (settled above).
            Some(_) => {}
            // Not a resource id (every one is a UUID): no work of any hub; withheld in the
            // window, never a record key (a hostile id could be any length).
            None if open && !resource_id_shaped(&id) => {}
            None if open => {
                let agent_generation = agent.get(&id).copied().unwrap_or_default();
                out.record_within(
                    room,
                    Stranger::new(id, OrphanKind::Work, agent_generation, 0),
                );
            }
            None => out.delete.push(id),
        }
    }
    for (id, (held, stored)) in ahead {
        match known.get(id) {
            Some((OrphanKind::Ahead, OrphanDecision::Revert)) => {
                out.revert.push((id.to_string(), held));
            }
            Some(_) => {}
            // Outside the window the hub does as it always did: nothing.
            None if open => {
                out.record_within(room, Stranger::new(id, OrphanKind::Ahead, held, stored));
            }
            None => {}
        }
    }
    out.held_other(open, known, room, OrphanKind::Behind, behind);
    out.held_other(open, known, room, OrphanKind::Incarnation, reborn);
    out
}

impl Stranger {
    fn new(id: impl Into<String>, kind: OrphanKind, held: i64, stored: i64) -> Self {
        Self {
            id: id.into(),
            kind,
            agent_generation: held,
            store_generation: stored,
        }
    }
}

impl Answer {
    /// Records `stranger` when the cluster's records have room left (`room`), else overflows.
    fn record_within(&mut self, room: usize, stranger: Stranger) {
        if self.record.len() < room {
            self.record.push(stranger);
        } else {
            self.overflow = true;
        }
    }

    /// Works the store has that the spoke holds other than it (`held`: id → (held, stored)):
    /// older or being deleted (`Behind`), or another incarnation (`Incarnation`). In the
    /// window, and while a record of the kind stands undecided or kept, the store's spec is
    /// held back; reverted, it goes — by the resync diff for `Behind` (above the spoke's
    /// generation already), above the spoke's generation for `Incarnation`. Outside the
    /// window with no record the store's goes as always; another incarnation is replaced
    /// above the spoke's generation (at or below it the agent would take the spec for one it
    /// has).
    fn held_other(
        &mut self,
        open: bool,
        known: &Known,
        room: usize,
        kind: OrphanKind,
        held: BTreeMap<&str, (i64, i64)>,
    ) {
        let reborn = kind == OrphanKind::Incarnation;
        for (id, (held, stored)) in held {
            match known.get(id) {
                // Reverted: `Incarnation` above the spoke's generation; `Behind` by the resync
                // diff (the store's is above the spoke's already).
                Some((k, OrphanDecision::Revert)) if *k == kind && reborn => {
                    self.revert.push((id.to_string(), held));
                }
                Some((k, OrphanDecision::Revert)) if *k == kind => {}
                Some((k, _)) if *k == kind => self.hold.push(id.to_string()),
                // A record of another kind, settled above: judged afresh at the next resync.
                Some(_) if open => self.hold.push(id.to_string()),
                Some(_) => {}
                None if open => {
                    self.hold.push(id.to_string());
                    self.record_within(room, Stranger::new(id, kind, held, stored));
                }
                None if reborn => self.revert.push((id.to_string(), held)),
                None => {}
            }
        }
    }
}

/// Keeps `answer`'s new records within the fleet's room ([`MAX_ORPHANS`]), `recorded` being
/// the records the fleet has: the rest are withheld unrecorded, and the answer overflows (the
/// cluster stays covered by the window until a later resync records them).
pub fn within_fleet(answer: &mut Answer, recorded: usize) {
    let room = MAX_ORPHANS.saturating_sub(recorded);
    if answer.record.len() > room {
        answer.record.truncate(room);
        answer.overflow = true;
    }
}

/// The works the agent holds that the store has, picked by `pick(id, held, stored)`:
/// id → (held, stored).
fn held_where<'a>(
    agent: &'a HashMap<String, i64>,
    store: &BTreeMap<String, i64>,
    pick: impl Fn(&str, i64, i64) -> bool,
) -> BTreeMap<&'a str, (i64, i64)> {
    agent
        .iter()
        .filter_map(|(id, held)| {
            let stored = *store.get(id)?;
            pick(id, *held, stored).then_some((id.as_str(), (*held, stored)))
        })
        .collect()
}

/// Whether `id` can be a resource id: a UUID in its hyphenated lowercase form, as
/// `flotilla_bus::works::resource_id` makes every one.
pub fn resource_id_shaped(id: &str) -> bool {
    id.len() == 36 && uuid::Uuid::try_parse(id).is_ok_and(|u| u.hyphenated().to_string() == id)
}

/// Whether `name` can name an orphan: a ManifestWork name (a DNS-1123 subdomain: at most 253
/// lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit). A
/// status a hostile spoke makes up under any other name is not recorded nor shown.
pub fn orphan_name_ok(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && edge(name.chars().next())
        && edge(name.chars().last())
}

/// `Behind` and `Incarnation` records whose work the store changed since they were recorded
/// (`store`: its generations now): the operator's newer spec goes to the spoke, so the record
/// is settled.
pub fn changed_since(
    records: &BTreeMap<String, Orphan>,
    store: &BTreeMap<String, i64>,
) -> Vec<String> {
    records
        .iter()
        .filter(|(id, o)| {
            matches!(o.kind(), OrphanKind::Behind | OrphanKind::Incarnation)
                && store.get(*id).is_some_and(|g| *g != o.store_generation)
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// Whether `decision` fits an orphan of `kind`: a work the store lacks cannot be reverted to
/// the store's spec, and one the store has is deleted through the API, not as an orphan.
pub fn allowed(kind: OrphanKind, decision: OrphanDecision) -> Result<(), &'static str> {
    match (kind, decision) {
        (OrphanKind::Work, OrphanDecision::Revert) => {
            Err("the store lacks this work, so there is no spec to revert to (delete or keep it)")
        }
        (OrphanKind::Ahead, OrphanDecision::Delete) => Err(
            "the store has this work at an older generation: revert it or keep it (to remove \
             it, delete the work through the API)",
        ),
        (OrphanKind::Behind, OrphanDecision::Delete) => Err(
            "the store has this work (newer, or being deleted): revert it to send the store's, \
             or keep the spoke's (to remove it, delete the work through the API)",
        ),
        (OrphanKind::Incarnation, OrphanDecision::Delete) => Err(
            "the store has another incarnation of this work: revert it to send the store's, or \
             keep the spoke's (to remove it, delete the work through the API)",
        ),
        _ => Ok(()),
    }
}

/// What an undecided orphan of `kind` becomes when the window is finished with `undecided`
/// (`--delete-orphans`: the store wins — strangers are deleted, works ahead reverted).
pub fn on_finish(kind: OrphanKind, undecided: OrphanDecision) -> OrphanDecision {
    match (kind, undecided) {
        (
            OrphanKind::Ahead | OrphanKind::Behind | OrphanKind::Incarnation,
            OrphanDecision::Delete,
        ) => OrphanDecision::Revert,
        _ => undecided,
    }
}

/// The generation of a work's new or changed spec: `next` by the usual rule, and above what a
/// spoke holds that the store does not know (`ahead`, an orphan's: held ahead of the store, or
/// held while the store lacked it), which the agent would otherwise take for one it has.
pub fn next_generation(next: i64, ahead: Option<i64>) -> i64 {
    ahead.map_or(next, |held| next.max(held.saturating_add(1)))
}

/// What the hub compares an agent's digest against.
#[derive(Debug, PartialEq, Eq)]
pub enum Digest {
    /// Ask for the full map: an orphan is undecided or to be deleted, and only the full map
    /// says whether the agent still holds it.
    Full,
    /// The store's works plus these kept orphans at the generation the agent holds: an agent
    /// holding exactly those is in sync (kept works are never resent nor deleted).
    With(Vec<(String, i64)>),
}

/// The versions the hub's digest covers: the store's, with each kept orphan at the generation
/// the agent holds — added when the store lacks it, in place of the store's when the store's
/// is older (a kept `Ahead` work).
pub fn digest_versions<'a>(
    store: impl IntoIterator<Item = (&'a str, i64)>,
    kept: &'a [(String, i64)],
) -> BTreeMap<&'a str, i64> {
    let mut versions: BTreeMap<&str, i64> = store.into_iter().collect();
    for (id, held) in kept {
        let entry = versions.entry(id.as_str()).or_insert(*held);
        *entry = (*entry).max(*held);
    }
    versions
}

/// The works whose store spec no re-send of an unconfirmed spec may carry while these records
/// stand (only a resync answer decides them): a `Behind` or `Incarnation` one unless reverted
/// (the spoke may run a newer incarnation than the restored spec), and every `Ahead` one (the
/// store's spec is older than the spoke's; a revert goes above it on its own path).
pub fn held_from_resend(known: &Known) -> BTreeSet<String> {
    known
        .iter()
        .filter(|(_, (kind, decision))| match kind {
            OrphanKind::Behind | OrphanKind::Incarnation => *decision != OrphanDecision::Revert,
            OrphanKind::Ahead => true,
            OrphanKind::Work => false,
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// The digest rule for a cluster with orphan records `known`.
pub fn digest(known: &BTreeMap<String, Orphan>) -> Digest {
    // A kept `Behind` work is held at the spoke's generation below the store's, a kept
    // `Incarnation` under another uid (which the digest does not cover): only the full map
    // tells whether it still is.
    if known.values().any(|o| {
        o.decision() != OrphanDecision::Keep
            || matches!(o.kind(), OrphanKind::Behind | OrphanKind::Incarnation)
    }) {
        return Digest::Full;
    }
    Digest::With(
        known
            .iter()
            .map(|(id, o)| (id.clone(), o.agent_generation))
            .collect(),
    )
}

/// Whether the orphans of `of` (by name or resource id, or every one with `all`) are chosen
/// by `names`; the names chosen that match no orphan.
pub fn choose<'a>(
    of: &'a BTreeMap<String, Orphan>,
    names: &[String],
    all: bool,
) -> (Vec<&'a Orphan>, Vec<String>) {
    if all {
        return (of.values().collect(), Vec::new());
    }
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        let found: Vec<&Orphan> = of
            .values()
            .filter(|o| &o.name == name || &o.resource_id == name)
            .collect();
        if found.is_empty() {
            missing.push(name.clone());
        }
        chosen.extend(found);
    }
    chosen.sort_by(|a, b| a.resource_id.cmp(&b.resource_id));
    chosen.dedup_by(|a, b| a.resource_id == b.resource_id);
    (chosen, missing)
}

#[cfg(test)]
mod tests;

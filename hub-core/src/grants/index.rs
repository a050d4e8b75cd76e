//! Which cluster sets each cluster is in, in the shape the hot paths want (pure): set names
//! interned to small ids ([`SetIds`]), a cluster's sets as a bitset ([`SetMask`]), and the
//! index's published view ([`SetIndexView`], cluster name → mask). A scope holds the mask of the
//! sets it sees, so "may this caller see this cluster" is a hash lookup and a few word ANDs
//! (docs/notes/issue-48-design.md §6.1). The task that keeps the view (cluster view + the
//! `clustersets` bucket) builds it with [`SetIndexView::build`].

use flotilla_api::clusterset::{LABEL_SELECTOR, is_member_by};
use flotilla_api::v1::{ManagedCluster, ManagedClusterSetSpec};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The most sets the index can tell apart (ids are `u16`).
pub const MAX_SETS: usize = u16::MAX as usize;

/// More sets than [`MAX_SETS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{count} cluster sets: the set index holds at most {MAX_SETS}")]
pub struct TooManySets {
    /// How many there were.
    pub count: usize,
}

/// A set's id in one [`SetIds`] table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SetId(pub u16);

/// Set names interned to ids; a new table (with a new generation) whenever sets come or go,
/// so masks built against one table are never read against another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetIds {
    /// Unique to this table in the process: masks are keyed by it, never by a generation a
    /// rebuild could number again.
    uid: u64,
    generation: u64,
    by_name: HashMap<Arc<str>, SetId>,
    names: Vec<Arc<str>>,
}

impl SetIds {
    /// The ids of `names` (duplicates once), numbered in the order given.
    pub fn new<S: AsRef<str>>(
        generation: u64,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, TooManySets> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut ids = Self {
            uid: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            generation,
            ..Self::default()
        };
        for name in names {
            ids.intern(name.as_ref())?;
        }
        Ok(ids)
    }

    fn intern(&mut self, name: &str) -> Result<SetId, TooManySets> {
        if let Some(id) = self.by_name.get(name) {
            return Ok(*id);
        }
        let id = u16::try_from(self.names.len())
            .ok()
            .filter(|i| usize::from(*i) < MAX_SETS)
            .map(SetId)
            .ok_or(TooManySets {
                count: self.names.len() + 1,
            })?;
        let name: Arc<str> = name.into();
        self.names.push(name.clone());
        self.by_name.insert(name, id);
        Ok(id)
    }

    /// The table's generation (masks carry none: the scope records the generation it used).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What masks built against this table are keyed by: the table's process-unique id and its
    /// size (a set appended keeps the ids, not the key).
    pub fn key(&self) -> (u64, usize) {
        (self.uid, self.names.len())
    }

    /// The id of set `name`.
    pub fn id(&self, name: &str) -> Option<SetId> {
        self.by_name.get(name).copied()
    }

    /// The name of set `id`.
    pub fn name(&self, id: SetId) -> Option<&Arc<str>> {
        self.names.get(usize::from(id.0))
    }

    /// How many sets the table knows.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it knows none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A set of set ids as a bitset: two words hold 128 sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SetMask {
    words: Vec<u64>,
}

impl SetMask {
    /// The mask of `ids`.
    pub fn of(ids: impl IntoIterator<Item = SetId>) -> Self {
        let mut mask = Self::default();
        for id in ids {
            mask.insert(id);
        }
        mask
    }

    /// Adds `id`.
    pub fn insert(&mut self, id: SetId) {
        let (word, bit) = (usize::from(id.0) / 64, id.0 % 64);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1u64 << bit;
    }

    /// Removes `id` (trailing empty words dropped, so equal masks compare equal).
    pub fn remove(&mut self, id: SetId) {
        let (word, bit) = (usize::from(id.0) / 64, id.0 % 64);
        if let Some(w) = self.words.get_mut(word) {
            *w &= !(1u64 << bit);
        }
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Whether `id` is in it.
    pub fn contains(&self, id: SetId) -> bool {
        let (word, bit) = (usize::from(id.0) / 64, id.0 % 64);
        self.words.get(word).is_some_and(|w| w & (1u64 << bit) != 0)
    }

    /// Whether the two masks share a set.
    pub fn intersects(&self, other: &SetMask) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Whether it holds no set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The ids in it, ascending.
    pub fn ids(&self) -> impl Iterator<Item = SetId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, w)| {
            (0..64u16)
                .filter(move |b| (*w >> *b) & 1 == 1)
                .map(move |b| SetId(i as u16 * 64 + b))
        })
    }
}

/// Every set's membership rule by name (its spec; `None`: a set with no spec), shared between
/// the index's state and the views it publishes.
#[derive(Debug, Clone, Default)]
pub struct SetRules(pub(super) Arc<BTreeMap<Arc<str>, Option<ManagedClusterSetSpec>>>);

impl PartialEq for SetRules {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

// Specs hold strings and lists of strings only: equality is total.
impl Eq for SetRules {}

/// The set index as published: which sets each cluster is in, against one [`SetIds`] table,
/// and the sets' rules (what a cluster with other labels would be in).
/// Readers hold an `Arc` of it; the task publishes a new one per change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetIndexView {
    generation: u64,
    ids: Arc<SetIds>,
    members: HashMap<Arc<str>, SetMask>,
    rules: SetRules,
}

impl SetIndexView {
    /// The view of `sets` (every set that exists, members or not) and of each cluster with the
    /// sets it is in (`members`: cluster → set names; a set named there and not in `sets` is
    /// added). `ids_generation` numbers the id table, `generation` the view.
    pub fn build<C, S>(
        generation: u64,
        ids_generation: u64,
        sets: impl IntoIterator<Item = S>,
        members: impl IntoIterator<Item = (C, Vec<S>)>,
    ) -> Result<Self, TooManySets>
    where
        C: AsRef<str>,
        S: AsRef<str>,
    {
        let mut ids = SetIds::new(ids_generation, sets)?;
        let mut map = HashMap::new();
        for (cluster, sets) in members {
            let mut mask = SetMask::default();
            for set in sets {
                mask.insert(ids.intern(set.as_ref())?);
            }
            map.insert(Arc::from(cluster.as_ref()), mask);
        }
        Ok(Self {
            generation,
            ids: Arc::new(ids),
            members: map,
            rules: SetRules::default(),
        })
    }

    /// A view of `members` against `ids`, by `rules` (the set index's
    /// [`super::members::Membership`]).
    pub(super) fn from_parts(
        generation: u64,
        ids: Arc<SetIds>,
        members: HashMap<Arc<str>, SetMask>,
        rules: SetRules,
    ) -> Self {
        Self {
            generation,
            ids,
            members,
            rules,
        }
    }

    /// The sets `cluster` would be in with its labels, by the rules of the sets that exist
    /// (what a relabelled or a new cluster joins), by name. Empty for a view built without
    /// rules ([`Self::build`]).
    pub fn sets_for(&self, cluster: &ManagedCluster) -> Vec<Arc<str>> {
        self.rules
            .0
            .iter()
            .filter(|(name, spec)| is_member_by(name, spec.as_ref(), cluster))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether set `name` holds every cluster whatever its labels (a label selector that
    /// selects everything, as `global`'s): joining it changes no one's reach.
    pub fn holds_every_cluster(&self, name: &str) -> bool {
        let Some(Some(spec)) = self.rules.0.get(name) else {
            return false;
        };
        spec.cluster_selector.as_ref().is_some_and(|sel| {
            sel.selector_type == LABEL_SELECTOR
                && sel
                    .label_selector
                    .as_ref()
                    .is_none_or(|l| l.match_labels.is_empty() && l.match_expressions.is_empty())
        })
    }

    /// The view's generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The id table its masks are built against.
    pub fn ids(&self) -> &Arc<SetIds> {
        &self.ids
    }

    /// The sets `cluster` is in; `None` for a cluster the index does not know.
    pub fn mask(&self, cluster: &str) -> Option<&SetMask> {
        self.members.get(cluster)
    }

    /// The names of the sets `cluster` is in, by name; `None` for a cluster the index does not
    /// know.
    pub fn sets_of(&self, cluster: &str) -> Option<Vec<Arc<str>>> {
        let mask = self.members.get(cluster)?;
        let mut names: Vec<Arc<str>> = mask
            .ids()
            .filter_map(|id| self.ids.name(id).cloned())
            .collect();
        names.sort();
        Some(names)
    }

    /// How many clusters it knows.
    pub fn clusters(&self) -> usize {
        self.members.len()
    }
}

/// Which clusters a new view moved: what each watcher must check again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// These clusters' sets changed (their labels did).
    Some(Vec<Arc<str>>),
    /// Any cluster may have moved (a set's selector changed, a set came or went): re-check all.
    All,
}

/// A published change of the set index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexChange {
    /// The new view's generation.
    pub generation: u64,
    /// What moved.
    pub clusters: Changed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_hold_ids_past_one_word_and_intersect_by_word() {
        let a = SetMask::of([SetId(0), SetId(70), SetId(200)]);
        assert!(a.contains(SetId(70)) && a.contains(SetId(200)) && !a.contains(SetId(1)));
        assert_eq!(
            a.ids().collect::<Vec<_>>(),
            [SetId(0), SetId(70), SetId(200)]
        );
        assert!(a.intersects(&SetMask::of([SetId(200)])));
        assert!(!a.intersects(&SetMask::of([SetId(1), SetId(71)])));
        assert!(!a.intersects(&SetMask::default()));
        assert!(SetMask::default().is_empty() && !a.is_empty());
    }

    #[test]
    fn the_view_names_each_clusters_sets_and_knows_unknown_clusters_apart() {
        let view = SetIndexView::build(
            3,
            1,
            ["team-a", "team-b", "empty"],
            [("c1", vec!["team-a", "global"]), ("c2", vec![])],
        )
        .unwrap();
        assert_eq!(
            view.sets_of("c1").unwrap(),
            [Arc::from("global"), Arc::from("team-a")]
        );
        assert_eq!(view.sets_of("c2").unwrap(), Vec::<Arc<str>>::new());
        assert_eq!(view.sets_of("c9"), None);
        assert_eq!(view.ids().len(), 4, "a set named only by a member is added");
        assert_eq!(view.ids().generation(), 1);
        assert_eq!(view.generation(), 3);
        assert_eq!(view.clusters(), 2);
    }

    #[test]
    fn more_sets_than_ids_are_refused() {
        let names = (0..=MAX_SETS).map(|i| format!("s{i}"));
        let e = SetIds::new(0, names).unwrap_err();
        assert_eq!(e.count, MAX_SETS + 1);
        assert!(e.to_string().contains("at most 65535"), "{e}");
    }
}

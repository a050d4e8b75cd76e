//! The set index's state (pure): every set's membership rule and every cluster's sets as a
//! mask, changed one cluster or one set at a time, and published as a [`SetIndexView`]
//! (docs/notes/issue-48-design.md §6.1). A cluster's change costs one evaluation per set; a
//! set's change one evaluation of that set per cluster. The task feeding it is
//! `crate::setindex`.
//!
//! The hub's own sets, `default` and `global`, are always there (with their built-in rules
//! until the store holds them), so a hub whose controllers have not made them yet still knows
//! that every cluster is in `global`.

use super::index::{Changed, SetIds, SetIndexView, SetMask, SetRules, TooManySets};
use flotilla_api::clusterset::{builtin_spec, is_member_by};
use flotilla_api::meta::{DEFAULT_CLUSTERSET, GLOBAL_CLUSTERSET};
use flotilla_api::v1::{ManagedCluster, ManagedClusterSet, ManagedClusterSetSpec};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Which sets exist, by their rules, and which sets each cluster is in.
#[derive(Debug, Clone, Default)]
pub struct Membership {
    generation: u64,
    ids: SetIds,
    /// Shared with the views published (copied on a set's change only).
    sets: Arc<BTreeMap<Arc<str>, Option<ManagedClusterSetSpec>>>,
    members: HashMap<Arc<str>, SetMask>,
}

fn name_of(meta: Option<&flotilla_api::v1::ObjectMeta>) -> &str {
    meta.map_or("", |m| m.name.as_str())
}

impl Membership {
    /// The membership of `clusters` in `sets` (and the built-in sets).
    pub fn new<'a>(
        sets: impl IntoIterator<Item = &'a ManagedClusterSet>,
        clusters: impl IntoIterator<Item = &'a ManagedCluster>,
    ) -> Result<Self, TooManySets> {
        let mut this = Self::default();
        let rules = Arc::make_mut(&mut this.sets);
        for builtin in [DEFAULT_CLUSTERSET, GLOBAL_CLUSTERSET] {
            rules.insert(builtin.into(), Some(builtin_spec(builtin)));
        }
        for set in sets {
            let name = name_of(set.metadata.as_ref());
            rules.insert(name.into(), set.spec.clone());
        }
        this.renumber(0)?;
        for cluster in clusters {
            let name = name_of(cluster.metadata.as_ref());
            let mask = this.mask_of(cluster);
            this.members.insert(name.into(), mask);
        }
        Ok(this)
    }

    /// A new id table over the current sets, in name order.
    fn renumber(&mut self, generation: u64) -> Result<(), TooManySets> {
        self.ids = SetIds::new(generation, self.sets.keys())?;
        Ok(())
    }

    fn mask_of(&self, cluster: &ManagedCluster) -> SetMask {
        SetMask::of(
            self.sets
                .iter()
                .filter(|(name, spec)| is_member_by(name, spec.as_ref(), cluster))
                .filter_map(|(name, _)| self.ids.id(name)),
        )
    }

    /// A cluster was written (`Some`) or deleted (`None`): whether its sets changed.
    pub fn cluster(&mut self, name: &str, cluster: Option<&ManagedCluster>) -> bool {
        match cluster {
            Some(c) => {
                let mask = self.mask_of(c);
                if self.members.get(name) == Some(&mask) {
                    return false;
                }
                self.members.insert(name.into(), mask);
                true
            }
            None => self.members.remove(name).is_some(),
        }
    }

    /// A set was written (`Some`) or deleted (`None`), `clusters` being every cluster now:
    /// what changed — nothing (`None`), the clusters that moved in or out of it (a set written:
    /// only its own rule is evaluated, one test per cluster; none moved for a new empty set,
    /// whose view still carries the new table), or [`Changed::All`] for a deleted set (a new
    /// id table, every mask again). A deleted built-in set keeps its built-in rule (the hub
    /// makes it again).
    pub fn set<'a>(
        &mut self,
        name: &str,
        set: Option<&ManagedClusterSet>,
        clusters: impl IntoIterator<Item = &'a ManagedCluster>,
    ) -> Result<Option<Changed>, TooManySets> {
        let builtin = name == DEFAULT_CLUSTERSET || name == GLOBAL_CLUSTERSET;
        let spec = match set {
            Some(s) => Some(s.spec.clone()),
            None if builtin => Some(Some(builtin_spec(name))),
            None => None,
        };
        let before = self.sets.get(name).cloned();
        if before == spec {
            return Ok(None);
        }
        match spec {
            Some(spec) => {
                let rule = spec.clone();
                Arc::make_mut(&mut self.sets).insert(name.into(), spec);
                if self.ids.id(name).is_none() {
                    // Appending keeps every other id: the old masks stay right.
                    let generation = self.ids.generation();
                    let names: Vec<Arc<str>> = (0..self.ids.len())
                        .filter_map(|i| self.ids.name(super::index::SetId(i as u16)).cloned())
                        .chain(std::iter::once(Arc::from(name)))
                        .collect();
                    self.ids = SetIds::new(generation, names)?;
                }
                Ok(Some(Changed::Some(self.reevaluate(
                    name,
                    rule.as_ref(),
                    clusters,
                ))))
            }
            None => {
                Arc::make_mut(&mut self.sets).remove(name);
                // Ids are never reused within a table: a new table, and every mask again.
                self.renumber(self.ids.generation() + 1)?;
                self.members.clear();
                for cluster in clusters {
                    let mask = self.mask_of(cluster);
                    self.members
                        .insert(name_of(cluster.metadata.as_ref()).into(), mask);
                }
                Ok(Some(Changed::All))
            }
        }
    }

    /// Set `name`'s bit in every cluster's mask by its rule `spec`: the clusters that moved
    /// in or out.
    fn reevaluate<'a>(
        &mut self,
        name: &str,
        spec: Option<&ManagedClusterSetSpec>,
        clusters: impl IntoIterator<Item = &'a ManagedCluster>,
    ) -> Vec<Arc<str>> {
        let Some(id) = self.ids.id(name) else {
            return Vec::new();
        };
        let mut moved = Vec::new();
        for cluster in clusters {
            let cluster_name = name_of(cluster.metadata.as_ref());
            let member = is_member_by(name, spec, cluster);
            let mask = self.members.entry(cluster_name.into()).or_default();
            if mask.contains(id) == member {
                continue;
            }
            if member {
                mask.insert(id);
            } else {
                mask.remove(id);
            }
            moved.push(Arc::from(cluster_name));
        }
        moved
    }

    /// The same membership publishing its views after generation `generation` (a rebuild
    /// continues the numbering of the views it replaces).
    pub fn starting_at(self, generation: u64) -> Self {
        Self { generation, ..self }
    }

    /// The view to publish: the next generation.
    pub fn view(&mut self) -> SetIndexView {
        self.generation += 1;
        SetIndexView::from_parts(
            self.generation,
            Arc::new(self.ids.clone()),
            self.members.clone(),
            SetRules(self.sets.clone()),
        )
    }

    /// The sets that exist, by name.
    pub fn set_names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.sets.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::meta::CLUSTERSET_LABEL;
    use flotilla_api::v1::{LabelSelector, ManagedClusterSelector, ObjectMeta};

    fn cluster(name: &str, labels: &[(&str, &str)]) -> ManagedCluster {
        ManagedCluster {
            metadata: Some(ObjectMeta {
                name: name.into(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn set(name: &str, selector: Option<(&str, &str)>) -> ManagedClusterSet {
        let cluster_selector = match selector {
            Some((k, v)) => ManagedClusterSelector {
                selector_type: flotilla_api::clusterset::LABEL_SELECTOR.into(),
                label_selector: Some(LabelSelector {
                    match_labels: [(k.to_string(), v.to_string())].into(),
                    ..Default::default()
                }),
            },
            None => ManagedClusterSelector {
                selector_type: flotilla_api::clusterset::EXCLUSIVE.into(),
                label_selector: None,
            },
        };
        ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetSpec {
                cluster_selector: Some(cluster_selector),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn sets(m: &mut Membership, cluster: &str) -> Vec<String> {
        let view = m.view();
        view.sets_of(cluster)
            .unwrap_or_default()
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn clusters_follow_their_labels_and_sets_their_rules() {
        let a = cluster("a1", &[(CLUSTERSET_LABEL, "team-a"), ("region", "eu")]);
        let b = cluster("b1", &[(CLUSTERSET_LABEL, "team-b")]);
        let team_a = set("team-a", None);
        let team_b = set("team-b", None);
        let mut m = Membership::new([&team_a, &team_b], [&a, &b]).unwrap();
        assert_eq!(sets(&mut m, "a1"), ["global", "team-a"]);
        assert_eq!(sets(&mut m, "b1"), ["global", "team-b"]);

        // Relabelled: moves; a status-only change moves nothing.
        let moved = cluster("a1", &[(CLUSTERSET_LABEL, "team-b")]);
        assert!(m.cluster("a1", Some(&moved)));
        assert!(!m.cluster("a1", Some(&moved)));
        assert_eq!(sets(&mut m, "a1"), ["global", "team-b"]);

        // A selector set: every cluster checked again.
        let eu = set("eu", Some(("region", "eu")));
        let a = cluster("a1", &[(CLUSTERSET_LABEL, "team-b"), ("region", "eu")]);
        assert!(!m.cluster("a1", Some(&a)), "no set reads region yet");
        let now = [a.clone(), b.clone()];
        let moved =
            |names: &[&str]| Some(Changed::Some(names.iter().map(|n| Arc::from(*n)).collect()));
        assert_eq!(m.set("eu", Some(&eu), now.iter()).unwrap(), moved(&["a1"]));
        assert_eq!(sets(&mut m, "a1"), ["eu", "global", "team-b"]);
        assert_eq!(
            m.set("eu", Some(&eu), now.iter()).unwrap(),
            None,
            "unchanged"
        );
        // Its rule changed: only its own bit is evaluated again, per cluster.
        let eu_b = set("eu", Some(("team", "b")));
        let b = cluster("b1", &[(CLUSTERSET_LABEL, "team-b"), ("team", "b")]);
        m.cluster("b1", Some(&b));
        let now = [a, b];
        assert_eq!(
            m.set("eu", Some(&eu_b), now.iter()).unwrap(),
            moved(&["a1", "b1"])
        );
        assert_eq!(sets(&mut m, "b1"), ["eu", "global", "team-b"]);
        // A new set nobody is in moves no cluster (its view carries the new table).
        let empty = set("nobody", Some(("none", "here")));
        assert_eq!(
            m.set("nobody", Some(&empty), now.iter()).unwrap(),
            moved(&[])
        );
        assert!(m.view().ids().id("nobody").is_some());

        // Deleted: gone from every cluster; a deleted built-in keeps its rule.
        assert_eq!(m.set("eu", None, now.iter()).unwrap(), Some(Changed::All));
        assert_eq!(sets(&mut m, "a1"), ["global", "team-b"]);
        assert_eq!(m.set("global", None, now.iter()).unwrap(), None);
        assert_eq!(sets(&mut m, "b1"), ["global", "team-b"]);

        assert!(m.cluster("b1", None));
        assert_eq!(m.view().sets_of("b1"), None);
    }

    #[test]
    fn a_new_set_keeps_the_ids_and_a_deleted_one_renumbers() {
        let a = cluster("a1", &[(CLUSTERSET_LABEL, "team-a")]);
        let team_a = set("team-a", None);
        let mut m = Membership::new([&team_a], [&a]).unwrap();
        let before = m.view();
        let id = before.ids().id("team-a");
        m.set("zeta", Some(&set("zeta", None)), [&a]).unwrap();
        let after = m.view();
        assert_eq!(after.ids().id("team-a"), id);
        assert_eq!(after.ids().generation(), before.ids().generation());
        m.set("zeta", None, [&a]).unwrap();
        let renumbered = m.view();
        // A table built again never matches masks of the old one, whatever its numbering.
        let again = Membership::new([&team_a], [&a]).unwrap().view();
        assert_ne!(again.ids().key(), before.ids().key());
        assert_eq!(renumbered.ids().generation(), before.ids().generation() + 1);
        assert!(renumbered.generation() > after.generation());
    }
}

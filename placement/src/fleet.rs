//! The fleet: clusters, sets, bindings and AddOn scores, indexed once so that many placements
//! can be scheduled against it cheaply.
//!
//! Building a fleet sorts cluster names once (so that scheduling compares integers, not
//! strings, when it breaks ties by name), interns labels and claims (module `index`), copies
//! allocatable resources into dense arrays, resolves every set's members, and files AddOn score
//! values under (resourceName, scoreName).

use std::collections::HashMap;
use std::time::SystemTime;

use crate::cluster::Cluster;
use crate::clusterset::{
    CLUSTERSET_LABEL, ClusterSetSelector, ManagedClusterSet, ManagedClusterSetBinding,
};
use crate::index::{IdSelector, PairTable, Strings};
use crate::score::AddOnPlacementScore;

/// One AddOn score value, filed for a fast dense scan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScoreValue {
    pub(crate) cluster: u32,
    pub(crate) value: i32,
    pub(crate) valid_until: Option<SystemTime>,
}

/// Everything placements are scheduled against, indexed.
#[derive(Debug, Clone)]
pub struct Fleet {
    clusters: Vec<Cluster>,
    sets: Vec<ManagedClusterSet>,
    bindings: Vec<ManagedClusterSetBinding>,
    scores: Vec<AddOnPlacementScore>,
    /// Cluster index → position in name order.
    pub(crate) name_rank: Vec<u32>,
    /// Position in name order → cluster index.
    pub(crate) by_name: Vec<u32>,
    index: HashMap<String, u32>,
    /// Per set (same order as `sets`): member cluster indices, ascending.
    set_members: Vec<Vec<u32>>,
    /// resourceName → scoreName → values.
    score_values: HashMap<String, HashMap<String, Vec<ScoreValue>>>,
    pub(crate) strings: Strings,
    pub(crate) labels: PairTable,
    pub(crate) claims: PairTable,
    /// Per cluster: being deleted.
    pub(crate) deleting: Vec<bool>,
    /// Per cluster: has at least one taint.
    pub(crate) tainted: Vec<bool>,
    /// Finite allocatable CPU / memory per cluster.
    pub(crate) cpu: Vec<Option<f64>>,
    pub(crate) memory: Vec<Option<f64>>,
}

impl Fleet {
    /// Indexes the fleet. Cluster names must be unique (the hub keys clusters by name); with
    /// duplicates, the later cluster shadows the earlier one in name lookups. AddOn scores of
    /// unknown clusters are kept but never read.
    ///
    /// # Panics
    /// If there are more than `u32::MAX` clusters or distinct label/claim strings.
    pub fn new(
        clusters: Vec<Cluster>,
        sets: Vec<ManagedClusterSet>,
        bindings: Vec<ManagedClusterSetBinding>,
        scores: Vec<AddOnPlacementScore>,
    ) -> Self {
        let n = u32::try_from(clusters.len()).expect("more than u32::MAX clusters");
        let mut by_name: Vec<u32> = (0..n).collect();
        by_name.sort_unstable_by(|&a, &b| {
            clusters[a as usize]
                .name
                .cmp(&clusters[b as usize].name)
                .then(a.cmp(&b))
        });
        let mut name_rank = vec![0u32; clusters.len()];
        for (rank, &idx) in by_name.iter().enumerate() {
            name_rank[idx as usize] = rank as u32;
        }
        let index: HashMap<String, u32> = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i as u32))
            .collect();
        let mut strings = Strings::default();
        let mut labels = PairTable::default();
        let mut claims = PairTable::default();
        for c in &clusters {
            labels.push(&mut strings, &c.labels);
            claims.push(&mut strings, &c.claims);
        }
        let set_members = sets
            .iter()
            .map(|s| match &s.selector {
                ClusterSetSelector::ExclusiveClusterSetLabel => {
                    match (strings.get(CLUSTERSET_LABEL), strings.get(&s.name)) {
                        (Some(k), Some(v)) => {
                            (0..n).filter(|&i| labels.get(i, k) == Some(v)).collect()
                        }
                        _ => Vec::new(),
                    }
                }
                ClusterSetSelector::LabelSelector(sel) => match IdSelector::new(&strings, sel) {
                    Ok(sel) => (0..n).filter(|&i| sel.matches(&labels, i)).collect(),
                    Err(_) => Vec::new(),
                },
            })
            .collect();
        let mut score_values: HashMap<String, HashMap<String, Vec<ScoreValue>>> = HashMap::new();
        for s in &scores {
            let Some(&c) = index.get(&s.cluster) else {
                continue;
            };
            // Look up before inserting: most objects share a few resource and score names.
            if !score_values.contains_key(&s.resource_name) {
                score_values.insert(s.resource_name.clone(), HashMap::new());
            }
            let Some(by_name) = score_values.get_mut(&s.resource_name) else {
                continue;
            };
            for (name, &value) in &s.scores {
                let entry = ScoreValue {
                    cluster: c,
                    value,
                    valid_until: s.valid_until,
                };
                match by_name.get_mut(name) {
                    Some(values) => values.push(entry),
                    None => {
                        by_name.insert(name.clone(), vec![entry]);
                    }
                }
            }
        }
        let deleting = clusters.iter().map(|c| c.deleting).collect();
        let tainted = clusters.iter().map(|c| !c.taints.is_empty()).collect();
        let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
        let cpu = clusters.iter().map(|c| finite(c.allocatable.cpu)).collect();
        let memory = clusters
            .iter()
            .map(|c| finite(c.allocatable.memory))
            .collect();
        Fleet {
            clusters,
            sets,
            bindings,
            scores,
            name_rank,
            by_name,
            index,
            set_members,
            score_values,
            strings,
            labels,
            claims,
            deleting,
            tainted,
            cpu,
            memory,
        }
    }

    /// The clusters, in the order given.
    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    /// The ManagedClusterSets.
    pub fn sets(&self) -> &[ManagedClusterSet] {
        &self.sets
    }

    /// The ManagedClusterSetBindings.
    pub fn bindings(&self) -> &[ManagedClusterSetBinding] {
        &self.bindings
    }

    /// The AddOnPlacementScores.
    pub fn scores(&self) -> &[AddOnPlacementScore] {
        &self.scores
    }

    /// A cluster by name.
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.index.get(name).map(|&i| &self.clusters[i as usize])
    }

    pub(crate) fn index_of(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// Members of `set` (by position in [`Fleet::sets`]), ascending cluster index.
    pub(crate) fn members(&self, set: usize) -> &[u32] {
        &self.set_members[set]
    }

    /// Position of a set in [`Fleet::sets`].
    pub(crate) fn set_position(&self, set: &ManagedClusterSet) -> Option<usize> {
        self.sets.iter().position(|s| std::ptr::eq(s, set))
    }

    /// Every value of AddOn score `score_name` in AddOnPlacementScores named `resource_name`.
    /// Two objects for the same cluster and name (which Kubernetes does not allow) both appear.
    pub(crate) fn score_values(&self, resource_name: &str, score_name: &str) -> &[ScoreValue] {
        self.score_values
            .get(resource_name)
            .and_then(|m| m.get(score_name))
            .map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::LabelSelector;

    #[test]
    fn name_rank_orders_clusters_by_name() {
        let f = Fleet::new(
            vec![Cluster::new("b"), Cluster::new("c"), Cluster::new("a")],
            vec![],
            vec![],
            vec![],
        );
        assert_eq!(f.by_name, [2, 0, 1]);
        assert_eq!(f.name_rank, [1, 2, 0]);
        assert_eq!(f.cluster("c").map(|c| c.name.as_str()), Some("c"));
        assert!(f.cluster("zz").is_none());
    }

    #[test]
    fn set_members_are_resolved_once() {
        let f = Fleet::new(
            vec![
                Cluster::new("a").in_set("prod"),
                Cluster::new("b").label("b", ""),
                Cluster::new("c").in_set("prod"),
            ],
            vec![
                ManagedClusterSet::exclusive("prod"),
                ManagedClusterSet::global(),
                ManagedClusterSet::with_selector("b", LabelSelector::default().exists("b")),
                ManagedClusterSet::exclusive("nobody"),
                ManagedClusterSet::with_selector(
                    "bad",
                    LabelSelector::default().in_values("b", Vec::<String>::new()),
                ),
            ],
            vec![],
            vec![],
        );
        assert_eq!(f.members(0), [0, 2]);
        assert_eq!(f.members(1), [0, 1, 2]);
        assert_eq!(f.members(2), [1]);
        assert!(f.members(3).is_empty());
        assert!(
            f.members(4).is_empty(),
            "an invalid selector selects nothing"
        );
    }

    #[test]
    fn addon_scores_are_filed_under_their_cluster() {
        let f = Fleet::new(
            vec![Cluster::new("a"), Cluster::new("b")],
            vec![],
            vec![],
            vec![
                AddOnPlacementScore::new("b", "default").score("x", 1),
                AddOnPlacementScore::new("ghost", "default").score("x", 2),
            ],
        );
        let values = f.score_values("default", "x");
        assert_eq!(values.len(), 1, "scores of unknown clusters are dropped");
        assert_eq!((values[0].cluster, values[0].value), (1, 1));
        assert!(f.score_values("default", "y").is_empty());
        assert!(f.score_values("other", "x").is_empty());
    }
}

//! Builder-style fixtures shared by the cross-module tests.

use std::time::{Duration, SystemTime};

use crate::{
    AddOnPlacementScore, Cluster, Fleet, ManagedClusterSet, ManagedClusterSetBinding, Taint,
    TaintEffect,
};

/// A fixed instant tests measure from.
pub(crate) fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

impl Cluster {
    /// A healthy test cluster: 4 cores, 16 GiB.
    pub(crate) fn test(name: &str) -> Self {
        Cluster::new(name)
            .cpu(4.0)
            .memory(16.0 * 1024.0 * 1024.0 * 1024.0)
    }
}

impl Taint {
    /// A taint added at `t(0)`.
    pub(crate) fn test(key: &str, value: &str, effect: TaintEffect) -> Self {
        Taint::new(key, value, effect, t(0))
    }
}

/// Clusters, sets, bindings and scores, built up in a test.
#[derive(Default)]
pub(crate) struct World {
    pub(crate) clusters: Vec<Cluster>,
    pub(crate) sets: Vec<ManagedClusterSet>,
    pub(crate) bindings: Vec<ManagedClusterSetBinding>,
    pub(crate) scores: Vec<AddOnPlacementScore>,
}

impl World {
    /// The `global` set bound in namespace `ns`.
    pub(crate) fn global(ns: &str) -> Self {
        World::default()
            .set(ManagedClusterSet::global())
            .bind(ns, "global")
    }

    pub(crate) fn cluster(mut self, c: Cluster) -> Self {
        self.clusters.push(c);
        self
    }

    pub(crate) fn clusters(mut self, cs: impl IntoIterator<Item = Cluster>) -> Self {
        self.clusters.extend(cs);
        self
    }

    pub(crate) fn set(mut self, s: ManagedClusterSet) -> Self {
        self.sets.push(s);
        self
    }

    pub(crate) fn bind(mut self, ns: &str, set: &str) -> Self {
        self.bindings.push(ManagedClusterSetBinding::new(ns, set));
        self
    }

    pub(crate) fn score(mut self, s: AddOnPlacementScore) -> Self {
        self.scores.push(s);
        self
    }

    pub(crate) fn fleet(&self) -> Fleet {
        Fleet::new(
            self.clusters.clone(),
            self.sets.clone(),
            self.bindings.clone(),
            self.scores.clone(),
        )
    }
}

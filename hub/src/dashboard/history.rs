//! What the fleet looked like a moment ago: each cluster's availability as the dashboard last
//! saw it, the latest transitions (a cluster turning Unknown…) and the counts sampled over time
//! for the availability plot. Pure state, fed by [`super::live`]'s task from the inventory's
//! change notifications; the hub keeps no history of its own.

use flotilla_api::meta::{self, COND_AVAILABLE, COND_HUB_DENIED};
use flotilla_api::v1::ManagedCluster;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

/// Where a cluster stands, as the overview counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Availability {
    /// Accepted, `ManagedClusterConditionAvailable=True`.
    Available,
    /// Accepted, `…Available=False`.
    Unavailable,
    /// Accepted, `…Available=Unknown` or not reported yet (a lease ran out).
    Unknown,
    /// Registered, neither accepted nor denied: waiting for an admin.
    Pending,
    /// Denied by an admin.
    Denied,
}

impl Availability {
    /// Every state, in display order.
    pub const ALL: [Availability; 5] = [
        Availability::Available,
        Availability::Unavailable,
        Availability::Unknown,
        Availability::Pending,
        Availability::Denied,
    ];

    /// The state of a cluster.
    pub fn of(c: &ManagedCluster) -> Self {
        let conditions = c
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        if !c.spec.as_ref().is_some_and(|s| s.hub_accepts_client) {
            return if meta::condition_status(conditions, COND_HUB_DENIED) == Some("True") {
                Availability::Denied
            } else {
                Availability::Pending
            };
        }
        match meta::condition_status(conditions, COND_AVAILABLE) {
            Some("True") => Availability::Available,
            Some("False") => Availability::Unavailable,
            _ => Availability::Unknown,
        }
    }

    /// Its name on pages, in URLs and in the live feed.
    pub fn as_str(self) -> &'static str {
        match self {
            Availability::Available => "Available",
            Availability::Unavailable => "Unavailable",
            Availability::Unknown => "Unknown",
            Availability::Pending => "Pending",
            Availability::Denied => "Denied",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Clusters per state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts(pub [usize; 5]);

impl Counts {
    /// Clusters in state `a`.
    pub fn get(&self, a: Availability) -> usize {
        self.0[a.index()]
    }

    /// All clusters.
    pub fn total(&self) -> usize {
        self.0.iter().sum()
    }

    pub(super) fn add(&mut self, a: Availability) {
        self.0[a.index()] += 1;
    }

    pub(super) fn sub(&mut self, a: Availability) {
        self.0[a.index()] = self.0[a.index()].saturating_sub(1);
    }
}

/// A cluster that changed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// When the dashboard saw it.
    pub at: SystemTime,
    /// The cluster.
    pub cluster: Arc<str>,
    /// Before (`None`: new).
    pub from: Option<Availability>,
    /// After (`None`: deleted).
    pub to: Option<Availability>,
}

/// The counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub at: SystemTime,
    /// The counts then.
    pub counts: Counts,
}

/// How much history is kept.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    /// Transitions kept (default 200).
    pub transitions: usize,
    /// Samples kept (default 720: two hours at one every 10 s).
    pub samples: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        Self {
            transitions: 200,
            samples: 720,
        }
    }
}

/// The dashboard's memory of the fleet.
#[derive(Debug, Default)]
pub struct History {
    limits: HistoryLimits,
    states: HashMap<Arc<str>, Availability>,
    counts: Counts,
    transitions: VecDeque<Transition>,
    samples: VecDeque<Sample>,
}

impl History {
    /// Empty, keeping what `limits` says.
    pub fn new(limits: HistoryLimits) -> Self {
        Self {
            limits,
            ..Default::default()
        }
    }

    /// Records a cluster's new state (`None`: deleted); the transition when it changed.
    /// Clusters seen for the first time while the history is being filled (`initial`) are
    /// not transitions.
    pub fn observe(
        &mut self,
        name: &Arc<str>,
        now: Option<Availability>,
        at: SystemTime,
        initial: bool,
    ) -> Option<Transition> {
        let before = match now {
            Some(a) => self.states.insert(name.clone(), a),
            None => self.states.remove(name),
        };
        if before == now {
            return None;
        }
        if let Some(b) = before {
            self.counts.sub(b);
        }
        if let Some(a) = now {
            self.counts.add(a);
        }
        if initial && before.is_none() {
            return None;
        }
        let t = Transition {
            at,
            cluster: name.clone(),
            from: before,
            to: now,
        };
        if self.transitions.len() == self.limits.transitions.max(1) {
            self.transitions.pop_front();
        }
        self.transitions.push_back(t.clone());
        Some(t)
    }

    /// Forgets clusters not in `present` (after a catch-up), as deletions.
    pub fn retain(
        &mut self,
        present: &std::collections::HashSet<Arc<str>>,
        at: SystemTime,
    ) -> Vec<Transition> {
        let gone: Vec<Arc<str>> = self
            .states
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        gone.iter()
            .filter_map(|k| self.observe(k, None, at, false))
            .collect()
    }

    /// Takes a sample of the counts now.
    pub fn sample(&mut self, at: SystemTime) {
        if self.samples.len() == self.limits.samples.max(1) {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            at,
            counts: self.counts,
        });
    }

    /// A cluster's state as last seen.
    pub fn state(&self, name: &str) -> Option<Availability> {
        self.states.get(name).copied()
    }

    /// The counts now.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The latest transitions, newest first, at most `n`.
    pub fn recent(&self, n: usize) -> Vec<Transition> {
        self.transitions.iter().rev().take(n).cloned().collect()
    }

    /// The latest transitions `keep` admits, newest first, at most `n`.
    pub fn recent_where(&self, n: usize, keep: impl Fn(&Transition) -> bool) -> Vec<Transition> {
        let kept = self.transitions.iter().rev().filter(|t| keep(t));
        kept.take(n).cloned().collect()
    }

    /// The counts over the clusters `keep` admits (a team's), by their state as last seen.
    pub fn counts_where(&self, keep: impl Fn(&str) -> bool) -> Counts {
        let mut counts = Counts::default();
        for (name, a) in &self.states {
            if keep(name) {
                counts.add(*a);
            }
        }
        counts
    }

    /// The states of the clusters `keep` admits (a team's), as last seen.
    pub fn states_where(&self, keep: impl Fn(&str) -> bool) -> HashMap<Arc<str>, Availability> {
        let kept = self.states.iter().filter(|(name, _)| keep(name));
        kept.map(|(name, a)| (name.clone(), *a)).collect()
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.iter().copied().collect()
    }
}

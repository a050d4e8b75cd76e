//! Rollouts' progress over time: the hub keeps a rollout's status now, not its past, so the
//! dashboard remembers what it saw — each replica set's and add-on's (done, failed, total)
//! every time it changed since this hub took the controllers. Pure and bounded: a point per
//! change (a repeat of the last is not kept), [`ProgressLimits::points`] per rollout,
//! [`ProgressLimits::rollouts`] rollouts (the one quiet longest goes first). Fed by
//! [`super::live`] from the controllers' change broadcasts.

use flotilla_api::v1::{ClusterManagementAddOn, ManifestWorkReplicaSet};
use std::collections::{HashMap, VecDeque};
use std::time::SystemTime;

/// Where a rollout stood at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// When the dashboard saw it.
    pub at: SystemTime,
    /// Clusters done (available / updated).
    pub done: i64,
    /// Clusters failed (degraded).
    pub failed: i64,
    /// Clusters the rollout covers.
    pub total: i64,
}

/// A replica set's (available, degraded, total).
pub fn of_replica_set(rs: &ManifestWorkReplicaSet) -> (i64, i64, i64) {
    let s = rs
        .status
        .as_ref()
        .and_then(|s| s.summary)
        .unwrap_or_default();
    (s.available.into(), s.degraded.into(), s.total.into())
}

/// An add-on's (updated, failed, total) over its install strategy's placements.
pub fn of_addon(cma: &ClusterManagementAddOn) -> (i64, i64, i64) {
    cma.status
        .as_ref()
        .map(|s| &s.install_progressions)
        .into_iter()
        .flatten()
        .fold((0, 0, 0), |(d, f, t), p| {
            (
                d + i64::from(p.updated),
                f + i64::from(p.failed),
                t + i64::from(p.total),
            )
        })
}

/// How much is kept.
#[derive(Debug, Clone, Copy)]
pub struct ProgressLimits {
    /// Points per rollout (default 240).
    pub points: usize,
    /// Rollouts remembered (default 1,024).
    pub rollouts: usize,
}

impl Default for ProgressLimits {
    fn default() -> Self {
        Self {
            points: 240,
            rollouts: 1024,
        }
    }
}

/// Every rollout's points, by key (`rollout:<ns>/<name>`, `addon:<name>`).
#[derive(Debug, Default)]
pub struct Progress {
    limits: ProgressLimits,
    series: HashMap<String, VecDeque<Point>>,
}

impl Progress {
    /// Empty, bounded by `limits`.
    pub fn new(limits: ProgressLimits) -> Self {
        Self {
            limits,
            series: HashMap::new(),
        }
    }

    /// Records where `key` stands at `at` (nothing when it stands where it stood).
    pub fn record(&mut self, key: &str, at: SystemTime, (done, failed, total): (i64, i64, i64)) {
        let point = Point {
            at,
            done,
            failed,
            total,
        };
        if let Some(s) = self.series.get_mut(key) {
            if s.back()
                .is_some_and(|p| (p.done, p.failed, p.total) == (done, failed, total))
            {
                return;
            }
            s.push_back(point);
            while s.len() > self.limits.points.max(2) {
                s.pop_front();
            }
            return;
        }
        while self.series.len() >= self.limits.rollouts.max(1) {
            let quietest = self
                .series
                .iter()
                .min_by_key(|(_, s)| s.back().map(|p| p.at))
                .map(|(k, _)| k.clone());
            match quietest {
                Some(k) => self.series.remove(&k),
                None => break,
            };
        }
        self.series.insert(key.to_string(), VecDeque::from([point]));
    }

    /// Forgets a deleted rollout.
    pub fn forget(&mut self, key: &str) {
        self.series.remove(key);
    }

    /// The points of `key`, oldest first.
    pub fn points(&self, key: &str) -> Vec<Point> {
        self.series
            .get(key)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Rollouts remembered.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

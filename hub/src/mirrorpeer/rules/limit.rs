//! Per-cluster limits on `flotilla.peers.<cluster>`: a token bucket of requests, so one spoke
//! cannot keep the MirrorPeers' task (one mailbox for every cluster) busy, and a budget of
//! warnings, so one spoke cannot flood the hub's log. Pure: the clock is passed in. Bounded:
//! an entry forgets itself once idle (its bucket full again and its warning interval over),
//! and at most [`RequestLimits::max_clusters`] are held (the longest idle goes first).

use crate::limits::TokenBucket;
use std::collections::HashMap;
use std::time::Duration;
use std::time::Instant;

/// Default sustained requests per second of one cluster.
pub const DEFAULT_PER_SECOND: f64 = 5.0;
/// Default burst: an agent's round asks up to 8 times in a row, and a poke may start another.
pub const DEFAULT_BURST: u32 = 20;
/// Default interval between two warnings about one cluster.
pub const DEFAULT_WARN_INTERVAL: Duration = Duration::from_secs(60);
/// Default number of clusters tracked at most.
pub const DEFAULT_MAX_CLUSTERS: usize = 10_000;

/// The limits (part of [`super::super::MirrorPeerConfig`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestLimits {
    /// Requests one cluster may make per second, sustained (default 5; at most 1,000,000).
    pub per_second: f64,
    /// Requests one cluster may make at once (default 20; at least 1).
    pub burst: u32,
    /// One warning about a cluster per interval at most; the rest are counted and the count
    /// is logged with the next one (default 60 s).
    pub warn_interval: Duration,
    /// Clusters tracked at most (default 10,000).
    pub max_clusters: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            per_second: DEFAULT_PER_SECOND,
            burst: DEFAULT_BURST,
            warn_interval: DEFAULT_WARN_INTERVAL,
            max_clusters: DEFAULT_MAX_CLUSTERS,
        }
    }
}

/// One cluster's bucket and warning budget.
#[derive(Debug, Clone)]
struct Entry {
    bucket: TokenBucket,
    /// When a warning about it was last logged.
    warned: Option<Instant>,
    /// Warnings left out since.
    suppressed: u64,
}

/// The per-cluster state.
#[derive(Debug)]
pub struct Limiter {
    limits: RequestLimits,
    clusters: HashMap<String, Entry>,
    /// When idle entries were last looked for.
    swept: Option<Instant>,
}

impl Limiter {
    /// No cluster tracked yet.
    pub fn new(limits: RequestLimits) -> Self {
        Self {
            limits,
            clusters: HashMap::new(),
            swept: None,
        }
    }

    fn rate(&self) -> f64 {
        self.limits.per_second.clamp(f64::MIN_POSITIVE, 1e6)
    }

    fn burst(&self) -> f64 {
        f64::from(self.limits.burst.max(1))
    }

    /// How long an entry lasts unused before it holds nothing a new one would not.
    fn idle_after(&self) -> Duration {
        Duration::from_secs_f64((self.burst() / self.rate()).min(86_400.0))
            .max(self.limits.warn_interval)
    }

    /// Entries held (at most [`RequestLimits::max_clusters`]).
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// Whether no cluster is tracked.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Spends one request of `cluster` at `now`; `Err` says what the cluster is told: past its
    /// rate it asks again later (the agent backs off and asks again on any refusal).
    pub fn admit(&mut self, cluster: &str, now: Instant) -> Result<(), String> {
        let (rate, burst) = (self.rate(), self.burst());
        let e = self.entry(cluster, now);
        if e.bucket.available(now, rate, burst) < 1 {
            return Err(format!(
                "cluster {cluster:?} is over the hub's MirrorPeer request limit ({} a second, \
                 bursts of {}); ask again later",
                self.limits.per_second,
                self.limits.burst.max(1)
            ));
        }
        e.bucket.spend(1);
        Ok(())
    }

    /// Whether a warning about `cluster` may be logged at `now`: `Some(n)`, with the `n`
    /// warnings left out since the last one, at most once per
    /// [`RequestLimits::warn_interval`]; `None` (counted) otherwise.
    pub fn warn(&mut self, cluster: &str, now: Instant) -> Option<u64> {
        let interval = self.limits.warn_interval;
        let e = self.entry(cluster, now);
        if e.warned
            .is_some_and(|t| now.saturating_duration_since(t) < interval)
        {
            e.suppressed += 1;
            return None;
        }
        e.warned = Some(now);
        Some(std::mem::take(&mut e.suppressed))
    }

    /// Forgets the entries idle at `now` (at most once per idle period, or at once when
    /// `force`); returns the warnings they left out, by cluster, for the caller to report.
    pub fn sweep(&mut self, now: Instant, force: bool) -> Vec<(String, u64)> {
        let idle = self.idle_after();
        if !force
            && self
                .swept
                .is_some_and(|t| now.saturating_duration_since(t) < idle)
        {
            return Vec::new();
        }
        self.swept = Some(now);
        let mut left_out = Vec::new();
        self.clusters.retain(|cluster, e| {
            let last = e.warned.map_or(e.bucket.at(), |w| w.max(e.bucket.at()));
            let keep = now.saturating_duration_since(last) < idle;
            if !keep && e.suppressed > 0 {
                left_out.push((cluster.clone(), e.suppressed));
            }
            keep
        });
        left_out.sort();
        left_out
    }

    /// `cluster`'s entry, made (a full bucket) when missing; at the cap, idle entries go first
    /// and then the one used longest ago.
    fn entry(&mut self, cluster: &str, now: Instant) -> &mut Entry {
        if !self.clusters.contains_key(cluster) {
            let max = self.limits.max_clusters.max(1);
            if self.clusters.len() >= max {
                // What idle entries left out is lost here: the cap is for floods of names.
                self.sweep(now, true);
            }
            if self.clusters.len() >= max
                && let Some(oldest) = self
                    .clusters
                    .iter()
                    .min_by_key(|(_, e)| e.warned.map_or(e.bucket.at(), |w| w.max(e.bucket.at())))
                    .map(|(c, _)| c.clone())
            {
                self.clusters.remove(&oldest);
            }
        }
        let burst = self.burst();
        self.clusters
            .entry(cluster.to_string())
            .or_insert_with(|| Entry {
                bucket: TokenBucket::full(burst, now),
                warned: None,
                suppressed: 0,
            })
    }
}

//! The audit lines of refused authentications (docs/notes/issue-48-design.md §8.5): a call with
//! no bearer, an unknown or expired one, an ID token refused, on the gRPC API, the cluster
//! proxy and the dashboard's sign-ins. Each is a line on the `flotilla::audit` target like an
//! accepted call's — user `<unauthenticated>`, the action tried, why (the text the caller is
//! told, never the token), the source address — and the lines are bounded: anyone can send
//! refused calls as fast as the network carries them, and the audit log must not become the
//! way to fill a disk or bury another caller's attempts.
//!
//! The bound ([`Limiter`], pure: the clock is passed in) is a token bucket per source address
//! ([`PER_SOURCE`]) under one for the hub ([`GLOBAL`]): a flood from one address spends its own
//! bucket, not everyone's. A line not written is counted, and the next line written says how many
//! were dropped before it (`suppressed`), so the log still says that a flood happened and how big.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

/// A bucket's shape: lines at once, and lines a second after that.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Lines written at once from a full bucket.
    pub burst: f64,
    /// Lines a second it refills with.
    pub per_second: f64,
}

/// Each source address's bucket: 20 lines at once, then 2 a second.
pub const PER_SOURCE: Rate = Rate {
    burst: 20.0,
    per_second: 2.0,
};

/// The hub's bucket over every source: 200 lines at once, then 50 a second.
pub const GLOBAL: Rate = Rate {
    burst: 200.0,
    per_second: 50.0,
};

/// Source addresses whose buckets are kept; past it the full (idle) ones are forgotten, and
/// while it stays full the global bucket alone bounds the lines.
pub const SOURCES_MAX: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Self {
            tokens: rate.burst,
            at: now,
        }
    }

    /// Refilled up to `now`.
    fn refill(&mut self, rate: Rate, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * rate.per_second).min(rate.burst);
        self.at = now;
    }

    fn has_one(&self) -> bool {
        self.tokens >= 1.0
    }
}

/// Whether to write a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Write it, saying how many lines were dropped since the last one written.
    Write {
        /// Lines dropped since the last one written.
        suppressed: u64,
    },
    /// Drop it (counted).
    Drop,
}

/// The token buckets of the refused-authentication lines.
#[derive(Debug)]
pub struct Limiter {
    per_source: Rate,
    global_rate: Rate,
    global: Bucket,
    sources: HashMap<Option<IpAddr>, Bucket>,
    suppressed: u64,
}

impl Limiter {
    /// Buckets of `per_source` and `global` shapes, full at `now`.
    pub fn new(per_source: Rate, global: Rate, now: Instant) -> Self {
        Self {
            per_source,
            global_rate: global,
            global: Bucket::full(global, now),
            sources: HashMap::new(),
            suppressed: 0,
        }
    }

    /// Whether a refusal from `source` (unknown: `None`, one bucket for all such) at `now` is
    /// written.
    pub fn admit(&mut self, source: Option<IpAddr>, now: Instant) -> Admit {
        self.global.refill(self.global_rate, now);
        if self.sources.len() >= SOURCES_MAX && !self.sources.contains_key(&source) {
            let rate = self.per_source;
            self.sources.retain(|_, b| {
                b.refill(rate, now);
                b.tokens < rate.burst
            });
        }
        let per_source = self.per_source;
        let known = self.sources.len() < SOURCES_MAX || self.sources.contains_key(&source);
        let own = if known {
            let bucket =
                (self.sources.entry(source)).or_insert_with(|| Bucket::full(per_source, now));
            bucket.refill(per_source, now);
            Some(bucket)
        } else {
            None
        };
        if !self.global.has_one() || own.as_ref().is_some_and(|b| !b.has_one()) {
            self.suppressed += 1;
            return Admit::Drop;
        }
        if let Some(bucket) = own {
            bucket.tokens -= 1.0;
        }
        self.global.tokens -= 1.0;
        Admit::Write {
            suppressed: std::mem::take(&mut self.suppressed),
        }
    }
}

/// The hub process's limiter (one hub per process in production; tests in one process share it).
static LIMITER: LazyLock<Mutex<Limiter>> =
    LazyLock::new(|| Mutex::new(Limiter::new(PER_SOURCE, GLOBAL, Instant::now())));

/// The audit line of a refused authentication from `source`: the `action` tried (`call
/// /flotilla.v1.ClusterService/ListClusters`, `proxy get core/pods on cluster a1`, `dashboard
/// sign-in (oidc)`) and why — the text the caller is told, which never carries the token —
/// unless its source's or the hub's bound is spent ([`Limiter`]).
pub fn audit_unauthenticated(source: Option<IpAddr>, action: &str, why: &str) {
    let admit = LIMITER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .admit(source, Instant::now());
    let Admit::Write { suppressed } = admit else {
        return;
    };
    let source = source.map(|s| s.to_string()).unwrap_or_default();
    tracing::info!(
        target: "flotilla::audit",
        user = "<unauthenticated>", groups = "", via = "none", action, missing = why,
        outcome = "refused", source, suppressed, "audit"
    );
}

/// The address a gRPC call came from (plain TCP or TLS), as tonic's server records it.
pub fn peer_of<B>(req: &http::Request<B>) -> Option<SocketAddr> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let ext = req.extensions();
    ext.get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|t| t.get_ref().remote_addr())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    fn written(limiter: &mut Limiter, source: Option<IpAddr>, n: usize, now: Instant) -> usize {
        (0..n)
            .filter(|_| matches!(limiter.admit(source, now), Admit::Write { .. }))
            .count()
    }

    #[test]
    fn a_flood_from_one_source_is_bounded_and_the_next_line_counts_what_was_dropped() {
        let t0 = Instant::now();
        let mut limiter = Limiter::new(PER_SOURCE, GLOBAL, t0);
        assert_eq!(written(&mut limiter, ip(1), 1_000, t0), 20);
        // Another source still gets its lines: the flood spent its own bucket only.
        assert_eq!(limiter.admit(ip(2), t0), Admit::Write { suppressed: 980 });
        // A second later the flooder has two more lines; the first says what was dropped.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(limiter.admit(ip(1), t1), Admit::Write { suppressed: 0 });
        assert_eq!(limiter.admit(ip(1), t1), Admit::Write { suppressed: 0 });
        assert_eq!(limiter.admit(ip(1), t1), Admit::Drop);
        assert_eq!(limiter.admit(ip(2), t1), Admit::Write { suppressed: 1 });
    }

    #[test]
    fn many_sources_at_once_are_bounded_by_the_hubs_bucket() {
        let t0 = Instant::now();
        let mut limiter = Limiter::new(PER_SOURCE, GLOBAL, t0);
        let total: usize = (0..=255u8)
            .map(|i| written(&mut limiter, ip(i), 5, t0))
            .sum();
        assert_eq!(total, 200);
        // It refills at its rate: 50 a second.
        let t1 = t0 + Duration::from_secs(1);
        let more: usize = (0..=255u8)
            .map(|i| written(&mut limiter, ip(i), 1, t1))
            .sum();
        assert_eq!(more, 50);
    }

    #[test]
    fn the_sources_table_is_bounded_and_forgets_idle_sources_first() {
        let t0 = Instant::now();
        let mut limiter = Limiter::new(
            PER_SOURCE,
            Rate {
                burst: 1e9,
                per_second: 1e9,
            },
            t0,
        );
        for i in 0..SOURCES_MAX as u32 {
            let source = Some(IpAddr::from(i.to_be_bytes()));
            assert!(matches!(limiter.admit(source, t0), Admit::Write { .. }));
        }
        assert_eq!(limiter.sources.len(), SOURCES_MAX);
        // Ten seconds on every bucket is full again: a new source makes room.
        let later = t0 + Duration::from_secs(10);
        assert!(matches!(
            limiter.admit(Some(IpAddr::from([192, 168, 0, 1])), later),
            Admit::Write { .. }
        ));
        assert_eq!(limiter.sources.len(), 1);
    }
}

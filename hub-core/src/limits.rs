//! Limits on what spokes may make the hub keep, each configurable, counted and refused with a
//! clear reason (`flotilla_hub_limit_refusals_total{limit}`):
//!
//! - `bootstrap_pending`: pending clusters (neither accepted nor denied) that registrations made
//!   through a credential not bound to the name may create — the shared bootstrap credential
//!   would otherwise let anyone who holds it make an actor and a KV record per name they invent;
//! - `bootstrap_rate`: new names per second one requesting credential may register (a token
//!   bucket per NATS user, burst of one second's worth). Secure mode only: in plain mode there
//!   are no credentials to tell apart, and a simulator joining 100,000 clusters is no attack;
//! - `status_unknown`: status messages the hub cannot use (unknown cluster, work or kind, bad
//!   input) are purged from the status stream by [`crate::janitor`], so a cluster publishing
//!   endless distinct subjects cannot fill JetStream; the stream itself is bounded in bytes and
//!   age ([`StreamLimits`]).

use crate::inventory::ClusterInventory;
use crate::metrics::Metrics;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Limit settings (flags `--bootstrap-pending-max`, `--bootstrap-register-rate`,
/// `--status-stream-max-bytes`, `--status-stream-max-age`, `--registrations-in-flight`).
#[derive(Debug, Clone)]
pub struct LimitsConfig {
    /// Pending clusters registrations may create, at most.
    pub bootstrap_pending_max: usize,
    /// New names per second per requesting credential.
    pub bootstrap_register_rate: f64,
    /// Status stream bounds.
    pub stream: StreamLimits,
    /// Status messages a cluster may send in a minute that the hub cannot use before it is
    /// counted and logged as flooding (every such message is removed either way).
    pub status_unknown_max: u32,
    /// New names being created at once, at most; registrations past it are answered busy
    /// ([`crate::admission`]).
    pub registrations_in_flight: usize,
}

/// Default [`LimitsConfig::status_unknown_max`].
pub const DEFAULT_STATUS_UNKNOWN_MAX: u32 = 100;

/// Bounds of the status stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Bytes (-1: unlimited). When full the oldest status messages go (the hub keeps its state
    /// in KV; a lost status message is repaired by the agent's status resync).
    pub max_bytes: i64,
    /// Age after which a status message goes (zero: never).
    pub max_age: Duration,
}

/// Default pending clusters registrations may create.
pub const DEFAULT_BOOTSTRAP_PENDING_MAX: usize = 1000;
/// Default new names per second per credential: a fleet of 100,000 sharing one bootstrap
/// credential joins in under ten minutes, and one leaked credential makes no more than that.
pub const DEFAULT_BOOTSTRAP_REGISTER_RATE: f64 = 200.0;
/// Default status stream size: 8 GiB.
pub const DEFAULT_STATUS_STREAM_MAX_BYTES: i64 = 8 << 30;
/// Default status message age: 7 days.
pub const DEFAULT_STATUS_STREAM_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            bootstrap_pending_max: DEFAULT_BOOTSTRAP_PENDING_MAX,
            bootstrap_register_rate: DEFAULT_BOOTSTRAP_REGISTER_RATE,
            stream: StreamLimits::default(),
            status_unknown_max: DEFAULT_STATUS_UNKNOWN_MAX,
            registrations_in_flight: crate::admission::DEFAULT_REGISTRATIONS_IN_FLIGHT,
        }
    }
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_STATUS_STREAM_MAX_BYTES,
            max_age: DEFAULT_STATUS_STREAM_MAX_AGE,
        }
    }
}

/// A refusal at a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The limit's metric label.
    pub limit: &'static str,
    /// What the requester is told.
    pub message: String,
}

/// Admits registrations of new names: the pending cap and the per-credential rate.
#[derive(Debug)]
pub struct NewNames {
    config: LimitsConfig,
    /// Whether new names may be accepted as they register (then an admitted name is not
    /// counted as pending until the next count from the inventory says it is).
    auto_accept: bool,
    state: Mutex<GateState>,
}

#[derive(Debug, Default)]
struct GateState {
    /// Pending clusters: counted from the inventory at most once a second, plus the ones
    /// admitted since.
    pending: usize,
    counted_at: Option<Instant>,
    buckets: HashMap<String, TokenBucket>,
}

/// A token bucket: `rate` tokens a second, at most `burst` saved. Pure: the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn full(burst: f64, now: Instant) -> Self {
        Self {
            tokens: burst,
            at: now,
        }
    }

    /// The whole tokens available at `now` (refilled at `rate` a second, at most `burst`).
    pub fn available(&mut self, now: Instant, rate: f64, burst: f64) -> u64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.max(0.0)).min(burst);
        self.at = self.at.max(now);
        self.tokens.max(0.0).floor() as u64
    }

    /// Spends `n` tokens (as many as were available at most).
    pub fn spend(&mut self, n: u64) {
        self.tokens = (self.tokens - n as f64).max(0.0);
    }

    /// When it last counted.
    pub fn at(&self) -> Instant {
        self.at
    }
}

impl NewNames {
    /// A gate with these limits; `auto_accept` says whether the hub has an auto-accept policy.
    pub fn new(config: LimitsConfig, auto_accept: bool) -> Self {
        Self {
            config,
            auto_accept,
            state: Mutex::new(GateState::default()),
        }
    }

    fn admitted(&self, st: &mut GateState) {
        if !self.auto_accept {
            st.pending += 1;
        }
    }

    /// Admits (or refuses, counted) a registration of a name the hub has never seen, from the
    /// credential `who` (a NATS user key; `None` in plain mode, where only the pending cap
    /// applies).
    pub fn admit(
        &self,
        who: Option<&str>,
        inventory: &ClusterInventory,
        metrics: &Metrics,
        now: Instant,
    ) -> Result<(), Refusal> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st
            .counted_at
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            st.pending = inventory
                .snapshot()
                .iter()
                .filter(|c| {
                    !crate::cluster::rules::accepted(c) && !crate::cluster::rules::denied(c)
                })
                .count();
            st.counted_at = Some(now);
        }
        let refuse = |limit: &'static str, message: String| {
            metrics.limit_refused(limit);
            Err(Refusal { limit, message })
        };
        if st.pending >= self.config.bootstrap_pending_max {
            return refuse(
                "bootstrap_pending",
                format!(
                    "the hub holds {} pending clusters, its limit (--bootstrap-pending-max); \
                     ask the hub admin to accept or deny pending clusters, or for a join \
                     credential for this name",
                    st.pending
                ),
            );
        }
        let Some(who) = who else {
            self.admitted(&mut st);
            return Ok(());
        };
        Self::spend(&mut st, &self.config, who, metrics, now)?;
        self.admitted(&mut st);
        Ok(())
    }

    /// Spends one registration of credential `who` (a known name): refused past the rate.
    pub fn rate(&self, who: &str, metrics: &Metrics, now: Instant) -> Result<(), Refusal> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Self::spend(&mut st, &self.config, who, metrics, now)
    }

    fn spend(
        st: &mut GateState,
        config: &LimitsConfig,
        who: &str,
        metrics: &Metrics,
        now: Instant,
    ) -> Result<(), Refusal> {
        let rate = config.bootstrap_register_rate.max(0.0);
        let burst = rate.max(1.0);
        // Forget idle credentials so the map stays small.
        if st.buckets.len() > 10_000 {
            st.buckets
                .retain(|_, b| now.saturating_duration_since(b.at()) < Duration::from_secs(60));
        }
        let bucket = st
            .buckets
            .entry(who.to_string())
            .or_insert(TokenBucket::full(burst, now));
        if bucket.available(now, rate, burst) < 1 {
            metrics.limit_refused("bootstrap_rate");
            return Err(Refusal {
                limit: "bootstrap_rate",
                message: format!(
                    "too many registrations from this credential: at most {rate} a second \
                     (--bootstrap-register-rate); try again later"
                ),
            });
        }
        bucket.spend(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(max: usize, rate: f64) -> NewNames {
        NewNames::new(
            LimitsConfig {
                bootstrap_pending_max: max,
                bootstrap_register_rate: rate,
                stream: StreamLimits::default(),
                status_unknown_max: DEFAULT_STATUS_UNKNOWN_MAX,
                ..LimitsConfig::default()
            },
            false,
        )
    }

    #[test]
    fn new_names_stop_at_the_pending_cap() {
        let g = gate(3, 1000.0);
        let (inv, m, now) = (ClusterInventory::new(16), Metrics::new(), Instant::now());
        for _ in 0..3 {
            g.admit(Some("UBOOT"), &inv, &m, now).unwrap();
        }
        let e = g.admit(Some("UBOOT"), &inv, &m, now).unwrap_err();
        assert_eq!(e.limit, "bootstrap_pending");
        assert!(e.message.contains("--bootstrap-pending-max"), "{e}");
    }

    #[test]
    fn each_credential_has_its_own_rate() {
        let g = gate(1000, 2.0);
        let (inv, m, now) = (ClusterInventory::new(16), Metrics::new(), Instant::now());
        g.admit(Some("UA"), &inv, &m, now).unwrap();
        g.admit(Some("UA"), &inv, &m, now).unwrap();
        assert_eq!(
            g.admit(Some("UA"), &inv, &m, now).unwrap_err().limit,
            "bootstrap_rate"
        );
        g.admit(Some("UB"), &inv, &m, now).unwrap();
        // Plain mode (no credential): no rate, only the cap.
        for _ in 0..10 {
            g.admit(None, &inv, &m, now).unwrap();
        }
        // Half a second later one more token is there.
        g.admit(Some("UA"), &inv, &m, now + Duration::from_millis(500))
            .unwrap();
    }

    #[test]
    fn a_token_bucket_refills_at_its_rate_up_to_its_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::full(5.0, t0);
        assert_eq!(b.available(t0, 2.0, 5.0), 5);
        b.spend(5);
        assert_eq!(b.available(t0, 2.0, 5.0), 0);
        assert_eq!(b.available(t0 + Duration::from_millis(1500), 2.0, 5.0), 3);
        b.spend(10);
        assert_eq!(b.available(t0 + Duration::from_millis(1500), 2.0, 5.0), 0);
        // Never past the burst, and a clock that goes back changes nothing.
        assert_eq!(b.available(t0 + Duration::from_secs(60), 2.0, 5.0), 5);
        assert_eq!(b.available(t0, 2.0, 5.0), 5);
    }
}

//! Riding through JetStream elections (I/O: it sleeps). A store call that fails in a way an
//! election explains ([`flotilla_bus::election`]: no stream leader, no responders, a timeout,
//! "not leader") is made again after a growing pause (100 ms doubling to 1 s, jittered) until
//! it succeeds or the caller's patience runs out; only then is it
//! [`StoreError::Unavailable`], whose message says how long the store was waited for and to
//! retry. Anything else — a lost compare-and-set, a fence, a value that does not decode — is
//! an answer and returns at once.
//!
//! Patience is [`patience`] (`--store-patience-seconds`, process-wide: a process runs one hub)
//! for every call, except while the hub starts: inside [`starting`] a call waits as long as
//! the start may (`--store-wait-seconds`, default without bound) and says what it waits for
//! to whoever watches the start (`/healthz`).
//!
//! Retrying a write is safe: a publish that reached no leader wrote nothing, and one whose
//! acknowledgement timed out but landed makes the retry a conflict that
//! [`super::Bucket::write`] recognises as its own write (same bytes, a newer revision).

use super::StoreError;
use flotilla_bus::election::Why;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::future::Future;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Default [`patience`]: longer than the elections measured on a loaded 2-core machine
/// (BENCHMARKS.md, "Elections"), shorter than a client's usual deadline.
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(20);

/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(1);

static PATIENCE_MS: AtomicU64 = AtomicU64::new(DEFAULT_PATIENCE.as_millis() as u64);

/// When this process last saw a failure an election explains (milliseconds since the Unix
/// epoch; 0: never).
static LAST_ELECTION_MS: AtomicU64 = AtomicU64::new(0);

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Notes that a store call (or a lease renewal) just failed in a way an election explains.
pub fn saw_election() {
    LAST_ELECTION_MS.fetch_max(unix_ms(), Ordering::Relaxed);
}

/// Whether this process saw an election's failure within `within`: shards are not handed over
/// meanwhile (a hand-over in the middle of an election cuts calls off and starts the shard
/// again on a store that does not answer).
pub fn electing_within(within: Duration) -> bool {
    let last = LAST_ELECTION_MS.load(Ordering::Relaxed);
    last != 0 && unix_ms().saturating_sub(last) < u64::try_from(within.as_millis()).unwrap_or(0)
}

/// How long a store call outside the start waits for an election.
pub fn patience() -> Duration {
    Duration::from_millis(PATIENCE_MS.load(Ordering::Relaxed))
}

/// Sets [`patience`] (`--store-patience-seconds`).
pub fn set_patience(patience: Duration) {
    PATIENCE_MS.store(
        u64::try_from(patience.as_millis()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// A hub's start, as the store calls made during it see it.
#[derive(Clone)]
pub struct Start {
    /// When the start gives up (`None`: never).
    until: Option<Instant>,
    /// What the start waits for now (`None`: nothing).
    waiting: watch::Sender<Option<String>>,
}

impl Start {
    /// A start that waits at most `limit` for the store (`None`: as long as it takes).
    pub fn new(limit: Option<Duration>) -> Self {
        Self {
            until: limit.map(|l| Instant::now() + l),
            waiting: watch::Sender::new(None),
        }
    }

    /// What the start waits for, as it changes.
    pub fn waiting(&self) -> watch::Receiver<Option<String>> {
        self.waiting.subscribe()
    }
}

tokio::task_local! {
    static START: Start;
}

/// Runs `f` (the hub's start) with store calls that wait for the store as `start` allows.
pub async fn starting<F: Future>(start: Start, f: F) -> F::Output {
    START.scope(start, f).await
}

/// Tells whoever watches the start what it waits for now (nothing outside a start).
pub fn waiting_for(what: Option<String>) {
    let _ = START.try_with(|s| s.waiting.send_replace(what));
}

/// Whether the start has waited as long as it may (never outside a start: a caller outside
/// one has its own patience).
pub fn start_expired() -> bool {
    START
        .try_with(|s| s.until.is_some_and(|u| Instant::now() >= u))
        .unwrap_or(false)
}

/// The calls that waited, by what they did and why.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    op: &'static str,
    reason: &'static str,
}

/// What riding through elections cost, over the process.
#[derive(Debug, Default, Clone)]
pub struct RideMetrics {
    /// Attempts made again, by operation and reason.
    retries: Family<Labels, Counter>,
    /// Calls that gave up (answered unavailable).
    unavailable: Counter,
    /// Milliseconds calls spent waiting for elections (summed).
    waited_ms: Counter,
    /// The longest wait a call that then succeeded saw, in milliseconds.
    longest_ms: Gauge,
    /// Calls waiting now.
    waiting: Gauge,
}

/// The process's [`RideMetrics`].
pub static METRICS: LazyLock<RideMetrics> = LazyLock::new(RideMetrics::default);

impl RideMetrics {
    /// Registers them (under the hub's `store` prefix).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "election_retries",
            "Store calls made again because a JetStream election explained their failure",
            self.retries.clone(),
        );
        registry.register(
            "unavailable",
            "Store calls that waited out their patience and were answered unavailable",
            self.unavailable.clone(),
        );
        registry.register(
            "election_wait_milliseconds",
            "Milliseconds store calls spent waiting for JetStream elections",
            self.waited_ms.clone(),
        );
        registry.register(
            "longest_election_wait_milliseconds",
            "The longest a store call that then succeeded waited for an election",
            self.longest_ms.clone(),
        );
        registry.register(
            "waiting",
            "Store calls waiting for a JetStream election now",
            self.waiting.clone(),
        );
    }

    /// The longest wait seen so far (for `/debug/store` and tests).
    pub fn longest(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.longest_ms.get()).unwrap_or_default())
    }

    /// Attempts made again so far.
    pub fn retries(&self) -> u64 {
        let mut total = 0;
        for op in OPS {
            for why in WHYS {
                total += self
                    .retries
                    .get_or_create(&Labels {
                        op,
                        reason: why.label(),
                    })
                    .get();
            }
        }
        total
    }
}

const OPS: [&str; 4] = ["open", "read", "load", "write"];
const WHYS: [Why; 6] = [
    Why::NoStream,
    Why::NoResponders,
    Why::TimedOut,
    Why::NoLeader,
    Why::Disconnected,
    Why::NotReady,
];

/// What a call does, for logs, metrics and its error.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `open`, `read`, `load` or `write`.
    pub op: &'static str,
    /// The bucket.
    pub bucket: &'a str,
    /// The key (empty: the whole bucket).
    pub key: &'a str,
}

/// An error a ridden call may fail with: it says whether an election explains it, and how a
/// call that waited out its patience is answered.
pub trait Ridden: std::fmt::Display + Sized {
    /// Whether a JetStream election explains it.
    fn election(&self) -> Option<Why>;
    /// The answer of a call that waited `waited` and last failed with `last`.
    fn unavailable(what: Call<'_>, waited: Duration, why: Why, last: &Self) -> Self;
}

impl Ridden for StoreError {
    fn election(&self) -> Option<Why> {
        StoreError::election(self)
    }

    fn unavailable(what: Call<'_>, waited: Duration, why: Why, last: &Self) -> Self {
        StoreError::Unavailable {
            bucket: what.bucket.to_string(),
            key: what.key.to_string(),
            waited,
            why,
            last: last.to_string(),
        }
    }
}

/// The pause before attempt `attempt + 1`.
fn pause(attempt: u32) -> Duration {
    flotilla_bus::connect::backoff(attempt as usize, MAX_PAUSE)
}

/// Makes `call` until it succeeds, fails in a way no election explains, or the patience
/// runs out.
pub async fn ride<T, E, F, Fut>(what: Call<'_>, mut call: F) -> Result<T, E>
where
    E: Ridden,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let start = START.try_with(Clone::clone).ok();
    let until = match &start {
        Some(s) => s.until,
        None => Some(started + patience()),
    };
    let mut attempt = 0u32;
    let mut waiting = None;
    loop {
        let error = match call().await {
            Ok(v) => {
                if attempt > 0 {
                    let waited = started.elapsed();
                    METRICS.waited_ms.inc_by(millis(waited));
                    let longest = i64::try_from(millis(waited)).unwrap_or(i64::MAX);
                    if longest > METRICS.longest_ms.get() {
                        METRICS.longest_ms.set(longest);
                    }
                    tracing::info!(
                        op = what.op,
                        bucket = what.bucket,
                        key = what.key,
                        waited_ms = waited.as_millis() as u64,
                        attempts = attempt + 1,
                        "the store answered after a JetStream election"
                    );
                    if let Some(s) = &start {
                        s.waiting.send_replace(None);
                    }
                }
                return Ok(v);
            }
            Err(e) => e,
        };
        let Some(why) = error.election() else {
            return Err(error);
        };
        saw_election();
        let next = pause(attempt);
        if until.is_some_and(|u| Instant::now() + next > u) {
            METRICS.unavailable.inc();
            let waited = started.elapsed();
            METRICS.waited_ms.inc_by(millis(waited));
            return Err(E::unavailable(what, waited, why, &error));
        }
        METRICS
            .retries
            .get_or_create(&Labels {
                op: what.op,
                reason: why.label(),
            })
            .inc();
        if attempt == 0 {
            tracing::info!(
                op = what.op, bucket = what.bucket, key = what.key, reason = %why, %error,
                "waiting for a JetStream election"
            );
        } else if attempt.is_multiple_of(20) {
            tracing::warn!(
                op = what.op, bucket = what.bucket, key = what.key, reason = %why, %error,
                waited_s = started.elapsed().as_secs(),
                "still waiting for the store"
            );
        }
        if let Some(s) = &start {
            s.waiting.send_replace(Some(format!(
                "{} {}{}{}: {why} (for {} s)",
                what.op,
                what.bucket,
                if what.key.is_empty() { "" } else { "/" },
                what.key,
                started.elapsed().as_secs()
            )));
        }
        let _gauge = waiting.get_or_insert_with(|| Waiting::new(&METRICS.waiting));
        tokio::time::sleep(next).await;
        attempt += 1;
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One call counted in the `waiting` gauge while it waits.
struct Waiting(Gauge);

impl Waiting {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn election(key: &str) -> StoreError {
        StoreError::Read {
            bucket: "works".into(),
            key: key.into(),
            message: "no responders".into(),
            election: Some(Why::NoResponders),
        }
    }

    const CALL: Call<'static> = Call {
        op: "read",
        bucket: "works",
        key: "edge-1.web",
    };

    #[tokio::test(start_paused = true)]
    async fn an_election_is_ridden_through_and_an_answer_returns_at_once() {
        let mut calls = 0;
        let got = ride(CALL, || {
            calls += 1;
            let n = calls;
            async move { if n < 4 { Err(election("a")) } else { Ok(n) } }
        })
        .await;
        assert_eq!(got.unwrap(), 4);

        let mut calls = 0;
        let got: Result<(), _> = ride(CALL, || {
            calls += 1;
            async {
                Err(StoreError::Fenced {
                    bucket: "works".into(),
                    key: "a".into(),
                    why: "the lease ended".into(),
                })
            }
        })
        .await;
        assert!(matches!(got, Err(StoreError::Fenced { .. })));
        assert_eq!(calls, 1, "a fence is an answer: never tried again");
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_patience_a_call_is_unavailable_and_says_to_retry() {
        let before = Instant::now();
        let got: Result<(), _> = ride(CALL, || async { Err(election("a")) }).await;
        let waited = before.elapsed();
        let Err(e) = got else { panic!("unavailable") };
        assert!(matches!(e, StoreError::Unavailable { .. }), "{e}");
        assert!(
            waited <= patience() && waited > patience() - MAX_PAUSE * 2,
            "{waited:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("works/edge-1.web") && text.contains("retry"),
            "{text}"
        );
        assert!(e.is_unavailable());
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_waits_past_the_patience_and_says_what_for() {
        let start = Start::new(None);
        let mut waiting = start.waiting();
        let mut calls = 0;
        let got = starting(start, async {
            ride(CALL, || {
                calls += 1;
                let n = calls;
                async move { if n < 200 { Err(election("a")) } else { Ok(()) } }
            })
            .await
        });
        tokio::pin!(got);
        // While it waits, the start says what for.
        tokio::select! {
            _ = &mut got => panic!("200 attempts take longer than the first change"),
            changed = waiting.changed() => changed.unwrap(),
        }
        let said = waiting.borrow().clone().unwrap();
        assert!(said.contains("read works/edge-1.web"), "{said}");
        got.await.unwrap();
        assert!(
            waiting.borrow().is_none(),
            "nothing waited for once it answered"
        );
    }
}

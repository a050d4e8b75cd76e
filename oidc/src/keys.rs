//! The issuer's keys, fetched, cached and rotated by a task the hub owns: discovery, then the
//! JWKS; again at the answer's `max-age` clamped to [1 min, 1 h] (5 min without one); again
//! when a token names a `kid` the set lacks — at most once per 10 s however many ask, so a
//! stream of forged kids costs the issuer one request per 10 s; on failure the last good set is
//! kept for `--oidc-jwks-stale-max` and the fetch retried with backoff.
//!
//! Readers never wait on the issuer: [`KeysHandle::current`] is the last good set.

use crate::config::Config;
use crate::discovery::ProviderMetadata;
use crate::fetch::{FetchError, Fetcher};
use crate::jwks::{JwksError, KeySet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

/// Shortest time a key set is kept before it is fetched again.
pub const MIN_MAX_AGE: Duration = Duration::from_secs(60);
/// Longest time a key set is kept before it is fetched again.
pub const MAX_MAX_AGE: Duration = Duration::from_secs(3600);
/// How long a key set is kept when the answer says nothing.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(300);
/// Least time between two fetches asked for by unknown kids.
pub const UNKNOWN_KID_INTERVAL: Duration = Duration::from_secs(10);
/// First retry after a failed fetch (doubling to [`MAX_RETRY`]).
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
/// Longest wait between retries.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// The task's intervals (the constants above by default; tests shorten them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Shortest time a key set is kept.
    pub min_max_age: Duration,
    /// Longest time a key set is kept.
    pub max_max_age: Duration,
    /// How long a key set is kept when the answer says nothing.
    pub default_max_age: Duration,
    /// Least time between two fetches asked for by unknown kids.
    pub unknown_kid_interval: Duration,
    /// First retry after a failure.
    pub first_retry: Duration,
    /// Longest wait between retries.
    pub max_retry: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            min_max_age: MIN_MAX_AGE,
            max_max_age: MAX_MAX_AGE,
            default_max_age: DEFAULT_MAX_AGE,
            unknown_kid_interval: UNKNOWN_KID_INTERVAL,
            first_retry: FIRST_RETRY,
            max_retry: MAX_RETRY,
        }
    }
}

/// Why the keys could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The discovery document could not be fetched.
    #[error("discovery: {0}")]
    DiscoveryFetch(#[source] FetchError),
    /// The discovery document is wrong.
    #[error("{url}: {source}")]
    Discovery {
        /// Its URL.
        url: String,
        /// What is wrong.
        #[source]
        source: crate::discovery::DiscoveryError,
    },
    /// The JWKS could not be fetched.
    #[error("JWKS: {0}")]
    Fetch(#[source] FetchError),
    /// The JWKS is wrong.
    #[error("{url}: {source}")]
    Jwks {
        /// Its URL.
        url: String,
        /// What is wrong.
        #[source]
        source: JwksError,
    },
}

/// What the keys task last did, for messages and metrics.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// The discovery document, once fetched.
    pub metadata: Option<Arc<ProviderMetadata>>,
    /// The last fetch's error, if it failed.
    pub last_error: Option<String>,
}

/// The keys in force, shared by every reader.
#[derive(Clone)]
pub struct KeysHandle {
    keys: watch::Receiver<Option<Arc<KeySet>>>,
    status: watch::Receiver<Status>,
    refresh: mpsc::Sender<()>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for KeysHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeysHandle")
            .field("keys", &self.keys.borrow().as_ref().map(|k| k.len()))
            .finish()
    }
}

/// Counts for the hub's metrics.
#[derive(Debug, Default)]
pub struct Counters {
    /// Fetches of the JWKS (or discovery) that failed.
    pub failures: AtomicU64,
    /// Fetches that succeeded.
    pub fetches: AtomicU64,
}

impl KeysHandle {
    /// The key set in force (`None` before the first fetch succeeded, or after the last good
    /// set grew older than `--oidc-jwks-stale-max`).
    pub fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.borrow().clone()
    }

    /// Asks for a fetch because a token named a kid the set lacks; returns at once (the task
    /// fetches at most once per [`UNKNOWN_KID_INTERVAL`], and a request already queued absorbs
    /// this one).
    pub fn refresh_soon(&self) {
        let _queued_or_full = self.refresh.try_send(());
    }

    /// What the task last did.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Fetch counts.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Waits until a key set is in force (tests and start-up checks), at most `limit`.
    pub async fn ready(&self, limit: Duration) -> bool {
        let mut keys = self.keys.clone();
        tokio::time::timeout(limit, keys.wait_for(Option::is_some))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits for the next publication of a key set (tests), at most `limit`.
    pub async fn changed(&self, limit: Duration) -> bool {
        let mut keys = self.keys.clone();
        keys.mark_unchanged();
        tokio::time::timeout(limit, keys.changed())
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// The keys task.
pub struct Keys {
    config: Config,
    timing: Timing,
    fetcher: Fetcher,
    keys: watch::Sender<Option<Arc<KeySet>>>,
    status: watch::Sender<Status>,
    counters: Arc<Counters>,
    metadata: Option<Arc<ProviderMetadata>>,
    good_at: Option<Instant>,
    last_fetch: Option<Instant>,
    retry: Duration,
    generation: u64,
}

impl Keys {
    /// Starts the task; it ends when `shutdown` completes or every handle is dropped.
    pub fn spawn(
        config: Config,
        fetcher: Fetcher,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> (KeysHandle, JoinHandle<()>) {
        Self::spawn_with(config, fetcher, Timing::default(), shutdown)
    }

    /// [`Keys::spawn`] with other intervals.
    pub fn spawn_with(
        config: Config,
        fetcher: Fetcher,
        timing: Timing,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> (KeysHandle, JoinHandle<()>) {
        let (keys_tx, keys_rx) = watch::channel(None);
        let (status_tx, status_rx) = watch::channel(Status::default());
        let (refresh_tx, refresh_rx) = mpsc::channel(1);
        let counters = Arc::new(Counters::default());
        let span = tracing::info_span!("oidc_keys", issuer = %config.issuer);
        let task = Keys {
            config,
            timing,
            fetcher,
            keys: keys_tx,
            status: status_tx,
            counters: counters.clone(),
            metadata: None,
            good_at: None,
            last_fetch: None,
            retry: timing.first_retry,
            generation: 0,
        };
        let join = tokio::spawn(task.run(refresh_rx, shutdown).instrument(span));
        let handle = KeysHandle {
            keys: keys_rx,
            status: status_rx,
            refresh: refresh_tx,
            counters,
        };
        (handle, join)
    }

    async fn run(
        mut self,
        mut refresh: mpsc::Receiver<()>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut next = Instant::now();
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep_until(next) => next = self.fetch().await,
                asked = refresh.recv() => {
                    if asked.is_none() {
                        return;
                    }
                    let allowed = self
                        .last_fetch
                        .map_or_else(Instant::now, |at| at + self.timing.unknown_kid_interval);
                    next = next.min(allowed);
                }
            }
        }
    }

    /// One fetch; when to fetch next.
    async fn fetch(&mut self) -> Instant {
        self.last_fetch = Some(Instant::now());
        match self.fetch_keys().await {
            Ok((keys, max_age)) => {
                self.counters.fetches.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(keys = keys.len(), kids = ?keys.kids(), "oidc keys fetched");
                self.good_at = Some(Instant::now());
                self.retry = self.timing.first_retry;
                // Renumbered only when the keys changed: a retired key's cached tokens go, an
                // unchanged fetch (an unknown kid's, anyone may ask for one) keeps them.
                let same = (self.keys.borrow().as_ref()).is_some_and(|k| k.same_keys(&keys));
                if !same {
                    self.generation += 1;
                    self.keys
                        .send_replace(Some(Arc::new(keys.numbered(self.generation))));
                }
                self.status.send_modify(|s| s.last_error = None);
                let t = &self.timing;
                Instant::now()
                    + max_age
                        .unwrap_or(t.default_max_age)
                        .clamp(t.min_max_age, t.max_max_age)
            }
            Err(e) => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "oidc keys: fetch failed; keeping the last good keys");
                // The discovery document is read again next time: the issuer may have moved
                // its keys.
                self.metadata = None;
                let stale = self
                    .good_at
                    .is_some_and(|at| at.elapsed() > self.config.jwks_stale_max);
                if stale {
                    tracing::warn!("oidc keys: the last good keys are too old; refusing tokens");
                    self.keys.send_replace(None);
                    self.good_at = None;
                }
                let message = e.to_string();
                self.status.send_modify(|s| s.last_error = Some(message));
                let wait = self.retry;
                self.retry = (self.retry * 2).min(self.timing.max_retry);
                Instant::now() + wait
            }
        }
    }

    async fn fetch_keys(&mut self) -> Result<(KeySet, Option<Duration>), KeysError> {
        let metadata = match &self.metadata {
            Some(m) => m.clone(),
            None => {
                let url = self.config.discovery_url();
                let fetched = self
                    .fetcher
                    .get(&url)
                    .await
                    .map_err(KeysError::DiscoveryFetch)?;
                let metadata = ProviderMetadata::parse(&fetched.body, &self.config.issuer)
                    .map_err(|source| KeysError::Discovery { url, source })?;
                let metadata = Arc::new(metadata);
                self.metadata = Some(metadata.clone());
                let published = metadata.clone();
                self.status.send_modify(|s| s.metadata = Some(published));
                metadata
            }
        };
        let url = &metadata.jwks_uri;
        let fetched = self.fetcher.get(url).await.map_err(KeysError::Fetch)?;
        let keys = KeySet::from_json(&fetched.body, &self.config.algorithms).map_err(|source| {
            KeysError::Jwks {
                url: url.clone(),
                source,
            }
        })?;
        Ok((keys, fetched.max_age))
    }
}

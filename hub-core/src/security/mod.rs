//! Secure mode on the hub (`--secure-dir DIR`, written by `flotilla-hub init`): the hub issues
//! each accepted cluster's NATS credentials with its registration reply, mints per-cluster join
//! credentials, and pushes revocations (deny, delete, a replaced agent key, a spent join
//! credential) to the NATS server through the system account.
//!
//! A revocation is recorded in the replicated revocations bucket every hub shares
//! ([`revocations`]) and in this hub's file before the call that asked for it returns, and an
//! error there fails that call (deny, delete): the hub never reports a key revoked that is not.
//! Every hub watches the bucket, so a key revoked through one hub is refused by all of them.
//! Pushes go through one task that always sends the newest account JWTs and retries until the
//! server takes them, so a revocation made while NATS is down reaches the server when it
//! returns; the hub also pushes at start, so a server restored from an old resolver directory
//! learns every revocation again.

pub mod revocations;

use flotilla_auth::creds::Creds;
use flotilla_auth::issuer::{IssueError, Issued, Revoke, Which};
use flotilla_auth::setup::unix_now;
use flotilla_auth::{Issuer, SecureDir, Subject};
use flotilla_bus::connect::{self, NatsConfig};
use flotilla_bus::jetstream::StreamOptions;
use futures::StreamExt;
use revocations::{RevocationError, Shared};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Secure-mode settings.
#[derive(Debug, Clone)]
pub struct SecurityConfig {
    /// The secure directory.
    pub dir: PathBuf,
    /// How long issued cluster credentials are valid (agents renew at two thirds).
    pub credentials_ttl: Duration,
}

/// Why secure mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The secure directory is unusable.
    #[error("secure directory: {0}")]
    Dir(#[from] flotilla_auth::setup::SetupError),
    /// The revocations file is unreadable.
    #[error(transparent)]
    Issuer(#[from] IssueError),
    /// The system-account connection could not be set up.
    #[error("system account connection: {0}")]
    Connect(#[from] connect::ConnectError),
    /// The shared revocations could not be read.
    #[error(transparent)]
    Revocations(#[from] RevocationError),
}

/// The hub's issuer, the shared revocations and the pusher (cheap to clone).
#[derive(Clone, Debug)]
pub struct Security {
    issuer: Arc<Issuer>,
    shared: Shared,
    push: watch::Sender<u64>,
}

impl Security {
    /// Reads the secure directory and the shared revocations (adopting every hub's, sharing
    /// this hub's), connects to the system account with `DIR/sys.creds` (same server and TLS
    /// settings as `nats`) and starts the task that watches the shared revocations and pushes
    /// the accounts — at once, and after every revocation here or on another hub. The account
    /// JWTs are signed when pushed, so a burst of revocations is one push with one new `iat`.
    pub async fn start(
        config: &SecurityConfig,
        nats: &NatsConfig,
        jetstream: &async_nats::jetstream::Context,
        stream: StreamOptions,
        stop: watch::Receiver<bool>,
    ) -> Result<(Self, JoinHandle<()>), StartError> {
        let dir = SecureDir::load(&config.dir)?;
        let issuer = Arc::new(Issuer::new(&dir, config.credentials_ttl)?);
        let what = crate::store::ride::Call {
            op: "load",
            bucket: "revocations",
            key: "",
        };
        let shared =
            crate::store::ride::ride(what, || Shared::open(jetstream, stream, issuer.clone()))
                .await?;
        let watched_from = crate::store::ride::ride(what, || shared.sync()).await? + 1;
        let mut sys_config = nats.clone();
        sys_config.name = "flotilla-hub-sys".into();
        sys_config.credentials_file = Some(dir.sys_creds.clone());
        sys_config.auth = None;
        let sys = connect::connect(&sys_config, None).await?;
        let (push, wanted) = watch::channel(0u64);
        let task = tokio::spawn(
            run(shared.clone(), sys, wanted, watched_from, stop)
                .instrument(tracing::info_span!("account_pusher")),
        );
        Ok((
            Self {
                issuer,
                shared,
                push,
            },
            task,
        ))
    }

    /// Whether `key` has a revocation (a denied or replaced key).
    pub fn is_revoked(&self, key: &str) -> bool {
        self.issuer.is_revoked(key)
    }

    /// The agents account (whose users' identities registration requests carry).
    pub fn agents_account(&self) -> &str {
        self.issuer.agents_account()
    }

    /// Credentials for `subject` and its agent's `key`.
    pub fn issue(&self, subject: Subject<'_>, key: &str) -> Result<Issued, IssueError> {
        self.issuer.issue(subject, key, unix_now())
    }

    /// A join credential for `cluster`, valid for `ttl`.
    pub fn mint_join(&self, cluster: &str, ttl: Duration) -> Result<(Creds, Issued), IssueError> {
        self.issuer.mint_join(cluster, ttl, unix_now())
    }

    /// Revokes cluster or add-on agent keys (empty ones are skipped) on every hub and pushes
    /// the accounts. Nothing is revoked when this fails.
    pub async fn revoke(&self, keys: &[&str]) -> Result<(), RevocationError> {
        let now = unix_now();
        let revokes: Vec<Revoke<'_>> = keys
            .iter()
            .filter(|k| !k.is_empty())
            .map(|k| self.issuer.agent_revoke(k, now))
            .collect();
        self.record(&revokes, now).await
    }

    /// Revokes a join credential that is valid until `expires_at` (spent, or its cluster gone).
    pub async fn revoke_join(&self, key: &str, expires_at: i64) -> Result<(), RevocationError> {
        if key.is_empty() {
            return Ok(());
        }
        let revoke = Revoke {
            key,
            account: Which::Agents,
            until: Some(expires_at),
        };
        self.record(&[revoke], unix_now()).await
    }

    async fn record(&self, revokes: &[Revoke<'_>], now: i64) -> Result<(), RevocationError> {
        if revokes.is_empty() {
            return Ok(());
        }
        let recorded = match self.issuer.plan(revokes, now) {
            Ok(planned) => self.shared.record(&planned).await,
            Err(e) => Err(e.into()),
        };
        match recorded {
            Ok(()) => {
                tracing::info!(keys = revokes.len(), "keys revoked");
                self.push.send_modify(|n| *n = n.wrapping_add(1));
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "recording a revocation failed; nothing revoked");
                Err(e)
            }
        }
    }
}

/// The pusher: pushes the accounts at start and whenever a revocation is recorded here or
/// appears in the shared bucket (another hub's — pushed by it too, but a hub that dies between
/// recording and pushing must not leave it unpushed), retrying until the server takes them.
async fn run(
    shared: Shared,
    sys: async_nats::Client,
    mut wanted: watch::Receiver<u64>,
    mut watched_from: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut due = true;
    let mut attempt = 0usize;
    let mut watch = None;
    loop {
        if watch.is_none() {
            match shared.kv().watch_all_from_revision(watched_from).await {
                Ok(w) => watch = Some(w),
                Err(e) => tracing::warn!(error = %e, "watching the shared revocations failed"),
            }
        }
        let retry = if due {
            Duration::ZERO
        } else {
            // A watch that could not be made is tried again soon.
            Duration::from_secs(5)
        };
        tokio::select! {
            _ = stop.changed() => return,
            changed = wanted.changed() => {
                if changed.is_err() {
                    return;
                }
                wanted.borrow_and_update();
                due = true;
                continue;
            }
            entry = async {
                match watch.as_mut() {
                    Some(w) => w.next().await,
                    None => std::future::pending().await,
                }
            } => {
                match entry {
                    Some(Ok(e)) if e.operation == async_nats::jetstream::kv::Operation::Put => {
                        watched_from = e.revision + 1;
                        match shared.adopt_stored(&e.key, &e.value) {
                            Ok(news) => due |= news,
                            Err(err) => tracing::error!(key = e.key, error = %err, "adopting a shared revocation failed"),
                        }
                    }
                    Some(Ok(e)) => watched_from = e.revision + 1,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "the shared revocations' watch failed; watching again");
                        watch = None;
                        // Whatever was missed is read by the next push.
                        due = true;
                    }
                    None => {
                        watch = None;
                        due = true;
                    }
                }
                continue;
            }
            _ = tokio::time::sleep(retry), if due || watch.is_none() => {
                if !due {
                    continue;
                }
            }
        }
        match shared.push(&sys).await {
            Ok(()) => {
                tracing::info!("accounts pushed to the NATS server");
                due = false;
                attempt = 0;
            }
            Err(e) => {
                attempt += 1;
                tracing::warn!(error = %e, attempt, "account push failed; retrying");
                let pause = connect::backoff(attempt, Duration::from_secs(10));
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

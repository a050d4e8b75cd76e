//! Secure mode on the hub (`--secure-dir DIR`, written by `flotilla-hub init`): the hub issues
//! each accepted cluster's NATS credentials with its registration reply, mints per-cluster join
//! credentials, and pushes revocations (deny, delete, a replaced agent key, a spent join
//! credential) to the NATS server through the system account.
//!
//! A revocation is recorded on disk before the call that asked for it returns, and an error
//! there fails that call (deny, delete): the hub never reports a key revoked that is not. Pushes
//! go through one task that always sends the newest account JWTs and retries until the server
//! takes them, so a revocation made while NATS is down reaches the server when it returns; the
//! hub also pushes at start, so a server restored from an old resolver directory learns every
//! revocation again.

use flotilla_auth::creds::Creds;
use flotilla_auth::issuer::{IssueError, Issued, Revoke, Which, push_accounts};
use flotilla_auth::setup::unix_now;
use flotilla_auth::{Issuer, SecureDir, Subject};
use flotilla_bus::connect::{self, NatsConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

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
}

/// The hub's issuer and revocation pusher (cheap to clone).
#[derive(Clone, Debug)]
pub struct Security {
    issuer: Arc<Issuer>,
    push: watch::Sender<u64>,
}

impl Security {
    /// Reads the secure directory, connects to the system account with `DIR/sys.creds` (same
    /// server and TLS settings as `nats`) and starts the pusher, which pushes the accounts at
    /// once and after every revocation. The account JWTs are signed when pushed, so a burst of
    /// revocations is one push with one new `iat`.
    pub async fn start(
        config: &SecurityConfig,
        nats: &NatsConfig,
    ) -> Result<(Self, JoinHandle<()>), StartError> {
        let dir = SecureDir::load(&config.dir)?;
        let issuer = Arc::new(Issuer::new(&dir, config.credentials_ttl)?);
        let mut sys_config = nats.clone();
        sys_config.name = "flotilla-hub-sys".into();
        sys_config.credentials_file = Some(dir.sys_creds.clone());
        sys_config.auth = None;
        let sys = connect::connect(&sys_config, None).await?;
        let (push, mut wanted) = watch::channel(0u64);
        wanted.mark_changed();
        let signer = issuer.clone();
        let task = tokio::spawn(async move {
            loop {
                if wanted.changed().await.is_err() {
                    return;
                }
                let mut attempt = 0;
                loop {
                    wanted.borrow_and_update();
                    let pushed = match signer.account_jwts(unix_now()) {
                        Ok(jwts) => push_accounts(&sys, &jwts).await,
                        Err(e) => Err(e),
                    };
                    match pushed {
                        Ok(()) => {
                            tracing::info!("accounts pushed to the NATS server");
                            break;
                        }
                        Err(e) => {
                            attempt += 1;
                            tracing::warn!(error = %e, attempt, "account push failed; retrying");
                            tokio::time::sleep(connect::backoff(attempt, Duration::from_secs(10)))
                                .await;
                        }
                    }
                }
            }
        });
        Ok((Self { issuer, push }, task))
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

    /// Revokes cluster or add-on agent keys (empty ones are skipped) and pushes the accounts.
    /// Nothing is revoked when this fails.
    pub fn revoke(&self, keys: &[&str]) -> Result<(), IssueError> {
        let now = unix_now();
        let revokes: Vec<Revoke<'_>> = keys
            .iter()
            .filter(|k| !k.is_empty())
            .map(|k| self.issuer.agent_revoke(k, now))
            .collect();
        self.record(&revokes, now)
    }

    /// Revokes a join credential that is valid until `expires_at` (spent, or its cluster gone).
    pub fn revoke_join(&self, key: &str, expires_at: i64) -> Result<(), IssueError> {
        if key.is_empty() {
            return Ok(());
        }
        let revoke = Revoke {
            key,
            account: Which::Agents,
            until: Some(expires_at),
        };
        self.record(&[revoke], unix_now())
    }

    fn record(&self, revokes: &[Revoke<'_>], now: i64) -> Result<(), IssueError> {
        if revokes.is_empty() {
            return Ok(());
        }
        match self.issuer.revoke(revokes, now) {
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

//! Secure mode on the hub (`--secure-dir DIR`, written by `flotilla-hub init`): the hub issues
//! each accepted cluster's NATS credentials with its registration reply, and pushes revocations
//! (deny, delete, a replaced agent key) to the NATS server through the system account.
//!
//! Pushes go through one task that always sends the newest account JWT and retries until the
//! server takes it, so a revocation made while NATS is down reaches the server when it returns;
//! the hub also pushes at start, so a server restored from an old resolver directory learns
//! every revocation again.

use flotilla_auth::issuer::{Issued, push_account};
use flotilla_auth::setup::unix_now;
use flotilla_auth::{Issuer, SecureDir};
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

/// The hub's issuer and revocation pusher (cheap to clone).
#[derive(Clone, Debug)]
pub struct Security {
    issuer: Arc<Issuer>,
    push: watch::Sender<Option<String>>,
}

impl Security {
    /// Reads the secure directory, connects to the system account with `DIR/sys.creds` (same
    /// server and TLS settings as `nats`) and starts the pusher, which pushes the account at once.
    pub async fn start(
        config: &SecurityConfig,
        nats: &NatsConfig,
    ) -> Result<(Self, JoinHandle<()>), String> {
        let dir = SecureDir::load(&config.dir).map_err(|e| e.to_string())?;
        let issuer =
            Arc::new(Issuer::new(&dir, config.credentials_ttl).map_err(|e| e.to_string())?);
        let mut sys_config = nats.clone();
        sys_config.name = "flotilla-hub-sys".into();
        sys_config.credentials_file = Some(dir.sys_creds.clone());
        sys_config.auth = None;
        let sys = connect::connect(&sys_config, None)
            .await
            .map_err(|e| e.to_string())?;
        let first = issuer.account_jwt(unix_now()).map_err(|e| e.to_string())?;
        let (push, mut latest) = watch::channel(Some(first));
        let account = issuer.account().to_string();
        let task = tokio::spawn(async move {
            loop {
                let jwt = latest.borrow_and_update().clone();
                if let Some(jwt) = jwt {
                    let mut attempt = 0;
                    loop {
                        match push_account(&sys, &account, jwt.clone()).await {
                            Ok(()) => {
                                tracing::info!("account pushed to the NATS server");
                                break;
                            }
                            Err(e) => {
                                attempt += 1;
                                tracing::warn!(error = %e, attempt, "account push failed; retrying");
                                tokio::time::sleep(connect::backoff(
                                    attempt,
                                    Duration::from_secs(10),
                                ))
                                .await;
                                if latest.has_changed().unwrap_or(false) {
                                    break;
                                }
                            }
                        }
                    }
                }
                if latest.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok((Self { issuer, push }, task))
    }

    /// Credentials for `cluster`'s agent key, or `None` (logged) when the key is unusable.
    pub fn issue(&self, cluster: &str, agent_key: &str) -> Option<Issued> {
        match self.issuer.issue_cluster(cluster, agent_key, unix_now()) {
            Ok(i) => Some(i),
            Err(e) => {
                tracing::warn!(cluster, error = %e, "no credentials issued");
                None
            }
        }
    }

    /// Credentials for add-on `addon`'s agent key on `cluster`, or `None` (logged).
    pub fn issue_addon(&self, addon: &str, cluster: &str, agent_key: &str) -> Option<Issued> {
        match self
            .issuer
            .issue_addon(addon, cluster, agent_key, unix_now())
        {
            Ok(i) => Some(i),
            Err(e) => {
                tracing::warn!(cluster, addon, error = %e, "no add-on credentials issued");
                None
            }
        }
    }

    /// Revokes agent keys (empty ones are skipped) and pushes the account.
    pub fn revoke(&self, keys: &[&str]) {
        let keys: Vec<&str> = keys.iter().copied().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            return;
        }
        match self.issuer.revoke(&keys, unix_now()) {
            Ok(jwt) => {
                tracing::info!(keys = keys.len(), "agent keys revoked");
                let _ = self.push.send(Some(jwt));
            }
            Err(e) => tracing::error!(error = %e, "recording a revocation failed"),
        }
    }
}

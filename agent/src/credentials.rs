//! Secure mode: the agent's NATS credentials.
//!
//! Two kinds: the bootstrap credentials the spoke admin gave (`--bootstrap-creds`, shared by
//! every spoke, good only for asking to register), and the cluster's own — a user JWT the hub
//! signed for this agent's public NKey once the cluster was accepted, kept with the agent's
//! seed in `STATE_DIR/cluster.creds` (a standard credentials file, mode 0600).
//!
//! The main NATS client asks [`AgentCredentials`] at every (re)connect, so new or renewed
//! credentials take effect without a new client. When the server refuses them (revoked,
//! expired while offline) they are marked refused and the agent registers again over a
//! separate bootstrap connection until the hub issues new ones.

use flotilla_auth::creds::CredsError;
use flotilla_auth::jwt::{Claims, JwtError, User};
use flotilla_auth::secret::write_private;
use flotilla_auth::setup::unix_now as now;
use flotilla_auth::{Creds, Secret};
use flotilla_bus::connect::{Authenticator, NatsConfig};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File name of the cluster's own credentials in the state directory.
pub const CLUSTER_CREDS: &str = "cluster.creds";

/// Why credentials cannot be loaded or taken.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The bootstrap credentials file cannot be read.
    #[error("--bootstrap-creds {}: {source}", .path.display())]
    ReadBootstrap {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The bootstrap credentials file is no credentials file.
    #[error("--bootstrap-creds {}: {source}", .path.display())]
    ParseBootstrap {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: CredsError,
    },
    /// The agent's seed (from its state) is no NKey seed.
    #[error("agent key: {0}")]
    AgentKey(#[source] nkeys::error::Error),
    /// The JWT the hub issued does not decode.
    #[error(transparent)]
    Jwt(#[from] JwtError),
    /// The JWT the hub issued is for another key.
    #[error("the JWT is for {0}, not this agent's key")]
    OtherKey(String),
    /// `cluster.creds` cannot be written.
    #[error("{}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default)]
struct Current {
    jwt: Option<String>,
    issued_at: i64,
    expires_at: i64,
    refused: bool,
    /// The subjects the JWT lets the agent subscribe to.
    subscribe: Vec<String>,
}

/// Whether the JWT in `c` lets the agent subscribe to `subject`: listed (an empty list with
/// no deny list allows everything, as NATS reads it).
fn allows(c: &Current, subject: &str) -> bool {
    c.jwt.is_some() && (c.subscribe.is_empty() || c.subscribe.iter().any(|s| s == subject))
}

/// The agent's credentials (shared by the NATS client and the registration actor).
#[derive(Debug)]
pub struct AgentCredentials {
    public_key: String,
    seed: Secret,
    bootstrap: PathBuf,
    file: Option<PathBuf>,
    current: Mutex<Current>,
    /// A subscription the agent needs its credentials to allow (its one subscription,
    /// `flotilla.to.<cluster>.>`): credentials issued before the hub allowed it are wanted anew.
    needs: Option<String>,
}

impl AgentCredentials {
    /// Credentials for the agent whose seed is `seed`: bootstrap from `bootstrap` (checked now),
    /// its own from `state_dir/cluster.creds` when that file exists and is for this seed.
    pub fn load(
        bootstrap: &Path,
        state_dir: Option<&Path>,
        seed: &str,
    ) -> Result<Self, CredentialsError> {
        let text = std::fs::read_to_string(bootstrap).map_err(|source| {
            CredentialsError::ReadBootstrap {
                path: bootstrap.to_path_buf(),
                source,
            }
        })?;
        Creds::parse(&text).map_err(|source| CredentialsError::ParseBootstrap {
            path: bootstrap.to_path_buf(),
            source,
        })?;
        let public_key = nkeys::KeyPair::from_seed(seed)
            .map(|k| k.public_key())
            .map_err(CredentialsError::AgentKey)?;
        // What the hub admin compares before `flotilla accept NAME --key FINGERPRINT`.
        tracing::info!(
            key = %public_key,
            fingerprint = %flotilla_api::fingerprint::of(&public_key),
            "agent key"
        );
        let file = state_dir.map(|d| d.join(CLUSTER_CREDS));
        let creds = Self {
            public_key,
            seed: Secret::new(seed),
            bootstrap: bootstrap.to_path_buf(),
            file: file.clone(),
            current: Mutex::new(Current::default()),
            needs: None,
        };
        if let Some(path) = file.filter(|p| p.exists()) {
            match std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| Creds::parse(&t).map_err(|e| e.to_string()))
            {
                Ok(stored) if stored.public_key() == creds.public_key => {
                    if let Err(e) = creds.adopt(&stored.jwt) {
                        tracing::warn!(file = %path.display(), error = %e, "stored credentials unusable; registering with the bootstrap credentials");
                    }
                }
                Ok(_) => {
                    tracing::warn!(file = %path.display(), "stored credentials are for another key; registering with the bootstrap credentials")
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "stored credentials unreadable; registering with the bootstrap credentials")
                }
            }
        }
        Ok(creds)
    }

    /// The same credentials, wanted anew while they do not allow subscribing to `subject`
    /// (listed as such in their permissions) — credentials issued by a hub before the
    /// one-subscription wire do not list the agent's prefix.
    pub fn needing(mut self, subject: String) -> Self {
        self.needs = Some(subject);
        self
    }

    /// Whether the agent's own credentials list `subject` among what it may subscribe to
    /// (`false` without credentials).
    pub fn allow_subscribing(&self, subject: &str) -> bool {
        allows(&self.lock(), subject)
    }

    /// Settings of a bootstrap connection for `cluster`, from the agent's NATS settings: the
    /// bootstrap credentials and the bootstrap inbox space (the only one they may read).
    pub fn bootstrap_config(&self, nats: &NatsConfig, cluster: &str) -> NatsConfig {
        let mut cfg = nats.clone();
        cfg.name = format!("{}/bootstrap", cfg.name);
        cfg.auth = None;
        cfg.credentials_file = Some(self.bootstrap.clone());
        cfg.inbox_prefix = Some(flotilla_bus::subjects::bootstrap_inbox_prefix(cluster));
        cfg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a JWT as the cluster's credentials after checking it is a user JWT for this
    /// agent's key with a valid signature.
    fn adopt(&self, jwt: &str) -> Result<(), CredentialsError> {
        let claims = Claims::<User>::decode(jwt)?;
        if claims.sub != self.public_key {
            return Err(CredentialsError::OtherKey(claims.sub));
        }
        let mut c = self.lock();
        c.jwt = Some(jwt.to_string());
        c.issued_at = claims.iat;
        c.expires_at = claims.exp.unwrap_or(i64::MAX);
        c.refused = false;
        c.subscribe = claims.nats.subscribe.allow;
        Ok(())
    }

    /// Takes credentials the hub issued and writes them to `cluster.creds` (mode 0600).
    pub fn store(&self, jwt: &str) -> Result<(), CredentialsError> {
        self.adopt(jwt)?;
        if let Some(path) = &self.file {
            let creds = Creds {
                jwt: jwt.to_string(),
                seed: self.seed.clone(),
            };
            write_private(path, creds.format().expose().as_bytes()).map_err(|source| {
                CredentialsError::Write {
                    path: path.clone(),
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// Whether the agent has its own credentials the server has not refused and that have not
    /// expired.
    pub fn usable(&self) -> bool {
        let c = self.lock();
        c.jwt.is_some() && !c.refused && c.expires_at > now()
    }

    /// When renewal is due: two thirds into the credentials' life; `None` without usable
    /// ones (then they are wanted now).
    fn renew_at(c: &Current) -> Option<i64> {
        if c.jwt.is_none() || c.refused {
            return None;
        }
        let life = (c.expires_at - c.issued_at).max(0);
        Some(c.issued_at + life * 2 / 3)
    }

    /// Whether to ask the hub for credentials: none usable, two thirds of their life gone, or
    /// they do not allow the subscription the agent needs ([`Self::needing`]).
    pub fn wanted(&self) -> bool {
        let c = self.lock();
        let lacking = self
            .needs
            .as_ref()
            .is_some_and(|s| c.jwt.is_some() && !allows(&c, s));
        lacking || Self::renew_at(&c).is_none_or(|at| now() >= at)
    }

    /// Seconds until renewal is due (0 when due now).
    pub fn renew_in(&self) -> u64 {
        Self::renew_at(&self.lock()).map_or(0, |at| (at - now()).max(0) as u64)
    }
}

impl Authenticator for AgentCredentials {
    fn credentials(&self) -> Result<(String, String), String> {
        let c = self.lock();
        match &c.jwt {
            Some(jwt) if !c.refused => Ok((jwt.clone(), self.seed.expose().to_string())),
            _ => {
                Err("no cluster credentials yet: registering with the bootstrap credentials".into())
            }
        }
    }

    fn refused(&self) {
        let mut c = self.lock();
        if c.jwt.is_some() && !c.refused {
            tracing::warn!(
                "the NATS server refused this cluster's credentials; registering again with the bootstrap credentials"
            );
        }
        c.refused = true;
    }
}

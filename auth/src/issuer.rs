//! The hub's issuer: user JWTs for accepted clusters, revocations, and the account JWT that
//! carries them to the NATS server.
//!
//! A revocation refuses every JWT of that user key issued at or before its time, so a cluster
//! accepted again later gets a JWT issued after it. Revocations are kept in
//! `DIR/revocations.json` (the hub re-pushes the account at start) and dropped once every JWT
//! they could refuse has expired anyway, which keeps the account JWT small at 100,000 clusters.

use crate::jwt::{Claims, JwtError};
use crate::permissions;
use crate::secret::write_private;
use crate::setup::{SecureDir, account_claims};
use nkeys::KeyPair;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// Credentials issued to an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The user JWT.
    pub jwt: String,
    /// Issued at (Unix seconds).
    pub issued_at: i64,
    /// Expiry (Unix seconds).
    pub expires_at: i64,
}

/// Why credentials could not be issued, a revocation recorded or an account pushed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The agent's key is not a user public NKey.
    #[error("agent public key {0:?} is not a user NKey (U…)")]
    BadKey(String),
    /// The cluster name is not one plain subject token, so permissions built from it would not
    /// be limited to that cluster (`*`, `>`, `.` would widen them).
    #[error(
        "cluster name {0:?} cannot be scoped in NATS permissions (want letters, digits, '-' or '_')"
    )]
    BadCluster(String),
    /// Signing failed.
    #[error(transparent)]
    Jwt(#[from] JwtError),
    /// The revocations file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The server did not take the account update.
    #[error("pushing the account to the NATS server: {0}")]
    Push(String),
}

struct State {
    revocations: BTreeMap<String, i64>,
    last_account_iat: i64,
}

/// Issues and revokes cluster credentials (cheap to share behind an `Arc`).
pub struct Issuer {
    account: String,
    account_signing: KeyPair,
    operator_signing: KeyPair,
    ttl: Duration,
    file: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("account", &self.account)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Issuer {
    /// An issuer for a secure directory, with credentials valid for `ttl`.
    pub fn new(dir: &SecureDir, ttl: Duration) -> Result<Self, IssueError> {
        let file = dir.revocations_file();
        let revocations = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| IssueError::Io {
                path: file.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(IssueError::Io { path: file, source }),
        };
        Ok(Self {
            account: dir.account.clone(),
            account_signing: KeyPair::from_seed(
                &dir.account_signing
                    .seed()
                    .map_err(|e| IssueError::Jwt(JwtError::Sign(e.to_string())))?,
            )
            .map_err(|e| IssueError::Jwt(JwtError::Sign(e.to_string())))?,
            operator_signing: KeyPair::from_seed(
                &dir.operator_signing
                    .seed()
                    .map_err(|e| IssueError::Jwt(JwtError::Sign(e.to_string())))?,
            )
            .map_err(|e| IssueError::Jwt(JwtError::Sign(e.to_string())))?,
            ttl,
            file,
            state: Mutex::new(State {
                // The last account JWT was issued at or after the latest revocation: the next
                // one must be later, even right after a restart.
                last_account_iat: revocations.values().copied().max().unwrap_or(0),
                revocations,
            }),
        })
    }

    /// The account's public key.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// How long issued credentials are valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Signs a user JWT for `cluster`'s agent key, scoped to the cluster's subjects.
    pub fn issue_cluster(
        &self,
        cluster: &str,
        agent_key: &str,
        now: i64,
    ) -> Result<Issued, IssueError> {
        if !is_plain_token(cluster) {
            return Err(IssueError::BadCluster(cluster.to_string()));
        }
        if !agent_key.starts_with('U') || KeyPair::from_public_key(agent_key).is_err() {
            return Err(IssueError::BadKey(agent_key.to_string()));
        }
        let revoked_at = self
            .lock()
            .revocations
            .get(agent_key)
            .copied()
            .unwrap_or(i64::MIN);
        let issued_at = now.max(revoked_at.saturating_add(1));
        let expires_at = issued_at + self.ttl.as_secs() as i64;
        let mut nats = permissions::cluster(cluster);
        nats.issuer_account = self.account.clone();
        let mut claims = Claims::new(cluster, agent_key, issued_at, nats);
        claims.exp = Some(expires_at);
        Ok(Issued {
            jwt: claims.encode(&self.account_signing)?,
            issued_at,
            expires_at,
        })
    }

    /// Signs a user JWT for add-on `addon`'s agent key on `cluster`, scoped to the add-on's
    /// subjects on that cluster.
    pub fn issue_addon(
        &self,
        addon: &str,
        cluster: &str,
        agent_key: &str,
        now: i64,
    ) -> Result<Issued, IssueError> {
        if !is_plain_token(cluster) {
            return Err(IssueError::BadCluster(cluster.to_string()));
        }
        if !is_plain_token(addon) {
            return Err(IssueError::BadCluster(addon.to_string()));
        }
        if !agent_key.starts_with('U') || KeyPair::from_public_key(agent_key).is_err() {
            return Err(IssueError::BadKey(agent_key.to_string()));
        }
        let revoked_at = self
            .lock()
            .revocations
            .get(agent_key)
            .copied()
            .unwrap_or(i64::MIN);
        let issued_at = now.max(revoked_at.saturating_add(1));
        let expires_at = issued_at + self.ttl.as_secs() as i64;
        let mut nats = permissions::addon(addon, cluster);
        nats.issuer_account = self.account.clone();
        let mut claims = Claims::new(format!("{cluster}/{addon}"), agent_key, issued_at, nats);
        claims.exp = Some(expires_at);
        Ok(Issued {
            jwt: claims.encode(&self.account_signing)?,
            issued_at,
            expires_at,
        })
    }

    /// Whether `key` has a revocation.
    pub fn is_revoked(&self, key: &str) -> bool {
        self.lock().revocations.contains_key(key)
    }

    /// Records revocations of `keys` at `now` (kept on disk) and returns the account JWT to push.
    pub fn revoke(&self, keys: &[&str], now: i64) -> Result<String, IssueError> {
        let mut st = self.lock();
        for key in keys.iter().filter(|k| !k.is_empty()) {
            st.revocations.insert((*key).to_string(), now);
        }
        // A revocation older than the credential lifetime refuses nothing that has not expired.
        let horizon = now - self.ttl.as_secs() as i64 - 60;
        st.revocations.retain(|_, at| *at >= horizon);
        let bytes = serde_json::to_vec_pretty(&st.revocations).unwrap_or_default();
        write_private(&self.file, &bytes).map_err(|source| IssueError::Io {
            path: self.file.clone(),
            source,
        })?;
        self.account_jwt_locked(&mut st, now)
    }

    /// The account JWT with the current revocations.
    pub fn account_jwt(&self, now: i64) -> Result<String, IssueError> {
        let mut st = self.lock();
        self.account_jwt_locked(&mut st, now)
    }

    fn account_jwt_locked(&self, st: &mut State, now: i64) -> Result<String, IssueError> {
        // The resolver keeps the newer of two account JWTs: every push is issued later.
        let iat = now.max(st.last_account_iat + 1);
        st.last_account_iat = iat;
        let mut claims = account_claims(&self.account, &self.account_signing.public_key(), iat);
        claims.nats.revocations = st.revocations.clone();
        Ok(claims.encode(&self.operator_signing)?)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether `s` is a non-empty subject token without wildcards, separators or spaces.
fn is_plain_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Sends an account JWT to the server over a system-account connection and checks its answer.
///
/// The JWT must be an account JWT about `account` whose signature verifies; anything else is
/// refused here, before the server sees it. The server checks the rest (limits, signing keys).
///
/// Push only JWTs from [`Issuer`]: nats-server 2.9's `full` resolver answers "jwt updated" to an
/// account JWT signed by a key the operator does not trust, stores it, and from then on refuses
/// every user of the account until a newer, properly signed one arrives. The issuer signs with
/// the operator signing key [`SecureDir::load`] checked against `operator.jwt`.
pub async fn push_account(
    sys: &async_nats::Client,
    account: &str,
    jwt: String,
) -> Result<(), IssueError> {
    let claims = Claims::<crate::jwt::Account>::decode(&jwt)?;
    if claims.sub != account {
        return Err(IssueError::Push(format!(
            "the account JWT is about {}, not {account}",
            claims.sub
        )));
    }
    let reply = sys
        .request(
            format!("$SYS.REQ.ACCOUNT.{account}.CLAIMS.UPDATE"),
            jwt.into(),
        )
        .await
        .map_err(|e| IssueError::Push(e.to_string()))?;
    claims_update_answer(&reply.payload)
}

/// Reads the server's answer to a claims update: `{"data":{"code":200,..}}` or
/// `{"error":{"code":500,"description":".."}}`.
fn claims_update_answer(payload: &[u8]) -> Result<(), IssueError> {
    let answer: serde_json::Value = serde_json::from_slice(payload).map_err(|e| {
        IssueError::Push(format!(
            "unreadable answer {:?}: {e}",
            String::from_utf8_lossy(payload)
        ))
    })?;
    if let Some(err) = answer.get("error") {
        return Err(IssueError::Push(
            err.get("description")
                .and_then(|d| d.as_str())
                .unwrap_or("refused")
                .to_string(),
        ));
    }
    match answer["data"]["code"].as_i64() {
        Some(200) => Ok(()),
        other => Err(IssueError::Push(format!(
            "unexpected answer (code {other:?}): {}",
            String::from_utf8_lossy(payload)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_answers_are_read() {
        // As nats-server 2.9.10 answers.
        let ok = br#"{"data":{"account":"AAB","code":200,"message":"jwt updated"},"server":{"ver":"2.9.10"}}"#;
        claims_update_answer(ok).unwrap();
        let refused = br#"{"error":{"account":"AAB","code":500,"description":"jwt update resulted in error - subject does not match jwt content"},"server":{}}"#;
        let err = claims_update_answer(refused).unwrap_err().to_string();
        assert!(err.contains("subject does not match"), "{err}");
        assert!(claims_update_answer(b"nope").is_err());
        assert!(claims_update_answer(br#"{"data":{"code":404}}"#).is_err());
    }
}

//! OIDC bearer tokens for the Flotilla hub (issue 48): a caller presents an ID token of the
//! company's identity provider; the hub verifies it against the issuer's published keys and
//! maps its claims to a user and groups as kube-apiserver's `--oidc-*` flags do. The grants
//! file then says what that user and those groups may do.
//!
//! Pure rules:
//! - [`config`]: the `--oidc-*` settings, checked all at once.
//! - [`jwks`]: the usable keys of a JWKS document.
//! - [`verify`]: issuer, algorithm, key, signature (by `jsonwebtoken`), audience, times.
//! - [`claims`]: username and groups with their prefixes, required claims.
//! - [`discovery`]: the issuer's discovery document.
//! - [`login`]: the authorization-code flow with PKCE (the dashboard's sign-in): its URL,
//!   state, nonce and verifier, and the code exchange (over `oauth2`).
//!
//! I/O:
//! - [`fetch`]: HTTP to the issuer (no redirects, timeouts, size caps, a pinned CA).
//! - [`keys`]: the task that fetches, caches and rotates the keys.
//!
//! [`Authenticator`] puts them together for the hub: verification is synchronous (the keys are
//! in memory); a token naming an unknown key asks the keys task for a fetch and is refused, so
//! the client's retry after a rotation succeeds and no call waits on the issuer. Verified
//! tokens are cached by their SHA-256 until they expire or the key set changes (a retired key's
//! tokens are refused at the next fetch, not at their expiry).

#![deny(missing_docs)]

pub mod claims;
pub mod config;
pub mod discovery;
pub mod fetch;
pub mod jwks;
pub mod keys;
pub mod login;
pub mod verify;

pub use claims::{ClaimError, Subject};
pub use config::{Config, ConfigError, Prefix};
pub use keys::{Keys, KeysHandle};
pub use verify::{Verifier, VerifyError};

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most verified tokens remembered.
pub const CACHE_MAX: usize = 10_000;

/// Verified tokens by SHA-256: the subject and the number of the key set that verified it.
type Cache = HashMap<[u8; 32], (Subject, u64)>;

/// What became of a bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not a JWT of this issuer: another authenticator may know it.
    NotMine,
    /// A valid token of this issuer.
    Accepted(Subject),
    /// A token of this issuer that is refused.
    Refused(Refusal),
}

/// Why a token of this issuer was refused (the text is the `UNAUTHENTICATED` message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The token did not verify.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// Its claims do not make a user.
    #[error(transparent)]
    Claims(#[from] ClaimError),
    /// The issuer's keys are not known (yet, or any more): why, for the hub's log (the
    /// caller is not told the issuer's URLs or the hub's network errors).
    #[error("the OIDC issuer's keys are not available; try again shortly")]
    NoKeys(String),
}

/// Verifies bearer tokens with the keys the keys task holds, remembering the ones it accepted.
#[derive(Debug, Clone)]
pub struct Authenticator {
    verifier: Arc<Verifier>,
    keys: KeysHandle,
    cache: Arc<Mutex<Cache>>,
}

impl Authenticator {
    /// An authenticator of `verifier`'s issuer over `keys`.
    pub fn new(verifier: Verifier, keys: KeysHandle) -> Self {
        Self {
            verifier: Arc::new(verifier),
            keys,
            cache: Arc::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        self.verifier.config()
    }

    /// The keys it verifies with.
    pub fn keys(&self) -> &KeysHandle {
        &self.keys
    }

    /// What `token` is, now.
    pub fn authenticate(&self, token: &str) -> Outcome {
        self.authenticate_at(token, verify::now())
    }

    /// What `token` is at `now` (seconds since the Unix epoch).
    pub fn authenticate_at(&self, token: &str, now: u64) -> Outcome {
        if !self.verifier.is_mine(token) {
            return Outcome::NotMine;
        }
        let keys = match self.current_keys() {
            Ok(keys) => keys,
            Err(refusal) => return Outcome::Refused(refusal),
        };
        // Cached under the key set it was verified with: a new set verifies again.
        let generation = keys.generation();
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let skew = self.config().clock_skew.as_secs();
        if let Some(subject) = self.cached(&digest, generation)
            && now <= subject.expires.saturating_add(skew)
        {
            return Outcome::Accepted(subject);
        }
        let subject = self
            .checked(token, &keys, now)
            .and_then(|verified| Ok(claims::map(self.config(), &verified)?));
        match subject {
            Ok(subject) => {
                self.remember(digest, subject.clone(), generation, now);
                Outcome::Accepted(subject)
            }
            Err(refusal) => Outcome::Refused(refusal),
        }
    }

    /// Verifies an ID token and returns its claims too (the dashboard's sign-in checks the
    /// nonce); not cached.
    pub fn verify_id_token(&self, token: &str) -> Result<(Subject, verify::Claims), Refusal> {
        let keys = self.current_keys()?;
        let verified = self.checked(token, &keys, verify::now())?;
        let subject = claims::map(self.config(), &verified)?;
        Ok((subject, verified.claims))
    }

    fn checked(
        &self,
        token: &str,
        keys: &jwks::KeySet,
        now: u64,
    ) -> Result<verify::Verified, Refusal> {
        self.verifier.verify(token, keys, now).map_err(|e| {
            if matches!(e, VerifyError::UnknownKey(_)) {
                // Perhaps a rotation: the next try may know it.
                self.keys.refresh_soon();
            }
            Refusal::Verify(e)
        })
    }

    fn current_keys(&self) -> Result<Arc<jwks::KeySet>, Refusal> {
        self.keys.current().ok_or_else(|| {
            Refusal::NoKeys(
                self.keys
                    .status()
                    .last_error
                    .unwrap_or_else(|| "not fetched yet".into()),
            )
        })
    }

    fn cached(&self, digest: &[u8; 32], generation: u64) -> Option<Subject> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(digest)
            .filter(|(_, g)| *g == generation)
            .map(|(s, _)| s.clone())
    }

    fn remember(&self, digest: [u8; 32], subject: Subject, generation: u64, now: u64) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_MAX {
            cache.retain(|_, (s, g)| s.expires > now && *g == generation);
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
        }
        cache.insert(digest, (subject, generation));
    }
}

#[cfg(test)]
mod tests;

//! The hub's sealing key in memory: shared by every part of the hub that opens a token, never
//! printed. Where it comes from is decided at start ([`SealingKey::from_file`]: the secure
//! directory's `keys/sealing.xk` or `--sealing-key-file`; [`SealingKey::ephemeral`] without
//! either, so tokens sealed before a restart no longer open and are issued again).

use flotilla_bus::serviceaccounts::{self as msa, SealError};
use nkeys::XKey;
use std::sync::Arc;

/// The hub's curve key pair (cheap to clone).
#[derive(Clone)]
pub struct SealingKey {
    key: Arc<XKey>,
    public: String,
    /// Where it was read (for the log); `None`: made at start.
    pub source: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealingKey")
            .field("public", &self.public)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl SealingKey {
    /// Reads the key at `path`, creating it (0600) when missing.
    pub fn from_file(
        path: &std::path::Path,
    ) -> Result<Self, flotilla_auth::sealing::SealingKeyError> {
        let (key, created) = flotilla_auth::sealing::load_or_create(path)?;
        if created {
            tracing::info!(path = %path.display(), "created the sealing key of ManagedServiceAccount tokens");
        }
        Ok(Self::of(key, Some(path.to_path_buf())))
    }

    /// A key made now and kept in memory only.
    pub fn ephemeral() -> Self {
        Self::of(XKey::new(), None)
    }

    fn of(key: XKey, source: Option<std::path::PathBuf>) -> Self {
        let public = key.public_key();
        Self {
            key: Arc::new(key),
            public,
            source,
        }
    }

    /// The public key agents seal to (`X…`).
    pub fn public(&self) -> &str {
        &self.public
    }

    /// Opens a box sealed to this key by `sender_xkey`.
    pub fn open(&self, sealed: &[u8], sender_xkey: &str) -> Result<String, SealError> {
        msa::open(&self.key, sealed, sender_xkey)
    }

    /// `plain` sealed by this key to `recipient` (boxes between hubs, [`crate::sealed`]);
    /// `None` when the box library fails (it says nothing more).
    pub fn seal_to(&self, plain: &[u8], recipient: &XKey) -> Option<Vec<u8>> {
        self.key.seal(plain, recipient).ok()
    }

    /// A keyed digest of `data` for `purpose` (HMAC-SHA-256 under a key derived from this
    /// key): the same on every hub holding the key and across restarts, and it tells nothing
    /// of `data` to whoever lacks the key — what may stand for a secret value in a record
    /// (a plain hash of a short password is brute-forced).
    pub fn digest(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let seed = self.key.seed().unwrap_or_default();
        let mut k = Sha256::new();
        k.update(b"flotilla digest key\0");
        k.update(purpose.as_bytes());
        k.update(b"\0");
        k.update(seed.as_bytes());
        let key: [u8; 32] = k.finalize().into();
        hmac_sha256(&key, data)
    }

    /// Opens a box sealed to this key by `sender` ([`crate::sealed`]); `None` when it does not
    /// open (another key, or tampered with).
    pub fn open_from(&self, sealed: &[u8], sender: &XKey) -> Option<Vec<u8>> {
        self.key.open(sealed, sender).ok()
    }
}

/// HMAC-SHA-256 (RFC 2104) with a 32-byte key.
fn hmac_sha256(key: &[u8; 32], data: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |b: u8| block.map(|k| k ^ b);
    let inner: [u8; 32] = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(data)
        .finalize()
        .into();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod digest_tests {
    use super::*;

    #[test]
    fn hmac_matches_openssl() {
        // `printf 'Hi There' | openssl dgst -sha256 -mac HMAC -macopt hexkey:0b…0b` (32 bytes).
        let got = hmac_sha256(&[0x0b; 32], b"Hi There");
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }

    #[test]
    fn a_digest_depends_on_the_key_and_the_purpose_and_stays_the_same() {
        let a = SealingKey::ephemeral();
        let b = SealingKey::ephemeral();
        assert_eq!(a.digest("p", b"x"), a.digest("p", b"x"));
        assert_ne!(a.digest("p", b"x"), b.digest("p", b"x"));
        assert_ne!(a.digest("p", b"x"), a.digest("q", b"x"));
        assert_ne!(a.digest("p", b"x"), a.digest("p", b"y"));
    }
}

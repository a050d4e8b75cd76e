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

    /// Opens a box sealed to this key by `sender` ([`crate::sealed`]); `None` when it does not
    /// open (another key, or tampered with).
    pub fn open_from(&self, sealed: &[u8], sender: &XKey) -> Option<Vec<u8>> {
        self.key.open(sealed, sender).ok()
    }
}

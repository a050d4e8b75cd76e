//! Revocations shared by every hub of a control plane: a replicated bucket holding one key per
//! revoked user key (its [`Revocation`], JSON) and `account-iat`, the latest account JWT `iat`
//! any hub took.
//!
//! A revocation is written here (merged with what is stored, by compare-and-set) before the
//! call that asked for it returns, so a hub that takes over a cluster — or serves its
//! registration — knows every key the others revoked. A push is ordered so the account JWT the
//! server keeps (the one with the highest `iat`) carries every revocation written before any
//! push began: take the next `iat` here first, then read every revocation, then sign. Two hubs'
//! pushes may cross on the wire; the server keeps the later `iat`, which was taken later and so
//! read at least as much.
//!
//! The revocations file stays as this hub's copy: what is only there (written by an older
//! version, or by `flotilla-hub rotate` while the bucket was out of reach) is written to the
//! bucket at the next push.

use async_nats::jetstream::kv;
use flotilla_auth::Issuer;
use flotilla_auth::issuer::{AccountJwt, IssueError, Revocation, push_accounts};
use flotilla_auth::setup::unix_now;
use flotilla_bus::jetstream::{self as js, JetStreamError, StreamOptions};
use std::sync::Arc;

/// The bucket.
pub const BUCKET: &str = "revocations";

/// The key of the latest account JWT `iat` (never a user key: those are 56 characters from `U`).
const IAT_KEY: &str = "account-iat";

/// Compare-and-set attempts before giving up on a key other hubs keep writing.
const ATTEMPTS: usize = 20;

/// Why a revocation could not be shared or pushed.
#[derive(Debug, thiserror::Error)]
pub enum RevocationError {
    /// The issuer refused it, or the revocations file failed.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// The shared bucket failed.
    #[error("revocations bucket: {0}")]
    Store(String),
    /// The shared bucket could not be opened or read.
    #[error("revocations bucket: {0}")]
    JetStream(#[from] JetStreamError),
    /// The store did not answer within the caller's patience.
    #[error("revocations bucket: the store did not answer for {} s ({why}: {last}); retry", waited.as_secs())]
    Unavailable {
        /// How long the call waited.
        waited: std::time::Duration,
        /// Why the last attempt failed.
        why: flotilla_bus::election::Why,
        /// The last attempt's error.
        last: String,
    },
}

impl crate::store::ride::Ridden for RevocationError {
    fn election(&self) -> Option<flotilla_bus::election::Why> {
        match self {
            Self::JetStream(e) => e.election(),
            _ => None,
        }
    }

    fn unavailable(
        _what: crate::store::ride::Call<'_>,
        waited: std::time::Duration,
        why: flotilla_bus::election::Why,
        last: &Self,
    ) -> Self {
        Self::Unavailable {
            waited,
            why,
            last: last.to_string(),
        }
    }
}

/// The shared revocations and this hub's issuer (cheap to clone).
#[derive(Clone)]
pub struct Shared {
    kv: kv::Store,
    issuer: Arc<Issuer>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("bucket", &self.kv.name)
            .finish()
    }
}

impl Shared {
    /// Opens (creating) the bucket with `opts` replicas.
    pub async fn open(
        jetstream: &async_nats::jetstream::Context,
        opts: StreamOptions,
        issuer: Arc<Issuer>,
    ) -> Result<Self, RevocationError> {
        let kv = js::ensure_kv(jetstream, BUCKET, 1, opts).await?;
        Ok(Self::new(kv, issuer))
    }

    /// Over an opened bucket.
    pub fn new(kv: kv::Store, issuer: Arc<Issuer>) -> Self {
        Self { kv, issuer }
    }

    /// Opens the bucket if a hub made it (`None`: no hub has started on this NATS yet).
    pub async fn find(
        jetstream: &async_nats::jetstream::Context,
        issuer: &Arc<Issuer>,
    ) -> Result<Option<Self>, RevocationError> {
        use async_nats::jetstream::context::GetStreamErrorKind;
        match jetstream.get_stream(format!("KV_{BUCKET}")).await {
            Ok(_) => {}
            Err(e)
                if matches!(e.kind(), GetStreamErrorKind::JetStream(j)
                    if j.error_code() == async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(RevocationError::Store(e.to_string())),
        }
        let kv = jetstream
            .get_key_value(BUCKET)
            .await
            .map_err(|e| RevocationError::Store(e.to_string()))?;
        Ok(Some(Self::new(kv, issuer.clone())))
    }

    /// The issuer.
    pub fn issuer(&self) -> &Arc<Issuer> {
        &self.issuer
    }

    /// The bucket (to watch).
    pub fn kv(&self) -> &kv::Store {
        &self.kv
    }

    /// Writes planned revocations to the bucket, then adopts them here. An error leaves some of
    /// them perhaps stored (never fewer revoked than reported) and none adopted.
    pub async fn record(&self, planned: &[(String, Revocation)]) -> Result<(), RevocationError> {
        for (key, r) in planned {
            store_merged(&self.kv, key, *r).await?;
        }
        self.issuer.adopt(planned, unix_now())?;
        Ok(())
    }

    /// Adopts a revocation read from the bucket by its watcher (`key`, JSON `value`). Returns
    /// whether it was news here; a value that is not a revocation is logged and skipped.
    pub fn adopt_stored(&self, key: &str, value: &[u8]) -> Result<bool, RevocationError> {
        if key == IAT_KEY {
            return Ok(false);
        }
        match serde_json::from_slice::<Revocation>(value) {
            Ok(r) => Ok(self.issuer.adopt(&[(key.to_string(), r)], unix_now())?),
            Err(e) => {
                tracing::warn!(key, error = %e, "skipping an unreadable revocation");
                Ok(false)
            }
        }
    }

    /// Reads the whole bucket: adopts what other hubs revoked, writes what only this hub holds,
    /// and purges revocations that refuse nothing any more. Returns the highest revision read
    /// (to watch from).
    pub async fn sync(&self) -> Result<u64, RevocationError> {
        let now = unix_now();
        let items = js::load_all(&self.kv).await?;
        let mut stored = Vec::new();
        let mut spent = Vec::new();
        let mut last = 0;
        for item in &items {
            last = last.max(item.revision);
            if item.key == IAT_KEY {
                continue;
            }
            match serde_json::from_slice::<Revocation>(&item.value) {
                Ok(r) if r.spent(now) => spent.push((item.key.clone(), item.revision)),
                Ok(r) => stored.push((item.key.clone(), r)),
                Err(e) => {
                    tracing::warn!(key = item.key, error = %e, "skipping an unreadable revocation")
                }
            }
        }
        self.issuer.adopt(&stored, now)?;
        let shared: std::collections::BTreeMap<&str, Revocation> =
            stored.iter().map(|(k, r)| (k.as_str(), *r)).collect();
        for (key, mine) in self.issuer.revocations() {
            if mine.spent(now)
                || shared
                    .get(key.as_str())
                    .is_some_and(|s| s.merged(mine) == *s)
            {
                continue;
            }
            store_merged(&self.kv, &key, mine).await?;
        }
        for (key, revision) in spent {
            // Only the value read: a key revoked again meanwhile stays.
            if let Err(e) = self.kv.purge_expect_revision(&key, Some(revision)).await {
                tracing::debug!(key, error = %e, "spent revocation not purged");
            }
        }
        Ok(last)
    }

    /// Takes the next account JWT `iat`: later than any this hub or any other took (compare-
    /// and-set on the bucket's `account-iat`).
    pub async fn claim_iat(&self) -> Result<i64, RevocationError> {
        for _ in 0..ATTEMPTS {
            let stored = js::get_latest(&self.kv, IAT_KEY).await?;
            let floor = stored
                .as_ref()
                .and_then(|(v, _)| std::str::from_utf8(v).ok()?.trim().parse::<i64>().ok())
                .map_or(0, |iat| iat + 1);
            let iat = self.issuer.reserve_iat(unix_now(), floor)?;
            let value = bytes::Bytes::from(iat.to_string());
            if compare_and_set(&self.kv, IAT_KEY, stored.map(|(_, r)| r), value).await? {
                return Ok(iat);
            }
        }
        Err(RevocationError::Store(format!(
            "{IAT_KEY}: still contended after {ATTEMPTS} attempts"
        )))
    }

    /// The account JWTs to push now: an `iat` claimed, then every shared revocation read, then
    /// signed (that order: see the module's notes).
    pub async fn account_jwts(&self) -> Result<Vec<AccountJwt>, RevocationError> {
        let iat = self.claim_iat().await?;
        self.sync().await?;
        Ok(self.issuer.sign_accounts(iat)?)
    }

    /// Signs and pushes the accounts over the system-account connection `sys`.
    pub async fn push(&self, sys: &async_nats::Client) -> Result<(), RevocationError> {
        let jwts = self.account_jwts().await?;
        push_accounts(sys, &jwts).await?;
        Ok(())
    }
}

/// Writes `revocations` into the bucket `kv`, each merged with what it holds (as hubs do): for
/// `flotilla-hub restore --revocations`, which puts back the revocations made after the
/// backup before any hub starts. Returns how many records it wrote (the rest were held
/// already); spent ones (refusing nothing any more) are skipped.
pub async fn union(
    kv: &kv::Store,
    revocations: &[(String, Revocation)],
    now: i64,
) -> Result<usize, RevocationError> {
    let mut written = 0;
    for (key, r) in revocations {
        if !r.spent(now) && store_merged(kv, key, *r).await? {
            written += 1;
        }
    }
    Ok(written)
}

/// Writes `r` for `key` in `kv`, merged with what the bucket holds (compare-and-set: another
/// hub's later or permanent revocation of the same key is kept). Whether it wrote.
async fn store_merged(kv: &kv::Store, key: &str, r: Revocation) -> Result<bool, RevocationError> {
    for _ in 0..ATTEMPTS {
        let stored = js::get_latest(kv, key).await?;
        let current = match &stored {
            Some((v, _)) => serde_json::from_slice::<Revocation>(v).ok(),
            None => None,
        };
        let merged = current.map_or(r, |c| c.merged(r));
        if current == Some(merged) {
            return Ok(false);
        }
        let value = bytes::Bytes::from(
            serde_json::to_vec(&merged).map_err(|e| RevocationError::Store(e.to_string()))?,
        );
        if compare_and_set(kv, key, stored.map(|(_, r)| r), value).await? {
            return Ok(true);
        }
    }
    Err(RevocationError::Store(format!(
        "{key}: still contended after {ATTEMPTS} attempts"
    )))
}

/// Writes `value` if `key` is still at `revision` (`None`: absent). `Ok(false)`: someone wrote
/// first.
async fn compare_and_set(
    kv: &kv::Store,
    key: &str,
    revision: Option<u64>,
    value: bytes::Bytes,
) -> Result<bool, RevocationError> {
    let failed = |e: &dyn std::fmt::Display| RevocationError::Store(format!("{key}: {e}"));
    match revision {
        None => match kv.create(key, value).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(failed(&e)),
        },
        Some(revision) => match kv.update(key, value, revision).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(false),
            Err(e) => Err(failed(&e)),
        },
    }
}

//! The hub's issuer: user JWTs for accepted clusters, add-on agents and join credentials,
//! revocations, rotations, and the account JWTs that carry revocations to the NATS server.
//!
//! A revocation refuses every JWT of that user key issued at or before its time, so a cluster
//! accepted again later gets a JWT issued after it. Revocations are kept in
//! `DIR/revocations.json`, written *before* anything else happens (a revocation that cannot be
//! recorded fails the deny that asked for it: fail closed), merged with what is on disk under a
//! lock (so `flotilla-hub rotate` beside a running hub loses nothing), and re-pushed at every hub
//! start. A revocation is dropped only once every JWT it could refuse has expired anyway
//! (`until`), which keeps the account JWT small at 100,000 clusters; revocations of credentials
//! that never expire (bootstrap, the hub's own) are kept for ever, so they never come back.
//!
//! Several hubs share their revocations through a replicated bucket (the hub's
//! `security::revocations`): a revocation is [`Issuer::plan`]ned, written there, then
//! [`Issuer::adopt`]ed, as are the ones other hubs write; a push takes its `iat` with
//! [`Issuer::reserve_iat`] above the latest any hub took, then [`Issuer::sign_accounts`].

use crate::creds::Creds;
use crate::jwt::{Account, Claims, JwtError, User};
use crate::permissions;
use crate::secret::write_private;
use crate::setup::{SecureDir, SetupError, user_creds};
use nkeys::KeyPair;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

/// Whom credentials are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject<'a> {
    /// A cluster's agent: that cluster's subjects.
    Cluster(&'a str),
    /// An add-on's agent on a cluster: the add-on's subjects on that cluster.
    AddOn {
        /// The add-on.
        addon: &'a str,
        /// The cluster.
        cluster: &'a str,
    },
    /// A join credential: may only ask to register this cluster name.
    Join(&'a str),
}

impl Subject<'_> {
    fn name(&self) -> String {
        match self {
            Subject::Cluster(c) => (*c).to_string(),
            Subject::AddOn { addon, cluster } => format!("{cluster}/{addon}"),
            Subject::Join(c) => format!("join/{c}"),
        }
    }

    fn permissions(&self) -> User {
        match self {
            Subject::Cluster(c) => permissions::cluster(c),
            Subject::AddOn { addon, cluster } => permissions::addon(addon, cluster),
            Subject::Join(c) => permissions::join(c),
        }
    }

    fn check(&self) -> Result<(), IssueError> {
        let token = |what: &'static str, name: &str| {
            if is_plain_token(name) {
                Ok(())
            } else {
                Err(IssueError::BadName {
                    what,
                    name: name.to_string(),
                })
            }
        };
        match self {
            Subject::Cluster(c) | Subject::Join(c) => token("cluster", c),
            Subject::AddOn { addon, cluster } => {
                token("cluster", cluster)?;
                token("add-on", addon)
            }
        }
    }
}

/// Which account a user key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    /// The hub's account (the hub's own user).
    Hub,
    /// The agents' account (bootstrap, join, cluster, add-on users).
    Agents,
}

/// One revocation to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revoke<'a> {
    /// The user key.
    pub key: &'a str,
    /// Its account.
    pub account: Which,
    /// Until when JWTs issued for it before now may still be valid (`None`: they never expire,
    /// so the revocation is kept for ever).
    pub until: Option<i64>,
}

/// An account JWT to push to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountJwt {
    /// The account's public key.
    pub account: String,
    /// The signed JWT.
    pub jwt: String,
}

/// Why credentials could not be issued, a revocation recorded or an account pushed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The agent's key is not a user public NKey.
    #[error("public key {0:?} is not a NATS user key (U…)")]
    BadKey(String),
    /// A cluster or add-on name is not one plain subject token, so permissions built from it
    /// would not be limited to it (`*`, `>`, `.` would widen them).
    #[error(
        "{what} name {name:?} cannot be scoped in NATS permissions (want letters, digits, '-' or '_')"
    )]
    BadName {
        /// `cluster` or `add-on`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Signing failed.
    #[error(transparent)]
    Jwt(#[from] JwtError),
    /// The account JWT would be too large to push: a revocation is refused rather than
    /// recorded and never enforced.
    #[error(
        "{0} revocations are outstanding, the most the account JWT can carry ({MAX_REVOCATIONS}); \
         revocations expire with the credentials they refuse, so lower --credentials-ttl-seconds \
         or wait"
    )]
    TooMany(usize),
    /// The revocations file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A credentials file could not be written or read.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The server did not take the account update.
    #[error("pushing the account to the NATS server: {0}")]
    Push(String),
}

/// A recorded revocation of one user key: what the revocations file holds per key, and what
/// hubs sharing a control plane exchange (JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// JWTs of the key issued at or before this are refused.
    pub at: i64,
    /// The key's account.
    pub account: Which,
    /// After this, no JWT the revocation refuses is valid anyway (None: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<i64>,
}

impl Revocation {
    /// The later of two revocations of one key (and a lifetime of "for ever" over any).
    pub fn merged(self, other: Revocation) -> Revocation {
        Revocation {
            at: self.at.max(other.at),
            account: self.account,
            until: match (self.until, other.until) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            },
        }
    }

    /// Whether every JWT it refuses has expired by `now` (with a minute of clock skew), so it
    /// refuses nothing any more.
    pub fn spent(&self, now: i64) -> bool {
        self.until.is_some_and(|u| u < now - 60)
    }
}

/// `revocations.json`: today's shape, or the shape before join credentials and two accounts
/// (key → time, every key a cluster's).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum File {
    Current {
        #[allow(dead_code)]
        version: u32,
        revocations: BTreeMap<String, Revocation>,
        /// The `iat` of the last account JWTs signed: the next must be later, or the server
        /// keeps the older one (and still answers "jwt updated").
        #[serde(default)]
        last_iat: i64,
        /// The longest credential lifetime ever issued: a revocation matters that long.
        #[serde(default)]
        max_ttl: u64,
    },
    Legacy(BTreeMap<String, i64>),
}

#[derive(Serialize)]
struct FileOut<'a> {
    version: u32,
    revocations: &'a BTreeMap<String, Revocation>,
    last_iat: i64,
    max_ttl: u64,
}

/// What `revocations.json` holds.
#[derive(Debug, Default)]
struct Stored {
    revocations: BTreeMap<String, Revocation>,
    last_iat: i64,
    max_ttl: u64,
}

struct State {
    revocations: BTreeMap<String, Revocation>,
    last_account_iat: i64,
    max_ttl: u64,
}

/// Revocations of the agents' account at most: each costs about 100 bytes of the account JWT,
/// which must fit in the server's 1 MiB `max_payload` to be pushed at all.
pub const MAX_REVOCATIONS: usize = 9_000;

/// Issues and revokes credentials (cheap to share behind an `Arc`).
pub struct Issuer {
    hub_account: Claims<Account>,
    hub_signing: KeyPair,
    agents_account: Claims<Account>,
    agents_signing: KeyPair,
    operator_signing: KeyPair,
    ttl: Duration,
    file: PathBuf,
    dir: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("account", &self.hub_account.sub)
            .field("agents", &self.agents_account.sub)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn clone_key(k: &KeyPair) -> Result<KeyPair, IssueError> {
    let seed = k.seed().map_err(|e| JwtError::Sign(e.to_string()))?;
    Ok(KeyPair::from_seed(&seed).map_err(|e| JwtError::Sign(e.to_string()))?)
}

impl Issuer {
    /// An issuer for a secure directory, with cluster credentials valid for `ttl`.
    pub fn new(dir: &SecureDir, ttl: Duration) -> Result<Self, IssueError> {
        let file = dir.revocations_file();
        let stored = read_file(&file, ttl)?;
        Ok(Self {
            hub_account: dir.account_jwt.clone(),
            hub_signing: clone_key(&dir.account_signing)?,
            agents_account: dir.agents_jwt.clone(),
            agents_signing: clone_key(&dir.agents_signing)?,
            operator_signing: clone_key(&dir.operator_signing)?,
            ttl,
            file,
            dir: dir.dir.clone(),
            state: Mutex::new(State {
                // The last account JWT was issued at or after the latest revocation: the next
                // one must be later, even right after a restart.
                last_account_iat: stored
                    .last_iat
                    .max(stored.revocations.values().map(|e| e.at).max().unwrap_or(0)),
                max_ttl: stored.max_ttl.max(ttl.as_secs()),
                revocations: stored.revocations,
            }),
        })
    }

    /// The hub account's public key.
    pub fn account(&self) -> &str {
        &self.hub_account.sub
    }

    /// The agents account's public key (where every spoke-side user lives).
    pub fn agents_account(&self) -> &str {
        &self.agents_account.sub
    }

    /// How long issued cluster and add-on credentials are valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Signs a user JWT for `key` with `subject`'s permissions, valid for the issuer's TTL
    /// (a join credential: use [`Issuer::mint_join`]).
    pub fn issue(&self, subject: Subject<'_>, key: &str, now: i64) -> Result<Issued, IssueError> {
        self.issue_for(subject, key, now, self.ttl)
    }

    fn issue_for(
        &self,
        subject: Subject<'_>,
        key: &str,
        now: i64,
        ttl: Duration,
    ) -> Result<Issued, IssueError> {
        subject.check()?;
        if !is_user_key(key) {
            return Err(IssueError::BadKey(key.to_string()));
        }
        let revoked_at = self.lock().revocations.get(key).map_or(i64::MIN, |e| e.at);
        let issued_at = now.max(revoked_at.saturating_add(1));
        let expires_at = issued_at + ttl.as_secs() as i64;
        let mut nats = subject.permissions();
        nats.issuer_account = self.agents_account.sub.clone();
        let mut claims = Claims::new(subject.name(), key, issued_at, nats);
        claims.exp = Some(expires_at);
        Ok(Issued {
            jwt: claims.encode(&self.agents_signing)?,
            issued_at,
            expires_at,
        })
    }

    /// A new join credential for `cluster`: a fresh user key (its seed only in the returned
    /// credentials) that may only ask to register that name, valid for `ttl`.
    pub fn mint_join(
        &self,
        cluster: &str,
        ttl: Duration,
        now: i64,
    ) -> Result<(Creds, Issued), IssueError> {
        let key = KeyPair::new_user();
        let issued = self.issue_for(Subject::Join(cluster), &key.public_key(), now, ttl)?;
        let seed = key.seed().map_err(|e| JwtError::Sign(e.to_string()))?;
        Ok((
            Creds {
                jwt: issued.jwt.clone(),
                seed: crate::Secret::new(seed),
            },
            issued,
        ))
    }

    /// Whether `key` has a revocation.
    pub fn is_revoked(&self, key: &str) -> bool {
        self.lock().revocations.contains_key(key)
    }

    /// Records revocations at `now` on disk, merged with what is there; an error here means
    /// nothing was revoked. The account JWTs that carry them are signed when pushed
    /// ([`Issuer::account_jwts`]), so a burst of revocations is one push.
    pub fn revoke(&self, revokes: &[Revoke<'_>], now: i64) -> Result<(), IssueError> {
        let planned = self.plan(revokes, now)?;
        self.adopt(&planned, now).map(drop)
    }

    /// The revocations `revokes` made at `now` would record, refused (nothing recorded) when
    /// they would take the agents' account past [`MAX_REVOCATIONS`]. Hubs sharing a store
    /// write these there first, then [`Issuer::adopt`] them.
    pub fn plan(
        &self,
        revokes: &[Revoke<'_>],
        now: i64,
    ) -> Result<Vec<(String, Revocation)>, IssueError> {
        let planned: Vec<(String, Revocation)> = revokes
            .iter()
            .filter(|r| !r.key.is_empty())
            .map(|r| {
                (
                    r.key.to_string(),
                    Revocation {
                        at: now,
                        account: r.account,
                        until: r.until,
                    },
                )
            })
            .collect();
        let st = self.lock();
        let new_agents = planned
            .iter()
            .filter(|(k, r)| r.account == Which::Agents && !st.revocations.contains_key(k))
            .count();
        let agents = st
            .revocations
            .values()
            .filter(|e| e.account == Which::Agents && !e.spent(now))
            .count()
            + new_agents;
        if agents > MAX_REVOCATIONS {
            return Err(IssueError::TooMany(agents));
        }
        Ok(planned)
    }

    /// Merges revocations (made here, or by another hub and read from the shared store) into
    /// memory and the revocations file. Returns whether anything changed.
    pub fn adopt(
        &self,
        revocations: &[(String, Revocation)],
        now: i64,
    ) -> Result<bool, IssueError> {
        let before = self.lock().revocations.clone();
        self.write(now, None, |merged| {
            for (key, r) in revocations {
                merge(merged, key, *r);
            }
            Ok(())
        })?;
        Ok(self.lock().revocations != before)
    }

    /// Every revocation in force (memory, merged with the file at each write).
    pub fn revocations(&self) -> Vec<(String, Revocation)> {
        self.lock()
            .revocations
            .iter()
            .map(|(k, r)| (k.clone(), *r))
            .collect()
    }

    /// The revocation recorded for `key`, if any.
    pub fn revocation(&self, key: &str) -> Option<Revocation> {
        self.lock().revocations.get(key).copied()
    }

    /// One read-merge-write of the revocations file under its lock: `change` edits the merged
    /// revocations (an error leaves file and memory as they were); with `sign` (a floor), the
    /// next account JWT `iat` — later than any taken before, and at least the floor — is taken
    /// and kept. Returns the last `iat`.
    fn write(
        &self,
        now: i64,
        sign: Option<i64>,
        change: impl FnOnce(&mut BTreeMap<String, Revocation>) -> Result<(), IssueError>,
    ) -> Result<i64, IssueError> {
        let mut st = self.lock();
        let _guard = FileLock::take(&self.dir)?;
        let on_disk = read_file(&self.file, self.ttl)?;
        let mut merged = on_disk.revocations;
        for (key, entry) in &st.revocations {
            merge(&mut merged, key, *entry);
        }
        change(&mut merged)?;
        // A revocation whose every refusable JWT has expired refuses nothing any more.
        merged.retain(|_, e| !e.spent(now));
        let mut last_iat = st.last_account_iat.max(on_disk.last_iat);
        if let Some(floor) = sign {
            last_iat = now.max(last_iat + 1).max(floor);
        }
        let max_ttl = st.max_ttl.max(on_disk.max_ttl);
        let bytes = serde_json::to_vec_pretty(&FileOut {
            version: 2,
            revocations: &merged,
            last_iat,
            max_ttl,
        })
        .map_err(|e| IssueError::Io {
            path: self.file.clone(),
            source: std::io::Error::other(e),
        })?;
        write_private(&self.file, &bytes).map_err(|source| IssueError::Io {
            path: self.file.clone(),
            source,
        })?;
        st.revocations = merged;
        st.last_account_iat = last_iat;
        st.max_ttl = max_ttl;
        Ok(last_iat)
    }

    /// A revocation of a cluster or add-on key made at `now`: every JWT issued for it lives at
    /// most one TTL.
    pub fn agent_revoke<'a>(&self, key: &'a str, now: i64) -> Revoke<'a> {
        // The longest lifetime ever issued: a hub restarted with a shorter TTL must not drop a
        // revocation while a longer-lived JWT it refuses is still valid.
        let ttl = self.lock().max_ttl.max(self.ttl.as_secs());
        Revoke {
            key,
            account: Which::Agents,
            until: Some(now + ttl as i64),
        }
    }

    /// The account JWTs with the current revocations (merged with the file, so a rotation by
    /// another process is pushed too), signed now with an `iat` later than any signed before —
    /// kept in the file, so a restart or `flotilla-hub rotate` never signs one the server would
    /// ignore as older.
    pub fn account_jwts(&self, now: i64) -> Result<Vec<AccountJwt>, IssueError> {
        let iat = self.reserve_iat(now, 0)?;
        self.sign_accounts(iat)
    }

    /// Takes the next account JWT `iat`: after every one taken here before (kept in the file
    /// before any JWT carrying it leaves this process), and at least `floor` (the latest any
    /// hub sharing the store took).
    pub fn reserve_iat(&self, now: i64, floor: i64) -> Result<i64, IssueError> {
        self.write(now, Some(floor), |_| Ok(()))
    }

    /// The account JWTs with the current revocations, signed with `iat` (from
    /// [`Issuer::reserve_iat`]).
    pub fn sign_accounts(&self, iat: i64) -> Result<Vec<AccountJwt>, IssueError> {
        let st = self.lock();
        [
            (&self.hub_account, Which::Hub),
            (&self.agents_account, Which::Agents),
        ]
        .into_iter()
        .map(|(template, which)| {
            let mut claims = template.clone();
            claims.iat = iat;
            claims.nats.revocations = st
                .revocations
                .iter()
                .filter(|(_, e)| e.account == which)
                // A key revoked for ever refuses every JWT whenever issued: a skewed clock,
                // or a JWT dated after the revocation, cannot bring it back.
                .map(|(k, e)| (k.clone(), if e.until.is_none() { i64::MAX } else { e.at }))
                .collect();
            Ok(AccountJwt {
                account: claims.sub.clone(),
                jwt: claims.encode(&self.operator_signing)?,
            })
        })
        .collect()
    }

    /// Writes new credentials for the hub's own user (`which` = Hub, `hub.creds`) or the
    /// fleet-wide bootstrap user (Agents, `bootstrap.creds`) and revokes the key they replace,
    /// for ever. Returns the account JWTs to push; until they are pushed (here, or by the hub
    /// at its next start) the old credentials still work.
    pub fn rotate(&self, which: Which, now: i64) -> Result<Vec<AccountJwt>, IssueError> {
        self.rotate_key(which, now)?;
        self.account_jwts(now)
    }

    /// [`Issuer::rotate`] without signing: writes the new credentials and records the old
    /// key's revocation, which it returns (for a shared store) — pushed by whoever signs next.
    pub fn rotate_key(&self, which: Which, now: i64) -> Result<(String, Revocation), IssueError> {
        let (file, name, nats, signing, account) = match which {
            Which::Hub => (
                self.dir.join("hub.creds"),
                "flotilla-hub",
                permissions::hub(),
                &self.hub_signing,
                &self.hub_account.sub,
            ),
            Which::Agents => (
                self.dir.join("bootstrap.creds"),
                "flotilla-bootstrap",
                permissions::bootstrap(),
                &self.agents_signing,
                &self.agents_account.sub,
            ),
        };
        let old = read_creds_key(&file)?;
        let creds = user_creds(name, nats, signing, account, now)?;
        // Revoke first: if the new file cannot be written the old one is already dead, which is
        // safe (rotate again); the other order could leave a rotation that revoked nothing.
        let revoke = Revoke {
            key: &old,
            account: which,
            until: None,
        };
        let planned = self.plan(&[revoke], now)?;
        self.adopt(&planned, now)?;
        write_private(&file, creds.format().expose().as_bytes()).map_err(|source| {
            IssueError::Io {
                path: file.clone(),
                source,
            }
        })?;
        Ok(planned.into_iter().next().expect("one key planned"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The user key in a credentials file.
fn read_creds_key(path: &Path) -> Result<String, IssueError> {
    let io = |source| IssueError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let creds = Creds::parse(&text)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    Ok(creds.public_key())
}

/// Keeps the later of two revocations of one key (and a lifetime of "for ever" over any).
fn merge(into: &mut BTreeMap<String, Revocation>, key: &str, entry: Revocation) {
    let e = into.entry(key.to_string()).or_insert(entry);
    *e = e.merged(entry);
}

/// The revocations a hub's `revocations.json` at `path` holds (today's shape, or the legacy
/// one, whose entries carry no lifetime and are kept for `legacy_ttl`): for `flotilla-hub
/// restore --revocations`. A missing file is an error here, not an empty list.
pub fn read_revocations(
    path: &Path,
    legacy_ttl: Duration,
) -> Result<BTreeMap<String, Revocation>, IssueError> {
    if !path.exists() {
        return Err(IssueError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    Ok(read_file(path, legacy_ttl)?.revocations)
}

fn read_file(path: &Path, ttl: Duration) -> Result<Stored, IssueError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Stored::default()),
        Err(source) => {
            return Err(IssueError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let file: File = serde_json::from_slice(&bytes).map_err(|e| IssueError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    Ok(match file {
        File::Current {
            revocations,
            last_iat,
            max_ttl,
            ..
        } => Stored {
            revocations,
            last_iat,
            max_ttl,
        },
        File::Legacy(map) => Stored {
            revocations: map
                .into_iter()
                .map(|(k, at)| {
                    (
                        k,
                        Revocation {
                            at,
                            account: Which::Agents,
                            until: Some(at + ttl.as_secs() as i64),
                        },
                    )
                })
                .collect(),
            last_iat: 0,
            max_ttl: ttl.as_secs(),
        },
    })
}

/// An exclusive lock on `DIR/revocations.lock` for one read-merge-write of the revocations.
struct FileLock(std::fs::File);

impl FileLock {
    fn take(dir: &Path) -> Result<Self, IssueError> {
        let path = dir.join("revocations.lock");
        let io = |source| IssueError::Io {
            path: path.clone(),
            source,
        };
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        f.lock().map_err(io)?;
        Ok(Self(f))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Whether `key` is a NATS user public key (`U…`, valid checksum).
pub fn is_user_key(key: &str) -> bool {
    key.starts_with('U') && KeyPair::from_public_key(key).is_ok()
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

/// Pushes every account JWT of `jwts`, stopping at the first refusal.
pub async fn push_accounts(
    sys: &async_nats::Client,
    jwts: &[AccountJwt],
) -> Result<(), IssueError> {
    for a in jwts {
        push_account(sys, &a.account, a.jwt.clone()).await?;
    }
    Ok(())
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

    #[test]
    fn later_and_permanent_revocations_win_a_merge() {
        let mut m = BTreeMap::new();
        let e = |at, until| Revocation {
            at,
            account: Which::Agents,
            until,
        };
        merge(&mut m, "U1", e(10, Some(100)));
        merge(&mut m, "U1", e(5, Some(200)));
        assert_eq!(m["U1"], e(10, Some(200)));
        merge(&mut m, "U1", e(1, None));
        assert_eq!(m["U1"], e(10, None), "a revocation for ever stays for ever");
    }

    #[test]
    fn the_old_file_shape_reads_as_cluster_revocations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("revocations.json");
        std::fs::write(&path, br#"{"UABC": 1000}"#).unwrap();
        let m = read_file(&path, Duration::from_secs(60))
            .unwrap()
            .revocations;
        assert_eq!(
            m["UABC"],
            Revocation {
                at: 1000,
                account: Which::Agents,
                until: Some(1060)
            }
        );
    }
}

//! Who may call the gRPC API: bearer tokens with an `admin`, `deployer` or `read-only` role.
//!
//! Tokens come from a file (`--api-token-file`), one per line, `TOKEN,NAME,ROLE[,EXECUTE_AS]`, in
//! the manner of Kubernetes' static token file: the hub keeps only each token's SHA-256 and
//! never logs one. What each method needs is decided one by one in the hub's access table
//! ([`super::access::Table`]: the core's rows and each family's, given to [`Tokens`] at boot): a
//! read-only identity may call the methods it marks `Read` (gets, lists, watches, placement
//! debugging, reflection) and nothing that changes state; the read-only proxy to spokes is
//! admin-only (it can read any object of a spoke, Secrets included), and so is any method the
//! table does not know. Health checks need no token, so load balancers and probes keep working.
//!
//! ManifestWork executors (OCM's `execute-as`): an admin may name any executor. A `deployer` reads
//! like a read-only identity and may apply and delete works, but only works whose
//! `spec.executor` is one of its EXECUTE_AS grants — space-separated `NAMESPACE/NAME` or
//! `NAMESPACE/*` ServiceAccounts of the managed clusters — so what it can put on a cluster is
//! bounded by those ServiceAccounts' rights there ([`Identity::may_execute_as`]). Replacing or
//! deleting a work needs the stored work's executor too: either removes what that executor put
//! on the cluster. The checks are the work service's (they need the works); this layer only lets
//! deployers reach it.
//!
//! Teams (issue 48): every [`Identity`] carries its [`Principal`] and its [`Scope`] — its CSV role
//! as a fleet-wide role (`admin` → fleet admin, `read-only` and `deployer` → fleet view,
//! `member` → none) plus what the grants file (`--grants-file`, [`crate::grants`]) gives its
//! name and groups (a `member`'s 4th field: space-separated groups) on cluster sets and
//! namespaces, computed per call from the grants in force ([`Live`]). The gate lets a call
//! through when the CSV role allows it, or — for the services that check each object against
//! the grants ([`super::access::ENFORCED`]) — when some grant of the caller could
//! ([`super::access::Need::could`]); the service then decides on the object
//! ([`super::guard::allow`]) and filters what it lists. A `member` may call nothing else: the
//! services that do not check the grants would show it the whole fleet.
//!
//! OIDC (`--oidc-issuer-url`): a bearer that is not in the token file is offered to the hub's
//! [`BearerVerifier`] — the issuer's ID tokens, verified by the hub crate over
//! `flotilla-oidc` — which names a [`Principal`] (`Via::Oidc`, its user and groups after their
//! prefixes) with no CSV role: the grants file alone says what it may do. A token of the issuer
//! that is refused is answered `UNAUTHENTICATED` with the reason (expired, audience, key).
//!
//! Without a token file (and without an issuer) the API is open — the default for the demo on loopback; the binary refuses
//! to serve it open on any other address unless told to (`--api-allow-unauthenticated`) — and
//! every caller may name any executor.

use super::access::{Access, Table};
use crate::grants::live::Live;
use crate::grants::{FleetRole, Grants, Principal, Scope, SetIds, Via};
use crate::setindex::SetIndex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use thiserror::Error;

/// What an identity may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Read only: the methods the access table marks `Read` ([`super::access`]).
    ReadOnly,
    /// Read, and apply or delete works whose executors (new and stored) it is granted.
    Deployer,
    /// Everything, as any executor.
    Admin,
    /// No fleet-wide role: only what the grants file gives its name and groups.
    Member,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::ReadOnly => "read-only",
            Role::Deployer => "deployer",
            Role::Admin => "admin",
            Role::Member => "member",
        })
    }
}

/// Why a caller may not do what it asked, or a grant does not parse; the text is the
/// `PERMISSION_DENIED` (or token file) message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// An `execute-as` grant that is not `NAMESPACE/NAME` or `NAMESPACE/*`.
    #[error("execute-as grant {0:?} is not NAMESPACE/NAME or NAMESPACE/*")]
    GrantShape(String),
    /// A grant whose namespace or name breaks the Kubernetes rules.
    #[error("execute-as grant {grant:?}: {source}")]
    GrantName {
        /// The grant.
        grant: String,
        /// Why.
        #[source]
        source: flotilla_api::names::NameError,
    },
    /// A read-only identity writing works.
    #[error("{0} (read-only) may not write ManifestWorks")]
    ReadOnly(String),
    /// A deployer applying with the agent's own identity.
    #[error(
        "spec.executor: {name} (deployer) must name an executor it may act as ({grants}); only \
         an admin may apply with the agent's own identity"
    )]
    NoExecutor {
        /// The identity.
        name: String,
        /// Its grants.
        grants: String,
    },
    /// A deployer naming an executor outside its grants.
    #[error(
        "spec.executor: {name} (deployer) may not execute as {username} ({executor}); its \
         execute-as grants are {grants}"
    )]
    NotGranted {
        /// The identity.
        name: String,
        /// The executor's user name.
        username: String,
        /// The executor.
        executor: String,
        /// The identity's grants.
        grants: String,
    },
}

/// One `execute-as` grant: a ServiceAccount, or every ServiceAccount of a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecuteAs {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Its name; `None` for `NAMESPACE/*`.
    pub name: Option<String>,
}

impl ExecuteAs {
    /// Parses `NAMESPACE/NAME` or `NAMESPACE/*`.
    pub fn parse(s: &str) -> Result<Self, AccessError> {
        let Some((namespace, name)) = s.split_once('/') else {
            return Err(AccessError::GrantShape(s.into()));
        };
        let named = |source| AccessError::GrantName {
            grant: s.into(),
            source,
        };
        flotilla_api::names::validate_dns1123_subdomain("namespace", namespace).map_err(named)?;
        if name == "*" {
            return Ok(Self {
                namespace: namespace.into(),
                name: None,
            });
        }
        flotilla_api::names::validate_dns1123_subdomain("name", name).map_err(named)?;
        Ok(Self {
            namespace: namespace.into(),
            name: Some(name.into()),
        })
    }

    /// Whether the grant covers `executor`.
    pub fn covers(&self, executor: &flotilla_api::work::Executor) -> bool {
        self.namespace == executor.namespace
            && self.name.as_ref().is_none_or(|n| *n == executor.name)
    }
}

impl fmt::Display for ExecuteAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.namespace,
            self.name.as_deref().unwrap_or("*")
        )
    }
}

/// What the CSV token file says of an identity: its role and a deployer's execute-as grants.
/// The role is its fleet-wide grant (`admin` → fleet admin, `read-only` and `deployer` → fleet
/// view); the execute-as grants stay a rule of their own on works and ServiceAccount tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Legacy {
    /// Its role.
    pub role: Role,
    /// The executors a deployer may name (empty for other roles).
    pub execute_as: Vec<ExecuteAs>,
}

impl Role {
    /// The fleet-wide role a CSV role stands for (none for a `member`).
    pub fn fleet(self) -> Option<FleetRole> {
        match self {
            Role::Admin => Some(FleetRole::Admin),
            Role::Deployer | Role::ReadOnly => Some(FleetRole::View),
            Role::Member => None,
        }
    }

    /// Its name in a token file or a forwarded call.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "admin" => Role::Admin,
            "deployer" => Role::Deployer,
            "read-only" => Role::ReadOnly,
            "member" => Role::Member,
            _ => return None,
        })
    }
}

/// Who is calling (put in the request's extensions for the services): the principal
/// authentication found, what the token file says of it, and its scope under the hub's grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Who it is.
    pub principal: Principal,
    /// Its CSV role and execute-as grants; `None` for an identity that is not a CSV token's.
    /// (Shared: identities are cloned into every call's extensions and kept small.)
    pub legacy: Option<Arc<Legacy>>,
    /// What it holds: its CSV role as a fleet role, and the grants file's roles for its name.
    pub scope: Arc<Scope>,
}

impl Identity {
    /// A CSV token's identity, before the grants file is consulted: its role as its fleet role.
    pub fn token(name: &str, role: Role, execute_as: Vec<ExecuteAs>) -> Self {
        Self {
            principal: Principal::user(name, Via::Token),
            legacy: Some(Arc::new(Legacy { role, execute_as })),
            scope: Arc::new(match role.fleet() {
                Some(fleet) => Scope::fleet(fleet),
                None => Scope::default(),
            }),
        }
    }

    /// The fleet role its authentication gave it (a CSV token's role).
    pub fn base(&self) -> Option<FleetRole> {
        self.legacy.as_ref().and_then(|l| l.role.fleet())
    }

    /// The same identity with its scope under the grants in force.
    pub fn scoped(self, live: &Live) -> Self {
        let scope = live.scope(&self.principal, self.base());
        Self { scope, ..self }
    }

    /// The caller of an open hub (no token file): anonymous, fleet admin, any executor.
    pub fn open() -> Self {
        Self {
            principal: Principal::open(),
            legacy: Some(Arc::new(Legacy {
                role: Role::Admin,
                execute_as: Vec::new(),
            })),
            scope: Arc::new(Scope::all()),
        }
    }

    /// The same identity with its scope computed under `grants` (its CSV role stays the base:
    /// grants add to it, never take from it).
    pub fn under(self, grants: &Grants) -> Self {
        let base = self.base();
        let scope = Scope::of(grants, &self.principal, base, &SetIds::default());
        Self {
            scope: Arc::new(scope),
            ..self
        }
    }

    /// Its name (the user of its principal).
    pub fn name(&self) -> &str {
        &self.principal.user
    }

    /// The role the surfaces that still decide by role see: `admin` for a fleet admin (by its
    /// CSV role or the grants file), `read-only` for a fleet viewer by the grants file, else
    /// its CSV role, else `member`.
    pub fn role(&self) -> Role {
        match (self.scope.fleet, &self.legacy) {
            (Some(FleetRole::Admin), _) => Role::Admin,
            (_, Some(legacy)) if legacy.role != Role::Member => legacy.role,
            (Some(FleetRole::View), _) => Role::ReadOnly,
            (None, _) => Role::Member,
        }
    }

    /// A deployer's execute-as grants (empty for everyone else).
    pub fn execute_as(&self) -> &[ExecuteAs] {
        self.legacy
            .as_ref()
            .map_or(&[], |l| l.execute_as.as_slice())
    }

    /// Whether this identity may write a work naming `executor` (`None`: the agent's own
    /// identity, which only an admin may use — OCM's `NilExecutorValidating` for deployers).
    /// The error names `spec.executor` and the identity, for a `PERMISSION_DENIED` status.
    pub fn may_execute_as(
        &self,
        executor: Option<&flotilla_api::work::Executor>,
    ) -> Result<(), AccessError> {
        match (self.role(), executor) {
            (Role::Admin, _) => Ok(()),
            (Role::ReadOnly | Role::Member, _) => {
                Err(AccessError::ReadOnly(self.name().to_string()))
            }
            (Role::Deployer, None) => Err(AccessError::NoExecutor {
                name: self.name().to_string(),
                grants: self.grants(),
            }),
            (Role::Deployer, Some(e)) if self.execute_as().iter().any(|g| g.covers(e)) => Ok(()),
            (Role::Deployer, Some(e)) => Err(AccessError::NotGranted {
                name: self.name().to_string(),
                username: e.username(),
                executor: e.to_string(),
                grants: self.grants(),
            }),
        }
    }

    /// Whether this identity may call the gRPC method `path` (`/package.Service/Method`) by
    /// the hub's access table; the error names the caller and why, for a `PERMISSION_DENIED`
    /// status. For the services that check each object ([`Table::enforced`]) a grant that could
    /// allow the call lets it through (the service decides on the object).
    pub fn may_call(&self, table: &Table, path: &str) -> Result<(), String> {
        self.gate(table, path, true)
    }

    /// [`Identity::may_call`] by its fleet-wide role alone: for surfaces that do not check
    /// each object against the grants (the dashboard's actions).
    pub fn may_call_by_role(&self, table: &Table, path: &str) -> Result<(), String> {
        self.gate(table, path, false)
    }

    fn gate(&self, table: &Table, path: &str, objects_checked: bool) -> Result<(), String> {
        let need = table.access(path);
        let role = self.role();
        // Past the gate the service checks the object; here: could any grant allow it?
        let could = objects_checked
            && table.enforced(path)
            && table.need(path).is_some_and(|n| n.could(&self.scope));
        let allowed = could
            || match need {
                Access::Open => true,
                Access::Read => role != Role::Member,
                Access::WriteWork => matches!(role, Role::Admin | Role::Deployer),
                Access::Write => role == Role::Admin,
            };
        if allowed {
            return Ok(());
        }
        if let Some(rule) = table
            .need(path)
            .filter(|_| objects_checked && table.enforced(path))
        {
            return Err(format!(
                "{} ({role}) may not call {path}: it needs {} (holds {})",
                self.name(),
                rule.wants(),
                held(&self.scope)
            ));
        }
        let why = match (need, table.lookup(path)) {
            (_, None) => "only an admin may call a method the hub's access table does not know",
            (Access::Read, _) => {
                "this service does not check the grants file yet (it would show the whole \
                 fleet): it needs a fleet role"
            }
            (Access::WriteWork, _) => {
                "only an admin or a deployer (within its execute-as grants) may: it applies or \
                 deletes works, or hands out a ServiceAccount's token"
            }
            _ => {
                "only an admin may: it changes state, reads spoke objects or hands out \
                 credentials"
            }
        };
        Err(format!(
            "{} ({}) may not call {path}: {why}",
            self.name(),
            self.role()
        ))
    }

    /// Its execute-as grants, space-separated (for messages).
    pub fn grants(&self) -> String {
        self.execute_as()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a scope holds, for messages: `view on cluster set "team-a"`, or `none`.
fn held(scope: &Scope) -> String {
    let grants: Vec<String> = scope.grants().iter().map(ToString::to_string).collect();
    if grants.is_empty() {
        "none".into()
    } else {
        grants.join(", ")
    }
}

/// A caller another hub of the control plane authenticated and vouches for: put in a
/// forwarded call's extensions by [`super::forward::serve`], and only from a call box sealed
/// with the shared sealing key ([`crate::sealed`]). Extensions never come from the wire, so no
/// client can claim one. [`Authenticated`] takes it instead of a bearer token, and still checks
/// that the identity may call the method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vouched(pub Identity);

/// A token file that cannot be used.
#[derive(Debug, Error)]
pub enum TokenFileError {
    /// It cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line is wrong (the token itself is never shown).
    #[error("{path}:{line}: {reason}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Shortest accepted token: guessing one must be hopeless.
pub const MIN_TOKEN_LEN: usize = 16;

/// The known tokens, by SHA-256, the access table calls are decided by, and the grants in
/// force that give identities roles beyond their CSV role.
#[derive(Clone, Default)]
pub struct Tokens {
    /// Each token's identity before the grants (its CSV role as its scope).
    by_hash: HashMap<[u8; 32], Identity>,
    /// The same identities by name: a caller another hub vouches for is known by its name
    /// (`None`: several tokens share the name, so it says nothing).
    by_name: HashMap<Arc<str>, Option<Identity>>,
    access: Arc<Table>,
    live: Live,
    /// Bearer tokens that are not the file's: the OIDC issuer's (`--oidc-issuer-url`).
    bearer: Option<Arc<dyn BearerVerifier>>,
}

/// A verifier of bearer tokens other than the token file's — the hub's OIDC issuer's, which
/// the hub crate implements over `flotilla-oidc` (the core does not depend on its crypto).
/// Verification is synchronous: the keys are in memory, and a call never waits on the issuer.
pub trait BearerVerifier: Send + Sync {
    /// What `token` is.
    fn verify(&self, token: &str) -> Verified;
}

/// What a [`BearerVerifier`] made of a bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// Not one of its tokens (not a JWT of its issuer): unknown to the hub.
    NotMine,
    /// Its token, valid: who it names.
    Principal(Principal),
    /// Its token, refused: why, in words safe to tell the caller (`UNAUTHENTICATED`).
    Refused(String),
}

/// Why a bearer token names nobody: the `UNAUTHENTICATED` message.
pub const UNKNOWN_TOKEN: &str = "the bearer token is not known to this hub";

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} identities)", self.by_hash.len())
    }
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Reads a token file: `TOKEN,NAME,ROLE[,EXECUTE_AS]` per line, `#` comments and blank
    /// lines allowed; ROLE is `admin`, `deployer` or `read-only`; EXECUTE_AS (deployers only,
    /// required for them) lists space-separated `NAMESPACE/NAME` or `NAMESPACE/*` grants.
    /// Reports the first bad line by number.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses the text of a token file named `path` (for messages).
    pub fn parse(path: &str, text: &str) -> Result<Self, TokenFileError> {
        let mut tokens = Self::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| TokenFileError::Line {
                path: path.to_string(),
                line: i + 1,
                reason,
            };
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let (token, name, role, grants) = match fields[..] {
                [token, name, role] => (token, name, role, ""),
                [token, name, role, grants] => (token, name, role, grants),
                _ => {
                    return Err(bad(format!(
                        "want TOKEN,NAME,ROLE, TOKEN,NAME,deployer,EXECUTE_AS or \
                         TOKEN,NAME,member,GROUPS (3 or 4 fields), found {}",
                        fields.len()
                    )));
                }
            };
            if token.len() < MIN_TOKEN_LEN {
                return Err(bad(format!(
                    "the token of {name:?} is shorter than {MIN_TOKEN_LEN} characters"
                )));
            }
            if name.is_empty() {
                return Err(bad("NAME is empty".into()));
            }
            let Some(role) = Role::parse(role) else {
                return Err(bad(format!(
                    "ROLE {role:?} is not admin, deployer, read-only or member"
                )));
            };
            // A member's 4th field lists its groups (the grants file gives groups roles).
            let (grants, groups) = match role {
                Role::Member => ("", grants),
                _ => (grants, ""),
            };
            if let Some(bad_group) = groups
                .split_whitespace()
                .find(|g| g.len() > 256 || g.chars().any(char::is_control))
            {
                return Err(bad(format!(
                    "group {bad_group:?} of {name:?} is longer than 256 bytes or has control \
                     characters"
                )));
            }
            let execute_as = grants
                .split_whitespace()
                .map(ExecuteAs::parse)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            match role {
                Role::Deployer if execute_as.is_empty() => {
                    return Err(bad(format!(
                        "deployer {name:?} needs EXECUTE_AS grants (NAMESPACE/NAME or NAMESPACE/*, \
                         space-separated) in a 4th field"
                    )));
                }
                Role::Admin | Role::ReadOnly if !execute_as.is_empty() => {
                    return Err(bad(format!(
                        "EXECUTE_AS grants are for deployers; {name:?} is {role} (an admin may act \
                         as any executor)"
                    )));
                }
                _ => {}
            }
            let mut identity = Identity::token(name, role, execute_as);
            identity.principal = identity.principal.with_groups(groups.split_whitespace());
            if tokens
                .by_hash
                .insert(hash(token), identity.clone())
                .is_some()
            {
                return Err(bad(format!("the token of {name:?} is used twice")));
            }
            tokens
                .by_name
                .entry(name.into())
                .and_modify(|known| *known = None)
                .or_insert(Some(identity));
        }
        if tokens.by_hash.is_empty() {
            return Err(TokenFileError::Line {
                path: path.to_string(),
                line: 0,
                reason: "no tokens: an empty file would lock everyone out".into(),
            });
        }
        Ok(tokens)
    }

    /// The same tokens deciding by `table` (the hub's: the core's rows and every family's);
    /// until given one, tokens decide by the core's rows alone (a family's method admin-only).
    pub fn with_access(self, table: Arc<Table>) -> Self {
        Self {
            access: table,
            ..self
        }
    }

    /// The access table calls are decided by.
    pub fn access(&self) -> &Arc<Table> {
        &self.access
    }

    /// The same tokens with `grants` in force (the grants file, `--grants-file`): each
    /// identity's scope is its CSV role as a fleet role plus what the file gives its name and
    /// groups. [`Live::replace`] on [`Tokens::live`] puts a reloaded file in force.
    pub fn with_grants(self, grants: Arc<Grants>) -> Self {
        let live = Live::new(Arc::unwrap_or_clone(grants)).with_index(self.live.index().clone());
        Self { live, ..self }
    }

    /// The same tokens with the grants in force read from `path`, followed while the hub runs.
    pub fn with_grants_file(self, path: &Path) -> Self {
        let live = self.live.clone().from_file(path);
        Self { live, ..self }
    }

    /// The same tokens deciding with `index` (the hub's set index).
    pub fn with_index(self, index: SetIndex) -> Self {
        let live = self.live.with_index(index);
        Self { live, ..self }
    }

    /// The grants in force and the set index, which every surface decides by.
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The grants in force.
    pub fn grants(&self) -> Arc<Grants> {
        self.live.current().grants.clone()
    }

    /// The same tokens also accepting what `verifier` verifies (the OIDC issuer's tokens).
    pub fn with_bearer(self, verifier: Arc<dyn BearerVerifier>) -> Self {
        Self {
            bearer: Some(verifier),
            ..self
        }
    }

    /// Whether bearer tokens other than the file's are accepted (an OIDC issuer).
    pub fn has_bearer(&self) -> bool {
        self.bearer.is_some()
    }

    /// The identity a bearer token belongs to, scoped by the grants in force.
    pub fn identify(&self, token: &str) -> Option<Identity> {
        self.authenticate(token).ok()
    }

    /// The identity a bearer token belongs to, scoped by the grants in force, or why it names
    /// nobody: the token file first (one hash lookup), then the OIDC issuer. An OIDC identity
    /// has no CSV role: what it may do is what the grants file gives its user and groups.
    pub fn authenticate(&self, token: &str) -> Result<Identity, String> {
        if let Some(identity) = self.by_hash.get(&hash(token)) {
            return Ok(identity.clone().scoped(&self.live));
        }
        match self.bearer.as_ref().map(|b| b.verify(token)) {
            Some(Verified::Principal(principal)) => self.issuers(principal),
            Some(Verified::Refused(why)) => Err(why),
            Some(Verified::NotMine) | None => Err(UNKNOWN_TOKEN.into()),
        }
    }

    /// The identity of a user the OIDC issuer vouches for (a bearer ID token's, or the
    /// dashboard's sign-in's): no CSV role, scoped by the grants in force; refused when its
    /// name is a token file's.
    pub fn issuers(&self, principal: Principal) -> Result<Identity, String> {
        self.not_a_token_name(&principal)?;
        Ok(Identity {
            principal,
            legacy: None,
            scope: Arc::new(Scope::default()),
        }
        .scoped(&self.live))
    }

    /// Refuses an issuer's user whose name is also a token file's NAME: the grants file names
    /// both kinds of user alike, so the issuer's would hold the token's grants (and, vouched
    /// for by another hub, once was taken for the token itself). Possible only with usernames
    /// the operator left unprefixed (`--oidc-username-prefix -`, or the `email` claim).
    fn not_a_token_name(&self, principal: &Principal) -> Result<(), String> {
        if matches!(principal.via, Via::Token) || !self.by_name.contains_key(&principal.user) {
            return Ok(());
        }
        tracing::warn!(
            user = %principal.user,
            "an OIDC user is named as a token of the token file: refused; give the issuer's \
             users a prefix (--oidc-username-prefix)"
        );
        Err(format!(
            "the OIDC user {:?} has the name of one of this hub's tokens, and the hub does not \
             take one for the other: its operator must give the issuer's users a prefix \
             (--oidc-username-prefix)",
            principal.user
        ))
    }

    /// A caller another hub vouches for, as this hub knows it, scoped by this hub's grants: a
    /// token file's caller is the identity of this hub's token file by that name (its role and
    /// groups here), else as forwarded; an OIDC caller is its user and groups as forwarded, and
    /// refused if its name is a token's here (see [`Tokens::authenticate`]).
    pub fn vouched(&self, identity: Identity) -> Result<Identity, String> {
        self.not_a_token_name(&identity.principal)?;
        let known = matches!(identity.principal.via, Via::Token)
            .then(|| self.by_name.get(identity.name()).cloned().flatten())
            .flatten();
        Ok(known.unwrap_or(identity).scoped(&self.live))
    }

    /// The decision for a call to `path` with the `authorization` header value `header`.
    pub fn authorize(
        &self,
        path: &str,
        header: Option<&str>,
    ) -> Result<Option<Identity>, tonic::Status> {
        self.authorize_from(path, header, None)
    }

    /// [`Tokens::authorize`] for a call from `source` (its refusal's audit line says it).
    pub fn authorize_from(
        &self,
        path: &str,
        header: Option<&str>,
        source: Option<std::net::IpAddr>,
    ) -> Result<Option<Identity>, tonic::Status> {
        let need = self.access.access(path);
        if need == Access::Open {
            return Ok(None);
        }
        let token = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                let why = "no bearer token: pass --token, set FLOTILLA_TOKEN or configure an \
                           exec credential plugin (--exec-command)";
                audit_unauthenticated(source, &format!("call {path}"), why);
                tonic::Status::unauthenticated(why)
            })?;
        let identity = self.authenticate(token).map_err(|why| {
            audit_unauthenticated(source, &format!("call {path}"), &why);
            tonic::Status::unauthenticated(why)
        })?;
        let gate = identity.may_call(&self.access, path);
        super::guard::audit_gate(
            &identity,
            &self.access,
            path,
            gate.as_ref().err().map(|e| e.as_str()),
        );
        gate.map_err(tonic::Status::permission_denied)?;
        Ok(Some(identity))
    }
}

pub use super::refused::audit_unauthenticated;

/// A tower layer that authenticates and authorizes every call with [`Tokens`] (open when
/// `None`).
#[derive(Clone)]
pub struct Authenticate {
    tokens: Option<Arc<Tokens>>,
}

impl Authenticate {
    /// The layer.
    pub fn new(tokens: Option<Tokens>) -> Self {
        Self {
            tokens: tokens.map(Arc::new),
        }
    }
}

impl<S> tower::Layer<S> for Authenticate {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            inner,
            tokens: self.tokens.clone(),
        }
    }
}

/// The service [`Authenticate`] wraps around the gRPC router.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    tokens: Option<Arc<Tokens>>,
}

impl<S, B, R> tower::Service<http::Request<B>> for Authenticated<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let vouched = req.extensions_mut().remove::<Vouched>();
        if let Some(tokens) = &self.tokens {
            let decision = match vouched {
                // Scoped by this hub's grants, whatever the forwarding hub's were.
                Some(Vouched(identity)) => tokens
                    .vouched(identity)
                    .map_err(tonic::Status::unauthenticated)
                    .and_then(|identity| vouch(&tokens.access, req.uri().path(), identity)),
                None => {
                    let header = req
                        .headers()
                        .get(http::header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok());
                    let source = super::refused::peer_of(&req).map(|p| p.ip());
                    tokens.authorize_from(req.uri().path(), header, source)
                }
            };
            match decision {
                Ok(Some(identity)) => {
                    let need = tokens.access.access(req.uri().path());
                    if matches!(need, Access::Write | Access::WriteWork) {
                        tracing::info!(caller = %identity.name(), method = %req.uri().path(), "api call");
                    }
                    req.extensions_mut().insert(identity);
                    // What the services check objects by (family services read it here).
                    req.extensions_mut()
                        .insert(super::guard::Teams::new(Some(tokens.live.clone())));
                }
                Ok(None) => {}
                Err(status) => {
                    tracing::debug!(method = %req.uri().path(), code = ?status.code(), "api call refused");
                    return Box::pin(std::future::ready(Ok(status.into_http())));
                }
            }
        }
        Box::pin(self.inner.call(req))
    }
}

/// The decision for a call to `path` by a caller another hub vouches for: the same access
/// table as for a token.
fn vouch(table: &Table, path: &str, identity: Identity) -> Result<Option<Identity>, tonic::Status> {
    if table.access(path) == Access::Open {
        return Ok(None);
    }
    identity
        .may_call(table, path)
        .map_err(tonic::Status::permission_denied)?;
    Ok(Some(identity))
}

#[cfg(test)]
mod tests;

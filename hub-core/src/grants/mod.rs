//! Teams on one hub: who holds which role on the fleet, on each cluster set and on each
//! namespace, and what that lets a caller see and do (issue 48). Pure: no I/O, no clock; the
//! file is read by the caller and the set index is fed by a task of its own.
//!
//! The roles are OCM's and Kubernetes' (docs/notes/issue-48-design.md §3.1): fleet `admin` ⊇
//! `view` (the CSV token roles: `admin` → fleet admin, `read-only` and `deployer` → fleet
//! view); cluster set `admin` ⊇ `bind` ⊇ `view` (OCM's
//! `open-cluster-management:managedclusterset:{admin,bind,view}:<set>`), reaching the clusters
//! of the set and their namespaces; namespace `admin` ⊇ `edit` ⊇ `view` (Kubernetes'
//! aggregated roles) for the workspace objects of a namespace (placements, replica sets,
//! policies, bindings).
//!
//! - [`file`]: the grants file (`--grants-file`, YAML `kind: Grants`) → [`Grants`], every error
//!   at once with its YAML path, and the digest hubs compare.
//! - [`index`]: set ids, set masks and the set index's view (cluster → its sets).
//! - [`members`]: the set index's state, changed a cluster or a set at a time.
//! - [`live`]: the grants in force (reloadable), the set index and each principal's scope.
//! - [`source`]: the grants file followed while the hub runs (a bad file keeps the last good).
//! - [`scope`]: what one principal holds under the current grants ([`scope::Scope`]).
//! - [`decide`]: [`decide::decide`] (allowed by which grant, or which grants are missing) and
//!   [`decide::sees`] (the filter of every list and watch).

pub mod decide;
pub mod file;
pub mod index;
pub mod live;
pub mod members;
pub mod scope;
pub mod source;

pub use decide::{Decision, Missing, Target, Verb, decide, sees};
pub use file::{FileError, Invalid};
pub use index::{SetId, SetIds, SetIndexView, SetMask};
pub use scope::Scope;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

/// Who is calling, as authentication found it; what it may do is its [`Scope`], computed
/// from this and the current grants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The user name: a CSV token's NAME, or an OIDC username claim after its prefix.
    pub user: Arc<str>,
    /// The groups the identity provider says the user is in (none for CSV tokens).
    pub groups: Arc<[Arc<str>]>,
    /// How the caller was authenticated.
    pub via: Via,
}

impl Principal {
    /// A principal without groups.
    pub fn user(user: &str, via: Via) -> Self {
        Self {
            user: user.into(),
            groups: Arc::from(Vec::new()),
            via,
        }
    }

    /// The same principal in `groups` as well.
    pub fn with_groups<S: AsRef<str>>(self, groups: impl IntoIterator<Item = S>) -> Self {
        Self {
            groups: groups.into_iter().map(|g| Arc::from(g.as_ref())).collect(),
            ..self
        }
    }

    /// The caller of an open hub (no token file, no issuer): loopback only, fleet admin.
    pub fn open() -> Self {
        Self::user("anonymous", Via::Open)
    }
}

impl fmt::Display for Principal {
    /// `alice`, or `alice (groups team-a-sre, team-a-dev)`: how refusals name the caller.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.user)?;
        if !self.groups.is_empty() {
            let groups: Vec<&str> = self.groups.iter().map(|g| &**g).collect();
            write!(f, " (groups {})", groups.join(", "))?;
        }
        Ok(())
    }
}

/// How a principal was authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Via {
    /// A token of the hub's CSV token file.
    Token,
    /// A bearer JWT from the configured OIDC issuer.
    Oidc {
        /// The token's issuer.
        issuer: Arc<str>,
        /// The token's `exp`, as seconds since the Unix epoch.
        expires: u64,
    },
    /// Another hub of the control plane authenticated it and forwarded the call.
    Vouched {
        /// The hub that forwarded the call.
        by_hub: Arc<str>,
        /// How that hub authenticated the caller.
        first: Box<Via>,
    },
    /// An open hub: nobody was authenticated.
    Open,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::Token => f.write_str("token"),
            Via::Oidc { .. } => f.write_str("oidc"),
            Via::Vouched { by_hub, first } => write!(f, "{first} (vouched for by {by_hub})"),
            Via::Open => f.write_str("open"),
        }
    }
}

/// A fleet-wide role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FleetRole {
    /// Every read the access table marks `Read`, on every object.
    View,
    /// Everything.
    Admin,
}

/// A role on one cluster set (OCM's set roles): each contains the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetRole {
    /// See the set, its clusters and their namespaces' objects.
    View,
    /// `view`, and bind the set into a namespace where the caller holds `edit`.
    Bind,
    /// `bind`, and write in the set's clusters and their namespaces, hand out their
    /// credentials, update the set.
    Admin,
}

/// A role on one namespace (Kubernetes' aggregated roles): each contains the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NamespaceRole {
    /// See the namespace's placements, replica sets, policies and bindings.
    View,
    /// `view`, and write them.
    Edit,
    /// `edit` (nothing more yet: the grants live in the file, not in the namespace).
    Admin,
}

impl fmt::Display for FleetRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FleetRole::View => "view",
            FleetRole::Admin => "admin",
        })
    }
}

impl fmt::Display for SetRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SetRole::View => "view",
            SetRole::Bind => "bind",
            SetRole::Admin => "admin",
        })
    }
}

impl fmt::Display for NamespaceRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NamespaceRole::View => "view",
            NamespaceRole::Edit => "edit",
            NamespaceRole::Admin => "admin",
        })
    }
}

/// One role on one target: what allowed a call, or what a caller holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    /// A fleet-wide role.
    Fleet(FleetRole),
    /// A role on a cluster set.
    Set {
        /// The set.
        name: Arc<str>,
        /// The role.
        role: SetRole,
    },
    /// A role on a namespace.
    Namespace {
        /// The namespace.
        name: Arc<str>,
        /// The role.
        role: NamespaceRole,
    },
}

impl fmt::Display for Grant {
    /// `admin on the fleet`, `admin on cluster set "team-a"`, `edit on namespace "apps"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Fleet(role) => write!(f, "{role} on the fleet"),
            Grant::Set { name, role } => write!(f, "{role} on cluster set {name:?}"),
            Grant::Namespace { name, role } => write!(f, "{role} on namespace {name:?}"),
        }
    }
}

/// Whom a grant is given to: a user by name, or everyone in a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A user ([`Principal::user`]).
    User(Arc<str>),
    /// A group ([`Principal::groups`]).
    Group(Arc<str>),
}

/// The highest role held on each target — by one subject, or by a principal over its user and
/// all its groups (the union, as Kubernetes' RBAC adds up bindings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// The fleet-wide role, if any.
    pub fleet: Option<FleetRole>,
    /// The role on each set.
    pub sets: BTreeMap<Arc<str>, SetRole>,
    /// The role on each namespace.
    pub namespaces: BTreeMap<Arc<str>, NamespaceRole>,
}

impl Held {
    /// Adds `other`'s roles, keeping the higher role on each target.
    pub fn merge(&mut self, other: &Held) {
        self.fleet = self.fleet.max(other.fleet);
        for (name, role) in &other.sets {
            let mine = self.sets.entry(name.clone()).or_insert(*role);
            *mine = (*mine).max(*role);
        }
        for (name, role) in &other.namespaces {
            let mine = self.namespaces.entry(name.clone()).or_insert(*role);
            *mine = (*mine).max(*role);
        }
    }

    /// Every grant held, fleet first, then sets and namespaces by name.
    pub fn grants(&self) -> Vec<Grant> {
        let fleet = self.fleet.map(Grant::Fleet);
        let sets = self.sets.iter().map(|(name, role)| Grant::Set {
            name: name.clone(),
            role: *role,
        });
        let namespaces = self.namespaces.iter().map(|(name, role)| Grant::Namespace {
            name: name.clone(),
            role: *role,
        });
        fleet.into_iter().chain(sets).chain(namespaces).collect()
    }
}

impl Held {
    /// Whether it holds exactly `grant`'s role on `grant`'s target.
    fn gives(&self, grant: &Grant) -> bool {
        match grant {
            Grant::Fleet(role) => self.fleet == Some(*role),
            Grant::Set { name, role } => self.sets.get(name) == Some(role),
            Grant::Namespace { name, role } => self.namespaces.get(name) == Some(role),
        }
    }
}

/// One role a principal holds on one target and whom the grants file gives it to, of the
/// principal's user and groups (`flotilla whoami`'s rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The highest role held on the target.
    pub grant: Grant,
    /// The subjects given that role there: the user first, then the groups in their order.
    pub from: Vec<Subject>,
}

/// The parsed grants file: what each subject holds, and a digest of the whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    by_subject: HashMap<Subject, Held>,
    entries: usize,
    digest: [u8; 32],
}

impl Default for Grants {
    /// [`Grants::none`].
    fn default() -> Self {
        Self::none()
    }
}

impl Grants {
    /// No grants at all (a hub without `--grants-file`: only the CSV roles count).
    pub fn none() -> Self {
        file::from_entries(Vec::new())
    }

    /// What `principal` holds: the union over its user and its groups.
    pub fn held_by(&self, principal: &Principal) -> Held {
        let mut held = Held::default();
        let user = Subject::User(principal.user.clone());
        let groups = principal.groups.iter().map(|g| Subject::Group(g.clone()));
        for subject in std::iter::once(user).chain(groups) {
            if let Some(h) = self.by_subject.get(&subject) {
                held.merge(h);
            }
        }
        held
    }

    /// Every grant `principal` holds ([`Grants::held_by`]'s: fleet first, then sets and
    /// namespaces by name), each with the subjects that give it.
    pub fn sources(&self, principal: &Principal) -> Vec<Source> {
        let subjects: Vec<Subject> = std::iter::once(Subject::User(principal.user.clone()))
            .chain(principal.groups.iter().map(|g| Subject::Group(g.clone())))
            .collect();
        let gives = |s: &Subject, grant: &Grant| {
            self.by_subject.get(s).is_some_and(|held| held.gives(grant))
        };
        (self.held_by(principal).grants().into_iter())
            .map(|grant| Source {
                from: (subjects.iter())
                    .filter(|s| gives(s, &grant))
                    .cloned()
                    .collect(),
                grant,
            })
            .collect()
    }

    /// The SHA-256 of the grants' canonical form (independent of key and list order in the
    /// file): hubs publish it so that `doctor` can tell when they disagree.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// [`Self::digest`] as lower-case hex.
    pub fn digest_hex(&self) -> String {
        self.digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// How many subjects the file names.
    pub fn subjects(&self) -> usize {
        self.by_subject.len()
    }

    /// How many (subject, role, target) entries the file has.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Whether some grant names namespace `name` (a workspace: no cluster may take its name,
    /// review r1 §5).
    pub fn names_namespace(&self, name: &str) -> bool {
        self.by_subject
            .values()
            .any(|h| h.namespaces.contains_key(name))
    }

    /// Every set some grant names (sets may be granted before they exist).
    pub fn set_names(&self) -> std::collections::BTreeSet<Arc<str>> {
        self.by_subject
            .values()
            .flat_map(|h| h.sets.keys().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests;

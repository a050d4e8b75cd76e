//! Which gRPC method needs which access: explicit rows, every method of every service the hub
//! serves decided one by one — never by the shape of a method's name, so a new `Get…` that
//! returned secrets would not be open to read-only tokens by accident. (Pure.)
//!
//! The core's services have their rows here ([`CORE`]); each controller family declares the
//! rows of its own services next to them, in its folder (`controller::Recipe::ACCESS`, with
//! the same doc table in its `family.rs`). At boot the hub builds one [`Table`] from the core's
//! rows and every family's in its list; [`super::auth`] decides by it. A method missing from
//! the table is admin-only (deny by default); a row declared twice refuses to build; a unit
//! test in `flotilla-hub` walks the services' generated descriptors and fails for a served
//! method without a row, or a row no service has: adding an RPC means deciding, in the folder
//! that serves it, who may call it.
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `grpc.health.v1.Health` | `Check`, `Watch` | | | |
//! | `grpc.reflection.v1.ServerReflection` | | `ServerReflectionInfo` | | |
//! | `flotilla.v1.ClusterService` | | `ListClusters`, `GetCluster`, `WatchClusters` | | `AcceptClusters`, `DenyClusters`, `LabelCluster`, `TaintCluster`, `SetLeaseDuration`, `DeleteCluster`, `ApplyCluster`, `CreateJoinToken` |
//! | `flotilla.v1.WorkService` | | `GetWork`, `ListWorks`, `WatchWorks` | `ApplyWork`, `ApplyWorks`, `DeleteWork` | `Proxy` |
//! | `flotilla.v1.AccessService` | | `WhoAmI` | | |
//!
//! Each row also says what the method needs of the caller's grants beyond this coarse column
//! ([`Need`], issue 48): the object whose cluster, set or namespace decides
//! (`ClusterOf`, `Set`, `Namespace`, `Binding`, `ClusterIntoSet`), a fleet role alone
//! (`Fleet`), or items filtered one by one (`Filtered`). Services check it with
//! [`super::guard::allow`]; [`Need::could`] says whether any grant of a scope could allow a
//! method at all (the gate, once the services check their objects). The object rules of the
//! core's services:
//!
//! - filtered by the cluster's sets: `ListClusters`, `GetCluster`, `WatchClusters`, `GetWork`,
//!   `ListWorks`, `WatchWorks`;
//! - `admin` on one of the cluster's sets: `AcceptClusters`, `DenyClusters`, `LabelCluster`,
//!   `TaintCluster`, `SetLeaseDuration`, `DeleteCluster`, `ApplyWork`, `ApplyWorks`,
//!   `DeleteWork`;
//! - `admin` on the set it goes into (and on one of those it leaves): `ApplyCluster`;
//! - `admin` on the set it names: `CreateJoinToken`;
//! - `admin` on one of the cluster's sets: `Proxy` (it reads any object of the spoke as the
//!   agent, Secrets included; a set's viewers read through the cluster proxy, which tells
//!   Secrets apart).
//!
//! Why: health checks serve load balancers and probes. `Proxy` is admin-only although it only
//! reads, because it reads any object of a spoke, Secrets included. `CreateJoinToken` answers
//! with a NATS seed. A deployer reaches only the work service's apply and delete; the service
//! then checks the work's executor, the stored one too (`flotilla-hub`'s `grpc::work`), and a
//! ManagedServiceAccount's token, which the service gives a deployer only when one of its
//! execute-as grants covers the ServiceAccount on the cluster (`flotilla-hub`'s
//! `serviceaccount::grpc`).

use crate::grants::{Scope, Verb};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What a method needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (health checks).
    Open,
    /// Any identity.
    Read,
    /// An admin, or a deployer (the service then checks the deployer's execute-as grants).
    WriteWork,
    /// An admin.
    Write,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Open => "open",
            Access::Read => "read",
            Access::WriteWork => "write-work",
            Access::Write => "write",
        })
    }
}

use Access::{Open, Read, Write, WriteWork};

/// What a method needs of the caller's grants (docs/notes/issue-48-design.md §5.1): which
/// object of the request decides, and with which verb. A method whose object the service does
/// not check yet is decided by the coarse column alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing beyond the coarse column: health checks, reflection, the add-on catalogue.
    Any,
    /// A fleet role alone (cluster-scoped kinds of no set: import policies, mirror peers, the
    /// add-on catalogue's writes, deleting a set).
    Fleet(Verb),
    /// The cluster the request names: a role on one of its sets.
    ClusterOf(Verb),
    /// A cluster created in or moved into a set: `admin` on that set and on one it leaves.
    ClusterIntoSet,
    /// The set the request names.
    Set(Verb),
    /// The namespace the request names.
    Namespace(Verb),
    /// Binding a set into a namespace: `bind` on the set and `edit` on the namespace.
    Binding,
    /// A read whose items are each shown only to who sees them (lists, watches, gets).
    Filtered,
}

impl Need {
    /// Whether any grant of `scope` could allow a call needing this, before its object is
    /// known: a fleet role that covers it, or the needed role on some set or namespace.
    pub fn could(self, scope: &Scope) -> bool {
        let fleet = |verb: Verb| scope.fleet.is_some_and(|f| f >= verb.fleet_role());
        let set =
            |verb: Verb| fleet(verb) || scope.best_set_role().is_some_and(|r| r >= verb.set_role());
        let namespace = |verb: Verb| {
            fleet(verb)
                || scope
                    .best_namespace_role()
                    .is_some_and(|r| r >= verb.namespace_role())
        };
        match self {
            Need::Any | Need::Filtered => true,
            Need::Fleet(verb) => fleet(verb),
            Need::ClusterOf(verb) | Need::Set(verb) => set(verb),
            Need::ClusterIntoSet => set(Verb::Write),
            Need::Namespace(verb) => namespace(verb),
            Need::Binding => fleet(Verb::Bind) || (set(Verb::Bind) && namespace(Verb::Bind)),
        }
    }
}

impl Need {
    /// What a caller must hold somewhere for [`Need::could`] to hold: `admin on a cluster set`.
    pub fn wants(self) -> String {
        let set = |v: Verb| format!("{} on a cluster set", v.set_role());
        let namespace = |v: Verb| format!("{} on a namespace", v.namespace_role());
        match self {
            Need::Any | Need::Filtered => "nothing".into(),
            Need::Fleet(v) => format!("{} on the fleet", v.fleet_role()),
            Need::ClusterOf(v) | Need::Set(v) => set(v),
            Need::ClusterIntoSet => set(Verb::Write),
            Need::Namespace(v) => namespace(v),
            Need::Binding => format!("{} and {}", set(Verb::Bind), namespace(Verb::Bind)),
        }
    }

    /// Whether this rule fits a row's coarse column: reads are filtered or need a read role
    /// (or nothing, when open), writes name the object that decides.
    pub fn fits(self, access: Access) -> bool {
        let reads = matches!(
            self,
            Need::Any | Need::Filtered | Need::Fleet(Verb::Read) | Need::Namespace(Verb::Read)
        );
        match access {
            Open => self == Need::Any,
            Read => reads,
            Write | WriteWork => !reads,
        }
    }
}

/// Short names for the rows' [`Need`]s.
pub mod need {
    use super::Need;
    use crate::grants::Verb;

    /// [`Need::Any`].
    pub const ANY: Need = Need::Any;
    /// [`Need::Filtered`].
    pub const FILTERED: Need = Need::Filtered;
    /// A fleet `view`.
    pub const FLEET_READ: Need = Need::Fleet(Verb::Read);
    /// A fleet `admin`.
    pub const FLEET_WRITE: Need = Need::Fleet(Verb::Write);
    /// `admin` on one of the cluster's sets.
    pub const CLUSTER_WRITE: Need = Need::ClusterOf(Verb::Write);
    /// `admin` on one of the cluster's sets, handing out a credential.
    pub const CLUSTER_CREDENTIALS: Need = Need::ClusterOf(Verb::Credentials);
    /// `view` on one of the cluster's sets, through a read of the spoke.
    pub const CLUSTER_PROXY_READ: Need = Need::ClusterOf(Verb::ProxyRead);
    /// `admin` on one of the cluster's sets, through the spoke (any object, Secrets too).
    pub const CLUSTER_PROXY_WRITE: Need = Need::ClusterOf(Verb::ProxyWrite);
    /// [`Need::ClusterIntoSet`].
    pub const INTO_SET: Need = Need::ClusterIntoSet;
    /// `admin` on the set.
    pub const SET_WRITE: Need = Need::Set(Verb::Write);
    /// `admin` on the set, handing out a credential.
    pub const SET_CREDENTIALS: Need = Need::Set(Verb::Credentials);
    /// `view` on the namespace.
    pub const NAMESPACE_READ: Need = Need::Namespace(Verb::Read);
    /// `edit` on the namespace.
    pub const NAMESPACE_WRITE: Need = Need::Namespace(Verb::Write);
    /// [`Need::Binding`].
    pub const BINDING: Need = Need::Binding;
}

use need::*;

/// The services that check each object against the caller's grants ([`super::guard::allow`])
/// and filter what they list: for their methods the gate lets through a caller whose grants
/// could allow the call ([`Need::could`]) even when its CSV role would not. A service not
/// listed is decided by the CSV roles alone, and refused to identities without a fleet role.
pub const ENFORCED: &[&str] = &[
    "flotilla.v1.ClusterService",
    "flotilla.v1.WorkService",
    "flotilla.v1.ClusterSetService",
    "flotilla.v1.PlacementService",
    "flotilla.v1.ServiceAccountService",
    "flotilla.v1.ReplicaSetService",
    "flotilla.v1.PolicyService",
    "flotilla.v1.AddOnService",
    "flotilla.v1.GitRepoService",
    // About the caller itself (`WhoAmI`): nothing of the fleet to check or filter.
    "flotilla.v1.AccessService",
    // Fleet-wide objects only: the gate's fleet rule is the whole check.
    "flotilla.v1.ImportPolicyService",
    "flotilla.v1.MirrorPeerService",
];

/// One service's rows: `("package.Service", &[("Method", access, need), …])`.
pub type Rows = (&'static str, &'static [(&'static str, Access, Need)]);

/// The core's services (health, reflection, clusters, works), with the access each method
/// needs; the families' services have their rows in their folders.
pub const CORE: &[Rows] = &[
    (
        "grpc.health.v1.Health",
        &[("Check", Open, ANY), ("Watch", Open, ANY)],
    ),
    (
        "grpc.reflection.v1.ServerReflection",
        &[("ServerReflectionInfo", Read, ANY)],
    ),
    (
        "flotilla.v1.ClusterService",
        &[
            ("ListClusters", Read, FILTERED),
            ("GetCluster", Read, FILTERED),
            ("WatchClusters", Read, FILTERED),
            ("AcceptClusters", Write, CLUSTER_WRITE),
            ("DenyClusters", Write, CLUSTER_WRITE),
            ("LabelCluster", Write, CLUSTER_WRITE),
            ("TaintCluster", Write, CLUSTER_WRITE),
            ("SetLeaseDuration", Write, CLUSTER_WRITE),
            ("DeleteCluster", Write, CLUSTER_WRITE),
            ("ApplyCluster", Write, INTO_SET),
            // Its answer holds a NATS seed.
            ("CreateJoinToken", Write, SET_CREDENTIALS),
        ],
    ),
    (
        "flotilla.v1.WorkService",
        &[
            ("ApplyWork", WriteWork, CLUSTER_WRITE),
            ("ApplyWorks", WriteWork, CLUSTER_WRITE),
            ("GetWork", Read, FILTERED),
            ("ListWorks", Read, FILTERED),
            ("DeleteWork", WriteWork, CLUSTER_WRITE),
            ("WatchWorks", Read, FILTERED),
            // Reads any object of a spoke, Secrets included.
            ("Proxy", Write, CLUSTER_PROXY_WRITE),
        ],
    ),
    (
        "flotilla.v1.AccessService",
        // Who the caller is and what it holds: its own, for any identity.
        &[("WhoAmI", Read, ANY)],
    ),
];

/// A method declared twice: the table is not built (who decides is never a matter of order).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the access table has {path} twice: declared by {first} and by {second}")]
pub struct Twice {
    /// The method (`/package.Service/Method`).
    pub path: String,
    /// Who declared it first (`core`, or a family's name).
    pub first: &'static str,
    /// Who declared it again.
    pub second: &'static str,
}

/// Every method the hub serves (`/package.Service/Method`) with the access it needs, and who
/// declared it: the core's rows and each family's, built once at boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    methods: BTreeMap<String, (Access, Need, &'static str)>,
}

impl Default for Table {
    /// The core's rows only (a hub's table adds its families': until then their methods are
    /// admin-only).
    fn default() -> Self {
        Self::new([("core", CORE)]).expect("the core's rows name each method once")
    }
}

impl Table {
    /// The table of `parts`, each `(who, rows)`; a method declared twice is refused.
    pub fn new(
        parts: impl IntoIterator<Item = (&'static str, &'static [Rows])>,
    ) -> Result<Self, Twice> {
        let mut methods = BTreeMap::new();
        for (who, rows) in parts {
            for (service, list) in rows {
                for (method, access, need) in *list {
                    let path = format!("/{service}/{method}");
                    if let Some(&(_, _, first)) = methods.get(&path) {
                        return Err(Twice {
                            path,
                            first,
                            second: who,
                        });
                    }
                    methods.insert(path, (*access, *need, who));
                }
            }
        }
        Ok(Self { methods })
    }

    /// The entry for a gRPC method path (`/package.Service/Method`), `None` when the method is
    /// not in the table.
    pub fn lookup(&self, path: &str) -> Option<Access> {
        self.methods.get(path).map(|(access, _, _)| *access)
    }

    /// What a gRPC method path needs of the caller's grants; `None` when the method is not in
    /// the table (then only a fleet admin may call it).
    pub fn need(&self, path: &str) -> Option<Need> {
        self.methods.get(path).map(|(_, need, _)| *need)
    }

    /// Whether the service serving `path` checks each object against the grants
    /// ([`ENFORCED`]), or the method needs nothing of them ([`Need::Any`]).
    pub fn enforced(&self, path: &str) -> bool {
        let service = path.trim_start_matches('/').split('/').next().unwrap_or("");
        self.need(path) == Some(Need::Any) || ENFORCED.contains(&service)
    }

    /// The access a gRPC method path needs: its entry, and admin for a method missing from the
    /// table (deny by default).
    pub fn access(&self, path: &str) -> Access {
        self.lookup(path).unwrap_or(Write)
    }

    /// Every method path in the table with its access and who declared it, by path.
    pub fn methods(&self) -> impl Iterator<Item = (&str, Access, &'static str)> {
        self.methods
            .iter()
            .map(|(path, (access, _, who))| (path.as_str(), *access, *who))
    }
}

/// The doc-table rows of a source file's `//!` docs (`//! | \`package.Service\` | open | read
/// | write-work | write |`), as methods and their access: the unit tests hold each doc table
/// equal to the rows beside it.
pub fn documented(source: &str) -> BTreeMap<String, Access> {
    let columns = [Open, Read, WriteWork, Write];
    let mut documented = BTreeMap::new();
    for line in source.lines() {
        let Some(row) = line.strip_prefix("//! | `") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let service = cells[0].trim_end_matches('`');
        for (access, cell) in columns.iter().zip(&cells[1..]) {
            for method in cell.split(',').map(|m| m.trim().trim_matches('`')) {
                if !method.is_empty() {
                    documented.insert(format!("/{service}/{method}"), *access);
                }
            }
        }
    }
    documented
}

/// Every method of every service in the hub's generated descriptors (`flotilla.v1`, health,
/// reflection v1), as `/package.Service/Method`: what the hub's table must decide, and nothing
/// more.
pub fn described() -> BTreeSet<String> {
    use prost::Message;
    let sets = [
        flotilla_api::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
    ];
    let mut paths = BTreeSet::new();
    for bytes in sets {
        let set =
            prost_types::FileDescriptorSet::decode(bytes).expect("a generated descriptor set");
        for file in set.file {
            for service in &file.service {
                for method in &service.method {
                    paths.insert(format!(
                        "/{}.{}/{}",
                        file.package(),
                        service.name(),
                        method.name()
                    ));
                }
            }
        }
    }
    paths
}

#[cfg(test)]
mod tests;

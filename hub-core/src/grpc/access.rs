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
//!
//! Why: health checks serve load balancers and probes. `Proxy` is admin-only although it only
//! reads, because it reads any object of a spoke, Secrets included. `CreateJoinToken` answers
//! with a NATS seed. A deployer reaches only the work service's apply and delete; the service
//! then checks the work's executor, the stored one too (`flotilla-hub`'s `grpc::work`), and a
//! ManagedServiceAccount's token, which the service gives a deployer only when one of its
//! execute-as grants covers the ServiceAccount on the cluster (`flotilla-hub`'s
//! `serviceaccount::grpc`).

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

/// One service's rows: `("package.Service", &[("Method", access), …])`.
pub type Rows = (&'static str, &'static [(&'static str, Access)]);

/// The core's services (health, reflection, clusters, works), with the access each method
/// needs; the families' services have their rows in their folders.
pub const CORE: &[Rows] = &[
    ("grpc.health.v1.Health", &[("Check", Open), ("Watch", Open)]),
    (
        "grpc.reflection.v1.ServerReflection",
        &[("ServerReflectionInfo", Read)],
    ),
    (
        "flotilla.v1.ClusterService",
        &[
            ("ListClusters", Read),
            ("GetCluster", Read),
            ("WatchClusters", Read),
            ("AcceptClusters", Write),
            ("DenyClusters", Write),
            ("LabelCluster", Write),
            ("TaintCluster", Write),
            ("SetLeaseDuration", Write),
            ("DeleteCluster", Write),
            ("ApplyCluster", Write),
            // Its answer holds a NATS seed.
            ("CreateJoinToken", Write),
        ],
    ),
    (
        "flotilla.v1.WorkService",
        &[
            ("ApplyWork", WriteWork),
            ("ApplyWorks", WriteWork),
            ("GetWork", Read),
            ("ListWorks", Read),
            ("DeleteWork", WriteWork),
            ("WatchWorks", Read),
            // Reads any object of a spoke, Secrets included.
            ("Proxy", Write),
        ],
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
    methods: BTreeMap<String, (Access, &'static str)>,
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
                for (method, access) in *list {
                    let path = format!("/{service}/{method}");
                    if let Some(&(_, first)) = methods.get(&path) {
                        return Err(Twice {
                            path,
                            first,
                            second: who,
                        });
                    }
                    methods.insert(path, (*access, who));
                }
            }
        }
        Ok(Self { methods })
    }

    /// The entry for a gRPC method path (`/package.Service/Method`), `None` when the method is
    /// not in the table.
    pub fn lookup(&self, path: &str) -> Option<Access> {
        self.methods.get(path).map(|(access, _)| *access)
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
            .map(|(path, (access, who))| (path.as_str(), *access, *who))
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

//! Which gRPC method needs which access: one explicit table, every method of every service the
//! hub serves, decided one by one — never by the shape of a method's name, so a new `Get…` that
//! returned secrets would not be open to read-only tokens by accident.
//!
//! A method missing from the table is admin-only (deny by default), and a unit test walks the
//! services' generated descriptors and fails for any method without an entry: adding an RPC
//! means deciding here who may call it. [`super::auth`] turns an access into a decision for an
//! identity.
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `grpc.health.v1.Health` | `Check`, `Watch` | | | |
//! | `grpc.reflection.v1.ServerReflection` | | `ServerReflectionInfo` | | |
//! | `flotilla.v1.ClusterService` | | `ListClusters`, `GetCluster`, `WatchClusters` | | `AcceptClusters`, `DenyClusters`, `LabelCluster`, `TaintCluster`, `SetLeaseDuration`, `DeleteCluster`, `ApplyCluster`, `CreateJoinToken` |
//! | `flotilla.v1.ClusterSetService` | | `GetClusterSet`, `ListClusterSets`, `ListBindings` | | `ApplyClusterSet`, `DeleteClusterSet`, `ApplyBinding`, `DeleteBinding` |
//! | `flotilla.v1.WorkService` | | `GetWork`, `ListWorks`, `WatchWorks` | `ApplyWork`, `ApplyWorks`, `DeleteWork` | `Proxy` |
//! | `flotilla.v1.PlacementService` | | `GetPlacement`, `ListPlacements`, `ListDecisions`, `WatchPlacements`, `DebugPlacement`, `ListScores` | | `ApplyPlacement`, `DeletePlacement`, `ApplyScore`, `DeleteScore` |
//! | `flotilla.v1.PolicyService` | | `GetPolicy`, `ListPolicies`, `GetPolicyDetails`, `WatchPolicies`, `ListPlacementBindings`, `ListPolicySets`, `ListPlacementRules` | | `ApplyPolicy`, `DeletePolicy`, `ApplyPlacementBinding`, `DeletePlacementBinding`, `ApplyPolicySet`, `DeletePolicySet`, `ApplyPlacementRule`, `DeletePlacementRule` |
//! | `flotilla.v1.ReplicaSetService` | | `GetReplicaSet`, `ListReplicaSets`, `WatchReplicaSets` | | `ApplyReplicaSet`, `DeleteReplicaSet`, `Rollout` |
//! | `flotilla.v1.ServiceAccountService` | | `GetManagedServiceAccount`, `ListManagedServiceAccounts` | `GetManagedServiceAccountToken` | `ApplyManagedServiceAccount`, `DeleteManagedServiceAccount` |
//! | `flotilla.v1.ImportPolicyService` | | `GetImportPolicy`, `ListImportPolicies`, `WatchImportPolicies` | | `ApplyImportPolicy`, `DeleteImportPolicy` |
//! | `flotilla.v1.MirrorPeerService` | | `GetMirrorPeer`, `ListMirrorPeers` | | `ApplyMirrorPeer`, `DeleteMirrorPeer` |
//! | `flotilla.v1.AddOnService` | | `GetClusterManagementAddOn`, `ListClusterManagementAddOns`, `GetManagedClusterAddOn`, `ListManagedClusterAddOns`, `WatchManagedClusterAddOns`, `GetAddOnTemplate`, `ListAddOnTemplates`, `GetAddOnDeploymentConfig`, `ListAddOnDeploymentConfigs` | | `ApplyClusterManagementAddOn`, `DeleteClusterManagementAddOn`, `ApplyManagedClusterAddOn`, `DeleteManagedClusterAddOn`, `ApplyAddOnTemplate`, `DeleteAddOnTemplate`, `ApplyAddOnDeploymentConfig`, `DeleteAddOnDeploymentConfig`, `EnableAddOn`, `DisableAddOn` |
//!
//! Why: health checks serve load balancers and probes. `Proxy` is admin-only although it only
//! reads, because it reads any object of a spoke, Secrets included. `CreateJoinToken` answers
//! with a NATS seed. A deployer reaches only the work service's apply and delete; the service
//! then checks the work's executor, the stored one too (`flotilla-hub`'s `grpc::work`), and a
//! ManagedServiceAccount's token, which the service gives a deployer only when one of its
//! execute-as grants covers the ServiceAccount on the cluster (`flotilla-hub`'s `grpc::serviceaccount`).

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

/// Every method the hub serves, by service (`package.Service`), with the access it needs.
pub const TABLE: &[(&str, &[(&str, Access)])] = &[
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
        "flotilla.v1.ClusterSetService",
        &[
            ("ApplyClusterSet", Write),
            ("GetClusterSet", Read),
            ("ListClusterSets", Read),
            ("DeleteClusterSet", Write),
            ("ApplyBinding", Write),
            ("ListBindings", Read),
            ("DeleteBinding", Write),
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
    (
        "flotilla.v1.PlacementService",
        &[
            ("ApplyPlacement", Write),
            ("GetPlacement", Read),
            ("ListPlacements", Read),
            ("DeletePlacement", Write),
            ("ListDecisions", Read),
            ("WatchPlacements", Read),
            ("DebugPlacement", Read),
            ("ApplyScore", Write),
            ("ListScores", Read),
            ("DeleteScore", Write),
        ],
    ),
    (
        "flotilla.v1.ReplicaSetService",
        &[
            ("ApplyReplicaSet", Write),
            ("GetReplicaSet", Read),
            ("ListReplicaSets", Read),
            ("DeleteReplicaSet", Write),
            ("Rollout", Write),
            ("WatchReplicaSets", Read),
        ],
    ),
    (
        "flotilla.v1.PolicyService",
        &[
            ("ApplyPolicy", Write),
            ("GetPolicy", Read),
            ("ListPolicies", Read),
            ("DeletePolicy", Write),
            ("GetPolicyDetails", Read),
            ("WatchPolicies", Read),
            ("ApplyPlacementBinding", Write),
            ("ListPlacementBindings", Read),
            ("DeletePlacementBinding", Write),
            ("ApplyPolicySet", Write),
            ("ListPolicySets", Read),
            ("DeletePolicySet", Write),
            ("ApplyPlacementRule", Write),
            ("ListPlacementRules", Read),
            ("DeletePlacementRule", Write),
        ],
    ),
    (
        "flotilla.v1.ServiceAccountService",
        &[
            ("ApplyManagedServiceAccount", Write),
            ("GetManagedServiceAccount", Read),
            ("ListManagedServiceAccounts", Read),
            ("DeleteManagedServiceAccount", Write),
            ("GetManagedServiceAccountToken", WriteWork),
        ],
    ),
    (
        "flotilla.v1.ImportPolicyService",
        &[
            ("ApplyImportPolicy", Write),
            ("GetImportPolicy", Read),
            ("ListImportPolicies", Read),
            ("DeleteImportPolicy", Write),
            ("WatchImportPolicies", Read),
        ],
    ),
    (
        "flotilla.v1.MirrorPeerService",
        &[
            ("ApplyMirrorPeer", Write),
            ("GetMirrorPeer", Read),
            ("ListMirrorPeers", Read),
            ("DeleteMirrorPeer", Write),
        ],
    ),
    (
        "flotilla.v1.AddOnService",
        &[
            ("ApplyClusterManagementAddOn", Write),
            ("GetClusterManagementAddOn", Read),
            ("ListClusterManagementAddOns", Read),
            ("DeleteClusterManagementAddOn", Write),
            ("ApplyManagedClusterAddOn", Write),
            ("GetManagedClusterAddOn", Read),
            ("ListManagedClusterAddOns", Read),
            ("DeleteManagedClusterAddOn", Write),
            ("WatchManagedClusterAddOns", Read),
            ("ApplyAddOnTemplate", Write),
            ("GetAddOnTemplate", Read),
            ("ListAddOnTemplates", Read),
            ("DeleteAddOnTemplate", Write),
            ("ApplyAddOnDeploymentConfig", Write),
            ("GetAddOnDeploymentConfig", Read),
            ("ListAddOnDeploymentConfigs", Read),
            ("DeleteAddOnDeploymentConfig", Write),
            ("EnableAddOn", Write),
            ("DisableAddOn", Write),
        ],
    ),
];

/// The table's entry for a gRPC method path (`/package.Service/Method`), `None` when the method
/// is not in it.
pub fn lookup(path: &str) -> Option<Access> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    TABLE
        .iter()
        .find(|(s, _)| *s == service)?
        .1
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, access)| *access)
}

/// The access a gRPC method path needs: its table entry, and admin for a method missing from
/// the table (deny by default).
pub fn access(path: &str) -> Access {
    lookup(path).unwrap_or(Write)
}

/// Every method path in the table (`/package.Service/Method`) with its access.
pub fn methods() -> impl Iterator<Item = (String, Access)> {
    TABLE.iter().flat_map(|(service, methods)| {
        methods
            .iter()
            .map(move |(method, access)| (format!("/{service}/{method}"), *access))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::collections::{BTreeMap, BTreeSet};

    /// Every method of every service the hub serves, from the generated descriptors.
    fn served() -> BTreeSet<String> {
        let sets = [
            flotilla_api::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        ];
        let mut paths = BTreeSet::new();
        for bytes in sets {
            let set = prost_types::FileDescriptorSet::decode(bytes).expect("a descriptor set");
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

    #[test]
    fn every_served_rpc_has_an_access_decided_in_the_table() {
        let served = served();
        assert!(
            served.contains("/flotilla.v1.ClusterService/CreateJoinToken"),
            "the descriptors were read: {served:?}"
        );
        let missing: Vec<_> = served.iter().filter(|p| lookup(p).is_none()).collect();
        assert!(
            missing.is_empty(),
            "decide who may call these in hub/src/grpc/access.rs TABLE (and its doc table): \
             {missing:?}"
        );
        let stale: Vec<_> = methods()
            .map(|(p, _)| p)
            .filter(|p| !served.contains(p))
            .collect();
        assert!(
            stale.is_empty(),
            "the table names methods no service has: {stale:?}"
        );
    }

    #[test]
    fn the_table_names_each_method_once() {
        let mut seen = BTreeSet::new();
        for (path, _) in methods() {
            assert!(seen.insert(path.clone()), "{path} is in the table twice");
        }
    }

    #[test]
    fn the_doc_table_says_what_the_table_decides() {
        // The module doc's rows: service → (column, method) for each method listed.
        let columns = [Open, Read, WriteWork, Write];
        let mut documented: BTreeMap<String, Access> = BTreeMap::new();
        for line in include_str!("access.rs").lines() {
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
        let decided: BTreeMap<String, Access> = methods().collect();
        assert_eq!(documented, decided, "the module doc's table is out of date");
    }

    #[test]
    fn reads_writes_and_unknown_methods_need_what_the_table_says() {
        assert_eq!(access("/grpc.health.v1.Health/Check"), Open);
        assert_eq!(access("/flotilla.v1.WorkService/ListWorks"), Read);
        assert_eq!(access("/flotilla.v1.PlacementService/DebugPlacement"), Read);
        assert_eq!(access("/flotilla.v1.WorkService/ApplyWork"), WriteWork);
        assert_eq!(access("/flotilla.v1.WorkService/DeleteWork"), WriteWork);
        assert_eq!(access("/flotilla.v1.WorkService/Proxy"), Write);
        assert_eq!(access("/flotilla.v1.ClusterService/CreateJoinToken"), Write);
        assert_eq!(
            access("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            Read
        );
        // Not by name: a method the table does not know is admin-only, whatever it is called.
        for unknown in [
            "/flotilla.v1.ClusterService/GetJoinTokenSeed",
            "/flotilla.v1.WorkService/ListSecrets",
            "/grpc.health.v1.Health/List",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            "/evil",
            "",
        ] {
            assert_eq!(lookup(unknown), None, "{unknown}");
            assert_eq!(access(unknown), Write, "{unknown}");
        }
    }
}

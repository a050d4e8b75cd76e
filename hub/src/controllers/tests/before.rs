//! The access table as it was before each family declared its own rows (issue 44): the
//! whole table of `hub-core/src/grpc/access.rs` at that commit, literally, so a reviewer sees
//! that moving the rows changed no one's access to any method ([`super::access`]).

use flotilla_hub_core::grpc::access::Access;
use flotilla_hub_core::grpc::access::Access::{Open, Read, Write, WriteWork};

/// The rows as they were: methods and their access (before the object rules of issue 48).
type Rows = (&'static str, &'static [(&'static str, Access)]);

/// Every method the hub served, by service, with the access it needed.
pub(super) const BEFORE: &[Rows] = &[
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

//! The cluster's claims (OCM's ClusterClaims): the reserved ones the agent reads from the
//! cluster, which registration reports to the hub with the configured `--claim`s and policy
//! templates read (`fromClusterClaim`, `lookup … ClusterClaim`).

use crate::backend::ClusterInfo;
use crate::store::LocalStore;
use flotilla_api::meta::{self, CLAIM_ID, CLAIM_KUBEVERSION, CLAIM_PLATFORM, CLAIM_PRODUCT};
use flotilla_api::v1::ClusterClaim;

/// The reserved claims (`id.k8s.io`, `kubeversion.open-cluster-management.io`, …) from what the
/// cluster reports; one whose value is empty is left out.
pub fn reserved(store: &LocalStore, info: &ClusterInfo) -> Vec<ClusterClaim> {
    [
        (
            CLAIM_ID,
            if info.cluster_id.is_empty() {
                store.get().cluster_id
            } else {
                info.cluster_id.clone()
            },
        ),
        (CLAIM_KUBEVERSION, info.kubernetes_version.clone()),
        (CLAIM_PLATFORM, info.platform.clone()),
        (CLAIM_PRODUCT, info.product.clone()),
        (
            meta::CLAIM_NODES,
            info.nodes.map(|n| n.to_string()).unwrap_or_default(),
        ),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(n, v)| ClusterClaim {
        name: n.to_string(),
        value: v,
    })
    .collect()
}

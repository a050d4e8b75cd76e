//! The cluster's claims (OCM's ClusterClaims): the reserved ones the agent reads from the
//! cluster, which registration reports to the hub with the configured `--claim`s and policy
//! templates read (`fromClusterClaim`, `lookup … ClusterClaim`).

use crate::backend::ClusterInfo;
use crate::store::LocalStore;
use flotilla_api::meta::{self, CLAIM_ID, CLAIM_KUBEVERSION, CLAIM_PLATFORM, CLAIM_PRODUCT};
use flotilla_api::v1::ClusterClaim;
use nkeys::XKey;

/// The agent's static curve key: kept in the local store, made on first use (once: two tasks
/// asking at start get the same key).
pub fn curve_key(store: &LocalStore) -> XKey {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(k) = store
        .get()
        .peer_xkey_seed
        .and_then(|s| XKey::from_seed(s.expose()).ok())
    {
        return k;
    }
    let k = XKey::new();
    let seed = k.seed().unwrap_or_default();
    if let Err(e) = store.update(|s| s.peer_xkey_seed = Some(flotilla_auth::Secret::new(seed))) {
        tracing::error!(error = %e, "saving the curve key failed: peers seal again after a restart");
    }
    k
}

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
        (meta::CLAIM_CURVE_KEY, curve_key(store).public_key()),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(n, v)| ClusterClaim {
        name: n.to_string(),
        value: v,
    })
    .collect()
}

//! Managed namespaces (ManagedClusterSet `spec.managedNamespaces`): one task that keeps every
//! cluster's `status.managedNamespaces` equal to what the sets it belongs to ask for, as OCM's
//! hub `managed-namespace-controller` does.
//!
//! It is level-triggered: on start, on every set change and on every cluster change it compares
//! each affected cluster's status with the sets' wish (`(set, name)` pairs, sorted by set then
//! name) and only messages the cluster actors that differ. The actor persists the new list and
//! sends it to the agent with the registration answer (see `cluster/actor/lifecycle.rs`); the
//! agent creates the namespaces and reports their `NamespaceAvailable` conditions in its cluster
//! status. A hub restart re-runs the comparison, so nothing is lost in between.

use super::ClusterSets;
use crate::cluster::Clusters;
use crate::inventory::{ChangeKind, ClusterInventory};
use flotilla_api::clusterset::{managed_namespace_keys, sort_managed_namespaces};
use flotilla_api::v1::{ClusterSetManagedNamespaceConfig, ManagedCluster, ManagedClusterSet};
use futures::StreamExt;
use tokio::sync::{broadcast, watch};
use tracing::Instrument;

/// How many cluster actors are messaged at once after a set change.
const CONCURRENCY: usize = 64;

/// The managed namespaces the sets a cluster belongs to ask for: one entry per set and namespace,
/// sorted by set then name, without conditions.
pub fn desired_for(
    sets: &[ManagedClusterSet],
    cluster: &ManagedCluster,
) -> Vec<ClusterSetManagedNamespaceConfig> {
    let mut out: Vec<ClusterSetManagedNamespaceConfig> = sets
        .iter()
        .filter(|s| ClusterSets::is_member(s, cluster))
        .flat_map(|s| {
            let set = s
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            s.spec
                .iter()
                .flat_map(|spec| spec.managed_namespaces.iter())
                .map(move |n| ClusterSetManagedNamespaceConfig {
                    name: n.name.clone(),
                    cluster_set: set.clone(),
                    conditions: Vec::new(),
                })
        })
        .collect();
    sort_managed_namespaces(&mut out);
    out
}

/// Whether a cluster's status lists something else than `desired`.
fn differs(cluster: &ManagedCluster, desired: &[ClusterSetManagedNamespaceConfig]) -> bool {
    let current = cluster
        .status
        .as_ref()
        .map(|s| s.managed_namespaces.as_slice())
        .unwrap_or_default();
    managed_namespace_keys(current) != managed_namespace_keys(desired)
}

/// Spawns the task; it ends when `shutdown` turns true.
pub fn spawn(
    sets: ClusterSets,
    inventory: ClusterInventory,
    clusters: Clusters,
    shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let span = tracing::info_span!("managed_namespaces");
    tokio::spawn(run(sets, inventory, clusters, shutdown).instrument(span))
}

async fn run(
    sets: ClusterSets,
    inventory: ClusterInventory,
    clusters: Clusters,
    mut shutdown: watch::Receiver<bool>,
) {
    // Subscribe before the first pass so that no change falls between the two.
    let mut set_changes = sets.subscribe();
    let mut cluster_changes = inventory.subscribe();
    let mut all = with_namespaces(&sets);
    reconcile_all(&all, &inventory, &clusters).await;
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            change = set_changes.recv() => match change {
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    all = with_namespaces(&sets);
                    reconcile_all(&all, &inventory, &clusters).await;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            change = cluster_changes.recv() => match change {
                Ok(c) if c.kind != ChangeKind::Deleted => {
                    reconcile(&all, &c.object, &clusters).await;
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "cluster changes lagged; checking every cluster");
                    reconcile_all(&all, &inventory, &clusters).await;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
}

/// The sets that manage namespaces: only they can contribute, so a fleet without managed
/// namespaces pays no selector matching per cluster change.
fn with_namespaces(sets: &ClusterSets) -> Vec<ManagedClusterSet> {
    sets.sets()
        .into_iter()
        .filter(|s| {
            s.spec
                .as_ref()
                .is_some_and(|s| !s.managed_namespaces.is_empty())
        })
        .collect()
}

async fn reconcile(sets: &[ManagedClusterSet], cluster: &ManagedCluster, clusters: &Clusters) {
    let desired = desired_for(sets, cluster);
    if !differs(cluster, &desired) {
        return;
    }
    let name = crate::inventory::name(cluster);
    let Some(handle) = clusters.get(name) else {
        return;
    };
    if let Err(e) = handle.set_managed_namespaces(desired).await {
        // A cluster deleted meanwhile; anything else is retried by the next change.
        tracing::debug!(cluster = %name, error = %e, "managed namespaces not updated");
    }
}

async fn reconcile_all(
    sets: &[ManagedClusterSet],
    inventory: &ClusterInventory,
    clusters: &Clusters,
) {
    let snapshot = inventory.snapshot();
    futures::stream::iter(snapshot.iter())
        .for_each_concurrent(CONCURRENCY, |c| reconcile(sets, c, clusters))
        .await;
}

#[cfg(test)]
mod tests {
    use super::super::tests::cluster;
    use super::*;
    use flotilla_api::meta::CLUSTERSET_LABEL;
    use flotilla_api::v1::{
        LabelSelector, ManagedClusterSelector, ManagedClusterSetSpec, ManagedNamespaceConfig,
        ObjectMeta,
    };

    fn set(name: &str, selector: Option<LabelSelector>, namespaces: &[&str]) -> ManagedClusterSet {
        ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetSpec {
                cluster_selector: Some(ManagedClusterSelector {
                    selector_type: if selector.is_some() {
                        super::super::LABEL_SELECTOR
                    } else {
                        super::super::EXCLUSIVE
                    }
                    .into(),
                    label_selector: selector,
                }),
                managed_namespaces: namespaces
                    .iter()
                    .map(|n| ManagedNamespaceConfig { name: (*n).into() })
                    .collect(),
            }),
            status: None,
        }
    }

    #[test]
    fn clusters_get_the_namespaces_of_every_set_they_belong_to() {
        let env_prod = LabelSelector {
            match_labels: [("env".to_string(), "prod".to_string())].into(),
            ..Default::default()
        };
        let sets = [
            set("team-b", None, &["b-ns"]),
            set("global", Some(LabelSelector::default()), &["everywhere"]),
            set("prod", Some(env_prod), &["prod-2", "prod-1"]),
            set("team-a", None, &["a-ns"]),
        ];
        let c = cluster(&[(CLUSTERSET_LABEL, "team-b"), ("env", "prod")]);
        let got: Vec<(String, String)> = desired_for(&sets, &c)
            .into_iter()
            .map(|n| (n.cluster_set, n.name))
            .collect();
        let want = [
            ("global", "everywhere"),
            ("prod", "prod-1"),
            ("prod", "prod-2"),
            ("team-b", "b-ns"),
        ];
        assert_eq!(
            got,
            want.map(|(s, n)| (s.to_string(), n.to_string())),
            "exclusive, label-selector and global sets, sorted by set then name"
        );
        // Relabelled out of team-b and prod: only the global set's namespace stays.
        let moved = cluster(&[(CLUSTERSET_LABEL, "team-a")]);
        let names: Vec<String> = desired_for(&sets, &moved)
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(names, ["everywhere", "a-ns"]);
    }
}

//! `delete`: one resource, with a line saying what went.

use crate::hub::Hub;
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{
    DeleteBindingRequest, DeleteClusterRequest, DeleteWorkRequest, GetClusterSetRequest,
    PlacementRef, ScoreRef,
};

/// What `delete` removes.
#[derive(Subcommand, Debug)]
pub enum DeleteWhat {
    /// A ManagedCluster and everything the hub keeps for it.
    Cluster {
        /// Name.
        name: String,
    },
    /// A ManagedClusterSet.
    Clusterset {
        /// Name.
        name: String,
    },
    /// A ManifestWork (its resources are removed per its delete option).
    Work {
        /// Name.
        name: String,
        /// Cluster (the work's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
    /// A ManagedClusterSetBinding.
    Clustersetbinding {
        /// Name (= the set's name).
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, required = true)]
        namespace: String,
    },
    /// A Placement and its PlacementDecisions.
    Placement {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// An AddOnPlacementScore.
    #[command(alias = "score")]
    Addonplacementscore {
        /// Name.
        name: String,
        /// Cluster (the score's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
}

/// Runs `delete`.
pub async fn run(hub: &Hub, what: DeleteWhat) -> Result<()> {
    let done = match what {
        DeleteWhat::Cluster { name } => {
            let r = DeleteClusterRequest { name: name.clone() };
            hub.call(hub.clusters().delete_cluster(r)).await?;
            format!("managedcluster/{name} deleted")
        }
        DeleteWhat::Work { name, cluster } => {
            let r = DeleteWorkRequest {
                cluster: cluster.clone(),
                name: name.clone(),
            };
            let w = hub.call(hub.works().delete_work(r)).await?;
            let policy = w
                .spec
                .and_then(|s| s.delete_option)
                .map(|d| d.propagation_policy)
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "Foreground".into());
            format!("manifestwork/{name} deleting on cluster {cluster} (propagation {policy})")
        }
        DeleteWhat::Clusterset { name } => {
            let r = GetClusterSetRequest { name: name.clone() };
            hub.call(hub.sets().delete_cluster_set(r)).await?;
            format!("managedclusterset/{name} deleted")
        }
        DeleteWhat::Placement { name, namespace } => {
            let r = PlacementRef {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            hub.call(hub.placements().delete_placement(r)).await?;
            format!("placement/{name} deleted (namespace {namespace})")
        }
        DeleteWhat::Addonplacementscore { name, cluster } => {
            let r = ScoreRef {
                cluster: cluster.clone(),
                name: name.clone(),
            };
            hub.call(hub.placements().delete_score(r)).await?;
            format!("addonplacementscore/{name} deleted (cluster {cluster})")
        }
        DeleteWhat::Clustersetbinding { name, namespace } => {
            let r = DeleteBindingRequest {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            hub.call(hub.sets().delete_binding(r)).await?;
            format!("managedclustersetbinding/{name} deleted (namespace {namespace})")
        }
    };
    println!("{done}");
    Ok(())
}

//! `delete`: one resource, with a line saying what went.

use crate::hub::Hub;
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{
    DeleteBindingRequest, DeleteClusterRequest, DeleteWorkRequest, GetAddOnRequest,
    GetClusterSetRequest, GetPolicyRequest, PlacementRef, ScoreRef,
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
    /// A ManagedServiceAccount: its token is refused at once and its cluster deletes the
    /// ServiceAccount.
    #[command(alias = "managedserviceaccounts")]
    Managedserviceaccount {
        /// Name.
        name: String,
        /// Cluster (the account's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
    /// A ClusterImportPolicy: its clusters stay (orphaned).
    #[command(alias = "importpolicies", alias = "clusterimportpolicy")]
    Importpolicy {
        /// Name.
        name: String,
    },
    /// A MirrorPeer: its sealed boxes go and every peer removes its GREEN Secrets.
    #[command(alias = "mirrorpeers")]
    Mirrorpeer {
        /// Name.
        name: String,
    },
    /// A Policy: every cluster removes its copy (pruning as its templates ask).
    #[command(alias = "plc")]
    Policy {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A PlacementBinding.
    #[command(alias = "pb")]
    Placementbinding {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A PolicySet.
    #[command(alias = "plcset")]
    Policyset {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A PlacementRule.
    #[command(alias = "plr")]
    Placementrule {
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
    /// A ClusterManagementAddOn, with its ManagedClusterAddOns on every cluster (and their
    /// works).
    #[command(alias = "cma")]
    Clustermanagementaddon {
        /// Add-on name.
        name: String,
    },
    /// A ManagedClusterAddOn: the add-on leaves one cluster.
    #[command(alias = "addon", alias = "mca")]
    Managedclusteraddon {
        /// Add-on name.
        name: String,
        /// Cluster (the ManagedClusterAddOn's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
    /// An AddOnTemplate.
    Addontemplate {
        /// Name.
        name: String,
    },
    /// An AddOnDeploymentConfig.
    Addondeploymentconfig {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, required = true)]
        namespace: String,
    },
}

/// Runs `delete`.
pub async fn run(hub: &Hub, what: DeleteWhat) -> Result<()> {
    let done = match what {
        DeleteWhat::Cluster { name } => {
            let r = DeleteClusterRequest { name };
            hub.call(hub.clusters().delete_cluster(r.clone())).await?;
            format!("managedcluster/{} deleted", r.name)
        }
        DeleteWhat::Work { name, cluster } => {
            let r = DeleteWorkRequest { cluster, name };
            let w = hub.call(hub.works().delete_work(r.clone())).await?;
            // The hub answers with the work as it goes; its delete option says how.
            let policy = w
                .spec
                .and_then(|s| s.delete_option)
                .map(|d| d.propagation_policy)
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "Foreground".into());
            let (name, cluster) = (r.name, r.cluster);
            format!("manifestwork/{name} deleting on cluster {cluster} (propagation {policy})")
        }
        DeleteWhat::Clusterset { name } => {
            let r = GetClusterSetRequest { name };
            hub.call(hub.sets().delete_cluster_set(r.clone())).await?;
            format!("managedclusterset/{} deleted", r.name)
        }
        DeleteWhat::Placement { name, namespace } => {
            let r = PlacementRef { namespace, name };
            hub.call(hub.placements().delete_placement(r.clone()))
                .await?;
            format!("placement/{} deleted (namespace {})", r.name, r.namespace)
        }
        DeleteWhat::Managedserviceaccount { name, cluster } => {
            let r = flotilla_api::v1::GetManagedServiceAccountRequest {
                namespace: cluster,
                name,
            };
            hub.call(
                hub.service_accounts()
                    .delete_managed_service_account(r.clone()),
            )
            .await?;
            format!(
                "managedserviceaccount/{} deleting on cluster {} (its ServiceAccount goes)",
                r.name, r.namespace
            )
        }
        DeleteWhat::Importpolicy { name } => {
            let r = flotilla_api::v1::GetImportPolicyRequest { name };
            hub.call(hub.import_policies().delete_import_policy(r.clone()))
                .await?;
            format!("clusterimportpolicy/{} deleted (its clusters stay)", r.name)
        }
        DeleteWhat::Mirrorpeer { name } => {
            let r = flotilla_api::v1::GetMirrorPeerRequest { name };
            hub.call(hub.mirror_peers().delete_mirror_peer(r.clone()))
                .await?;
            format!(
                "mirrorpeer/{} deleted (its peers remove their GREEN Secrets)",
                r.name
            )
        }
        DeleteWhat::Policy { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            hub.call(hub.policies().delete_policy(r.clone())).await?;
            format!("policy/{} deleted (namespace {})", r.name, r.namespace)
        }
        DeleteWhat::Placementbinding { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            hub.call(hub.policies().delete_placement_binding(r.clone()))
                .await?;
            format!(
                "placementbinding/{} deleted (namespace {})",
                r.name, r.namespace
            )
        }
        DeleteWhat::Policyset { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            hub.call(hub.policies().delete_policy_set(r.clone()))
                .await?;
            format!("policyset/{} deleted (namespace {})", r.name, r.namespace)
        }
        DeleteWhat::Placementrule { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            hub.call(hub.policies().delete_placement_rule(r.clone()))
                .await?;
            format!(
                "placementrule/{} deleted (namespace {})",
                r.name, r.namespace
            )
        }
        DeleteWhat::Addonplacementscore { name, cluster } => {
            let r = ScoreRef { cluster, name };
            hub.call(hub.placements().delete_score(r.clone())).await?;
            format!(
                "addonplacementscore/{} deleted (cluster {})",
                r.name, r.cluster
            )
        }
        DeleteWhat::Clustersetbinding { name, namespace } => {
            let r = DeleteBindingRequest { namespace, name };
            hub.call(hub.sets().delete_binding(r.clone())).await?;
            let (name, namespace) = (r.name, r.namespace);
            format!("managedclustersetbinding/{name} deleted (namespace {namespace})")
        }
        DeleteWhat::Clustermanagementaddon { name } => {
            let r = GetAddOnRequest {
                namespace: String::new(),
                name,
            };
            hub.call(hub.addons().delete_cluster_management_add_on(r.clone()))
                .await?;
            format!(
                "clustermanagementaddon/{} deleted (with its ManagedClusterAddOns)",
                r.name
            )
        }
        DeleteWhat::Managedclusteraddon { name, cluster } => {
            let r = GetAddOnRequest {
                namespace: cluster,
                name,
            };
            hub.call(hub.addons().delete_managed_cluster_add_on(r.clone()))
                .await?;
            format!(
                "managedclusteraddon/{} deleted (cluster {})",
                r.name, r.namespace
            )
        }
        DeleteWhat::Addontemplate { name } => {
            let r = GetAddOnRequest {
                namespace: String::new(),
                name,
            };
            hub.call(hub.addons().delete_add_on_template(r.clone()))
                .await?;
            format!("addontemplate/{} deleted", r.name)
        }
        DeleteWhat::Addondeploymentconfig { name, namespace } => {
            let r = GetAddOnRequest { namespace, name };
            hub.call(hub.addons().delete_add_on_deployment_config(r.clone()))
                .await?;
            format!(
                "addondeploymentconfig/{} deleted (namespace {})",
                r.name, r.namespace
            )
        }
    };
    println!("{done}");
    Ok(())
}

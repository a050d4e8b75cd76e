//! `delete`: one resource, with a line saying what went.

use crate::hub::{Deleted, Hub};
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
    /// A GitRepo: its bundles' replica sets go, and their works unless keepResources.
    #[command(alias = "gitrepos")]
    Gitrepo {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
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
    /// A ConfigMap kept on the hub for hub templates: every policy reading it re-resolves
    /// (and reports OCM's template error while it is missing).
    #[command(alias = "hubconfigmaps")]
    Hubconfigmap {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A Secret kept on the hub (sealed) for hub templates: every policy reading it
    /// re-resolves.
    #[command(alias = "hubsecrets")]
    Hubsecret {
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

/// Runs `delete`. A delete the hub answers UNAVAILABLE is retried ([`Hub::delete`]); a retry
/// that finds the object gone is success — an earlier attempt had landed, or it was already
/// gone — and the line says so.
pub async fn run(hub: &Hub, what: DeleteWhat) -> Result<()> {
    let (done, deleted) = match what {
        DeleteWhat::Cluster { name } => {
            let r = DeleteClusterRequest { name };
            let d = hub
                .delete(async || hub.clusters().delete_cluster(r.clone()).await)
                .await?;
            (format!("managedcluster/{} deleted", r.name), d.map(drop))
        }
        DeleteWhat::Work { name, cluster } => {
            let r = DeleteWorkRequest { cluster, name };
            let d = hub
                .delete(async || hub.works().delete_work(r.clone()).await)
                .await?;
            let (name, cluster) = (r.name, r.cluster);
            // The hub answers with the work as it goes; its delete option says how.
            let policy = match &d {
                Deleted::Now(w) => w
                    .spec
                    .as_ref()
                    .and_then(|s| s.delete_option.as_ref())
                    .map(|d| d.propagation_policy.clone())
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "Foreground".into()),
                Deleted::Earlier => String::new(),
            };
            let line = if policy.is_empty() {
                format!("manifestwork/{name} deleting on cluster {cluster}")
            } else {
                format!("manifestwork/{name} deleting on cluster {cluster} (propagation {policy})")
            };
            (line, d.map(drop))
        }
        DeleteWhat::Clusterset { name } => {
            let r = GetClusterSetRequest { name };
            let d = hub
                .delete(async || hub.sets().delete_cluster_set(r.clone()).await)
                .await?;
            (format!("managedclusterset/{} deleted", r.name), d.map(drop))
        }
        DeleteWhat::Placement { name, namespace } => {
            let r = PlacementRef { namespace, name };
            let d = hub
                .delete(async || hub.placements().delete_placement(r.clone()).await)
                .await?;
            let line = format!("placement/{} deleted (namespace {})", r.name, r.namespace);
            (line, d.map(drop))
        }
        DeleteWhat::Managedserviceaccount { name, cluster } => {
            let r = flotilla_api::v1::GetManagedServiceAccountRequest {
                namespace: cluster,
                name,
            };
            let d = hub
                .delete(async || {
                    hub.service_accounts()
                        .delete_managed_service_account(r.clone())
                        .await
                })
                .await?;
            let line = format!(
                "managedserviceaccount/{} deleting on cluster {} (its ServiceAccount goes)",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Importpolicy { name } => {
            let r = flotilla_api::v1::GetImportPolicyRequest { name };
            let d = hub
                .delete(async || hub.import_policies().delete_import_policy(r.clone()).await)
                .await?;
            let line = format!("clusterimportpolicy/{} deleted (its clusters stay)", r.name);
            (line, d.map(drop))
        }
        DeleteWhat::Mirrorpeer { name } => {
            let r = flotilla_api::v1::GetMirrorPeerRequest { name };
            let d = hub
                .delete(async || hub.mirror_peers().delete_mirror_peer(r.clone()).await)
                .await?;
            let line = format!(
                "mirrorpeer/{} deleted (its peers remove their GREEN Secrets)",
                r.name
            );
            (line, d.map(drop))
        }
        DeleteWhat::Gitrepo { name, namespace } => {
            let r = flotilla_api::v1::GetGitRepoRequest { namespace, name };
            let d = hub
                .delete(async || hub.git_repos().delete_git_repo(r.clone()).await)
                .await?;
            let line = format!(
                "gitrepo/{} deleted (namespace {}; its replica sets go)",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Policy { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            let d = hub
                .delete(async || hub.policies().delete_policy(r.clone()).await)
                .await?;
            let line = format!("policy/{} deleted (namespace {})", r.name, r.namespace);
            (line, d.map(drop))
        }
        DeleteWhat::Hubconfigmap { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            let d = hub
                .delete(async || hub.policies().delete_hub_config_map(r.clone()).await)
                .await?;
            let line = format!(
                "configmap/{} deleted from the hub (namespace {})",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Hubsecret { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            let d = hub
                .delete(async || hub.policies().delete_hub_secret(r.clone()).await)
                .await?;
            let line = format!(
                "secret/{} deleted from the hub (namespace {})",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Placementbinding { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            let d = hub
                .delete(async || hub.policies().delete_placement_binding(r.clone()).await)
                .await?;
            let line = format!(
                "placementbinding/{} deleted (namespace {})",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Policyset { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            let d = hub
                .delete(async || hub.policies().delete_policy_set(r.clone()).await)
                .await?;
            let line = format!("policyset/{} deleted (namespace {})", r.name, r.namespace);
            (line, d.map(drop))
        }
        DeleteWhat::Placementrule { name, namespace } => {
            let r = GetPolicyRequest { namespace, name };
            let d = hub
                .delete(async || hub.policies().delete_placement_rule(r.clone()).await)
                .await?;
            let line = format!(
                "placementrule/{} deleted (namespace {})",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Addonplacementscore { name, cluster } => {
            let r = ScoreRef { cluster, name };
            let d = hub
                .delete(async || hub.placements().delete_score(r.clone()).await)
                .await?;
            let line = format!(
                "addonplacementscore/{} deleted (cluster {})",
                r.name, r.cluster
            );
            (line, d.map(drop))
        }
        DeleteWhat::Clustersetbinding { name, namespace } => {
            let r = DeleteBindingRequest { namespace, name };
            let d = hub
                .delete(async || hub.sets().delete_binding(r.clone()).await)
                .await?;
            let (name, namespace) = (r.name, r.namespace);
            let line = format!("managedclustersetbinding/{name} deleted (namespace {namespace})");
            (line, d.map(drop))
        }
        DeleteWhat::Clustermanagementaddon { name } => {
            let r = GetAddOnRequest {
                namespace: String::new(),
                name,
            };
            let d = hub
                .delete(async || {
                    hub.addons()
                        .delete_cluster_management_add_on(r.clone())
                        .await
                })
                .await?;
            let line = format!(
                "clustermanagementaddon/{} deleted (with its ManagedClusterAddOns)",
                r.name
            );
            (line, d.map(drop))
        }
        DeleteWhat::Managedclusteraddon { name, cluster } => {
            let r = GetAddOnRequest {
                namespace: cluster,
                name,
            };
            let d = hub
                .delete(async || hub.addons().delete_managed_cluster_add_on(r.clone()).await)
                .await?;
            let line = format!(
                "managedclusteraddon/{} deleted (cluster {})",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
        DeleteWhat::Addontemplate { name } => {
            let r = GetAddOnRequest {
                namespace: String::new(),
                name,
            };
            let d = hub
                .delete(async || hub.addons().delete_add_on_template(r.clone()).await)
                .await?;
            (format!("addontemplate/{} deleted", r.name), d.map(drop))
        }
        DeleteWhat::Addondeploymentconfig { name, namespace } => {
            let r = GetAddOnRequest { namespace, name };
            let d = hub
                .delete(async || {
                    hub.addons()
                        .delete_add_on_deployment_config(r.clone())
                        .await
                })
                .await?;
            let line = format!(
                "addondeploymentconfig/{} deleted (namespace {})",
                r.name, r.namespace
            );
            (line, d.map(drop))
        }
    };
    match deleted {
        Deleted::Now(()) => println!("{done}"),
        Deleted::Earlier => println!(
            "{done}; not found when retried: an earlier attempt had landed, or it was already gone"
        ),
    }
    Ok(())
}

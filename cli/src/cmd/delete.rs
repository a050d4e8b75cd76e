//! `delete`: one resource, with a line saying what went.
//!
//! One generic path ([`delete`]) for every kind: the subcommand names the object, the kind
//! deletes it through its service and words what went ([`Delete`], in `crate::kind`), and the
//! line is printed as every kind prints it.

use crate::hub::{Deleted, Hub};
use crate::kind::{Delete, Target};
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnPlacementScore, AddOnTemplate, ClusterImportPolicy,
    ClusterManagementAddOn, GitRepo, HubConfigMap, HubSecretRecord, ManagedCluster,
    ManagedClusterAddOn, ManagedClusterSetBinding, ManagedClusterSetView, ManagedServiceAccount,
    ManifestWork, MirrorPeer, Placement, PlacementBinding, PlacementRule, Policy, PolicySet,
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
    use DeleteWhat as W;
    let h = hub;
    match what {
        W::Cluster { name } => delete::<ManagedCluster>(h, name, None).await,
        W::Clusterset { name } => delete::<ManagedClusterSetView>(h, name, None).await,
        W::Work { name, cluster } => delete::<ManifestWork>(h, name, Some(cluster)).await,
        W::Clustersetbinding { name, namespace } => {
            delete::<ManagedClusterSetBinding>(h, name, Some(namespace)).await
        }
        W::Placement { name, namespace } => delete::<Placement>(h, name, Some(namespace)).await,
        W::Managedserviceaccount { name, cluster } => {
            delete::<ManagedServiceAccount>(h, name, Some(cluster)).await
        }
        W::Importpolicy { name } => delete::<ClusterImportPolicy>(h, name, None).await,
        W::Mirrorpeer { name } => delete::<MirrorPeer>(h, name, None).await,
        W::Gitrepo { name, namespace } => delete::<GitRepo>(h, name, Some(namespace)).await,
        W::Policy { name, namespace } => delete::<Policy>(h, name, Some(namespace)).await,
        W::Hubconfigmap { name, namespace } => {
            delete::<HubConfigMap>(h, name, Some(namespace)).await
        }
        W::Hubsecret { name, namespace } => {
            delete::<HubSecretRecord>(h, name, Some(namespace)).await
        }
        W::Placementbinding { name, namespace } => {
            delete::<PlacementBinding>(h, name, Some(namespace)).await
        }
        W::Policyset { name, namespace } => delete::<PolicySet>(h, name, Some(namespace)).await,
        W::Placementrule { name, namespace } => {
            delete::<PlacementRule>(h, name, Some(namespace)).await
        }
        W::Addonplacementscore { name, cluster } => {
            delete::<AddOnPlacementScore>(h, name, Some(cluster)).await
        }
        W::Clustermanagementaddon { name } => delete::<ClusterManagementAddOn>(h, name, None).await,
        W::Managedclusteraddon { name, cluster } => {
            delete::<ManagedClusterAddOn>(h, name, Some(cluster)).await
        }
        W::Addontemplate { name } => delete::<AddOnTemplate>(h, name, None).await,
        W::Addondeploymentconfig { name, namespace } => {
            delete::<AddOnDeploymentConfig>(h, name, Some(namespace)).await
        }
    }
}

/// `delete` of one kind: deletes the object `name` (in `namespace`, or the cluster's for
/// per-cluster kinds; `None` for cluster-scoped kinds) and prints what went.
async fn delete<K: Delete>(hub: &Hub, name: String, namespace: Option<String>) -> Result<()> {
    let namespace = namespace.unwrap_or_default();
    let gone = K::delete(hub, Target { name, namespace }).await?;
    let done = gone.line;
    match gone.deleted {
        Deleted::Now(()) => println!("{done}"),
        Deleted::Earlier => println!(
            "{done}; not found when retried: an earlier attempt had landed, or it was already gone"
        ),
    }
    Ok(())
}

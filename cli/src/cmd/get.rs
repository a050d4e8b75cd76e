//! `get`: list or show resources, as a table in clusteradm's columns or in their OCM shapes.
//! Add-ons: `get addons [CLUSTER...]` (ManagedClusterAddOns), `get clustermanagementaddons`,
//! `get addontemplates`, `get addondeploymentconfigs [-n NS]`.
//!
//! One generic path ([`get`]) for every kind: the subcommand's arguments become a
//! [`Query`], the kind fetches what it names ([`Kind::fetch`], in `crate::kind`), and the
//! result is printed as every verb prints it.

use super::print;
use crate::hub::Hub;
use crate::kind::{Kind, Query};
use crate::output::{self, Format};
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnPlacementScore, AddOnTemplate, ClusterImportPolicy,
    ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn, ManagedClusterSetBinding,
    ManagedClusterSetView, ManagedServiceAccount, ManifestWork, ManifestWorkReplicaSet, MirrorPeer,
    Placement, PlacementBinding, PlacementDecision, PlacementRule, Policy, PolicySet,
};

/// What `get` lists.
#[derive(Subcommand, Debug)]
pub enum GetWhat {
    /// ManagedClusters.
    #[command(alias = "cluster", alias = "managedclusters")]
    Clusters {
        /// Only these clusters.
        names: Vec<String>,
        /// Label selector (env=prod,tier!=db,gpu).
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Only registrations waiting for an admin (neither accepted nor denied); with
        /// `-o wide`, the labels and agent key that `flotilla accept` would accept.
        #[arg(long)]
        pending: bool,
    },
    /// ManagedClusterSets.
    #[command(alias = "clusterset", alias = "managedclustersets")]
    Clustersets {
        /// Only these sets.
        names: Vec<String>,
    },
    /// ManifestWorks.
    #[command(alias = "work", alias = "manifestworks", alias = "manifestwork")]
    Works {
        /// Only this work (requires --cluster).
        name: Option<String>,
        /// Only works of this cluster.
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: Option<String>,
        /// Label selector.
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// ManagedClusterSetBindings.
    #[command(
        alias = "clustersetbinding",
        alias = "bindings",
        alias = "managedclustersetbindings"
    )]
    Clustersetbindings {
        /// Namespace (all namespaces when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// Placements: NAME, STATUS, REASON, SELECTEDCLUSTERS.
    #[command(alias = "placement")]
    Placements {
        /// Only these placements (requires --namespace).
        names: Vec<String>,
        /// Namespace (all namespaces, with a NAMESPACE column, when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// The PlacementDecisions of a placement.
    #[command(alias = "decision", alias = "placementdecisions")]
    Decisions {
        /// Placement name.
        placement: String,
        /// Namespace of the placement.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// ManifestWorkReplicaSets.
    #[command(
        alias = "replicaset",
        alias = "manifestworkreplicasets",
        alias = "manifestworkreplicaset",
        alias = "mwrs"
    )]
    Replicasets {
        /// Only these replica sets (requires --namespace).
        names: Vec<String>,
        /// Namespace (every namespace when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// GitRepos: NAME, REPO, BRANCH, COMMIT, BUNDLES (ready/total), FETCHED, RENDERED, STATE;
    /// with `--clusters NAME`, one row per bundle and cluster: STATE, COMMIT, MESSAGE.
    #[command(alias = "gitrepo")]
    Gitrepos {
        /// Only these GitRepos.
        names: Vec<String>,
        /// Namespace (every namespace when omitted; `default` with --clusters).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// The named GitRepo's clusters, bundle by bundle, each with its Fleet state (Ready,
        /// NotReady, WaitApplied, ErrApplied, OutOfSync, Modified, Pending), commit and why
        /// it is not Ready.
        #[arg(long)]
        clusters: bool,
        /// With --clusters: only clusters in this state.
        #[arg(long, requires = "clusters")]
        state: Option<String>,
    },
    /// Policies: NAME, REMEDIATION ACTION, COMPLIANCE STATE.
    #[command(alias = "policy", alias = "plc")]
    Policies {
        /// Only these policies.
        names: Vec<String>,
        /// Namespace (every namespace, with a NAMESPACE column, when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// ConfigMaps kept on the hub for hub templates: NAME, DATA (`-o wide`: the keys).
    #[command(alias = "hubconfigmap")]
    Hubconfigmaps {
        /// Only these ConfigMaps.
        names: Vec<String>,
        /// Namespace (every namespace, with a NAMESPACE column, when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// Secrets kept on the hub (sealed) for hub templates: NAME, TYPE, DATA (`-o wide`: the
    /// keys and a digest of the values). Their values are never shown.
    #[command(alias = "hubsecret")]
    Hubsecrets {
        /// Only these Secrets.
        names: Vec<String>,
        /// Namespace (every namespace, with a NAMESPACE column, when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// PlacementBindings: policies and policy sets bound to a Placement or PlacementRule.
    #[command(alias = "placementbinding", alias = "pb")]
    Placementbindings {
        /// Only these bindings.
        names: Vec<String>,
        /// Namespace (every namespace when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// PolicySets and their aggregated compliance.
    #[command(alias = "policyset", alias = "plcset")]
    Policysets {
        /// Only these sets.
        names: Vec<String>,
        /// Namespace (every namespace when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// PlacementRules (legacy apps.open-cluster-management.io/v1) and their decisions.
    #[command(alias = "placementrule", alias = "plr")]
    Placementrules {
        /// Only these rules.
        names: Vec<String>,
        /// Namespace (every namespace when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// ManagedServiceAccounts: NAMESPACE (the cluster), NAME, TOKEN REPORTED, EXPIRES, ROTATION.
    /// (OCM's CRD defines no short name.)
    #[command(alias = "managedserviceaccount")]
    Managedserviceaccounts {
        /// Only these accounts.
        names: Vec<String>,
        /// Only this cluster's (their namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: Option<String>,
    },
    /// ClusterImportPolicies: NAME, SOURCE, IMPORTED, ADOPTED, READY.
    #[command(
        alias = "importpolicy",
        alias = "clusterimportpolicies",
        alias = "clusterimportpolicy"
    )]
    Importpolicies {
        /// Only these policies.
        names: Vec<String>,
    },
    /// MirrorPeers: NAME, PEERS, PHASE, EXCHANGES (applied/total).
    #[command(alias = "mirrorpeer")]
    Mirrorpeers {
        /// Only these MirrorPeers.
        names: Vec<String>,
    },
    /// Orphans of a recovery window: works spokes hold that the restored store lacks or holds
    /// older (CLUSTER, NAME, KIND, RESOURCE ID, AGENT GEN, STORE GEN, DECISION, FIRST SEEN);
    /// decide them with `recovery`.
    #[command(alias = "orphan")]
    Orphans {
        /// Only this cluster's.
        #[arg(short = 'c', long)]
        cluster: Option<String>,
    },
    /// AddOnPlacementScores.
    #[command(alias = "addonplacementscore", alias = "scores")]
    Addonplacementscores {
        /// Only scores of this cluster (the score's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: Option<String>,
    },
    /// ManagedClusterAddOns: an add-on on a cluster (NAME, NAMESPACE = the cluster, AVAILABLE,
    /// DEGRADED, PROGRESSING).
    #[command(
        alias = "addon",
        alias = "managedclusteraddons",
        alias = "managedclusteraddon",
        alias = "mca"
    )]
    Addons {
        /// Only add-ons of these clusters.
        clusters: Vec<String>,
        /// Only this add-on.
        #[arg(short = 'a', long)]
        addon: Option<String>,
    },
    /// ClusterManagementAddOns: add-ons, their install strategy and rollout.
    #[command(alias = "clustermanagementaddon", alias = "cma")]
    Clustermanagementaddons {
        /// Only these add-ons.
        names: Vec<String>,
    },
    /// AddOnTemplates: the add-on agents' manifests.
    #[command(alias = "addontemplate")]
    Addontemplates {
        /// Only these templates.
        names: Vec<String>,
    },
    /// AddOnDeploymentConfigs: variables and install namespace of add-on agents.
    #[command(alias = "addondeploymentconfig")]
    Addondeploymentconfigs {
        /// Only these configs (requires --namespace).
        names: Vec<String>,
        /// Namespace (all namespaces, with a NAMESPACE column, when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
}

/// Runs `get`.
pub async fn run(hub: &Hub, format: Format, what: GetWhat) -> Result<()> {
    let names = |names: Vec<String>, namespace: Option<String>| Query {
        names,
        namespace,
        ..Query::default()
    };
    match what {
        GetWhat::Clusters {
            names,
            selector,
            pending,
        } => {
            let query = Query {
                names,
                selector: selector.unwrap_or_default(),
                pending,
                ..Query::default()
            };
            get::<ManagedCluster>(hub, format, query).await
        }
        GetWhat::Clustersets { names: n } => {
            get::<ManagedClusterSetView>(hub, format, names(n, None)).await
        }
        GetWhat::Clustersetbindings { namespace } => {
            get::<ManagedClusterSetBinding>(hub, format, names(Vec::new(), namespace)).await
        }
        GetWhat::Works {
            name,
            cluster,
            selector,
        } => {
            let query = Query {
                names: name.into_iter().collect(),
                namespace: cluster,
                selector: selector.unwrap_or_default(),
                ..Query::default()
            };
            get::<ManifestWork>(hub, format, query).await
        }
        GetWhat::Placements {
            names: n,
            namespace,
        } => get::<Placement>(hub, format, names(n, namespace)).await,
        GetWhat::Decisions {
            placement,
            namespace,
        } => get::<PlacementDecision>(hub, format, names(vec![placement], Some(namespace))).await,
        GetWhat::Addonplacementscores { cluster } => {
            get::<AddOnPlacementScore>(hub, format, names(Vec::new(), cluster)).await
        }
        GetWhat::Replicasets {
            names: n,
            namespace,
        } => get::<ManifestWorkReplicaSet>(hub, format, names(n, namespace)).await,
        GetWhat::Gitrepos {
            names: n,
            namespace,
            clusters: true,
            state,
        } => gitrepo_clusters(hub, format, &n, namespace, state).await,
        GetWhat::Gitrepos {
            names: n,
            namespace,
            ..
        } => get::<flotilla_api::v1::GitRepo>(hub, format, names(n, namespace)).await,
        GetWhat::Addons { clusters, addon } => {
            let query = Query {
                names: addon.into_iter().collect(),
                clusters,
                ..Query::default()
            };
            get::<ManagedClusterAddOn>(hub, format, query).await
        }
        GetWhat::Clustermanagementaddons { names: n } => {
            get::<ClusterManagementAddOn>(hub, format, names(n, None)).await
        }
        GetWhat::Addontemplates { names: n } => {
            get::<AddOnTemplate>(hub, format, names(n, None)).await
        }
        GetWhat::Addondeploymentconfigs {
            names: n,
            namespace,
        } => get::<AddOnDeploymentConfig>(hub, format, names(n, namespace)).await,
        GetWhat::Importpolicies { names: n } => {
            get::<ClusterImportPolicy>(hub, format, names(n, None)).await
        }
        GetWhat::Mirrorpeers { names: n } => get::<MirrorPeer>(hub, format, names(n, None)).await,
        GetWhat::Orphans { cluster } => {
            get::<flotilla_api::v1::Orphan>(hub, format, names(Vec::new(), cluster)).await
        }
        GetWhat::Managedserviceaccounts { names: n, cluster } => {
            get::<ManagedServiceAccount>(hub, format, names(n, cluster)).await
        }
        GetWhat::Policies {
            names: n,
            namespace,
        } => get::<Policy>(hub, format, names(n, namespace)).await,
        GetWhat::Hubconfigmaps {
            names: n,
            namespace,
        } => get::<flotilla_api::v1::HubConfigMap>(hub, format, names(n, namespace)).await,
        GetWhat::Hubsecrets {
            names: n,
            namespace,
        } => get::<flotilla_api::v1::HubSecretRecord>(hub, format, names(n, namespace)).await,
        GetWhat::Placementbindings {
            names: n,
            namespace,
        } => get::<PlacementBinding>(hub, format, names(n, namespace)).await,
        GetWhat::Policysets {
            names: n,
            namespace,
        } => get::<PolicySet>(hub, format, names(n, namespace)).await,
        GetWhat::Placementrules {
            names: n,
            namespace,
        } => get::<PlacementRule>(hub, format, names(n, namespace)).await,
    }
}

/// `get gitrepos NAME --clusters`: one GitRepo's clusters, a table, only those in `state`
/// when one is given.
async fn gitrepo_clusters(
    hub: &Hub,
    format: Format,
    names: &[String],
    namespace: Option<String>,
    state: Option<String>,
) -> Result<()> {
    let [name] = names else {
        anyhow::bail!("get gitrepos --clusters: name one GitRepo");
    };
    if !format.is_table() {
        anyhow::bail!("get gitrepos --clusters prints a table only");
    }
    let namespace = namespace.unwrap_or_else(|| "default".into());
    let state = state.unwrap_or_default();
    let rows = crate::kind::gitrepo::cluster_rows(hub, &namespace, name, &state).await?;
    print(Ok(crate::kind::gitrepo::cluster_table(&rows)))
}

/// `get` of one kind: fetches what `query` names and prints it — a list across namespaces as
/// a table with a NAMESPACE column (for the kinds that have namespaces), an empty table as the
/// kind's "none found" line on stderr instead of a bare header (for the kinds that have one).
async fn get<K: Kind>(hub: &Hub, format: Format, query: Query) -> Result<()> {
    let items = K::fetch(hub, &query).await?;
    if K::ACROSS_NAMESPACES && format.is_table() && query.namespace.is_none() && !items.is_empty() {
        return print(Ok(output::namespaced_table(&items)));
    }
    let none = K::none(&query, hub.endpoint());
    if let Some(none) = none.filter(|_| format.is_table() && items.is_empty()) {
        eprintln!("{none}");
        return Ok(());
    }
    print(output::render(format, &items, K::single(&query)))
}

//! `get`: list or show resources, as a table in clusteradm's columns or in their OCM shapes.
//! Add-ons: `get addons [CLUSTER...]` (ManagedClusterAddOns), `get clustermanagementaddons`,
//! `get addontemplates`, `get addondeploymentconfigs [-n NS]`.

use super::print;
use crate::hub::Hub;
use crate::kind::Kind;
use crate::output::{self, Format};
use crate::pager;
use anyhow::{Result, bail};
use clap::Subcommand;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnPlacementScore, AddOnTemplate, ClusterManagementAddOn,
    GetAddOnRequest, GetClusterRequest, GetClusterSetRequest, GetWorkRequest, ListAddOnsRequest,
    ListBindingsRequest, ListClusterSetsRequest, ListClustersRequest, ListImportPoliciesRequest,
    ListManagedServiceAccountsRequest, ListMirrorPeersRequest, ListPlacementsRequest,
    ListPoliciesRequest, ListReplicaSetsRequest, ListScoresRequest, ListWorksRequest,
    ManagedCluster, ManagedClusterAddOn, ManagedClusterSetBinding, ManagedClusterSetView,
    ManifestWork, ManifestWorkReplicaSet, Placement, PlacementDecision, PlacementRef,
};

/// Clusters asked for per page.
const CLUSTER_PAGE_SIZE: u32 = 1000;
/// Works asked for per page (a work carries up to 500 KiB of manifests).
const WORK_PAGE_SIZE: u32 = 500;

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
    /// Policies: NAME, REMEDIATION ACTION, COMPLIANCE STATE.
    #[command(alias = "policy", alias = "plc")]
    Policies {
        /// Only these policies.
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
    match what {
        GetWhat::Clusters {
            names,
            selector,
            pending,
        } => {
            let mut items = clusters(hub, &names, selector.unwrap_or_default()).await?;
            if pending {
                items.retain(crate::kind::cluster::pending);
            }
            let none = if pending {
                format!("No registrations waiting on {}.", hub.endpoint())
            } else {
                format!("No clusters found on {}.", hub.endpoint())
            };
            show(format, &items, names.len() == 1, Some(&none))
        }
        GetWhat::Clustersets { names } => {
            let views = sets(hub, &names).await?;
            show(format, &views, names.len() == 1, None)
        }
        GetWhat::Clustersetbindings { namespace } => {
            show(format, &bindings(hub, namespace).await?, false, None)
        }
        GetWhat::Works {
            name,
            cluster,
            selector,
        } => {
            let single = name.is_some();
            let items = works(hub, name, cluster, selector.unwrap_or_default()).await?;
            show(format, &items, single, Some("No works found."))
        }
        GetWhat::Placements { names, namespace } => {
            let items = placements(hub, &names, namespace.as_deref()).await?;
            let none = Some("No placements found.");
            namespaced(format, &items, &names, namespace, none)
        }
        GetWhat::Decisions {
            placement,
            namespace,
        } => show(
            format,
            &decisions(hub, namespace, placement).await?,
            false,
            None,
        ),
        GetWhat::Addonplacementscores { cluster } => show(
            format,
            &scores(hub, cluster.unwrap_or_default()).await?,
            false,
            None,
        ),
        GetWhat::Replicasets { names, namespace } => {
            let items = replica_sets(hub, &names, namespace.as_deref()).await?;
            namespaced(format, &items, &names, namespace, None)
        }
        GetWhat::Addons { clusters, addon } => {
            let single = clusters.len() == 1 && addon.is_some();
            let items = managed_cluster_addons(hub, &clusters, addon).await?;
            show(format, &items, single, Some("No add-ons found."))
        }
        GetWhat::Clustermanagementaddons { names } => {
            get_cluster_management_addons(hub, format, &names).await
        }
        GetWhat::Addontemplates { names } => get_addon_templates(hub, format, &names).await,
        GetWhat::Addondeploymentconfigs { names, namespace } => {
            get_deployment_configs(hub, format, &names, namespace).await
        }
        GetWhat::Importpolicies { names } => get_import_policies(hub, format, &names).await,
        GetWhat::Mirrorpeers { names } => get_mirror_peers(hub, format, &names).await,
        GetWhat::Managedserviceaccounts { names, cluster } => {
            get_service_accounts(hub, format, &names, cluster).await
        }
        GetWhat::Policies { names, namespace } => {
            get_policies(hub, format, &names, namespace).await
        }
        GetWhat::Placementbindings { names, namespace } => {
            get_placement_bindings(hub, format, &names, namespace).await
        }
        GetWhat::Policysets { names, namespace } => {
            get_policy_sets(hub, format, &names, namespace).await
        }
        GetWhat::Placementrules { names, namespace } => {
            get_placement_rules(hub, format, &names, namespace).await
        }
    }
}

/// `get clustermanagementaddons`.
async fn get_cluster_management_addons(hub: &Hub, format: Format, names: &[String]) -> Result<()> {
    let items = cluster_management_addons(hub, names).await?;
    let none = Some("No ClusterManagementAddOns found.");
    show(format, &items, names.len() == 1, none)
}

/// `get addontemplates`.
async fn get_addon_templates(hub: &Hub, format: Format, names: &[String]) -> Result<()> {
    let items = addon_templates(hub, names).await?;
    let none = Some("No AddOnTemplates found.");
    show(format, &items, names.len() == 1, none)
}

/// `get addondeploymentconfigs`.
async fn get_deployment_configs(
    hub: &Hub,
    format: Format,
    names: &[String],
    namespace: Option<String>,
) -> Result<()> {
    let items = deployment_configs(hub, names, namespace.as_deref()).await?;
    let none = Some("No AddOnDeploymentConfigs found.");
    namespaced(format, &items, names, namespace, none)
}

/// Only the objects named (all when `names` is empty); naming one that is not there fails.
fn named<K: Kind>(mut items: Vec<K>, names: &[String], kind: &str) -> Result<Vec<K>> {
    if names.is_empty() {
        return Ok(items);
    }
    items.retain(|i| names.contains(&i.name()));
    for n in names {
        if !items.iter().any(|i| &i.name() == n) {
            bail!("{kind} {n} not found");
        }
    }
    Ok(items)
}

/// A list that may span namespaces: a table with a NAMESPACE column when no `namespace` was
/// asked for.
fn namespaced<K: Kind>(
    format: Format,
    items: &[K],
    names: &[String],
    namespace: Option<String>,
    none: Option<&str>,
) -> Result<()> {
    if format.is_table() && namespace.is_none() && !items.is_empty() {
        return print(Ok(output::namespaced_table(items)));
    }
    show(format, items, names.len() == 1, none)
}

/// Prints what `get` found. An empty table prints `none` on stderr instead of a bare header
/// for the kinds that have one.
fn show<K: Kind>(format: Format, items: &[K], single: bool, none: Option<&str>) -> Result<()> {
    if let Some(none) = none.filter(|_| format.is_table() && items.is_empty()) {
        eprintln!("{none}");
        return Ok(());
    }
    print(output::render(format, items, single))
}

/// The named clusters, or every cluster matching `selector`, sorted by name.
async fn clusters(hub: &Hub, names: &[String], selector: String) -> Result<Vec<ManagedCluster>> {
    let mut items = if names.is_empty() {
        pager::all(|page_token| {
            let r = ListClustersRequest {
                label_selector: selector.clone(),
                page_size: CLUSTER_PAGE_SIZE,
                page_token,
            };
            async move {
                hub.idempotent(async || hub.clusters().list_clusters(r.clone()).await)
                    .await
            }
        })
        .await?
    } else {
        let mut items = Vec::new();
        for name in names {
            let r = GetClusterRequest { name: name.clone() };
            items.push(
                hub.idempotent(async || hub.clusters().get_cluster(r.clone()).await)
                    .await?,
            );
        }
        items
    };
    items.sort_by_key(Kind::name);
    Ok(items)
}

/// The named sets (each must exist), or every set.
async fn sets(hub: &Hub, names: &[String]) -> Result<Vec<ManagedClusterSetView>> {
    let mut views = hub
        .idempotent(async || {
            hub.sets()
                .list_cluster_sets(ListClusterSetsRequest {})
                .await
        })
        .await?
        .items;
    if names.is_empty() {
        return Ok(views);
    }
    for name in names {
        if !views
            .iter()
            .any(|v| v.metadata().is_some_and(|m| &m.name == name))
        {
            // Ask for it to get the hub's NotFound message.
            let r = GetClusterSetRequest { name: name.clone() };
            hub.idempotent(async || hub.sets().get_cluster_set(r.clone()).await)
                .await?;
        }
    }
    views.retain(|v| v.metadata().is_some_and(|m| names.contains(&m.name)));
    Ok(views)
}

/// The named work of a cluster, or every work (of `cluster` when given) matching `selector`.
async fn works(
    hub: &Hub,
    name: Option<String>,
    cluster: Option<String>,
    selector: String,
) -> Result<Vec<ManifestWork>> {
    match (name, cluster) {
        (Some(name), Some(cluster)) => {
            let r = GetWorkRequest { cluster, name };
            Ok(vec![
                hub.idempotent(async || hub.works().get_work(r.clone()).await)
                    .await?,
            ])
        }
        (Some(_), None) => bail!("get works NAME needs --cluster CLUSTER"),
        (None, cluster) => {
            let cluster = cluster.unwrap_or_default();
            pager::all(|page_token| {
                let r = ListWorksRequest {
                    cluster: cluster.clone(),
                    label_selector: selector.clone(),
                    page_size: WORK_PAGE_SIZE,
                    page_token,
                };
                async move {
                    hub.idempotent(async || hub.works().list_works(r.clone()).await)
                        .await
                }
            })
            .await
        }
    }
}

/// The named placements of `namespace`, or every placement (of `namespace` when given).
async fn placements(
    hub: &Hub,
    names: &[String],
    namespace: Option<&str>,
) -> Result<Vec<Placement>> {
    if names.is_empty() {
        let r = ListPlacementsRequest {
            namespace: namespace.unwrap_or_default().to_string(),
        };
        return Ok(hub
            .idempotent(async || hub.placements().list_placements(r.clone()).await)
            .await?
            .items);
    }
    let Some(namespace) = namespace else {
        bail!("get placements NAME needs --namespace NS");
    };
    let mut items = Vec::new();
    for name in names {
        let r = PlacementRef {
            namespace: namespace.to_string(),
            name: name.clone(),
        };
        items.push(
            hub.idempotent(async || hub.placements().get_placement(r.clone()).await)
                .await?,
        );
    }
    Ok(items)
}

/// The ManagedClusterAddOns of `clusters` (every cluster when empty), only of `addon` when
/// given, sorted by cluster and name.
async fn managed_cluster_addons(
    hub: &Hub,
    clusters: &[String],
    addon: Option<String>,
) -> Result<Vec<ManagedClusterAddOn>> {
    let name = addon.unwrap_or_default();
    if clusters.len() == 1 && !name.is_empty() {
        let r = GetAddOnRequest {
            namespace: clusters[0].clone(),
            name,
        };
        return Ok(vec![
            hub.idempotent(async || hub.addons().get_managed_cluster_add_on(r.clone()).await)
                .await?,
        ]);
    }
    let namespaces = if clusters.is_empty() {
        vec![String::new()]
    } else {
        clusters.to_vec()
    };
    let mut items = Vec::new();
    for namespace in namespaces {
        let r = ListAddOnsRequest {
            namespace,
            name: name.clone(),
        };
        items.extend(
            hub.idempotent(async || hub.addons().list_managed_cluster_add_ons(r.clone()).await)
                .await?
                .items,
        );
    }
    items.sort_by_key(|a| (a.namespace(), a.name()));
    Ok(items)
}

/// The named AddOnDeploymentConfigs of `namespace`, or every one (of `namespace` when given),
/// sorted by namespace and name.
async fn deployment_configs(
    hub: &Hub,
    names: &[String],
    namespace: Option<&str>,
) -> Result<Vec<AddOnDeploymentConfig>> {
    if names.is_empty() {
        let r = ListAddOnsRequest {
            namespace: namespace.unwrap_or_default().to_string(),
            name: String::new(),
        };
        let mut items = hub
            .idempotent(async || hub.addons().list_add_on_deployment_configs(r.clone()).await)
            .await?
            .items;
        items.sort_by_key(|c| (c.namespace(), c.name()));
        return Ok(items);
    }
    let Some(namespace) = namespace else {
        bail!("get addondeploymentconfigs NAME needs --namespace NS");
    };
    let mut items = Vec::new();
    for name in names {
        let r = GetAddOnRequest {
            namespace: namespace.to_string(),
            name: name.clone(),
        };
        items.push(
            hub.idempotent(async || hub.addons().get_add_on_deployment_config(r.clone()).await)
                .await?,
        );
    }
    Ok(items)
}

/// The ManagedClusterSetBindings of `namespace` (of every namespace when `None`).
async fn bindings(hub: &Hub, namespace: Option<String>) -> Result<Vec<ManagedClusterSetBinding>> {
    let r = ListBindingsRequest {
        namespace: namespace.unwrap_or_default(),
    };
    Ok(hub
        .idempotent(async || hub.sets().list_bindings(r.clone()).await)
        .await?
        .items)
}

/// The PlacementDecisions of placement `namespace/name`.
async fn decisions(hub: &Hub, namespace: String, name: String) -> Result<Vec<PlacementDecision>> {
    let r = PlacementRef { namespace, name };
    Ok(hub
        .idempotent(async || hub.placements().list_decisions(r.clone()).await)
        .await?
        .items)
}

/// The AddOnPlacementScores of `cluster` (of every cluster when empty).
async fn scores(hub: &Hub, cluster: String) -> Result<Vec<AddOnPlacementScore>> {
    let r = ListScoresRequest { cluster };
    Ok(hub
        .idempotent(async || hub.placements().list_scores(r.clone()).await)
        .await?
        .items)
}

/// The ManifestWorkReplicaSets (of `namespace` when given), only the named ones when `names`
/// is not empty (an error when none of them is there).
async fn replica_sets(
    hub: &Hub,
    names: &[String],
    namespace: Option<&str>,
) -> Result<Vec<ManifestWorkReplicaSet>> {
    let r = ListReplicaSetsRequest {
        namespace: namespace.unwrap_or_default().to_string(),
    };
    let mut items = hub
        .idempotent(async || hub.replica_sets().list_replica_sets(r.clone()).await)
        .await?
        .items;
    if !names.is_empty() {
        items.retain(|i| {
            names
                .iter()
                .any(|n| i.metadata.as_ref().is_some_and(|m| &m.name == n))
        });
        if items.is_empty() {
            bail!("ManifestWorkReplicaSet {} not found", names.join(", "));
        }
    }
    Ok(items)
}

/// The named ClusterManagementAddOns (each must exist), or every one sorted by name.
async fn cluster_management_addons(
    hub: &Hub,
    names: &[String],
) -> Result<Vec<ClusterManagementAddOn>> {
    if names.is_empty() {
        let r = ListAddOnsRequest::default();
        let mut items = hub
            .idempotent(async || {
                hub.addons()
                    .list_cluster_management_add_ons(r.clone())
                    .await
            })
            .await?
            .items;
        items.sort_by_key(Kind::name);
        return Ok(items);
    }
    let mut items = Vec::new();
    for name in names {
        let r = GetAddOnRequest {
            namespace: String::new(),
            name: name.clone(),
        };
        items.push(
            hub.idempotent(async || hub.addons().get_cluster_management_add_on(r.clone()).await)
                .await?,
        );
    }
    Ok(items)
}

/// The named AddOnTemplates (each must exist), or every one sorted by name.
async fn addon_templates(hub: &Hub, names: &[String]) -> Result<Vec<AddOnTemplate>> {
    if names.is_empty() {
        let r = ListAddOnsRequest::default();
        let mut items = hub
            .idempotent(async || hub.addons().list_add_on_templates(r.clone()).await)
            .await?
            .items;
        items.sort_by_key(Kind::name);
        return Ok(items);
    }
    let mut items = Vec::new();
    for name in names {
        let r = GetAddOnRequest {
            namespace: String::new(),
            name: name.clone(),
        };
        items.push(
            hub.idempotent(async || hub.addons().get_add_on_template(r.clone()).await)
                .await?,
        );
    }
    Ok(items)
}

/// `get importpolicies`: the ClusterImportPolicies, only the named ones when `names` is not
/// empty.
async fn get_import_policies(hub: &Hub, format: Format, names: &[String]) -> Result<()> {
    let r = ListImportPoliciesRequest {};
    let items = hub
        .idempotent(async || hub.import_policies().list_import_policies(r).await)
        .await?
        .items;
    let items = named(items, names, "ClusterImportPolicy")?;
    let none = Some("No ClusterImportPolicies found.");
    show(format, &items, names.len() == 1, none)
}

/// `get mirrorpeers`: the MirrorPeers, only the named ones when `names` is not empty.
async fn get_mirror_peers(hub: &Hub, format: Format, names: &[String]) -> Result<()> {
    let r = ListMirrorPeersRequest {};
    let items = hub
        .idempotent(async || hub.mirror_peers().list_mirror_peers(r).await)
        .await?
        .items;
    let items = named(items, names, "MirrorPeer")?;
    show(
        format,
        &items,
        names.len() == 1,
        Some("No MirrorPeers found."),
    )
}

/// `get managedserviceaccounts`: those of `cluster` (of every cluster when `None`), only the
/// named ones when `names` is not empty.
async fn get_service_accounts(
    hub: &Hub,
    format: Format,
    names: &[String],
    cluster: Option<String>,
) -> Result<()> {
    let r = ListManagedServiceAccountsRequest {
        namespace: cluster.unwrap_or_default(),
    };
    let items = hub
        .idempotent(async || {
            hub.service_accounts()
                .list_managed_service_accounts(r.clone())
                .await
        })
        .await?
        .items;
    let items = named(items, names, "ManagedServiceAccount")?;
    let none = Some("No ManagedServiceAccounts found.");
    show(format, &items, names.len() == 1, none)
}

/// The request for a governance list of `namespace` (every namespace when `None`).
fn governance_request(namespace: Option<&str>) -> ListPoliciesRequest {
    ListPoliciesRequest {
        namespace: namespace.unwrap_or_default().to_string(),
    }
}

/// `get policies`: those of `namespace` (of every namespace when `None`), only the named ones
/// when `names` is not empty.
async fn get_policies(
    hub: &Hub,
    format: Format,
    names: &[String],
    namespace: Option<String>,
) -> Result<()> {
    let r = governance_request(namespace.as_deref());
    let items = hub
        .idempotent(async || hub.policies().list_policies(r.clone()).await)
        .await?
        .items;
    let items = named(items, names, "Policy")?;
    namespaced(format, &items, names, namespace, Some("No policies found."))
}

/// `get placementbindings`, as [`get_policies`].
async fn get_placement_bindings(
    hub: &Hub,
    format: Format,
    names: &[String],
    namespace: Option<String>,
) -> Result<()> {
    let r = governance_request(namespace.as_deref());
    let items = hub
        .idempotent(async || hub.policies().list_placement_bindings(r.clone()).await)
        .await?
        .items;
    let items = named(items, names, "PlacementBinding")?;
    let none = Some("No PlacementBindings found.");
    namespaced(format, &items, names, namespace, none)
}

/// `get policysets`, as [`get_policies`].
async fn get_policy_sets(
    hub: &Hub,
    format: Format,
    names: &[String],
    namespace: Option<String>,
) -> Result<()> {
    let r = governance_request(namespace.as_deref());
    let items = hub
        .idempotent(async || hub.policies().list_policy_sets(r.clone()).await)
        .await?
        .items;
    let items = named(items, names, "PolicySet")?;
    namespaced(
        format,
        &items,
        names,
        namespace,
        Some("No PolicySets found."),
    )
}

/// `get placementrules`, as [`get_policies`].
async fn get_placement_rules(
    hub: &Hub,
    format: Format,
    names: &[String],
    namespace: Option<String>,
) -> Result<()> {
    let r = governance_request(namespace.as_deref());
    let items = hub
        .idempotent(async || hub.policies().list_placement_rules(r.clone()).await)
        .await?
        .items;
    let items = named(items, names, "PlacementRule")?;
    let none = Some("No PlacementRules found.");
    namespaced(format, &items, names, namespace, none)
}

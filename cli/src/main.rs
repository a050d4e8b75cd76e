//! `flotilla`: the operator CLI. Talks to the hub's gRPC API (`--hub`, env `FLOTILLA_HUB`).

use anyhow::{Context, Result, anyhow, bail};
use clap::{Parser, Subcommand};
use flotilla_api::ocm::{self, Document};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    ClusterNamesRequest, DeleteBindingRequest, DeleteClusterRequest, DeleteWorkRequest,
    GetClusterRequest, GetClusterSetRequest, GetWorkRequest, LabelClusterRequest,
    ListBindingsRequest, ListClusterSetsRequest, ListClustersRequest, ListWorksRequest,
    ProxyGetRequest, TaintClusterRequest, WatchClustersRequest, WatchWorksRequest,
};
use flotilla_api::v1::{
    ListPlacementsRequest, ListScoresRequest, PlacementRef, ScoreRef, WatchPlacementsRequest,
};
use flotilla_cli::edits;
use flotilla_cli::output::{self, Format};
use flotilla_cli::placement as pout;
use std::io::Read;
use std::process::ExitCode;
use tonic::transport::Channel;

/// Operate a Flotilla hub: clusters, cluster sets and bindings, works, placements.
#[derive(Parser, Debug)]
#[command(name = "flotilla", version)]
struct Cli {
    /// Hub gRPC endpoint.
    #[arg(
        long,
        global = true,
        env = "FLOTILLA_HUB",
        default_value = "http://127.0.0.1:50051"
    )]
    hub: String,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List or show resources.
    Get {
        #[command(subcommand)]
        what: GetWhat,
    },
    /// Show one resource in detail.
    Describe {
        #[command(subcommand)]
        what: DescribeWhat,
    },
    /// Accept clusters (the hub side of the double opt-in).
    Accept {
        /// Cluster names.
        #[arg(required = true)]
        clusters: Vec<String>,
    },
    /// Deny clusters: they can no longer join or report.
    Deny {
        /// Cluster names.
        #[arg(required = true)]
        clusters: Vec<String>,
    },
    /// Set (key=value) or remove (key-) labels of a cluster.
    Label {
        /// Cluster name.
        cluster: String,
        /// Edits: key=value sets, key- removes.
        #[arg(required = true)]
        labels: Vec<String>,
    },
    /// Add (key=value:Effect) or remove (key:Effect- or key-) taints of a cluster.
    Taint {
        /// Cluster name.
        cluster: String,
        /// Edits. Effects: NoSelect, PreferNoSelect, NoSelectIfNew.
        #[arg(required = true)]
        taints: Vec<String>,
    },
    /// Create or update resources from OCM YAML (multi-document); FILE or - for stdin.
    Apply {
        /// File to read.
        #[arg(short = 'f', long = "filename", required = true)]
        file: String,
    },
    /// Delete a resource.
    Delete {
        #[command(subcommand)]
        what: DeleteWhat,
    },
    /// Stream changes.
    Watch {
        #[command(subcommand)]
        what: WatchWhat,
    },
    /// Read-only queries of a spoke's resources, through its agent.
    Proxy {
        /// Cluster name.
        cluster: String,
        #[command(subcommand)]
        what: ProxyWhat,
    },
}

#[derive(Subcommand, Debug)]
enum ProxyWhat {
    /// Get resources of a kind (Deployment, deployments, cm, ...).
    Get {
        /// Kind or resource.
        kind: String,
        /// Name (all objects of the kind when omitted).
        name: Option<String>,
        /// Namespace (all namespaces when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum GetWhat {
    /// ManagedClusters.
    #[command(alias = "cluster", alias = "managedclusters")]
    Clusters {
        /// Only these clusters.
        names: Vec<String>,
        /// Label selector (env=prod,tier!=db,gpu).
        #[arg(short = 'l', long)]
        selector: Option<String>,
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
    /// AddOnPlacementScores.
    #[command(alias = "addonplacementscore", alias = "scores")]
    Addonplacementscores {
        /// Only scores of this cluster (the score's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum DescribeWhat {
    /// A ManagedCluster.
    Cluster {
        /// Name.
        name: String,
    },
    /// A Placement: status, decisions, and for every candidate cluster whether each filter
    /// passed and each prioritizer's score (OCM's debug endpoint).
    Placement {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A ManifestWork: conditions, per-manifest conditions and feedback.
    Work {
        /// Name.
        name: String,
        /// Cluster (the work's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
}

#[derive(Subcommand, Debug)]
enum DeleteWhat {
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

#[derive(Subcommand, Debug)]
enum WatchWhat {
    /// ManagedClusters: current state, then every change.
    Clusters {
        /// Label selector.
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// ManifestWorks: current state, then every change including status.
    Works {
        /// Only works of this cluster.
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: Option<String>,
    },
    /// Placements and their decisions: current state, then every change.
    Placements {
        /// Namespace (all when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
}

struct Hub {
    endpoint: String,
    channel: Channel,
}

impl Hub {
    async fn connect(endpoint: &str) -> Result<Self> {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
            .with_context(|| format!("--hub {endpoint:?} is not a valid URL"))?
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect()
            .await
            .with_context(|| {
                format!("cannot reach the hub at {endpoint}: is flotilla-hub running? (set --hub or FLOTILLA_HUB)")
            })?;
        Ok(Self {
            endpoint: endpoint.to_string(),
            channel,
        })
    }

    fn clusters(&self) -> ClusterServiceClient<Channel> {
        ClusterServiceClient::new(self.channel.clone())
    }

    fn sets(&self) -> ClusterSetServiceClient<Channel> {
        ClusterSetServiceClient::new(self.channel.clone())
    }

    fn placements(&self) -> PlacementServiceClient<Channel> {
        // A placement over 100,000 clusters has 1,000 decision pages.
        PlacementServiceClient::new(self.channel.clone())
            .max_decoding_message_size(64 * 1024 * 1024)
    }

    fn works(&self) -> WorkServiceClient<Channel> {
        // Works carry up to 500 KiB of manifests; allow the largest event plus headroom.
        WorkServiceClient::new(self.channel.clone())
            .max_decoding_message_size(16 * 1024 * 1024)
            .max_encoding_message_size(16 * 1024 * 1024)
    }
}

fn status(e: tonic::Status) -> anyhow::Error {
    let code = match e.code() {
        tonic::Code::InvalidArgument => "invalid",
        tonic::Code::NotFound => "not found",
        tonic::Code::Aborted => "conflict",
        tonic::Code::FailedPrecondition => "refused",
        tonic::Code::Unavailable => "unavailable",
        tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => "forbidden",
        _ => "error",
    };
    anyhow!("{code}: {}", e.message())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    // Parse local input before touching the network, so bad input fails fast and alone.
    let apply_docs = match &cli.command {
        Command::Apply { file } => Some(read_documents(file)?),
        _ => None,
    };
    let hub = Hub::connect(&cli.hub).await?;
    let fmt = cli.output;
    match cli.command {
        Command::Get { what } => get(&hub, fmt, what).await,
        Command::Describe {
            what: DescribeWhat::Work { name, cluster },
        } => {
            let w = hub
                .works()
                .get_work(GetWorkRequest { cluster, name })
                .await
                .map_err(status)?
                .into_inner();
            match fmt {
                Format::Table => print!("{}", output::describe_work(&w)),
                f => print!(
                    "{}",
                    output::structured(f, vec![ocm::ManifestWork::from(&w)], true)
                        .map_err(|e| anyhow!(e))?
                ),
            }
            Ok(())
        }
        Command::Proxy {
            cluster,
            what:
                ProxyWhat::Get {
                    kind,
                    name,
                    namespace,
                },
        } => proxy_get(&hub, fmt, cluster, kind, name, namespace).await,
        Command::Describe {
            what: DescribeWhat::Placement { name, namespace },
        } => describe_placement(&hub, fmt, namespace, name).await,
        Command::Describe {
            what: DescribeWhat::Cluster { name },
        } => {
            let c = hub
                .clusters()
                .get_cluster(GetClusterRequest { name })
                .await
                .map_err(status)?
                .into_inner();
            match fmt {
                Format::Table => print!("{}", output::describe_cluster(&c)),
                f => print!(
                    "{}",
                    output::structured(f, vec![ocm::ManagedCluster::from(&c)], true)
                        .map_err(|e| anyhow!(e))?
                ),
            }
            Ok(())
        }
        Command::Accept { clusters } => {
            hub.clusters()
                .accept_clusters(ClusterNamesRequest {
                    names: clusters.clone(),
                })
                .await
                .map_err(status)?;
            for c in clusters {
                println!("managedcluster/{c} accepted");
            }
            Ok(())
        }
        Command::Deny { clusters } => {
            hub.clusters()
                .deny_clusters(ClusterNamesRequest {
                    names: clusters.clone(),
                })
                .await
                .map_err(status)?;
            for c in clusters {
                println!("managedcluster/{c} denied");
            }
            Ok(())
        }
        Command::Label { cluster, labels } => {
            let e = edits::parse_labels(&labels).map_err(|e| anyhow!(e))?;
            hub.clusters()
                .label_cluster(LabelClusterRequest {
                    name: cluster.clone(),
                    set: e.set,
                    remove: e.remove,
                })
                .await
                .map_err(status)?;
            println!("managedcluster/{cluster} labeled");
            Ok(())
        }
        Command::Taint { cluster, taints } => {
            let e = edits::parse_taints(&taints).map_err(|e| anyhow!(e))?;
            hub.clusters()
                .taint_cluster(TaintClusterRequest {
                    name: cluster.clone(),
                    add: e.add,
                    remove: e.remove,
                })
                .await
                .map_err(status)?;
            println!("managedcluster/{cluster} tainted");
            Ok(())
        }
        Command::Apply { .. } => apply(&hub, apply_docs.unwrap_or_default()).await,
        Command::Delete { what } => delete(&hub, what).await,
        Command::Watch {
            what: WatchWhat::Clusters { selector },
        } => watch_clusters(&hub, fmt, selector).await,
        Command::Watch {
            what: WatchWhat::Works { cluster },
        } => watch_works(&hub, fmt, cluster).await,
        Command::Watch {
            what: WatchWhat::Placements { namespace },
        } => watch_placements(&hub, fmt, namespace).await,
    }
}

fn read_documents(file: &str) -> Result<Vec<Document>> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
    };
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for d in ocm::parse_documents(&text) {
        match d {
            Ok(d) => docs.push(d),
            Err(e) => errors.push(format!("{file}: {e}")),
        }
    }
    if !errors.is_empty() {
        bail!("nothing applied:\n  {}", errors.join("\n  "));
    }
    if docs.is_empty() {
        bail!("{file}: no documents to apply");
    }
    Ok(docs)
}

async fn apply(hub: &Hub, docs: Vec<Document>) -> Result<()> {
    let mut failed = 0;
    for doc in docs {
        let result = match doc {
            Document::ClusterSet(s) => {
                let name = s
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default();
                hub.sets().apply_cluster_set(s).await.map(|_| {
                    format!("managedclusterset.cluster.open-cluster-management.io/{name} applied")
                })
            }
            Document::Work(w) => {
                let m = w.metadata.clone().unwrap_or_default();
                hub.works().apply_work(w).await.map(|r| {
                    let generation = r.into_inner().metadata.map_or(0, |m| m.generation);
                    format!(
                        "manifestwork.work.open-cluster-management.io/{} applied (cluster {}, generation {generation})",
                        m.name, m.namespace
                    )
                })
            }
            Document::Placement(p) => {
                let m = p.metadata.clone().unwrap_or_default();
                hub.placements().apply_placement(p).await.map(|r| {
                    let p = r.into_inner();
                    let st = p.status.unwrap_or_default();
                    let mut line = format!(
                        "placement.cluster.open-cluster-management.io/{} applied (namespace {}, {} clusters selected)",
                        m.name, m.namespace, st.number_of_selected_clusters
                    );
                    if let Some(c) = flotilla_api::meta::find_condition(&st.conditions, "PlacementMisconfigured")
                        .filter(|c| c.status == "True")
                    {
                        line.push_str(&format!("\nwarning: PlacementMisconfigured: {}", c.message));
                    }
                    line
                })
            }
            Document::Score(sc) => {
                let m = sc.metadata.clone().unwrap_or_default();
                hub.placements().apply_score(sc).await.map(|_| {
                    format!(
                        "addonplacementscore.cluster.open-cluster-management.io/{} applied (cluster {})",
                        m.name, m.namespace
                    )
                })
            }
            Document::Binding(b) => {
                let m = b.metadata.clone().unwrap_or_default();
                hub.sets().apply_binding(b).await.map(|_| {
                    format!(
                        "managedclustersetbinding.cluster.open-cluster-management.io/{} applied (namespace {})",
                        m.name, m.namespace
                    )
                })
            }
        };
        match result {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("error: {:#}", status(e));
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} document(s) were not applied");
    }
    Ok(())
}

async fn get(hub: &Hub, fmt: Format, what: GetWhat) -> Result<()> {
    match what {
        GetWhat::Clusters { names, selector } => {
            let mut items = if names.is_empty() {
                let mut all = Vec::new();
                let mut token = String::new();
                loop {
                    let page = hub
                        .clusters()
                        .list_clusters(ListClustersRequest {
                            label_selector: selector.clone().unwrap_or_default(),
                            page_size: 1000,
                            page_token: token,
                        })
                        .await
                        .map_err(status)?
                        .into_inner();
                    all.extend(page.items);
                    if page.next_page_token.is_empty() {
                        break all;
                    }
                    token = page.next_page_token;
                }
            } else {
                let mut v = Vec::new();
                for name in &names {
                    v.push(
                        hub.clusters()
                            .get_cluster(GetClusterRequest { name: name.clone() })
                            .await
                            .map_err(status)?
                            .into_inner(),
                    );
                }
                v
            };
            items.sort_by(|a, b| {
                a.metadata
                    .as_ref()
                    .map(|m| &m.name)
                    .cmp(&b.metadata.as_ref().map(|m| &m.name))
            });
            match fmt {
                Format::Table => {
                    if items.is_empty() {
                        eprintln!("No clusters found on {}.", hub.endpoint);
                        return Ok(());
                    }
                    let rows: Vec<_> = items.iter().map(output::cluster_row).collect();
                    print!("{}", output::table(&output::CLUSTER_COLUMNS, &rows));
                }
                f => {
                    let objs = items.iter().map(ocm::ManagedCluster::from).collect();
                    print!(
                        "{}",
                        output::structured(f, objs, names.len() == 1).map_err(|e| anyhow!(e))?
                    );
                }
            }
        }
        GetWhat::Clustersets { names } => {
            let mut views = hub
                .sets()
                .list_cluster_sets(ListClusterSetsRequest {})
                .await
                .map_err(status)?
                .into_inner()
                .items;
            if !names.is_empty() {
                for n in &names {
                    if !views.iter().any(|v| {
                        v.set
                            .as_ref()
                            .and_then(|s| s.metadata.as_ref())
                            .is_some_and(|m| &m.name == n)
                    }) {
                        // Ask for it to get the hub's NotFound message.
                        hub.sets()
                            .get_cluster_set(GetClusterSetRequest { name: n.clone() })
                            .await
                            .map_err(status)?;
                    }
                }
                views.retain(|v| {
                    v.set
                        .as_ref()
                        .and_then(|s| s.metadata.as_ref())
                        .is_some_and(|m| names.contains(&m.name))
                });
            }
            match fmt {
                Format::Table => {
                    let rows: Vec<_> = views.iter().map(output::clusterset_row).collect();
                    print!("{}", output::table(&output::CLUSTERSET_COLUMNS, &rows));
                }
                f => {
                    let objs = views
                        .iter()
                        .filter_map(|v| v.set.as_ref())
                        .map(ocm::ManagedClusterSet::from)
                        .collect();
                    print!(
                        "{}",
                        output::structured(f, objs, names.len() == 1).map_err(|e| anyhow!(e))?
                    );
                }
            }
        }
        GetWhat::Works {
            name,
            cluster,
            selector,
        } => {
            let items = match (&name, &cluster) {
                (Some(n), Some(c)) => vec![
                    hub.works()
                        .get_work(GetWorkRequest {
                            cluster: c.clone(),
                            name: n.clone(),
                        })
                        .await
                        .map_err(status)?
                        .into_inner(),
                ],
                (Some(_), None) => bail!("get works NAME needs --cluster CLUSTER"),
                (None, _) => {
                    let mut all = Vec::new();
                    let mut token = String::new();
                    loop {
                        let page = hub
                            .works()
                            .list_works(ListWorksRequest {
                                cluster: cluster.clone().unwrap_or_default(),
                                label_selector: selector.clone().unwrap_or_default(),
                                page_size: 500,
                                page_token: token,
                            })
                            .await
                            .map_err(status)?
                            .into_inner();
                        all.extend(page.items);
                        if page.next_page_token.is_empty() {
                            break all;
                        }
                        token = page.next_page_token;
                    }
                }
            };
            match fmt {
                Format::Table => {
                    if items.is_empty() {
                        eprintln!("No works found.");
                        return Ok(());
                    }
                    let rows: Vec<_> = items.iter().map(output::work_row).collect();
                    print!("{}", output::table(&output::WORK_COLUMNS, &rows));
                }
                f => {
                    let objs = items.iter().map(ocm::ManifestWork::from).collect();
                    print!(
                        "{}",
                        output::structured(f, objs, name.is_some()).map_err(|e| anyhow!(e))?
                    );
                }
            }
        }
        GetWhat::Placements { names, namespace } => {
            get_placements(hub, fmt, names, namespace).await?
        }
        GetWhat::Decisions {
            placement,
            namespace,
        } => {
            let items = hub
                .placements()
                .list_decisions(PlacementRef {
                    namespace,
                    name: placement,
                })
                .await
                .map_err(status)?
                .into_inner()
                .items;
            print!(
                "{}",
                output::render(
                    fmt,
                    &items,
                    &pout::DECISION_COLUMNS,
                    pout::decision_row,
                    |x| ocm::PlacementDecision::from(x),
                    false
                )
                .map_err(|e| anyhow!(e))?
            );
        }
        GetWhat::Addonplacementscores { cluster } => {
            let items = hub
                .placements()
                .list_scores(ListScoresRequest {
                    cluster: cluster.unwrap_or_default(),
                })
                .await
                .map_err(status)?
                .into_inner()
                .items;
            print!(
                "{}",
                output::render(
                    fmt,
                    &items,
                    &pout::SCORE_COLUMNS,
                    pout::score_row,
                    |x| ocm::AddOnPlacementScore::from(x),
                    false
                )
                .map_err(|e| anyhow!(e))?
            );
        }
        GetWhat::Clustersetbindings { namespace } => {
            let items = hub
                .sets()
                .list_bindings(ListBindingsRequest {
                    namespace: namespace.unwrap_or_default(),
                })
                .await
                .map_err(status)?
                .into_inner()
                .items;
            print!(
                "{}",
                output::render(
                    fmt,
                    &items,
                    &output::BINDING_COLUMNS,
                    output::binding_row,
                    |x| ocm::ManagedClusterSetBinding::from(x),
                    false
                )
                .map_err(|e| anyhow!(e))?
            );
        }
    }
    Ok(())
}

async fn delete(hub: &Hub, what: DeleteWhat) -> Result<()> {
    match what {
        DeleteWhat::Cluster { name } => {
            hub.clusters()
                .delete_cluster(DeleteClusterRequest { name: name.clone() })
                .await
                .map_err(status)?;
            println!("managedcluster/{name} deleted");
        }
        DeleteWhat::Work { name, cluster } => {
            let w = hub
                .works()
                .delete_work(DeleteWorkRequest {
                    cluster: cluster.clone(),
                    name: name.clone(),
                })
                .await
                .map_err(status)?
                .into_inner();
            let policy = w
                .spec
                .and_then(|s| s.delete_option)
                .map(|d| d.propagation_policy)
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "Foreground".into());
            println!("manifestwork/{name} deleting on cluster {cluster} (propagation {policy})");
        }
        DeleteWhat::Clusterset { name } => {
            hub.sets()
                .delete_cluster_set(GetClusterSetRequest { name: name.clone() })
                .await
                .map_err(status)?;
            println!("managedclusterset/{name} deleted");
        }
        DeleteWhat::Placement { name, namespace } => {
            hub.placements()
                .delete_placement(PlacementRef {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
                .await
                .map_err(status)?;
            println!("placement/{name} deleted (namespace {namespace})");
        }
        DeleteWhat::Addonplacementscore { name, cluster } => {
            hub.placements()
                .delete_score(ScoreRef {
                    cluster: cluster.clone(),
                    name: name.clone(),
                })
                .await
                .map_err(status)?;
            println!("addonplacementscore/{name} deleted (cluster {cluster})");
        }
        DeleteWhat::Clustersetbinding { name, namespace } => {
            hub.sets()
                .delete_binding(DeleteBindingRequest {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
                .await
                .map_err(status)?;
            println!("managedclustersetbinding/{name} deleted (namespace {namespace})");
        }
    }
    Ok(())
}

async fn watch_clusters(hub: &Hub, fmt: Format, selector: Option<String>) -> Result<()> {
    let mut stream = hub
        .clusters()
        .watch_clusters(WatchClustersRequest {
            label_selector: selector.unwrap_or_default(),
        })
        .await
        .map_err(status)?
        .into_inner();
    if fmt == Format::Table {
        let mut header = vec!["EVENT"];
        header.extend(output::CLUSTER_COLUMNS);
        print!("{}", output::table(&header, &[]));
    }
    while let Some(ev) = stream.message().await.map_err(status)? {
        let kind = flotilla_api::v1::EventType::try_from(ev.r#type)
            .map(|t| {
                t.as_str_name()
                    .trim_start_matches("EVENT_TYPE_")
                    .to_string()
            })
            .unwrap_or_default();
        let Some(c) = ev.cluster else { continue };
        match fmt {
            Format::Table => {
                let mut row = vec![kind];
                row.extend(output::cluster_row(&c));
                // Rows are printed as they come; widths follow the header.
                println!("{}", row.join("   "));
            }
            f => {
                let obj = ocm::ManagedCluster::from(&c);
                let text = output::structured(f, vec![obj], true).map_err(|e| anyhow!(e))?;
                if f == Format::Yaml {
                    println!("---");
                }
                print!("{text}");
            }
        }
    }
    Ok(())
}

async fn watch_works(hub: &Hub, fmt: Format, cluster: Option<String>) -> Result<()> {
    let mut stream = hub
        .works()
        .watch_works(WatchWorksRequest {
            cluster: cluster.unwrap_or_default(),
            label_selector: String::new(),
        })
        .await
        .map_err(status)?
        .into_inner();
    if fmt == Format::Table {
        let mut header = vec!["EVENT"];
        header.extend(output::WORK_COLUMNS);
        print!("{}", output::table(&header, &[]));
    }
    while let Some(ev) = stream.message().await.map_err(status)? {
        let kind = flotilla_api::v1::EventType::try_from(ev.r#type)
            .map(|t| {
                t.as_str_name()
                    .trim_start_matches("EVENT_TYPE_")
                    .to_string()
            })
            .unwrap_or_default();
        let Some(w) = ev.work else { continue };
        match fmt {
            Format::Table => {
                let mut row = vec![kind];
                row.extend(output::work_row(&w));
                println!("{}", row.join("   "));
            }
            f => {
                let text = output::structured(f, vec![ocm::ManifestWork::from(&w)], true)
                    .map_err(|e| anyhow!(e))?;
                if f == Format::Yaml {
                    println!("---");
                }
                print!("{text}");
            }
        }
    }
    Ok(())
}

async fn proxy_get(
    hub: &Hub,
    fmt: Format,
    cluster: String,
    kind: String,
    name: Option<String>,
    namespace: Option<String>,
) -> Result<()> {
    let objects = hub
        .works()
        .proxy(ProxyGetRequest {
            cluster,
            kind,
            namespace: namespace.unwrap_or_default(),
            name: name.clone().unwrap_or_default(),
        })
        .await
        .map_err(status)?
        .into_inner()
        .objects;
    let values: Vec<serde_json::Value> = objects
        .iter()
        .map(|o| serde_json::from_str(o).context("the agent returned invalid JSON"))
        .collect::<Result<_>>()?;
    match fmt {
        Format::Table => {
            if values.is_empty() {
                eprintln!("No resources found.");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = values.iter().map(output::proxy_row).collect();
            print!("{}", output::table(&output::PROXY_COLUMNS, &rows));
        }
        f => print!(
            "{}",
            output::structured(f, values, name.is_some()).map_err(|e| anyhow!(e))?
        ),
    }
    Ok(())
}

async fn get_placements(
    hub: &Hub,
    fmt: Format,
    names: Vec<String>,
    namespace: Option<String>,
) -> Result<()> {
    let items = if names.is_empty() {
        hub.placements()
            .list_placements(ListPlacementsRequest {
                namespace: namespace.clone().unwrap_or_default(),
            })
            .await
            .map_err(status)?
            .into_inner()
            .items
    } else {
        let Some(ns) = &namespace else {
            bail!("get placements NAME needs --namespace NS");
        };
        let mut v = Vec::new();
        for name in &names {
            v.push(
                hub.placements()
                    .get_placement(PlacementRef {
                        namespace: ns.clone(),
                        name: name.clone(),
                    })
                    .await
                    .map_err(status)?
                    .into_inner(),
            );
        }
        v
    };
    match fmt {
        Format::Table => {
            if items.is_empty() {
                eprintln!("No placements found.");
                return Ok(());
            }
            if namespace.is_some() {
                let rows: Vec<_> = items.iter().map(pout::placement_row).collect();
                print!("{}", output::table(&pout::PLACEMENT_COLUMNS, &rows));
            } else {
                let mut header = vec!["NAMESPACE"];
                header.extend(pout::PLACEMENT_COLUMNS);
                let rows: Vec<_> = items
                    .iter()
                    .map(|p| {
                        let mut row = vec![
                            p.metadata
                                .as_ref()
                                .map(|m| m.namespace.clone())
                                .unwrap_or_default(),
                        ];
                        row.extend(pout::placement_row(p));
                        row
                    })
                    .collect();
                print!("{}", output::table(&header, &rows));
            }
        }
        f => {
            let objs = items.iter().map(ocm::Placement::from).collect();
            print!(
                "{}",
                output::structured(f, objs, names.len() == 1).map_err(|e| anyhow!(e))?
            );
        }
    }
    Ok(())
}

async fn describe_placement(hub: &Hub, fmt: Format, namespace: String, name: String) -> Result<()> {
    let r = PlacementRef { namespace, name };
    let debug = hub
        .placements()
        .debug_placement(r.clone())
        .await
        .map_err(status)?
        .into_inner();
    match fmt {
        Format::Table => {
            let decisions = hub
                .placements()
                .list_decisions(r)
                .await
                .map_err(status)?
                .into_inner()
                .items;
            print!("{}", pout::describe_placement(&debug, &decisions));
        }
        f => print!(
            "{}",
            output::structured(f, vec![pout::described(&debug)], true).map_err(|e| anyhow!(e))?
        ),
    }
    Ok(())
}

async fn watch_placements(hub: &Hub, fmt: Format, namespace: Option<String>) -> Result<()> {
    let mut stream = hub
        .placements()
        .watch_placements(WatchPlacementsRequest {
            namespace: namespace.unwrap_or_default(),
            name: String::new(),
        })
        .await
        .map_err(status)?
        .into_inner();
    if fmt == Format::Table {
        let mut header = vec!["EVENT", "NAMESPACE"];
        header.extend(pout::PLACEMENT_COLUMNS);
        header.push("DECISIONS");
        print!("{}", output::table(&header, &[]));
    }
    while let Some(ev) = stream.message().await.map_err(status)? {
        let kind = flotilla_api::v1::EventType::try_from(ev.r#type)
            .map(|t| {
                t.as_str_name()
                    .trim_start_matches("EVENT_TYPE_")
                    .to_string()
            })
            .unwrap_or_default();
        let Some(p) = ev.placement else { continue };
        match fmt {
            Format::Table => {
                let clusters: Vec<String> = ev
                    .decisions
                    .iter()
                    .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
                    .map(|c| c.cluster_name.clone())
                    .collect();
                let mut row = vec![
                    kind,
                    p.metadata
                        .as_ref()
                        .map(|m| m.namespace.clone())
                        .unwrap_or_default(),
                ];
                row.extend(pout::placement_row(&p));
                row.push(clusters.join(","));
                println!("{}", row.join("   "));
            }
            f => {
                let text = output::structured(f, vec![ocm::Placement::from(&p)], true)
                    .map_err(|e| anyhow!(e))?;
                if f == Format::Yaml {
                    println!("---");
                }
                print!("{text}");
            }
        }
    }
    Ok(())
}

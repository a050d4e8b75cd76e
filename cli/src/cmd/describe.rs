//! `describe`: one cluster, work, placement, replica set or policy in detail, or alone in its OCM shape with `-o`.

use super::print;
use crate::hub::Hub;
use crate::kind::{Kind, cluster, placement, work};
use crate::output::{self, Format};
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{GetClusterRequest, GetWorkRequest, PlacementRef};
use serde::Serialize;

/// What `describe` shows.
#[derive(Subcommand, Debug)]
pub enum DescribeWhat {
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
    /// A ManifestWorkReplicaSet: placements and strategies, rollout progress, conditions.
    #[command(alias = "manifestworkreplicaset", alias = "mwrs")]
    Replicaset {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A Policy: its templates, bindings, and per decided cluster its compliance and the newest
    /// messages of each template.
    #[command(alias = "plc")]
    Policy {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A ManagedServiceAccount: rotation, its token's expiry (as its cluster answered) and
    /// conditions.
    #[command(alias = "managedserviceaccounts")]
    Managedserviceaccount {
        /// Name.
        name: String,
        /// Cluster (the account's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
    /// A ClusterImportPolicy: source, expressions, counts, conditions and evaluation errors.
    #[command(alias = "importpolicies", alias = "clusterimportpolicy")]
    Importpolicy {
        /// Name.
        name: String,
    },
    /// A GitRepo: the commit delivered and the last fetched, a pin or pause, conditions (a
    /// refused commit says what and where), bundles with their replica sets, their clusters'
    /// states and the clusters not Ready.
    #[command(alias = "gitrepos")]
    Gitrepo {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A MirrorPeer: peers, ODF's phase, every exchange and the conditions.
    #[command(alias = "mirrorpeers")]
    Mirrorpeer {
        /// Name.
        name: String,
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

/// Runs `describe`.
pub async fn run(hub: &Hub, format: Format, what: DescribeWhat) -> Result<()> {
    match what {
        DescribeWhat::Cluster { name } => {
            let r = GetClusterRequest { name };
            let c = hub
                .idempotent(async || hub.clusters().get_cluster(r.clone()).await)
                .await?;
            show(format, || cluster::describe(&c), c.to_ocm())
        }
        DescribeWhat::Work { name, cluster } => {
            let r = GetWorkRequest { cluster, name };
            let w = hub
                .idempotent(async || hub.works().get_work(r.clone()).await)
                .await?;
            show(format, || work::describe(&w), w.to_ocm())
        }
        DescribeWhat::Placement { name, namespace } => {
            describe_placement(hub, format, PlacementRef { namespace, name }).await
        }
        DescribeWhat::Policy { name, namespace } => {
            describe_policy(hub, format, namespace, name).await
        }
        DescribeWhat::Managedserviceaccount { name, cluster } => {
            let r = flotilla_api::v1::GetManagedServiceAccountRequest {
                namespace: cluster,
                name,
            };
            let m = hub
                .idempotent(async || {
                    hub.service_accounts()
                        .get_managed_service_account(r.clone())
                        .await
                })
                .await?;
            show(
                format,
                || crate::kind::serviceaccount::describe(&m),
                m.to_ocm(),
            )
        }
        DescribeWhat::Importpolicy { name } => {
            let r = flotilla_api::v1::GetImportPolicyRequest { name };
            let p = hub
                .idempotent(async || hub.import_policies().get_import_policy(r.clone()).await)
                .await?;
            show(
                format,
                || crate::kind::importpolicy::describe(&p),
                p.to_ocm(),
            )
        }
        DescribeWhat::Gitrepo { name, namespace } => {
            let r = flotilla_api::v1::GetGitRepoRequest {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            let g = hub
                .idempotent(async || hub.git_repos().get_git_repo(r.clone()).await)
                .await?;
            let rows = crate::kind::gitrepo::cluster_rows(hub, &namespace, &name, "").await?;
            show(
                format,
                || crate::kind::gitrepo::describe(&g, &rows.rows),
                g.to_ocm(),
            )
        }
        DescribeWhat::Mirrorpeer { name } => {
            let r = flotilla_api::v1::GetMirrorPeerRequest { name };
            let p = hub
                .idempotent(async || hub.mirror_peers().get_mirror_peer(r.clone()).await)
                .await?;
            show(format, || crate::kind::mirrorpeer::describe(&p), p.to_ocm())
        }
        DescribeWhat::Replicaset { name, namespace } => {
            let r = flotilla_api::v1::GetReplicaSetRequest { namespace, name };
            let rs = hub
                .idempotent(async || hub.replica_sets().get_replica_set(r.clone()).await)
                .await?;
            let ocm = flotilla_api::ocm::ManifestWorkReplicaSet::from(&rs);
            show(format, || describe_replica_set(&rs), ocm)
        }
    }
}

/// A placement: the text shows its decisions, the structured form its status.
async fn describe_placement(hub: &Hub, format: Format, r: PlacementRef) -> Result<()> {
    let debug = hub
        .idempotent(async || hub.placements().debug_placement(r.clone()).await)
        .await?;
    if !format.is_table() {
        return show(format, String::new, placement::described(&debug));
    }
    let decisions = hub
        .idempotent(async || hub.placements().list_decisions(r.clone()).await)
        .await?
        .items;
    print(Ok(placement::describe(&debug, &decisions)))
}

/// A policy and its per-cluster rows, which the hub pages (1,000 a page: a policy on 10,000
/// clusters has ~10 MB of them).
async fn describe_policy(hub: &Hub, format: Format, namespace: String, name: String) -> Result<()> {
    let get = flotilla_api::v1::GetPolicyRequest {
        namespace,
        name,
        ..Default::default()
    };
    let p = hub
        .idempotent(async || hub.policies().get_policy(get.clone()).await)
        .await?;
    let clusters = crate::pager::all(|page_token| {
        let r = flotilla_api::v1::GetPolicyRequest {
            page_token,
            ..get.clone()
        };
        async move {
            hub.idempotent(async || hub.policies().get_policy_details(r.clone()).await)
                .await
        }
    })
    .await?;
    show(
        format,
        || crate::kind::policy::describe(&p, &clusters),
        p.to_ocm(),
    )
}

/// The human description of a replica set.
fn describe_replica_set(rs: &flotilla_api::v1::ManifestWorkReplicaSet) -> String {
    let m = rs.metadata.clone().unwrap_or_default();
    let spec = rs.spec.clone().unwrap_or_default();
    let manifests = spec
        .manifest_work_template
        .as_ref()
        .and_then(|t| t.workload.as_ref())
        .map_or(0, |w| w.manifests.len());
    let mut out = format!(
        "Name:         {}\nNamespace:    {}\nGeneration:   {}\nManifests:    {manifests}\nCascade:      {}\n",
        m.name,
        m.namespace,
        m.generation,
        if spec.cascade_deletion_policy.is_empty() {
            "Background"
        } else {
            &spec.cascade_deletion_policy
        }
    );
    if rs.hub.as_ref().is_some_and(|h| h.paused) {
        out.push_str("Paused:       yes (flotilla rollout resume)\n");
    }
    out.push_str("Placements:\n");
    for p in &spec.placement_refs {
        let strategy = p.rollout_strategy.clone().unwrap_or_default();
        let kind = if strategy.r#type.is_empty() {
            "All".to_string()
        } else {
            strategy.r#type.clone()
        };
        let config = strategy
            .progressive
            .or(strategy.progressive_per_group)
            .or(strategy.all)
            .unwrap_or_default();
        let mut settings = Vec::new();
        for (k, v) in [
            ("maxConcurrency", &config.max_concurrency),
            ("maxFailures", &config.max_failures),
            ("minSuccessTime", &config.min_success_time),
            ("progressDeadline", &config.progress_deadline),
        ] {
            if !v.is_empty() {
                settings.push(format!("{k}={v}"));
            }
        }
        for g in &config.mandatory_decision_groups {
            settings.push(if g.group_name.is_empty() {
                format!("mandatory group index {}", g.group_index)
            } else {
                format!("mandatory group {:?}", g.group_name)
            });
        }
        out.push_str(&format!(
            "  {:<20} {kind} {}\n",
            p.name,
            settings.join(", ")
        ));
    }
    out.push_str("Rollout:\n");
    let (progress, _) = super::rollout::render(rs);
    for l in progress.lines() {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("Conditions:\n");
    for c in rs.status.iter().flat_map(|s| s.conditions.iter()) {
        out.push_str(&format!(
            "  {:<22} {:<6} {:<26} {}\n",
            c.r#type, c.status, c.reason, c.message
        ));
    }
    out
}

/// Prints one object: its human description for a table, else its structured form alone.
fn show<O: Serialize>(format: Format, text: impl FnOnce() -> String, object: O) -> Result<()> {
    match format {
        Format::Table | Format::Wide => print(Ok(text())),
        f => print(output::structured(f, vec![object], true)),
    }
}

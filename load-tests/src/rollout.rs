//! `flotilla-load rollout`: C simulated clusters join a hub (auto-accept), a placement splits
//! them into decision groups, and one ManifestWorkReplicaSet rolls a ConfigMap out group by
//! group (ProgressivePerGroup). Reports the time to each group's completion, the total, and the
//! hub's CPU and peak RSS during the rollout.

use anyhow::{Context, Result, bail};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::GetReplicaSetRequest;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient;
use flotilla_sim::{Fleet, FleetConfig};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Settings of the scenario.
pub struct Settings {
    /// NATS URL.
    pub nats_url: String,
    /// Hub gRPC endpoint (the hub runs with --auto-accept).
    pub hub: String,
    /// Hub PID, for its CPU and RSS.
    pub hub_pid: Option<u32>,
    /// Clusters.
    pub clusters: usize,
    /// Decision groups (clustersPerDecisionGroup = 100 / groups %).
    pub groups: usize,
    /// Give up after this long.
    pub timeout: Duration,
}

/// What the scenario measured.
#[derive(Serialize)]
pub struct Summary {
    scenario: &'static str,
    clusters: usize,
    groups: usize,
    register_seconds: f64,
    /// Seconds from the apply to each group's last cluster Available (cumulative).
    group_done_seconds: Vec<f64>,
    rollout_seconds: f64,
    hub_cpu_seconds_during_rollout: Option<f64>,
    hub_rss_bytes: Option<u64>,
}

fn documents(groups: usize) -> String {
    let percent = 100 / groups.max(1);
    let yaml = format!(
        r#"apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {{name: default, namespace: default}}
spec: {{clusterSet: default}}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {{name: rollout, namespace: default}}
spec:
  clusterSets: [default]
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: "{percent}%"
---
apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {{name: rollout, namespace: default}}
spec:
  placementRefs:
    - name: rollout
      rolloutStrategy:
        type: ProgressivePerGroup
        progressivePerGroup:
          maxFailures: 5%
  manifestWorkTemplate:
    workload:
      manifests:
        - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: rollout, namespace: default}}, data: {{version: "1"}}}}
"#
    );
    yaml
}

/// Starts `clusters` simulated clusters named `<prefix>-…` (workloads ready after 200 ms, no
/// scores) and waits until the hub has them all Available.
pub async fn start_fleet(
    channel: &tonic::transport::Channel,
    nats_url: &str,
    clusters: usize,
    prefix: &str,
    deadline: Instant,
) -> Result<Fleet> {
    let mut api = ClusterServiceClient::new(channel.clone());
    let mut config = FleetConfig::new(nats_url, clusters);
    config.name_prefix = prefix.into();
    config.start_rate = 1000;
    config.pending_poll = Duration::from_secs(2);
    config.work_status_interval = Duration::from_millis(500);
    config.ready_delay = Duration::from_millis(200);
    config.scores = None;
    let fleet = Fleet::start(&config).await?;
    while crate::count_available(&mut api, &format!("{prefix}-")).await? < clusters {
        if Instant::now() > deadline {
            fleet.stop().await;
            bail!("the clusters did not all become Available");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(fleet)
}

/// Applies every document of `yaml` through the hub's API (the kinds the scenarios use).
pub async fn apply(channel: &tonic::transport::Channel, yaml: &str) -> Result<()> {
    for d in parse_documents(yaml) {
        match d.context("the scenario's documents parse")? {
            Document::Binding(b) => {
                ClusterSetServiceClient::new(channel.clone())
                    .apply_binding(b)
                    .await?;
            }
            Document::Placement(p) => {
                PlacementServiceClient::new(channel.clone())
                    .apply_placement(p)
                    .await?;
            }
            Document::AddOnTemplate(t) => {
                flotilla_api::v1::add_on_service_client::AddOnServiceClient::new(channel.clone())
                    .apply_add_on_template(t)
                    .await?;
            }
            Document::AddOnDeploymentConfig(c) => {
                flotilla_api::v1::add_on_service_client::AddOnServiceClient::new(channel.clone())
                    .apply_add_on_deployment_config(c)
                    .await?;
            }
            Document::ClusterManagementAddOn(c) => {
                flotilla_api::v1::add_on_service_client::AddOnServiceClient::new(channel.clone())
                    .apply_cluster_management_add_on(c)
                    .await?;
            }
            Document::ReplicaSet(r) => {
                ReplicaSetServiceClient::new(channel.clone())
                    .apply_replica_set(r)
                    .await?;
            }
            other => bail!("unexpected document {other:?}"),
        }
    }
    Ok(())
}

/// Runs the scenario.
pub async fn run(s: Settings) -> Result<Summary> {
    let channel = tonic::transport::Endpoint::from_shared(s.hub.clone())?
        .connect()
        .await
        .with_context(|| format!("connecting to the hub at {}", s.hub))?;
    let t0 = Instant::now();
    let deadline = t0 + s.timeout;
    let fleet = start_fleet(&channel, &s.nats_url, s.clusters, "roll", deadline).await?;
    let register = t0.elapsed();
    let cpu0 = s.hub_pid.and_then(crate::report::proc_stats);
    let t1 = Instant::now();
    apply(&channel, &documents(s.groups)).await?;
    let mut rs_api = ReplicaSetServiceClient::new(channel.clone());
    let per_group = s.clusters.div_ceil(s.groups.max(1));
    let mut group_done = Vec::new();
    loop {
        let rs = rs_api
            .get_replica_set(GetReplicaSetRequest {
                namespace: "default".into(),
                name: "rollout".into(),
            })
            .await?
            .into_inner();
        let available = rs
            .status
            .and_then(|st| st.summary)
            .map(|s| s.available as usize)
            .unwrap_or(0);
        while group_done.len() < s.groups
            && available >= (per_group * (group_done.len() + 1)).min(s.clusters)
        {
            group_done.push(t1.elapsed().as_secs_f64());
        }
        if available >= s.clusters {
            break;
        }
        if Instant::now() > deadline {
            fleet.stop().await;
            bail!("only {available} of {} clusters rolled out", s.clusters);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rollout = t1.elapsed();
    let cpu1 = s.hub_pid.and_then(crate::report::proc_stats);
    fleet.stop().await;
    Ok(Summary {
        scenario: "rollout",
        clusters: s.clusters,
        groups: s.groups,
        register_seconds: register.as_secs_f64(),
        group_done_seconds: group_done,
        rollout_seconds: rollout.as_secs_f64(),
        hub_cpu_seconds_during_rollout: cpu0.zip(cpu1).map(|((a, _), (b, _))| b - a),
        hub_rss_bytes: cpu1.map(|(_, rss)| rss),
    })
}

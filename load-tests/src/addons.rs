//! `flotilla-load addons`: C simulated clusters join a hub (auto-accept), one add-on is
//! installed by placement on all of them (rollout `All`), then its AddOnDeploymentConfig
//! changes and the new config rolls out progressively (`maxConcurrency`). Reports the time to
//! install everywhere, the time to upgrade everywhere, and the hub's CPU and RSS.

use anyhow::{Context, Result, bail};
use flotilla_api::v1::GetAddOnRequest;
use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
use serde::Serialize;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

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
    /// `maxConcurrency` of the upgrade (`10%`, `500`).
    pub max_concurrency: String,
    /// Give up after this long.
    pub timeout: Duration,
}

/// What the scenario measured.
#[derive(Serialize)]
pub struct Summary {
    scenario: &'static str,
    clusters: usize,
    max_concurrency: String,
    register_seconds: f64,
    /// From the add-on's apply to every cluster's add-on work applied and available.
    install_seconds: f64,
    hub_cpu_seconds_during_install: Option<f64>,
    /// From the config change to every cluster at the new config.
    upgrade_seconds: f64,
    hub_cpu_seconds_during_upgrade: Option<f64>,
    hub_rss_bytes: Option<u64>,
}

const SETUP: &str = r#"apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: default, namespace: default}
spec: {clusterSet: default}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: fleet, namespace: default}
spec:
  clusterSets: [default]
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {name: load-probe}
spec:
  addonName: load-probe
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: load-probe, namespace: default}
          data: {cluster: "{{CLUSTER_NAME}}", version: "{{VERSION}}"}
"#;

fn deployment_config(version: u32) -> String {
    format!(
        r#"apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnDeploymentConfig
metadata: {{name: load-probe, namespace: default}}
spec:
  customizedVariables: [{{name: VERSION, value: "{version}"}}]
"#
    )
}

fn addon(max_concurrency: &str) -> String {
    format!(
        r#"apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {{name: load-probe}}
spec:
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {{name: load-probe}}
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
      defaultConfig: {{name: load-probe, namespace: default}}
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: fleet
        rolloutStrategy:
          type: Progressive
          progressive: {{maxConcurrency: "{max_concurrency}"}}
"#
    )
}

/// The spec hash of the add-on's default deployment config as its status shows it.
fn config_hash(cma: &flotilla_api::v1::ClusterManagementAddOn) -> String {
    cma.status
        .iter()
        .flat_map(|s| s.default_config_references.iter())
        .find(|r| r.resource == flotilla_api::addon::DEPLOYMENT_CONFIGS)
        .and_then(|r| r.desired_config.as_ref())
        .map(|c| c.spec_hash.clone())
        .unwrap_or_default()
}

/// Waits until the add-on's progression counts every cluster at the current configs, with a
/// status computed after the config's hash moved off `before`.
async fn wait_updated(
    channel: &Channel,
    clusters: usize,
    deadline: Instant,
    what: &str,
    before: &str,
) -> Result<String> {
    let mut api = AddOnServiceClient::new(channel.clone());
    loop {
        let cma = api
            .get_cluster_management_add_on(GetAddOnRequest {
                namespace: String::new(),
                name: "load-probe".into(),
            })
            .await?
            .into_inner();
        let hash = config_hash(&cma);
        let p = cma
            .status
            .and_then(|s| s.install_progressions.into_iter().next())
            .unwrap_or_default();
        let last = p.updated as usize;
        if hash != before && p.total as usize == clusters && last == clusters {
            return Ok(hash);
        }
        if Instant::now() > deadline {
            bail!("{what}: only {last} of {clusters} clusters done");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs the scenario.
pub async fn run(s: Settings) -> Result<Summary> {
    let channel = tonic::transport::Endpoint::from_shared(s.hub.clone())?
        .connect()
        .await
        .with_context(|| format!("connecting to the hub at {}", s.hub))?;
    let t0 = Instant::now();
    let deadline = t0 + s.timeout;
    let fleet =
        crate::rollout::start_fleet(&channel, &s.nats_url, s.clusters, "addon", deadline).await?;
    let register = t0.elapsed();

    let cpu0 = s.hub_pid.and_then(crate::report::proc_stats);
    let t1 = Instant::now();
    crate::rollout::apply(&channel, SETUP).await?;
    crate::rollout::apply(&channel, &deployment_config(1)).await?;
    crate::rollout::apply(&channel, &addon("100%")).await?;
    let installed = wait_updated(&channel, s.clusters, deadline, "install", "").await;
    let install = t1.elapsed();
    let cpu1 = s.hub_pid.and_then(crate::report::proc_stats);
    let hash = match installed {
        Ok(h) => h,
        Err(e) => {
            fleet.stop().await;
            return Err(e);
        }
    };

    // The upgrade: the rollout's concurrency, then the config change.
    crate::rollout::apply(&channel, &addon(&s.max_concurrency)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t2 = Instant::now();
    crate::rollout::apply(&channel, &deployment_config(2)).await?;
    let upgraded = wait_updated(&channel, s.clusters, deadline, "upgrade", &hash).await;
    let upgrade = t2.elapsed();
    let cpu2 = s.hub_pid.and_then(crate::report::proc_stats);
    fleet.stop().await;
    upgraded?;
    Ok(Summary {
        scenario: "addons",
        clusters: s.clusters,
        max_concurrency: s.max_concurrency,
        register_seconds: register.as_secs_f64(),
        install_seconds: install.as_secs_f64(),
        hub_cpu_seconds_during_install: cpu0.zip(cpu1).map(|((a, _), (b, _))| b - a),
        upgrade_seconds: upgrade.as_secs_f64(),
        hub_cpu_seconds_during_upgrade: cpu1.zip(cpu2).map(|((a, _), (b, _))| b - a),
        hub_rss_bytes: cpu2.map(|(_, rss)| rss),
    })
}

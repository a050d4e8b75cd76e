//! `policy`: once the fleet is Available, policy-collection's namespace policy (inform) bound to
//! every cluster through a Placement; measured until every cluster has reported and the root
//! status lists them all (NonCompliant). Then the same policy enforced; measured until every
//! cluster reports Compliant (each agent created the namespace). Per-cluster latency is when
//! the hub's status first showed the cluster's report, sampled every 100 ms.
//!
//! `--templated`: the policy carries hub templates (a value per cluster from the hub ConfigMap
//! `fleet-values`, the cluster's name) and a managed-cluster template (`fromClusterClaim
//! "id.k8s.io"`), so the hub resolves a copy per cluster and every agent resolves its own part.
//! After the enforce phase every cluster's value changes in the ConfigMap: measured until every
//! cluster has reported Compliant at a newer generation (the fleet re-resolved, re-sent and
//! re-enforced).

use super::Run;
use crate::report::{Phase, Summary};
use anyhow::{Context, Result, bail};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::{GetPolicyRequest, ObjectMeta, Policy};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const NAMESPACE: &str = "default";
const NAME: &str = "policy-namespace";

/// The placement and binding of the policy (every cluster of the default set).
const SETUP: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: all, namespace: default}
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-policy-namespace, namespace: default}
placementRef: {name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}
subjects:
  - {name: policy-namespace, kind: Policy, apiGroup: policy.open-cluster-management.io}
"#;

/// policy-collection's stable/CM-Configuration-Management/policy-namespace.yaml
/// (open-cluster-management-io/policy-collection, Apache-2.0).
const POLICY: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: policy-namespace
  namespace: default
spec:
  remediationAction: REMEDIATION
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: policy-namespace-example
        spec:
          remediationAction: inform
          severity: low
          object-templates:
            - complianceType: musthave
              objectDefinition:
                kind: Namespace
                apiVersion: v1
                metadata:
                  name: prod
"#;

/// The templated policy (same name, so the binding holds): hub templates per cluster and a
/// managed-cluster template.
const TEMPLATED: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: policy-namespace
  namespace: default
spec:
  remediationAction: REMEDIATION
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: fleet-values
        spec:
          remediationAction: inform
          severity: low
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: fleet-values
                  namespace: default
                data:
                  value: '{{hub fromConfigMap "" "fleet-values" .ManagedClusterName hub}}'
                  cluster: '{{hub .ManagedClusterName hub}}'
                  id: '{{ fromClusterClaim "id.k8s.io" }}'
"#;

fn policy(remediation: &str, templated: bool) -> Result<Policy> {
    let text = if templated { TEMPLATED } else { POLICY };
    match parse_documents(&text.replace("REMEDIATION", remediation)).remove(0) {
        Ok(Document::Policy(p)) => Ok(p),
        other => bail!("the policy fixture: {other:?}"),
    }
}

async fn setup(channel: &Channel) -> Result<()> {
    super::bind_default_set(channel, NAMESPACE).await?;
    for d in parse_documents(SETUP) {
        match d.context("the setup fixture")? {
            Document::Placement(p) => {
                PlacementServiceClient::new(channel.clone())
                    .apply_placement(p)
                    .await
                    .context("the placement")?;
            }
            Document::PlacementBinding(b) => {
                PolicyServiceClient::new(channel.clone())
                    .apply_placement_binding(b)
                    .await
                    .context("the binding")?;
            }
            other => bail!("unexpected setup document {other:?}"),
        }
    }
    Ok(())
}

/// Polls the root status until `done` holds for `want` clusters; returns per-cluster latencies
/// (ms from `t0`) of the first time each satisfied `reported`.
async fn follow(
    api: &mut PolicyServiceClient<Channel>,
    want: usize,
    t0: Instant,
    deadline: Instant,
    reported: impl Fn(&str) -> bool,
    done: impl Fn(&Policy) -> bool,
) -> Result<(Vec<f64>, bool, Policy)> {
    let mut first: HashMap<String, f64> = HashMap::new();
    loop {
        let p = api
            .get_policy(GetPolicyRequest {
                namespace: NAMESPACE.into(),
                name: NAME.into(),
                ..Default::default()
            })
            .await
            .context("reading the policy")?
            .into_inner();
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        for c in p.status.iter().flat_map(|s| s.status.iter()) {
            if reported(&c.compliant) {
                first.entry(c.cluster_name.clone()).or_insert(ms);
            }
        }
        if first.len() >= want && done(&p) {
            let mut l: Vec<f64> = first.into_values().collect();
            l.sort_by(f64::total_cmp);
            return Ok((l, true, p));
        }
        if Instant::now() >= deadline {
            let mut l: Vec<f64> = first.into_values().collect();
            l.sort_by(f64::total_cmp);
            return Ok((l, false, p));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The hub ConfigMap the templated policy reads: one key per cluster.
fn fleet_values(run: &Run, round: u32) -> flotilla_api::v1::HubConfigMap {
    flotilla_api::v1::HubConfigMap {
        metadata: Some(ObjectMeta {
            name: "fleet-values".into(),
            namespace: NAMESPACE.into(),
            ..Default::default()
        }),
        data: (0..run.fleet.clusters)
            .map(|n| (run.fleet.name(n), format!("v{round}-{n}")))
            .collect(),
        immutable: false,
    }
}

/// Every cluster's generation it last reported, and whether it reported Compliant there.
async fn reported_generations(
    api: &mut PolicyServiceClient<Channel>,
) -> Result<HashMap<String, (i64, bool)>> {
    let mut seen = HashMap::new();
    let mut request = GetPolicyRequest {
        namespace: NAMESPACE.into(),
        name: NAME.into(),
        ..Default::default()
    };
    loop {
        let d = api
            .get_policy_details(request.clone())
            .await
            .context("reading the policy's details")?
            .into_inner();
        seen.extend(d.clusters.into_iter().map(|r| {
            let compliant = r.compliant == "Compliant";
            (r.cluster_name, (r.observed_generation, compliant))
        }));
        if d.next_page_token.is_empty() {
            return Ok(seen);
        }
        request.page_token = d.next_page_token;
    }
}

/// Every cluster's value changed in the hub ConfigMap: measured until each has reported
/// Compliant above the generation it held (latencies from the change, sampled every 200 ms).
async fn input_changed(
    run: &Run,
    api: &mut PolicyServiceClient<Channel>,
    summary: &mut Summary,
) -> Result<()> {
    let before = reported_generations(api).await?;
    let phase = Phase::begin(&run.topology).await;
    let t0 = Instant::now();
    api.apply_hub_config_map(fleet_values(run, 2))
        .await
        .context("changing the hub ConfigMap")?;
    let mut first: HashMap<String, f64> = HashMap::new();
    let deadline = run.deadline();
    while first.len() < run.fleet.clusters && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        for (cluster, (generation, compliant)) in reported_generations(api).await? {
            let was = before.get(&cluster).map_or(0, |(g, _)| *g);
            if compliant && generation > was {
                first.entry(cluster).or_insert(ms);
            }
        }
    }
    let mut changed = Summary::new("policy", run.fleet.clusters);
    changed.clusters_converged = Some(first.len());
    phase.end(&run.topology, &mut changed).await;
    let mut l: Vec<f64> = first.into_values().collect();
    l.sort_by(f64::total_cmp);
    changed.latencies(&l);
    summary.set("input_change_seconds", changed.seconds);
    summary.set("input_change_p50_ms", changed.p50_ms);
    summary.set("input_change_p99_ms", changed.p99_ms);
    summary.set("input_change_reenforced", l.len());
    summary.set("input_change_hub_cpu_seconds", changed.hub_cpu_seconds);
    summary.errors += (run.fleet.clusters - l.len().min(run.fleet.clusters)) as u64;
    Ok(())
}

/// Runs the scenario (`templated`: the policy with hub and managed-cluster templates).
pub async fn run(mut run: Run, templated: bool) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("policy", run.fleet.clusters);
    let (fleet, _clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    let channel = run.channel()?;
    setup(&channel).await?;
    let mut api = PolicyServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let want = run.fleet.clusters;
    if templated {
        api.apply_hub_config_map(fleet_values(&run, 1))
            .await
            .context("applying the hub ConfigMap")?;
    }

    // Inform: every cluster reports NonCompliant.
    let phase = Phase::begin(&run.topology).await;
    let t0 = Instant::now();
    api.apply_policy(policy("inform", templated)?)
        .await
        .context("applying the inform policy")?;
    let (latencies, informed, p) = follow(
        &mut api,
        want,
        t0,
        run.deadline(),
        |c| !c.is_empty(),
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.compliant == "NonCompliant")
        },
    )
    .await?;
    let reported = latencies.len();
    summary.clusters_converged = Some(reported);
    phase.end(&run.topology, &mut summary).await;
    summary.latencies(&latencies);
    summary.set("inform_reported", reported);
    if !informed {
        summary.errors += (want - reported.min(want)) as u64;
        summary.set(
            "inform_root",
            p.status.map(|s| s.compliant).unwrap_or_default(),
        );
    }

    // Enforce: every cluster creates the namespace and reports Compliant.
    let mut enforce = Summary::new("policy", want);
    let phase = Phase::begin(&run.topology).await;
    let t0 = Instant::now();
    api.apply_policy(policy("enforce", templated)?)
        .await
        .context("applying the enforce policy")?;
    let (latencies, enforced, _) = follow(
        &mut api,
        want,
        t0,
        run.deadline(),
        |c| c == "Compliant",
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.compliant == "Compliant")
        },
    )
    .await?;
    enforce.clusters_converged = Some(latencies.len());
    phase.end(&run.topology, &mut enforce).await;
    enforce.latencies(&latencies);
    summary.set("enforce_seconds", enforce.seconds);
    summary.set("enforce_p50_ms", enforce.p50_ms);
    summary.set("enforce_p99_ms", enforce.p99_ms);
    summary.set("enforce_compliant", latencies.len());
    summary.set("enforce_hub_cpu_seconds", enforce.hub_cpu_seconds);
    summary.set(
        "enforce_cpu_control_plane_s",
        enforce.cpu.cpu_control_plane_s,
    );
    summary.set(
        "enforce_cpu_control_plane_ms_per_cluster",
        enforce.cpu.cpu_control_plane_ms_per_cluster,
    );
    if !enforced {
        summary.errors += (want - latencies.len().min(want)) as u64;
    }
    if templated && enforced {
        input_changed(&run, &mut api, &mut summary).await?;
    }
    summary.converged = informed && enforced && summary.errors == 0;
    run.record_hub_rss_per_cluster(&mut summary);
    fleet.stop().await;
    Ok((summary, run))
}

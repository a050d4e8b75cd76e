//! One document applied: the hub's call for its kind, and the line saying what the hub made of
//! it (kubectl's `<resource>.<group>/<name> applied`, with what matters of the answer).

use super::work_line;
use crate::hub::Hub;
use anyhow::Result;
use flotilla_api::meta::find_condition;
use flotilla_api::ocm::Document;
use flotilla_api::v1;

/// Applies one document; the line says what the hub made of it. `force`: a replica set or a
/// Placement a GitRepo writes is written all the same.
pub(super) async fn apply(hub: &Hub, doc: Document, force: bool) -> Result<String> {
    match doc {
        Document::ClusterSet(x) => cluster_set(hub, x).await,
        Document::Work(x) => work(hub, x).await,
        Document::Placement(x) => placement(hub, x, force).await,
        Document::Score(x) => score(hub, x).await,
        Document::ReplicaSet(x) => replica_set(hub, x, force).await,
        Document::Cluster(x) => cluster(hub, x).await,
        Document::Binding(x) => binding(hub, x).await,
        Document::ClusterManagementAddOn(x) => cluster_management_add_on(hub, x).await,
        Document::ManagedClusterAddOn(x) => managed_cluster_add_on(hub, x).await,
        Document::AddOnTemplate(x) => add_on_template(hub, x).await,
        Document::AddOnDeploymentConfig(x) => add_on_deployment_config(hub, x).await,
        Document::Policy(x) => policy(hub, x).await,
        Document::PlacementBinding(x) => placement_binding(hub, x).await,
        Document::PolicySet(x) => policy_set(hub, x).await,
        Document::PlacementRule(x) => placement_rule(hub, x).await,
        Document::ManagedServiceAccount(x) => managed_service_account(hub, x).await,
        Document::ImportPolicy(x) => import_policy(hub, x).await,
        Document::MirrorPeer(x) => mirror_peer(hub, x).await,
        Document::HubConfigMap(x) => hub_config_map(hub, x).await,
        Document::HubSecret(x) => hub_secret(hub, x).await,
        Document::GitRepo(x) => git_repo(hub, x).await,
    }
}

/// Applies a GitRepo (a spec change fetches at once).
async fn git_repo(hub: &Hub, r: v1::GitRepo) -> Result<String> {
    let m = r.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || hub.git_repos().apply_git_repo(r.clone()).await)
        .await?;
    let generation = applied.metadata.map_or(0, |m| m.generation);
    Ok(format!(
        "gitrepo.apps.flotilla.io/{} applied (namespace {}, generation {generation})",
        m.name, m.namespace
    ))
}

/// Applies a ConfigMap to the hub (an input of hub templates).
async fn hub_config_map(hub: &Hub, c: v1::HubConfigMap) -> Result<String> {
    let m = c.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.policies().apply_hub_config_map(c.clone()).await)
        .await?;
    Ok(format!(
        "configmap/{} applied to the hub (namespace {}, {} keys)",
        m.name,
        m.namespace,
        c.data.len()
    ))
}

/// Applies a Secret to the hub (sealed there; its values are never shown again).
async fn hub_secret(hub: &Hub, s: v1::HubSecret) -> Result<String> {
    let m = s.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || hub.policies().apply_hub_secret(s.clone()).await)
        .await?;
    Ok(format!(
        "secret/{} applied to the hub (namespace {}, keys: {}; sealed)",
        m.name,
        m.namespace,
        applied.keys.join(", ")
    ))
}

/// Applies a ManagedClusterSet.
async fn cluster_set(hub: &Hub, s: v1::ManagedClusterSet) -> Result<String> {
    let name = s
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    hub.idempotent(async || hub.sets().apply_cluster_set(s.clone()).await)
        .await?;
    Ok(format!(
        "managedclusterset.cluster.open-cluster-management.io/{name} applied"
    ))
}

/// Applies a ManifestWork.
async fn work(hub: &Hub, w: v1::ManifestWork) -> Result<String> {
    let m = w.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || hub.works().apply_work(w.clone()).await)
        .await?;
    Ok(work_line(&m, applied.metadata.map_or(0, |m| m.generation)))
}

/// Applies a Placement (`force`: even one a GitRepo writes for an inline target).
async fn placement(hub: &Hub, p: v1::Placement, force: bool) -> Result<String> {
    let m = p.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || {
            hub.placements()
                .apply_placement(super::forced(p.clone(), force))
                .await
        })
        .await?;
    let st = applied.status.unwrap_or_default();
    let mut line = format!(
        "placement.cluster.open-cluster-management.io/{} applied (namespace {}, {} clusters selected)",
        m.name, m.namespace, st.number_of_selected_clusters
    );
    // Applied but not schedulable: the hub keeps it and says why in a condition.
    if let Some(c) =
        find_condition(&st.conditions, "PlacementMisconfigured").filter(|c| c.status == "True")
    {
        line.push_str(&format!("\nwarning: PlacementMisconfigured: {}", c.message));
    }
    Ok(line)
}

/// Applies an AddOnPlacementScore.
async fn score(hub: &Hub, sc: v1::AddOnPlacementScore) -> Result<String> {
    let m = sc.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.placements().apply_score(sc.clone()).await)
        .await?;
    Ok(format!(
        "addonplacementscore.cluster.open-cluster-management.io/{} applied (cluster {})",
        m.name, m.namespace
    ))
}

/// Applies a ManifestWorkReplicaSet (`force`: even one a GitRepo writes).
async fn replica_set(hub: &Hub, r: v1::ManifestWorkReplicaSet, force: bool) -> Result<String> {
    let m = r.metadata.clone().unwrap_or_default();
    hub.idempotent(async || {
        hub.replica_sets()
            .apply_replica_set(super::forced(r.clone(), force))
            .await
    })
    .await?;
    Ok(format!(
        "manifestworkreplicaset.work.open-cluster-management.io/{} applied (namespace {})",
        m.name, m.namespace
    ))
}

/// Applies a ManagedCluster.
async fn cluster(hub: &Hub, c: v1::ManagedCluster) -> Result<String> {
    let name = c
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    // Hub taints listed in the document are the hub's to set: it ignores them. Said
    // before sending, as kubectl prints a server's warnings.
    let taints = c
        .spec
        .as_ref()
        .map(|s| s.taints.as_slice())
        .unwrap_or_default();
    for warning in flotilla_api::taints::split_hub_taints(taints).1 {
        eprintln!("warning: managedcluster.cluster.open-cluster-management.io/{name}: {warning}");
    }
    let applied = hub
        .idempotent(async || hub.clusters().apply_cluster(c.clone()).await)
        .await?;
    let accepted = applied.spec.is_some_and(|s| s.hub_accepts_client);
    Ok(format!(
        "managedcluster.cluster.open-cluster-management.io/{name} applied ({})",
        if accepted {
            "accepted"
        } else {
            "waiting for acceptance"
        }
    ))
}

/// Applies a ManagedClusterSetBinding.
async fn binding(hub: &Hub, b: v1::ManagedClusterSetBinding) -> Result<String> {
    let m = b.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.sets().apply_binding(b.clone()).await)
        .await?;
    Ok(format!(
        "managedclustersetbinding.cluster.open-cluster-management.io/{} applied (namespace {})",
        m.name, m.namespace
    ))
}

/// Applies a ClusterManagementAddOn.
async fn cluster_management_add_on(hub: &Hub, a: v1::ClusterManagementAddOn) -> Result<String> {
    let m = a.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || {
            hub.addons()
                .apply_cluster_management_add_on(a.clone())
                .await
        })
        .await?;
    let strategy = applied
        .spec
        .and_then(|s| s.install_strategy)
        .unwrap_or_default();
    let how = match strategy.r#type.as_str() {
        "" | "Manual" => "install strategy Manual".to_string(),
        t => format!(
            "install strategy {t}: {}",
            strategy
                .placements
                .iter()
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Ok(format!(
        "clustermanagementaddon.addon.open-cluster-management.io/{} applied ({how})",
        m.name
    ))
}

/// Applies a ManagedClusterAddOn.
async fn managed_cluster_add_on(hub: &Hub, a: v1::ManagedClusterAddOn) -> Result<String> {
    let m = a.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.addons().apply_managed_cluster_add_on(a.clone()).await)
        .await?;
    Ok(format!(
        "managedclusteraddon.addon.open-cluster-management.io/{} applied (cluster {})",
        m.name, m.namespace
    ))
}

/// Applies an AddOnTemplate.
async fn add_on_template(hub: &Hub, t: v1::AddOnTemplate) -> Result<String> {
    let m = t.metadata.clone().unwrap_or_default();
    let addon = t
        .spec
        .as_ref()
        .map(|s| s.addon_name.clone())
        .unwrap_or_default();
    hub.idempotent(async || hub.addons().apply_add_on_template(t.clone()).await)
        .await?;
    Ok(format!(
        "addontemplate.addon.open-cluster-management.io/{} applied (add-on {addon})",
        m.name
    ))
}

/// Applies an AddOnDeploymentConfig.
async fn add_on_deployment_config(hub: &Hub, c: v1::AddOnDeploymentConfig) -> Result<String> {
    let m = c.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.addons().apply_add_on_deployment_config(c.clone()).await)
        .await?;
    Ok(format!(
        "addondeploymentconfig.addon.open-cluster-management.io/{} applied (namespace {})",
        m.name, m.namespace
    ))
}

/// Applies a Policy.
async fn policy(hub: &Hub, p: v1::Policy) -> Result<String> {
    let applied = hub
        .idempotent(async || hub.policies().apply_policy(p.clone()).await)
        .await?;
    let m = applied.metadata.unwrap_or_default();
    let remediation = applied
        .spec
        .map(|s| s.remediation_action)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "per template".into());
    Ok(format!(
        "policy.policy.open-cluster-management.io/{} applied (namespace {}, remediation {remediation})",
        m.name, m.namespace
    ))
}

/// Applies a PlacementBinding.
async fn placement_binding(hub: &Hub, b: v1::PlacementBinding) -> Result<String> {
    let m = b.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.policies().apply_placement_binding(b.clone()).await)
        .await?;
    Ok(format!(
        "placementbinding.policy.open-cluster-management.io/{} applied (namespace {})",
        m.name, m.namespace
    ))
}

/// Applies a PolicySet.
async fn policy_set(hub: &Hub, s: v1::PolicySet) -> Result<String> {
    let m = s.metadata.clone().unwrap_or_default();
    hub.idempotent(async || hub.policies().apply_policy_set(s.clone()).await)
        .await?;
    Ok(format!(
        "policyset.policy.open-cluster-management.io/{} applied (namespace {})",
        m.name, m.namespace
    ))
}

/// Applies a PlacementRule.
async fn placement_rule(hub: &Hub, r: v1::PlacementRule) -> Result<String> {
    let m = r.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || hub.policies().apply_placement_rule(r.clone()).await)
        .await?;
    let decided = applied.status.map_or(0, |s| s.decisions.len());
    Ok(format!(
        "placementrule.apps.open-cluster-management.io/{} applied (namespace {}, {decided} clusters decided)",
        m.name, m.namespace
    ))
}

/// Applies a ManagedServiceAccount.
async fn managed_service_account(hub: &Hub, a: v1::ManagedServiceAccount) -> Result<String> {
    let m = a.metadata.clone().unwrap_or_default();
    hub.idempotent(async || {
        hub.service_accounts()
            .apply_managed_service_account(a.clone())
            .await
    })
    .await?;
    Ok(format!(
        "managedserviceaccount.authentication.open-cluster-management.io/{} applied (cluster {})",
        m.name, m.namespace
    ))
}

/// Applies a ClusterImportPolicy.
async fn import_policy(hub: &Hub, p: v1::ClusterImportPolicy) -> Result<String> {
    let m = p.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || hub.import_policies().apply_import_policy(p.clone()).await)
        .await?;
    let generation = applied.metadata.map_or(0, |m| m.generation);
    Ok(format!(
        "clusterimportpolicy.cluster.flotilla.io/{} applied (generation {generation})",
        m.name
    ))
}

/// Applies a MirrorPeer.
async fn mirror_peer(hub: &Hub, p: v1::MirrorPeer) -> Result<String> {
    let m = p.metadata.clone().unwrap_or_default();
    let applied = hub
        .idempotent(async || hub.mirror_peers().apply_mirror_peer(p.clone()).await)
        .await?;
    let generation = applied.metadata.map_or(0, |m| m.generation);
    Ok(format!(
        "mirrorpeer.multicluster.odf.openshift.io/{} applied (generation {generation})",
        m.name
    ))
}

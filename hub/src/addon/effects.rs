//! What the add-on actors do to the world: the install namespace put in each add-on work,
//! the identities of a work's manifests (for conflicts between add-ons), the registrations shown
//! in the status, status writes and uninstalling (work, stored object, lease, credentials).

use super::{AddOnError, Deps, Store};
use crate::keys::ObjectRef;
use flotilla_api::addon;
use flotilla_api::v1::{AddOnTemplate, ManifestWork, RegistrationConfig, Subject};

/// Puts the install namespace first in the work (the agent applies in order), unless the
/// template has it, and keeps it when the work goes: other add-ons may run there (OCM's
/// registration agent creates it on the spoke and never deletes it).
pub fn ensure_namespace(work: &mut ManifestWork, namespace: &str) {
    let Some(spec) = work.spec.as_mut() else {
        return;
    };
    let workload = spec.workload.get_or_insert_with(Default::default);
    let has = workload.manifests.iter().any(|m| {
        serde_json::from_slice::<serde_json::Value>(&m.raw).is_ok_and(|v| {
            v["kind"] == "Namespace"
                && v["apiVersion"] == "v1"
                && v["metadata"]["name"] == namespace
        })
    });
    if !has {
        let ns = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace},
        });
        workload.manifests.insert(
            0,
            flotilla_api::v1::Manifest {
                raw: ns.to_string().into_bytes(),
            },
        );
    }
    let rule = flotilla_api::v1::OrphaningRule {
        group: String::new(),
        resource: "namespaces".into(),
        namespace: String::new(),
        name: namespace.to_string(),
    };
    let option = spec.delete_option.get_or_insert_with(Default::default);
    match option.propagation_policy.as_str() {
        "Orphan" => {}
        "" | "Foreground" => {
            option.propagation_policy = "SelectivelyOrphan".into();
            option.selectively_orphans = Some(flotilla_api::v1::SelectivelyOrphan {
                orphaning_rules: vec![rule],
            });
        }
        _ => {
            let rules = &mut option
                .selectively_orphans
                .get_or_insert_with(Default::default)
                .orphaning_rules;
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
}

/// The identity of each manifest of a work, with its index.
pub fn manifest_ids(w: &ManifestWork) -> Vec<(usize, flotilla_api::work::ManifestId)> {
    w.spec
        .iter()
        .flat_map(|s| s.workload.iter().flat_map(|l| l.manifests.iter()))
        .enumerate()
        .filter_map(|(i, m)| {
            let v: serde_json::Value = serde_json::from_slice(&m.raw).ok()?;
            flotilla_api::work::manifest_id(&v).ok().map(|id| (i, id))
        })
        .collect()
}

/// The registrations of a template add-on on `cluster`, as OCM lists them in the status.
pub fn registrations(t: &AddOnTemplate, cluster: &str, addon: &str) -> Vec<RegistrationConfig> {
    let spec = t.spec.clone().unwrap_or_default();
    spec.registration
        .iter()
        .map(|r| match r.r#type.as_str() {
            "CustomSigner" => {
                let c = r.custom_signer.clone().unwrap_or_default();
                RegistrationConfig {
                    signer_name: c.signer_name,
                    subject: c.subject,
                }
            }
            _ => RegistrationConfig {
                signer_name: "kubernetes.io/kube-apiserver-client".into(),
                subject: Some(Subject {
                    user: format!(
                        "system:open-cluster-management:cluster:{cluster}:addon:{addon}:agent:{addon}-agent"
                    ),
                    groups: vec![
                        format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}"),
                        format!("system:open-cluster-management:addon:{addon}"),
                        "system:authenticated".into(),
                    ],
                    organization_unit: Vec::new(),
                }),
            },
        })
        .collect()
}

/// Writes the hub's status of one installed add-on over whatever spec is stored.
pub async fn write_status(
    store: &Store,
    cluster: &str,
    name: &str,
    st: flotilla_api::v1::ManagedClusterAddOnStatus,
) -> Result<(), AddOnError> {
    let key = ObjectRef::new(cluster, name);
    let Some((mut stored, revision)) = store.cluster_addons.get(&key.store_key()).await? else {
        return Ok(()); // removed meanwhile
    };
    stored.status = Some(st);
    let rev = store
        .cluster_addons
        .write(&key.store_key(), &stored, revision)
        .await?;
    if let Some(m) = stored.metadata.as_mut() {
        m.resource_version = rev;
    }
    store
        .cluster_addon_views
        .upsert(&key.inventory_key(), stored);
    Ok(())
}

/// Deletes the work of add-on `name` on `cluster`, when there is one.
pub async fn remove_work(deps: &Deps, cluster: &str, name: &str) -> Result<(), AddOnError> {
    if let Some(handle) = deps.clusters.get(cluster)
        && deps
            .works
            .get(&ObjectRef::new(cluster, addon::work_name(name)).inventory_key())
            .is_some()
        && let Err(e) = handle.delete_work(addon::work_name(name)).await
    {
        return Err(AddOnError::Unavailable(format!(
            "removing the work of add-on {name} on {cluster}: {e}"
        )));
    }
    Ok(())
}

/// Tells `cluster`'s agent to watch add-on `name`'s spoke Lease in `install_namespace`, or
/// (`None`) to stop, unless the cluster already lists exactly that. Nothing to do for a cluster
/// that is gone.
pub async fn watch_lease(
    deps: &Deps,
    cluster: &str,
    name: &str,
    install_namespace: Option<&str>,
) -> Result<(), AddOnError> {
    let listed = deps.inventory.get(cluster).and_then(|c| {
        c.hub.as_ref().and_then(|h| {
            h.external_addons
                .iter()
                .find(|a| a.name == name)
                .map(|a| a.install_namespace.clone())
        })
    });
    if listed.as_deref() == install_namespace {
        return Ok(());
    }
    let Some(handle) = deps.clusters.get(cluster) else {
        return Ok(());
    };
    handle
        .set_external_addon(name, install_namespace)
        .await
        .map_err(|e| {
            AddOnError::Unavailable(format!(
                "telling {cluster}'s agent about add-on {name}'s lease: {e}"
            ))
        })
}

/// Removes add-on `name` from `cluster`: its spoke Lease watch, its work, its stored object, its lease, its agent's
/// credentials.
pub async fn uninstall(
    store: &Store,
    deps: &Deps,
    cluster: &str,
    name: &str,
) -> Result<(), AddOnError> {
    let key = ObjectRef::new(cluster, name);
    watch_lease(deps, cluster, name, None).await?;
    remove_work(deps, cluster, name).await?;
    let agent_key = store
        .cluster_addon_views
        .get(&key.inventory_key())
        .and_then(|m| m.hub.as_ref().map(|h| h.agent_public_key.clone()))
        .unwrap_or_default();
    // Revoke before forgetting the key: if the revocation cannot be recorded the installation
    // stays, and removing it is tried again.
    if let Some(sec) = &deps.security {
        sec.revoke(&[agent_key.as_str()]).await.map_err(|e| {
            AddOnError::Unavailable(format!(
                "revoking the credentials of add-on {name} on {cluster}: {e}"
            ))
        })?;
    }
    store.cluster_addons.purge(&key.store_key()).await?;
    store.cluster_addon_views.remove(&key.inventory_key());
    store.leases.remove(&super::lease_key(cluster, name));
    Ok(())
}

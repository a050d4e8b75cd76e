//! What the add-on actors do to the world: a cluster moved to its rendered works, the identities
//! of a work's manifests (for conflicts between add-ons), the registrations shown in the status,
//! status writes and uninstalling (pre-delete hook, works, stored object, lease, credentials).

use super::deps::Deps;
use super::error::AddOnError;
use super::rules::uninstall::{
    self, REASON_COMPLETED, REASON_NOT_COMPLETED, UninstallStep, UninstallView,
};
use super::rules::works as rules;
use super::store::{Store, lease_key};
use crate::keys::ObjectRef;
use flotilla_api::addon;
use flotilla_api::addon::render::RenderError;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{
    AddOnTemplate, ManagedClusterAddOn, ManifestWork, RegistrationConfig, Subject,
};
use std::sync::Arc;

/// A cluster's agent works after [`sync_works`].
pub struct Moved {
    /// Its agent works now, by index (this round's status is computed from them).
    pub works: Vec<Arc<ManifestWork>>,
    /// Some move waits for the agent ([`rules::Sync::held`]).
    pub held: bool,
}

/// Moves `cluster` from its `current` agent works to `desired` ([`rules::sync`], the thin
/// executor of its plan): applies in the plan's order, stopping at the first failure (the
/// first work, which the status reads, is applied last), then deletes the trailing works the
/// plan lets go.
pub async fn sync_works(
    deps: &Deps,
    cluster: &str,
    addon: &str,
    desired: Vec<ManifestWork>,
    current: Vec<Arc<ManifestWork>>,
) -> Result<Moved, AddOnError> {
    let plan = {
        let refs: Vec<&ManifestWork> = current.iter().map(|w| &**w).collect();
        rules::sync(&desired, &refs)
    };
    let handle = deps
        .clusters
        .get_or_spawn(cluster)
        .map_err(|e| AddOnError::Unavailable(format!("cluster {cluster}: {e}")))?;
    let mut now: std::collections::BTreeMap<String, Arc<ManifestWork>> =
        current.into_iter().map(|w| (name_of(&w), w)).collect();
    let mut desired: Vec<Option<ManifestWork>> = desired.into_iter().map(Some).collect();
    for i in plan.apply {
        let Some(work) = desired[i].take() else {
            continue;
        };
        let name = name_of(&work);
        let applied = handle
            .apply_work(work)
            .await
            .map_err(|e| AddOnError::Unavailable(format!("applying work {cluster}/{name}: {e}")))?;
        now.insert(name, Arc::new(applied));
    }
    for name in plan.delete {
        let deleted = handle
            .delete_work(name.clone())
            .await
            .map_err(|e| AddOnError::Unavailable(format!("deleting work {cluster}/{name}: {e}")))?;
        now.insert(name, Arc::new(deleted));
    }
    Ok(Moved {
        works: rules::deploy_works(addon, now.into_values()),
        held: plan.held,
    })
}

fn name_of(w: &ManifestWork) -> String {
    w.metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default()
}

/// The identity of each manifest of a work, with its index.
pub fn manifest_ids(w: &ManifestWork) -> Vec<(usize, flotilla_api::work::ManifestId)> {
    w.spec
        .iter()
        .flat_map(|s| s.workload.iter().flat_map(|l| l.manifests.iter()))
        .enumerate()
        .filter_map(|(i, m)| {
            flotilla_api::work::read_manifest_id(&m.raw)
                .ok()
                .map(|id| (i, id))
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

/// Deletes every work of add-on `name` on `cluster` (its agent works and its pre-delete hook
/// work) that is not on its way out.
pub async fn remove_works(deps: &Deps, cluster: &str, name: &str) -> Result<(), AddOnError> {
    let Some(handle) = deps.clusters.get(cluster) else {
        return Ok(()); // no cluster actor: the cluster and its works are gone
    };
    for work in owned_works(deps, cluster, name) {
        if let Err(e) = handle.delete_work(work.clone()).await {
            return Err(AddOnError::Unavailable(format!(
                "removing work {cluster}/{work} of add-on {name}: {e}"
            )));
        }
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

/// The works of add-on `name` on `cluster` (labelled [`addon::ADDON_NAME_LABEL`] with its name)
/// that are not on their way out.
fn owned_works(deps: &Deps, cluster: &str, name: &str) -> Vec<String> {
    deps.works
        .with_prefix(&ObjectRef::prefix(cluster))
        .into_iter()
        .filter_map(|(_, w)| {
            let m = w.metadata.as_ref()?;
            let ours = m.labels.get(addon::ADDON_NAME_LABEL).map(String::as_str) == Some(name);
            (ours && m.deletion_timestamp.is_none()).then(|| m.name.clone())
        })
        .collect()
}

/// How far removing an add-on from a cluster got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// The installation is gone (its works on their way out).
    Removed,
    /// It stays, marked deleted, until its pre-delete hook completes (what it waits for).
    Waiting(String),
}

/// One step of removing add-on `name` from `cluster` — the thin executor of
/// [`uninstall::step`]. `hook` is the pre-delete hook work the add-on's template renders for
/// the cluster (`Ok(None)`: none), or why it cannot be rendered. While the hook runs the
/// ManagedClusterAddOn stays, marked deleted, its `HookManifestCompleted` condition saying what
/// it waits for; call again when the hook work's status changes.
pub async fn uninstall(
    store: &Store,
    deps: &Deps,
    cluster: &str,
    name: &str,
    hook: Result<Option<ManifestWork>, RenderError>,
) -> Result<Removal, AddOnError> {
    let key = ObjectRef::new(cluster, name);
    let Some(mca) = store.cluster_addon_views.get(&key.inventory_key()) else {
        return Ok(Removal::Removed);
    };
    let hook_ref = ObjectRef::new(cluster, addon::pre_delete_work_name(name));
    let applied_hook = deps
        .works
        .get(&hook_ref.inventory_key())
        .map(|w| w.to_work());
    // The pure step reads why the hook cannot be rendered as text (its status message).
    let unrendered = hook.as_ref().err().map(ToString::to_string);
    let step = uninstall::step(&UninstallView {
        cluster_exists: deps.inventory.get(cluster).is_some(),
        hook: hook
            .as_ref()
            .map(Option::as_ref)
            .map_err(|_| unrendered.as_deref().unwrap_or_default()),
        applied_hook: applied_hook.as_ref(),
        hook_completed: hook_recorded(&mca),
        works_left: !owned_works(deps, cluster, name).is_empty(),
    });
    match (step, hook) {
        (UninstallStep::ApplyHook, Ok(Some(work))) => {
            let why = format!(
                "applying the pre-delete hook work {} ({})",
                hook_ref.name,
                uninstall::hooks_named(&work)
            );
            mark(
                store,
                cluster,
                name,
                (status::FALSE, REASON_NOT_COMPLETED, &why),
            )
            .await?;
            let handle = deps
                .clusters
                .get_or_spawn(cluster)
                .map_err(|e| AddOnError::Unavailable(format!("cluster {cluster}: {e}")))?;
            handle
                .apply_work(work)
                .await
                .map_err(|e| AddOnError::Unavailable(format!("applying work {hook_ref}: {e}")))?;
            Ok(Removal::Waiting(why))
        }
        (UninstallStep::WaitHook { reason, message }, _) => {
            mark(store, cluster, name, (status::FALSE, reason, &message)).await?;
            Ok(Removal::Waiting(message))
        }
        (UninstallStep::DeleteWorks { record_hook }, _) => {
            if record_hook {
                let done = format!("hook manifestWork {} is completed.", hook_ref.name);
                mark(
                    store,
                    cluster,
                    name,
                    (status::TRUE, REASON_COMPLETED, &done),
                )
                .await?;
            }
            remove_works(deps, cluster, name).await?;
            forget(store, deps, cluster, name).await?;
            Ok(Removal::Removed)
        }
        (UninstallStep::Done, _) => {
            forget(store, deps, cluster, name).await?;
            Ok(Removal::Removed)
        }
        // `step` applies a hook only when there is one.
        (UninstallStep::ApplyHook, _) => Err(AddOnError::Conflict(format!(
            "removing add-on {name} from {cluster}: no pre-delete hook work to apply"
        ))),
    }
}

/// Whether the add-on's pre-delete hook completed before (its condition records it).
fn hook_recorded(mca: &ManagedClusterAddOn) -> bool {
    mca.status.as_ref().is_some_and(|s| {
        meta::find_condition(&s.conditions, addon::conditions::HOOK_MANIFEST_COMPLETED)
            .is_some_and(|c| c.status == status::TRUE)
    })
}

/// Marks the installation deleted (once) with its `HookManifestCompleted` condition
/// (status, reason, message); written only when that changes it.
async fn mark(
    store: &Store,
    cluster: &str,
    name: &str,
    (state, reason, message): (&str, &str, &str),
) -> Result<(), AddOnError> {
    let key = ObjectRef::new(cluster, name);
    let Some((mut stored, revision)) = store.cluster_addons.get(&key.store_key()).await? else {
        return Ok(()); // removed meanwhile
    };
    let before = stored.clone();
    let m = stored.metadata.get_or_insert_with(Default::default);
    if m.deletion_timestamp.is_none() {
        m.deletion_timestamp = Some(meta::now());
    }
    let st = stored.status.get_or_insert_with(Default::default);
    meta::set_condition(
        &mut st.conditions,
        addon::conditions::HOOK_MANIFEST_COMPLETED,
        state,
        reason,
        message,
    );
    if stored == before {
        return Ok(());
    }
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

/// Forgets the installation: its spoke Lease watch, its agent's credentials (revoked), then its
/// stored object and its lease.
async fn forget(store: &Store, deps: &Deps, cluster: &str, name: &str) -> Result<(), AddOnError> {
    let key = ObjectRef::new(cluster, name);
    watch_lease(deps, cluster, name, None).await?;
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
    store.leases.remove(&lease_key(cluster, name));
    Ok(())
}

//! The thin executor between the pure rules and the cluster: reads the [`Snapshot`] a policy is
//! judged against and carries out enforce's [`Action`]s through the [`Backend`].

use crate::backend::{Backend, BackendError, Strategy};
use flotilla_api::policy::evaluate::{Action, ActionResult, ObjectKey, Snapshot};
use flotilla_api::policy::namespaces::Namespace;
use flotilla_api::work::ManifestId;
use serde_json::Value;

/// The backend's id of an object.
pub fn manifest_id(key: &ObjectKey) -> ManifestId {
    let (group, version) = match key.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), key.api_version.clone()),
    };
    ManifestId {
        group,
        version,
        kind: key.kind.clone(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    }
}

/// Reads every namespace and every object of `kinds` (`(apiVersion, kind)`). A kind the
/// cluster does not serve has no objects; any other failure is returned (the evaluation is
/// retried, never judged on a partial view).
pub async fn snapshot(
    backend: &dyn Backend,
    kinds: &[(String, String)],
) -> Result<Snapshot, BackendError> {
    let namespaces = backend
        .list("Namespace", None)
        .await?
        .iter()
        .filter_map(|ns| {
            let name = ns["metadata"]["name"].as_str()?.to_string();
            Some(Namespace {
                name,
                labels: flotilla_api::policy::config::labels_of(ns),
            })
        })
        .collect();
    let mut objects = Vec::new();
    for (api_version, kind) in kinds {
        let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
        match backend.list(kind, None).await {
            Ok(list) => objects.extend(list.into_iter().filter(|o| same_group(o, group))),
            Err(BackendError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Snapshot {
        namespaces,
        objects,
    })
}

fn same_group(o: &Value, group: &str) -> bool {
    let api = o["apiVersion"].as_str().unwrap_or("");
    api.split_once('/').map(|(g, _)| g).unwrap_or("") == group
}

/// Carries out `actions` in order; one result per action. Writes replace the object with the
/// merged one (an update keeps every field the template does not name).
pub async fn perform(backend: &dyn Backend, actions: &[Action]) -> Vec<ActionResult> {
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        let id = manifest_id(a.key());
        let r = match a {
            Action::Create(_, obj) | Action::Update(_, obj) => {
                backend.apply(&id, obj, &Strategy::Update).await.map(|_| ())
            }
            Action::Delete(_) => backend.delete(&id).await.map(|_| ()),
        };
        out.push(r.map_err(|e| e.to_string()));
    }
    out
}

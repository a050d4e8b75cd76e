//! The thin executor between the pure rules and the cluster: reads the [`Snapshot`] a policy is
//! judged against, has the cluster validate the writes strictly, and carries out enforce's
//! [`Action`]s through the [`Backend`].

use crate::backend::{Backend, BackendError, Strategy};
use flotilla_api::policy::evaluate::{Action, ActionResult, Evaluation, ObjectKey, Snapshot};
use flotilla_api::policy::namespaces::Namespace;
use flotilla_api::work::ManifestId;
use std::collections::BTreeSet;

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
/// cluster does not serve in exactly that apiVersion is recorded in [`Snapshot::unserved`] (OCM's
/// mapping error) and never judged against another version's objects. A served kind is listed
/// in its API group: an API server keeps one set of objects per group and kind, whichever
/// served version reads them. Any other failure is returned (the evaluation is retried, never
/// judged on a partial view).
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
    let mut unserved = BTreeSet::new();
    for (api_version, kind) in kinds {
        if backend.served(api_version, kind).await?.is_none() {
            unserved.insert((api_version.clone(), kind.clone()));
            continue;
        }
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        match backend.list_in_group(group, kind, None).await {
            Ok(list) => objects.extend(list),
            Err(BackendError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Snapshot {
        namespaces,
        objects,
        unserved,
    })
}

/// What the API server's refusal of a field a kind does not define holds, and what OCM looks for
/// in it (config-policy-controller `getUpdateErrorMsg`).
const STRICT_DECODING: &str = "strict decoding error:";

/// Has the cluster validate strictly each write the evaluation names ([`Evaluation::checks`])
/// before any is made — config-policy-controller's `fieldValidation=Strict` create and its dry
/// run of the update of a mismatching object, made in inform too — and turns each refusal
/// naming a field its kind does not define into that finding's violation, its write dropped
/// ([`Evaluation::refuse`]). Other refusals (a missing namespace, a forbidden kind) are left to
/// the write itself, which reports them; an unreachable cluster is returned (the evaluation is
/// retried, never judged on a partial view).
pub async fn validate(
    backend: &dyn Backend,
    evaluation: &mut Evaluation,
) -> Result<(), BackendError> {
    let mut refused = Vec::new();
    for (i, check) in evaluation.checks() {
        let id = manifest_id(&check.key);
        match backend.validate(&id, &check.object, check.create).await {
            Err(BackendError::Invalid(message)) if message.contains(STRICT_DECODING) => {
                refused.push((i, message));
            }
            Err(e @ BackendError::Unavailable(_)) => return Err(e),
            _ => {}
        }
    }
    for (i, message) in refused {
        evaluation.refuse(i, &message);
    }
    Ok(())
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

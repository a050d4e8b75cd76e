//! The anchor of a work's resources (I/O, but [`anchor_id`]): OCM's cluster-scoped
//! AppliedManifestWork, named after the work's resource id, created before the work's resources
//! so each gets an owner reference to it; deleting it lets the cluster's garbage collector
//! remove what is left of the work (or orphan it). A cluster without the CRD gives no owner.

use super::KubeBackend;
use super::errors::map_error;
use crate::backend::{BackendError, ManifestId};
use kube::api::{DeleteParams, DynamicObject, PostParams, PropagationPolicy};
use serde_json::Value;

/// The anchor of a work's resources: OCM's cluster-scoped AppliedManifestWork, whose CRD the
/// install manifests (`flotilla join`) carry.
pub const ANCHOR_API_VERSION: &str = "work.open-cluster-management.io/v1";
/// Kind of the anchor.
pub const ANCHOR_KIND: &str = "AppliedManifestWork";

/// The anchor of the work with this resource id (named after it, as OCM names them after the
/// hub and the work).
fn anchor_id(work_resource_id: &str) -> ManifestId {
    ManifestId {
        group: "work.open-cluster-management.io".into(),
        version: "v1".into(),
        kind: ANCHOR_KIND.into(),
        namespace: String::new(),
        name: format!("flotilla-{work_resource_id}"),
    }
}

impl KubeBackend {
    /// The anchor of a work, created when missing, as an owner reference to put on its
    /// resources; `None` when the cluster has no AppliedManifestWork CRD.
    pub(super) async fn make_anchor(
        &self,
        work_resource_id: &str,
        work_name: &str,
    ) -> Result<Option<Value>, BackendError> {
        let id = anchor_id(work_resource_id);
        let anchor = match self.get_live(&id, None).await {
            Ok(Some(a)) => a,
            Ok(None) => {
                let api = self.api(&id, None).await?;
                let object: DynamicObject = serde_json::from_value(serde_json::json!({
                    "apiVersion": ANCHOR_API_VERSION,
                    "kind": ANCHOR_KIND,
                    "metadata": {"name": id.name},
                    "spec": {"manifestWorkName": work_name, "agentID": "flotilla"},
                }))
                .map_err(|e| BackendError::Invalid(e.to_string()))?;
                let created = api
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(map_error)?;
                serde_json::to_value(created).map_err(|e| BackendError::Invalid(e.to_string()))?
            }
            // No AppliedManifestWork CRD on this cluster: resources get no owner.
            Err(BackendError::Invalid(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(serde_json::json!({
            "apiVersion": ANCHOR_API_VERSION,
            "kind": ANCHOR_KIND,
            "name": id.name,
            "uid": anchor["metadata"]["uid"],
        })))
    }

    /// Deletes a work's anchor: its resources go with it (Background) or stay (`orphan`).
    pub(super) async fn remove_anchor(
        &self,
        work_resource_id: &str,
        orphan: bool,
    ) -> Result<(), BackendError> {
        let id = anchor_id(work_resource_id);
        let api = match self.api(&id, None).await {
            Ok(api) => api,
            Err(BackendError::Invalid(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let params = DeleteParams {
            propagation_policy: Some(if orphan {
                PropagationPolicy::Orphan
            } else {
                PropagationPolicy::Background
            }),
            ..DeleteParams::default()
        };
        match api.delete(&id.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
            Err(e) => Err(map_error(e)),
        }
    }
}

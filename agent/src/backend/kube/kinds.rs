//! Kinds as the cluster serves them (I/O): a group/version/kind resolved with a one-group
//! discovery request and cached; a kind not served is asked again next time, so a CRD applied
//! earlier in the same work is usable at once. An object's API is built from its kind's scope.

use super::{KubeBackend, unavailable};
use crate::backend::{BackendError, Executor, ManifestId};
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};

/// Group, version and kind.
pub(super) type KindKey = (String, String, String);

impl KubeBackend {
    /// The API resource of a group/version/kind: cached, or discovered now.
    pub(super) async fn resolve(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), BackendError> {
        self.discover(group, version, kind).await?.ok_or_else(|| {
            BackendError::Invalid(format!(
                "the cluster serves no {kind} in {}",
                if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                }
            ))
        })
    }

    /// [`KubeBackend::resolve`], `None` when the API server does not serve the group version
    /// (404) or the group version has no such kind. Found kinds are cached; a kind not served
    /// is asked again next time (its CRD may have been installed since).
    pub(super) async fn discover(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Option<(ApiResource, ApiCapabilities)>, BackendError> {
        let key = (group.to_string(), version.to_string(), kind.to_string());
        if let Some(found) = self.kinds.lock().expect("kinds lock").get(&key) {
            return Ok(Some(found.clone()));
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        match discovery::pinned_kind(&self.client, &gvk).await {
            Ok(found) => {
                self.kinds
                    .lock()
                    .expect("kinds lock")
                    .insert(key, found.clone());
                Ok(Some(found))
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(kube::Error::Discovery(e)) => {
                tracing::debug!(%kind, %group, %version, error = %e, "kind not served");
                Ok(None)
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The object's API, with requests going as `executor` (the agent for `None`).
    pub(super) async fn api(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Api<DynamicObject>, BackendError> {
        let (ar, caps) = self.resolve(&id.group, &id.version, &id.kind).await?;
        let client = self.client_as(executor)?;
        Ok(match caps.scope {
            Scope::Namespaced => {
                let ns = if id.namespace.is_empty() {
                    "default"
                } else {
                    &id.namespace
                };
                Api::namespaced_with(client, ns, &ar)
            }
            Scope::Cluster => Api::all_with(client, &ar),
        })
    }
}

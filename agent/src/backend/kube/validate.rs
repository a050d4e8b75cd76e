//! Strict validation of an object by the API server, as OCM's policy controller asks for it
//! before it writes: a dry run (`dryRun=All`, nothing stored) of the create or update with
//! `fieldValidation=Strict`, so that a field the kind does not define is refused in the
//! server's own words (`Deployment in version "v1" cannot be handled as a Deployment: strict
//! decoding error: unknown field "spec.replcas"`). kube-rs' `PostParams` carry `dryRun` but not
//! `fieldValidation` (only its `PatchParams` do), so the parameter is added to the request's
//! query here.

use super::errors::map_error;
use crate::backend::{BackendError, ManifestId};
use kube::Client;
use kube::api::{DynamicObject, PostParams};
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;

/// Asks the API server whether it would create (`create`) or update `object` as `id` under
/// strict field validation, storing nothing. A 400 (the strict decoding error among them) is
/// [`BackendError::Invalid`] with the server's message verbatim.
pub(super) async fn dry_run(
    client: &Client,
    resource: &ApiResource,
    scope: &Scope,
    id: &ManifestId,
    object: &Value,
    create: bool,
) -> Result<(), BackendError> {
    let namespace = match scope {
        Scope::Namespaced if id.namespace.is_empty() => Some("default"),
        Scope::Namespaced => Some(id.namespace.as_str()),
        Scope::Cluster => None,
    };
    let url = <DynamicObject as kube::Resource>::url_path(resource, namespace);
    let mut body = object.clone();
    // An unconditional update: the dry run judges the fields, not a resourceVersion that may
    // have moved since the object was read.
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let data = serde_json::to_vec(&body).map_err(|e| BackendError::Invalid(e.to_string()))?;
    let params = PostParams {
        dry_run: true,
        field_manager: None,
    };
    let request = kube::core::Request::new(url);
    let built = if create {
        request.create(&params, data)
    } else {
        request.replace(&id.name, &params, data)
    };
    let mut http = built.map_err(|e| BackendError::Invalid(e.to_string()))?;
    let uri = format!("{}&fieldValidation=Strict", http.uri());
    *http.uri_mut() = uri
        .parse()
        .map_err(|e: http::uri::InvalidUri| BackendError::Invalid(e.to_string()))?;
    match client.request::<Value>(http).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 400 => Err(BackendError::Invalid(r.message)),
        Err(e) => Err(map_error(e)),
    }
}

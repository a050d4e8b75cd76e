//! The Kubernetes backend's ManagedServiceAccount calls: the ServiceAccount (and its
//! namespace) created when missing, a token from the TokenRequest API
//! (`POST …/serviceaccounts/<name>/token` with `expirationSeconds`), whose answered
//! `expirationTimestamp` is what the agent trusts, and the ServiceAccount deleted.

use super::map_error;
use crate::backend::{BackendError, IssuedToken};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use std::time::{Duration, SystemTime};

/// Label on the ServiceAccounts the agent creates.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "flotilla-agent");

/// Creates the namespace and the ServiceAccount unless they exist.
pub async fn ensure(client: &Client, namespace: &str, name: &str) -> Result<(), BackendError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(namespace)
        .await
        .map_err(map_error)?
        .is_none()
    {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(map_error(e)),
        }
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if accounts.get_opt(name).await.map_err(map_error)?.is_some() {
        return Ok(());
    }
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match accounts.create(&PostParams::default(), &sa).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(map_error(e)),
    }
}

/// Requests a token valid for `validity`; the expiry is the API server's answer.
pub async fn token(
    client: &Client,
    namespace: &str,
    name: &str,
    validity: Duration,
) -> Result<IssuedToken, BackendError> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(validity.as_secs() as i64),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(map_error)?;
    let status = answer.status.ok_or_else(|| {
        BackendError::Invalid(format!(
            "the TokenRequest for ServiceAccount {namespace}/{name} was answered without a status"
        ))
    })?;
    if status.token.is_empty() {
        return Err(BackendError::Invalid(format!(
            "the TokenRequest for ServiceAccount {namespace}/{name} was answered without a token"
        )));
    }
    let expires: SystemTime = status.expiration_timestamp.0.into();
    Ok(IssuedToken {
        token: status.token,
        expires,
    })
}

/// Deletes the ServiceAccount; false when it was not there.
pub async fn delete(client: &Client, namespace: &str, name: &str) -> Result<bool, BackendError> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    match accounts.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(map_error(e)),
    }
}

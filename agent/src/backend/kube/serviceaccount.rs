//! The Kubernetes backend's ManagedServiceAccount calls: the ServiceAccount (and its
//! namespace) created when missing, a token from the TokenRequest API
//! (`POST …/serviceaccounts/<name>/token` with `expirationSeconds`), whose answered
//! `expirationTimestamp` is what the agent trusts, and the ServiceAccount deleted.

use super::errors::map_error;
use crate::backend::{BackendError, IssuedToken};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use std::time::{Duration, SystemTime};

/// Label on the ServiceAccounts the agent creates.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "flotilla-agent");

/// Whether the agent created this ServiceAccount (it carries [`MANAGED_BY`]).
fn managed(sa: &ServiceAccount) -> bool {
    sa.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY.0))
        .is_some_and(|v| v == MANAGED_BY.1)
}

/// The refusal to touch a ServiceAccount someone else made: its tokens could carry rights the
/// hub must not get (an add-on's own account), and deleting it would break its owner.
fn not_ours(namespace: &str, name: &str) -> BackendError {
    BackendError::Invalid(format!(
        "ServiceAccount {namespace}/{name} exists and was not created by flotilla-agent (label \
         {}={} missing): it is left alone; name the ManagedServiceAccount differently",
        MANAGED_BY.0, MANAGED_BY.1
    ))
}

/// Reads the ServiceAccount, refusing one the agent did not create.
async fn own(
    accounts: &Api<ServiceAccount>,
    namespace: &str,
    name: &str,
) -> Result<Option<ServiceAccount>, BackendError> {
    match accounts.get_opt(name).await.map_err(map_error)? {
        Some(sa) if !managed(&sa) => Err(not_ours(namespace, name)),
        found => Ok(found),
    }
}

/// Creates the namespace and the ServiceAccount unless they exist; an existing ServiceAccount
/// the agent did not create is refused, never adopted.
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
    if own(&accounts, namespace, name).await?.is_some() {
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
        // Created meanwhile: ours only if it carries the label.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            own(&accounts, namespace, name).await.map(drop)
        }
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
    if own(&accounts, namespace, name).await?.is_none() {
        return Err(BackendError::NotFound(format!(
            "ServiceAccount {namespace}/{name}"
        )));
    }
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

/// Deletes the ServiceAccount; false when it was not there, or is not the agent's (left
/// alone: a ManagedServiceAccount that could never adopt it has nothing there to remove).
pub async fn delete(client: &Client, namespace: &str, name: &str) -> Result<bool, BackendError> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    match own(&accounts, namespace, name).await {
        Ok(Some(_)) => {}
        Ok(None) => return Ok(false),
        Err(e) => {
            tracing::warn!(error = %e, "not deleting a ServiceAccount the agent did not create");
            return Ok(false);
        }
    }
    match accounts.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(map_error(e)),
    }
}

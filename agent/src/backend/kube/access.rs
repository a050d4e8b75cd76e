//! The executor check before a manifest is applied (I/O; OCM's executor check): one
//! SubjectAccessReview per verb for the ServiceAccount's user and groups on the manifest's
//! resource, namespace and name. Allowed answers are cached for [`ALLOWED_TTL`]; denials are
//! not, so a right granted later takes effect on the next apply.

use super::KubeBackend;
use super::errors::map_error;
use crate::backend::{BackendError, Executor, ManifestId};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::discovery::Scope;
use std::time::{Duration, Instant};

/// How long a SubjectAccessReview that allowed an executor is trusted (by the pre-check; the
/// write, made as the executor, is judged anew by the API server).
pub const ALLOWED_TTL: Duration = Duration::from_secs(300);
/// Cached answers beyond which expired ones are dropped.
const ACCESS_CACHE_PRUNE: usize = 10_000;

/// One question to the authorizer: user, verb, group, resource, namespace, name.
pub(super) type AccessKey = (String, &'static str, String, String, String, String);

impl KubeBackend {
    /// Checks that `executor` may do each of `verbs` on `id` (nothing to check for the agent
    /// itself); `Forbidden` naming the verb, resource and scope when it may not.
    pub(super) async fn check_access(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
        verbs: &[&'static str],
    ) -> Result<(), BackendError> {
        let Some(executor) = executor else {
            return Ok(());
        };
        let (ar, caps) = &self.resolve(&id.group, &id.version, &id.kind).await?;
        let namespace = match caps.scope {
            Scope::Namespaced if id.namespace.is_empty() => "default".to_string(),
            Scope::Namespaced => id.namespace.clone(),
            Scope::Cluster => String::new(),
        };
        let attributes = ResourceAttributes {
            group: Some(id.group.clone()),
            version: Some(id.version.clone()),
            resource: Some(ar.plural.clone()),
            namespace: Some(namespace.clone()),
            name: Some(id.name.clone()),
            ..ResourceAttributes::default()
        };
        let user = executor.username();
        for verb in verbs {
            let key: AccessKey = (
                user.clone(),
                verb,
                id.group.clone(),
                ar.plural.clone(),
                namespace.clone(),
                id.name.clone(),
            );
            let fresh = self
                .allowed
                .lock()
                .expect("access cache lock")
                .get(&key)
                .is_some_and(|at| at.elapsed() < ALLOWED_TTL);
            if fresh {
                continue;
            }
            match self.review(executor, verb, &attributes).await? {
                Ok(()) => {
                    let mut allowed = self.allowed.lock().expect("access cache lock");
                    if allowed.len() >= ACCESS_CACHE_PRUNE {
                        allowed.retain(|_, at| at.elapsed() < ALLOWED_TTL);
                    }
                    allowed.insert(key, Instant::now());
                }
                Err(reason) => {
                    let resource = if id.group.is_empty() {
                        ar.plural.clone()
                    } else {
                        format!("{}.{}", ar.plural, id.group)
                    };
                    let scope = if namespace.is_empty() {
                        "(cluster-scoped)".to_string()
                    } else {
                        format!("in namespace {namespace}")
                    };
                    return Err(BackendError::Forbidden(format!(
                        "the executor {user} lacks permission to {verb} {resource} {:?} {scope}{}",
                        id.name,
                        if reason.is_empty() {
                            String::new()
                        } else {
                            format!(" ({reason})")
                        }
                    )));
                }
            }
        }
        Ok(())
    }

    /// Asks the API server whether `executor` may `verb` the resource (a SubjectAccessReview);
    /// `Err(reason)` when it may not.
    async fn review(
        &self,
        executor: &Executor,
        verb: &str,
        attributes: &ResourceAttributes,
    ) -> Result<Result<(), String>, BackendError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(executor.username()),
                groups: Some(executor.groups()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.to_string()),
                    ..attributes.clone()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| match e {
                kube::Error::Api(r) if r.code == 403 => BackendError::Forbidden(format!(
                    "the agent may not create SubjectAccessReviews to check the executor: {}",
                    r.message
                )),
                e => map_error(e),
            })?;
        let status = answer.status.unwrap_or_default();
        if status.allowed && !status.denied.unwrap_or(false) {
            Ok(Ok(()))
        } else {
            Ok(Err(status
                .reason
                .filter(|r| !r.is_empty())
                .or(status.evaluation_error.filter(|e| !e.is_empty()))
                .unwrap_or_default()))
        }
    }
}

//! Reading and writing one object as an identity (I/O): reads from that identity's watch cache
//! of the kind and namespace once it has synced, else from the API server; writes by strategy
//! (`ServerSideApply` an apply patch, `Update` a read and create or replace with the live
//! `resourceVersion`, unchanged objects not written, `CreateOnly`, `ReadOnly`), what the server
//! answered put into the cache; deletes with `Foreground` propagation. [`declared_matches`] is
//! the one pure rule here.

use super::cache::Cache;
use super::clients::identity;
use super::errors::{map_error, write_error};
use super::kinds::KindKey;
use super::{KubeBackend, cache};
use crate::backend::{ApplyOutcome, BackendError, Executor, ManifestId, Strategy};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::discovery::Scope;
use serde_json::Value;
use std::sync::Arc;

/// A watch cache's key: the identity it reads as (the executor's user name, `""` for the
/// agent), the kind, and the namespace (`""` for cluster-scoped kinds).
pub(super) type CacheKey = (String, KindKey, String);

impl KubeBackend {
    /// The watch cache of the object's kind and namespace as `executor` sees them, started on
    /// first use.
    pub(super) async fn cache(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Arc<Cache>, BackendError> {
        let (_, caps) = self.resolve(&id.group, &id.version, &id.kind).await?;
        let namespace = match caps.scope {
            Scope::Namespaced if id.namespace.is_empty() => "default".to_string(),
            Scope::Namespaced => id.namespace.clone(),
            Scope::Cluster => String::new(),
        };
        let key = (
            identity(executor),
            (id.group.clone(), id.version.clone(), id.kind.clone()),
            namespace,
        );
        if let Some(c) = self.caches.lock().expect("caches lock").get(&key) {
            return Ok(c.clone());
        }
        let api = self.api(id, executor).await?;
        let mut caches = self.caches.lock().expect("caches lock");
        let cache = caches.entry(key).or_insert_with(|| {
            let c = Arc::new(Cache::default());
            cache::spawn(api, &c, None);
            c
        });
        Ok(cache.clone())
    }

    /// Reads an object as `executor`: from its watch cache once synced, else from the API
    /// server.
    pub(super) async fn get_object(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Option<Value>, BackendError> {
        if let Some(found) = self.cache(id, executor).await?.get(&id.name) {
            return Ok(found);
        }
        self.get_live(id, executor).await
    }

    /// Reads an object from the API server as `executor`, bypassing the cache.
    pub(super) async fn get_live(
        &self,
        id: &ManifestId,
        executor: Option<&Executor>,
    ) -> Result<Option<Value>, BackendError> {
        let api = self.api(id, executor).await?;
        match api.get_opt(&id.name).await {
            Ok(Some(o)) => serde_json::to_value(o)
                .map(Some)
                .map_err(|e| BackendError::Invalid(e.to_string())),
            Ok(None) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }

    /// Puts what the server answered to a write as `executor` into that identity's cache.
    async fn remember(&self, id: &ManifestId, executor: Option<&Executor>, object: DynamicObject) {
        if let (Ok(cache), Ok(v)) = (self.cache(id, executor).await, serde_json::to_value(object)) {
            cache.put(v);
        }
    }

    /// Writes `object` as `id` by `strategy`, as `executor`.
    pub(super) async fn write(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        let api = self.api(id, executor).await?;
        match strategy {
            Strategy::ReadOnly => Ok(ApplyOutcome::Skipped),
            Strategy::ServerSideApply {
                force,
                field_manager,
            } => {
                let before = self.get_live(id, executor).await?;
                let mut params = PatchParams::apply(field_manager);
                params.force = *force;
                let after = api
                    .patch(&id.name, &params, &Patch::Apply(object))
                    .await
                    .map_err(|e| write_error(executor, id, "patch", e))?;
                let after = serde_json::to_value(after).unwrap_or_default();
                self.cache(id, executor).await?.put(after.clone());
                Ok(match before {
                    None => ApplyOutcome::Created,
                    Some(b)
                        if b["metadata"]["resourceVersion"]
                            == after["metadata"]["resourceVersion"] =>
                    {
                        ApplyOutcome::Unchanged
                    }
                    Some(_) => ApplyOutcome::Updated,
                })
            }
            Strategy::CreateOnly | Strategy::Update => {
                let live = self.get_live(id, executor).await?;
                let typed: DynamicObject = serde_json::from_value(object.clone())
                    .map_err(|e| BackendError::Invalid(e.to_string()))?;
                match live {
                    None => {
                        let created = api
                            .create(&PostParams::default(), &typed)
                            .await
                            .map_err(|e| write_error(executor, id, "create", e))?;
                        self.remember(id, executor, created).await;
                        Ok(ApplyOutcome::Created)
                    }
                    Some(_) if *strategy == Strategy::CreateOnly => Ok(ApplyOutcome::Skipped),
                    Some(live) if declared_matches(object, &live) => Ok(ApplyOutcome::Unchanged),
                    Some(live) => {
                        let mut next = typed;
                        next.metadata.resource_version = live["metadata"]["resourceVersion"]
                            .as_str()
                            .map(str::to_string);
                        // Owners other works (or others) set stay: a shared resource keeps
                        // every work's anchor.
                        let live_owners: Vec<
                            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
                        > = serde_json::from_value(live["metadata"]["ownerReferences"].clone())
                            .unwrap_or_default();
                        let mut owners = next.metadata.owner_references.take().unwrap_or_default();
                        for o in live_owners {
                            if !owners.iter().any(|x| x.uid == o.uid) {
                                owners.push(o);
                            }
                        }
                        next.metadata.owner_references = (!owners.is_empty()).then_some(owners);
                        let replaced = api
                            .replace(&id.name, &PostParams::default(), &next)
                            .await
                            .map_err(|e| write_error(executor, id, "update", e))?;
                        self.remember(id, executor, replaced).await;
                        Ok(ApplyOutcome::Updated)
                    }
                }
            }
        }
    }

    /// Deletes `id` as `executor` with `Foreground` propagation; `false` when it was gone.
    pub(super) async fn delete_object(
        &self,
        executor: Option<&Executor>,
        id: &ManifestId,
    ) -> Result<bool, BackendError> {
        let api = self.api(id, executor).await?;
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..DeleteParams::default()
        };
        match api.delete(&id.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(r)) if r.code == 404 => Ok(false),
            Err(e) => Err(map_error(e)),
        }
    }
}

/// Whether every field `declared` sets has the same value in `live` (status and server-set
/// metadata ignored).
pub(super) fn declared_matches(declared: &Value, live: &Value) -> bool {
    match (declared, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, v)| {
            if matches!(k.as_str(), "status") {
                return true;
            }
            l.get(k).is_some_and(|lv| declared_matches(v, lv))
        }),
        (d, l) => d == l,
    }
}

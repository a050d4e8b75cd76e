//! Listing a kind across the cluster (I/O; [`crate::backend::Backend::list`], what policies
//! judge and the add-on supervisor follows): a cluster-wide list and watch per kind, found by
//! full discovery and started on its first list; every event of those watches bumps
//! [`KubeBackend::changed`]. Until a watch has listed, lists come from the API server.

use super::cache::{self, Cache};
use super::errors::map_error;
use super::{KubeBackend, unavailable};
use crate::backend::BackendError;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{self, ApiResource, Scope};
use serde_json::Value;
use std::sync::Arc;

/// A cluster-wide watch cache of one kind, with the kind's API resource and scope.
pub(super) type ListCache = (ApiResource, Scope, Arc<Cache>);

impl KubeBackend {
    /// The cluster-wide watch cache of the kind `query` names (started on first use: kind
    /// resolved by discovery, then listed and watched), or `NotFound` when the cluster serves
    /// no such kind. Its events bump [`KubeBackend::changed`].
    async fn list_cache(
        &self,
        group: Option<&str>,
        query: &str,
    ) -> Result<ListCache, BackendError> {
        let name = match group {
            Some(g) => format!("{g}/{}", query.to_ascii_lowercase()),
            None => query.to_ascii_lowercase(),
        };
        if let Some(found) = self.lists.lock().expect("lists lock").get(&name) {
            return Ok(found.clone());
        }
        let discovery = discovery::Discovery::new(self.client.clone())
            .run()
            .await
            .map_err(unavailable)?;
        let found = discovery
            .groups()
            .filter(|g| group.is_none_or(|want| g.name() == want))
            .find_map(|g| {
                g.recommended_resources().into_iter().find(|(ar, _)| {
                    crate::backend::kind_matches(query, &ar.kind)
                        || ar.plural.eq_ignore_ascii_case(query)
                })
            });
        let Some((ar, caps)) = found else {
            return Err(BackendError::NotFound(match group {
                Some(g) => {
                    format!("the cluster serves no kind or resource named {query:?} in group {g:?}")
                }
                None => format!("the cluster serves no kind or resource named {query:?}"),
            }));
        };
        let mut lists = self.lists.lock().expect("lists lock");
        let entry = lists.entry(name).or_insert_with(|| {
            let cache = Arc::new(Cache::across_namespaces());
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            cache::spawn(api, &cache, Some(self.changed.clone()));
            (ar, caps.scope, cache)
        });
        Ok(entry.clone())
    }

    /// Lists a kind from the first group serving it, or from `group` only.
    pub(super) async fn list_from(
        &self,
        group: Option<&str>,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, BackendError> {
        let (ar, scope, cache) = self.list_cache(group, kind).await?;
        // A cluster-scoped kind has no namespaces to choose from.
        let namespace = namespace.filter(|_| scope == Scope::Namespaced);
        let typed = |mut v: Value| {
            v["apiVersion"] = Value::String(ar.api_version.clone());
            v["kind"] = Value::String(ar.kind.clone());
            v
        };
        // From the watch cache once it has listed; until then from the API server.
        if let Some(all) = cache.list() {
            return Ok(all
                .into_iter()
                .filter(|o| {
                    namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns))
                })
                .map(typed)
                .collect());
        }
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let list = api.list(&ListParams::default()).await.map_err(map_error)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .map(typed)
            .collect())
    }
}

//! ManagedClusterSets as the hub shows them: each set with the namespaces bound to it.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::meta::{self, COND_CLUSTERSET_EMPTY};
use flotilla_api::ocm;
use flotilla_api::v1::{ManagedClusterSetView, ObjectMeta};

impl Kind for ManagedClusterSetView {
    type Ocm = ocm::ManagedClusterSet;
    const COLUMNS: &'static [&'static str] = &["NAME", "BOUND NAMESPACES", "STATUS"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.set.as_ref().and_then(|s| s.metadata.as_ref())
    }

    /// STATUS is the message of `ClusterSetEmpty` ("2 ManagedClusters selected").
    fn row(&self) -> Vec<String> {
        let status = self
            .set
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .and_then(|s| meta::find_condition(&s.conditions, COND_CLUSTERSET_EMPTY))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        vec![self.name(), self.bound_namespaces.join(","), status]
    }

    /// The set alone: bound namespaces are the hub's view, not part of the OCM object. The hub
    /// always sends the set; an empty one stands in should it not.
    fn to_ocm(&self) -> ocm::ManagedClusterSet {
        ocm::ManagedClusterSet::from(&self.set.clone().unwrap_or_default())
    }

    /// The named sets (each must exist), or every set.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let names = &query.names;
        let mut views = hub
            .idempotent(async || {
                hub.sets()
                    .list_cluster_sets(flotilla_api::v1::ListClusterSetsRequest {})
                    .await
            })
            .await?
            .items;
        if names.is_empty() {
            return Ok(views);
        }
        for name in names {
            if !views
                .iter()
                .any(|v| v.metadata().is_some_and(|m| &m.name == name))
            {
                // Ask for it to get the hub's NotFound message.
                let r = flotilla_api::v1::GetClusterSetRequest { name: name.clone() };
                hub.idempotent(async || hub.sets().get_cluster_set(r.clone()).await)
                    .await?;
            }
        }
        views.retain(|v| v.metadata().is_some_and(|m| names.contains(&m.name)));
        Ok(views)
    }
}

impl Delete for ManagedClusterSetView {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::GetClusterSetRequest { name: target.name };
        let d = hub
            .delete(async || hub.sets().delete_cluster_set(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!("managedclusterset/{} deleted", r.name),
        ))
    }
}

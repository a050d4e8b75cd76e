//! ManagedClusterSetBindings: which namespace may place onto which set.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::meta;
use flotilla_api::ocm;
use flotilla_api::v1::{ManagedClusterSetBinding, ObjectMeta};

impl Kind for ManagedClusterSetBinding {
    type Ocm = ocm::ManagedClusterSetBinding;
    const COLUMNS: &'static [&'static str] = &["NAMESPACE", "NAME", "CLUSTERSET", "BOUND"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let bound = self
            .status
            .as_ref()
            .and_then(|s| meta::condition_status(&s.conditions, meta::COND_BOUND))
            .unwrap_or("Unknown")
            .to_string();
        vec![
            self.namespace(),
            self.name(),
            self.spec
                .as_ref()
                .map(|s| s.cluster_set.clone())
                .unwrap_or_default(),
            bound,
        ]
    }

    fn to_ocm(&self) -> ocm::ManagedClusterSetBinding {
        ocm::ManagedClusterSetBinding::from(self)
    }

    /// The bindings of the namespace (of every namespace when none is given).
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListBindingsRequest {
            namespace: query.namespace.clone().unwrap_or_default(),
        };
        Ok(hub
            .idempotent(async || hub.sets().list_bindings(r.clone()).await)
            .await?
            .items)
    }
}

impl Delete for ManagedClusterSetBinding {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::DeleteBindingRequest {
            namespace: target.namespace,
            name: target.name,
        };
        let d = hub
            .delete(async || hub.sets().delete_binding(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!(
                "managedclustersetbinding/{} deleted (namespace {})",
                r.name, r.namespace
            ),
        ))
    }
}

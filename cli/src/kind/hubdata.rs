//! The hub's ConfigMaps and Secrets, which hub templates read (`{{hub fromConfigMap … hub}}`):
//! kubectl's columns (NAME, DATA; a Secret's TYPE), `-o wide` the keys. A Secret is shown
//! without its values, in every format: the hub keeps them sealed and never returns them.

use super::policy::delete_governed;
use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::ocm::hubdata::{CORE_V1, config_map_json};
use flotilla_api::v1::{HubConfigMap, HubSecretRecord, ListPoliciesRequest, ObjectMeta};

/// The hub data of the query's namespace (every namespace when `None`).
async fn list(
    hub: &crate::hub::Hub,
    query: &super::Query,
) -> anyhow::Result<flotilla_api::v1::ListHubDataResponse> {
    let r = ListPoliciesRequest {
        namespace: query.namespace.clone().unwrap_or_default(),
    };
    hub.idempotent(async || hub.policies().list_hub_data(r.clone()).await)
        .await
}

impl Kind for HubConfigMap {
    type Ocm = serde_json::Value;
    const COLUMNS: &'static [&'static str] = &["NAME", "DATA"];
    const WIDE_COLUMNS: &'static [&'static str] = &["KEYS"];
    const ACROSS_NAMESPACES: bool = true;

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        vec![self.name(), self.data.len().to_string()]
    }

    fn wide_row(&self) -> Vec<String> {
        let mut keys: Vec<&str> = self.data.keys().map(String::as_str).collect();
        keys.sort_unstable();
        vec![keys.join(",")]
    }

    fn to_ocm(&self) -> serde_json::Value {
        let mut v = config_map_json(self);
        if self.immutable {
            v["immutable"] = true.into();
        }
        v
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No hub ConfigMaps found.".into())
    }

    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let items = list(hub, query).await?.config_maps;
        super::named(items, &query.names, "ConfigMap")
    }
}

impl Kind for HubSecretRecord {
    type Ocm = serde_json::Value;
    const COLUMNS: &'static [&'static str] = &["NAME", "TYPE", "DATA"];
    const WIDE_COLUMNS: &'static [&'static str] = &["KEYS", "DIGEST"];
    const ACROSS_NAMESPACES: bool = true;

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        vec![
            self.name(),
            self.r#type.clone(),
            self.keys.len().to_string(),
        ]
    }

    fn wide_row(&self) -> Vec<String> {
        vec![self.keys.join(","), self.data_hash.clone()]
    }

    /// kubectl's shape without `data`: the keys and the digest of the values are annotations
    /// of the printed object only (the hub never returns a value).
    fn to_ocm(&self) -> serde_json::Value {
        let m = self.metadata.clone().unwrap_or_default();
        let labels: std::collections::BTreeMap<&String, &String> = m.labels.iter().collect();
        let mut v = serde_json::json!({
            "apiVersion": CORE_V1,
            "kind": "Secret",
            "type": self.r#type,
            "metadata": {
                "name": m.name,
                "namespace": m.namespace,
                "labels": labels,
                "resourceVersion": m.resource_version.to_string(),
                "annotations": {
                    "flotilla.io/data-keys": self.keys.join(","),
                    "flotilla.io/data-digest": self.data_hash,
                },
            },
        });
        if self.immutable {
            v["immutable"] = true.into();
        }
        v
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No hub Secrets found.".into())
    }

    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let items = list(hub, query).await?.secrets;
        super::named(items, &query.names, "Secret")
    }
}

impl Delete for HubConfigMap {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.policies().delete_hub_config_map(r).await;
        delete_governed(hub, target, "configmap", " from the hub", call).await
    }
}

impl Delete for HubSecretRecord {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.policies().delete_hub_secret(r).await;
        delete_governed(hub, target, "secret", " from the hub", call).await
    }
}

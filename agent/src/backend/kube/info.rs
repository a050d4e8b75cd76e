//! The cluster's facts as its API server gives them (I/O; the arithmetic and detection rules
//! are pure, in [`super::facts`]): `/version`, `/readyz`, capacity and allocatable summed over
//! nodes, the node count, platform and product, and the `id.k8s.io` claim from the
//! kube-system namespace's UID.

use super::facts::{platform, product, sum_quantities};
use crate::backend::ClusterInfo;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::Value;

/// What the cluster says of itself; unhealthy, with the reason, when its API server does not
/// answer or is not ready.
pub(super) async fn gather(client: &Client) -> ClusterInfo {
    let mut info = ClusterInfo {
        healthy: true,
        ..ClusterInfo::default()
    };
    match client.apiserver_version().await {
        Ok(v) => info.kubernetes_version = v.git_version,
        Err(e) => {
            info.healthy = false;
            info.health_message = format!("the API server does not answer: {e}");
            return info;
        }
    }
    let ready = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| e.to_string());
    match ready {
        Ok(req) => match client.request_text(req).await {
            Ok(body) if body.trim() == "ok" || body.contains("passed") => {}
            Ok(body) => {
                info.healthy = false;
                info.health_message = format!("/readyz: {}", body.trim());
            }
            Err(e) => {
                info.healthy = false;
                info.health_message = format!("/readyz: {e}");
            }
        },
        Err(e) => info.health_message = e,
    }
    let nodes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
    );
    if let Ok(list) = nodes.list(&ListParams::default()).await {
        let objects: Vec<Value> = list
            .items
            .into_iter()
            .filter_map(|n| serde_json::to_value(n).ok())
            .collect();
        info.nodes = u32::try_from(objects.len()).ok();
        for (field, into) in [
            ("capacity", &mut info.capacity),
            ("allocatable", &mut info.allocatable),
        ] {
            for resource in ["cpu", "memory", "pods", "ephemeral-storage"] {
                let values: Vec<&str> = objects
                    .iter()
                    .filter_map(|n| n["status"][field][resource].as_str())
                    .collect();
                if !values.is_empty() {
                    into.insert(
                        resource.to_string(),
                        sum_quantities(
                            &values,
                            resource == "memory" || resource == "ephemeral-storage",
                        ),
                    );
                }
            }
        }
        info.platform = objects
            .iter()
            .filter_map(|n| n["spec"]["providerID"].as_str())
            .map(platform)
            .next()
            .unwrap_or("Other")
            .to_string();
        let labels: Vec<&serde_json::Map<String, Value>> = objects
            .iter()
            .filter_map(|n| n["metadata"]["labels"].as_object())
            .collect();
        info.product = product(&info.kubernetes_version, &labels).to_string();
    }
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    if let Ok(ns) = namespaces.get("kube-system").await
        && let Some(uid) = ns.metadata.uid
    {
        info.cluster_id = uid;
    }
    info
}

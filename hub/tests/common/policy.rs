//! Governance fixtures: the policy API, `flotilla apply -f` of OCM documents, waiting for a
//! policy's status.

use super::{SOON, sets_client};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::{
    GetPolicyRequest, ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ObjectMeta, Policy,
};
use flotilla_hub::Hub;
use std::time::Duration;
use tonic::transport::Channel;

pub async fn api(hub: &Hub) -> PolicyServiceClient<Channel> {
    PolicyServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
}

/// Applies every document as `flotilla apply -f` would (namespace `default` when unset).
pub async fn apply(hub: &Hub, yaml: &str) {
    let mut policies = api(hub).await;
    let mut placements = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    for doc in parse_documents(yaml) {
        match doc.expect("fixture parses") {
            Document::Policy(mut p) => {
                default_ns(p.metadata.as_mut());
                policies.apply_policy(p).await.unwrap();
            }
            Document::PlacementBinding(mut b) => {
                default_ns(b.metadata.as_mut());
                policies.apply_placement_binding(b).await.unwrap();
            }
            Document::PolicySet(mut s) => {
                default_ns(s.metadata.as_mut());
                policies.apply_policy_set(s).await.unwrap();
            }
            Document::PlacementRule(mut r) => {
                default_ns(r.metadata.as_mut());
                policies.apply_placement_rule(r).await.unwrap();
            }
            Document::Placement(p) => {
                placements.apply_placement(p).await.unwrap();
            }
            Document::HubConfigMap(mut c) => {
                default_ns(c.metadata.as_mut());
                policies.apply_hub_config_map(c).await.unwrap();
            }
            Document::HubSecret(mut s) => {
                default_ns(s.metadata.as_mut());
                policies.apply_hub_secret(s).await.unwrap();
            }
            other => panic!("unexpected fixture {other:?}"),
        }
    }
}

pub fn default_ns(m: Option<&mut ObjectMeta>) {
    if let Some(m) = m
        && m.namespace.is_empty()
    {
        m.namespace = "default".into();
    }
}

pub async fn bind_default_set(hub: &Hub) {
    sets_client(hub)
        .await
        .apply_binding(ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: "default".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetBindingSpec {
                cluster_set: "default".into(),
            }),
            status: None,
        })
        .await
        .unwrap();
}

pub async fn policy(api: &mut PolicyServiceClient<Channel>, name: &str) -> Policy {
    api.get_policy(GetPolicyRequest {
        namespace: "default".into(),
        name: name.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
}

/// Waits until the policy's status satisfies `pred`.
pub async fn wait_policy(
    api: &mut PolicyServiceClient<Channel>,
    name: &str,
    what: &str,
    pred: impl Fn(&Policy) -> bool,
) -> Policy {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let p = policy(api, name).await;
        if pred(&p) {
            return p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "policy {name} never {what}: {:#?}",
            p.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn compliant(p: &Policy) -> &str {
    p.status.as_ref().map_or("", |s| s.compliant.as_str())
}

pub fn clusters_in(p: &Policy) -> Vec<(String, String)> {
    p.status
        .as_ref()
        .map(|s| {
            s.status
                .iter()
                .map(|c| (c.cluster_name.clone(), c.compliant.clone()))
                .collect()
        })
        .unwrap_or_default()
}

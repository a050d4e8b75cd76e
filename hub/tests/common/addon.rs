//! Add-on fixtures: documents applied through the API, and an add-on agent's lease renewals.

use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_hub::Hub;
use std::time::Duration;

/// Applies every document of `yaml` through the add-on (or placement) API.
pub async fn apply(hub: &Hub, yaml: &str) -> Result<(), tonic::Status> {
    let mut a = AddOnServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    for doc in parse_documents(yaml) {
        match doc.unwrap_or_else(|e| panic!("fixture: {e}")) {
            Document::ClusterManagementAddOn(x) => {
                a.apply_cluster_management_add_on(x).await?;
            }
            Document::ManagedClusterAddOn(x) => {
                a.apply_managed_cluster_add_on(x).await?;
            }
            Document::AddOnTemplate(x) => {
                a.apply_add_on_template(x).await?;
            }
            Document::AddOnDeploymentConfig(x) => {
                a.apply_add_on_deployment_config(x).await?;
            }
            Document::Placement(p) => {
                PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
                    .await
                    .unwrap()
                    .apply_placement(p)
                    .await?;
            }
            other => panic!("unexpected fixture {other:?}"),
        }
    }
    Ok(())
}

/// Renews add-on `addon`'s lease on `cluster` every 200 ms over `client`, as its agent does,
/// until the task is aborted.
pub fn renew_lease(
    client: async_nats::Client,
    addon: &'static str,
    cluster: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let ev = flotilla_bus::Event::new(
                flotilla_bus::addons::lease_type(),
                addon,
                cluster,
                &flotilla_api::v1::AddOnLeaseRenewal {
                    cluster_name: cluster.into(),
                    addon_name: addon.into(),
                    renew_time: Some(flotilla_api::meta::now()),
                },
            );
            let _ = client
                .publish_with_headers(
                    flotilla_bus::addons::subject(addon, cluster, flotilla_bus::addons::KIND_LEASE),
                    flotilla_bus::envelope::headers(&ev),
                    ev.encode(1 << 20).unwrap(),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

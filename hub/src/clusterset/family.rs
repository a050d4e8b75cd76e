//! Cluster sets and bindings as a controller family: loaded from their buckets, settling
//! their status, keeping the clusters' managed namespaces in step; provides [`ClusterSets`].

use super::ClusterSets;
use crate::clusterset::grpc::ClusterSetApi;
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::store;
use flotilla_api::v1::cluster_set_service_server::ClusterSetServiceServer;
use futures::future::BoxFuture;

/// The family.
#[derive(Default)]
pub struct Sets {
    service: Slot<ClusterSetServiceServer<ClusterSetApi>>,
}

impl Family for Sets {
    fn name(&self) -> &'static str {
        "clustersets"
    }

    fn serve(&self, api: Api) -> Api {
        api.with(self.service.served())
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let sets = ClusterSets::load(
                cx.open(store::CLUSTERSETS).await?,
                cx.open(store::BINDINGS).await?,
                cx.deps().inventory.clone(),
            )
            .await?;
            cx.spawn("settle", sets.clone().settle(cx.stop_signal()));
            let (inventory, clusters) = (cx.deps().inventory.clone(), cx.deps().clusters.clone());
            cx.adopt(super::namespaces::spawn(
                sets.clone(),
                inventory,
                clusters,
                cx.stop_signal(),
            ));
            cx.serve_from(
                self.service.slot(),
                ClusterSetServiceServer::new(ClusterSetApi::new(sets.clone())),
            );
            cx.provide(sets);
            Ok(())
        })
    }
}

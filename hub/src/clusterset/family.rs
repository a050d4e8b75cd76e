//! Cluster sets and bindings as a controller family: loaded from their buckets, settling
//! their status, keeping the clusters' managed namespaces in step; provides [`ClusterSets`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.ClusterSetService` | | `GetClusterSet`, `ListClusterSets`, `ListBindings` | | `ApplyClusterSet`, `DeleteClusterSet`, `ApplyBinding`, `DeleteBinding` |

use super::ClusterSets;
use crate::clusterset::grpc::ClusterSetApi;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::store;
use flotilla_api::v1::cluster_set_service_server::ClusterSetServiceServer;

/// The family.
pub struct Sets;

impl Recipe for Sets {
    const NAME: &'static str = "clustersets";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.ClusterSetService",
        &[
            ("ApplyClusterSet", Write, SET_WRITE),
            ("GetClusterSet", Read, FILTERED),
            ("ListClusterSets", Read, FILTERED),
            ("DeleteClusterSet", Write, FLEET_WRITE),
            ("ApplyBinding", Write, BINDING),
            ("ListBindings", Read, FILTERED),
            ("DeleteBinding", Write, NAMESPACE_WRITE),
        ],
    )];
    type Settings = ();
    type Services = (ClusterSetServiceServer<ClusterSetApi>,);

    async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
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
        cx.provide(sets.clone());
        Ok((ClusterSetServiceServer::new(ClusterSetApi::new(sets)),))
    }
}

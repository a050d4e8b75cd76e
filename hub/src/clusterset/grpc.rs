//! `flotilla.v1.ClusterSetService`.

use crate::clusterset::ClusterSets;
use crate::grpc::guard;
use flotilla_api::v1::cluster_set_service_server::ClusterSetService;
use flotilla_api::v1::{
    DeleteBindingRequest, DeleteBindingResponse, DeleteClusterSetResponse, GetClusterSetRequest,
    ListBindingsRequest, ListBindingsResponse, ListClusterSetsRequest, ListClusterSetsResponse,
    ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetView,
};
use tonic::{Request, Response, Status};

/// The service implementation.
pub struct ClusterSetApi {
    sets: ClusterSets,
}

impl ClusterSetApi {
    /// A service over the set registry.
    pub fn new(sets: ClusterSets) -> Self {
        Self { sets }
    }
}

#[tonic::async_trait]
impl ClusterSetService for ClusterSetApi {
    async fn apply_cluster_set(
        &self,
        req: Request<ManagedClusterSet>,
    ) -> Result<Response<ManagedClusterSet>, Status> {
        Ok(Response::new(self.sets.apply_set(req.into_inner()).await?))
    }

    async fn get_cluster_set(
        &self,
        req: Request<GetClusterSetRequest>,
    ) -> Result<Response<ManagedClusterSetView>, Status> {
        let name = req.into_inner().name;
        guard::object("name", &name)?;
        Ok(Response::new(self.sets.get_set(&name)?))
    }

    async fn list_cluster_sets(
        &self,
        _req: Request<ListClusterSetsRequest>,
    ) -> Result<Response<ListClusterSetsResponse>, Status> {
        Ok(Response::new(ListClusterSetsResponse {
            items: self.sets.list_sets(),
        }))
    }

    async fn delete_cluster_set(
        &self,
        req: Request<GetClusterSetRequest>,
    ) -> Result<Response<DeleteClusterSetResponse>, Status> {
        let name = req.into_inner().name;
        guard::object("name", &name)?;
        self.sets.delete_set(&name).await?;
        Ok(Response::new(DeleteClusterSetResponse {}))
    }

    async fn apply_binding(
        &self,
        req: Request<ManagedClusterSetBinding>,
    ) -> Result<Response<ManagedClusterSetBinding>, Status> {
        Ok(Response::new(
            self.sets.apply_binding(req.into_inner()).await?,
        ))
    }

    async fn list_bindings(
        &self,
        req: Request<ListBindingsRequest>,
    ) -> Result<Response<ListBindingsResponse>, Status> {
        Ok(Response::new(ListBindingsResponse {
            items: self.sets.list_bindings(&req.into_inner().namespace),
        }))
    }

    async fn delete_binding(
        &self,
        req: Request<DeleteBindingRequest>,
    ) -> Result<Response<DeleteBindingResponse>, Status> {
        let r = req.into_inner();
        guard::namespace("namespace", &r.namespace, false)?;
        guard::object("name", &r.name)?;
        self.sets.delete_binding(&r.namespace, &r.name).await?;
        Ok(Response::new(DeleteBindingResponse {}))
    }
}

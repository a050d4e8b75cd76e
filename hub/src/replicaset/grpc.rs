//! `flotilla.v1.ReplicaSetService`: ManifestWorkReplicaSets.

use crate::grpc::guard;
use crate::replicaset::{ReplicaSetError, ReplicaSets};
use flotilla_api::v1::replica_set_service_server::ReplicaSetService;
use flotilla_api::v1::{
    DeleteReplicaSetResponse, GetReplicaSetRequest, ListReplicaSetsRequest,
    ListReplicaSetsResponse, ManifestWorkReplicaSet, ReplicaSetEvent, RolloutRequest,
};
use tonic::{Request, Response, Status};

impl From<ReplicaSetError> for Status {
    fn from(e: ReplicaSetError) -> Self {
        match e {
            ReplicaSetError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ReplicaSetError::NotFound(_) => Status::not_found(e.to_string()),
            ReplicaSetError::Unavailable(_) => Status::unavailable(e.to_string()),
        }
    }
}

/// The service implementation.
pub struct ReplicaSetApi {
    sets: ReplicaSets,
}

impl ReplicaSetApi {
    /// A service over the hub's replica sets.
    pub fn new(sets: ReplicaSets) -> Self {
        Self { sets }
    }
}

fn check(r: &GetReplicaSetRequest) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::object("name", &r.name)
}

#[tonic::async_trait]
impl ReplicaSetService for ReplicaSetApi {
    async fn apply_replica_set(
        &self,
        request: Request<ManifestWorkReplicaSet>,
    ) -> Result<Response<ManifestWorkReplicaSet>, Status> {
        Ok(Response::new(self.sets.apply(request.into_inner()).await?))
    }

    async fn get_replica_set(
        &self,
        request: Request<GetReplicaSetRequest>,
    ) -> Result<Response<ManifestWorkReplicaSet>, Status> {
        let r = request.into_inner();
        check(&r)?;
        self.sets
            .get(&r.namespace, &r.name)
            .map(|rs| Response::new((*rs).clone()))
            .ok_or_else(|| {
                Status::not_found(format!(
                    "ManifestWorkReplicaSet {}/{} not found",
                    r.namespace, r.name
                ))
            })
    }

    async fn list_replica_sets(
        &self,
        request: Request<ListReplicaSetsRequest>,
    ) -> Result<Response<ListReplicaSetsResponse>, Status> {
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        Ok(Response::new(ListReplicaSetsResponse {
            items: self
                .sets
                .list(&r.namespace)
                .into_iter()
                .map(|rs| (*rs).clone())
                .collect(),
        }))
    }

    async fn delete_replica_set(
        &self,
        request: Request<GetReplicaSetRequest>,
    ) -> Result<Response<DeleteReplicaSetResponse>, Status> {
        let r = request.into_inner();
        check(&r)?;
        self.sets.delete(&r.namespace, &r.name).await?;
        Ok(Response::new(DeleteReplicaSetResponse {}))
    }

    async fn rollout(
        &self,
        request: Request<RolloutRequest>,
    ) -> Result<Response<ManifestWorkReplicaSet>, Status> {
        let r = request.into_inner();
        check(&GetReplicaSetRequest {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        })?;
        Ok(Response::new(
            self.sets.rollout(&r.namespace, &r.name, &r.action).await?,
        ))
    }

    type WatchReplicaSetsStream = crate::grpc::WatchStream<ReplicaSetEvent>;

    async fn watch_replica_sets(
        &self,
        request: Request<ListReplicaSetsRequest>,
    ) -> Result<Response<Self::WatchReplicaSetsStream>, Status> {
        let watching = crate::grpc::WatchSettings::of(&request);
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        let namespace = r.namespace;
        Ok(Response::new(crate::grpc::watch(
            &watching,
            self.sets.views(),
            move |_, rs: &ManifestWorkReplicaSet| {
                namespace.is_empty()
                    || rs
                        .metadata
                        .as_ref()
                        .is_some_and(|m| m.namespace == namespace)
            },
            |ty, rs: &ManifestWorkReplicaSet| ReplicaSetEvent {
                r#type: ty as i32,
                replica_set: Some(rs.clone()),
            },
        )))
    }
}

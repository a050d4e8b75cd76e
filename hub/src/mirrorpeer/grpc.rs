//! `flotilla.v1.MirrorPeerService`: MirrorPeers (served by the hub running the controllers;
//! others forward).

use crate::grpc::guard;
use crate::mirrorpeer::{MirrorPeerError, MirrorPeers};
use flotilla_api::v1::mirror_peer_service_server::MirrorPeerService;
use flotilla_api::v1::{
    DeleteMirrorPeerResponse, GetMirrorPeerRequest, ListMirrorPeersRequest,
    ListMirrorPeersResponse, MirrorPeer,
};
use tonic::{Request, Response, Status};

impl From<MirrorPeerError> for Status {
    fn from(e: MirrorPeerError) -> Self {
        match e {
            MirrorPeerError::Invalid(_) => Status::invalid_argument(e.to_string()),
            MirrorPeerError::NotFound(_) => Status::not_found(e.to_string()),
            MirrorPeerError::Conflict(_) => Status::aborted(e.to_string()),
            MirrorPeerError::Insecure(_) => Status::failed_precondition(e.to_string()),
            MirrorPeerError::Unavailable(_) | MirrorPeerError::Gone => {
                Status::unavailable(e.to_string())
            }
        }
    }
}

/// The service implementation.
pub struct MirrorPeerApi {
    peers: MirrorPeers,
}

impl MirrorPeerApi {
    /// A service over the hub's MirrorPeers.
    pub fn new(peers: MirrorPeers) -> Self {
        Self { peers }
    }
}

#[tonic::async_trait]
impl MirrorPeerService for MirrorPeerApi {
    async fn apply_mirror_peer(
        &self,
        request: Request<MirrorPeer>,
    ) -> Result<Response<MirrorPeer>, Status> {
        Ok(Response::new(self.peers.apply(request.into_inner()).await?))
    }

    async fn get_mirror_peer(
        &self,
        request: Request<GetMirrorPeerRequest>,
    ) -> Result<Response<MirrorPeer>, Status> {
        let r = request.into_inner();
        guard::object("name", &r.name)?;
        self.peers
            .get(&r.name)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("MirrorPeer {} not found", r.name)))
    }

    async fn list_mirror_peers(
        &self,
        _request: Request<ListMirrorPeersRequest>,
    ) -> Result<Response<ListMirrorPeersResponse>, Status> {
        Ok(Response::new(ListMirrorPeersResponse {
            items: self.peers.list(),
        }))
    }

    async fn delete_mirror_peer(
        &self,
        request: Request<GetMirrorPeerRequest>,
    ) -> Result<Response<DeleteMirrorPeerResponse>, Status> {
        let r = request.into_inner();
        guard::object("name", &r.name)?;
        self.peers.delete(&r.name).await?;
        Ok(Response::new(DeleteMirrorPeerResponse {}))
    }
}

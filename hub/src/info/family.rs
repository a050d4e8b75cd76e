//! `flotilla.v1.InfoService`: which Flotilla the hub runs — its version, its id and the agent
//! versions it accepts ([`flotilla_api::version`]) — for `flotilla version`. A controller
//! family with no task (served by the hub holding the controllers; others forward).
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.InfoService` | | `GetInfo` | | |

use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::Read;
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use flotilla_api::v1::info_service_server::{InfoService, InfoServiceServer};
use flotilla_api::v1::{GetInfoRequest, GetInfoResponse};
use flotilla_api::version;
use tonic::{Request, Response, Status};

/// The family.
pub struct InfoFamily;

impl Recipe for InfoFamily {
    const NAME: &'static str = "info";
    const ACCESS: &'static [Rows] = &[("flotilla.v1.InfoService", &[("GetInfo", Read, ANY)])];
    type Settings = ();
    type Services = (InfoServiceServer<InfoApi>,);

    async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
        let deps = cx.deps();
        let info = GetInfoResponse {
            version: version::VERSION.to_string(),
            hub_id: deps.hub_id.clone(),
            accepts_agents: deps.router.agent_versions.to_string(),
        };
        Ok((InfoServiceServer::new(InfoApi { info }),))
    }
}

/// The service: what this hub is, fixed at start.
pub struct InfoApi {
    info: GetInfoResponse,
}

#[tonic::async_trait]
impl InfoService for InfoApi {
    async fn get_info(
        &self,
        _request: Request<GetInfoRequest>,
    ) -> Result<Response<GetInfoResponse>, Status> {
        Ok(Response::new(self.info.clone()))
    }
}

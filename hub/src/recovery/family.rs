//! The recovery window as a controller family: no task of its own (every hub follows the
//! window and the orphans in its cluster registry), only its gRPC service.
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.RecoveryService` | | `GetRecovery`, `ListOrphans` | | `DecideOrphans`, `FinishRecovery` |

use super::grpc::RecoveryApi;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use flotilla_api::v1::recovery_service_server::RecoveryServiceServer;

/// The family.
pub struct RecoveryFamily;

impl Recipe for RecoveryFamily {
    const NAME: &'static str = "recovery";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.RecoveryService",
        &[
            ("GetRecovery", Read, FLEET_READ),
            ("ListOrphans", Read, FLEET_READ),
            ("DecideOrphans", Write, FLEET_WRITE),
            ("FinishRecovery", Write, FLEET_WRITE),
        ],
    )];
    type Settings = ();
    type Services = (RecoveryServiceServer<RecoveryApi>,);

    async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
        let shared = cx.deps().clusters.shared();
        let api = RecoveryApi::new(shared.recovery.clone(), shared.inventory.clone());
        Ok((RecoveryServiceServer::new(api),))
    }
}

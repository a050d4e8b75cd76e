//! ManifestWorkReplicaSets as a controller family: one actor per replica set over the
//! placements' decisions; provides [`ReplicaSets`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.ReplicaSetService` | | `GetReplicaSet`, `ListReplicaSets`, `WatchReplicaSets` | | `ApplyReplicaSet`, `DeleteReplicaSet`, `Rollout` |

use super::{BUCKET, Deps, ReplicaSets};
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::placement::Placements;
use crate::replicaset::grpc::ReplicaSetApi;
use flotilla_api::v1::replica_set_service_server::ReplicaSetServiceServer;

/// Largest replica set message (a template carries whole manifests).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The family.
pub struct ReplicaSetFamily;

impl Recipe for ReplicaSetFamily {
    const NAME: &'static str = "replicasets";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.ReplicaSetService",
        &[
            ("ApplyReplicaSet", Write, NAMESPACE_WRITE),
            ("GetReplicaSet", Read, FILTERED),
            ("ListReplicaSets", Read, FILTERED),
            ("DeleteReplicaSet", Write, NAMESPACE_WRITE),
            ("Rollout", Write, NAMESPACE_WRITE),
            ("WatchReplicaSets", Read, FILTERED),
        ],
    )];
    type Settings = ();
    type Services = (ReplicaSetServiceServer<ReplicaSetApi>,);

    async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
        let deps = Deps {
            clusters: cx.deps().clusters.clone(),
            works: cx.deps().works.clone(),
            placements: cx.need::<Placements>()?,
            inventory: cx.deps().inventory.clone(),
        };
        let replicasets = ReplicaSets::start(cx.open(BUCKET).await?, deps)
            .await
            .map_err(|e| cx.failed(e))?;
        let stopped = replicasets.clone();
        cx.on_stop(move || async move { stopped.stop().await });
        cx.provide(replicasets.clone());
        Ok((
            ReplicaSetServiceServer::new(ReplicaSetApi::new(replicasets))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        ))
    }
}

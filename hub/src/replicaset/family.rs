//! ManifestWorkReplicaSets as a controller family: one actor per replica set over the
//! placements' decisions; provides [`ReplicaSets`].

use super::{BUCKET, Deps, ReplicaSets};
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::placement::Placements;
use crate::replicaset::grpc::ReplicaSetApi;
use flotilla_api::v1::replica_set_service_server::ReplicaSetServiceServer;
use futures::future::BoxFuture;

/// Largest replica set message (a template carries whole manifests).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The family.
#[derive(Default)]
pub struct ReplicaSetFamily {
    service: Slot<ReplicaSetServiceServer<ReplicaSetApi>>,
}

impl Family for ReplicaSetFamily {
    fn name(&self) -> &'static str {
        "replicasets"
    }

    fn serve(&self, api: Api) -> Api {
        api.with(self.service.served())
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let deps = Deps {
                clusters: cx.deps().clusters.clone(),
                works: cx.deps().works.clone(),
                placements: cx.need::<Placements>()?,
            };
            let replicasets = ReplicaSets::start(cx.open(BUCKET).await?, deps)
                .await
                .map_err(|e| cx.failed(e))?;
            let stopped = replicasets.clone();
            cx.on_stop(move || async move { stopped.stop().await });
            let server = ReplicaSetServiceServer::new(ReplicaSetApi::new(replicasets.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            cx.serve_from(self.service.slot(), server);
            cx.provide(replicasets);
            Ok(())
        })
    }
}

//! MirrorPeers as a controller family: their one task, and the peers' requests
//! (`flotilla.peers.<cluster>`); provides [`MirrorPeers`].

use super::{Buckets, Deps, MirrorPeerConfig, MirrorPeers};
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::mirrorpeer::grpc::MirrorPeerApi;
use flotilla_api::v1::mirror_peer_service_server::MirrorPeerServiceServer;
use futures::future::BoxFuture;

/// The family.
pub struct PeerFamily {
    config: MirrorPeerConfig,
    service: Slot<MirrorPeerServiceServer<MirrorPeerApi>>,
}

impl PeerFamily {
    /// The family with its settings.
    pub fn new(config: MirrorPeerConfig) -> Self {
        Self {
            config,
            service: Slot::default(),
        }
    }
}

impl Family for PeerFamily {
    fn name(&self) -> &'static str {
        "mirrorpeers"
    }

    fn serve(&self, api: Api) -> Api {
        api.with(self.service.served())
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let buckets = Buckets::open(cx).await?;
            let d = cx.deps();
            let deps = Deps {
                inventory: d.inventory.clone(),
                publisher: d.clusters.shared().publisher.clone(),
                config: self.config.clone(),
                secure: d.security.is_some(),
            };
            let (peers, task) = MirrorPeers::spawn(buckets, deps, cx.stop_signal())
                .await
                .map_err(|e| cx.failed(e))?;
            cx.adopt(task);
            let route = super::route::Deps {
                inventory: cx.deps().inventory.clone(),
                metrics: cx.deps().metrics.clone(),
                router: cx.router(),
                limits: self.config.requests,
            };
            let requests = super::route::run(
                cx.deps().nats.clone(),
                peers.clone(),
                route,
                cx.stop_signal(),
            );
            cx.spawn("requests", requests);
            let server = MirrorPeerServiceServer::new(MirrorPeerApi::new(peers.clone()));
            cx.serve_from(self.service.slot(), server);
            cx.provide(peers);
            Ok(())
        })
    }
}

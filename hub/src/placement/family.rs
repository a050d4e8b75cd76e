//! Placements as a controller family: their actors, the dispatcher and the scores, over the
//! cluster sets; provides [`Placements`] and takes AddOnPlacementScore reports.

use super::score_route::{KIND, ScoreTaker};
use super::{Buckets, Deps, PlacementConfig, Placements};
use crate::clusterset::ClusterSets;
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::placement::grpc::PlacementApi;
use crate::report::Kind;
use flotilla_api::v1::placement_service_server::PlacementServiceServer;
use futures::future::BoxFuture;
use std::sync::Arc;

/// The family.
pub struct PlacementFamily {
    config: PlacementConfig,
    service: Slot<PlacementServiceServer<PlacementApi>>,
}

impl PlacementFamily {
    /// The family with its settings.
    pub fn new(config: PlacementConfig) -> Self {
        Self {
            config,
            service: Slot::default(),
        }
    }
}

impl Family for PlacementFamily {
    fn name(&self) -> &'static str {
        "placements"
    }

    fn serve(&self, api: Api) -> Api {
        api.with(self.service.served())
    }

    fn reports(&self) -> &'static [Kind] {
        &[KIND]
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let sets = cx.need::<ClusterSets>()?;
            let buckets = Buckets::open(cx).await?;
            let deps = Deps {
                buckets,
                clusters: cx.deps().inventory.clone(),
                sets,
                metrics: cx.deps().metrics.clone(),
            };
            let (placements, dispatcher) =
                Placements::start(deps, self.config.clone(), cx.stop_signal()).await?;
            cx.adopt(dispatcher);
            let joined = placements.clone();
            cx.on_stop(move || async move { joined.join().await });
            let taker = ScoreTaker {
                scores: placements.scores().clone(),
                metrics: cx.deps().metrics.clone(),
            };
            cx.take_reports(KIND.name, Arc::new(taker));
            cx.serve_from(
                self.service.slot(),
                PlacementServiceServer::new(PlacementApi::new(placements.clone())),
            );
            cx.provide(placements);
            Ok(())
        })
    }
}

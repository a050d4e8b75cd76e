//! Add-ons as a controller family: one actor per ClusterManagementAddOn over the placements,
//! and the add-on agents' subjects (leases, health, credentials); provides [`AddOns`].

use super::{AddOnConfig, AddOns, Deps, Store};
use crate::addon::grpc::AddOnApi;
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::placement::Placements;
use flotilla_api::v1::add_on_service_server::AddOnServiceServer;
use futures::future::BoxFuture;

/// Largest add-on message (templates carry whole manifests).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The family.
pub struct AddOnFamily {
    config: AddOnConfig,
    service: Slot<AddOnServiceServer<AddOnApi>>,
}

impl AddOnFamily {
    /// The family with its settings.
    pub fn new(config: AddOnConfig) -> Self {
        Self {
            config,
            service: Slot::default(),
        }
    }
}

impl Family for AddOnFamily {
    fn name(&self) -> &'static str {
        "addons"
    }

    fn serve(&self, api: Api) -> Api {
        api.with(self.service.served())
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let placements = cx.need::<Placements>()?;
            let mut store = Store::open(&cx.deps().jetstream, cx.deps().stream).await?;
            store.addons = cx.fenced(store.addons);
            store.cluster_addons = cx.fenced(store.cluster_addons);
            store.templates = cx.fenced(store.templates);
            store.configs = cx.fenced(store.configs);
            let deps = Deps {
                clusters: cx.deps().clusters.clone(),
                inventory: cx.deps().inventory.clone(),
                works: cx.deps().works.clone(),
                placements: placements.clone(),
                security: cx.deps().security.clone(),
                config: self.config.clone(),
            };
            let addons = AddOns::start(store, deps).await.map_err(|e| cx.failed(e))?;
            let stopped = addons.clone();
            cx.on_stop(move || async move { stopped.stop().await });
            let (nats, metrics) = (cx.deps().nats.clone(), cx.deps().metrics.clone());
            let router = cx.router();
            let agents = super::router::run(
                nats.clone(),
                addons.clone(),
                placements.scores().clone(),
                metrics.clone(),
                router,
                cx.stop_signal(),
            );
            cx.spawn("agents", agents);
            let router = cx.router();
            let credentials = super::router::run_credentials(
                nats,
                addons.clone(),
                metrics,
                router,
                cx.stop_signal(),
            );
            cx.spawn("credentials", credentials);
            let server = AddOnServiceServer::new(AddOnApi::new(addons.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            cx.serve_from(self.service.slot(), server);
            cx.provide(addons);
            Ok(())
        })
    }
}

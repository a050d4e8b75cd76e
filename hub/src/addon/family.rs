//! Add-ons as a controller family: one actor per ClusterManagementAddOn over the placements,
//! and the add-on agents' subjects (leases, health, credentials); provides [`AddOns`]. Its
//! settings come from its [`Flags`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.AddOnService` | | `GetClusterManagementAddOn`, `ListClusterManagementAddOns`, `GetManagedClusterAddOn`, `ListManagedClusterAddOns`, `WatchManagedClusterAddOns`, `GetAddOnTemplate`, `ListAddOnTemplates`, `GetAddOnDeploymentConfig`, `ListAddOnDeploymentConfigs` | | `ApplyClusterManagementAddOn`, `DeleteClusterManagementAddOn`, `ApplyManagedClusterAddOn`, `DeleteManagedClusterAddOn`, `ApplyAddOnTemplate`, `DeleteAddOnTemplate`, `ApplyAddOnDeploymentConfig`, `DeleteAddOnDeploymentConfig`, `EnableAddOn`, `DisableAddOn` |

use super::deps::{AddOnConfig, Deps};
use super::handle::AddOns;
use super::store::Store;
use crate::addon::grpc::AddOnApi;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::placement::Placements;
use flotilla_api::v1::add_on_service_server::AddOnServiceServer;
use std::time::Duration;

/// Largest add-on message (templates carry whole manifests).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The family.
pub struct AddOnFamily;

impl Recipe for AddOnFamily {
    const NAME: &'static str = "addons";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.AddOnService",
        &[
            ("ApplyClusterManagementAddOn", Write, FLEET_WRITE),
            ("GetClusterManagementAddOn", Read, ANY),
            ("ListClusterManagementAddOns", Read, ANY),
            ("DeleteClusterManagementAddOn", Write, FLEET_WRITE),
            ("ApplyManagedClusterAddOn", Write, CLUSTER_WRITE),
            ("GetManagedClusterAddOn", Read, FILTERED),
            ("ListManagedClusterAddOns", Read, FILTERED),
            ("DeleteManagedClusterAddOn", Write, CLUSTER_WRITE),
            ("WatchManagedClusterAddOns", Read, FILTERED),
            ("ApplyAddOnTemplate", Write, FLEET_WRITE),
            ("GetAddOnTemplate", Read, ANY),
            ("ListAddOnTemplates", Read, ANY),
            ("DeleteAddOnTemplate", Write, FLEET_WRITE),
            ("ApplyAddOnDeploymentConfig", Write, NAMESPACE_WRITE),
            ("GetAddOnDeploymentConfig", Read, FILTERED),
            ("ListAddOnDeploymentConfigs", Read, FILTERED),
            ("DeleteAddOnDeploymentConfig", Write, NAMESPACE_WRITE),
            ("EnableAddOn", Write, CLUSTER_WRITE),
            ("DisableAddOn", Write, CLUSTER_WRITE),
        ],
    )];
    type Settings = AddOnConfig;
    type Services = (AddOnServiceServer<AddOnApi>,);

    async fn start(config: &AddOnConfig, cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
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
            config: config.clone(),
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
        let credentials =
            super::router::run_credentials(nats, addons.clone(), metrics, router, cx.stop_signal());
        cx.spawn("credentials", credentials);
        cx.provide(addons.clone());
        Ok((AddOnServiceServer::new(AddOnApi::new(addons))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),))
    }
}

/// The family's flags (flattened into the `flotilla-hub` binary's through
/// [`crate::controllers::Flags`]).
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Flags {
    /// Seconds an add-on agent's lease stays fresh after its last renewal (OCM: 300).
    #[arg(
        long,
        env = "FLOTILLA_ADDON_LEASE_GRACE_SECONDS",
        default_value_t = 300
    )]
    addon_lease_grace_seconds: u64,
    /// The NATS URL add-on agents reach the hub at: the `HUB_URL` variable of add-on templates
    /// (unset: templates naming it are refused).
    #[arg(long, env = "FLOTILLA_ADDON_HUB_URL")]
    addon_hub_url: Option<String>,
}

impl Flags {
    /// The settings they give.
    pub fn settings(&self, _errors: &mut Vec<String>) -> AddOnConfig {
        AddOnConfig {
            lease_grace: Duration::from_secs(self.addon_lease_grace_seconds.max(1)),
            hub_url: self.addon_hub_url.clone().unwrap_or_default(),
        }
    }
}

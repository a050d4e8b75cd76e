//! ClusterImportPolicies as a controller family: their one task over the pending clusters;
//! provides [`ImportPolicies`]. Its settings come from its [`Flags`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.ImportPolicyService` | | `GetImportPolicy`, `ListImportPolicies`, `WatchImportPolicies` | | `ApplyImportPolicy`, `DeleteImportPolicy` |

use super::{Buckets, Deps, ImportConfig, ImportPolicies};
use crate::controller::positive_rate;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::importpolicy::grpc::ImportPolicyApi;
use flotilla_api::v1::import_policy_service_server::ImportPolicyServiceServer;
use std::time::Duration;

/// The family.
pub struct ImportFamily;

impl Recipe for ImportFamily {
    const NAME: &'static str = "importpolicies";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.ImportPolicyService",
        &[
            ("ApplyImportPolicy", Write, FLEET_WRITE),
            ("GetImportPolicy", Read, FLEET_READ),
            ("ListImportPolicies", Read, FLEET_READ),
            ("DeleteImportPolicy", Write, FLEET_WRITE),
            ("WatchImportPolicies", Read, FLEET_READ),
        ],
    )];
    type Settings = ImportConfig;
    type Services = (ImportPolicyServiceServer<ImportPolicyApi>,);

    async fn start(
        config: &ImportConfig,
        cx: &mut Start<'_>,
    ) -> Result<Self::Services, StartError> {
        let buckets = Buckets::open(cx).await?;
        let d = cx.deps();
        let deps = Deps {
            inventory: d.inventory.clone(),
            clusters: d.clusters.clone(),
            secure: d.security.is_some(),
            agents: d.clusters.shared().publisher.clone(),
            config: config.clone(),
        };
        let (policies, task) = ImportPolicies::spawn(buckets, deps, cx.stop_signal())
            .await
            .map_err(|e| cx.failed(e))?;
        cx.adopt(task);
        cx.provide(policies.clone());
        Ok((ImportPolicyServiceServer::new(ImportPolicyApi::new(
            policies,
        )),))
    }
}

/// The family's flags (flattened into the `flotilla-hub` binary's through
/// [`crate::controllers::Flags`]).
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Flags {
    /// How often ClusterImportPolicies with an object source list it on their spokes.
    #[arg(
        long,
        env = "FLOTILLA_IMPORT_POLL_SECONDS",
        default_value_t = super::DEFAULT_POLL_SECONDS,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    import_poll_seconds: u64,
    /// Live clusters one ClusterImportPolicy with an object source may have created, at most:
    /// its source spokes' lists decide what exists, so a hostile or broken spoke stops here
    /// (the objects past it are named in the policy's status).
    #[arg(
        long,
        env = "FLOTILLA_IMPORT_MAX_CLUSTERS",
        default_value_t = super::DEFAULT_MAX_CREATED,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000)
    )]
    import_max_clusters: usize,
    /// Clusters one ClusterImportPolicy with an object source creates per second, at most
    /// (bursts of 100); the rest are created in later passes.
    #[arg(
        long,
        env = "FLOTILLA_IMPORT_CREATE_RATE",
        default_value_t = super::DEFAULT_CREATE_RATE,
        value_parser = positive_rate
    )]
    import_create_rate: f64,
}

impl Flags {
    /// The settings they give.
    pub fn settings(&self, _errors: &mut Vec<String>) -> ImportConfig {
        ImportConfig {
            poll: Duration::from_secs(self.import_poll_seconds),
            max_created: self.import_max_clusters,
            create_rate: self.import_create_rate,
            ..ImportConfig::default()
        }
    }
}

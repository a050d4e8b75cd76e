//! ClusterImportPolicies as a controller family: their one task over the pending clusters;
//! provides [`ImportPolicies`].

use super::{Buckets, Deps, ImportConfig, ImportPolicies};
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::importpolicy::grpc::ImportPolicyApi;
use flotilla_api::v1::import_policy_service_server::ImportPolicyServiceServer;
use futures::future::BoxFuture;

/// The family.
pub struct ImportFamily {
    config: ImportConfig,
    service: Slot<ImportPolicyServiceServer<ImportPolicyApi>>,
}

impl ImportFamily {
    /// The family with its settings.
    pub fn new(config: ImportConfig) -> Self {
        Self {
            config,
            service: Slot::default(),
        }
    }
}

impl Family for ImportFamily {
    fn name(&self) -> &'static str {
        "importpolicies"
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
                clusters: d.clusters.clone(),
                secure: d.security.is_some(),
                agents: d.clusters.shared().publisher.clone(),
                config: self.config.clone(),
            };
            let (policies, task) = ImportPolicies::spawn(buckets, deps, cx.stop_signal())
                .await
                .map_err(|e| cx.failed(e))?;
            cx.adopt(task);
            let server = ImportPolicyServiceServer::new(ImportPolicyApi::new(policies.clone()));
            cx.serve_from(self.service.slot(), server);
            cx.provide(policies);
            Ok(())
        })
    }
}

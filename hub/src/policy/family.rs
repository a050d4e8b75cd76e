//! Governance as a controller family: policies, bindings, policy sets and placement rules over
//! the placements; provides [`Policies`] and takes policy status reports.

use super::route::{KIND, PolicyTaker};
use super::{Buckets, Deps, Policies};
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::placement::Placements;
use crate::policy::grpc::PolicyApi;
use crate::report::Kind;
use flotilla_api::v1::policy_service_server::PolicyServiceServer;
use futures::future::BoxFuture;
use std::sync::Arc;

/// Largest policy message (object templates carry whole manifests).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The family.
#[derive(Default)]
pub struct PolicyFamily {
    service: Slot<PolicyServiceServer<PolicyApi>>,
}

impl Family for PolicyFamily {
    fn name(&self) -> &'static str {
        "policies"
    }

    fn serve(&self, api: Api) -> Api {
        api.with(self.service.served())
    }

    fn reports(&self) -> &'static [Kind] {
        &[KIND]
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let buckets = Buckets::open(cx).await?;
            let deps = Deps {
                placements: cx.need::<Placements>()?,
                clusters: cx.deps().inventory.clone(),
                publisher: cx.deps().clusters.shared().publisher.clone(),
                metrics: cx.deps().metrics.clone(),
            };
            let policies = Policies::start(buckets, deps)
                .await
                .map_err(|e| cx.failed(e))?;
            let stopped = policies.clone();
            cx.on_stop(move || async move { stopped.stop().await });
            cx.take_reports(KIND.name, Arc::new(PolicyTaker(policies.clone())));
            let server = PolicyServiceServer::new(PolicyApi::new(policies.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            cx.serve_from(self.service.slot(), server);
            cx.provide(policies);
            Ok(())
        })
    }
}

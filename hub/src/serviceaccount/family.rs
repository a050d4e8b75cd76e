//! ManagedServiceAccounts as a controller family: the accounts' one task; provides
//! [`ServiceAccounts`] and takes the clusters' token reports.

use super::route::{AccountTaker, KIND};
use super::{Buckets, Deps, MsaConfig, ServiceAccounts};
use crate::controller::{Family, Slot, Start, StartError};
use crate::grpc::api::Api;
use crate::report::Kind;
use crate::serviceaccount::grpc::ServiceAccountApi;
use flotilla_api::v1::service_account_service_server::ServiceAccountServiceServer;
use futures::future::BoxFuture;
use std::sync::Arc;

/// The family.
pub struct AccountFamily {
    config: MsaConfig,
    service: Slot<ServiceAccountServiceServer<ServiceAccountApi>>,
}

impl AccountFamily {
    /// The family with its settings (the sealing key among them).
    pub fn new(config: MsaConfig) -> Self {
        Self {
            config,
            service: Slot::default(),
        }
    }
}

impl Family for AccountFamily {
    fn name(&self) -> &'static str {
        "serviceaccounts"
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
                clusters: cx.deps().inventory.clone(),
                publisher: cx.deps().clusters.shared().publisher.clone(),
                metrics: cx.deps().metrics.clone(),
                config: self.config.clone(),
            };
            let accounts = ServiceAccounts::start(buckets, deps)
                .await
                .map_err(|e| cx.failed(e))?;
            let stopped = accounts.clone();
            cx.on_stop(move || async move { stopped.stop().await });
            cx.take_reports(KIND.name, Arc::new(AccountTaker(accounts.clone())));
            let server = ServiceAccountServiceServer::new(ServiceAccountApi::new(accounts.clone()));
            cx.serve_from(self.service.slot(), server);
            cx.provide(accounts);
            Ok(())
        })
    }
}

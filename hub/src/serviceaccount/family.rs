//! ManagedServiceAccounts as a controller family: the accounts' one task; provides
//! [`ServiceAccounts`] and takes the clusters' token reports.
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it). A
//! deployer may ask for a token: the service gives it only when one of its execute-as grants
//! covers the ServiceAccount on the cluster ([`super::grpc`]).
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.ServiceAccountService` | | `GetManagedServiceAccount`, `ListManagedServiceAccounts` | `GetManagedServiceAccountToken` | `ApplyManagedServiceAccount`, `DeleteManagedServiceAccount` |

use super::route::{AccountTaker, KIND};
use super::{Buckets, Deps, MsaConfig, ServiceAccounts};
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write, WriteWork};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::report::Kind;
use crate::serviceaccount::grpc::ServiceAccountApi;
use flotilla_api::v1::service_account_service_server::ServiceAccountServiceServer;
use std::sync::Arc;

/// The family (its settings carry the sealing key).
pub struct AccountFamily;

impl Recipe for AccountFamily {
    const NAME: &'static str = "serviceaccounts";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.ServiceAccountService",
        &[
            ("ApplyManagedServiceAccount", Write, CLUSTER_WRITE),
            ("GetManagedServiceAccount", Read, FILTERED),
            ("ListManagedServiceAccounts", Read, FILTERED),
            ("DeleteManagedServiceAccount", Write, CLUSTER_WRITE),
            (
                "GetManagedServiceAccountToken",
                WriteWork,
                CLUSTER_CREDENTIALS,
            ),
        ],
    )];
    const REPORTS: &'static [Kind] = &[KIND];
    type Settings = MsaConfig;
    type Services = (ServiceAccountServiceServer<ServiceAccountApi>,);

    async fn start(config: &MsaConfig, cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
        let buckets = Buckets::open(cx).await?;
        let deps = Deps {
            clusters: cx.deps().inventory.clone(),
            publisher: cx.deps().clusters.shared().publisher.clone(),
            metrics: cx.deps().metrics.clone(),
            config: config.clone(),
        };
        let accounts = ServiceAccounts::start(buckets, deps)
            .await
            .map_err(|e| cx.failed(e))?;
        let stopped = accounts.clone();
        cx.on_stop(move || async move { stopped.stop().await });
        cx.take_reports(KIND.name, Arc::new(AccountTaker(accounts.clone())));
        cx.provide(accounts.clone());
        Ok((ServiceAccountServiceServer::new(ServiceAccountApi::new(
            accounts,
        )),))
    }
}

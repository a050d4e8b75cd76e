//! `flotilla.v1.ServiceAccountService`: ManagedServiceAccounts, and their current token for
//! `flotilla kubeconfig --service-account` (the hub opens the sealed box; the token leaves only
//! over the API's TLS, to admins and to deployers that may act as the ServiceAccount).

use crate::grpc::auth::Identity;
use crate::grpc::guard;
use crate::serviceaccount::{MsaError, ServiceAccounts};
use flotilla_api::v1::service_account_service_server::ServiceAccountService;
use flotilla_api::v1::{
    DeleteManagedServiceAccountResponse, GetManagedServiceAccountRequest,
    ListManagedServiceAccountsRequest, ListManagedServiceAccountsResponse, ManagedServiceAccount,
    ManagedServiceAccountToken,
};
use tonic::{Request, Response, Status};

impl From<MsaError> for Status {
    fn from(e: MsaError) -> Self {
        match e {
            MsaError::Invalid(_) => Status::invalid_argument(e.to_string()),
            MsaError::NotFound(_) => Status::not_found(e.to_string()),
            MsaError::Conflict(_) => Status::aborted(e.to_string()),
            MsaError::NoToken(_) => Status::failed_precondition(e.to_string()),
            MsaError::Denied(_) => Status::permission_denied(e.to_string()),
            MsaError::Unavailable(_) | MsaError::Gone => Status::unavailable(e.to_string()),
        }
    }
}

/// The service implementation.
pub struct ServiceAccountApi {
    accounts: ServiceAccounts,
}

impl ServiceAccountApi {
    /// A service over the hub's ManagedServiceAccounts.
    pub fn new(accounts: ServiceAccounts) -> Self {
        Self { accounts }
    }
}

fn check(r: &GetManagedServiceAccountRequest) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::object("name", &r.name)
}

#[tonic::async_trait]
impl ServiceAccountService for ServiceAccountApi {
    async fn apply_managed_service_account(
        &self,
        request: Request<ManagedServiceAccount>,
    ) -> Result<Response<ManagedServiceAccount>, Status> {
        Ok(Response::new(
            self.accounts.apply(request.into_inner()).await?,
        ))
    }

    async fn get_managed_service_account(
        &self,
        request: Request<GetManagedServiceAccountRequest>,
    ) -> Result<Response<ManagedServiceAccount>, Status> {
        let r = request.into_inner();
        check(&r)?;
        self.accounts
            .get(&r.namespace, &r.name)
            .map(Response::new)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "ManagedServiceAccount {}/{} not found",
                    r.namespace, r.name
                ))
            })
    }

    async fn list_managed_service_accounts(
        &self,
        request: Request<ListManagedServiceAccountsRequest>,
    ) -> Result<Response<ListManagedServiceAccountsResponse>, Status> {
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        Ok(Response::new(ListManagedServiceAccountsResponse {
            items: self.accounts.list(&r.namespace),
        }))
    }

    async fn delete_managed_service_account(
        &self,
        request: Request<GetManagedServiceAccountRequest>,
    ) -> Result<Response<DeleteManagedServiceAccountResponse>, Status> {
        let r = request.into_inner();
        check(&r)?;
        self.accounts.delete(&r.namespace, &r.name).await?;
        Ok(Response::new(DeleteManagedServiceAccountResponse {}))
    }

    async fn get_managed_service_account_token(
        &self,
        request: Request<GetManagedServiceAccountRequest>,
    ) -> Result<Response<ManagedServiceAccountToken>, Status> {
        let caller = request.extensions().get::<Identity>().cloned();
        let r = request.into_inner();
        check(&r)?;
        Ok(Response::new(
            self.accounts
                .token(&r.namespace, &r.name, caller.as_ref())
                .await?,
        ))
    }
}

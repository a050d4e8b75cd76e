//! `flotilla.v1.ServiceAccountService`: ManagedServiceAccounts, and their current token for
//! `flotilla kubeconfig --service-account` (the hub opens the sealed box; the token leaves only
//! over the API's TLS, to admins and to deployers that may act as the ServiceAccount).
//!
//! Fenced by the caller's grants (issue 48): a ManagedServiceAccount is an object of its
//! cluster's namespace — read by the viewers of the cluster's sets, written by their admins,
//! and its token handed to their admins (or, as before, to a CSV deployer whose execute-as
//! grants cover it).

use crate::grants::{Target, Verb};
use crate::grpc::auth::{Identity, Role};
use crate::grpc::guard::{self, Teams};
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

/// Whether the caller of `req` may `verb` the accounts of cluster `cluster` (`action` for the
/// refusal).
fn allow<T>(req: &Request<T>, verb: Verb, cluster: &str, action: &str) -> Result<(), Status> {
    let (teams, caller) = Teams::of(req);
    teams
        .allow(
            caller.as_ref(),
            verb,
            Target::Cluster { name: cluster },
            action,
        )
        .map(drop)
}

#[tonic::async_trait]
impl ServiceAccountService for ServiceAccountApi {
    async fn apply_managed_service_account(
        &self,
        request: Request<ManagedServiceAccount>,
    ) -> Result<Response<ManagedServiceAccount>, Status> {
        let (cluster, name) = request
            .get_ref()
            .metadata
            .as_ref()
            .map(|m| (m.namespace.clone(), m.name.clone()))
            .unwrap_or_default();
        guard::cluster("metadata.namespace", &cluster, false)?;
        let action = format!("apply ManagedServiceAccount {cluster}/{name}");
        allow(&request, Verb::Write, &cluster, &action)?;
        Ok(Response::new(
            self.accounts.apply(request.into_inner()).await?,
        ))
    }

    async fn get_managed_service_account(
        &self,
        request: Request<GetManagedServiceAccountRequest>,
    ) -> Result<Response<ManagedServiceAccount>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        let action = format!("get ManagedServiceAccount {}/{}", r.namespace, r.name);
        allow(&request, Verb::Read, &r.namespace, &action)?;
        let r = request.into_inner();
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
        let (teams, caller) = Teams::of(&request);
        let vis = teams.visibility(caller.as_ref());
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        let mut items = self.accounts.list(&r.namespace);
        items.retain(|a| vis.cluster(a.metadata.as_ref().map_or("", |m| m.namespace.as_str())));
        Ok(Response::new(ListManagedServiceAccountsResponse { items }))
    }

    async fn delete_managed_service_account(
        &self,
        request: Request<GetManagedServiceAccountRequest>,
    ) -> Result<Response<DeleteManagedServiceAccountResponse>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        let action = format!("delete ManagedServiceAccount {}/{}", r.namespace, r.name);
        allow(&request, Verb::Write, &r.namespace, &action)?;
        let r = request.into_inner();
        self.accounts.delete(&r.namespace, &r.name).await?;
        Ok(Response::new(DeleteManagedServiceAccountResponse {}))
    }

    async fn get_managed_service_account_token(
        &self,
        request: Request<GetManagedServiceAccountRequest>,
    ) -> Result<Response<ManagedServiceAccountToken>, Status> {
        let caller = request.extensions().get::<Identity>().cloned();
        check(request.get_ref())?;
        let r = request.get_ref();
        let action = format!(
            "fetch the token of ManagedServiceAccount {}/{}",
            r.namespace, r.name
        );
        // A set admin of the cluster gets it as an admin does; a CSV deployer by its
        // execute-as grants, checked on the token's ServiceAccount.
        // A deployer's refusal by the grants is not audited: its execute-as grants decide
        // next, and that outcome is the audit line (review r1 §11).
        let deployer = caller.as_ref().filter(|c| c.role() == Role::Deployer);
        let (teams, _) = Teams::of(&request);
        let target = Target::Cluster { name: &r.namespace };
        let decided = deployer.and_then(|d| teams.decide(d, Verb::Credentials, &target));
        let by_grants = match decided {
            Some(crate::grants::Decision::Missing(_)) => false,
            _ => {
                allow(&request, Verb::Credentials, &r.namespace, &action)?;
                true
            }
        };
        let r = request.into_inner();
        let checked = if by_grants { None } else { caller.as_ref() };
        if by_grants && let Some(who) = caller.as_ref() {
            tracing::info!(caller = %who.name(), cluster.name = %r.namespace, account = %r.name, "ManagedServiceAccount token fetched by the grants");
        }
        let token = self.accounts.token(&r.namespace, &r.name, checked).await;
        if let Some(who) = caller.as_ref().filter(|_| !by_grants) {
            match &token {
                Ok(_) => {
                    let grant = format!("deployer execute-as {}", who.grants());
                    guard::audit_line(&who.principal, &action, guard::Outcome::Allowed(&grant));
                }
                Err(e) => {
                    let why = e.to_string();
                    guard::audit_line(&who.principal, &action, guard::Outcome::Refused(&why));
                }
            }
        }
        Ok(Response::new(token?))
    }
}

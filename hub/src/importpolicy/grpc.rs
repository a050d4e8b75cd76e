//! `flotilla.v1.ImportPolicyService`: ClusterImportPolicies (served by the hub running the
//! controllers; others forward).

use crate::grpc::guard;
use crate::importpolicy::{ImportError, ImportPolicies};
use flotilla_api::v1::import_policy_service_server::ImportPolicyService;
use flotilla_api::v1::{
    ClusterImportPolicy, DeleteImportPolicyResponse, GetImportPolicyRequest, ImportPolicyEvent,
    ListImportPoliciesRequest, ListImportPoliciesResponse,
};
use tonic::{Request, Response, Status};

impl From<ImportError> for Status {
    fn from(e: ImportError) -> Self {
        match e {
            ImportError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ImportError::NotFound(_) => Status::not_found(e.to_string()),
            ImportError::Owned { .. } => Status::failed_precondition(e.to_string()),
            ImportError::Unavailable(_) | ImportError::Gone => Status::unavailable(e.to_string()),
        }
    }
}

/// The service implementation.
pub struct ImportPolicyApi {
    policies: ImportPolicies,
}

impl ImportPolicyApi {
    /// A service over the hub's ClusterImportPolicies.
    pub fn new(policies: ImportPolicies) -> Self {
        Self { policies }
    }
}

#[tonic::async_trait]
impl ImportPolicyService for ImportPolicyApi {
    async fn apply_import_policy(
        &self,
        request: Request<ClusterImportPolicy>,
    ) -> Result<Response<ClusterImportPolicy>, Status> {
        Ok(Response::new(
            self.policies.apply(request.into_inner()).await?,
        ))
    }

    async fn get_import_policy(
        &self,
        request: Request<GetImportPolicyRequest>,
    ) -> Result<Response<ClusterImportPolicy>, Status> {
        let r = request.into_inner();
        guard::object("name", &r.name)?;
        self.policies
            .get(&r.name)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("ClusterImportPolicy {} not found", r.name)))
    }

    async fn list_import_policies(
        &self,
        _request: Request<ListImportPoliciesRequest>,
    ) -> Result<Response<ListImportPoliciesResponse>, Status> {
        Ok(Response::new(ListImportPoliciesResponse {
            items: self.policies.list(),
        }))
    }

    async fn delete_import_policy(
        &self,
        request: Request<GetImportPolicyRequest>,
    ) -> Result<Response<DeleteImportPolicyResponse>, Status> {
        let r = request.into_inner();
        guard::object("name", &r.name)?;
        self.policies.delete(&r.name).await?;
        Ok(Response::new(DeleteImportPolicyResponse {}))
    }

    type WatchImportPoliciesStream = crate::grpc::WatchStream<ImportPolicyEvent>;

    async fn watch_import_policies(
        &self,
        request: Request<ListImportPoliciesRequest>,
    ) -> Result<Response<Self::WatchImportPoliciesStream>, Status> {
        Ok(Response::new(crate::grpc::watch(
            &crate::grpc::WatchSettings::of(&request),
            self.policies.views(),
            |_, _| true,
            |ty, p: &ClusterImportPolicy| ImportPolicyEvent {
                r#type: ty as i32,
                policy: Some(p.clone()),
            },
        )))
    }
}

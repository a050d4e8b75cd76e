//! `flotilla.v1.GitRepoService`: GitRepos (served by the hub running the controllers; others
//! forward).
//!
//! Fenced by the caller's grants (issue 48) as replica sets are: a GitRepo is an object of its
//! namespace, read by the namespace's viewers and written (and synced) by its editors; the
//! replica sets it writes are in the same namespace.

use crate::gitops::{GitRepoError, GitRepos};
use crate::grants::{Target, Verb};
use crate::grpc::guard;
use flotilla_api::v1::git_repo_service_server::GitRepoService;
use flotilla_api::v1::{
    DeleteGitRepoResponse, GetGitRepoRequest, GitRepo, ListGitRepoClustersRequest,
    ListGitRepoClustersResponse, ListGitReposRequest, ListGitReposResponse, RolloutRequest,
};
use tonic::{Request, Response, Status};

impl From<GitRepoError> for Status {
    fn from(e: GitRepoError) -> Self {
        match e {
            GitRepoError::Invalid(_) => Status::invalid_argument(e.to_string()),
            GitRepoError::NotFound(_) => Status::not_found(e.to_string()),
            GitRepoError::Exhausted(_) => Status::resource_exhausted(e.to_string()),
            GitRepoError::Refused(_) => Status::failed_precondition(e.to_string()),
            GitRepoError::ReplicaSet { .. } | GitRepoError::Unavailable(_) | GitRepoError::Gone => {
                Status::unavailable(e.to_string())
            }
        }
    }
}

/// The service implementation.
pub struct GitRepoApi {
    repos: GitRepos,
}

impl GitRepoApi {
    /// A service over the hub's GitRepos.
    pub fn new(repos: GitRepos) -> Self {
        Self { repos }
    }
}

fn check(r: &GetGitRepoRequest) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::namespace("name", &r.name, false)
}

/// Whether the caller of `req` may `verb` GitRepo `namespace/name` (`what`: "get", …).
fn allow<T>(
    req: &Request<T>,
    verb: Verb,
    namespace: &str,
    name: &str,
    what: &str,
) -> Result<(), Status> {
    guard::check(
        req,
        verb,
        Target::Namespace { name: namespace },
        &format!("{what} GitRepo {namespace}/{name}"),
    )
}

#[tonic::async_trait]
impl GitRepoService for GitRepoApi {
    async fn apply_git_repo(&self, request: Request<GitRepo>) -> Result<Response<GitRepo>, Status> {
        let (namespace, name) = request
            .get_ref()
            .metadata
            .as_ref()
            .map(|m| (m.namespace.clone(), m.name.clone()))
            .unwrap_or_default();
        guard::namespace("metadata.namespace", &namespace, false)?;
        allow(&request, Verb::Write, &namespace, &name, "apply")?;
        Ok(Response::new(self.repos.apply(request.into_inner()).await?))
    }

    async fn get_git_repo(
        &self,
        request: Request<GetGitRepoRequest>,
    ) -> Result<Response<GitRepo>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        allow(&request, Verb::Read, &r.namespace, &r.name, "get")?;
        let r = request.into_inner();
        self.repos
            .get(&r.namespace, &r.name)
            .map(Response::new)
            .ok_or_else(|| {
                Status::not_found(format!("GitRepo {}/{} not found", r.namespace, r.name))
            })
    }

    async fn list_git_repos(
        &self,
        request: Request<ListGitReposRequest>,
    ) -> Result<Response<ListGitReposResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        Ok(Response::new(ListGitReposResponse {
            items: self
                .repos
                .list(&r.namespace)
                .into_iter()
                .filter(|g| vis.namespace(g.metadata.as_ref().map_or("", |m| &m.namespace)))
                .collect(),
        }))
    }

    async fn delete_git_repo(
        &self,
        request: Request<GetGitRepoRequest>,
    ) -> Result<Response<DeleteGitRepoResponse>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        allow(&request, Verb::Write, &r.namespace, &r.name, "delete")?;
        let r = request.into_inner();
        self.repos.delete(&r.namespace, &r.name).await?;
        Ok(Response::new(DeleteGitRepoResponse {}))
    }

    async fn sync_git_repo(
        &self,
        request: Request<GetGitRepoRequest>,
    ) -> Result<Response<GitRepo>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        allow(&request, Verb::Write, &r.namespace, &r.name, "sync")?;
        let r = request.into_inner();
        Ok(Response::new(self.repos.sync(&r.namespace, &r.name).await?))
    }

    async fn list_git_repo_clusters(
        &self,
        request: Request<ListGitRepoClustersRequest>,
    ) -> Result<Response<ListGitRepoClustersResponse>, Status> {
        let r = request.get_ref();
        check(&GetGitRepoRequest {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        })?;
        allow(
            &request,
            Verb::Read,
            &r.namespace,
            &r.name,
            "get the clusters of",
        )?;
        let r = request.into_inner();
        let (rows, truncated) = self.repos.clusters(&r.namespace, &r.name, &r.state)?;
        Ok(Response::new(ListGitRepoClustersResponse {
            rows,
            truncated,
        }))
    }

    async fn rollout_git_repo(
        &self,
        request: Request<RolloutRequest>,
    ) -> Result<Response<GitRepo>, Status> {
        let r = request.get_ref();
        check(&GetGitRepoRequest {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        })?;
        allow(&request, Verb::Write, &r.namespace, &r.name, "roll out")?;
        let r = request.into_inner();
        Ok(Response::new(
            self.repos.rollout(&r.namespace, &r.name, &r.action).await?,
        ))
    }
}

//! `flotilla.v1.ReplicaSetService`: ManifestWorkReplicaSets.
//!
//! Fenced by the caller's grants (issue 48): a replica set is an object of its namespace, read
//! by the namespace's viewers and written (and rolled out) by its editors; the works it makes
//! in the clusters' namespaces are the hub's, bounded by the sets bound in its namespace.

use crate::grants::{Target, Verb};
use crate::grpc::guard;
use crate::replicaset::{ReplicaSetError, ReplicaSets, Writer};
use flotilla_api::v1::replica_set_service_server::ReplicaSetService;
use flotilla_api::v1::{
    DeleteReplicaSetResponse, GetReplicaSetRequest, ListReplicaSetsRequest,
    ListReplicaSetsResponse, ManifestWorkReplicaSet, ReplicaSetEvent, RolloutRequest,
};
use tonic::{Request, Response, Status};

impl From<ReplicaSetError> for Status {
    fn from(e: ReplicaSetError) -> Self {
        match e {
            ReplicaSetError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ReplicaSetError::NotFound(_) => Status::not_found(e.to_string()),
            ReplicaSetError::Unavailable(_) => Status::unavailable(e.to_string()),
            ReplicaSetError::Refused(_) => Status::failed_precondition(e.to_string()),
        }
    }
}

/// The caller: a user, who forced the write when the request says `flotilla-force: true`
/// (`flotilla apply --force`: a replica set a GitRepo writes is then written all the same).
fn writer<T>(req: &Request<T>) -> Writer<'static> {
    match req.metadata().get(flotilla_api::meta::FORCE_HEADER) {
        Some(v) if v == "true" => Writer::Forced,
        _ => Writer::User,
    }
}

/// The service implementation.
pub struct ReplicaSetApi {
    sets: ReplicaSets,
}

impl ReplicaSetApi {
    /// A service over the hub's replica sets.
    pub fn new(sets: ReplicaSets) -> Self {
        Self { sets }
    }
}

fn check(r: &GetReplicaSetRequest) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::object("name", &r.name)
}

/// Whether the caller of `req` may `verb` replica set `namespace/name` (`what`: "get", …).
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
        &format!("{what} ManifestWorkReplicaSet {namespace}/{name}"),
    )
}

#[tonic::async_trait]
impl ReplicaSetService for ReplicaSetApi {
    async fn apply_replica_set(
        &self,
        request: Request<ManifestWorkReplicaSet>,
    ) -> Result<Response<ManifestWorkReplicaSet>, Status> {
        let (namespace, name) = request
            .get_ref()
            .metadata
            .as_ref()
            .map(|m| (m.namespace.clone(), m.name.clone()))
            .unwrap_or_default();
        guard::namespace("metadata.namespace", &namespace, false)?;
        allow(&request, Verb::Write, &namespace, &name, "apply")?;
        let writer = writer(&request);
        Ok(Response::new(
            self.sets.apply_as(request.into_inner(), writer).await?,
        ))
    }

    async fn get_replica_set(
        &self,
        request: Request<GetReplicaSetRequest>,
    ) -> Result<Response<ManifestWorkReplicaSet>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        allow(&request, Verb::Read, &r.namespace, &r.name, "get")?;
        let r = request.into_inner();
        self.sets
            .get(&r.namespace, &r.name)
            .map(|rs| Response::new((*rs).clone()))
            .ok_or_else(|| {
                Status::not_found(format!(
                    "ManifestWorkReplicaSet {}/{} not found",
                    r.namespace, r.name
                ))
            })
    }

    async fn list_replica_sets(
        &self,
        request: Request<ListReplicaSetsRequest>,
    ) -> Result<Response<ListReplicaSetsResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        Ok(Response::new(ListReplicaSetsResponse {
            items: self
                .sets
                .list(&r.namespace)
                .into_iter()
                .filter(|rs| vis.namespace(rs.metadata.as_ref().map_or("", |m| &m.namespace)))
                .map(|rs| (*rs).clone())
                .collect(),
        }))
    }

    async fn delete_replica_set(
        &self,
        request: Request<GetReplicaSetRequest>,
    ) -> Result<Response<DeleteReplicaSetResponse>, Status> {
        check(request.get_ref())?;
        let r = request.get_ref();
        allow(&request, Verb::Write, &r.namespace, &r.name, "delete")?;
        let writer = writer(&request);
        let r = request.into_inner();
        self.sets.delete_as(&r.namespace, &r.name, writer).await?;
        Ok(Response::new(DeleteReplicaSetResponse {}))
    }

    async fn rollout(
        &self,
        request: Request<RolloutRequest>,
    ) -> Result<Response<ManifestWorkReplicaSet>, Status> {
        let r = request.get_ref();
        check(&GetReplicaSetRequest {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        })?;
        allow(&request, Verb::Write, &r.namespace, &r.name, "roll out")?;
        let writer = writer(&request);
        let r = request.into_inner();
        Ok(Response::new(
            self.sets
                .rollout_as(&r.namespace, &r.name, &r.action, writer)
                .await?,
        ))
    }

    type WatchReplicaSetsStream = crate::grpc::WatchStream<ReplicaSetEvent>;

    async fn watch_replica_sets(
        &self,
        request: Request<ListReplicaSetsRequest>,
    ) -> Result<Response<Self::WatchReplicaSetsStream>, Status> {
        let watching = crate::grpc::WatchSettings::of(&request);
        let (teams, caller) = guard::Teams::of(&request);
        let fence =
            crate::grpc::WatchFence::new(&teams, caller.as_ref(), crate::grpc::By::InNamespace);
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        let namespace = r.namespace;
        Ok(Response::new(crate::grpc::watch_fenced(
            &watching,
            self.sets.views(),
            fence,
            move |_, rs: &ManifestWorkReplicaSet| {
                namespace.is_empty()
                    || rs
                        .metadata
                        .as_ref()
                        .is_some_and(|m| m.namespace == namespace)
            },
            |ty, rs: &ManifestWorkReplicaSet| ReplicaSetEvent {
                r#type: ty as i32,
                replica_set: Some(rs.clone()),
            },
        )))
    }
}

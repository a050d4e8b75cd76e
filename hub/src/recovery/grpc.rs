//! `flotilla.v1.RecoveryService`: the window and its orphans (served by the hub running the
//! controllers; others forward).

use super::{Recovery, RecoveryError};
use crate::grpc::auth::Identity;
use crate::grpc::guard;
use flotilla_api::v1::recovery_service_server::RecoveryService;
use flotilla_api::v1::{
    DecideOrphansRequest, FinishRecoveryRequest, GetRecoveryRequest, ListOrphansRequest,
    ListOrphansResponse, OrphanDecision, RecoveryStatus,
};
use flotilla_hub_core::cluster::rules;
use flotilla_hub_core::inventory::ClusterInventory;
use tonic::{Request, Response, Status};

/// The most orphans one `ListOrphans` answer holds (about 200 bytes each: far under the
/// 4 MiB a gRPC client takes by default).
const PAGE: usize = 500;

fn status(e: RecoveryError) -> Status {
    match e {
        RecoveryError::NotFound { .. } => Status::not_found(e.to_string()),
        RecoveryError::Unfit { .. } => Status::invalid_argument(e.to_string()),
        RecoveryError::Undecided(_) | RecoveryError::NotOpen => {
            Status::failed_precondition(e.to_string())
        }
        RecoveryError::Store(s) if s.is_conflict() => {
            Status::aborted(format!("{s} (decided meanwhile: list again)"))
        }
        RecoveryError::Store(s) => Status::unavailable(s.to_string()),
    }
}

/// Who is calling, for `decided_by`.
fn caller<T>(request: &Request<T>) -> String {
    request
        .extensions()
        .get::<Identity>()
        .map_or_else(|| "anonymous".to_string(), |i| i.name().to_string())
}

/// The service implementation.
pub struct RecoveryApi {
    recovery: Recovery,
    clusters: ClusterInventory,
}

impl RecoveryApi {
    /// A service over the hub's window and orphans, counting `clusters` not resynced since.
    pub fn new(recovery: Recovery, clusters: ClusterInventory) -> Self {
        Self { recovery, clusters }
    }

    /// `status` with the accepted clusters whose agent has not sent a full resync since the
    /// last window opened (their unknown works are still to be recorded).
    fn counted(&self, mut status: RecoveryStatus) -> RecoveryStatus {
        if let Some(id) = self.recovery.restore_id() {
            status.clusters_not_resynced = self
                .clusters
                .snapshot()
                .iter()
                .filter(|c| {
                    rules::accepted(c)
                        && c.hub
                            .as_ref()
                            .is_none_or(|h| h.resynced_since_recovery != id)
                })
                .count() as u32;
        }
        status
    }
}

#[tonic::async_trait]
impl RecoveryService for RecoveryApi {
    async fn get_recovery(
        &self,
        _request: Request<GetRecoveryRequest>,
    ) -> Result<Response<RecoveryStatus>, Status> {
        Ok(Response::new(self.counted(self.recovery.status())))
    }

    async fn list_orphans(
        &self,
        request: Request<ListOrphansRequest>,
    ) -> Result<Response<ListOrphansResponse>, Status> {
        let r = request.into_inner();
        if !r.cluster.is_empty() {
            guard::object("cluster", &r.cluster)?;
        }
        let cluster = Some(r.cluster.as_str()).filter(|c| !c.is_empty());
        let after = match r.page_token.as_str() {
            "" => None,
            token => Some(token.split_once('/').ok_or_else(|| {
                Status::invalid_argument(format!(
                    "page_token {:?} is not one this hub gave: ask again without it",
                    token.chars().take(80).collect::<String>()
                ))
            })?),
        };
        let limit = match r.limit {
            0 => PAGE,
            n => (n as usize).min(PAGE),
        };
        let (items, next) = self.recovery.page(cluster, after, limit);
        Ok(Response::new(ListOrphansResponse {
            items,
            next_page_token: next.map(|(c, id)| format!("{c}/{id}")).unwrap_or_default(),
        }))
    }

    async fn decide_orphans(
        &self,
        request: Request<DecideOrphansRequest>,
    ) -> Result<Response<ListOrphansResponse>, Status> {
        let by = caller(&request);
        let r = request.into_inner();
        guard::object("cluster", &r.cluster)?;
        if r.all != r.names.is_empty() {
            return Err(Status::invalid_argument(
                "name the orphans (names or resource ids), or ask for all of them — not both",
            ));
        }
        let decision = OrphanDecision::try_from(r.decision)
            .map_err(|_| Status::invalid_argument(format!("decision {}: unknown", r.decision)))?;
        let items = self
            .recovery
            .decide(&r.cluster, &r.names, r.all, decision, &by)
            .await
            .map_err(status)?;
        tracing::info!(by, cluster = %r.cluster, orphans = items.len(), ?decision, "orphans decided");
        Ok(Response::new(ListOrphansResponse {
            items,
            ..Default::default()
        }))
    }

    async fn finish_recovery(
        &self,
        request: Request<FinishRecoveryRequest>,
    ) -> Result<Response<RecoveryStatus>, Status> {
        let by = caller(&request);
        let r = request.into_inner();
        let undecided = OrphanDecision::try_from(r.undecided)
            .map_err(|_| Status::invalid_argument(format!("undecided {}: unknown", r.undecided)))?;
        let status = self.recovery.finish(undecided, &by).await.map_err(status)?;
        Ok(Response::new(self.counted(status)))
    }
}

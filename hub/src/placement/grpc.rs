//! `flotilla.v1.PlacementService`: Placements, their PlacementDecisions, the scheduler's debug
//! view, and AddOnPlacementScores.
//!
//! Fenced by the caller's grants (issue 48): a Placement is an object of its namespace (read by
//! the namespace's viewers, written by its editors — what it selects is still bounded by the
//! sets bound there); an AddOnPlacementScore is an object of a cluster's namespace (read by
//! the viewers of the cluster's sets, written by their admins).

use crate::grants::{Target, Verb};
use crate::grpc::guard::{self, Teams};
use crate::inventory::ChangeKind;
use crate::placement::scores::ScoreError;
use crate::placement::{PlacementError, PlacementView, Placements};
use flotilla_api::v1::placement_service_server::PlacementService;
use flotilla_api::v1::{
    AddOnPlacementScore, DeletePlacementResponse, DeleteScoreResponse, EventType,
    ListDecisionsResponse, ListPlacementsRequest, ListPlacementsResponse, ListScoresRequest,
    ListScoresResponse, Placement, PlacementDebug, PlacementEvent, PlacementRef, ScoreRef,
    WatchPlacementsRequest,
};
use flotilla_gitops::targets;
use std::pin::Pin;
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Whether the caller forced the write (`flotilla apply --force`, the `flotilla-force`
/// header): a Placement a GitRepo writes for an inline target is written all the same.
fn forced<T>(req: &Request<T>) -> bool {
    req.metadata()
        .get(flotilla_api::meta::FORCE_HEADER)
        .is_some_and(|v| v == "true")
}

impl From<PlacementError> for Status {
    fn from(e: PlacementError) -> Self {
        match &e {
            PlacementError::Invalid(_) => Status::invalid_argument(e.to_string()),
            PlacementError::NotFound(_) | PlacementError::Gone(_) => {
                Status::not_found(e.to_string())
            }
            PlacementError::Conflict(_) => Status::aborted(e.to_string()),
            PlacementError::Unavailable(_) => Status::unavailable(e.to_string()),
        }
    }
}

impl From<ScoreError> for Status {
    fn from(e: ScoreError) -> Self {
        match &e {
            ScoreError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ScoreError::NotFound(_) => Status::not_found(e.to_string()),
            ScoreError::Unavailable(_) | ScoreError::Gone => Status::unavailable(e.to_string()),
        }
    }
}

/// The service implementation.
pub struct PlacementApi {
    placements: Placements,
}

impl PlacementApi {
    /// A service over the placement registry.
    pub fn new(placements: Placements) -> Self {
        Self { placements }
    }

    fn view<T>(
        &self,
        req: &Request<T>,
        r: &PlacementRef,
    ) -> Result<std::sync::Arc<PlacementView>, Status> {
        check_ref(r)?;
        allow(req, Verb::Read, r, "get")?;
        self.placements.get(&r.namespace, &r.name).ok_or_else(|| {
            Status::not_found(format!("Placement {}/{} not found", r.namespace, r.name))
        })
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<PlacementEvent, Status>> + Send>>;

/// A placement reference names a namespace and a placement that could exist.
fn check_ref(r: &PlacementRef) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::object("name", &r.name)
}

/// Whether the caller of `req` may `verb` placement `r` (`what`: "get", "apply", …).
fn allow<T>(req: &Request<T>, verb: Verb, r: &PlacementRef, what: &str) -> Result<(), Status> {
    let (teams, caller) = Teams::of(req);
    teams
        .allow(
            caller.as_ref(),
            verb,
            Target::Namespace { name: &r.namespace },
            &format!("{what} Placement {}/{}", r.namespace, r.name),
        )
        .map(drop)
}

/// Whether the caller of `req` may `verb` the objects of cluster `cluster`'s namespace.
fn allow_cluster<T>(
    req: &Request<T>,
    verb: Verb,
    cluster: &str,
    action: &str,
) -> Result<(), Status> {
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

fn visibility<T>(req: &Request<T>) -> guard::Visibility {
    let (teams, caller) = Teams::of(req);
    teams.visibility(caller.as_ref())
}

fn matches(view: &PlacementView, namespace: &str, name: &str) -> bool {
    let m = view.placement.metadata.as_ref();
    let (ns, n) = m.map_or(("", ""), |m| (m.namespace.as_str(), m.name.as_str()));
    (namespace.is_empty() || ns == namespace) && (name.is_empty() || n == name)
}

fn event(ty: EventType, view: &PlacementView) -> PlacementEvent {
    PlacementEvent {
        r#type: ty as i32,
        placement: Some(view.placement.clone()),
        decisions: view.decisions.clone(),
    }
}

#[tonic::async_trait]
impl PlacementService for PlacementApi {
    async fn apply_placement(
        &self,
        req: Request<Placement>,
    ) -> Result<Response<Placement>, Status> {
        let r = req
            .get_ref()
            .metadata
            .as_ref()
            .map(|m| PlacementRef {
                namespace: m.namespace.clone(),
                name: m.name.clone(),
            })
            .unwrap_or_default();
        guard::namespace("metadata.namespace", &r.namespace, false)?;
        allow(&req, Verb::Write, &r, "apply")?;
        let stored = self.placements.get(&r.namespace, &r.name);
        targets::user_may_write(
            stored.as_ref().map(|v| &v.placement),
            Some(req.get_ref()),
            forced(&req),
        )
        .map_err(|e| Status::failed_precondition(e.to_string()))?;
        Ok(Response::new(
            self.placements.apply(req.into_inner()).await?,
        ))
    }

    async fn get_placement(
        &self,
        req: Request<PlacementRef>,
    ) -> Result<Response<Placement>, Status> {
        Ok(Response::new(
            self.view(&req, req.get_ref())?.placement.clone(),
        ))
    }

    async fn list_placements(
        &self,
        req: Request<ListPlacementsRequest>,
    ) -> Result<Response<ListPlacementsResponse>, Status> {
        let vis = visibility(&req);
        let items = self
            .placements
            .list(&req.get_ref().namespace)
            .iter()
            .filter(|v| {
                let ns = v
                    .placement
                    .metadata
                    .as_ref()
                    .map_or("", |m| m.namespace.as_str());
                vis.namespace(ns)
            })
            .map(|v| v.placement.clone())
            .collect();
        Ok(Response::new(ListPlacementsResponse { items }))
    }

    async fn delete_placement(
        &self,
        req: Request<PlacementRef>,
    ) -> Result<Response<DeletePlacementResponse>, Status> {
        check_ref(req.get_ref())?;
        allow(&req, Verb::Write, req.get_ref(), "delete")?;
        let stored = self
            .placements
            .get(&req.get_ref().namespace, &req.get_ref().name);
        targets::user_may_write(stored.as_ref().map(|v| &v.placement), None, forced(&req))
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        let r = req.into_inner();
        self.placements.delete(&r.namespace, &r.name).await?;
        Ok(Response::new(DeletePlacementResponse {}))
    }

    async fn list_decisions(
        &self,
        req: Request<PlacementRef>,
    ) -> Result<Response<ListDecisionsResponse>, Status> {
        Ok(Response::new(ListDecisionsResponse {
            items: self.view(&req, req.get_ref())?.decisions.clone(),
        }))
    }

    type WatchPlacementsStream = WatchStream;

    async fn watch_placements(
        &self,
        req: Request<WatchPlacementsRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let watching = crate::grpc::WatchSettings::of(&req);
        // The namespaces it may see when the watch starts; a reload of the grants ends the
        // watch (ABORTED: watch again), as it cannot take back what it sent (review r1 §6).
        let vis = visibility(&req);
        let mut reloads = {
            let (teams, caller) = crate::grpc::guard::Teams::of(&req);
            teams.reloads(caller.as_ref())
        };
        let r = req.into_inner();
        let matches = move |v: &PlacementView, namespace: &str, name: &str| {
            let ns = v
                .placement
                .metadata
                .as_ref()
                .map_or("", |m| m.namespace.as_str());
            vis.namespace(ns) && matches(v, namespace, name)
        };
        let mut rx = self.placements.subscribe();
        let initial = self.placements.list(&r.namespace);
        let stream = crate::grpc::watch_stream(&watching, move |tx| async move {
            for v in initial {
                if matches(&v, &r.namespace, &r.name)
                    && !tx.send(Ok(event(EventType::Added, &v))).await
                {
                    return;
                }
            }
            loop {
                let next = tokio::select! {
                    next = rx.recv() => next,
                    () = reloaded(&mut reloads) => {
                        tx.send(Err(Status::aborted("the grants changed; list and watch again")))
                            .await;
                        return;
                    }
                };
                match next {
                    Ok(change) => {
                        if !matches(&change.object, &r.namespace, &r.name) {
                            continue;
                        }
                        let ty = match change.kind {
                            ChangeKind::Added => EventType::Added,
                            ChangeKind::Modified => EventType::Modified,
                            ChangeKind::Deleted => EventType::Deleted,
                        };
                        if !tx.send(Ok(event(ty, &change.object))).await {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tx.send(Err(Status::aborted(format!(
                            "watch fell {n} changes behind; list and watch again"
                        ))))
                        .await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(stream))
    }

    async fn debug_placement(
        &self,
        req: Request<PlacementRef>,
    ) -> Result<Response<PlacementDebug>, Status> {
        check_ref(req.get_ref())?;
        allow(&req, Verb::Read, req.get_ref(), "debug")?;
        let r = req.into_inner();
        Ok(Response::new(
            self.placements.debug(&r.namespace, &r.name).await?,
        ))
    }

    async fn apply_score(
        &self,
        req: Request<AddOnPlacementScore>,
    ) -> Result<Response<AddOnPlacementScore>, Status> {
        let (cluster, name) = req
            .get_ref()
            .metadata
            .as_ref()
            .map(|m| (m.namespace.clone(), m.name.clone()))
            .unwrap_or_default();
        guard::cluster("metadata.namespace", &cluster, false)?;
        let action = format!("apply AddOnPlacementScore {cluster}/{name}");
        allow_cluster(&req, Verb::Write, &cluster, &action)?;
        Ok(Response::new(
            self.placements.scores().apply(req.into_inner()).await?,
        ))
    }

    async fn list_scores(
        &self,
        req: Request<ListScoresRequest>,
    ) -> Result<Response<ListScoresResponse>, Status> {
        let vis = visibility(&req);
        let mut items = self.placements.scores().list(&req.get_ref().cluster);
        items.retain(|s| vis.cluster(s.metadata.as_ref().map_or("", |m| m.namespace.as_str())));
        Ok(Response::new(ListScoresResponse { items }))
    }

    async fn delete_score(
        &self,
        req: Request<ScoreRef>,
    ) -> Result<Response<DeleteScoreResponse>, Status> {
        let (cluster, name) = (req.get_ref().cluster.clone(), req.get_ref().name.clone());
        guard::cluster("cluster", &cluster, false)?;
        guard::object("name", &name)?;
        let action = format!("delete AddOnPlacementScore {cluster}/{name}");
        allow_cluster(&req, Verb::Write, &cluster, &action)?;
        let r = req.into_inner();
        self.placements.scores().delete(&r.cluster, &r.name).await?;
        Ok(Response::new(DeleteScoreResponse {}))
    }
}

/// Waits for a reload of the grants; never, without a receiver (or once its sender is gone).
async fn reloaded<V>(rx: &mut Option<tokio::sync::watch::Receiver<V>>) {
    if let Some(r) = rx
        && r.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

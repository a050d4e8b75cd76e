//! `flotilla.v1.WorkService`: ManifestWorks and read-only proxy queries to spokes.

use super::auth::{Identity, Role};
use super::{guard, parse_selector, selects};
use crate::cluster::Clusters;
use crate::inventory::WorkInventory;
use crate::keys::ObjectRef;
use flotilla_api::v1::work_service_server::WorkService;
use flotilla_api::v1::{
    DeleteWorkRequest, GetWorkRequest, ListWorksRequest, ListWorksResponse, ManifestWork,
    ProxyGetRequest, ProxyGetResponse, ProxyRequest, ProxyResponse, WatchWorksRequest, WorkEvent,
};
use flotilla_bus::envelope::{Event, headers, types};
use flotilla_bus::subjects;
use std::pin::Pin;
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tracing::Instrument;

/// How long a proxy query waits for the agent.
const PROXY_TIMEOUT: Duration = Duration::from_secs(10);

/// The service implementation.
pub struct WorkApi {
    clusters: Clusters,
    works: WorkInventory,
    nats: async_nats::Client,
    max_event_bytes: usize,
}

impl WorkApi {
    /// A service over the cluster actors (which own works) and the work inventory.
    pub fn new(
        clusters: Clusters,
        works: WorkInventory,
        nats: async_nats::Client,
        max_event_bytes: usize,
    ) -> Self {
        Self {
            clusters,
            works,
            nats,
            max_event_bytes,
        }
    }

    fn cluster(&self, name: &str) -> Result<crate::cluster::ClusterHandle, Status> {
        guard::cluster("cluster", name, false)?;
        self.clusters
            .get(name)
            .filter(|_| self.clusters.shared().inventory.get(name).is_some())
            .ok_or_else(|| Status::not_found(format!("managed cluster {name:?} not found")))
    }
}

/// OCM's `execute-as` check: whether the caller may write a work naming the work's executor
/// (every caller may when the API is open).
fn may_execute_as(caller: Option<&Identity>, work: &ManifestWork) -> Result<(), Status> {
    let Some(caller) = caller else {
        return Ok(());
    };
    caller
        .may_execute_as(flotilla_api::work::Executor::of_work(work).as_ref())
        .map_err(|message| {
            let name = work
                .metadata
                .as_ref()
                .map(|m| format!("{}/{}", m.namespace, m.name))
                .unwrap_or_default();
            tracing::info!(caller = %caller.name, work = %name, "executor refused");
            Status::permission_denied(format!("ManifestWork {name}: {message}"))
        })
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<WorkEvent, Status>> + Send>>;

#[tonic::async_trait]
impl WorkService for WorkApi {
    async fn apply_work(
        &self,
        req: Request<ManifestWork>,
    ) -> Result<Response<ManifestWork>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let work = req.into_inner();
        let (cluster, name) = work
            .metadata
            .as_ref()
            .map(|m| (m.namespace.clone(), m.name.clone()))
            .unwrap_or_default();
        // The root of a work's trace: API → cluster actor → spec event → agent → status.
        let span = tracing::info_span!("ApplyWork", cluster.name = %cluster, work.name = %name);
        async move {
            let errors = flotilla_api::work::validate(&work);
            if !errors.is_empty() {
                return Err(Status::invalid_argument(errors.join("; ")));
            }
            may_execute_as(caller.as_ref(), &work)?;
            let handle = self.cluster(&cluster)?;
            Ok(Response::new(handle.apply_work(work).await?))
        }
        .instrument(span)
        .await
    }

    async fn get_work(
        &self,
        req: Request<GetWorkRequest>,
    ) -> Result<Response<ManifestWork>, Status> {
        let r = req.into_inner();
        guard::cluster("cluster", &r.cluster, false)?;
        guard::object("name", &r.name)?;
        self.works
            .get(&ObjectRef::new(r.cluster.as_str(), r.name.as_str()).inventory_key())
            .map(|w| Response::new((*w).clone()))
            .ok_or_else(|| {
                Status::not_found(format!("ManifestWork {}/{} not found", r.cluster, r.name))
            })
    }

    async fn list_works(
        &self,
        req: Request<ListWorksRequest>,
    ) -> Result<Response<ListWorksResponse>, Status> {
        let r = req.into_inner();
        let sel = parse_selector(&r.label_selector)?;
        guard::cluster("cluster", &r.cluster, true)?;
        let prefix = ObjectRef::prefix(&r.cluster);
        let mut items = Vec::new();
        let mut next_page_token = String::new();
        let mut last_key = String::new();
        for (key, w) in self.works.with_prefix(&prefix) {
            if !r.page_token.is_empty() && &*key <= r.page_token.as_str() {
                continue;
            }
            if !selects(&sel, w.metadata.as_ref()) {
                continue;
            }
            if r.page_size > 0 && items.len() == r.page_size as usize {
                next_page_token = last_key;
                break;
            }
            last_key = key.to_string();
            items.push((*w).clone());
        }
        Ok(Response::new(ListWorksResponse {
            items,
            next_page_token,
        }))
    }

    async fn delete_work(
        &self,
        req: Request<DeleteWorkRequest>,
    ) -> Result<Response<ManifestWork>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        let handle = self.cluster(&r.cluster)?;
        guard::object("name", &r.name)?;
        if caller.as_ref().is_some_and(|c| c.role != Role::Admin) {
            // A deployer deletes only works it could have applied: deleting removes what the
            // work's executor put on the cluster.
            let key = ObjectRef::new(r.cluster.as_str(), r.name.as_str()).inventory_key();
            if let Some(held) = self.works.get(&key) {
                may_execute_as(caller.as_ref(), &held)?;
            }
        }
        Ok(Response::new(handle.delete_work(r.name).await?))
    }

    type WatchWorksStream = WatchStream;

    async fn watch_works(
        &self,
        req: Request<WatchWorksRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let r = req.into_inner();
        let sel = parse_selector(&r.label_selector)?;
        guard::cluster("cluster", &r.cluster, true)?;
        let prefix = ObjectRef::prefix(&r.cluster);
        Ok(Response::new(super::watch(
            &self.works,
            move |key, w| key.starts_with(&prefix) && selects(&sel, w.metadata.as_ref()),
            |ty, w| WorkEvent {
                r#type: ty as i32,
                work: Some(w.clone()),
            },
        )))
    }

    async fn proxy(
        &self,
        req: Request<ProxyGetRequest>,
    ) -> Result<Response<ProxyGetResponse>, Status> {
        let r = req.into_inner();
        self.cluster(&r.cluster)?;
        if r.kind.is_empty() {
            return Err(Status::invalid_argument(
                "kind: required (for example deployments or Deployment)",
            ));
        }
        let query = ProxyRequest {
            cluster_name: r.cluster.clone(),
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
        };
        let ev = Event::new(
            types::proxy_request(),
            crate::cluster::SOURCE,
            r.cluster.clone(),
            &query,
        );
        let bytes = ev
            .encode(self.max_event_bytes)
            .map_err(|e| Status::internal(e.to_string()))?;
        let request = async_nats::Request::new()
            .payload(bytes)
            .headers(headers(&ev))
            .timeout(Some(PROXY_TIMEOUT));
        let reply = self
            .nats
            .send_request(subjects::proxy(&r.cluster), request)
            .await
            .map_err(|e| {
                Status::unavailable(format!(
                    "the agent of cluster {:?} did not answer ({e}); is it connected?",
                    r.cluster
                ))
            })?;
        let resp: ProxyResponse = Event::decode(&reply.payload, self.max_event_bytes)
            .and_then(|e| e.decode_data("ProxyResponse"))
            .map_err(|e| Status::internal(format!("unreadable answer from the agent: {e}")))?;
        if !resp.error.is_empty() {
            return Err(if resp.error.contains("not found") {
                Status::not_found(resp.error)
            } else {
                Status::invalid_argument(resp.error)
            });
        }
        let objects = resp
            .objects
            .into_iter()
            .map(|o| String::from_utf8_lossy(&o).into_owned())
            .collect();
        Ok(Response::new(ProxyGetResponse { objects }))
    }
}

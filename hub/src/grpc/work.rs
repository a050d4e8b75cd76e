//! `flotilla.v1.WorkService`: ManifestWorks and read-only proxy queries to spokes.
//!
//! Who may write which work, past the access table ([`super::access`]): a deployer names only
//! executors it is granted (OCM's `execute-as`), and replaces or deletes only works whose stored
//! executor it is granted too — replacing a work removes the old work's resources that the new
//! one no longer declares, and deleting removes them all. Works applied here never carry the
//! labels and annotations reserved for the works the hub renders for add-ons
//! ([`flotilla_api::addon::RESERVED_WORK_KEYS`]), which the agent trusts to hand an add-on its hub
//! credentials.
//!
//! Fenced by the caller's grants (issue 48): gets, lists and watches show only the works of the
//! clusters the caller sees; `admin` on one of a cluster's sets writes its works as an admin
//! does (any executor — OCM's set admins own their spokes); a CSV deployer keeps its
//! execute-as rule fleet-wide. The read-only proxy reads any kind, Secrets too: `admin` on one
//! of the cluster's sets.

use super::auth::{Identity, Role};
use super::{guard, parse_selector, selects};
use crate::cluster::{ClusterError, Clusters};
use crate::grants::{Decision, Target, Verb};
use crate::grpc::guard::{Outcome, audit_line};
use crate::inventory::WorkInventory;
use crate::keys::ObjectRef;
use flotilla_api::v1::work_service_server::WorkService;
use flotilla_api::v1::{
    ApplyWorkResult, DeleteWorkRequest, GetWorkRequest, ListWorksRequest, ListWorksResponse,
    ManifestWork, ProxyGetRequest, ProxyGetResponse, ProxyRequest, ProxyResponse,
    WatchWorksRequest, WorkEvent,
};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::{PublishError, Publisher};
use std::pin::Pin;
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

/// How long a proxy query waits for the agent.
const PROXY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many more times a deployer's apply over a stored work is checked and tried when the work
/// changed between the check and the write.
const REPLACE_TRIES: u32 = 3;

/// Works one `ApplyWorks` stream has in flight at once: enough to keep the cluster actors and
/// the store busy from one stream; further messages wait in the stream (HTTP/2 flow control
/// holds the sender back), so a client streaming 100,000 works holds no more than this here.
const STREAM_IN_FLIGHT: usize = 512;

/// The service implementation.
#[derive(Clone)]
pub struct WorkApi {
    clusters: Clusters,
    works: WorkInventory,
    /// Asks agents (the proxy's reads), bounded by [`PROXY_TIMEOUT`].
    agents: Publisher,
    teams: guard::Teams,
}

impl WorkApi {
    /// A service over the cluster actors (which own works) and the work inventory, checking
    /// callers by `teams`.
    pub fn new(
        clusters: Clusters,
        works: WorkInventory,
        agents: &Publisher,
        teams: guard::Teams,
    ) -> Self {
        Self {
            clusters,
            works,
            agents: agents.with_timeout(PROXY_TIMEOUT),
            teams,
        }
    }

    /// Whether `caller` writes the works of `cluster` as an admin does (an open hub, a fleet
    /// admin, or `admin` on one of the cluster's sets): true; false for a CSV deployer, whose
    /// execute-as grants decide next; else `PERMISSION_DENIED` naming the missing grant
    /// (`action`: "apply ManifestWork c1/web").
    fn writes_as_admin(
        &self,
        caller: Option<&Identity>,
        cluster: &str,
        action: &str,
    ) -> Result<bool, Status> {
        let Some(caller) = caller else {
            return Ok(true);
        };
        let target = Target::Cluster { name: cluster };
        let Some(decision) = self.teams.decide(caller, Verb::Write, &target) else {
            return Ok(caller.role() == Role::Admin);
        };
        // Every outcome is an audit line (review r1 §11): here, or a deployer's by
        // [`deployer_audited`] once its execute-as grants decided.
        match decision {
            Decision::Allowed(grant) => {
                audit_line(&caller.principal, action, Outcome::Allowed(&grant));
                Ok(true)
            }
            Decision::Missing(_) if caller.role() == Role::Deployer => Ok(false),
            Decision::Missing(missing) => {
                audit_line(&caller.principal, action, Outcome::Refused(&missing));
                Err(Status::permission_denied(
                    missing.refusal(&caller.principal, action),
                ))
            }
        }
    }

    /// A non-admin's apply (an admin's goes as it is) over a stored work: allowed only when the caller may act as the
    /// stored work's executor ([`may_act_on_stored`]), and then pinned to the revision checked
    /// unless the caller pinned one, so that a work replaced meanwhile by someone else is never
    /// overwritten unchecked. Answers the work pinned here, `None` when it is to be applied as
    /// it is. (A work someone else creates between this check and the write is not caught: the
    /// cluster actor has no create-only precondition.)
    fn may_replace(&self, caller: Option<&Identity>, work: &ManifestWork) -> Result<Write, Status> {
        let Some(meta) = work.metadata.as_ref() else {
            return Ok(Write::Any(work.clone()));
        };
        let key = ObjectRef::new(meta.namespace.as_str(), meta.name.as_str()).inventory_key();
        let Some(held) = self.works.get(&key) else {
            // Nothing stored, so no stored executor was checked: only a create may follow.
            return Ok(Write::Create(work.clone()));
        };
        may_act_on_stored(caller, &held.to_work(), "replace")?;
        if meta.resource_version != 0 {
            // The caller's own pin: a stale one fails in the cluster actor.
            return Ok(Write::Any(work.clone()));
        }
        let mut pinned = work.clone();
        if let Some(m) = pinned.metadata.as_mut() {
            m.resource_version = held.metadata.as_ref().map_or(0, |m| m.resource_version);
        }
        Ok(Write::Any(pinned))
    }

    /// One work's apply: checked (shape, reserved keys, the caller's executor grants) and
    /// written through its cluster's actor; a deployer's replace that loses a race is checked
    /// again against what is stored then.
    async fn apply_one(
        &self,
        caller: Option<&Identity>,
        work: ManifestWork,
    ) -> Result<ManifestWork, Status> {
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
            refuse_reserved_keys(&work)?;
            guard::cluster("metadata.namespace", &cluster, false)?;
            let action = format!("apply ManifestWork {cluster}/{name}");
            let as_admin = self.writes_as_admin(caller, &cluster, &action)?;
            if !as_admin {
                deployer_audited(caller, &action, may_execute_as(caller, &work))?;
            }
            let handle = self.cluster(&cluster)?;
            if as_admin {
                // Nothing checked against what is stored, so nothing to check again: the work
                // goes as it came (no copy; a caller's own stale pin fails as it is).
                return Ok(handle.apply_work(work).await?);
            }
            // A pin of our own that loses to another write (an agent's status report, most
            // likely) is checked and tried again against what is stored then.
            let mut tries = 0;
            loop {
                let written = match self.may_replace(caller, &work)? {
                    Write::Any(w) => handle.apply_work(w).await,
                    Write::Create(w) => handle.create_work(w).await,
                };
                match written {
                    Err(ClusterError::Conflict(_)) if tries < REPLACE_TRIES => tries += 1,
                    r => return Ok(r?),
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Serves one `ApplyWorks` stream: reads works while fewer than [`STREAM_IN_FLIGHT`] are
    /// being written, answers each as it finishes, and ends once the caller closed its side and
    /// every work is answered — or as soon as nobody reads the answers (the caller is gone; the
    /// writes in flight are abandoned as a cancelled `ApplyWork` would be). A message that
    /// cannot be read ends the stream with that error after the works before it are answered.
    async fn apply_stream(
        self,
        caller: Option<Identity>,
        mut input: Streaming<ManifestWork>,
        answers: tokio::sync::mpsc::Sender<Result<ApplyWorkResult, Status>>,
    ) {
        let mut running = futures::stream::FuturesUnordered::new();
        let mut next_index = 0u64;
        let mut broken = None;
        loop {
            let reading = broken.is_none() && running.len() < STREAM_IN_FLIGHT;
            tokio::select! {
                next = input.message(), if reading => match next {
                    Ok(Some(work)) => {
                        // Each work by the grants in force when it arrives, not those of the
                        // stream's start (review r1 §6).
                        let now = self.teams.rescoped(caller.as_ref());
                        let (api, index) = (&self, next_index);
                        running.push(async move {
                            result_of(index, api.apply_one(now.as_ref(), work).await)
                        });
                        next_index += 1;
                    }
                    Ok(None) => broken = Some(None),
                    Err(e) => broken = Some(Some(Status::new(
                        e.code(),
                        format!("ApplyWorks message {next_index}: {}", e.message()),
                    ))),
                },
                Some(answer) = futures::StreamExt::next(&mut running) => {
                    if answers.send(Ok(answer)).await.is_err() {
                        return;
                    }
                }
                else => break,
            }
        }
        if let Some(Some(status)) = broken {
            let _ = answers.send(Err(status)).await;
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

/// How a checked apply may write.
enum Write {
    /// Create or replace (an admin; or a deployer's replace pinned to the version whose
    /// executor it was allowed).
    Any(ManifestWork),
    /// Create only: the deployer was checked against no stored work.
    Create(ManifestWork),
}

/// OCM's `execute-as` check: whether the caller may write a work naming the work's executor
/// (every caller may when the API is open).
/// `checked` (a CSV deployer's execute-as decision on `action`) with its audit line.
fn deployer_audited(
    caller: Option<&Identity>,
    action: &str,
    checked: Result<(), Status>,
) -> Result<(), Status> {
    if let Some(caller) = caller {
        match &checked {
            Ok(()) => {
                let grant = format!("deployer execute-as {}", caller.grants());
                audit_line(&caller.principal, action, Outcome::Allowed(&grant));
            }
            Err(refused) => {
                audit_line(
                    &caller.principal,
                    action,
                    Outcome::Refused(&refused.message()),
                );
            }
        }
    }
    checked
}

fn may_execute_as(caller: Option<&Identity>, work: &ManifestWork) -> Result<(), Status> {
    let Some(caller) = caller else {
        return Ok(());
    };
    caller
        .may_execute_as(flotilla_api::work::Executor::of_work(work).as_ref())
        .map_err(|message| {
            let name = work_name(work);
            tracing::info!(caller = %caller.name(), work = %name, "executor refused");
            Status::permission_denied(format!("ManifestWork {name}: {message}"))
        })
}

/// Whether the caller may replace or delete the stored work `held` (`verb`): either removes
/// what its executor applied on the cluster, so a deployer needs the stored executor too — the
/// agent would otherwise delete the old work's resources with its own identity on the
/// deployer's behalf. Admins, and every caller of an open API, may.
fn may_act_on_stored(
    caller: Option<&Identity>,
    held: &ManifestWork,
    verb: &str,
) -> Result<(), Status> {
    let Some(caller) = caller.filter(|c| c.role() != Role::Admin) else {
        return Ok(());
    };
    let executor = flotilla_api::work::Executor::of_work(held);
    if caller.may_execute_as(executor.as_ref()).is_ok() {
        return Ok(());
    }
    let name = work_name(held);
    let stored = match &executor {
        Some(e) => format!("{} ({e}), which it is not granted", e.username()),
        None => "unset (the agent's own identity), which only an admin may act as".into(),
    };
    tracing::info!(caller = %caller.name(), work = %name, verb, "stored executor refused");
    Err(Status::permission_denied(format!(
        "ManifestWork {name}: {} ({}) may not {verb} it: its stored spec.executor is {stored}, \
         and what that executor applied would be removed; its execute-as grants are {}",
        caller.name(),
        caller.role(),
        caller.grants()
    )))
}

/// `cluster/name` of a work, for messages.
fn work_name(work: &ManifestWork) -> String {
    work.metadata
        .as_ref()
        .map(|m| format!("{}/{}", m.namespace, m.name))
        .unwrap_or_default()
}

/// Labels and annotations only the hub's add-on works may carry (the agent trusts them to hand
/// an add-on its hub credentials): refused on works applied through the API.
fn refuse_reserved_keys(work: &ManifestWork) -> Result<(), Status> {
    let errors = work
        .metadata
        .as_ref()
        .map(flotilla_api::addon::reserved_key_errors)
        .unwrap_or_default();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid_argument(errors.join("; ")))
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<WorkEvent, Status>> + Send>>;
type ApplyResults = Pin<Box<dyn Stream<Item = Result<ApplyWorkResult, Status>> + Send>>;

/// The answer to the `index`th work of an `ApplyWorks` stream.
fn result_of(index: u64, written: Result<ManifestWork, Status>) -> ApplyWorkResult {
    match written {
        Ok(work) => ApplyWorkResult {
            index,
            metadata: work.metadata,
            code: 0,
            message: String::new(),
        },
        Err(status) => ApplyWorkResult {
            index,
            metadata: None,
            code: status.code() as i32,
            message: status.message().to_string(),
        },
    }
}

#[tonic::async_trait]
impl WorkService for WorkApi {
    async fn apply_work(
        &self,
        req: Request<ManifestWork>,
    ) -> Result<Response<ManifestWork>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        Ok(Response::new(
            self.apply_one(caller.as_ref(), req.into_inner()).await?,
        ))
    }

    type ApplyWorksStream = ApplyResults;

    async fn apply_works(
        &self,
        req: Request<Streaming<ManifestWork>>,
    ) -> Result<Response<ApplyResults>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let input = req.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_IN_FLIGHT);
        tokio::spawn(
            self.clone()
                .apply_stream(caller, input, tx)
                .instrument(tracing::info_span!("ApplyWorks")),
        );
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_work(
        &self,
        req: Request<GetWorkRequest>,
    ) -> Result<Response<ManifestWork>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("cluster", &r.cluster, false)?;
        guard::object("name", &r.name)?;
        self.teams.allow(
            caller.as_ref(),
            Verb::Read,
            Target::Cluster { name: &r.cluster },
            &format!("get ManifestWork {}/{}", r.cluster, r.name),
        )?;
        self.works
            .get(&ObjectRef::new(r.cluster.as_str(), r.name.as_str()).inventory_key())
            .map(|w| Response::new(w.to_work()))
            .ok_or_else(|| {
                Status::not_found(format!("ManifestWork {}/{} not found", r.cluster, r.name))
            })
    }

    async fn list_works(
        &self,
        req: Request<ListWorksRequest>,
    ) -> Result<Response<ListWorksResponse>, Status> {
        let vis = self.teams.visibility(req.extensions().get::<Identity>());
        let r = req.into_inner();
        let sel = parse_selector(&r.label_selector)?;
        guard::cluster("cluster", &r.cluster, true)?;
        if !r.page_token.is_empty() && !r.page_token.contains('/') {
            return Err(Status::invalid_argument(format!(
                "page_token: {:?} is not a token this API gave (<cluster>/<work>); start without one",
                r.page_token
            )));
        }
        let namespace = (!r.cluster.is_empty()).then_some(r.cluster.as_str());
        let mut items = Vec::new();
        let mut next_page_token = String::new();
        let mut last_key = String::new();
        // The cluster of the namespace last tested, and whether the caller sees it: a scan
        // goes namespace by namespace, so the test costs one lookup per cluster, not per work.
        let mut last_cluster: Option<(String, bool)> = None;
        self.works.scan(namespace, &r.page_token, |key, w| {
            let key: &str = key;
            let cluster = key.split_once('/').map_or(key, |(c, _)| c);
            let visible = match &last_cluster {
                Some((c, v)) if c == cluster => *v,
                _ => {
                    let v = vis.cluster(cluster);
                    last_cluster = Some((cluster.to_string(), v));
                    v
                }
            };
            if !visible || !selects(&sel, w.metadata.as_ref()) {
                return true;
            }
            if r.page_size > 0 && items.len() == r.page_size as usize {
                next_page_token = std::mem::take(&mut last_key);
                return false;
            }
            last_key = key.to_string();
            items.push(w.to_work());
            true
        });
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
        guard::cluster("cluster", &r.cluster, false)?;
        guard::object("name", &r.name)?;
        let action = format!("delete ManifestWork {}/{}", r.cluster, r.name);
        let as_admin = self.writes_as_admin(caller.as_ref(), &r.cluster, &action)?;
        let handle = self.cluster(&r.cluster)?;
        if !as_admin {
            // A deployer deletes only works it could have applied.
            let key = ObjectRef::new(r.cluster.as_str(), r.name.as_str()).inventory_key();
            let checked = match self.works.get(&key) {
                Some(held) => may_act_on_stored(caller.as_ref(), &held.to_work(), "delete"),
                None => Ok(()),
            };
            deployer_audited(caller.as_ref(), &action, checked)?;
        }
        Ok(Response::new(handle.delete_work(r.name).await?))
    }

    type WatchWorksStream = WatchStream;

    async fn watch_works(
        &self,
        req: Request<WatchWorksRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let watching = super::WatchSettings::of(&req);
        let fence = super::WatchFence::new(
            &self.teams,
            req.extensions().get::<Identity>(),
            super::By::InCluster,
        );
        let r = req.into_inner();
        let sel = parse_selector(&r.label_selector)?;
        guard::cluster("cluster", &r.cluster, true)?;
        let prefix = ObjectRef::prefix(&r.cluster);
        Ok(Response::new(super::watch_fenced(
            &watching,
            &self.works,
            fence,
            move |key, w| key.starts_with(&prefix) && selects(&sel, w.metadata.as_ref()),
            |ty, w| WorkEvent {
                r#type: ty as i32,
                work: Some(w.to_work()),
            },
        )))
    }

    async fn proxy(
        &self,
        req: Request<ProxyGetRequest>,
    ) -> Result<Response<ProxyGetResponse>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("cluster", &r.cluster, false)?;
        if r.kind.is_empty() {
            return Err(Status::invalid_argument(
                "kind: required (for example deployments or Deployment)",
            ));
        }
        // Any kind, Secrets too (the agent resolves the kind): the cluster's set admins only.
        self.teams.allow(
            caller.as_ref(),
            Verb::ProxyWrite,
            Target::Cluster { name: &r.cluster },
            &format!("read {} of cluster {} through the proxy", r.kind, r.cluster),
        )?;
        self.cluster(&r.cluster)?;
        let query = ProxyRequest {
            cluster_name: r.cluster.clone(),
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
            ..Default::default()
        };
        let ev = Event::new(
            types::proxy_request(),
            crate::cluster::SOURCE,
            r.cluster.clone(),
            &query,
        );
        let resp: ProxyResponse = self
            .agents
            .request(
                self.clusters
                    .shared()
                    .inventory
                    .wire(&r.cluster)
                    .proxy(&r.cluster),
                &ev,
                "ProxyResponse",
            )
            .await
            .map_err(|e| match e {
                PublishError::Encode { .. } | PublishError::TooLarge { .. } => {
                    Status::internal(e.to_string())
                }
                PublishError::Decode { .. } => {
                    Status::internal(format!("unreadable answer from the agent: {e}"))
                }
                _ => Status::unavailable(format!(
                    "the agent of cluster {:?} did not answer ({e}); is it connected?",
                    r.cluster
                )),
            })?;
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

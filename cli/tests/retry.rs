//! `flotilla` retries calls that are safe to repeat while the hub answers UNAVAILABLE (its store
//! is electing a leader after a NATS node was lost), saying each retry on stderr, for at most
//! `--retry-seconds`. The hub here is a fake: an in-process tonic server that answers from a
//! script, so a test decides exactly when the hub is unavailable.

use flotilla_api::v1::cluster_set_service_server::{ClusterSetService, ClusterSetServiceServer};
use flotilla_api::v1::work_service_server::{WorkService, WorkServiceServer};
use flotilla_api::v1::{
    ApplyWorkResult, DeleteBindingRequest, DeleteBindingResponse, DeleteClusterSetResponse,
    DeleteWorkRequest, GetClusterSetRequest, GetWorkRequest, ListBindingsRequest,
    ListBindingsResponse, ListClusterSetsRequest, ListClusterSetsResponse, ListWorksRequest,
    ListWorksResponse, ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetView,
    ManifestWork, ObjectMeta, ProxyGetRequest, ProxyGetResponse, WatchWorksRequest, WorkEvent,
};
use futures::Stream;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

/// Bound on one run of the CLI: the retries of a test wait 1.5 s at most.
const RUN: Duration = Duration::from_secs(60);

/// What the hub says while its store elects a leader (as `flotilla-hub` words it).
const ELECTING: &str = "kv clustersets/edge: the store did not answer for 20 s (no stream found \
                        for given subject); it may be electing a leader or short of a quorum of \
                        NATS nodes — retry";

/// The answers one RPC gives, in order (the last is repeated), and how often it was called.
struct Script<T> {
    answers: Mutex<VecDeque<Result<T, Status>>>,
    calls: Mutex<u32>,
}

impl<T: Clone> Script<T> {
    fn new(answers: impl IntoIterator<Item = Result<T, Status>>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into_iter().collect()),
            calls: Mutex::new(0),
        })
    }

    fn answer(&self) -> Result<Response<T>, Status> {
        *self.calls.lock().unwrap() += 1;
        let mut answers = self.answers.lock().unwrap();
        let answer = if answers.len() > 1 {
            answers.pop_front()
        } else {
            answers.front().cloned()
        };
        answer.expect("a scripted answer").map(Response::new)
    }

    fn calls(&self) -> u32 {
        *self.calls.lock().unwrap()
    }
}

/// A hub serving only the ManagedClusterSet calls `get clustersets` and `delete clusterset`
/// make.
struct Sets {
    list: Arc<Script<ListClusterSetsResponse>>,
    delete: Arc<Script<DeleteClusterSetResponse>>,
}

#[tonic::async_trait]
impl ClusterSetService for Sets {
    async fn list_cluster_sets(
        &self,
        _: Request<ListClusterSetsRequest>,
    ) -> Result<Response<ListClusterSetsResponse>, Status> {
        self.list.answer()
    }

    async fn delete_cluster_set(
        &self,
        _: Request<GetClusterSetRequest>,
    ) -> Result<Response<DeleteClusterSetResponse>, Status> {
        self.delete.answer()
    }

    async fn apply_cluster_set(
        &self,
        _: Request<ManagedClusterSet>,
    ) -> Result<Response<ManagedClusterSet>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get_cluster_set(
        &self,
        _: Request<GetClusterSetRequest>,
    ) -> Result<Response<ManagedClusterSetView>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn apply_binding(
        &self,
        _: Request<ManagedClusterSetBinding>,
    ) -> Result<Response<ManagedClusterSetBinding>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn list_bindings(
        &self,
        _: Request<ListBindingsRequest>,
    ) -> Result<Response<ListBindingsResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn delete_binding(
        &self,
        _: Request<DeleteBindingRequest>,
    ) -> Result<Response<DeleteBindingResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A hub serving only `ApplyWorks`: the first stream answers the works named in `unavailable`
/// UNAVAILABLE and the others written; later streams write every work. Each stream's work
/// names are kept.
struct Works {
    unavailable: Vec<String>,
    rounds: Arc<Mutex<Vec<Vec<String>>>>,
}

#[tonic::async_trait]
impl WorkService for Works {
    type ApplyWorksStream = Answers<ApplyWorkResult>;
    type WatchWorksStream = Answers<WorkEvent>;

    async fn apply_works(
        &self,
        req: Request<Streaming<ManifestWork>>,
    ) -> Result<Response<Self::ApplyWorksStream>, Status> {
        let mut works = req.into_inner();
        let mut names = Vec::new();
        while let Some(w) = works.message().await? {
            names.push(w.metadata.unwrap_or_default().name);
        }
        let first = {
            let mut rounds = self.rounds.lock().unwrap();
            rounds.push(names.clone());
            rounds.len() == 1
        };
        let answers: Vec<Result<ApplyWorkResult, Status>> = names
            .into_iter()
            .enumerate()
            .map(|(index, name)| {
                let index = index as u64;
                Ok(if first && self.unavailable.contains(&name) {
                    ApplyWorkResult {
                        index,
                        metadata: None,
                        code: tonic::Code::Unavailable as i32,
                        message: format!("kv works/edge.{name}: the store did not answer — retry"),
                    }
                } else {
                    ApplyWorkResult {
                        index,
                        metadata: Some(ObjectMeta {
                            generation: 1,
                            ..Default::default()
                        }),
                        code: 0,
                        message: String::new(),
                    }
                })
            })
            .collect();
        Ok(Response::new(Box::pin(futures::stream::iter(answers))))
    }

    async fn apply_work(&self, _: Request<ManifestWork>) -> Result<Response<ManifestWork>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get_work(&self, _: Request<GetWorkRequest>) -> Result<Response<ManifestWork>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn list_works(
        &self,
        _: Request<ListWorksRequest>,
    ) -> Result<Response<ListWorksResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn delete_work(
        &self,
        _: Request<DeleteWorkRequest>,
    ) -> Result<Response<ManifestWork>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn watch_works(
        &self,
        _: Request<WatchWorksRequest>,
    ) -> Result<Response<Self::WatchWorksStream>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn proxy(
        &self,
        _: Request<ProxyGetRequest>,
    ) -> Result<Response<ProxyGetResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }
}

/// Serves `router` on a free loopback port; its `http://` endpoint. The server stops when the
/// test's runtime ends.
async fn serve(router: tonic::transport::server::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener)));
    endpoint
}

/// A fake hub with the cluster-set calls scripted.
async fn sets_hub(
    list: &Arc<Script<ListClusterSetsResponse>>,
    delete: &Arc<Script<DeleteClusterSetResponse>>,
) -> String {
    let sets = Sets {
        list: list.clone(),
        delete: delete.clone(),
    };
    serve(tonic::transport::Server::builder().add_service(ClusterSetServiceServer::new(sets))).await
}

/// One set, `edge`, as `ListClusterSets` answers it.
fn edge() -> ListClusterSetsResponse {
    ListClusterSetsResponse {
        items: vec![ManagedClusterSetView {
            set: Some(ManagedClusterSet {
                metadata: Some(ObjectMeta {
                    name: "edge".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }],
    }
}

/// What a run of the CLI came to.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `flotilla --hub HUB ARGS` (with `stdin`), within [`RUN`].
async fn flotilla(hub: &str, args: &[&str], stdin: Option<&str>) -> Ran {
    use tokio::io::AsyncWriteExt as _;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["--hub", hub])
        .args(args)
        .env_remove("FLOTILLA_RETRY_SECONDS")
        .env_remove("FLOTILLA_TOKEN")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run flotilla");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .await
        .unwrap();
    drop(input);
    let out = tokio::time::timeout(RUN, child.wait_with_output())
        .await
        .expect("flotilla ends")
        .unwrap();
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    }
}

#[tokio::test]
async fn a_read_the_hub_answers_unavailable_is_retried_with_a_line_per_retry() {
    let list = Script::new([
        Err(Status::unavailable(ELECTING)),
        Err(Status::unavailable(ELECTING)),
        Ok(edge()),
    ]);
    let hub = sets_hub(&list, &Script::new([Ok(DeleteClusterSetResponse {})])).await;
    let ran = flotilla(&hub, &["get", "clustersets"], None).await;
    assert!(ran.ok, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("edge"), "{}", ran.stdout);
    let retries: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(
        retries,
        [
            format!("hub unavailable ({ELECTING}); retrying in 0.5 s (attempt 2)"),
            format!("hub unavailable ({ELECTING}); retrying in 1 s (attempt 3)"),
        ],
        "{}",
        ran.stderr
    );
    assert_eq!(list.calls(), 3);
    assert!(ran.took >= Duration::from_millis(1500), "{:?}", ran.took);
}

#[tokio::test]
async fn with_retry_seconds_zero_the_hubs_unavailable_fails_at_once() {
    let list = Script::new([Err(Status::unavailable(ELECTING)), Ok(edge())]);
    let hub = sets_hub(&list, &Script::new([Ok(DeleteClusterSetResponse {})])).await;
    let ran = flotilla(&hub, &["--retry-seconds", "0", "get", "clustersets"], None).await;
    assert!(!ran.ok, "{}", ran.stdout);
    assert_eq!(ran.stderr, format!("error: unavailable: {ELECTING}\n"));
    assert_eq!(list.calls(), 1);
}

#[tokio::test]
async fn a_hub_still_unavailable_when_the_budget_is_spent_fails_saying_how_long_it_was_tried() {
    let list = Script::new([Err(Status::unavailable(ELECTING))]);
    let hub = sets_hub(&list, &Script::new([Ok(DeleteClusterSetResponse {})])).await;
    let ran = flotilla(&hub, &["--retry-seconds", "1", "get", "clustersets"], None).await;
    assert!(!ran.ok, "{}", ran.stdout);
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: the hub was still unavailable after 3 attempts in 1")
            && last.contains("(--retry-seconds 1): unavailable: kv clustersets/edge"),
        "{}",
        ran.stderr
    );
    assert_eq!(list.calls(), 3, "0.5 s, then the 0.5 s left");
}

#[tokio::test]
async fn a_retried_delete_answered_not_found_had_landed_and_succeeds() {
    let delete = Script::new([
        Err(Status::unavailable(ELECTING)),
        Err(Status::not_found("ManagedClusterSet edge not found")),
    ]);
    let hub = sets_hub(&Script::new([Ok(edge())]), &delete).await;
    let ran = flotilla(&hub, &["delete", "clusterset", "edge"], None).await;
    assert!(ran.ok, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stdout,
        "managedclusterset/edge deleted; not found when retried: an earlier attempt had landed, \
         or it was already gone\n"
    );
    assert_eq!(
        ran.stderr,
        format!("hub unavailable ({ELECTING}); retrying in 0.5 s (attempt 2)\n")
    );
    assert_eq!(delete.calls(), 2);
}

#[tokio::test]
async fn a_delete_answered_not_found_at_once_still_fails() {
    let delete = Script::new([Err(Status::not_found("ManagedClusterSet edge not found"))]);
    let hub = sets_hub(&Script::new([Ok(edge())]), &delete).await;
    let ran = flotilla(&hub, &["delete", "clusterset", "edge"], None).await;
    assert!(!ran.ok, "{}", ran.stdout);
    assert_eq!(
        ran.stderr,
        "error: not found: ManagedClusterSet edge not found\n"
    );
}

#[tokio::test]
async fn works_of_an_apply_stream_answered_unavailable_are_sent_again_alone() {
    let rounds = Arc::default();
    let works = Works {
        unavailable: vec!["w2".into()],
        rounds: Arc::clone(&rounds),
    };
    let hub =
        serve(tonic::transport::Server::builder().add_service(WorkServiceServer::new(works))).await;
    let file: String = (1..=3)
        .map(|i| {
            format!(
                "---\napiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
                 metadata: {{namespace: edge, name: w{i}}}\nspec:\n  workload:\n    manifests:\n\
                 \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}, namespace: default}}}}\n"
            )
        })
        .collect();
    let ran = flotilla(&hub, &["apply", "-f", "-"], Some(&file)).await;
    assert!(ran.ok, "{}{}", ran.stdout, ran.stderr);
    let applied: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(
        applied,
        (1..=3)
            .map(|i| format!(
                "manifestwork.work.open-cluster-management.io/w{i} applied (cluster edge, generation 1)"
            ))
            .collect::<Vec<_>>(),
        "in document order"
    );
    assert_eq!(
        ran.stderr,
        "hub unavailable (kv works/edge.w2: the store did not answer — retry); retrying in 0.5 s \
         (attempt 2)\n"
    );
    assert_eq!(
        *rounds.lock().unwrap(),
        [vec!["w1", "w2", "w3"], vec!["w2"]],
        "only the work answered unavailable is sent again"
    );
}

//! Unary calls forwarded over NATS from a hub that does not hold the controllers to the one that
//! does (`grpc::forward`): real tonic servers and clients in-process, a real nats-server.
//!
//! The "edge" hub serves `ClusterSetService` behind the hub's real [`Authenticate`] layer and
//! [`Forward`]; the "holder" runs [`serve`] with its routes behind the same layer. Both share a
//! sealing key: the edge checks the caller's token and vouches for the identity it found, the
//! token itself never crosses NATS, and the holder holds that identity to its role again.

use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::cluster_set_service_server::{ClusterSetService, ClusterSetServiceServer};
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{
    DeleteBindingRequest, DeleteBindingResponse, DeleteClusterSetResponse, ForwardedHeader,
    ForwardedIdentity, ForwardedReply, GetClusterSetRequest, InnerCall, ListBindingsRequest,
    ListBindingsResponse, ListClusterSetsRequest, ListClusterSetsResponse, ManagedClusterSet,
    ManagedClusterSetBinding, ManagedClusterSetView, ObjectMeta, WatchPlacementsRequest,
};
use flotilla_hub::grpc::auth::{Authenticate, Identity, Tokens};
use flotilla_hub::grpc::forward::{self, Decision, Forward, ServeError, is_watch, serve};
use flotilla_hub::sealed::{HubSeal, ReplyKey};
use flotilla_hub::serviceaccount::key::SealingKey;
use flotilla_testkit::NatsServer;
use prost::Message as _;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tower::Layer;

const SUBJECT: &str = "flotilla.test.forward";
const ADMIN: &str = "0123456789abcdef-admin";
const TOKENS: &str = "0123456789abcdef-admin,alice,admin\n0123456789abcdef-view,bob,read-only\n";
const NOT_FOUND: &str = "managedclusterset \"missing\" not found";

/// The sealing key the hubs of these tests share (as every hub of a control plane does).
static SEAL: std::sync::LazyLock<HubSeal> = std::sync::LazyLock::new(another_control_plane);

/// A sealing key of its own, read from a file as a shared key is.
fn another_control_plane() -> HubSeal {
    let dir = tempfile::tempdir().unwrap();
    let key = SealingKey::from_file(&dir.path().join("sealing.xk")).unwrap();
    HubSeal::new(key)
}

/// Every await in these tests is bounded.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 30 s"))
}

fn meta(name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: name.into(),
        ..Default::default()
    })
}

/// The cluster-set service of one hub: says which hub answered, who the holder's
/// authentication layer found the caller to be, and what request id arrived.
#[derive(Clone)]
struct Sets {
    hub: &'static str,
}

#[tonic::async_trait]
impl ClusterSetService for Sets {
    async fn apply_cluster_set(
        &self,
        req: Request<ManagedClusterSet>,
    ) -> Result<Response<ManagedClusterSet>, Status> {
        Ok(Response::new(req.into_inner()))
    }

    async fn get_cluster_set(
        &self,
        req: Request<GetClusterSetRequest>,
    ) -> Result<Response<ManagedClusterSetView>, Status> {
        let caller = req
            .extensions()
            .get::<Identity>()
            .map_or("nobody".to_string(), |i| i.name().to_string());
        let request_id = req
            .metadata()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_string();
        let forged = req.metadata().get("x-forged-identity").is_some();
        let name = req.into_inner().name;
        if name == "missing" {
            return Err(Status::not_found(NOT_FOUND));
        }
        let mut members = vec![self.hub.to_string(), request_id];
        if forged {
            members.push("a forged header arrived".into());
        }
        let mut response = Response::new(ManagedClusterSetView {
            set: Some(ManagedClusterSet {
                metadata: meta(&name),
                ..Default::default()
            }),
            bound_namespaces: vec![caller],
            members,
        });
        response
            .metadata_mut()
            .insert("x-served-by", self.hub.parse().unwrap());
        Ok(response)
    }

    async fn list_cluster_sets(
        &self,
        _req: Request<ListClusterSetsRequest>,
    ) -> Result<Response<ListClusterSetsResponse>, Status> {
        Ok(Response::new(ListClusterSetsResponse {
            items: vec![ManagedClusterSetView {
                set: Some(ManagedClusterSet {
                    metadata: meta(self.hub),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        }))
    }

    /// Takes far longer than any deadline in these tests.
    async fn delete_cluster_set(
        &self,
        _req: Request<GetClusterSetRequest>,
    ) -> Result<Response<DeleteClusterSetResponse>, Status> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(Response::new(DeleteClusterSetResponse {}))
    }

    async fn apply_binding(
        &self,
        req: Request<ManagedClusterSetBinding>,
    ) -> Result<Response<ManagedClusterSetBinding>, Status> {
        Ok(Response::new(req.into_inner()))
    }

    async fn list_bindings(
        &self,
        _req: Request<ListBindingsRequest>,
    ) -> Result<Response<ListBindingsResponse>, Status> {
        Ok(Response::new(ListBindingsResponse::default()))
    }

    async fn delete_binding(
        &self,
        _req: Request<DeleteBindingRequest>,
    ) -> Result<Response<DeleteBindingResponse>, Status> {
        Ok(Response::new(DeleteBindingResponse {}))
    }
}

/// What the edge does with each call: watches refused, listing sets served locally, every
/// other call forwarded.
fn route(path: &str) -> Decision {
    if is_watch(path) {
        Decision::Refuse(format!(
            "{path} streams: make the watch on the hub holding the controllers"
        ))
    } else if path == "/flotilla.v1.ClusterSetService/ListClusterSets" {
        Decision::Local
    } else {
        Decision::Forward
    }
}

/// A hub serving forwarded calls until its stop is sent.
struct Holder {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Holder {
    async fn start(url: &str) -> Self {
        Self::start_with(url, SEAL.clone()).await
    }

    async fn start_with(url: &str, seal: HubSeal) -> Self {
        let nats = within("connecting the holder", async_nats::connect(url))
            .await
            .unwrap();
        let routes =
            tonic::service::Routes::new(ClusterSetServiceServer::new(Sets { hub: "holder" }))
                .prepare();
        let tokens = Tokens::parse("tokens.csv", TOKENS).unwrap();
        let service = Authenticate::new(Some(tokens)).layer(routes);
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(serve(
            nats,
            SUBJECT,
            service,
            seal,
            flotilla_hub::sealed::ReplayLimits::default(),
            forward::ForwardMetrics::default(),
            stop_rx,
        ));
        Self { stop, task }
    }

    /// Stops serving and checks that `serve` returned cleanly.
    async fn stop(self) {
        self.stop.send(true).unwrap();
        within("the holder stopping", self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// A hub without the controllers: its gRPC server checks tokens and forwards through
/// `forward`.
struct Edge {
    addr: SocketAddr,
    _stop: watch::Sender<bool>,
}

impl Edge {
    async fn start(url: &str, configure: impl FnOnce(Forward) -> Forward) -> Self {
        let tokens = Tokens::parse("tokens.csv", TOKENS).unwrap();
        Self::start_with(url, Some(tokens), SEAL.clone(), configure).await
    }

    async fn start_with(
        url: &str,
        tokens: Option<Tokens>,
        seal: HubSeal,
        configure: impl FnOnce(Forward) -> Forward,
    ) -> Self {
        let nats = within("connecting the edge", async_nats::connect(url))
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let layer = configure(Forward::new(nats, SUBJECT, route, seal));
        let (stop, mut stop_rx) = watch::channel(false);
        let server = tonic::transport::Server::builder()
            .layer(Authenticate::new(tokens))
            .layer(layer)
            .add_service(ClusterSetServiceServer::new(Sets { hub: "edge" }));
        tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            server
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = stop_rx.changed().await;
                })
                .await
                .unwrap();
        });
        Self { addr, _stop: stop }
    }

    async fn client(&self) -> ClusterSetServiceClient<Channel> {
        within(
            "connecting to the edge",
            ClusterSetServiceClient::connect(format!("http://{}", self.addr)),
        )
        .await
        .unwrap()
    }
}

fn authorized<T>(message: T, token: &str) -> Request<T> {
    let mut req = Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

fn get(name: &str) -> GetClusterSetRequest {
    GetClusterSetRequest { name: name.into() }
}

#[tokio::test]
async fn a_unary_call_through_a_hub_without_the_controllers_gets_the_holders_answer() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let edge = Edge::start(&nats.url(), |f| f).await;
    let mut client = edge.client().await;

    let mut req = authorized(get("prod"), ADMIN);
    req.metadata_mut()
        .insert("x-request-id", "req-42".parse().unwrap());
    req.metadata_mut()
        .insert("x-forged-identity", "admin".parse().unwrap());
    let response = within("a forwarded get", client.get_cluster_set(req))
        .await
        .unwrap();
    assert_eq!(response.metadata().get("x-served-by").unwrap(), "holder");
    let view = response.into_inner();
    assert_eq!(view.set.unwrap().metadata.unwrap().name, "prod");
    // The holder's authentication layer took the caller the edge vouched for; the request id
    // travelled, the unlisted header did not.
    assert_eq!(view.bound_namespaces, ["alice"]);
    assert_eq!(view.members, ["holder", "req-42"]);

    // A call the route keeps local never leaves the edge.
    let local = within(
        "a local list",
        client.list_cluster_sets(authorized(ListClusterSetsRequest {}, ADMIN)),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        local.items[0]
            .set
            .as_ref()
            .unwrap()
            .metadata
            .as_ref()
            .unwrap()
            .name,
        "edge"
    );
    holder.stop().await;
}

#[tokio::test]
async fn error_statuses_come_back_unchanged() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let edge = Edge::start(&nats.url(), |f| f).await;
    let mut client = edge.client().await;

    let e = within(
        "a forwarded get of a missing set",
        client.get_cluster_set(authorized(get("missing"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.message(), NOT_FOUND);

    // Refusals of the authentication layer, as the caller would get them on the holder.
    let e = within(
        "a forwarded get without a token",
        client.get_cluster_set(get("prod")),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("no bearer token"), "{}", e.message());
    let e = within(
        "a forwarded get with an unknown token",
        client.get_cluster_set(authorized(get("prod"), "not-a-token-of-this-hub")),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = within(
        "a forwarded write by a read-only caller",
        client.apply_cluster_set(authorized(
            ManagedClusterSet {
                metadata: meta("prod"),
                ..Default::default()
            },
            "0123456789abcdef-view",
        )),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("bob (read-only)"), "{}", e.message());
    holder.stop().await;
}

#[tokio::test]
async fn a_watch_is_refused_with_where_to_make_it() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let edge = Edge::start(&nats.url(), |f| f).await;
    let mut client = within(
        "connecting to the edge",
        PlacementServiceClient::connect(format!("http://{}", edge.addr)),
    )
    .await
    .unwrap();
    let e = within(
        "a watch through the edge",
        client.watch_placements(authorized(WatchPlacementsRequest::default(), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(
        e.message().contains("WatchPlacements")
            && e.message().contains("hub holding the controllers"),
        "{}",
        e.message()
    );
    holder.stop().await;
}

#[tokio::test]
async fn nobody_serving_is_unavailable_after_the_patience() {
    let nats = NatsServer::start();
    let patience = Duration::from_millis(700);
    let edge = Edge::start(&nats.url(), |f| f.with_patience(patience)).await;
    let mut client = edge.client().await;
    let started = Instant::now();
    let e = within(
        "a forwarded get with nobody serving",
        client.get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(
        e.message()
            .contains("no hub holds the controllers (takeover in progress?)"),
        "{}",
        e.message()
    );
    // It was retried for its patience, not refused at the first "no responders".
    assert!(started.elapsed() >= patience);
}

#[tokio::test]
async fn a_call_made_during_a_takeover_is_answered_once_a_hub_serves() {
    let nats = NatsServer::start();
    let edge = Edge::start(&nats.url(), |f| f.with_patience(Duration::from_secs(20))).await;
    let mut client = edge.client().await;
    let call =
        tokio::spawn(async move { client.get_cluster_set(authorized(get("prod"), ADMIN)).await });
    // The call's first attempts find nobody serving (the takeover window).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let holder = Holder::start(&nats.url()).await;
    let view = within("the call made during the takeover", call)
        .await
        .unwrap()
        .unwrap()
        .into_inner();
    assert_eq!(view.members[0], "holder");
    holder.stop().await;
}

#[tokio::test]
async fn a_call_running_past_its_deadline_is_cut_short_by_the_holder() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let edge = Edge::start(&nats.url(), |f| f.with_timeout(Duration::from_millis(500))).await;
    let mut client = edge.client().await;
    let e = within(
        "a forwarded slow delete",
        client.delete_cluster_set(authorized(get("slow"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    assert!(e.message().contains("DeleteClusterSet"), "{}", e.message());
    // Cut short, the call is not in flight any more: the holder stops at once.
    holder.stop().await;
}

#[tokio::test]
async fn a_holder_that_takes_a_call_and_never_answers_leaves_its_outcome_unknown() {
    let nats = NatsServer::start();
    // Takes every call, answers none (a holder that died mid-call).
    let silent = within("connecting", async_nats::connect(nats.url()))
        .await
        .unwrap();
    let _sink = within("subscribing", silent.subscribe(SUBJECT))
        .await
        .unwrap();
    within("flushing", silent.flush()).await.unwrap();
    let edge = Edge::start(&nats.url(), |f| f.with_timeout(Duration::from_millis(300))).await;
    let mut client = edge.client().await;
    let e = within(
        "a forwarded get nobody answers",
        client.get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(
        e.message().contains("outcome is unknown"),
        "{}",
        e.message()
    );
}

#[tokio::test]
async fn oversize_calls_are_resource_exhausted() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let edge = Edge::start(&nats.url(), |f| f).await;
    let mut client = edge.client().await;
    let set = |bytes: usize| {
        let mut metadata = meta("big").unwrap();
        metadata
            .annotations
            .insert("blob".into(), "x".repeat(bytes));
        authorized(
            ManagedClusterSet {
                metadata: Some(metadata),
                ..Default::default()
            },
            ADMIN,
        )
    };
    // Over what a forwarded call carries.
    let e = within(
        "a 9 MiB apply",
        client.apply_cluster_set(set(9 * 1024 * 1024)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("8 MiB"), "{}", e.message());
    // Under it, but over the NATS server's max_payload (1 MiB by default).
    let e = within(
        "a 2 MiB apply",
        client.apply_cluster_set(set(2 * 1024 * 1024)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max_payload"), "{}", e.message());
    // The edge still forwards calls of ordinary size.
    let applied = within("a small apply", client.apply_cluster_set(set(1000)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(applied.metadata.unwrap().annotations["blob"].len(), 1000);
    holder.stop().await;
}

#[tokio::test]
async fn the_holder_answers_only_on_inboxes() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let client = within("connecting", async_nats::connect(nats.url()))
        .await
        .unwrap();
    let mut victim = within("subscribing", client.subscribe("flotilla.test.victim"))
        .await
        .unwrap();
    let reply_key = ReplyKey::new();
    let call = |id: u8| InnerCall {
        call_id: vec![id; 16],
        issued_unix_millis: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
        reply_xkey: reply_key.public().to_string(),
        // What a hub of the control plane vouches for (the box is made with the shared key).
        caller: Some(ForwardedIdentity {
            name: "alice".into(),
            role: "admin".into(),
            execute_as: Vec::new(),
            ..ForwardedIdentity::default()
        }),
        path: "/flotilla.v1.ClusterSetService/ListClusterSets".into(),
        headers: vec![ForwardedHeader {
            name: "content-type".into(),
            value: b"application/grpc".to_vec(),
        }],
        // One empty, uncompressed gRPC message.
        body: vec![0, 0, 0, 0, 0],
    };
    let sealed =
        |id| bytes::Bytes::from(forward::seal_call(&SEAL, call(id)).unwrap().encode_to_vec());
    within(
        "publishing with a non-inbox reply subject",
        client.publish_with_reply(SUBJECT, "flotilla.test.victim", sealed(1)),
    )
    .await
    .unwrap();
    // A call with an inbox is answered; by then the first one was looked at.
    let answer = within("a raw forwarded call", client.request(SUBJECT, sealed(2)))
        .await
        .unwrap();
    let reply = ForwardedReply::decode(answer.payload).unwrap();
    let reply = forward::open_reply(&SEAL, &reply_key, reply).unwrap();
    assert_eq!(reply.http_status, 200);
    let trailers: Vec<_> = reply.trailers.iter().map(|h| h.name.as_str()).collect();
    assert!(trailers.contains(&"grpc-status"), "{trailers:?}");
    let items = ListClusterSetsResponse::decode(&reply.body[5..])
        .unwrap()
        .items;
    assert_eq!(
        items[0]
            .set
            .as_ref()
            .unwrap()
            .metadata
            .as_ref()
            .unwrap()
            .name,
        "holder"
    );
    // The same call id again (a replay of a captured call) is refused, in clear.
    let again = within(
        "a replayed forwarded call",
        client.request(SUBJECT, sealed(2)),
    )
    .await
    .unwrap();
    let refusal = ForwardedReply::decode(again.payload).unwrap();
    assert!(refusal.sealed.is_none() && refusal.body.is_empty());
    let status: Vec<_> = refusal
        .headers
        .iter()
        .filter(|h| h.name == "grpc-status" || h.name == "grpc-message")
        .map(|h| String::from_utf8_lossy(&h.value).to_string())
        .collect();
    assert_eq!(status[0], "9", "FAILED_PRECONDITION: {status:?}");
    assert!(status[1].contains("replay"), "{status:?}");
    within("flushing", client.flush()).await.unwrap();
    let leaked = tokio::time::timeout(
        Duration::from_millis(300),
        futures::StreamExt::next(&mut victim),
    )
    .await;
    assert!(
        leaked.is_err(),
        "the holder answered on a non-inbox subject"
    );
    holder.stop().await;
}

#[tokio::test]
async fn a_holder_that_stopped_serving_takes_no_more_calls() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    let edge = Edge::start(&nats.url(), |f| f.with_patience(Duration::from_millis(300))).await;
    let mut client = edge.client().await;
    within(
        "a forwarded get",
        client.get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap();
    holder.stop().await;
    let e = within(
        "a forwarded get after the holder stopped",
        client.get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(e.message().contains("no hub holds"), "{}", e.message());
}

#[tokio::test]
async fn a_holder_never_takes_a_token_from_the_wire_nor_a_call_of_another_key() {
    let nats = NatsServer::start();
    let holder = Holder::start(&nats.url()).await;
    // An edge that checks no token vouches for nobody: the caller's token stays behind, and
    // the holder, which requires one, refuses the call.
    let open = Edge::start_with(&nats.url(), None, SEAL.clone(), |f| f).await;
    let e = within(
        "a forwarded get through an edge that vouches for nobody",
        open.client()
            .await
            .get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    // An edge of another control plane (another sealing key): its calls do not open.
    let stranger = Edge::start_with(
        &nats.url(),
        Some(Tokens::parse("tokens.csv", TOKENS).unwrap()),
        another_control_plane(),
        |f| f,
    )
    .await;
    let e = within(
        "a forwarded get sealed with another key",
        stranger
            .client()
            .await
            .get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("do not share"), "{}", e.message());
    // An edge without a shared key refuses to send a caller's identity in clear.
    let alone = Edge::start_with(
        &nats.url(),
        Some(Tokens::parse("tokens.csv", TOKENS).unwrap()),
        HubSeal::new(SealingKey::ephemeral()),
        |f| f,
    )
    .await;
    let e = within(
        "a forwarded get through an edge without a shared key",
        alone
            .client()
            .await
            .get_cluster_set(authorized(get("prod"), ADMIN)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("sealing key"), "{}", e.message());
    holder.stop().await;
}

#[tokio::test]
async fn hubs_without_a_shared_key_forward_an_open_apis_calls() {
    let nats = NatsServer::start();
    let nats_client = within("connecting the holder", async_nats::connect(nats.url()))
        .await
        .unwrap();
    let routes =
        tonic::service::Routes::new(ClusterSetServiceServer::new(Sets { hub: "holder" })).prepare();
    let service = Authenticate::new(None).layer(routes);
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(serve(
        nats_client,
        SUBJECT,
        service,
        HubSeal::new(SealingKey::ephemeral()),
        flotilla_hub::sealed::ReplayLimits::default(),
        forward::ForwardMetrics::default(),
        stop_rx,
    ));
    let edge = Edge::start_with(
        &nats.url(),
        None,
        HubSeal::new(SealingKey::ephemeral()),
        |f| f,
    )
    .await;
    let view = within(
        "a forwarded get between open hubs",
        edge.client().await.get_cluster_set(get("prod")),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(view.members[0], "holder");
    assert_eq!(view.bound_namespaces, ["nobody"]);
    stop.send(true).unwrap();
    within("the holder stopping", task).await.unwrap().unwrap();
}

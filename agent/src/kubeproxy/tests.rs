use super::*;
use crate::backend::sim::SimBackend;
use crate::backend::{ApplyOutcome, BackendError, ClusterInfo, Strategy};
use flotilla_api::work::ManifestId;
use flotilla_testkit::NatsServer;
use serde_json::Value;
use tokio::sync::Notify;

/// How [`Reader`]'s API server treats a request body.
#[derive(Clone, Copy)]
enum Reads {
    /// Reads it once `go` is notified, then answers 200 with the bytes read.
    After,
    /// Answers 403 at once, reading none of it.
    Never,
}

/// A cluster whose API server reads request bodies as told, and says what became of each.
struct Reader {
    inner: SimBackend,
    reads: Reads,
    go: Arc<Notify>,
    /// Bytes read of each body, or how it broke off.
    seen: tokio::sync::mpsc::UnboundedSender<Result<usize, String>>,
}

#[async_trait::async_trait]
impl Backend for Reader {
    async fn info(&self) -> ClusterInfo {
        self.inner.info().await
    }
    async fn apply(
        &self,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        self.inner.apply(id, object, strategy).await
    }
    async fn get(&self, id: &ManifestId) -> Result<Option<Value>, BackendError> {
        self.inner.get(id).await
    }
    async fn delete(&self, id: &ManifestId) -> Result<bool, BackendError> {
        self.inner.delete(id).await
    }
    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>, BackendError> {
        self.inner.list(kind, namespace).await
    }
    async fn serve_api(self: Arc<Self>, request: ApiRequest) -> ApiResponse {
        if let Reads::Never = self.reads {
            return ApiResponse::status(http::StatusCode::FORBIDDEN, "Forbidden", "not you");
        }
        self.go.notified().await;
        // Read by a task of its own, as an HTTP client's connection sends a body: a call
        // dropped mid-body leaves it to see how the body ends.
        let mut body = request.body.into_stream();
        let seen = self.seen.clone();
        let reading = tokio::spawn(async move {
            let mut read = 0;
            while let Some(chunk) = body.next().await {
                match chunk {
                    Ok(c) => read += c.len(),
                    Err(e) => {
                        let _ = seen.send(Err(e.to_string()));
                        return None;
                    }
                }
            }
            let _ = seen.send(Ok(read));
            Some(read)
        });
        let Ok(Some(read)) = reading.await else {
            return ApiResponse::status(http::StatusCode::BAD_REQUEST, "BadRequest", "broke off");
        };
        ApiResponse::json(http::StatusCode::OK, &serde_json::json!({ "read": read }))
    }
}

/// A hub's end of an agent's cluster-proxy server: sends frames, reads the answers.
pub(super) struct FakeHub {
    client: async_nats::Client,
    /// The hub's token.
    pub(super) hub: String,
    /// Where the agent's frames come back.
    pub(super) back: async_nats::Subscriber,
}

impl FakeHub {
    pub(super) async fn new(client: &async_nats::Client) -> Self {
        let hub = uuid::Uuid::new_v4().simple().to_string();
        let back = client
            .subscribe(subjects::kubeapi_back("edge-1", &hub))
            .await
            .unwrap();
        client.flush().await.unwrap();
        Self {
            client: client.clone(),
            hub,
            back,
        }
    }

    pub(super) async fn send(&self, stream: &StreamId, seq: u64, frame: Frame) {
        let event = tunnel::encode(
            tunnel::down_type(),
            "flotilla-hub",
            "edge-1",
            stream,
            seq,
            frame,
        );
        let bytes = event.encode(1 << 20).unwrap();
        self.client
            .publish(subjects::kubeapi("edge-1"), bytes)
            .await
            .unwrap();
        self.client.flush().await.unwrap();
    }

    fn request(&self, method: &str) -> TunnelRequest {
        TunnelRequest {
            method: method.into(),
            path: "/api/v1/namespaces/default/configmaps".into(),
            hub: self.hub.clone(),
            has_body: true,
            window: 8,
            max_chunk: 64 * 1024,
            ..Default::default()
        }
    }

    /// Opens a call, asking again until the agent's subscription is up; its first frame.
    pub(super) async fn open(&mut self, request: TunnelRequest) -> (StreamId, Frame) {
        loop {
            let stream = StreamId::random();
            self.send(&stream, 0, Frame::Request(Box::new(request.clone())))
                .await;
            if let Ok(Some(msg)) =
                tokio::time::timeout(Duration::from_millis(500), self.back.next()).await
            {
                return (stream, decode_up(&msg.payload).frame);
            }
        }
    }

    async fn next(&mut self) -> Frame {
        let msg = tokio::time::timeout(Duration::from_secs(5), self.back.next())
            .await
            .expect("a frame within 5 s")
            .expect("the subscription is open");
        decode_up(&msg.payload).frame
    }
}

pub(super) fn decode_up(payload: &[u8]) -> Received {
    tunnel::decode(payload, 1 << 20, &tunnel::up_type(), "edge-1", 1 << 20).unwrap()
}

/// An agent's proxy server over `backend` with `limits`.
pub(super) fn serve(
    js: &async_nats::jetstream::Context,
    backend: Arc<dyn Backend>,
    limits: Limits,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<crate::metrics::AgentMetrics>,
) {
    let metrics: Arc<crate::metrics::AgentMetrics> = Arc::default();
    let server = Server::new(js, "edge-1", backend, 1 << 20).with_limits(limits, metrics.clone());
    (tokio::spawn(server.run()), metrics)
}

fn reader(
    reads: Reads,
) -> (
    Arc<Reader>,
    tokio::sync::mpsc::UnboundedReceiver<Result<usize, String>>,
) {
    let (seen, rx) = tokio::sync::mpsc::unbounded_channel();
    (
        Arc::new(Reader {
            inner: SimBackend::new(8, 32, "v1.30.2"),
            reads,
            go: Arc::new(Notify::new()),
            seen,
        }),
        rx,
    )
}

/// Waits until the agent holds `bytes` of request bodies (5 s at most).
async fn holds(metrics: &crate::metrics::AgentMetrics, bytes: i64) {
    let reached = tokio::time::timeout(Duration::from_secs(5), async {
        while metrics.proxy_body_bytes.get() != bytes {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "the agent holds {} bytes of bodies, not {bytes}",
        metrics.proxy_body_bytes.get()
    );
}

#[tokio::test]
async fn a_call_over_the_agents_cap_is_answered_with_a_retryable_503() {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let hub = uuid::Uuid::new_v4().simple().to_string();
    let mut back = client
        .subscribe(subjects::kubeapi_back("edge-1", &hub))
        .await
        .unwrap();
    client.flush().await.unwrap();
    let shared = Arc::new(Shared {
        publisher: Publisher::new(client.clone(), 1 << 20, Duration::from_secs(5)),
        cluster: "edge-1".into(),
        source: "flotilla-agent/edge-1".into(),
        backend: Arc::new(SimBackend::new(8, 32, "v1.30.2")),
        budget: Arc::new(Semaphore::new(DEFAULT_BODY_BYTES)),
        body_bytes: DEFAULT_BODY_BYTES,
        metrics: Arc::default(),
    });
    let request = TunnelRequest {
        method: "GET".into(),
        path: "/api/v1/pods".into(),
        hub,
        ..Default::default()
    };
    let call = Call::new(shared, StreamId::random(), &request);
    call.refuse(Refusal::busy(format!(
        "the agent already serves {MAX_CALLS} calls; try again later"
    )))
    .await;
    client.flush().await.unwrap();
    let mut frames = Vec::new();
    while frames.len() < 3 {
        let msg = tokio::time::timeout(Duration::from_secs(5), back.next())
            .await
            .unwrap()
            .unwrap();
        let got =
            tunnel::decode(&msg.payload, 1 << 20, &tunnel::up_type(), "edge-1", 1 << 20).unwrap();
        frames.push(got.frame);
    }
    let Frame::Response(head) = &frames[0] else {
        panic!(
            "a response head first, not a cancel: {:?}",
            frames[0].name()
        )
    };
    assert_eq!(head.status, 503);
    let Frame::Data(body) = &frames[1] else {
        panic!("a Status body")
    };
    let status: serde_json::Value = serde_json::from_slice(body).unwrap();
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("try again later"),
        "{status}"
    );
    assert!(matches!(frames[2], Frame::End));
}

/// Frames the agent sends back on `back` until (and with) the call's `End`, within 5 s each.
async fn frames_until_end(back: &mut async_nats::Subscriber) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), back.next())
            .await
            .expect("a frame within 5 s")
            .expect("the subscription is open");
        let got =
            tunnel::decode(&msg.payload, 1 << 20, &tunnel::up_type(), "edge-1", 1 << 20).unwrap();
        let end = matches!(got.frame, Frame::End);
        frames.push(got.frame);
        if end {
            return frames;
        }
    }
}

/// The `Status` the agent answered with: its code and message.
fn answered(frames: &[Frame]) -> (u32, String) {
    let head = frames.iter().find_map(|f| match f {
        Frame::Response(head) => Some(head.status),
        _ => None,
    });
    let body = frames.iter().find_map(|f| match f {
        Frame::Data(body) => Some(body.clone()),
        _ => None,
    });
    let status: serde_json::Value = serde_json::from_slice(&body.expect("a Status body")).unwrap();
    (
        head.expect("a response head"),
        status["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn a_read_with_a_body_is_refused_unasked_and_bodies_past_the_agents_budget_are_answered_429()
{
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let mut hub = FakeHub::new(&client).await;
    // An API server that reads nothing yet: what the hub sends waits in the agent.
    let (backend, _seen) = reader(Reads::After);
    let (serving, metrics) = serve(
        &js,
        backend,
        Limits {
            calls_per_caller: 64,
            body_bytes: 64 * 1024,
            ..Limits::default()
        },
    );

    // A GET with a body: answered 400 before any credit.
    let (_, first) = hub.open(hub.request("GET")).await;
    assert!(
        matches!(first, Frame::Response(_)),
        "the answer first, no credit: {:?}",
        first.name()
    );
    let mut frames = vec![first];
    frames.extend(frames_until_end(&mut hub.back).await);
    let (code, message) = answered(&frames);
    assert_eq!(code, 400, "{message}");
    assert!(
        message.contains("GET") && message.contains("body"),
        "{message}"
    );

    // A POST whose body waits for a cluster that does not read it, past the 64 KiB the agent
    // may hold: 429 naming the flag.
    let (stream, credit) = hub.open(hub.request("POST")).await;
    assert!(matches!(credit, Frame::Credit(8)), "{:?}", credit.name());
    for seq in 1..=3 {
        hub.send(
            &stream,
            seq,
            Frame::Data(Bytes::from(vec![b' '; 40 * 1024])),
        )
        .await;
    }
    let frames = frames_until_end(&mut hub.back).await;
    let (code, message) = answered(&frames);
    assert_eq!(code, 429, "{message}");
    assert!(message.contains("--cluster-proxy-body-bytes"), "{message}");
    let text = metrics.render();
    assert!(
        text.contains("proxy_refusals_total{reason=\"body_bytes\"} 1")
            && text.contains("proxy_refusals_total{reason=\"body_on_read\"} 1"),
        "{text}"
    );
    // What the refused call held is given back as its task ends.
    holds(&metrics, 0).await;
    serving.abort();
}

#[tokio::test]
async fn a_body_streams_to_the_cluster_and_the_hub_is_granted_more_only_as_it_is_read() {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let mut hub = FakeHub::new(&client).await;
    let (backend, mut seen) = reader(Reads::After);
    let (serving, metrics) = serve(
        &js,
        backend.clone(),
        Limits {
            calls_per_caller: 64,
            body_bytes: 320 * 1024,
            ..Limits::default()
        },
    );
    // A body of 20 chunks of 32 KiB (640 KiB, twice what the agent may hold).
    let chunk = || Frame::Data(Bytes::from(vec![b'x'; 32 * 1024]));
    let (stream, first) = hub.open(hub.request("PUT")).await;
    let Frame::Credit(mut granted) = first else {
        panic!("a credit first: {:?}", first.name())
    };
    assert_eq!(granted, 8);
    let mut sent = 0;
    while sent < granted {
        sent += 1;
        hub.send(&stream, sent, chunk()).await;
    }
    // The cluster reads nothing yet: the window waits in the agent, no more is granted.
    holds(&metrics, 8 * 32 * 1024).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), hub.back.next())
            .await
            .is_err(),
        "no credit while the cluster reads nothing"
    );
    // It reads: credit comes back as it does, the rest follows within it.
    backend.go.notify_one();
    while sent < 20 {
        match hub.next().await {
            Frame::Credit(n) => granted = n,
            other => panic!("credit while the body streams, not {:?}", other.name()),
        }
        while sent < granted.min(20) {
            sent += 1;
            hub.send(&stream, sent, chunk()).await;
        }
    }
    hub.send(&stream, sent + 1, Frame::End).await;
    let read = tokio::time::timeout(Duration::from_secs(5), seen.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read, Ok(20 * 32 * 1024), "the whole body, in order");
    let frames = frames_until_end(&mut hub.back).await;
    let head = frames
        .iter()
        .find_map(|f| match f {
            Frame::Response(head) => Some(head.status),
            _ => None,
        })
        .expect("a response");
    assert_eq!(head, 200);
    holds(&metrics, 0).await;
    serving.abort();
}

#[tokio::test]
async fn a_call_cancelled_mid_body_breaks_the_body_off_and_an_early_answer_stops_it() {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let mut hub = FakeHub::new(&client).await;
    let (backend, mut seen) = reader(Reads::After);
    let (serving, metrics) = serve(&js, backend.clone(), Limits::default());

    // Cancelled after two chunks: the cluster sees the body break off, never a clean end.
    let (stream, _credit) = hub.open(hub.request("POST")).await;
    for seq in 1..=2 {
        hub.send(&stream, seq, Frame::Data(Bytes::from_static(b"{\"kind\":")))
            .await;
    }
    holds(&metrics, 2 * 8).await;
    backend.go.notify_one();
    hub.send(&stream, 3, Frame::Cancel("the client went away".into()))
        .await;
    let outcome = tokio::time::timeout(Duration::from_secs(5), seen.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        outcome.as_ref().is_err_and(|e| e.contains("broke off")),
        "{outcome:?}"
    );
    holds(&metrics, 0).await;
    serving.abort();

    // A cluster that answers before reading: the answer goes back at once, and what the hub
    // still sends of the body is dropped without breaking the call.
    let (backend, _seen) = reader(Reads::Never);
    let (serving, _metrics) = serve(&js, backend, Limits::default());
    let (stream, _credit) = hub.open(hub.request("POST")).await;
    hub.send(&stream, 1, Frame::Data(Bytes::from_static(b"late")))
        .await;
    let mut frames = Vec::new();
    loop {
        let frame = hub.next().await;
        let end = matches!(frame, Frame::End);
        frames.push(frame);
        if end {
            break;
        }
    }
    hub.send(&stream, 2, Frame::Data(Bytes::from_static(b"later")))
        .await;
    hub.send(&stream, 3, Frame::End).await;
    let (code, message) = answered(&frames);
    assert_eq!(code, 403, "{message}");
    assert!(
        !frames.iter().any(|f| matches!(f, Frame::Cancel(_))),
        "no cancel: {:?}",
        frames.iter().map(Frame::name).collect::<Vec<_>>()
    );
    serving.abort();
}

use super::super::tests::{FakeHub, decode_up, serve};
use super::*;
use crate::backend::Backend;
use crate::backend::session::{Channel, input_channel};
use crate::backend::sim::SimBackend;
use crate::backend::{ApplyOutcome, BackendError, ClusterInfo, Strategy};
use crate::kubeproxy::Limits;
use flotilla_api::work::ManifestId;
use flotilla_bus::tunnel::StreamId;
use flotilla_bus::tunnel::session::{STDERR, STDIN, STDOUT, Streams};
use flotilla_testkit::NatsServer;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A cluster whose sessions echo: stdin (or a port-forward's bytes) comes back on stdout (on
/// the connection), a resize comes back as `WxH\n`; `fail N` writes `oops` on stderr and
/// exits N; `forbidden` is refused 403. It records what it was asked for.
struct Echo {
    inner: SimBackend,
    asked: Mutex<Vec<SessionRequest>>,
}

#[async_trait::async_trait]
impl Backend for Echo {
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
    async fn open_session(
        self: Arc<Self>,
        request: SessionRequest,
    ) -> Result<Session, ApiResponse> {
        self.asked.lock().unwrap().push(request.clone());
        let (input, rx) = input_channel();
        let output: crate::backend::session::OutputStream = match &request.kind {
            SessionKind::Exec { command } if command[0] == "forbidden" => {
                return Err(ApiResponse::status(
                    http::StatusCode::FORBIDDEN,
                    "Forbidden",
                    "pods \"p\" is forbidden: not you",
                ));
            }
            SessionKind::Exec { command } if command[0] == "fail" => {
                let code: u8 = command[1].parse().unwrap();
                Box::pin(futures::stream::iter([
                    Output::Data(Channel::Stderr, Bytes::from_static(b"oops\n")),
                    Output::End(Channel::Stderr),
                    Output::Exit(SessionStatus::exited(code)),
                ]))
            }
            SessionKind::PortForward { .. } => echo(rx, Channel::Data, false),
            _ => echo(rx, Channel::Stdout, true),
        };
        Ok(Session { input, output })
    }
}

/// Echoes `rx` on `channel` until it ends, then ends the channel (and exits 0 when `exit`).
fn echo(
    rx: mpsc::Receiver<Input>,
    channel: Channel,
    exit: bool,
) -> crate::backend::session::OutputStream {
    let outputs = futures::stream::unfold(Some(rx), move |rx| async move {
        let mut rx = rx?;
        let outputs = match rx.recv().await {
            Some(Input::Data(bytes)) => {
                return Some((vec![Output::Data(channel, bytes)], Some(rx)));
            }
            Some(Input::Resize { width, height }) => {
                let line = Bytes::from(format!("{width}x{height}\n"));
                return Some((vec![Output::Data(channel, line)], Some(rx)));
            }
            Some(Input::End) | None => {
                let mut outputs = vec![Output::End(channel)];
                if exit {
                    outputs.push(Output::Exit(SessionStatus::Success));
                }
                outputs
            }
        };
        Some((outputs, None))
    });
    Box::pin(outputs.flat_map(futures::stream::iter))
}

fn echo_backend() -> Arc<Echo> {
    Arc::new(Echo {
        inner: SimBackend::new(8, 32, "v1.30.2"),
        asked: Mutex::new(Vec::new()),
    })
}

fn exec(command: &[&str], streams: Streams) -> Spec {
    Spec {
        kind: Kind::Exec,
        container: Some("c".into()),
        command: command.iter().map(|s| s.to_string()).collect(),
        streams,
        port: 0,
    }
}

fn streams(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> Streams {
    Streams {
        stdin,
        stdout,
        stderr,
        tty,
    }
}

/// The session request a hub sends for `spec` on `path` (window `window`).
fn ask(hub: &FakeHub, spec: &Spec, path: &str, window: u32) -> TunnelRequest {
    TunnelRequest {
        method: "GET".into(),
        path: path.into(),
        hub: hub.hub.clone(),
        window,
        max_chunk: 64 * 1024,
        caller: Some(flotilla_api::v1::TunnelCaller {
            name: "alice".into(),
            role: "admin".into(),
        }),
        session: Some(spec.to_wire()),
        ..Default::default()
    }
}

const EXEC: &str = "/api/v1/namespaces/default/pods/p/exec";

/// One session as the hub drives it: its stream, its counter, and its frames coming back.
struct Driver {
    hub: FakeHub,
    stream: StreamId,
    seq: u64,
}

impl Driver {
    /// Opens the session; the agent's first frame (its credit).
    async fn open(mut hub: FakeHub, request: TunnelRequest) -> (Self, Frame) {
        let (stream, first) = hub.open(request).await;
        (
            Self {
                hub,
                stream,
                seq: 0,
            },
            first,
        )
    }

    async fn send(&mut self, frame: Frame) {
        self.seq += 1;
        self.hub.send(&self.stream, self.seq, frame).await;
    }

    /// The session's next frame from the agent (pings skipped), within 5 s.
    async fn next(&mut self) -> Frame {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.hub.back.next())
                .await
                .expect("a frame within 5 s")
                .expect("the subscription is open");
            let got = decode_up(&msg.payload);
            if got.stream == self.stream && !matches!(got.frame, Frame::Ping) {
                return got.frame;
            }
        }
    }
}

async fn agent(backend: Arc<dyn Backend>) -> (NatsServer, FakeHub, tokio::task::JoinHandle<()>) {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let hub = FakeHub::new(&client).await;
    let (serving, _metrics) = serve(&js, backend, Limits::default());
    (nats, hub, serving)
}

fn is_head(frame: &Frame, status: u32) -> bool {
    matches!(frame, Frame::Response(head) if head.status == status)
}

#[tokio::test]
async fn stdin_streams_to_the_process_and_its_output_back_within_both_credits() {
    let backend = echo_backend();
    let (_nats, hub, serving) = agent(backend.clone()).await;
    let spec = exec(&["cat"], streams(true, true, false, false));
    let request = ask(&hub, &spec, EXEC, 8);
    let (mut s, first) = Driver::open(hub, request).await;
    let Frame::Credit(mut granted) = first else {
        panic!("a credit first: {}", first.name())
    };
    assert_eq!(granted, 8);
    let head = s.next().await;
    assert!(is_head(&head, 101), "the session opened: {}", head.name());
    let asked = backend.asked.lock().unwrap()[0].clone();
    assert_eq!(
        (asked.namespace.as_str(), asked.pod.as_str()),
        ("default", "p")
    );
    assert_eq!(asked.container.as_deref(), Some("c"));
    assert_eq!(
        asked.kind,
        SessionKind::Exec {
            command: vec!["cat".into()]
        }
    );

    // 20 chunks of 32 KiB in, within the agent's credit; the echo comes back within ours.
    let (chunks, size) = (20u64, 32 * 1024);
    let mut ours = RecvWindow::new(8);
    let (mut sent, mut echoed) = (0u64, Vec::new());
    while echoed.len() < (chunks as usize) * size {
        while sent < granted.min(chunks) {
            sent += 1;
            let data = Bytes::from(vec![(sent % 251) as u8; size]);
            s.send(Frame::Chunk {
                channel: STDIN,
                data,
            })
            .await;
        }
        match s.next().await {
            Frame::Credit(n) => granted = n,
            Frame::Chunk { channel, data } => {
                assert_eq!(channel, STDOUT);
                ours.received().unwrap();
                echoed.extend_from_slice(&data);
                if let Some(credit) = ours.consumed() {
                    s.send(Frame::Credit(credit)).await;
                }
            }
            other => panic!(
                "stdout and credit while stdin streams, not {}",
                other.name()
            ),
        }
    }
    let expected: Vec<u8> = (1..=chunks)
        .flat_map(|n| vec![(n % 251) as u8; size])
        .collect();
    assert!(echoed == expected, "stdout is stdin, in order");

    // The end of stdin ends the process: its stdout closes, it exits 0, the call ends.
    s.send(Frame::Close(STDIN)).await;
    assert!(matches!(s.next().await, Frame::Close(STDOUT)));
    let Frame::Exit(status) = s.next().await else {
        panic!("an exit")
    };
    assert_eq!(
        SessionStatus::from_json(&status).unwrap(),
        SessionStatus::Success
    );
    assert!(matches!(s.next().await, Frame::End));
    serving.abort();
}

#[tokio::test]
async fn a_client_that_reads_nothing_stalls_the_process_not_the_agents_memory() {
    let (_nats, hub, serving) = agent(echo_backend()).await;
    let spec = exec(&["cat"], streams(true, true, false, false));
    // The hub allows two output chunks and grants no more.
    let request = ask(&hub, &spec, EXEC, 2);
    let (mut s, _credit) = Driver::open(hub, request).await;
    assert!(is_head(&s.next().await, 101));
    for n in 1..=8u8 {
        s.send(Frame::Chunk {
            channel: STDIN,
            data: Bytes::from(vec![n; 1024]),
        })
        .await;
    }
    // Read everything the agent sends until it falls quiet.
    let (mut out, mut echoed, mut credits) = (0, 0, 0);
    while let Ok(frame) = tokio::time::timeout(Duration::from_millis(500), s.next()).await {
        match frame {
            Frame::Chunk { data, .. } => {
                out += 1;
                echoed += data.len();
            }
            Frame::Credit(_) => credits += 1,
            other => panic!("unexpected {}", other.name()),
        }
    }
    assert!(out <= 2, "no more output than the hub's credit: {out}");
    // What it holds of stdin is the window it granted: no credit beyond the first while the
    // process cannot write.
    assert!(
        credits == 0,
        "stdin credited while the process stalls: {credits}"
    );
    // Credit comes: the rest flows.
    s.send(Frame::Credit(64)).await;
    while echoed < 8 * 1024 {
        if let Frame::Chunk { data, .. } = s.next().await {
            echoed += data.len();
        }
    }
    serving.abort();
}

#[tokio::test]
async fn a_non_zero_exit_comes_back_with_its_stderr_and_code() {
    let (_nats, hub, serving) = agent(echo_backend()).await;
    let spec = exec(&["fail", "3"], streams(false, true, true, false));
    let request = ask(&hub, &spec, EXEC, 8);
    let (mut s, _credit) = Driver::open(hub, request).await;
    assert!(is_head(&s.next().await, 101));
    let Frame::Chunk { channel, data } = s.next().await else {
        panic!("stderr")
    };
    assert_eq!((channel, &data[..]), (STDERR, &b"oops\n"[..]));
    assert!(matches!(s.next().await, Frame::Close(STDERR)));
    let Frame::Exit(status) = s.next().await else {
        panic!("an exit")
    };
    let status = SessionStatus::from_json(&status).unwrap();
    assert_eq!(status.kubectl_exit_code(), 3);
    assert!(matches!(s.next().await, Frame::End));
    serving.abort();
}

#[tokio::test]
async fn a_refused_or_unserved_session_is_an_ordinary_answer() {
    // The backend refuses: its Status, after the agent's credit.
    let (_nats, hub, serving) = agent(echo_backend()).await;
    let spec = exec(&["forbidden"], streams(false, true, false, false));
    let request = ask(&hub, &spec, EXEC, 8);
    let (mut s, first) = Driver::open(hub, request).await;
    assert!(matches!(first, Frame::Credit(_)));
    assert!(is_head(&s.next().await, 403));
    let Frame::Data(body) = s.next().await else {
        panic!("a Status")
    };
    assert!(String::from_utf8_lossy(&body).contains("not you"));
    assert!(matches!(s.next().await, Frame::End));
    serving.abort();

    // The simulated cluster has no pod `p`: the API server's 404, as an ordinary answer.
    let (_nats, hub, serving) = agent(Arc::new(SimBackend::new(8, 32, "v1.30.2"))).await;
    let request = ask(&hub, &spec, EXEC, 8);
    let (mut s, _credit) = Driver::open(hub, request).await;
    assert!(is_head(&s.next().await, 404));
    serving.abort();

    // A path that names no exec: 400 before any credit.
    let (_nats, hub, serving) = agent(echo_backend()).await;
    let request = ask(&hub, &spec, "/api/v1/namespaces/default/pods/p/log", 8);
    let (mut s, first) = Driver::open(hub, request).await;
    assert!(is_head(&first, 400), "{}", first.name());
    let Frame::Data(body) = s.next().await else {
        panic!("a Status")
    };
    assert!(String::from_utf8_lossy(&body).contains("/exec"));
    serving.abort();
}

#[tokio::test]
async fn a_hub_that_breaks_the_session_rules_is_cancelled_and_resizes_reach_a_tty() {
    let (_nats, hub, serving) = agent(echo_backend()).await;
    let spec = exec(&["cat"], streams(true, true, false, true));
    let request = ask(&hub, &spec, EXEC, 8);
    let (mut s, _credit) = Driver::open(hub, request).await;
    assert!(is_head(&s.next().await, 101));
    s.send(Frame::Resize {
        width: 120,
        height: 40,
    })
    .await;
    let Frame::Chunk { data, .. } = s.next().await else {
        panic!("the echo of the resize")
    };
    assert_eq!(&data[..], b"120x40\n");
    // stdout is the agent's to send.
    s.send(Frame::Chunk {
        channel: STDOUT,
        data: Bytes::from_static(b"x"),
    })
    .await;
    let Frame::Cancel(reason) = s.next().await else {
        panic!("a cancel")
    };
    assert!(reason.contains("channel 1"), "{reason}");
    serving.abort();
}

#[tokio::test]
async fn a_port_forward_echoes_and_ends_when_both_sides_closed() {
    let (_nats, hub, serving) = agent(echo_backend()).await;
    let spec = Spec {
        kind: Kind::PortForward,
        container: None,
        command: vec![],
        streams: Streams::default(),
        port: 8080,
    };
    let request = ask(
        &hub,
        &spec,
        "/api/v1/namespaces/default/pods/p/portforward",
        8,
    );
    let (mut s, _credit) = Driver::open(hub, request).await;
    assert!(is_head(&s.next().await, 101));
    s.send(Frame::Chunk {
        channel: DATA,
        data: Bytes::from_static(b"hello"),
    })
    .await;
    let Frame::Chunk { channel, data } = s.next().await else {
        panic!("the echo")
    };
    assert_eq!((channel, &data[..]), (DATA, &b"hello"[..]));
    s.send(Frame::Close(DATA)).await;
    assert!(matches!(s.next().await, Frame::Close(DATA)));
    assert!(
        matches!(s.next().await, Frame::End),
        "no exit for a port-forward that worked"
    );
    serving.abort();
}

#[test]
fn sessions_are_bounded_per_agent_and_per_caller() {
    let limits = crate::kubeproxy::Limits::default();
    let admit = |open: &[&str], caller| admit(open.iter().copied(), caller, "edge-1", &limits);
    assert!(admit(&vec!["alice"; SESSIONS_PER_CALLER - 1], "alice").is_ok());
    let alice = vec!["alice"; SESSIONS_PER_CALLER];
    let Err((reason, refusal)) = admit(&alice, "alice") else {
        panic!("alice's share is taken")
    };
    assert_eq!(reason, "caller_sessions");
    assert_eq!(refusal.status, http::StatusCode::TOO_MANY_REQUESTS);
    assert!(
        refusal
            .message
            .contains("--cluster-proxy-sessions-per-caller"),
        "{}",
        refusal.message
    );
    assert!(admit(&alice, "bob").is_ok());
    let Err((reason, refusal)) = admit(&vec!["someone"; MAX_SESSIONS], "bob") else {
        panic!("the agent is full")
    };
    assert_eq!(reason, "sessions");
    assert_eq!(refusal.status, http::StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        refusal.message.contains("--cluster-proxy-sessions)"),
        "{}",
        refusal.message
    );
}

#[test]
fn the_session_limits_are_the_agents_flags() {
    let limits = crate::kubeproxy::Limits {
        sessions: 3,
        sessions_per_caller: 2,
        ..Default::default()
    };
    let admit = |open: &[&str], caller| admit(open.iter().copied(), caller, "edge-1", &limits);
    assert!(admit(&["alice"], "alice").is_ok());
    let Err((reason, refusal)) = admit(&["alice", "alice"], "alice") else {
        panic!("alice's share of 2 is taken")
    };
    assert_eq!(reason, "caller_sessions");
    assert!(
        refusal
            .message
            .contains("already serves 2 sessions of \"alice\"")
    );
    let Err((reason, _)) = admit(&["alice", "bob", "carol"], "dave") else {
        panic!("the agent's 3 are taken")
    };
    assert_eq!(reason, "sessions");
}

#[test]
fn a_session_names_its_pod_by_its_kinds_subresource() {
    let with = |path: &str, spec: &Spec| {
        target(&TunnelRequest {
            path: path.into(),
            session: Some(spec.to_wire()),
            ..Default::default()
        })
    };
    let spec = exec(&["ls"], streams(false, true, false, false));
    let t = with(EXEC, &spec).unwrap();
    assert_eq!((t.namespace.as_str(), t.pod.as_str()), ("default", "p"));
    assert!(matches!(
        with("/api/v1/namespaces/default/pods/p/attach", &spec),
        Err(TargetError::Path { .. })
    ));
    let mut wire = spec.to_wire();
    wire.command.clear();
    assert!(matches!(
        target(&TunnelRequest {
            path: EXEC.into(),
            session: Some(wire),
            ..Default::default()
        }),
        Err(TargetError::Spec(_))
    ));
}

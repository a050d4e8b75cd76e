//! The fake API server's `pods/exec`, `pods/attach` and `pods/portforward` (I/O), spoken as a
//! real API server and kubelet speak them to kube-rs — WebSocket only (`v5.channel.k8s.io`
//! preferred, `v4.channel.k8s.io` accepted; a SPDY upgrade is answered 400, kube-rs never
//! sends one) — so the agent's Kubernetes backend is tested through the same protocol:
//!
//! - **exec** runs the command as a local process on the test machine (stdin, stdout and
//!   stderr piped; the v5 CLOSE signal closes its stdin; its exit as the kubelet's `Status` on
//!   channel 3, then close 1000; a missing command as containerd words it), in the server's
//!   temporary directory, with the container's literal `env` values added. Paths are the test
//!   machine's: tests use their own temporary directories.
//! - **attach** starts the pod's attach command ([`super::FakeKube::attach_command`]; `cat`
//!   unless set) the same way, once per attach.
//! - **port-forward** ([`super::forward`]) connects each forwarded port to the address the
//!   test registered ([`super::FakeKube::forward`]).
//!
//! Before any upgrade a request is judged as the kubelet's API server judges it: the gate's
//! caller (an impersonated user is recorded) needs `create` on `pods/exec`, `pods/attach` or
//! `pods/portforward` (403 `Status`), the pod must exist (404). A tty is not emulated (no pty;
//! resizes are read and dropped).

use super::gate::TestGate;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::any;
use bytes::{Bytes, BytesMut};
use flotilla_kubemem::server::{self, Caller, Check, Front, Gate};
use flotilla_kubemem::{ApiError, ObjectKey, Options, Store};
use flotilla_kubestream::channel::{ClientMessage, Protocol, ServerMessage};
use flotilla_kubestream::negotiate::{self, Purpose, Upgrade, WsProtocol};
use flotilla_kubestream::status::SessionStatus;
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig, frame::coding};

/// An upgraded connection as a WebSocket.
pub(super) type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// The most read from a process's output at once (one WebSocket message).
const READ_BYTES: usize = 32 * 1024;

/// A pod: namespace and name.
type PodKey = (String, String);

/// What the streaming endpoints hold.
pub struct Streams {
    pub(super) store: Arc<Mutex<Store>>,
    pub(super) options: Options,
    pub(super) gate: Arc<TestGate>,
    /// Where commands run.
    pub(super) dir: PathBuf,
    /// Attach commands by pod.
    pub(super) attach: Mutex<HashMap<PodKey, Vec<String>>>,
    /// Port-forward targets by pod and port.
    pub(super) forwards: Mutex<HashMap<(String, String, u16), SocketAddr>>,
    /// Sessions open now.
    pub(super) open: Arc<AtomicUsize>,
    /// The sessions' tasks (aborted with the server).
    pub(super) tasks: Mutex<JoinSet<()>>,
}

impl Streams {
    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs a session's task, counted in [`Streams::open`] while it lives.
    fn spawn<F>(&self, session: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let open = self.open.clone();
        open.fetch_add(1, Ordering::SeqCst);
        let guard = Counted(open);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let _guard = guard;
            session.await;
        });
    }
}

/// Counts an open session while it lives.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The routes of the streaming subresources, to merge before the store's router.
pub fn router(streams: Arc<Streams>) -> Router {
    Router::new()
        .route("/api/v1/namespaces/{ns}/pods/{pod}/exec", any(exec))
        .route("/api/v1/namespaces/{ns}/pods/{pod}/attach", any(attach))
        .route(
            "/api/v1/namespaces/{ns}/pods/{pod}/portforward",
            any(super::forward::portforward),
        )
        .with_state(streams)
}

/// An answer refusing a request before its upgrade (boxed: a response is large).
pub(super) type Refused = Box<Response>;

/// An error answer.
fn refuse(code: u16, reason: &'static str, message: String) -> Response {
    server::error(&ApiError::new(code, reason, message))
}

/// The gate's checks before an upgrade: the request log, who it acts as, `create` on the
/// subresource, the pod. The pod's object, or the answer.
pub(super) fn admit(
    streams: &Streams,
    req: &Request,
    ns: &str,
    pod: &str,
    subresource: &str,
) -> Result<Value, Refused> {
    let call = server::Request::new(
        req.method().clone(),
        req.uri(),
        req.headers().clone(),
        Bytes::new(),
    );
    let mut store = streams.store();
    let caller: Option<Caller> = match streams.gate.front(&mut store, &streams.options, &call) {
        Front::Answer(resp) => return Err(Box::new(resp)),
        Front::Pass(caller) => caller,
    };
    if let Some(caller) = caller {
        let plural = format!("pods/{subresource}");
        let check = Check {
            verb: "create",
            group: "",
            plural: &plural,
            namespace: ns,
            name: pod.to_string(),
            object: &Value::Null,
        };
        streams
            .gate
            .judge(&store, &caller, &check)
            .map_err(|e| Box::new(server::error(&e)))?;
    }
    store
        .get(&ObjectKey::new("", "pods", ns, pod))
        .cloned()
        .ok_or_else(|| Box::new(refuse(404, "NotFound", format!("pods \"{pod}\" not found"))))
}

/// The WebSocket handshake of a channel-protocol request, or the answer refusing it.
fn negotiated(req: &Request) -> Result<(Protocol, Response), Refused> {
    let refused = |code: u16, message: String| Box::new(refuse(code, "BadRequest", message));
    match negotiate::upgrade(req, Purpose::Channels) {
        Ok(Upgrade::WebSocket(ws)) => match ws.protocol {
            WsProtocol::Channel(protocol) => Ok((protocol, ws.response().map(|()| Body::empty()))),
            WsProtocol::SpdyTunnel => Err(refused(400, "not a channel protocol".into())),
        },
        Ok(Upgrade::Spdy(_)) => Err(refused(
            400,
            "this test API server serves exec, attach and port-forward over WebSocket only".into(),
        )),
        Err(e) => Err(refused(
            e.status().as_u16(),
            format!("Upgrade request required: {e}"),
        )),
    }
}

/// Takes the request's upgrade and runs `session` on the WebSocket once the `101` went out.
pub(super) fn upgraded<F, Fut>(streams: &Streams, req: &mut Request, session: F)
where
    F: FnOnce(Ws) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let on = hyper::upgrade::on(req);
    streams.spawn(async move {
        let Ok(io) = on.await else { return };
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BYTES)
            .write_buffer_size(READ_BYTES);
        let ws =
            WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, Some(config)).await;
        session(ws).await;
    });
}

/// What an exec or attach asks for (the query as kube-rs and kubectl write it).
struct Process {
    command: Vec<String>,
    container: Option<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
}

impl Process {
    fn parse(query: &str) -> Process {
        let mut p = Process {
            command: Vec::new(),
            container: None,
            stdin: false,
            stdout: false,
            stderr: false,
        };
        for (k, v) in server::query(query) {
            let on = matches!(v.as_str(), "true" | "1" | "t" | "T" | "TRUE" | "True");
            match k.as_str() {
                "command" => p.command.push(v),
                "container" => p.container = Some(v),
                "stdin" => p.stdin = on,
                "stdout" => p.stdout = on,
                "stderr" => p.stderr = on,
                _ => {}
            }
        }
        p
    }
}

async fn exec(
    State(streams): State<Arc<Streams>>,
    Path((ns, pod)): Path<(String, String)>,
    req: Request,
) -> Response {
    start(streams, ns, pod, req, "exec").await
}

async fn attach(
    State(streams): State<Arc<Streams>>,
    Path((ns, pod)): Path<(String, String)>,
    req: Request,
) -> Response {
    start(streams, ns, pod, req, "attach").await
}

async fn start(
    streams: Arc<Streams>,
    ns: String,
    pod: String,
    mut req: Request,
    subresource: &'static str,
) -> Response {
    let object = match admit(&streams, &req, &ns, &pod, subresource) {
        Ok(object) => object,
        Err(resp) => return *resp,
    };
    let (protocol, head) = match negotiated(&req) {
        Ok(ok) => ok,
        Err(resp) => return *resp,
    };
    let mut process = Process::parse(req.uri().query().unwrap_or_default());
    if subresource == "attach" {
        let attach = streams.attach.lock().unwrap_or_else(|p| p.into_inner());
        process.command = attach
            .get(&(ns.clone(), pod.clone()))
            .cloned()
            .unwrap_or_else(|| vec!["cat".into()]);
    } else if process.command.is_empty() {
        return refuse(
            400,
            "BadRequest",
            "you must specify at least 1 command".into(),
        );
    }
    let env = literal_env(&object, process.container.as_deref());
    let dir = streams.dir.clone();
    upgraded(&streams, &mut req, move |ws| {
        run(ws, protocol, process, env, dir)
    });
    head
}

/// The container's literal `env` values (`value`; references are not resolved here).
fn literal_env(pod: &Value, container: Option<&str>) -> Vec<(String, String)> {
    let containers = pod["spec"]["containers"].as_array();
    let chosen = containers.and_then(|cs| match container {
        Some(name) => cs.iter().find(|c| c["name"] == name),
        None => cs.first(),
    });
    chosen
        .and_then(|c| c["env"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect()
}

/// A process's piped output, as `Some` until it ends.
async fn read(pipe: &mut Option<impl AsyncRead + Unpin>) -> Option<Bytes> {
    let Some(p) = pipe.as_mut() else {
        return std::future::pending().await;
    };
    let mut buf = BytesMut::with_capacity(READ_BYTES);
    match p.read_buf(&mut buf).await {
        Ok(n) if n > 0 => Some(buf.freeze()),
        _ => {
            *pipe = None;
            None
        }
    }
}

/// Writes the exit `Status` on channel 3 and closes with 1000.
async fn finish(sink: &mut futures::stream::SplitSink<Ws, Message>, status: &SessionStatus) {
    let message = ServerMessage::Status(Bytes::from(status.to_json())).encode();
    let _ = sink.send(Message::Binary(message)).await;
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code: coding::CloseCode::Normal,
            reason: "".into(),
        })))
        .await;
}

/// Runs one exec or attach on its WebSocket: the process's stdin from channel 0 (its end from
/// the v5 CLOSE signal), its stdout and stderr out, its exit last. The client leaving kills it.
async fn run(ws: Ws, protocol: Protocol, p: Process, env: Vec<(String, String)>, dir: PathBuf) {
    use std::process::Stdio;
    let (mut sink, mut source) = ws.split();
    let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    let spawned = tokio::process::Command::new(&p.command[0])
        .args(&p.command[1..])
        .envs(env)
        .current_dir(dir)
        .stdin(piped(p.stdin))
        .stdout(piped(p.stdout))
        .stderr(piped(p.stderr))
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let detail = if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "error executing command in container: failed to exec in container: failed \
                     to start exec: OCI runtime exec failed: exec failed: unable to start \
                     container process: exec: \"{}\": executable file not found in $PATH: \
                     unknown",
                    p.command[0]
                )
            } else {
                format!("error executing command in container: {e}")
            };
            finish(&mut sink, &SessionStatus::internal_error(&detail)).await;
            return;
        }
    };
    let mut stdin = child.stdin.take();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let input = async {
        while let Some(Ok(message)) = source.next().await {
            let Message::Binary(bytes) = message else {
                if message.is_close() {
                    return;
                }
                continue;
            };
            match ClientMessage::decode(protocol, bytes) {
                Ok(ClientMessage::Stdin(data)) => {
                    if let Some(w) = stdin.as_mut()
                        && w.write_all(&data).await.is_err()
                    {
                        stdin = None;
                    }
                }
                Ok(ClientMessage::Close(0)) => stdin = None,
                // Resizes (no pty here) and messages on channels a server does not read.
                Ok(_) => {}
                Err(_) => return,
            }
        }
    };
    let output = async {
        while stdout.is_some() || stderr.is_some() {
            // An ended pipe's read is pending for ever: the other one decides.
            let message = tokio::select! {
                got = read(&mut stdout) => got.map(ServerMessage::Stdout),
                got = read(&mut stderr) => got.map(ServerMessage::Stderr),
            };
            let Some(message) = message else { continue };
            if sink.send(Message::Binary(message.encode())).await.is_err() {
                return;
            }
        }
        let status = match child.wait().await {
            Ok(s) => SessionStatus::exited(exit_code(s)),
            Err(e) => SessionStatus::internal_error(&format!("waiting for the process: {e}")),
        };
        finish(&mut sink, &status).await;
    };
    // The output ends the session; the client leaving first drops (kills) the process.
    tokio::select! {
        () = output => {}
        () = input => {}
    }
}

/// A process's exit code as a shell reports it (128 + the signal that killed it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.wrapping_add(signal as u8),
        (None, None) => 1,
    }
}

//! The Kubernetes backend's exec, attach and port-forward ([`Backend::open_session`]): the
//! agent opens the same upgrade on its cluster's API server with kube-rs (`ws` feature) —
//! `Api::<Pod>::exec`/`attach` ([`AttachedProcess`]) and `portforward` ([`Portforwarder`]) —
//! as the caller's impersonated identity, or with the caller's ManagedServiceAccount token.
//!
//! Nothing is spawned here beyond kube-rs' own WebSocket task per session, which is aborted
//! when the session is dropped: the client's input is written to kube-rs' pipes inside the
//! session's output stream, which the agent polls only within the hub's credit, so a client
//! that stops reading stalls kube-rs' reading of the API server (TCP back-pressure), not the
//! agent's memory. Each pipe holds [`PIPE_BYTES`].
//!
//! Differences from a direct kubectl, all from the protocols kube-rs speaks:
//! - a refused upgrade reaches kube-rs as its status code only (the API server's `Status` body
//!   is dropped): the agent answers that code with a `Status` naming the verb, the pod and
//!   whom it acted as;
//! - on a `v4.channel.k8s.io` API server (before Kubernetes 1.30) the end of stdin closes the
//!   whole stream (kube-rs' only way to say it there), so output still to come is lost;
//! - port-forward is kube-rs' WebSocket protocol (`v4.channel.k8s.io`, `?ports=`), which
//!   cannot half-close: the client's end of its bytes closes the connection to the pod, and
//!   bytes the pod was still sending are lost. A client that waits for its answer before
//!   closing (HTTP, a database protocol) is not affected.
//!
//! [`Backend::open_session`]: crate::backend::Backend::open_session

use super::KubeBackend;
use crate::backend::api::{ApiResponse, Impersonation};
use crate::backend::session::{
    Channel, Input, Output, OutputStream, Session, SessionKind, SessionRequest, SessionStatus,
    input_channel,
};
use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, AttachedProcess, Portforwarder, TerminalSize};
use kube::client::UpgradeConnectionError;
use kube::{Client, Config};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Bytes each of kube-rs' pipes holds (stdin, stdout, stderr; kube-rs' default is 1 KiB).
pub const PIPE_BYTES: usize = 64 * 1024;
/// The most read from a pipe at once (one output, cut to the tunnel's chunks by the agent).
const READ_BYTES: usize = 32 * 1024;
/// Impersonating clients kept for sessions at once; the least recently used goes first.
pub const MAX_SESSION_CLIENTS: usize = 64;

/// A pipe from kube-rs' WebSocket task.
type Pipe = Box<dyn AsyncRead + Unpin + Send>;
/// A pipe into kube-rs' WebSocket task.
type Sink = Box<dyn AsyncWrite + Unpin + Send>;

/// An impersonated identity: user and groups.
type Who = (String, Vec<String>);

/// Clients impersonating callers for sessions, by user and groups, with the use that last
/// took each: a session reuses its identity's connections instead of a TLS handshake each.
#[derive(Default)]
pub struct Clients {
    clients: Mutex<HashMap<Who, (Client, u64)>>,
    uses: AtomicU64,
    /// The agent's own identity's session client (made the first time).
    own: Mutex<Option<Client>>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients").finish_non_exhaustive()
    }
}

impl Clients {
    /// The client acting as `who` (made from `config` the first time).
    fn impersonating(&self, config: &Config, who: &Impersonation) -> Result<Client, kube::Error> {
        let key = (who.user.clone(), who.groups.clone());
        let stamp = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((client, used)) = clients.get_mut(&key) {
            *used = stamp;
            return Ok(client.clone());
        }
        let mut config = session_config(config);
        config.auth_info.impersonate = Some(who.user.clone());
        config.auth_info.impersonate_groups = (!who.groups.is_empty()).then(|| who.groups.clone());
        let client = Client::try_from(config)?;
        if clients.len() >= MAX_SESSION_CLIENTS
            && let Some(oldest) = clients
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            clients.remove(&oldest);
        }
        clients.insert(key, (client.clone(), stamp));
        Ok(client)
    }

    /// The client acting as the agent itself (made from `config` the first time).
    fn own(&self, config: &Config) -> Result<Client, kube::Error> {
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = own.as_ref() {
            return Ok(client.clone());
        }
        let client = Client::try_from(session_config(config))?;
        *own = Some(client.clone());
        Ok(client)
    }
}

/// `config` for a session's client: no read timeout. kube-rs' default (295 s) also bounds the
/// wait for the next byte of an upgraded connection, so it would cut an idle `exec -it` shell
/// or a quiet port-forwarded connection; a session ends by its own ends instead (the client,
/// the hub's keep-alive, the process's exit).
fn session_config(config: &Config) -> Config {
    let mut config = config.clone();
    config.read_timeout = None;
    config
}

/// The client a session goes through: with the caller's token (a fresh client without the
/// agent's credentials, never cached — a rotated token must not linger), as the impersonated
/// caller, or as the agent.
fn client_for(backend: &KubeBackend, request: &SessionRequest) -> Result<Client, kube::Error> {
    if let Some(bearer) = &request.bearer {
        let mut config = session_config(&backend.config);
        config.auth_info = kube::config::AuthInfo::default();
        let mut value = http::HeaderValue::try_from(format!("Bearer {}", bearer.0))
            .map_err(|e| kube::Error::HttpError(e.into()))?;
        value.set_sensitive(true);
        config.headers.push((http::header::AUTHORIZATION, value));
        return Client::try_from(config);
    }
    match &request.impersonate {
        Some(who) => backend.sessions.impersonating(&backend.config, who),
        None => backend.sessions.own(&backend.config),
    }
}

/// Opens `request` on the cluster's API server.
pub(super) async fn open(
    backend: &KubeBackend,
    request: SessionRequest,
) -> Result<Session, ApiResponse> {
    let client = client_for(backend, &request).map_err(|e| unreachable(&request, &e))?;
    let api: Api<Pod> = Api::namespaced(client, &request.namespace);
    let opened = match &request.kind {
        SessionKind::Exec { command } => api
            .exec(&request.pod, command.clone(), &params(&request))
            .await
            .map(|p| attached(p, &request)),
        SessionKind::Attach => api
            .attach(&request.pod, &params(&request))
            .await
            .map(|p| attached(p, &request)),
        SessionKind::PortForward { port } => api
            .portforward(&request.pod, &[*port])
            .await
            .map(|f| forwarded(f, *port)),
    };
    opened.map_err(|e| refused(&request, &e))
}

/// kube-rs' parameters for an exec or attach: the client's streams, pipes of [`PIPE_BYTES`].
fn params(request: &SessionRequest) -> AttachParams {
    let streams = request.streams;
    AttachParams {
        container: request.container.clone(),
        stdin: streams.stdin,
        stdout: streams.stdout,
        stderr: streams.stderr,
        tty: streams.tty,
        max_stdin_buf_size: Some(PIPE_BYTES),
        max_stdout_buf_size: Some(PIPE_BYTES),
        max_stderr_buf_size: Some(PIPE_BYTES),
    }
}

/// Whom a session acted as, for refusals.
fn acting(request: &SessionRequest) -> String {
    match (&request.bearer, &request.impersonate) {
        (Some(_), _) => "with the caller's ServiceAccount token".into(),
        (None, Some(who)) => format!("acting as {}", who.user),
        (None, None) => "acting as the agent".into(),
    }
}

/// Kubernetes' `reason` for an HTTP status code.
fn reason(code: http::StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// The API server refused the upgrade, or could not be reached.
fn refused(request: &SessionRequest, e: &kube::Error) -> ApiResponse {
    let verb = request.kind.kind().name();
    let (ns, pod) = (&request.namespace, &request.pod);
    match e {
        kube::Error::UpgradeConnection(UpgradeConnectionError::ProtocolSwitch(code))
            if !code.is_informational() =>
        {
            let message = format!(
                "the cluster's API server refused {verb} on pod {ns}/{pod} with {code} ({}); \
                 its own message does not pass an upgrade the agent makes",
                acting(request)
            );
            ApiResponse::status(*code, reason(*code), &message)
        }
        other => unreachable(request, other),
    }
}

/// The agent could not open the upgrade at all.
fn unreachable(request: &SessionRequest, e: &kube::Error) -> ApiResponse {
    let message = format!(
        "the agent could not open {} on pod {}/{} on its cluster's API server: {e}",
        request.kind.kind().name(),
        request.namespace,
        request.pod
    );
    ApiResponse::status(http::StatusCode::BAD_GATEWAY, "InternalError", &message)
}

/// Moves the client's input into kube-rs' pipes, in order: bytes to `sink` (dropped once it
/// broke), the end of input as the end of `sink` (kube-rs then says so to the API server),
/// resizes to `resize` (a tty's; the latest wins when kube-rs is behind).
async fn pump(
    mut input: mpsc::Receiver<Input>,
    mut sink: Option<Sink>,
    mut resize: Option<futures::channel::mpsc::Sender<TerminalSize>>,
) {
    while let Some(next) = input.recv().await {
        match next {
            Input::Data(bytes) => {
                if let Some(w) = sink.as_mut()
                    && w.write_all(&bytes).await.is_err()
                {
                    sink = None;
                }
            }
            Input::End => {
                if let Some(mut w) = sink.take() {
                    let _ = w.shutdown().await;
                }
            }
            Input::Resize { width, height } => {
                if let Some(tx) = resize.as_mut() {
                    let _ = tx.try_send(TerminalSize { width, height });
                }
            }
        }
    }
}

/// Drives the input pump until it ends; pending for ever once it has.
async fn drive(pump: &mut Option<BoxFuture<'static, ()>>) {
    match pump.as_mut() {
        Some(p) => {
            p.await;
            *pump = None;
        }
        None => std::future::pending().await,
    }
}

/// Reads what a pipe has (`None`: its end, or it broke); pending for ever once it ended.
async fn read(pipe: &mut Option<Pipe>) -> Option<Bytes> {
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

/// An exec or attach: kube-rs' process, read as the agent polls.
struct Attached {
    process: AttachedProcess,
    stdout: Option<Pipe>,
    stderr: Option<Pipe>,
    status: Option<BoxFuture<'static, Option<Status>>>,
    pump: Option<BoxFuture<'static, ()>>,
    verb: &'static str,
}

impl Drop for Attached {
    fn drop(&mut self) {
        // kube-rs' WebSocket task (done already when the process exited).
        self.process.abort();
    }
}

/// What woke an exec or attach.
enum Woke {
    Pumped,
    Read(Channel, Option<Bytes>),
    Exited(SessionStatus),
}

impl Attached {
    /// The next output: bytes as they come, each channel's end, then the exit; `None` after.
    async fn next(&mut self) -> Option<Output> {
        loop {
            let outputs_open = self.stdout.is_some() || self.stderr.is_some();
            let woke = if outputs_open {
                tokio::select! {
                    () = drive(&mut self.pump) => Woke::Pumped,
                    got = read(&mut self.stdout) => Woke::Read(Channel::Stdout, got),
                    got = read(&mut self.stderr) => Woke::Read(Channel::Stderr, got),
                }
            } else {
                // Both ended: kube-rs' task ended, its status is sent or never will be.
                let verb = self.verb;
                let status = self.status.as_mut()?;
                tokio::select! {
                    () = drive(&mut self.pump) => Woke::Pumped,
                    got = status => Woke::Exited(exit_status(verb, got)),
                }
            };
            match woke {
                Woke::Pumped => {}
                Woke::Read(channel, Some(bytes)) => return Some(Output::Data(channel, bytes)),
                Woke::Read(channel, None) => return Some(Output::End(channel)),
                Woke::Exited(status) => {
                    self.status = None;
                    return Some(Output::Exit(status));
                }
            }
        }
    }
}

/// The session's exit from the API server's `Status` (checked as the hub checks an agent's).
fn exit_status(verb: &str, status: Option<Status>) -> SessionStatus {
    let Some(status) = status else {
        return SessionStatus::internal_error(&format!(
            "the cluster's API server closed the {verb} stream without an exit status"
        ));
    };
    let json = serde_json::to_vec(&status).unwrap_or_default();
    SessionStatus::from_json(&json).unwrap_or_else(|e| {
        SessionStatus::internal_error(&format!(
            "the cluster's API server ended the {verb} stream with a status the agent cannot \
             read: {e}"
        ))
    })
}

fn attached(mut process: AttachedProcess, request: &SessionRequest) -> Session {
    let (input, input_rx) = input_channel();
    let stdin = process.stdin().map(|w| Box::new(w) as Sink);
    let resize = process.terminal_size();
    let stdout = process.stdout().map(|r| Box::new(r) as Pipe);
    let stderr = process.stderr().map(|r| Box::new(r) as Pipe);
    let status = process.take_status().map(FutureExt::boxed);
    let state = Attached {
        process,
        stdout,
        stderr,
        status,
        pump: Some(pump(input_rx, stdin, resize).boxed()),
        verb: request.kind.kind().name(),
    };
    let output: OutputStream = Box::pin(futures::stream::unfold(state, |mut s| async move {
        s.next().await.map(|out| (out, s))
    }));
    Session { input, output }
}

/// A port-forward: kube-rs' forwarder of one port, read as the agent polls.
struct Forwarded {
    forwarder: Portforwarder,
    read: Option<Pipe>,
    error: Option<BoxFuture<'static, Option<String>>>,
    pump: Option<BoxFuture<'static, ()>>,
    /// The exit of a failed forward, sent once, then the end.
    failed: bool,
}

impl Drop for Forwarded {
    fn drop(&mut self) {
        self.forwarder.abort();
    }
}

/// What woke a port-forward.
enum Forward {
    Pumped,
    Read(Option<Bytes>),
    Error(Option<String>),
}

/// A pending error, when it is already known.
fn error_now(error: &mut Option<BoxFuture<'static, Option<String>>>) -> Option<String> {
    let message = error.as_mut()?.now_or_never()?;
    *error = None;
    message
}

/// Waits for the pod's error message (`None` when the forwarder ended without one); pending
/// for ever once it came.
async fn error(error: &mut Option<BoxFuture<'static, Option<String>>>) -> Option<String> {
    let Some(e) = error.as_mut() else {
        return std::future::pending().await;
    };
    let message = e.await;
    *error = None;
    message
}

impl Forwarded {
    /// The next output: the pod's bytes, its end (or its error as the exit); `None` after.
    async fn next(&mut self) -> Option<Output> {
        loop {
            if self.failed || self.read.is_none() {
                return None;
            }
            let woke = tokio::select! {
                biased;
                got = error(&mut self.error) => Forward::Error(got),
                () = drive(&mut self.pump) => Forward::Pumped,
                got = read(&mut self.read) => Forward::Read(got),
            };
            match woke {
                Forward::Pumped | Forward::Error(None) => {}
                Forward::Read(Some(bytes)) => return Some(Output::Data(Channel::Data, bytes)),
                Forward::Read(None) => {
                    // kube-rs passes the error before it closes the pipes.
                    return Some(match error_now(&mut self.error) {
                        Some(message) => self.fail(message),
                        None => Output::End(Channel::Data),
                    });
                }
                Forward::Error(Some(message)) => return Some(self.fail(message)),
            }
        }
    }

    fn fail(&mut self, message: String) -> Output {
        self.failed = true;
        Output::Exit(SessionStatus::Failure {
            reason: "InternalError".into(),
            message,
            code: Some(500),
        })
    }
}

fn forwarded(mut forwarder: Portforwarder, port: u16) -> Session {
    let (input, input_rx) = input_channel();
    let (read, write) = match forwarder.take_stream(port) {
        Some(stream) => {
            let (r, w) = tokio::io::split(stream);
            (Some(Box::new(r) as Pipe), Some(Box::new(w) as Sink))
        }
        None => (None, None),
    };
    let state = Forwarded {
        error: forwarder.take_error(port).map(FutureExt::boxed),
        forwarder,
        read,
        pump: Some(pump(input_rx, write, None).boxed()),
        failed: false,
    };
    let output: OutputStream = Box::pin(futures::stream::unfold(state, |mut s| async move {
        s.next().await.map(|out| (out, s))
    }));
    Session { input, output }
}

#[cfg(test)]
mod tests;

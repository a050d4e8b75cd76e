//! The agent's side of a cluster-proxy session — exec, attach, port-forward (I/O): one task
//! per session, full duplex once the backend opened it.
//!
//! ```text
//! hub ── request(session) ──▶ credit(W) ─▶ Backend::open_session ─▶ response(101)
//!                                                                └─▶ or its refusal (a Status)
//! hub ── chunk(0) … close(0), resize ──▶ queue (≤ W chunks) ─▶ the backend's input, one at a
//!                                        time: the hub is credited only as the backend takes
//! hub ◀── chunk(1|2) … close, exit, end ── the backend's outputs, polled only within the hub's
//!                                          credit: a slow client stalls the process
//! ```
//!
//! The hub's frames are checked by [`Rules`] (a session frame before the 101, stdin the client
//! did not open, a chunk after its close, a resize without a tty all cancel the session); the
//! agent checks its own outputs with the same rules, so a backend that writes on a channel the
//! client did not open is dropped rather than breaking the call. What the session holds is
//! bounded by the windows: at most `W` chunks of stdin waiting (and one in the backend's
//! input), at most one output chunk in hand. Each session is logged when it opens and when it
//! ends (who, which pod, how long, bytes each way, exit code, why).

use super::{Call, Refusal, Stop};
use crate::backend::api::ApiResponse;
use crate::backend::session::{Input, Output, Session, SessionKind, SessionRequest, SessionStatus};
use bytes::Bytes;
use flotilla_api::v1::{TunnelRequest, TunnelResponse};
use flotilla_bus::tunnel::session::{
    DATA, Kind, Rules, Side, Spec, Violation, command_line, loggable, pod_of,
};
use flotilla_bus::tunnel::{
    self, Frame, MAX_EXIT_BYTES, ProtocolError, Received, RecvWindow, SendWindow, SeqCheck,
};
use futures::StreamExt;
use std::collections::VecDeque;
use thiserror::Error;
use tokio::sync::mpsc::{self, Permit};
use tokio::time::{Instant, Interval};

#[cfg(test)]
mod tests;

/// Default [`super::Limits::sessions`]: sessions one agent serves at once (of its
/// [`super::MAX_CALLS`] calls); more are answered 503.
pub const MAX_SESSIONS: usize = 64;
/// Default [`super::Limits::sessions_per_caller`]: sessions one caller may have open at one
/// agent; more are answered 429.
pub const SESSIONS_PER_CALLER: usize = 16;

/// Whether one more session of `caller` may open, given the callers of the sessions open now:
/// the refusal (naming the agent's flag) and its metric's reason when not.
pub(super) fn admit<'a>(
    open: impl IntoIterator<Item = &'a str>,
    caller: &str,
    cluster: &str,
    limits: &super::Limits,
) -> Result<(), (&'static str, Refusal)> {
    let (max, share) = (limits.sessions, limits.sessions_per_caller);
    let (mut all, mut theirs) = (0, 0);
    for c in open {
        all += 1;
        if c == caller {
            theirs += 1;
        }
    }
    if all >= max {
        return Err((
            "sessions",
            Refusal::busy(format!(
                "the agent of cluster {cluster} already serves {max} exec, attach and \
                 port-forward sessions (the agent's --cluster-proxy-sessions); try again later"
            )),
        ));
    }
    if theirs >= share {
        return Err((
            "caller_sessions",
            Refusal::too_many(format!(
                "the agent of cluster {cluster} already serves {share} sessions of {caller:?}, \
                 its share per caller (the agent's --cluster-proxy-sessions-per-caller); close \
                 some or try again later"
            )),
        ));
    }
    Ok(())
}

/// Why a session request cannot be served (answered 400).
#[derive(Debug, Error)]
enum TargetError {
    /// The session asked for is not one an API server serves.
    #[error(transparent)]
    Spec(#[from] Violation),
    /// The path names no pod subresource of the session's kind.
    #[error("path {path:?} is not /api/v1/namespaces/NAMESPACE/pods/NAME/{kind}")]
    Path {
        /// The path (cut to 256 characters).
        path: String,
        /// The session's kind.
        kind: Kind,
    },
}

/// What a session is for: the hub's parsed session and the pod of its path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    spec: Spec,
    namespace: String,
    pod: String,
}

/// The session a request asks for (pure): its spec, and the pod its path names
/// ([`pod_of`]: `/api/v1/namespaces/{ns}/pods/{pod}/{exec|attach|portforward}`).
fn target(request: &TunnelRequest) -> Result<Target, TargetError> {
    let spec = Spec::from_wire(&request.session.clone().unwrap_or_default())?;
    let Some((namespace, pod)) = pod_of(&request.path, spec.kind) else {
        return Err(TargetError::Path {
            path: request.path.chars().take(256).collect(),
            kind: spec.kind,
        });
    };
    Ok(Target {
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        spec,
    })
}

/// What a session did, for its last log line.
#[derive(Debug)]
struct Tally {
    /// Bytes from the client (stdin, a port-forward's bytes to the pod).
    bytes_in: u64,
    /// Bytes to the client.
    bytes_out: u64,
    /// What kubectl exits with (exec/attach).
    exit_code: Option<u8>,
    /// Why it ended.
    why: &'static str,
}

/// Serves one session call until it ends; logs it at both ends.
pub(super) async fn run(mut call: Call, request: TunnelRequest, mut rx: mpsc::Receiver<Received>) {
    let started = Instant::now();
    let caller = request.caller.clone().unwrap_or_default();
    let mut seq_in = SeqCheck::default();
    // The request itself was frame 0.
    let _ = seq_in.check(0);
    let target = match target(&request) {
        Ok(target) => target,
        Err(e) => {
            tracing::info!(caller = %caller.name, path = %request.path, error = %e, "cluster proxy session refused");
            let answer =
                ApiResponse::status(http::StatusCode::BAD_REQUEST, "BadRequest", &e.to_string());
            if let Err(stop) = call.answer_whole(answer).await {
                call.stopped(stop).await;
            }
            return;
        }
    };
    let spec = &target.spec;
    tracing::info!(
        caller = %caller.name, role = %caller.role, kind = %spec.kind,
        namespace = %target.namespace, pod = %target.pod,
        container = %loggable(spec.container.as_deref().unwrap_or("")),
        command = %command_line(&spec.command), port = spec.port,
        as_user = tunnel::as_user(&request), "cluster proxy session"
    );
    let open = call
        .shared
        .metrics
        .proxy_sessions
        .get_or_create(&crate::metrics::SessionKind {
            kind: spec.kind.name(),
        })
        .clone();
    open.inc();
    let _open = scopeguard(move || {
        open.dec();
    });
    let mut tally = Tally {
        bytes_in: 0,
        bytes_out: 0,
        exit_code: None,
        why: "ended",
    };
    let served = serve(
        &mut call,
        &request,
        &target,
        &mut rx,
        &mut seq_in,
        &mut tally,
    )
    .await;
    if let Err(stop) = served {
        tally.why = match &stop {
            Stop::Hub(_) => "hub_ended",
            Stop::Protocol(_) => "protocol",
            Stop::Send(_) => "send_failed",
            Stop::Upstream(_) => "backend_broke",
        };
        call.stopped(stop).await;
    }
    tracing::info!(
        caller = %caller.name, kind = %spec.kind, namespace = %target.namespace,
        pod = %target.pod,
        duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        bytes_in = tally.bytes_in, bytes_out = tally.bytes_out, exit_code = ?tally.exit_code,
        why = tally.why, "cluster proxy session ended"
    );
}

/// Runs `f` when dropped (the open-sessions gauge, however the session ends).
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Opens the session at the backend and runs it.
async fn serve(
    call: &mut Call,
    request: &TunnelRequest,
    target: &Target,
    rx: &mut mpsc::Receiver<Received>,
    seq_in: &mut SeqCheck,
    tally: &mut Tally,
) -> Result<(), Stop> {
    let mut duplex = Duplex::new(&target.spec, request);
    let mut deadline = Instant::now() + tunnel::idle_timeout();
    let mut keepalive =
        tokio::time::interval_at(Instant::now() + tunnel::KEEPALIVE, tunnel::KEEPALIVE);
    // Frame 0: the agent has the call, and allows the first window of stdin.
    call.send(Frame::Credit(duplex.recv.granted())).await?;
    let (impersonate, bearer) = super::acting_as(request);
    let spec = &target.spec;
    let session_request = SessionRequest {
        kind: match spec.kind {
            Kind::Exec => SessionKind::Exec {
                command: spec.command.clone(),
            },
            Kind::Attach => SessionKind::Attach,
            Kind::PortForward => SessionKind::PortForward { port: spec.port },
        },
        namespace: target.namespace.clone(),
        pod: target.pod.clone(),
        container: spec.container.clone(),
        streams: spec.streams,
        impersonate,
        bearer,
    };
    // Opening may take longer than the open timeout (an upgrade through a slow API server):
    // pings keep the call, and the hub may cancel meanwhile.
    let opening = call.shared.backend.clone().open_session(session_request);
    tokio::pin!(opening);
    let opened = loop {
        tokio::select! {
            biased;
            opened = &mut opening => break opened,
            frame = Call::next(rx, seq_in, &mut deadline) => duplex.before_open(frame?)?,
            _ = keepalive.tick() => call.send(Frame::Ping).await?,
        }
    };
    let session = match opened {
        Ok(session) => session,
        Err(refusal) => {
            tally.why = "refused";
            return call.answer_whole(refusal).await;
        }
    };
    let head = Frame::Response(TunnelResponse {
        status: 101,
        headers: vec![],
    });
    duplex.ours.check(&head).map_err(own)?;
    call.send(head).await?;
    duplex.hub.opened();
    let mut timers = Timers {
        deadline,
        keepalive,
    };
    duplex
        .run(call, session, rx, seq_in, &mut timers, tally)
        .await
}

/// A frame the agent itself may not send (a bug of ours, never the hub's).
fn own(v: Violation) -> Stop {
    Stop::Upstream(format!("the agent's own session broke the rules: {v}"))
}

/// The call's clock: the hub's silence and the agent's pings.
struct Timers {
    deadline: Instant,
    keepalive: Interval,
}

/// A session's two directions.
struct Duplex {
    kind: Kind,
    /// What the hub may send.
    hub: Rules,
    /// What the agent may send (outputs on channels the client did not open are dropped).
    ours: Rules,
    /// The hub's chunks received and taken by the backend: its credit.
    recv: RecvWindow,
    /// The agent's chunks sent within the hub's credit.
    send: SendWindow,
    /// Largest chunk the hub takes.
    max_chunk: usize,
    /// Input from the hub the backend has not taken yet: at most the window's chunks and an
    /// end.
    queue: VecDeque<Input>,
    /// The latest size the client's terminal asked for, not yet taken.
    resize: Option<(u16, u16)>,
    /// The backend reads no more input: what comes is dropped (and credited).
    input_gone: bool,
    /// An output not yet sent whole, on its channel.
    pending: Option<(u32, Bytes)>,
    /// The hub closed its channel.
    hub_closed: bool,
}

impl Duplex {
    fn new(spec: &Spec, request: &TunnelRequest) -> Self {
        Self {
            kind: spec.kind,
            hub: Rules::new(spec, Side::Hub),
            ours: Rules::new(spec, Side::Agent),
            recv: RecvWindow::new(tunnel::DEFAULT_WINDOW),
            send: SendWindow::new(u64::from(request.window.clamp(1, tunnel::MAX_WINDOW))),
            max_chunk: (request.max_chunk as usize).clamp(1024, tunnel::DEFAULT_MAX_CHUNK as usize),
            queue: VecDeque::new(),
            resize: None,
            input_gone: false,
            pending: None,
            hub_closed: false,
        }
    }

    /// A hub frame while the backend opens the session: only credit (pings and cancels are
    /// [`Call::next`]'s).
    fn before_open(&mut self, frame: Frame) -> Result<(), Stop> {
        self.hub.check(&frame).map_err(hub_broke)?;
        if let Frame::Credit(n) = frame {
            self.send.credit(n).map_err(Stop::Protocol)?;
        }
        Ok(())
    }

    /// Runs the open session until it ends (the agent's end sent) or stops.
    async fn run(
        &mut self,
        call: &mut Call,
        session: Session,
        rx: &mut mpsc::Receiver<Received>,
        seq_in: &mut SeqCheck,
        timers: &mut Timers,
        tally: &mut Tally,
    ) -> Result<(), Stop> {
        let Session { input, mut output } = session;
        loop {
            self.flush(call, tally).await?;
            if self.finished() {
                tally.why = "closed";
                return call.send(Frame::End).await;
            }
            let want_input = !self.input_gone && (self.resize.is_some() || !self.queue.is_empty());
            let want_output = self.pending.is_none() && self.send.may_send();
            let ended = tokio::select! {
                biased;
                frame = Call::next(rx, seq_in, &mut timers.deadline) => {
                    self.on_hub_frame(call, frame?, tally).await?;
                    false
                }
                permit = input.reserve(), if want_input => {
                    match permit {
                        Ok(permit) => self.give(call, permit).await?,
                        Err(_) => self.gone(call).await?,
                    }
                    false
                }
                out = output.next(), if want_output => self.on_output(call, out, tally).await?,
                _ = timers.keepalive.tick() => {
                    call.send(Frame::Ping).await?;
                    false
                }
            };
            if ended {
                return Ok(());
            }
        }
    }

    /// A port-forward whose both directions closed (and whose last input reached the pod).
    fn finished(&self) -> bool {
        self.kind == Kind::PortForward
            && self.hub_closed
            && !self.ours.sending(DATA)
            && (self.input_gone || (self.queue.is_empty() && self.pending.is_none()))
    }

    /// Sends what waits of an output within the hub's credit, cut to its chunk size.
    async fn flush(&mut self, call: &mut Call, tally: &mut Tally) -> Result<(), Stop> {
        while self.send.may_send() {
            let Some((channel, bytes)) = self.pending.as_mut() else {
                break;
            };
            let channel = *channel;
            let piece = bytes.split_to(bytes.len().min(self.max_chunk));
            if bytes.is_empty() {
                self.pending = None;
            }
            self.send.sent();
            tally.bytes_out += piece.len() as u64;
            call.send(Frame::Chunk {
                channel,
                data: piece,
            })
            .await?;
        }
        Ok(())
    }

    /// One frame of the hub (after its sequence check).
    async fn on_hub_frame(
        &mut self,
        call: &mut Call,
        frame: Frame,
        tally: &mut Tally,
    ) -> Result<(), Stop> {
        self.hub.check(&frame).map_err(hub_broke)?;
        match frame {
            Frame::Chunk { data, .. } => {
                self.recv.received().map_err(Stop::Protocol)?;
                tally.bytes_in += data.len() as u64;
                if self.input_gone {
                    self.credit(call, 1).await?;
                } else {
                    self.queue.push_back(Input::Data(data));
                }
            }
            Frame::Close(_) => {
                self.hub_closed = true;
                if !self.input_gone {
                    self.queue.push_back(Input::End);
                }
            }
            Frame::Resize { width, height } => self.resize = Some((width, height)),
            Frame::Credit(n) => self.send.credit(n).map_err(Stop::Protocol)?,
            // Everything else was refused by the rules.
            _ => {}
        }
        Ok(())
    }

    /// Hands the backend its next input (a resize first: it is the latest size).
    async fn give(&mut self, call: &mut Call, permit: Permit<'_, Input>) -> Result<(), Stop> {
        if let Some((width, height)) = self.resize.take() {
            permit.send(Input::Resize { width, height });
            return Ok(());
        }
        let Some(input) = self.queue.pop_front() else {
            return Ok(());
        };
        let data = matches!(input, Input::Data(_));
        permit.send(input);
        if data {
            self.credit(call, 1).await?;
        }
        Ok(())
    }

    /// The backend reads no more input: what waits is dropped, and credited so the hub is
    /// not kept waiting.
    async fn gone(&mut self, call: &mut Call) -> Result<(), Stop> {
        self.input_gone = true;
        self.resize = None;
        let dropped = self
            .queue
            .drain(..)
            .filter(|i| matches!(i, Input::Data(_)))
            .count();
        self.credit(call, dropped).await
    }

    /// Counts `n` chunks of the hub's consumed, sending the credit it earns.
    async fn credit(&mut self, call: &mut Call, n: usize) -> Result<(), Stop> {
        let mut credit = None;
        for _ in 0..n {
            credit = self.recv.consumed().or(credit);
        }
        match credit {
            Some(allowed) => call.send(Frame::Credit(allowed)).await,
            None => Ok(()),
        }
    }

    /// One output of the backend; `true` when the session ended (its end sent).
    async fn on_output(
        &mut self,
        call: &mut Call,
        out: Option<Output>,
        tally: &mut Tally,
    ) -> Result<bool, Stop> {
        match out {
            Some(Output::Data(channel, bytes)) => {
                let frame = Frame::Chunk {
                    channel: channel.number(),
                    data: bytes,
                };
                match self.ours.check(&frame) {
                    Ok(()) => {
                        if let Frame::Chunk { channel, data } = frame
                            && !data.is_empty()
                        {
                            self.pending = Some((channel, data));
                        }
                    }
                    Err(v) => {
                        tracing::debug!(error = %v, "a backend output the session does not carry dropped")
                    }
                }
                Ok(false)
            }
            Some(Output::End(channel)) => {
                let frame = Frame::Close(channel.number());
                match self.ours.check(&frame) {
                    Ok(()) => call.send(frame).await?,
                    Err(v) => tracing::debug!(error = %v, "a backend's end of a channel dropped"),
                }
                Ok(false)
            }
            Some(Output::Exit(status)) => {
                tally.exit_code = Some(status.kubectl_exit_code());
                tally.why = "exited";
                self.exit(call, &status).await?;
                Ok(true)
            }
            None => {
                if self.kind == Kind::PortForward {
                    tally.why = "closed";
                    if self.ours.sending(DATA) {
                        call.send(Frame::Close(DATA)).await?;
                    }
                    call.send(Frame::End).await?;
                } else {
                    tally.why = "backend_broke";
                    let status = SessionStatus::internal_error(
                        "the cluster's session ended without an exit status",
                    );
                    tally.exit_code = Some(status.kubectl_exit_code());
                    self.exit(call, &status).await?;
                }
                Ok(true)
            }
        }
    }

    /// Sends the exit (bounded: a status too large for the hub becomes an internal error)
    /// and the end.
    async fn exit(&mut self, call: &mut Call, status: &SessionStatus) -> Result<(), Stop> {
        let mut json = status.to_json();
        if json.len() > MAX_EXIT_BYTES {
            json =
                SessionStatus::internal_error("the session's exit status was too large").to_json();
        }
        let frame = Frame::Exit(Bytes::from(json));
        self.ours.check(&frame).map_err(own)?;
        call.send(frame).await?;
        call.send(Frame::End).await
    }
}

/// The hub broke a session rule.
fn hub_broke(v: Violation) -> Stop {
    Stop::Protocol(ProtocolError::Session(v))
}

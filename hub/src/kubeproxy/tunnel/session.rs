//! A session call (I/O): exec, attach or port-forward through an agent, full duplex once the
//! agent answered 101 — the hub's end of [`flotilla_bus::tunnel::session`].
//!
//! [`Tunnels::open_session`] takes the session's place ([`streams::Ledger`]: a slot and the
//! bytes of its two windows, of its identity's budget; it also counts as a call), opens the
//! call and returns once the agent answered: [`Opened::Session`] with the [`SessionIo`] the
//! protocol code (WebSocket, SPDY) drives, or [`Opened::Refused`] with the agent's answer to
//! relay as the HTTP answer to the upgrade. The call's task then
//! - sends the client's input as chunks within the agent's credit, taking the next input only
//!   once the last one is on its way ([`SessionIo::send`] waits meanwhile), so a pod that reads
//!   nothing stalls the client, not the hub's memory;
//! - hands the agent's outputs to [`SessionIo::next`], crediting the agent as each is taken,
//!   so at most the window waits at the hub;
//! - passes resizes on at most once per 250 ms, the latest size winning;
//! - checks every agent frame against the session [`Rules`] and reads its exit `Status` with
//!   kubestream's validation (bounded, a known status, an exit code kubectl reads, no control
//!   characters): a hostile spoke ends its own session, never reaches the client raw;
//! - ends the session with [`SessionOutput::Failed`] when the agent cancels, falls silent,
//!   does not answer within [`super::TunnelConfig::session_answer`] (pings or not) or breaks
//!   the rules, when the caller's grant or token is gone ([`crate::kubeproxy::revoke::Hold`]),
//!   or the hub stops, and cancels the agent when the client goes (the [`SessionIo`]
//!   dropped).
//!
//! Each session is logged when it opens and when it ends, with its bytes each way
//! ([`streams::Tracked`]).

use super::{Answer, CallError, IdentitySlot, Inner, Tunnels, answer_body, caller_name};
use crate::kubeproxy::revoke::{Gone, Hold};
use crate::kubeproxy::{BodyError, streams};
use bytes::Bytes;
use flotilla_api::v1::{TunnelRequest, TunnelResponse};
use flotilla_bus::tunnel::session::{ResizeGate, Rules, STDIN, Side, Spec, Violation};
use flotilla_bus::tunnel::{
    self, Frame, ProtocolError, Received, RecvWindow, SendWindow, SeqCheck, StreamId,
};
use flotilla_kubestream::status::SessionStatus;
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::Instrument;

/// How often an open session looks at its cluster's availability.
const AVAILABILITY: std::time::Duration = std::time::Duration::from_secs(1);

/// A session to open.
pub struct SessionOutgoing {
    /// The cluster.
    pub cluster: String,
    /// The request head, with its [`TunnelRequest::session`] (`window`, `max_chunk`,
    /// `has_body` and `hub` are set by the tunnel).
    pub request: TunnelRequest,
    /// The client's protocol, for the log (`v5.channel.k8s.io`, `SPDY/3.1+portforward.k8s.io`).
    pub protocol: &'static str,
}

/// What the agent answered.
pub enum Opened {
    /// 101: the session is open.
    Session(SessionIo),
    /// Anything else: an ordinary answer (a `Status`), to relay as the HTTP answer.
    Refused(Answer),
}

/// Why a session could not open, or ended badly.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The call failed (the agent cancelled, fell silent, broke the protocol; the hub's calls
    /// or the caller's share of them are taken; the hub stops).
    #[error(transparent)]
    Call(#[from] CallError),
    /// A session limit holds.
    #[error(transparent)]
    Refused(#[from] streams::Refusal),
    /// The session asked for is not one an API server serves (the query parsed wrong).
    #[error("invalid session request: {0}")]
    Invalid(#[source] Violation),
    /// The hub's inventory marked the cluster unavailable (its lease ran out): the session is
    /// cut at once rather than when the agent's silence reaches the idle timeout.
    #[error("cluster {cluster} became unavailable (its agent's lease ran out)")]
    Unavailable {
        /// The cluster.
        cluster: String,
    },
    /// The grant that allowed the session is gone (issue 48): a reload of the grants or the
    /// cluster moving out of the caller's sets.
    #[error("{reason}")]
    Revoked {
        /// Why, naming the grant missing now.
        reason: String,
    },
    /// The caller's token expired or is no longer accepted (issue 46 review #11): an ID
    /// token's `exp`, a ManagedServiceAccount token replaced or its account deleted.
    #[error("{reason}")]
    CredentialEnded {
        /// Why, naming the token's expiry or its refusal.
        reason: String,
    },
    /// The agent's exit `Status` is not one kubectl can be given.
    #[error("the agent of cluster {cluster} sent an exit status kubectl cannot read: {source}")]
    BadExit {
        /// The cluster.
        cluster: String,
        /// What is wrong with it.
        #[source]
        source: flotilla_kubestream::status::Error,
    },
}

/// What comes of an open session, in order.
#[derive(Debug)]
pub enum SessionOutput {
    /// Bytes on a channel (exec/attach: 1 stdout, 2 stderr; port-forward: 0).
    Data {
        /// The channel.
        channel: u32,
        /// The bytes.
        data: Bytes,
    },
    /// The channel ended.
    Close(u32),
    /// How the session ended (checked, to be written as the hub's own `Status`).
    Exit(SessionStatus),
    /// The session ended normally: nothing follows.
    End,
    /// The session broke off: nothing follows.
    Failed(SessionError),
}

/// What the client sends into a session.
enum Input {
    Data(Bytes),
    Close,
}

/// The session ended: input is no longer taken.
#[derive(Debug, Error)]
#[error("the session ended")]
pub struct Ended;

/// The protocol side of an open session: dropping it cancels the session at the agent.
pub struct SessionIo {
    input: mpsc::Sender<Input>,
    resize: watch::Sender<Option<(u16, u16)>>,
    output: mpsc::Receiver<SessionOutput>,
    consumed: mpsc::UnboundedSender<()>,
}

impl std::fmt::Debug for SessionIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIo").finish_non_exhaustive()
    }
}

/// The client's side of an open session's input: its bytes, the end of them, terminal sizes.
/// Dropping it says the client sends nothing more.
pub struct SessionInput {
    input: mpsc::Sender<Input>,
    resize: watch::Sender<Option<(u16, u16)>>,
}

/// The client's side of an open session's outputs: dropping it cancels the session at the
/// agent.
pub struct SessionOutputs {
    output: mpsc::Receiver<SessionOutput>,
    consumed: mpsc::UnboundedSender<()>,
}

impl SessionIo {
    /// Its two halves, for a protocol that reads the client and writes to it at once (a pod
    /// that writes while its stdin waits must not stall the client's reading).
    pub fn split(self) -> (SessionInput, SessionOutputs) {
        (
            SessionInput {
                input: self.input,
                resize: self.resize,
            },
            SessionOutputs {
                output: self.output,
                consumed: self.consumed,
            },
        )
    }

    /// Sends bytes of the client's stdin (a port-forward's bytes to the pod); waits while the
    /// agent has no room for the last ones.
    pub async fn send(&self, data: Bytes) -> Result<(), Ended> {
        if data.is_empty() {
            return Ok(());
        }
        self.input.send(Input::Data(data)).await.map_err(|_| Ended)
    }

    /// The client's input ended (v5's close of stdin, a SPDY FIN).
    pub async fn close(&self) -> Result<(), Ended> {
        self.input.send(Input::Close).await.map_err(|_| Ended)
    }

    /// The client's terminal changed size (tty sessions; others ignore it).
    pub fn resize(&self, width: u16, height: u16) {
        let _ = self.resize.send(Some((width, height)));
    }

    /// The session's next output; `None` after its end (or its failure) was taken.
    pub async fn next(&mut self) -> Option<SessionOutput> {
        let item = self.output.recv().await?;
        if matches!(item, SessionOutput::Data { .. }) {
            let _ = self.consumed.send(());
        }
        Some(item)
    }
}

impl SessionInput {
    /// As [`SessionIo::send`].
    pub async fn send(&self, data: Bytes) -> Result<(), Ended> {
        if data.is_empty() {
            return Ok(());
        }
        self.input.send(Input::Data(data)).await.map_err(|_| Ended)
    }

    /// As [`SessionIo::close`].
    pub async fn close(&self) -> Result<(), Ended> {
        self.input.send(Input::Close).await.map_err(|_| Ended)
    }

    /// As [`SessionIo::resize`].
    pub fn resize(&self, width: u16, height: u16) {
        let _ = self.resize.send(Some((width, height)));
    }
}

impl SessionOutputs {
    /// As [`SessionIo::next`].
    pub async fn next(&mut self) -> Option<SessionOutput> {
        let item = self.output.recv().await?;
        if matches!(item, SessionOutput::Data { .. }) {
            let _ = self.consumed.send(());
        }
        Some(item)
    }
}

impl Tunnels {
    /// A port-forward connection's own place, taken before kubectl is answered `101`: one
    /// session slot and `bytes` (what its SPDY connection can buffer) of its caller's budget,
    /// held until the connection ends. Each forwarded connection through it then opens a
    /// session of its own.
    pub fn reserve_connection(
        &self,
        request: &TunnelRequest,
        bytes: u64,
    ) -> Result<streams::Reservation, streams::Refusal> {
        let inner = &self.inner;
        inner
            .sessions
            .reserve(&caller_name(request), bytes, &inner.config.sessions)
            .inspect_err(|r| inner.metrics.refused(r.reason()))
    }

    /// Opens a session: returns once the agent answered (101, or its refusal), or with why
    /// not (a limit, the agent's silence, the hub stopping).
    pub async fn open_session(&self, out: SessionOutgoing) -> Result<Opened, SessionError> {
        self.open_session_until(out, Hold::default()).await
    }

    /// [`Tunnels::open_session`], the session ended when what it holds — its grant, its
    /// caller's token — is gone.
    pub async fn open_session_until(
        &self,
        out: SessionOutgoing,
        hold: Hold,
    ) -> Result<Opened, SessionError> {
        let spec = match &out.request.session {
            Some(wire) => Spec::from_wire(wire).map_err(SessionError::Invalid)?,
            None => return Err(SessionError::Invalid(Violation::Request("not a session"))),
        };
        let inner = &self.inner;
        let who = caller_name(&out.request);
        // Both windows, in the largest chunks: what the session can make the hub and the agent
        // hold.
        let bytes = 2 * u64::from(inner.config.window) * u64::from(inner.max_chunk);
        let reservation = inner
            .sessions
            .reserve(&who, bytes, &inner.config.sessions)
            .inspect_err(|r| inner.metrics.refused(r.reason()))?;
        let slot = inner.admit(who)?;
        let (stream, frames) = inner.register(&out.cluster);
        let tracked = streams::Tracked::open(
            &inner.metrics.sessions,
            &out.cluster,
            &spec,
            &out.request,
            out.protocol,
        );
        let (opened_tx, opened_rx) = oneshot::channel();
        let (consumed_tx, consumed) = mpsc::unbounded_channel();
        let span = tracing::info_span!(
            "kubeproxy_session", cluster.name = %out.cluster, stream = %stream,
            kind = %spec.kind
        );
        let session = SessionCall {
            subject: inner.subject(&out.cluster),
            inner: inner.clone(),
            stream,
            cluster: out.cluster,
            seq: 0,
            frames,
            agent: Rules::new(&spec, Side::Agent),
            ours: Rules::new(&spec, Side::Hub),
            flow: Flow::new(inner.config.window),
            opening: Some(opened_tx),
            consumed_tx: Some(consumed_tx),
            consumed,
            input: None,
            resizes: None,
            output: None,
            refused: None,
            tracked,
            hold: Some(hold),
            _slot: slot,
            _reservation: reservation,
        };
        inner.spawn(session.run(out.request).instrument(span));
        opened_rx.await.map_err(|_| CallError::Shutdown)?
    }
}

/// A session's flow control and pacing.
struct Flow {
    /// The agent's frames come in sequence.
    seq_in: SeqCheck,
    /// The agent's chunks received and taken by the client: the credit the agent is given.
    recv: RecvWindow,
    /// Our chunks sent within the agent's credit.
    send: SendWindow,
    /// Input taken from the client, not yet sent.
    pending: Bytes,
    /// The client's input ended (or it sends none).
    input_done: bool,
    /// Resizes, paced.
    gate: ResizeGate,
    /// The agent sent its exit.
    exited: bool,
}

impl Flow {
    fn new(window: u32) -> Self {
        Self {
            seq_in: SeqCheck::default(),
            recv: RecvWindow::new(window),
            // Nothing goes before the agent's first credit.
            send: SendWindow::new(0),
            pending: Bytes::new(),
            input_done: false,
            gate: ResizeGate::default(),
            exited: false,
        }
    }
}

/// How a session's task ended.
enum Stop {
    /// The agent ended it (its end came).
    Done,
    /// The client went away.
    ClientGone,
    /// It failed.
    Failed(SessionError),
}

/// A failed call as a session's end.
fn failed(e: CallError) -> Stop {
    Stop::Failed(SessionError::Call(e))
}

/// One session's task.
struct SessionCall {
    inner: Arc<Inner>,
    stream: StreamId,
    cluster: String,
    /// Where its frames go (the cluster's wire, when the session began).
    subject: String,
    seq: u64,
    frames: mpsc::Receiver<Received>,
    /// What the agent may send.
    agent: Rules,
    /// What we may send (the client's input on a channel the session reads).
    ours: Rules,
    flow: Flow,
    /// Who waits for the agent's answer, until it came.
    opening: Option<oneshot::Sender<Result<Opened, SessionError>>>,
    /// Handed to the [`SessionIo`] (or the refusal's body) once the agent answered.
    consumed_tx: Option<mpsc::UnboundedSender<()>>,
    /// One `()` per output the client took.
    consumed: mpsc::UnboundedReceiver<()>,
    /// The client's input, once open.
    input: Option<mpsc::Receiver<Input>>,
    /// The client's terminal size, once open.
    resizes: Option<watch::Receiver<Option<(u16, u16)>>>,
    /// Where the outputs go, once open.
    output: Option<mpsc::Sender<SessionOutput>>,
    /// Where a refusal's body goes, when the agent refused.
    refused: Option<mpsc::Sender<Result<Bytes, BodyError>>>,
    tracked: streams::Tracked,
    /// The grant the session was allowed by and its caller's token, checked while it runs
    /// (taken when it starts serving).
    hold: Option<Hold>,
    /// The caller's call slot and session reservation, given back when the task ends.
    _slot: IdentitySlot,
    _reservation: streams::Reservation,
}

impl SessionCall {
    async fn run(mut self, mut request: TunnelRequest) {
        request.window = self.inner.config.window;
        request.max_chunk = self.inner.max_chunk;
        request.has_body = false;
        request.hub = self.inner.token.clone();
        self.inner.metrics.open_calls.inc();
        let end = match self.send(Frame::Request(Box::new(request))).await {
            Ok(()) => self.serve().await,
            Err(e) => failed(e),
        };
        self.inner.forget(&self.stream);
        self.inner.metrics.open_calls.dec();
        self.finish(end).await;
    }

    async fn send(&mut self, frame: Frame) -> Result<(), CallError> {
        self.inner
            .send(
                &self.cluster,
                &self.subject,
                &self.stream,
                &mut self.seq,
                frame,
            )
            .await
    }

    /// Tells whoever waits how the session ended, the agent when it does not know, and the
    /// log.
    async fn finish(&mut self, end: Stop) {
        let failure = match end {
            Stop::Done => {
                let why = if self.refused.is_some() {
                    "refused"
                } else if self.flow.exited {
                    "exited"
                } else {
                    "closed"
                };
                self.tracked.end(why);
                return;
            }
            Stop::ClientGone => {
                tracing::debug!("client went away; cancelling the session");
                self.tracked.end("client_gone");
                let _ = self
                    .send(Frame::Cancel("the client went away".into()))
                    .await;
                return;
            }
            Stop::Failed(e) => e,
        };
        self.tracked.end(match &failure {
            SessionError::Call(CallError::Timeout { .. }) => "agent_silent",
            SessionError::Call(CallError::Cancelled { .. }) => "agent_cancelled",
            SessionError::Call(CallError::Shutdown) => "hub_stopping",
            SessionError::Call(CallError::Send { .. }) => "send_failed",
            SessionError::Unavailable { .. } => "cluster_unavailable",
            SessionError::Revoked { .. } => "grant_gone",
            SessionError::CredentialEnded { .. } => "credential_ended",
            _ => "protocol",
        });
        tracing::debug!(error = %failure, "cluster-proxy session failed");
        if !matches!(
            failure,
            SessionError::Call(CallError::Cancelled { .. } | CallError::Send { .. })
        ) {
            let _ = self.send(Frame::Cancel(failure.to_string())).await;
        }
        self.fail(failure);
    }

    /// Hands a failure to whoever waits: the opener, the refusal's body, or the outputs (the
    /// channel keeps room for it).
    fn fail(&mut self, e: SessionError) {
        if let Some(opening) = self.opening.take() {
            let _ = opening.send(Err(e));
        } else if let Some(body) = &self.refused {
            let cut = match e {
                SessionError::Call(e) => e,
                other => CallError::Cancelled {
                    cluster: self.cluster.clone(),
                    reason: other.to_string(),
                },
            };
            let _ = body.try_send(Err(BodyError::Call(Box::new(cut))));
        } else if let Some(output) = &self.output {
            let _ = output.try_send(SessionOutput::Failed(e));
        }
    }

    fn protocol(&self, source: ProtocolError) -> Stop {
        failed(CallError::Protocol {
            cluster: self.cluster.clone(),
            source,
        })
    }

    async fn serve(&mut self) -> Stop {
        let mut shutdown = self.inner.shutdown.clone();
        let mut heard = false;
        let mut deadline = Instant::now() + self.inner.config.open_timeout;
        // The agent's answer (101 or a refusal) is due by then, pings or not.
        let answer_by = Instant::now() + self.inner.config.session_answer;
        let mut keepalive =
            tokio::time::interval_at(Instant::now() + tunnel::KEEPALIVE, tunnel::KEEPALIVE);
        let mut availability =
            tokio::time::interval_at(Instant::now() + AVAILABILITY, AVAILABILITY);
        let hold = self.hold.take().unwrap_or_default();
        let mut revoked = std::pin::pin!(hold.gone());
        loop {
            if let Err(e) = self.send_pending().await {
                return failed(e);
            }
            let want_input = self.flow.pending.is_empty() && !self.flow.input_done;
            let unanswered = self.opening.is_some();
            let ended = tokio::select! {
                frame = self.frames.recv() => {
                    let Some(r) = frame else {
                        return self.protocol(ProtocolError::Unexpected {
                            frame: "chunk",
                            detail: "beyond the call's mailbox (the agent ignored its credit)",
                        });
                    };
                    heard = true;
                    deadline = Instant::now() + tunnel::idle_timeout();
                    self.on_frame(r)
                }
                Some(()) = self.consumed.recv() => match self.flow.recv.consumed() {
                    Some(credit) => self.send(Frame::Credit(credit)).await.err().map(failed),
                    None => None,
                },
                input = next_input(&mut self.input), if want_input => self.on_input(input).await,
                Some(size) = next_size(&mut self.resizes) => self.on_resize(Some(size)).await,
                () = due(&self.flow.gate) => self.on_resize(None).await,
                _ = keepalive.tick() => self.send(Frame::Ping).await.err().map(failed),
                _ = availability.tick() => self.unavailable(),
                () = tokio::time::sleep_until(deadline) => {
                    let after = if heard {
                        tunnel::idle_timeout()
                    } else {
                        self.inner.config.open_timeout
                    };
                    Some(failed(CallError::Timeout {
                        cluster: self.cluster.clone(),
                        after,
                    }))
                }
                () = tokio::time::sleep_until(answer_by), if unanswered => {
                    Some(failed(CallError::Timeout {
                        cluster: self.cluster.clone(),
                        after: self.inner.config.session_answer,
                    }))
                }
                () = client_gone(&mut self.opening, &self.output, &self.refused) => {
                    Some(Stop::ClientGone)
                }
                _ = shutdown.changed() => Some(failed(CallError::Shutdown)),
                gone = &mut revoked => Some(Stop::Failed(match gone {
                    Gone::Grant(reason) => SessionError::Revoked { reason },
                    Gone::Credential(reason) => SessionError::CredentialEnded { reason },
                })),
            };
            if let Some(end) = ended {
                return end;
            }
        }
    }

    /// `Some` when the inventory no longer has the cluster Available (a cluster that is gone
    /// from it entirely is left to the idle rule: an inventory being rebuilt says nothing).
    fn unavailable(&self) -> Option<Stop> {
        let cluster = self.inner.inventory.get(&self.cluster)?;
        let available = crate::cluster::rules::available(&cluster);
        (available != Some(flotilla_api::meta::status::TRUE)).then(|| {
            Stop::Failed(SessionError::Unavailable {
                cluster: self.cluster.clone(),
            })
        })
    }

    /// Sends what waits of the client's input within the agent's credit.
    async fn send_pending(&mut self) -> Result<(), CallError> {
        let max_chunk = self.inner.max_chunk as usize;
        while !self.flow.pending.is_empty() && self.flow.send.may_send() {
            let piece = self
                .flow
                .pending
                .split_to(self.flow.pending.len().min(max_chunk));
            self.flow.send.sent();
            self.tracked.bytes_in(piece.len());
            self.send(Frame::Chunk {
                channel: STDIN,
                data: piece,
            })
            .await?;
        }
        Ok(())
    }

    /// One frame of the agent (in sequence, within the rules). `Some` when the session ends.
    fn on_frame(&mut self, r: Received) -> Option<Stop> {
        if let Err(e) = self.flow.seq_in.check(r.seq) {
            return Some(self.protocol(e));
        }
        if let Err(v) = self.agent.check(&r.frame) {
            return Some(self.protocol(v.into()));
        }
        match r.frame {
            Frame::Credit(n) => self.flow.send.credit(n).err().map(|e| self.protocol(e)),
            Frame::Cancel(reason) => Some(failed(CallError::cancelled(&self.cluster, &reason))),
            Frame::Response(head) => self.on_head(head),
            Frame::Data(chunk) => {
                if let Err(e) = self.flow.recv.received() {
                    return Some(self.protocol(e));
                }
                let body = self.refused.as_ref()?;
                match body.try_send(Ok(chunk)) {
                    Ok(()) => None,
                    Err(mpsc::error::TrySendError::Closed(_)) => Some(Stop::ClientGone),
                    Err(mpsc::error::TrySendError::Full(_)) => Some(self.over_window()),
                }
            }
            Frame::Chunk { channel, data } => {
                if let Err(e) = self.flow.recv.received() {
                    return Some(self.protocol(e));
                }
                self.tracked.bytes_out(data.len());
                self.out(SessionOutput::Data { channel, data })
            }
            Frame::Close(channel) => self.out(SessionOutput::Close(channel)),
            Frame::Exit(json) => match SessionStatus::from_json(&json) {
                Ok(status) => {
                    self.flow.exited = true;
                    self.tracked.exit_code(status.kubectl_exit_code());
                    self.out(SessionOutput::Exit(status))
                }
                Err(source) => Some(Stop::Failed(SessionError::BadExit {
                    cluster: self.cluster.clone(),
                    source,
                })),
            },
            Frame::End if self.refused.is_some() => Some(Stop::Done),
            Frame::End => self.out(SessionOutput::End).or(Some(Stop::Done)),
            // Pings keep the deadline; the rules refused everything else.
            _ => None,
        }
    }

    /// The agent's answer: 101 opens the session, anything else is its refusal.
    fn on_head(&mut self, head: TunnelResponse) -> Option<Stop> {
        let opening = self.opening.take()?;
        let consumed = self.consumed_tx.take()?;
        let window = self.inner.config.window as usize;
        let opened = if head.status == 101 {
            self.ours.opened();
            let (input_tx, input) = mpsc::channel(1);
            let (resize, resizes) = watch::channel(None);
            // The window's data, two closes, the exit, and the end or a failure.
            let (output_tx, output) = mpsc::channel(window + 5);
            self.input = Some(input);
            self.resizes = Some(resizes);
            self.output = Some(output_tx);
            Opened::Session(SessionIo {
                input: input_tx,
                resize,
                output,
                consumed,
            })
        } else {
            // The window's data, and room for the error that breaks the body off.
            let (body_tx, body) = mpsc::channel(window + 1);
            self.refused = Some(body_tx);
            Opened::Refused(Answer {
                head,
                body: answer_body(body, consumed),
            })
        };
        opening
            .send(Ok(opened))
            .is_err()
            .then_some(Stop::ClientGone)
    }

    /// Hands an output to the client's side; `Some` when the session ends.
    fn out(&mut self, item: SessionOutput) -> Option<Stop> {
        let output = self.output.as_ref()?;
        match output.try_send(item) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Closed(_)) => Some(Stop::ClientGone),
            Err(mpsc::error::TrySendError::Full(_)) => Some(self.over_window()),
        }
    }

    fn over_window(&self) -> Stop {
        self.protocol(ProtocolError::Unexpected {
            frame: "chunk",
            detail: "beyond the window",
        })
    }

    /// Takes one input of the client: bytes wait for the agent's credit, the end goes at
    /// once. `Some` when the session ends.
    async fn on_input(&mut self, input: Option<Input>) -> Option<Stop> {
        match input {
            Some(Input::Data(data)) if self.ours.sending(STDIN) => self.flow.pending = data,
            // The session reads no input (no stdin): dropped.
            Some(Input::Data(_)) => {}
            Some(Input::Close) => {
                self.flow.input_done = true;
                let close = Frame::Close(STDIN);
                if self.ours.check(&close).is_ok() {
                    return self.send(close).await.err().map(failed);
                }
            }
            // The client's side sends nothing more (it may still read).
            None => self.flow.input_done = true,
        }
        None
    }

    /// A size the client asked for (`Some`), or the pace's timer (`None`): sends the latest
    /// size when it may go. `Some` when the session ends.
    async fn on_resize(&mut self, asked: Option<(u16, u16)>) -> Option<Stop> {
        let now = std::time::Instant::now();
        let size = match asked {
            Some(size) => self.flow.gate.offer(size, now),
            None => self.flow.gate.take_due(now),
        };
        let (width, height) = size?;
        let frame = Frame::Resize { width, height };
        if self.ours.check(&frame).is_err() {
            // Not a tty: nothing to resize.
            return None;
        }
        self.send(frame).await.err().map(failed)
    }
}

/// The client's next input (never, before the session opened).
async fn next_input(input: &mut Option<mpsc::Receiver<Input>>) -> Option<Input> {
    match input {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The client's next terminal size (never, before the session opened or once its side is
/// gone).
async fn next_size(
    resizes: &mut Option<watch::Receiver<Option<(u16, u16)>>>,
) -> Option<(u16, u16)> {
    let Some(rx) = resizes else {
        return std::future::pending().await;
    };
    if rx.changed().await.is_err() {
        *resizes = None;
        return std::future::pending().await;
    }
    *rx.borrow_and_update()
}

/// When the paced size may go (never, with none kept).
async fn due(gate: &ResizeGate) {
    match gate.due_at() {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// Resolves when the client's side went away: the opener stopped waiting, or the session's
/// outputs (or the refusal's body) are no longer read.
async fn client_gone(
    opening: &mut Option<oneshot::Sender<Result<Opened, SessionError>>>,
    output: &Option<mpsc::Sender<SessionOutput>>,
    refused: &Option<mpsc::Sender<Result<Bytes, BodyError>>>,
) {
    if let Some(opening) = opening {
        opening.closed().await
    } else if let Some(output) = output {
        output.closed().await
    } else if let Some(body) = refused {
        body.closed().await
    } else {
        std::future::pending().await
    }
}

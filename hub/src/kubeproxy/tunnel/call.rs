//! One call's task (I/O): sends the request body within the agent's credit, hands the
//! response head and body to the HTTP server as they come, grants credit as the client takes
//! data, pings, and cancels the call when the client goes away, the agent falls silent or
//! breaks the protocol.

use super::{ByteStream, CallError, IdentitySlot, Inner};
use crate::kubeproxy::BodyError;
use bytes::Bytes;
use flotilla_api::v1::{TunnelRequest, TunnelResponse};
use flotilla_bus::tunnel::{
    self, Frame, ProtocolError, Received, RecvWindow, SendWindow, SeqCheck, StreamId,
};
use futures::StreamExt;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::time::Instant;

/// Request-body bytes a call holds of its cluster's budget (and shows in the gauge) until the
/// agent answers.
pub(super) struct BodyBytes {
    permit: OwnedSemaphorePermit,
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Drop for BodyBytes {
    fn drop(&mut self) {
        self.gauge
            .dec_by(i64::try_from(self.permit.num_permits()).unwrap_or(i64::MAX));
    }
}

/// Where a call is in its life.
pub(super) struct Call {
    pub(super) inner: Arc<Inner>,
    pub(super) stream: StreamId,
    pub(super) cluster: String,
    /// Where its frames go (the cluster's wire, when the call began).
    pub(super) subject: String,
    pub(super) seq: u64,
    pub(super) frames: mpsc::Receiver<Received>,
    /// The response head's receiver, until the head came.
    pub(super) head: Option<oneshot::Sender<Result<TunnelResponse, CallError>>>,
    pub(super) body: mpsc::Sender<Result<Bytes, BodyError>>,
    pub(super) consumed: mpsc::UnboundedReceiver<()>,
    /// The caller's slot, given back when the call ends.
    pub(super) _slot: IdentitySlot,
    /// The cluster's request-body budget (calls with a body).
    pub(super) budget: Option<Arc<Semaphore>>,
    /// What the call holds of it: from the body's first byte until the agent answers.
    pub(super) body_bytes: Option<BodyBytes>,
}

/// How a call ended.
enum End {
    /// The response is complete.
    Done,
    /// The client went away.
    ClientGone,
    /// It failed.
    Failed(CallError),
}

impl Call {
    pub(super) async fn run(mut self, mut request: TunnelRequest, body: Option<ByteStream>) {
        request.window = self.inner.config.window;
        request.max_chunk = self.inner.max_chunk;
        request.has_body = body.is_some();
        request.hub = self.inner.token.clone();
        self.inner.metrics.open_calls.inc();
        let end = match self.send(Frame::Request(Box::new(request))).await {
            Ok(()) => self.serve(body).await,
            Err(e) => End::Failed(e),
        };
        self.inner.forget(&self.stream);
        self.inner.metrics.open_calls.dec();
        match end {
            End::Done => {}
            End::ClientGone => {
                tracing::debug!("client went away; cancelling the call");
                let _ = self
                    .send(Frame::Cancel("the client went away".into()))
                    .await;
            }
            End::Failed(e) => {
                tracing::debug!(error = %e, "cluster-proxy call failed");
                if !matches!(e, CallError::Cancelled { .. } | CallError::Send { .. }) {
                    let _ = self.send(Frame::Cancel(e.to_string())).await;
                }
                match self.head.take() {
                    Some(head) => {
                        let _ = head.send(Err(e));
                    }
                    None => {
                        let _ = self.body.try_send(Err(BodyError::Call(Box::new(e))));
                    }
                }
            }
        }
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

    /// Takes `n` more bytes of the cluster's request-body budget, or says it is spent.
    fn hold(&mut self, n: usize) -> Result<(), CallError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        let refused = || CallError::BodyBytes {
            cluster: self.cluster.clone(),
            limit: self.inner.config.body_bytes_per_cluster,
        };
        let wanted = u32::try_from(n).map_err(|_| refused())?;
        let permit = budget
            .clone()
            .try_acquire_many_owned(wanted)
            .map_err(|_| refused())?;
        self.inner
            .metrics
            .body_bytes_in_flight
            .inc_by(i64::from(wanted));
        match &mut self.body_bytes {
            Some(held) => held.permit.merge(permit),
            None => {
                self.body_bytes = Some(BodyBytes {
                    permit,
                    gauge: self.inner.metrics.body_bytes_in_flight.clone(),
                });
            }
        }
        Ok(())
    }

    fn protocol(&self, source: ProtocolError) -> End {
        End::Failed(CallError::Protocol {
            cluster: self.cluster.clone(),
            source,
        })
    }

    async fn serve(&mut self, body: Option<ByteStream>) -> End {
        let mut shutdown = self.inner.shutdown.clone();
        let mut flow = Flow {
            seq_in: SeqCheck::default(),
            recv: RecvWindow::new(self.inner.config.window),
            // Nothing may be sent before the agent's first credit.
            send: SendWindow::new(0),
            body,
            pending: Bytes::new(),
        };
        let mut heard = false;
        let mut deadline = Instant::now() + self.inner.config.open_timeout;
        let mut keepalive =
            tokio::time::interval_at(Instant::now() + tunnel::KEEPALIVE, tunnel::KEEPALIVE);
        let max_chunk = self.inner.max_chunk as usize;
        loop {
            // The request body, within the agent's credit.
            while !flow.pending.is_empty() && flow.send.may_send() {
                let piece = flow.pending.split_to(flow.pending.len().min(max_chunk));
                flow.send.sent();
                if let Err(e) = self.send(Frame::Data(piece)).await {
                    return End::Failed(e);
                }
            }
            let want_body = flow.pending.is_empty() && flow.send.may_send() && flow.body.is_some();
            let ended = tokio::select! {
                frame = self.frames.recv() => {
                    let Some(r) = frame else {
                        return self.protocol(ProtocolError::Unexpected {
                            frame: "data",
                            detail: "beyond the call's mailbox (the agent ignored its credit)",
                        });
                    };
                    heard = true;
                    deadline = Instant::now() + tunnel::idle_timeout();
                    self.on_frame(r, &mut flow)
                }
                Some(()) = self.consumed.recv() => match flow.recv.consumed() {
                    Some(credit) => self.send(Frame::Credit(credit)).await.err().map(End::Failed),
                    None => None,
                },
                chunk = next(&mut flow.body), if want_body => self.on_body(chunk, &mut flow).await,
                _ = keepalive.tick() => self.send(Frame::Ping).await.err().map(End::Failed),
                () = tokio::time::sleep_until(deadline) => {
                    let after = if heard {
                        tunnel::idle_timeout()
                    } else {
                        self.inner.config.open_timeout
                    };
                    Some(End::Failed(CallError::Timeout {
                        cluster: self.cluster.clone(),
                        after,
                    }))
                }
                () = self.body.closed(), if self.head.is_none() => Some(End::ClientGone),
                // The client gave up before the spoke answered (a slow API server).
                () = head_closed(&mut self.head), if self.head.is_some() => Some(End::ClientGone),
                _ = shutdown.changed() => Some(End::Failed(CallError::Shutdown)),
            };
            if let Some(end) = ended {
                return end;
            }
        }
    }

    /// Takes one frame from the agent (in sequence): credit for the request body, the response
    /// head, response data within the window, the end, a cancel. `Some` when the call ends.
    fn on_frame(&mut self, r: Received, flow: &mut Flow) -> Option<End> {
        if let Err(e) = flow.seq_in.check(r.seq) {
            return Some(self.protocol(e));
        }
        let unexpected = |frame, detail| ProtocolError::Unexpected { frame, detail };
        let name = r.frame.name();
        match r.frame {
            Frame::Credit(n) => flow.send.credit(n).err().map(|e| self.protocol(e)),
            Frame::Response(head) => {
                let Some(tx) = self.head.take() else {
                    return Some(self.protocol(unexpected("response", "after the response head")));
                };
                // The agent is done with the body: what is left of it is not sent (an API
                // server that answered before the body ended reads no more of it).
                self.body_bytes = None;
                flow.body = None;
                flow.pending = Bytes::new();
                tx.send(Ok(head)).is_err().then_some(End::ClientGone)
            }
            Frame::Data(_) if self.head.is_some() => {
                Some(self.protocol(unexpected("data", "before the response head")))
            }
            Frame::Data(chunk) => {
                if let Err(e) = flow.recv.received() {
                    return Some(self.protocol(e));
                }
                match self.body.try_send(Ok(chunk)) {
                    Ok(()) => None,
                    Err(mpsc::error::TrySendError::Closed(_)) => Some(End::ClientGone),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        Some(self.protocol(unexpected("data", "beyond the window")))
                    }
                }
            }
            Frame::End if self.head.is_none() => Some(End::Done),
            Frame::End => Some(self.protocol(unexpected("end", "before the response head"))),
            Frame::Cancel(reason) => {
                Some(End::Failed(CallError::cancelled(&self.cluster, &reason)))
            }
            Frame::Ping => None,
            Frame::Request(_) => Some(self.protocol(unexpected("request", "from an agent"))),
            Frame::Chunk { .. } | Frame::Close(_) | Frame::Resize { .. } | Frame::Exit(_) => {
                Some(self.protocol(unexpected(name, "in a call that is not a session")))
            }
        }
    }

    /// Takes what the client's body gave: a chunk to send (held against the cluster's budget),
    /// its error, or its end (told to the agent). `Some` when the call ends.
    async fn on_body(
        &mut self,
        chunk: Option<Result<Bytes, BodyError>>,
        flow: &mut Flow,
    ) -> Option<End> {
        match chunk {
            Some(Ok(bytes)) => {
                if let Err(e) = self.hold(bytes.len()) {
                    return Some(End::Failed(e));
                }
                flow.pending = bytes;
                None
            }
            Some(Err(e)) => Some(End::Failed(CallError::RequestBody(e))),
            None => {
                flow.body = None;
                self.send(Frame::End).await.err().map(End::Failed)
            }
        }
    }
}

/// A call's two directions while it is served.
struct Flow {
    /// The agent's frames come in sequence.
    seq_in: SeqCheck,
    /// Response data received and consumed: the credit the agent is given.
    recv: RecvWindow,
    /// Request data sent within the agent's credit.
    send: SendWindow,
    /// The client's body, until it ended or the agent answered.
    body: Option<ByteStream>,
    /// Read from the body, not yet sent.
    pending: Bytes,
}

/// Resolves when the HTTP handler stopped waiting for the response head.
async fn head_closed(head: &mut Option<oneshot::Sender<Result<TunnelResponse, CallError>>>) {
    match head {
        Some(h) => h.closed().await,
        None => std::future::pending().await,
    }
}

async fn next(body: &mut Option<ByteStream>) -> Option<Result<Bytes, BodyError>> {
    match body {
        Some(b) => b.next().await,
        None => None,
    }
}

//! A kubectl port-forward connection (I/O): SPDY/3.1 over the upgraded connection (raw, or
//! tunnelled in a WebSocket), served by [`flotilla_kubestream::spdy::conn`]; each pair of
//! streams kubectl opens for one local TCP connection (`error` + `data`, by `requestid`) is one
//! session through the cluster's agent to the pod's port.
//!
//! - Streams are accepted (SYN_REPLY) at once — kubectl waits for the reply before it opens
//!   the partner — and paired; a pair whose partner does not come within 30 s gets the
//!   kubelet's `timed out waiting for streams` on its error stream.
//! - A pair's session carries the data stream's bytes both ways within both windows; a FIN
//!   from kubectl ends the input, the pod's side ending FINs the data stream.
//! - A session that cannot open for a limit (the hub's, the caller's share) resets both
//!   streams (REFUSED): kubectl then drops only that local connection. Any other failure —
//!   the spoke's refusal, the agent falling silent, the hub stopping — is written on the pair's
//!   error stream, as a kubelet does; kubectl prints it and ends the port-forward.
//! - Reading is head-of-line, as spdystream's own reader: a pair whose session has no room
//!   holds up the connection's reading, never a buffer per pair.
//!
//! The connection ends when kubectl goes (its sessions are cancelled), falls silent (pinged
//! every 20 s, let go after 60 s without a byte) or the hub stops.

use super::session;
use super::streams::Reservation;
use super::tunnel::{CallError, Opened, SessionError, SessionOutgoing, SessionOutput, Tunnels};
use bytes::Bytes;
use flotilla_api::v1::TunnelRequest;
use flotilla_kubestream::portforward::{self, Added, Pair, Pairing};
use flotilla_kubestream::spdy::conn::{self, RecvHalf, SendHalf};
use flotilla_kubestream::spdy::frame::{goaway, rst};
use futures::future::FusedFuture;
use futures::{FutureExt, StreamExt};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The largest refusal body read for its message.
const MAX_REFUSAL: usize = 16 * 1024;

/// How long a spoke's refusal body may take to arrive.
const REFUSAL_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long the connection waits, at shutdown, for kubectl to read why its pairs end and close
/// the connection itself.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(3);

/// How long the connection is driven after its GOAWAY, at shutdown, for kubectl to go.
const GOAWAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Streams one port-forward connection may have open at once: 30 pairs, about an identity's
/// share of sessions (32, one of them the connection's own); more are refused (REFUSED).
const MAX_STREAMS: usize = 60;

/// The largest WebSocket message of a tunnelled connection (kubectl writes one per SPDY frame
/// part: DATA of at most 32 KiB).
pub const MAX_TUNNEL_MESSAGE: usize = 128 * 1024;

/// The SPDY settings of a port-forward connection: the client pinged and let go when silent
/// ([`super::upgrade::spdy_config`]), one slice buffered per stream, at most [`MAX_STREAMS`].
pub fn config() -> conn::Config {
    conn::Config {
        stream_buffer: 1,
        max_streams: MAX_STREAMS,
        ..super::upgrade::spdy_config()
    }
}

/// What one port-forward connection can make the hub hold of its client's bytes: a slice in
/// every stream's buffer (pairs not yet opened, error streams, pairs waiting for their agent's
/// room) and, tunnelled, one WebSocket message. 2 MiB at the defaults — one session's
/// reservation, so the connection's place never trips the byte rule before the count rule.
pub fn buffered(config: &conn::Config, tunnelled: bool) -> u64 {
    let streams = config.max_streams * config.stream_buffer.max(1) * config.max_slice;
    let message = if tunnelled { MAX_TUNNEL_MESSAGE } else { 0 };
    (streams + message) as u64
}

/// Where a port-forward connection's sessions go.
pub struct Target {
    /// The hub's calls.
    pub tunnels: Tunnels,
    /// The cluster.
    pub cluster: String,
    /// The request as the caller's grant makes it (path, caller, impersonation, bearer); each
    /// pair's session fills in its port.
    pub request: TunnelRequest,
    /// The client's protocol, for the log.
    pub protocol: &'static str,
    /// The grant the port-forward was allowed by and its caller's token: when either is gone
    /// the connection ends as at shutdown, each open pair's session with the reason on its
    /// error stream.
    pub hold: super::revoke::Hold,
    /// The connection's own place among its caller's sessions ([`buffered`] bytes), held
    /// until it ends.
    pub place: Reservation,
}

/// An accepted stream.
type Stream = (RecvHalf, SendHalf);

/// Serves one upgraded port-forward connection until kubectl goes or the hub stops.
pub async fn serve<IO>(io: IO, target: Target)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let target = Arc::new(target);
    let (mut conn, driver) = conn::serve(io, &config());
    // Fused: the shutdown below drives it again after the loop may have seen it end.
    let mut driver = std::pin::pin!(driver.fuse());
    let mut pairing: Pairing<Stream> = Pairing::default();
    let mut pairs = JoinSet::new();
    let mut shutdown = target.tunnels.shutdown();
    let hold = target.hold.clone();
    let mut stopping = std::pin::pin!(async move {
        tokio::select! {
            _ = shutdown.changed() => {}
            _ = hold.gone() => {}
        }
    });
    let mut accepting = true;
    loop {
        let deadline = pairing.next_deadline();
        tokio::select! {
            incoming = conn.next(), if accepting => match incoming {
                Some(incoming) => on_stream(&target, &mut pairing, &mut pairs, incoming).await,
                // kubectl's GOAWAY, or its end: the pairs still open finish.
                None => accepting = false,
            },
            ended = &mut driver => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "port-forward connection ended");
                }
                break;
            }
            () = until(deadline) => {
                for unpaired in pairing.expire(Instant::now().into_std()) {
                    timed_out(unpaired).await;
                }
            }
            Some(_) = pairs.join_next(), if !pairs.is_empty() => {}
            () = &mut stopping => {
                // The sessions fail with "the hub is shutting down" (or why their grant or
                // their token is gone) on their error streams. kubectl reads that, prints it
                // and closes the connection itself; so the connection is driven, without a
                // GOAWAY, until it does. On a GOAWAY kubectl's spdystream closes the connection as soon as its
                // streams are done, and kubectl ends with its own "lost connection to pod"
                // before it prints the reason.
                if !pairs.is_empty() {
                    let _ = tokio::time::timeout(DRAIN, &mut driver).await;
                }
                if !driver.is_terminated() {
                    let _ = conn.goaway(goaway::OK).await;
                    let _ = tokio::time::timeout(GOAWAY_WAIT, &mut driver).await;
                }
                break;
            }
        }
        if !accepting && pairs.is_empty() && pairing.pending() == 0 {
            let _ = conn.goaway(goaway::OK).await;
            break;
        }
    }
    // Whatever is still open is cancelled: its session at the agent with it.
    pairs.abort_all();
}

/// Sleeps until `at` (never, with none).
async fn until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// A stream kubectl opened: accepted, and paired with its partner; a complete pair starts its
/// session.
async fn on_stream(
    target: &Arc<Target>,
    pairing: &mut Pairing<Stream>,
    pairs: &mut JoinSet<()>,
    incoming: conn::Incoming,
) {
    let headers = match portforward::stream_headers(incoming.id, &incoming.headers) {
        Ok(h) => h,
        Err(e) => {
            tracing::debug!(error = %e, "port-forward stream refused");
            let _ = incoming.refuse().await;
            return;
        }
    };
    let Ok(stream) = incoming.accept().await else {
        return;
    };
    match pairing.add(Instant::now().into_std(), stream, &headers) {
        Added::Waiting => {}
        Added::Paired(pair) => {
            pairs.spawn(forward(target.clone(), pair));
        }
        Added::Refused((_, send), e) => {
            tracing::debug!(error = %e, "port-forward stream refused");
            let _ = send.reset(rst::REFUSED_STREAM).await;
        }
    }
}

/// A pair whose partner did not come: the kubelet's words on its error stream.
async fn timed_out(unpaired: portforward::Unpaired<Stream>) {
    if let Some((_, mut error)) = unpaired.error {
        let _ = error
            .send(Bytes::from_static(portforward::TIMED_OUT.as_bytes()))
            .await;
        let _ = error.finish().await;
    }
    if let Some((_, data)) = unpaired.data {
        let _ = data.finish().await;
    }
}

/// One forwarded connection: its session, from open to end. What kubectl writes on the error
/// stream (nothing, as a rule: it FINs it at once) is read and dropped, so it never holds up
/// the connection's reading.
async fn forward(target: Arc<Target>, pair: Pair<Stream>) {
    let (mut error_rx, error) = pair.error;
    let drain = async move {
        while let Ok(Some(_)) = error_rx.recv().await {}
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = drain => {}
        () = pair_session(target, pair.port, error, pair.data) => {}
    }
}

/// The session of one forwarded connection, from open to end.
async fn pair_session(target: Arc<Target>, port: u16, error: SendHalf, data: Stream) {
    let (data_rx, data) = data;
    let mut request = target.request.clone();
    request.session = match session::port_forward(&request.path, port) {
        Ok(spec) => Some(spec.to_wire()),
        Err(e) => return fail(error, Some(data), &e.to_string()).await,
    };
    let opened = target
        .tunnels
        .open_session_until(
            SessionOutgoing {
                cluster: target.cluster.clone(),
                request,
                protocol: target.protocol,
            },
            target.hold.clone(),
        )
        .await;
    match opened {
        Ok(Opened::Session(io)) => {
            let failure = bridge(io, data_rx, data).await;
            match failure {
                Some(text) => fail(error, None, &text).await,
                None => {
                    let _ = error.finish().await;
                }
            }
        }
        Ok(Opened::Refused(answer)) => {
            let text = refusal_text(answer).await;
            fail(error, Some(data), &text).await;
        }
        // A limit (the sessions', or the calls' of the hub or the caller): only this
        // connection is dropped, the port-forward goes on.
        Err(
            e @ (SessionError::Refused(_)
            | SessionError::Call(CallError::Busy(_) | CallError::IdentityBusy { .. })),
        ) => {
            tracing::info!(refusal = %e, "port-forward connection refused");
            let _ = error.reset(rst::REFUSED_STREAM).await;
            let _ = data.reset(rst::REFUSED_STREAM).await;
        }
        Err(e) => fail(error, Some(data), &e.to_string()).await,
    }
}

/// Writes why the pair failed on its error stream, and ends both streams.
async fn fail(mut error: SendHalf, data: Option<SendHalf>, text: &str) {
    let _ = error.send(Bytes::from(text.to_owned())).await;
    let _ = error.finish().await;
    if let Some(data) = data {
        let _ = data.finish().await;
    }
}

/// The message of the spoke's refusal (its `Status`), its control characters replaced.
async fn refusal_text(mut answer: super::tunnel::Answer) -> String {
    let mut body = Vec::new();
    // A body that does not come in time is taken as it is (a hostile agent must not hold the
    // pair's session by never finishing it).
    let _ = tokio::time::timeout(REFUSAL_BODY_WAIT, async {
        while let Some(Ok(chunk)) = answer.body.next().await {
            body.extend_from_slice(&chunk[..chunk.len().min(MAX_REFUSAL - body.len())]);
            if body.len() >= MAX_REFUSAL {
                break;
            }
        }
    })
    .await;
    let message = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("the cluster answered {}", answer.head.status));
    message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Carries one pair's bytes both ways until the session ends; `Some` with what to write on the
/// error stream when it failed.
async fn bridge(
    io: super::tunnel::SessionIo,
    mut data_rx: RecvHalf,
    data: SendHalf,
) -> Option<String> {
    let (input, mut outputs) = io.split();
    let upstream = async {
        loop {
            match data_rx.recv().await {
                Ok(Some(bytes)) => {
                    if input.send(bytes).await.is_err() {
                        break;
                    }
                }
                // kubectl's FIN (its local peer closed), or its reset once our side ended:
                // the input ends; the session ends when the pod's side does.
                Ok(None) | Err(_) => {
                    let _ = input.close().await;
                    break;
                }
            }
        }
        std::future::pending::<std::convert::Infallible>().await
    };
    let downstream = async {
        let mut data = Some(data);
        let mut failure = None;
        while let Some(out) = outputs.next().await {
            match out {
                SessionOutput::Data { data: bytes, .. } => {
                    let sent = match data.as_mut() {
                        Some(d) => d.send(bytes).await.is_ok(),
                        None => false,
                    };
                    if !sent {
                        // kubectl reset the stream: the session is cancelled with this task.
                        return (data, None);
                    }
                }
                SessionOutput::Close(_) => {
                    if let Some(d) = data.take() {
                        let _ = d.finish().await;
                    }
                }
                SessionOutput::Exit(status) => failure = Some(status.message()),
                SessionOutput::End => break,
                SessionOutput::Failed(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        (data, failure)
    };
    let (data, failure) = tokio::select! {
        never = upstream => match never {},
        out = downstream => out,
    };
    if let Some(d) = data {
        let _ = d.finish().await;
    }
    failure
}

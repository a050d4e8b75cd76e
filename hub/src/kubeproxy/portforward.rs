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
use super::tunnel::{Opened, SessionError, SessionOutgoing, SessionOutput, Tunnels};
use bytes::Bytes;
use flotilla_api::v1::TunnelRequest;
use flotilla_kubestream::portforward::{self, Added, Pair, Pairing};
use flotilla_kubestream::spdy::conn::{self, RecvHalf, SendHalf};
use flotilla_kubestream::spdy::frame::{goaway, rst};
use futures::{FutureExt, StreamExt};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The largest refusal body read for its message.
const MAX_REFUSAL: usize = 16 * 1024;

/// How long the connection waits for its pairs to tell kubectl why they end, at shutdown.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(3);

/// How long the connection is driven after its GOAWAY, at shutdown, for kubectl to go.
const GOAWAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

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
}

/// An accepted stream.
type Stream = (RecvHalf, SendHalf);

/// Serves one upgraded port-forward connection until kubectl goes or the hub stops.
pub async fn serve<IO>(io: IO, target: Target)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let target = Arc::new(target);
    let (mut conn, driver) = conn::serve(io, &super::upgrade::spdy_config());
    // Fused: the shutdown below drives it again after the loop may have seen it end.
    let mut driver = std::pin::pin!(driver.fuse());
    let mut pairing: Pairing<Stream> = Pairing::default();
    let mut pairs = JoinSet::new();
    let mut shutdown = target.tunnels.shutdown();
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
            _ = shutdown.changed() => {
                // The sessions fail with "the hub is shutting down" on their error streams,
                // written while the connection is driven; the GOAWAY only after, or kubectl
                // drops the connection before reading why.
                let _ = tokio::time::timeout(DRAIN, async {
                    loop {
                        tokio::select! {
                            joined = pairs.join_next() => if joined.is_none() { break },
                            _ = &mut driver => break,
                        }
                    }
                })
                .await;
                let _ = conn.goaway(goaway::OK).await;
                let _ = tokio::time::timeout(GOAWAY_WAIT, &mut driver).await;
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

/// One forwarded connection: its session, from open to end.
async fn forward(target: Arc<Target>, pair: Pair<Stream>) {
    let (_error_rx, error) = pair.error;
    let (data_rx, data) = pair.data;
    let mut request = target.request.clone();
    request.session = match session::port_forward(&request.path, pair.port) {
        Ok(spec) => Some(spec.to_wire()),
        Err(e) => return fail(error, Some(data), &e.to_string()).await,
    };
    let opened = target
        .tunnels
        .open_session(SessionOutgoing {
            cluster: target.cluster.clone(),
            request,
            protocol: target.protocol,
        })
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
        // A limit: only this connection is dropped, the port-forward goes on.
        Err(SessionError::Refused(r)) => {
            tracing::info!(refusal = %r, "port-forward connection refused");
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
    while let Some(Ok(chunk)) = answer.body.next().await {
        body.extend_from_slice(&chunk[..chunk.len().min(MAX_REFUSAL - body.len())]);
        if body.len() >= MAX_REFUSAL {
            break;
        }
    }
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

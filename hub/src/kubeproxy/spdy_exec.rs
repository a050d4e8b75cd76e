//! exec and attach over SPDY/3.1 (I/O): kubectl ≤ 1.29's transport, and kubectl 1.30+'s
//! with `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` — `v4.channel.k8s.io` as one SPDY stream
//! per role ([`flotilla_kubestream::remotecommand`]), bridged to an open session
//! ([`super::tunnel::SessionIo`]) as [`super::exec`] bridges a WebSocket.
//!
//! - The streams: accepted (SYN_REPLY) as they come — kubectl waits for each reply before it
//!   opens the next — and gathered; a role the request did not ask for, or a second one, is
//!   reset (REFUSED). If they are not all open within 30 s (the kubelet's timeout) the
//!   connection is closed and the session cancelled.
//! - Reading the client: stdin's bytes go to the session (each waits for the agent's room),
//!   its FIN ends the session's input; the resize stream's sizes go paced to a tty.
//! - Writing the client: stdout and stderr as they come, each FINned when the process's
//!   output ends; then the exit `Status` on the error stream and its FIN — kubectl reads its
//!   outputs to their end, then the status, and exits with the command's code. A session that
//!   breaks off (the agent fell silent, its cluster went, the hub stops) writes a `Failure`
//!   saying why. Then GOAWAY; kubectl closes the connection.
//!
//! The client going away (its connection closed, or a reset of an output stream) drops the
//! session: the agent is told.

use super::tunnel::{SessionInput, SessionIo, SessionOutput, SessionOutputs};
use bytes::Bytes;
use flotilla_bus::tunnel::session::{STDERR, STDOUT, Streams as Asked};
use flotilla_kubestream::remotecommand::{
    self, Added, Gathering, ResizeReader, STREAMS_TIMEOUT, Streams, Wanted,
};
use flotilla_kubestream::spdy::conn::{self, Connection, RecvHalf, SendHalf};
use flotilla_kubestream::spdy::frame::{goaway, rst};
use flotilla_kubestream::status::SessionStatus;
use std::future::Future;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

/// How long the client may take to close the connection once the session ended.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// An accepted stream.
type Stream = (RecvHalf, SendHalf);

/// The connection's settings: at most the five roles and a few refused ones open at once; a
/// silent client let go ([`super::upgrade::spdy_config`]).
fn config() -> conn::Config {
    conn::Config {
        max_streams: 8,
        ..super::upgrade::spdy_config()
    }
}

/// Serves one upgraded SPDY exec or attach connection until the session ends or the client
/// goes. `asked` is what the request's query asked for.
pub async fn serve<IO>(io: IO, asked: Asked, session: SessionIo)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut conn, driver) = conn::serve(io, &config());
    let mut driver = std::pin::pin!(driver);
    let wanted = Wanted {
        stdin: asked.stdin,
        stdout: asked.stdout,
        stderr: asked.stderr,
        tty: asked.tty,
    };
    let gathered = tokio::select! {
        streams = gather(&mut conn, wanted) => streams,
        ended = &mut driver => {
            tracing::debug!(?ended, "exec client left before opening its streams");
            return;
        }
    };
    let Some(streams) = gathered else {
        // Dropping the session cancels it at the agent; the client is left to time out, as
        // a kubelet leaves it.
        return;
    };
    let mut bridge = std::pin::pin!(bridge(streams, session));
    loop {
        tokio::select! {
            () = &mut bridge => break,
            ended = &mut driver => {
                tracing::debug!(?ended, "exec client ended the connection");
                return;
            }
            incoming = conn.next() => match incoming {
                // Every stream of the session is open: more are refused.
                Some(extra) => {
                    let _ = extra.refuse().await;
                }
                None => {
                    // No more streams (kubectl's GOAWAY): the bridge goes on.
                    let _ = finished(&mut bridge, &mut driver).await;
                    return;
                }
            },
        }
    }
    let _ = conn.goaway(goaway::OK).await;
    drop(conn);
    let _ = tokio::time::timeout(CLOSE_WAIT, driver).await;
}

/// Runs `bridge` to its end, or until the client's connection ends.
async fn finished<B, D>(bridge: &mut B, driver: &mut D)
where
    B: Future<Output = ()> + Unpin,
    D: Future + Unpin,
{
    tokio::select! {
        () = bridge => {}
        _ = driver => {}
    }
}

/// Accepts the client's streams until every one the request asked for is open; `None` if the
/// client stopped opening streams or took too long.
async fn gather(conn: &mut Connection, wanted: Wanted) -> Option<Streams<Stream>> {
    let mut gathering = Gathering::new(wanted, Instant::now().into_std(), STREAMS_TIMEOUT);
    let deadline = Instant::from_std(gathering.deadline());
    loop {
        let incoming = tokio::select! {
            incoming = conn.next() => incoming?,
            () = tokio::time::sleep_until(deadline) => {
                tracing::info!("exec client did not open its streams within 30 s");
                return None;
            }
        };
        let role = match remotecommand::stream_type(&incoming.headers) {
            Ok(role) => role,
            Err(e) => {
                tracing::debug!(error = %e, "exec stream refused");
                let _ = incoming.refuse().await;
                continue;
            }
        };
        let Ok(stream) = incoming.accept().await else {
            return None;
        };
        match gathering.add(role, stream) {
            Added::Waiting => {}
            Added::Complete(streams) => return Some(streams),
            Added::Refused((_, send), e) => {
                tracing::debug!(error = %e, "exec stream refused");
                let _ = send.reset(rst::REFUSED_STREAM).await;
            }
        }
    }
}

/// Carries the session both ways until it ends; returns early (the session then cancelled
/// with it) when the client resets an output stream.
async fn bridge(streams: Streams<Stream>, session: SessionIo) {
    let (input, mut outputs) = session.split();
    let (_, error) = streams.error;
    let (stdin_rx, stdin_tx) = split(streams.stdin);
    let (resize_rx, resize_tx) = split(streams.resize);
    let outs = Outs {
        stdout: streams.stdout.map(|(_, send)| send),
        stderr: streams.stderr.map(|(_, send)| send),
    };
    let reading = async {
        tokio::join!(stdin(stdin_rx, &input), resizes(resize_rx, &input));
        // The client's input is done; its end was passed on.
        std::future::pending::<std::convert::Infallible>().await
    };
    let status = tokio::select! {
        never = reading => match never {},
        status = write_client(outs, &mut outputs) => status,
    };
    let Some(status) = status else {
        return;
    };
    drop(input);
    let mut error = error;
    let _ = error.send(Bytes::from(status.to_json())).await;
    let _ = error.finish().await;
    // kubectl waits for our end of stdin before it lets go of its own.
    for send in [stdin_tx, resize_tx].into_iter().flatten() {
        let _ = send.finish().await;
    }
}

/// A stream as its two halves, each optional.
fn split(stream: Option<Stream>) -> (Option<RecvHalf>, Option<SendHalf>) {
    match stream {
        Some((recv, send)) => (Some(recv), Some(send)),
        None => (None, None),
    }
}

/// The client's stdin into the session, and its end.
async fn stdin(rx: Option<RecvHalf>, input: &SessionInput) {
    let Some(mut rx) = rx else {
        return;
    };
    loop {
        match rx.recv().await {
            Ok(Some(bytes)) => {
                if input.send(bytes).await.is_err() {
                    return;
                }
            }
            // kubectl's FIN: stdin ended (a reset, or the connection's end, likewise).
            Ok(None) | Err(_) => {
                let _ = input.close().await;
                return;
            }
        }
    }
}

/// The client's terminal sizes into the session.
async fn resizes(rx: Option<RecvHalf>, input: &SessionInput) {
    let Some(mut rx) = rx else {
        return;
    };
    let mut reader = ResizeReader::default();
    while let Ok(Some(bytes)) = rx.recv().await {
        match reader.push(&bytes) {
            Ok(sizes) => {
                for size in sizes {
                    input.resize(size.width, size.height);
                }
            }
            Err(e) => {
                // Further sizes are dropped; the session goes on.
                tracing::debug!(error = %e, "exec client's resize stream refused");
                return;
            }
        }
    }
}

/// The output streams still open.
struct Outs {
    stdout: Option<SendHalf>,
    stderr: Option<SendHalf>,
}

impl Outs {
    fn of(&mut self, channel: u32) -> Option<&mut Option<SendHalf>> {
        match channel {
            STDOUT => Some(&mut self.stdout),
            STDERR => Some(&mut self.stderr),
            _ => None,
        }
    }
}

/// Writes the session's outputs to the client and FINs each as it ends; returns how the
/// session ended, or `None` when the client reset an output stream or went.
async fn write_client(mut outs: Outs, outputs: &mut SessionOutputs) -> Option<SessionStatus> {
    let mut status = None;
    while let Some(out) = outputs.next().await {
        match out {
            SessionOutput::Data { channel, data } => {
                // The session rules pass only the channels the client opened.
                let Some(send) = outs.of(channel).and_then(Option::as_mut) else {
                    continue;
                };
                if send.send(data).await.is_err() {
                    return None;
                }
            }
            SessionOutput::Close(channel) => {
                if let Some(send) = outs.of(channel).and_then(Option::take) {
                    let _ = send.finish().await;
                }
            }
            SessionOutput::Exit(exit) => status = Some(exit),
            SessionOutput::End => break,
            SessionOutput::Failed(e) => {
                status = Some(super::exec::broke_off(&e));
                break;
            }
        }
    }
    for send in [outs.stdout, outs.stderr].into_iter().flatten() {
        let _ = send.finish().await;
    }
    Some(status.unwrap_or_else(|| {
        SessionStatus::internal_error("the session ended without an exit status")
    }))
}

//! exec and attach over a WebSocket (I/O): kubectl's `v5.channel.k8s.io` (or
//! `v4.channel.k8s.io`) connection, once upgraded, bridged to an open session
//! ([`super::tunnel::SessionIo`]).
//!
//! Two halves run at once, so a pod that writes while its stdin waits never stalls the client:
//! - reading the client: stdin messages go to the session (each waits for the agent's room:
//!   a pod that reads nothing stalls kubectl's stdin, not the hub's memory), v5's CLOSE of
//!   stdin ends the session's input, resizes go paced to a tty; pings are answered as the
//!   socket is read;
//! - writing the client: stdout and stderr as they come (each credited to the agent once
//!   written), then the exit `Status` on channel 3 and a close with code 1000 — kubectl exits
//!   with the command's code. A session that breaks off (the agent fell silent, its cluster
//!   went, the hub stops) ends with a `Failure` `Status` saying why, then the same close.
//!
//! The client going away (its socket closed or broken) drops the session: the agent is told.
//! While stdin waits for the pod's room the client is still read (one message ahead), and a
//! write to it failing — our pings, every 20 s — ends it too. So does its silence: it is
//! pinged every 20 s while quiet, and a client that sends nothing for 60 s (not even the pong;
//! kubectl pings every 5 s itself) is taken as gone.

use super::tunnel::{SessionError, SessionInput, SessionIo, SessionOutput, SessionOutputs};
use super::upgrade::{CLIENT_PING, CLIENT_SILENCE};
use flotilla_bus::tunnel::session::{STDERR, STDOUT};
use flotilla_kubestream::channel::{self, ClientMessage, MAX_CLIENT_MESSAGE, ServerMessage};
use flotilla_kubestream::status::SessionStatus;
use futures::{FutureExt, SinkExt, StreamExt};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// How many times as often the client is pinged while its stdin waits for the pod (every 5 s).
const STALLED_PINGS: u32 = 4;

/// How long the closing handshake may take once the session ended.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The WebSocket settings: messages no larger than a client may send (kubectl's stdin
/// messages are ≤ 33 KiB), small buffers.
fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_CLIENT_MESSAGE))
        .max_frame_size(Some(MAX_CLIENT_MESSAGE))
        .read_buffer_size(32 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(1024 * 1024)
}

/// How the client's side ended.
#[derive(Debug, thiserror::Error)]
enum ClientEnd {
    /// Its socket closed or broke.
    #[error("the client's connection ended")]
    Gone(#[source] Option<WsError>),
    /// It sent what the protocol does not allow.
    #[error("the client broke the channel protocol: {0}")]
    Protocol(#[source] channel::Error),
    /// It sent a text message (the channel protocols are binary).
    #[error("the client sent a text message")]
    Text,
    /// It sent nothing, not even the answer to a ping, for [`CLIENT_SILENCE`].
    #[error("the client sent nothing for {CLIENT_SILENCE:?}")]
    Silent,
}

/// Serves one upgraded exec or attach connection until the session ends or the client goes.
pub async fn serve<IO>(io: IO, protocol: channel::Protocol, session: SessionIo)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config())).await;
    let (mut sink, mut stream) = ws.split();
    let (input, mut outputs) = session.split();
    let stalled = std::sync::atomic::AtomicBool::new(false);
    let end = tokio::select! {
        end = read_client(&mut stream, &input, protocol, &stalled) => Some(end),
        // The client is gone when a write fails (our pings find it while its stdin waits).
        told = write_client(&mut sink, &mut outputs, &stalled) => match told {
            Told::Ended => None,
            Told::Gone => Some(ClientEnd::Gone(None)),
        },
    };
    match end {
        // The session ended: the client was told; wait (briefly) for its close.
        None => {
            drop(input);
            let _ = tokio::time::timeout(CLOSE_WAIT, async {
                while let Some(Ok(_)) = stream.next().await {}
            })
            .await;
        }
        Some(end) => {
            tracing::debug!(%end, "exec client ended the connection");
            if !matches!(end, ClientEnd::Gone(_) | ClientEnd::Silent) {
                let close = CloseFrame {
                    code: CloseCode::Protocol,
                    reason: "the channel protocol was broken".into(),
                };
                let _ =
                    tokio::time::timeout(CLOSE_WAIT, sink.send(Message::Close(Some(close)))).await;
            }
            // Dropping the outputs cancels the session at the agent.
        }
    }
}

/// Reads the client until its socket ends (or it breaks the protocol), handing its stdin,
/// close and resizes to the session.
async fn read_client<S>(
    stream: &mut S,
    input: &SessionInput,
    protocol: channel::Protocol,
    stalled: &AtomicBool,
) -> ClientEnd
where
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin,
{
    // The client's next message, read while the last stdin waited for the pod's room.
    let mut ahead = None;
    loop {
        let data = match ahead.take() {
            Some(data) => data,
            None => match next_data(stream).await {
                Ok(data) => data,
                Err(end) => return end,
            },
        };
        match ClientMessage::decode(protocol, data) {
            // After the session ended its input is dropped: the client is still read (for
            // its close) but nothing more goes anywhere.
            Ok(ClientMessage::Stdin(bytes)) => {
                match sending(stream, input.send(bytes), stalled).await {
                    Ok(next) => ahead = next,
                    Err(end) => return end,
                }
            }
            Ok(ClientMessage::Close(channel::STDIN)) => {
                match sending(stream, input.close(), stalled).await {
                    Ok(next) => ahead = next,
                    Err(end) => return end,
                }
            }
            Ok(ClientMessage::Resize(size)) => input.resize(size.width, size.height),
            Ok(ClientMessage::Close(_) | ClientMessage::Ignored(_)) => {}
            Err(e) => return ClientEnd::Protocol(e),
        }
    }
}

/// The client's next data message (pings are answered as the socket is read), or how it
/// ended.
async fn next_data<S>(stream: &mut S) -> Result<tokio_tungstenite::tungstenite::Bytes, ClientEnd>
where
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin,
{
    loop {
        let msg = match tokio::time::timeout(CLIENT_SILENCE, stream.next()).await {
            Err(_) => return Err(ClientEnd::Silent),
            Ok(Some(Ok(msg))) => msg,
            Ok(Some(Err(e))) => return Err(ClientEnd::Gone(Some(e))),
            Ok(None) => return Err(ClientEnd::Gone(None)),
        };
        match msg {
            Message::Binary(data) => return Ok(data),
            Message::Text(_) => return Err(ClientEnd::Text),
            Message::Close(_) => return Err(ClientEnd::Gone(None)),
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
}

/// Waits for `send` (stdin waiting for the pod's room) while still reading the client, so its
/// going away (Ctrl-C while the pod reads nothing) ends the session and its pings are
/// answered. At most one message is read ahead — returned, to go next — and no more until
/// the send is done; meanwhile the client is `stalled`: pinged more often, so that a client
/// gone behind the unread messages is found by the write failing.
async fn sending<S, F>(
    stream: &mut S,
    send: F,
    stalled: &AtomicBool,
) -> Result<Option<tokio_tungstenite::tungstenite::Bytes>, ClientEnd>
where
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin,
    F: std::future::Future,
{
    let mut send = std::pin::pin!(send);
    let mut ahead = None;
    // Only a send that waits counts as a stall.
    if send.as_mut().now_or_never().is_some() {
        return Ok(None);
    }
    stalled.store(true, Ordering::Relaxed);
    let read = loop {
        tokio::select! {
            _ = &mut send => break Ok(ahead),
            data = next_data(stream), if ahead.is_none() => match data {
                Ok(data) => ahead = Some(data),
                Err(end) => break Err(end),
            },
        }
    };
    stalled.store(false, Ordering::Relaxed);
    read
}

/// How writing the client ended.
enum Told {
    /// The session ended and the client was told.
    Ended,
    /// A write failed: the client is gone.
    Gone,
}

/// Writes the session's outputs to the client until it ends; then the exit status (or why it
/// broke off) and the close. Returns at once when a write fails, dropping nothing itself: the
/// caller's dropping the outputs cancels the session.
async fn write_client<S>(sink: &mut S, outputs: &mut SessionOutputs, stalled: &AtomicBool) -> Told
where
    S: futures::Sink<Message, Error = WsError> + Unpin,
{
    let mut status = None;
    let every = CLIENT_PING / STALLED_PINGS;
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut ticks = 0u32;
    loop {
        let out = tokio::select! {
            out = outputs.next() => match out {
                Some(out) => out,
                None => break,
            },
            _ = ping.tick() => {
                ticks = ticks.wrapping_add(1);
                if !ticks.is_multiple_of(STALLED_PINGS) && !stalled.load(Ordering::Relaxed) {
                    continue;
                }
                // Its answer (or anything) keeps the reading half within the silence limit.
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    return Told::Gone;
                }
                continue;
            }
        };
        let msg = match out {
            SessionOutput::Data { channel, data } => match channel {
                STDOUT => ServerMessage::Stdout(data),
                STDERR => ServerMessage::Stderr(data),
                // The session rules let nothing else through.
                _ => continue,
            },
            // kubectl drops a server's CLOSE; the exit says the rest.
            SessionOutput::Close(_) => continue,
            SessionOutput::Exit(exit) => {
                status = Some(exit);
                continue;
            }
            SessionOutput::End => break,
            SessionOutput::Failed(e) => {
                status = Some(broke_off(&e));
                break;
            }
        };
        if sink.send(Message::Binary(msg.encode())).await.is_err() {
            return Told::Gone;
        }
    }
    let status = status.unwrap_or_else(|| {
        SessionStatus::internal_error("the session ended without an exit status")
    });
    let json = ServerMessage::Status(status.to_json().into()).encode();
    let _ = sink.send(Message::Binary(json)).await;
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        })))
        .await;
    Told::Ended
}

/// The `Status` kubectl is given when its session broke off: why, in words.
pub fn broke_off(e: &SessionError) -> SessionStatus {
    SessionStatus::Failure {
        reason: "InternalError".into(),
        message: format!("the session was cut: {e}"),
        code: Some(500),
    }
}

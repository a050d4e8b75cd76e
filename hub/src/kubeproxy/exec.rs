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
//! So does its silence: it is pinged every 20 s while quiet, and a client that sends nothing
//! for 60 s (not even the pong; kubectl pings every 5 s itself) is taken as gone.

use super::tunnel::{SessionError, SessionInput, SessionIo, SessionOutput, SessionOutputs};
use super::upgrade::{CLIENT_PING, CLIENT_SILENCE};
use flotilla_bus::tunnel::session::{STDERR, STDOUT};
use flotilla_kubestream::channel::{self, ClientMessage, MAX_CLIENT_MESSAGE, ServerMessage};
use flotilla_kubestream::status::SessionStatus;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

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
    let end = tokio::select! {
        end = read_client(&mut stream, &input, protocol) => Some(end),
        () = write_client(&mut sink, &mut outputs) => None,
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
) -> ClientEnd
where
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin,
{
    loop {
        let msg = match tokio::time::timeout(CLIENT_SILENCE, stream.next()).await {
            Err(_) => return ClientEnd::Silent,
            Ok(Some(Ok(msg))) => msg,
            Ok(Some(Err(e))) => return ClientEnd::Gone(Some(e)),
            Ok(None) => return ClientEnd::Gone(None),
        };
        let data = match msg {
            Message::Binary(data) => data,
            Message::Text(_) => return ClientEnd::Text,
            Message::Close(_) => return ClientEnd::Gone(None),
            // Pings are answered by the socket as it is read.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        match ClientMessage::decode(protocol, data) {
            // After the session ended its input is dropped: the client is still read (for
            // its close) but nothing more goes anywhere.
            Ok(ClientMessage::Stdin(bytes)) => {
                let _ = input.send(bytes).await;
            }
            Ok(ClientMessage::Close(channel::STDIN)) => {
                let _ = input.close().await;
            }
            Ok(ClientMessage::Resize(size)) => input.resize(size.width, size.height),
            Ok(ClientMessage::Close(_) | ClientMessage::Ignored(_)) => {}
            Err(e) => return ClientEnd::Protocol(e),
        }
    }
}

/// Writes the session's outputs to the client until it ends; then the exit status (or why it
/// broke off) and the close.
async fn write_client<S>(sink: &mut S, outputs: &mut SessionOutputs)
where
    S: futures::Sink<Message, Error = WsError> + Unpin,
{
    let mut status = None;
    let first = tokio::time::Instant::now() + CLIENT_PING;
    let mut ping = tokio::time::interval_at(first, CLIENT_PING);
    loop {
        let out = tokio::select! {
            out = outputs.next() => match out {
                Some(out) => out,
                None => break,
            },
            _ = ping.tick() => {
                // Its answer (or anything) keeps the reading half within the silence limit.
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    return std::future::pending().await;
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
            // The client is gone; the reading half sees it too.
            return std::future::pending().await;
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
}

/// The `Status` kubectl is given when its session broke off: why, in words.
pub fn broke_off(e: &SessionError) -> SessionStatus {
    SessionStatus::Failure {
        reason: "InternalError".into(),
        message: format!("the session was cut: {e}"),
        code: Some(500),
    }
}

//! The WebSocket channel protocols of exec and attach, `v4.channel.k8s.io` and
//! `v5.channel.k8s.io` (pure).
//!
//! Every WebSocket message is binary; byte 0 names the channel and the rest is the payload
//! (apimachinery `pkg/util/httpstream/wsstream/conn.go`, client-go
//! `tools/remotecommand/websocket.go`). The client writes stdin (0), terminal sizes (4) and, on
//! v5 only, the CLOSE signal (255, payload `[channel]`) that ends a channel — the end of stdin
//! that `kubectl cp` needs for `tar -x`. The server writes stdout (1), stderr (2) and, once at
//! the end, a `metav1.Status` on the error channel (3).
//!
//! This module decodes and encodes both directions, so the hub (server) and test clients use
//! the same rules, and bounds what it accepts.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// Channel 0: stdin, client → server.
pub const STDIN: u8 = 0;
/// Channel 1: stdout, server → client.
pub const STDOUT: u8 = 1;
/// Channel 2: stderr, server → client.
pub const STDERR: u8 = 2;
/// Channel 3: the error channel, server → client: a `metav1.Status` as JSON, once, at the end.
pub const ERROR: u8 = 3;
/// Channel 4: terminal resizes, client → server: `{"Width":W,"Height":H}`.
pub const RESIZE: u8 = 4;
/// Channel 255, v5 only: the CLOSE signal; its payload is the one channel the sender closes.
pub const CLOSE: u8 = 255;

/// The largest client message accepted, channel byte included. kubectl reads stdin in
/// 32 KiB buffers (`DataBufferSize`, plus 1 KiB of slack), so its messages stay under 33 KiB;
/// 64 KiB leaves room for other clients while bounding what one message can make us hold.
pub const MAX_CLIENT_MESSAGE: usize = 64 * 1024 + 1;

/// The largest resize payload accepted: `{"Width":65535,"Height":65535}` is 30 bytes.
pub const MAX_RESIZE_PAYLOAD: usize = 256;

/// The largest server message [`ServerMessage::decode`] accepts, channel byte included (a
/// client of ours reading a server that writes at most 128 KiB chunks, with slack).
pub const MAX_SERVER_MESSAGE: usize = 1024 * 1024 + 1;

/// Which channel protocol a WebSocket speaks, as chosen by [`crate::negotiate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `v4.channel.k8s.io`: stdin cannot be half-closed; the exit `Status` is JSON.
    V4,
    /// `v5.channel.k8s.io`: v4 plus the CLOSE signal (channel 255).
    V5,
}

impl Protocol {
    /// The subprotocol name on the wire (`Sec-WebSocket-Protocol`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::V4 => "v4.channel.k8s.io",
            Protocol::V5 => "v5.channel.k8s.io",
        }
    }
}

/// A terminal size, as kubectl sends it on the resize channel (`remotecommand.TerminalSize`,
/// whose fields are Go `uint16`s; Go's JSON decoding also takes lower-case keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    /// Columns.
    #[serde(rename = "Width", alias = "width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height", alias = "height")]
    pub height: u16,
}

/// A message from the client (kubectl) to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage {
    /// Bytes for the process's stdin; empty is an empty write, not the end.
    Stdin(Bytes),
    /// v5 only: the client closed this channel (0 = the end of stdin). Closing another
    /// channel carries no meaning for the server and is accepted as kubectl may send it
    /// when it shuts its streams down.
    Close(u8),
    /// The terminal was resized (tty sessions).
    Resize(TerminalSize),
    /// A message on a channel the server does not read (1, 2, 3): dropped, as the API server
    /// drops frames for channels it does not read.
    Ignored(u8),
}

/// A message from the server to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMessage {
    /// Bytes the process wrote on stdout.
    Stdout(Bytes),
    /// Bytes the process wrote on stderr.
    Stderr(Bytes),
    /// The session's end: a `metav1.Status` as JSON (see [`crate::status`]).
    Status(Bytes),
}

/// Why a channel message was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A message without even the channel byte.
    #[error("empty channel message: every message starts with its channel byte")]
    Empty,
    /// A message longer than the bound for its direction.
    #[error("channel message of {len} bytes is over the limit of {max}")]
    TooLarge {
        /// The message's length, channel byte included.
        len: usize,
        /// The bound it exceeded.
        max: usize,
    },
    /// A channel number the protocol does not define (or CLOSE on v4).
    #[error("channel {channel} is not part of {protocol}")]
    UnknownChannel {
        /// The channel byte.
        channel: u8,
        /// The protocol's name.
        protocol: &'static str,
    },
    /// A CLOSE signal whose payload is not exactly one known channel.
    #[error("a CLOSE message carries exactly one channel number; got {len} bytes")]
    BadClose {
        /// The payload's length.
        len: usize,
    },
    /// A resize payload that is not `{"Width":W,"Height":H}` with 16-bit sizes.
    #[error("resize message is not a terminal size: {source}")]
    BadResize {
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A resize payload over [`MAX_RESIZE_PAYLOAD`].
    #[error("resize message of {len} bytes is over the limit of {MAX_RESIZE_PAYLOAD}")]
    ResizeTooLarge {
        /// The payload's length.
        len: usize,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl ClientMessage {
    /// Decodes one binary WebSocket message from the client.
    pub fn decode(protocol: Protocol, msg: Bytes) -> Result<ClientMessage> {
        check_len(msg.len(), MAX_CLIENT_MESSAGE)?;
        let channel = msg[0];
        let payload = msg.slice(1..);
        match channel {
            STDIN => Ok(ClientMessage::Stdin(payload)),
            STDOUT | STDERR | ERROR => Ok(ClientMessage::Ignored(channel)),
            RESIZE => {
                if payload.len() > MAX_RESIZE_PAYLOAD {
                    return Err(Error::ResizeTooLarge { len: payload.len() });
                }
                serde_json::from_slice(&payload)
                    .map(ClientMessage::Resize)
                    .map_err(|source| Error::BadResize { source })
            }
            CLOSE if protocol == Protocol::V5 => match payload.as_ref() {
                [closed @ STDIN..=RESIZE] => Ok(ClientMessage::Close(*closed)),
                _ => Err(Error::BadClose { len: payload.len() }),
            },
            _ => Err(Error::UnknownChannel {
                channel,
                protocol: protocol.name(),
            }),
        }
    }

    /// Encodes the message as a client writes it (tests, the load tool's client). `Ignored`
    /// encodes as an empty message on its channel.
    pub fn encode(&self) -> Bytes {
        match self {
            ClientMessage::Stdin(data) => with_channel(STDIN, data),
            ClientMessage::Close(channel) => Bytes::from(vec![CLOSE, *channel]),
            ClientMessage::Resize(size) => {
                // A struct of two integers always serializes.
                let json = serde_json::to_vec(size).unwrap_or_default();
                with_channel(RESIZE, &json)
            }
            ClientMessage::Ignored(channel) => Bytes::from(vec![*channel]),
        }
    }
}

impl ServerMessage {
    /// Encodes the message as the server writes it.
    pub fn encode(&self) -> Bytes {
        match self {
            ServerMessage::Stdout(data) => with_channel(STDOUT, data),
            ServerMessage::Stderr(data) => with_channel(STDERR, data),
            ServerMessage::Status(json) => with_channel(ERROR, json),
        }
    }

    /// Decodes one binary WebSocket message from the server (a client's side: tests and the
    /// load tool). A v5 server's CLOSE signal and unknown channels are refused; kubectl drops
    /// them, our clients need not see them.
    pub fn decode(msg: Bytes) -> Result<ServerMessage> {
        check_len(msg.len(), MAX_SERVER_MESSAGE)?;
        let payload = msg.slice(1..);
        match msg[0] {
            STDOUT => Ok(ServerMessage::Stdout(payload)),
            STDERR => Ok(ServerMessage::Stderr(payload)),
            ERROR => Ok(ServerMessage::Status(payload)),
            channel => Err(Error::UnknownChannel {
                channel,
                protocol: "the server's channels",
            }),
        }
    }
}

fn check_len(len: usize, max: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::Empty);
    }
    if len > max {
        return Err(Error::TooLarge { len, max });
    }
    Ok(())
}

fn with_channel(channel: u8, payload: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(payload.len() + 1);
    buf.put_u8(channel);
    buf.put_slice(payload);
    buf.freeze()
}

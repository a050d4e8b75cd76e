//! A byte stream over a WebSocket of binary messages (I/O): `AsyncRead + AsyncWrite` for the
//! SPDY connection kubectl ≥ 1.31 tunnels in a WebSocket (`SPDY/3.1+portforward.k8s.io`).
//!
//! kubectl's tunnel cuts its byte stream into messages at arbitrary points — a SPDY frame
//! header over several 2- and 4-byte messages, empty messages too (see
//! `tests/fixtures/README.md`) — so message boundaries mean nothing: reads concatenate
//! payloads, writes send each buffer as one binary message. A text message is an error; a
//! close message is the end of the stream. Pings are answered by tungstenite itself while we
//! read. Shutting down writes a close frame with code 1000, the only code kubectl's reader
//! takes as a normal end.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

#[cfg(test)]
mod tests;

/// The largest binary message one write sends.
pub const MAX_WRITE_MESSAGE: usize = 128 * 1024;

/// `AsyncRead + AsyncWrite` over a WebSocket (`tokio_tungstenite::WebSocketStream`, or any
/// stream and sink of tungstenite messages).
#[derive(Debug)]
pub struct WsIo<T> {
    ws: T,
    /// What is left of the last binary message read.
    pending: Bytes,
    /// A close message was read, or the stream ended.
    eof: bool,
    /// A close frame was queued (ours, or tungstenite's reply to the peer's).
    closing: bool,
}

impl<T> WsIo<T> {
    /// Wraps an open WebSocket.
    pub fn new(ws: T) -> WsIo<T> {
        WsIo {
            ws,
            pending: Bytes::new(),
            eof: false,
            closing: false,
        }
    }

    /// The WebSocket back.
    pub fn into_inner(self) -> T {
        self.ws
    }
}

fn io_error(err: WsError) -> io::Error {
    match err {
        WsError::Io(e) => e,
        WsError::ConnectionClosed | WsError::AlreadyClosed => {
            io::Error::new(io::ErrorKind::BrokenPipe, err)
        }
        other => io::Error::other(other),
    }
}

impl<T> AsyncRead for WsIo<T>
where
    T: Stream<Item = Result<Message, WsError>> + Unpin,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.pending.is_empty() && !this.eof {
            match ready!(Pin::new(&mut this.ws).poll_next(cx)) {
                Some(Ok(Message::Binary(data))) => this.pending = data,
                Some(Ok(Message::Text(_))) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a text message on a binary WebSocket stream",
                    )));
                }
                // tungstenite queued the close reply; shutting down flushes it, without a
                // close frame of our own.
                Some(Ok(Message::Close(_))) => {
                    this.eof = true;
                    this.closing = true;
                }
                None => this.eof = true,
                // Pings are answered by tungstenite; pongs and raw frames carry no bytes.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Err(err)) => return Poll::Ready(Err(io_error(err))),
            }
        }
        let n = this.pending.len().min(buf.remaining());
        buf.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl<T> AsyncWrite for WsIo<T>
where
    T: Sink<Message, Error = WsError> + Unpin,
{
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let ws = &mut self.ws;
        ready!(Pin::new(&mut *ws).poll_ready(cx)).map_err(io_error)?;
        let n = buf.len().min(MAX_WRITE_MESSAGE);
        Pin::new(ws)
            .start_send(Message::Binary(Bytes::copy_from_slice(&buf[..n])))
            .map_err(io_error)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.ws).poll_flush(cx).map_err(io_error)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.closing {
            ready!(Pin::new(&mut this.ws).poll_ready(cx)).map_err(io_error)?;
            let close = CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            };
            Pin::new(&mut this.ws)
                .start_send(Message::Close(Some(close)))
                .map_err(io_error)?;
            this.closing = true;
        }
        match ready!(Pin::new(&mut this.ws).poll_close(cx)) {
            // The peer closed first: our half is closed all the same.
            Ok(()) | Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => Poll::Ready(Ok(())),
            Err(err) => Poll::Ready(Err(io_error(err))),
        }
    }
}

//! A SPDY/3.1 server connection over any `AsyncRead + AsyncWrite` (I/O): a raw upgraded
//! socket, or a WebSocket through [`crate::wsio`].
//!
//! [`serve`] returns a [`Connection`] — the streams the client opens, as [`Incoming`] to
//! accept (SYN_REPLY) or refuse (RST_STREAM REFUSED) — and a driver future the caller spawns
//! in its own span and owns (the library spawns nothing). The driver runs the reader and the
//! one writer:
//! - **Reader**: frames in order, header blocks always inflated (one context per direction);
//!   a stream's DATA goes into its bounded buffer and reading *waits* while that buffer is
//!   full — head-of-line, as spdystream's own reader, so memory per connection is bounded by
//!   `max_streams × stream_buffer` slices. PINGs of the client's parity (odd) are echoed;
//!   SETTINGS, WINDOW_UPDATE and HEADERS are ignored (spdystream has no flow control); a
//!   broken frame ends the connection with GOAWAY(PROTOCOL_ERROR). While the client is quiet
//!   it is pinged (`ping_interval`), and past `silence_limit` without a byte from it the
//!   connection ends with GOAWAY(OK) and [`Error::Silent`].
//! - **Writer**: the only task writing the socket and the only user of the outgoing zlib
//!   context; a bounded queue; [`SendHalf::send`] returns once its bytes are written, so a
//!   client that stops reading stalls its senders, not our memory. It ends when every handle
//!   is gone, shutting the socket's write side.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use super::frame::{self, DataSlice, Decoder, Event, Frame, goaway, rst};
use super::headers::{self, Headers};

#[cfg(test)]
pub(crate) mod tests;

/// Bounds and sizes of a connection.
#[derive(Debug, Clone)]
pub struct Config {
    /// The largest control frame read (default 64 KiB).
    pub max_control: usize,
    /// DATA is handed to a stream in slices of at most this (default 32 KiB).
    pub max_slice: usize,
    /// Slices buffered per stream before reading waits (default 4).
    pub stream_buffer: usize,
    /// The largest DATA frame written (default 128 KiB).
    pub max_write_frame: usize,
    /// Frames queued for the writer (default 16).
    pub write_queue: usize,
    /// Streams open at once; past it new ones are refused (default 130: 64 pairs and spare).
    pub max_streams: usize,
    /// While waiting for the client, a PING of ours this often (even ids; spdystream echoes
    /// them), so a silent client is told apart from a gone one (default none).
    pub ping_interval: Option<std::time::Duration>,
    /// The longest wait for the client's next byte before the connection ends with
    /// [`Error::Silent`]: a client host that vanished without closing its connection (default
    /// none). Only waiting on the socket counts, never a wait for our own streams' room.
    pub silence_limit: Option<std::time::Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_control: frame::DEFAULT_MAX_CONTROL,
            max_slice: 32 * 1024,
            stream_buffer: 4,
            max_write_frame: 128 * 1024,
            write_queue: 16,
            max_streams: 130,
            ping_interval: None,
            silence_limit: None,
        }
    }
}

/// Why a connection ended badly.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the socket failed.
    #[error("SPDY connection I/O failed: {source}")]
    Io {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The client sent a broken frame.
    #[error("SPDY frame refused: {source}")]
    Frame {
        /// The frame error.
        #[from]
        source: frame::Error,
    },
    /// A header block could not be read (or written).
    #[error("SPDY header block refused: {source}")]
    Headers {
        /// The header error.
        #[from]
        source: headers::Error,
    },
    /// The client broke the stream rules.
    #[error("SPDY protocol error: {what}")]
    Protocol {
        /// What it did.
        what: &'static str,
    },
    /// The connection's end came while the socket still had part of a frame.
    #[error("the SPDY connection ended inside a frame")]
    Truncated,
    /// Nothing came from the client for the silence limit (our pings unanswered).
    #[error("the SPDY client sent nothing for {0:?}")]
    Silent(std::time::Duration),
}

/// Why a stream operation failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StreamError {
    /// The client reset the stream (RST_STREAM with this status).
    #[error("the client reset the stream (status {status})")]
    Reset {
        /// The RST_STREAM status.
        status: u32,
    },
    /// The connection is gone (the socket ended, broke, or the writer stopped).
    #[error("the SPDY connection is closed")]
    ConnectionClosed,
}

/// What the writer is asked to write.
#[derive(Debug)]
enum Out {
    Reply {
        id: u32,
    },
    Data {
        id: u32,
        fin: bool,
        data: Bytes,
        done: oneshot::Sender<()>,
    },
    Rst {
        id: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        status: u32,
    },
}

/// What one stream's reader and writer share.
#[derive(Debug, Default)]
struct StreamState {
    reset: AtomicU32,
    conn_gone: AtomicBool,
}

/// What the connection's parts share.
#[derive(Debug, Default)]
struct ConnState {
    last_stream: AtomicU32,
}

/// The connection: the streams the client opens, and GOAWAY.
#[derive(Debug)]
pub struct Connection {
    incoming: mpsc::Receiver<Incoming>,
    out: mpsc::Sender<Out>,
    state: Arc<ConnState>,
}

/// A stream the client opened, not yet answered.
#[derive(Debug)]
pub struct Incoming {
    /// The stream's id.
    pub id: u32,
    /// Its headers.
    pub headers: Headers,
    rx: mpsc::Receiver<Bytes>,
    stream: Arc<StreamState>,
    out: mpsc::Sender<Out>,
    max_write_frame: usize,
}

/// The reading half of an accepted stream.
#[derive(Debug)]
pub struct RecvHalf {
    rx: mpsc::Receiver<Bytes>,
    stream: Arc<StreamState>,
}

/// The writing half of an accepted stream. Dropped without [`SendHalf::finish`] or
/// [`SendHalf::reset`], it resets the stream (CANCEL).
#[derive(Debug)]
pub struct SendHalf {
    id: u32,
    out: mpsc::Sender<Out>,
    stream: Arc<StreamState>,
    max_write_frame: usize,
    ended: bool,
}

/// Starts serving a SPDY connection on `io`. Spawn the returned driver (in a span naming the
/// connection); it ends when the client is gone and every handle is dropped.
pub fn serve<IO>(
    io: IO,
    config: &Config,
) -> (
    Connection,
    impl Future<Output = Result<(), Error>> + Send + 'static,
)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(io);
    let (out, out_rx) = mpsc::channel(config.write_queue.max(1));
    let (incoming_tx, incoming) = mpsc::channel(1);
    let state = Arc::new(ConnState::default());
    let reader = Reader {
        io: read,
        decoder: Decoder::new(config.max_control, config.max_slice),
        zlib: headers::Decoder::new(),
        config: config.clone(),
        streams: HashMap::new(),
        incoming: Some(incoming_tx),
        out: out.clone(),
        state: state.clone(),
        ping_id: 0,
    };
    let driver = drive(reader, writer(write, out_rx, state.clone()));
    (
        Connection {
            incoming,
            out,
            state,
        },
        driver,
    )
}

async fn drive(
    reader: Reader<impl AsyncRead + Send>,
    writer: impl Future<Output = Result<(), Error>> + Send,
) -> Result<(), Error> {
    let reader = reader.run().instrument(tracing::debug_span!("spdy_reader"));
    let writer = writer.instrument(tracing::debug_span!("spdy_writer"));
    tokio::pin!(reader, writer);
    tokio::select! {
        read = &mut reader => {
            let written = writer.await;
            read.and(written)
        }
        // The reader holds a sender, so the writer ends first only when writing failed.
        written = &mut writer => written,
    }
}

impl Connection {
    /// The next stream the client opens; `None` once it sent GOAWAY or the connection ended.
    pub async fn next(&mut self) -> Option<Incoming> {
        self.incoming.recv().await
    }

    /// Sends GOAWAY with `status` (see [`goaway`]) and the last stream seen.
    pub async fn goaway(&self, status: u32) -> Result<(), StreamError> {
        self.out
            .send(Out::GoAway { status })
            .await
            .map_err(|_| StreamError::ConnectionClosed)
    }

    /// The last stream id the client opened.
    pub fn last_stream(&self) -> u32 {
        self.state.last_stream.load(Ordering::Relaxed)
    }
}

impl Incoming {
    /// Accepts the stream: SYN_REPLY without headers, as the kubelet answers.
    pub async fn accept(self) -> Result<(RecvHalf, SendHalf), StreamError> {
        self.out
            .send(Out::Reply { id: self.id })
            .await
            .map_err(|_| StreamError::ConnectionClosed)?;
        Ok((
            RecvHalf {
                rx: self.rx,
                stream: self.stream.clone(),
            },
            SendHalf {
                id: self.id,
                out: self.out,
                stream: self.stream,
                max_write_frame: self.max_write_frame.max(1),
                ended: false,
            },
        ))
    }

    /// Refuses the stream: RST_STREAM(REFUSED_STREAM).
    pub async fn refuse(self) -> Result<(), StreamError> {
        self.out
            .send(Out::Rst {
                id: self.id,
                status: rst::REFUSED_STREAM,
            })
            .await
            .map_err(|_| StreamError::ConnectionClosed)
    }
}

impl RecvHalf {
    /// The next bytes from the client; `Ok(None)` after its FIN.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, StreamError> {
        match self.rx.recv().await {
            Some(data) => Ok(Some(data)),
            None => match self.stream.reset.load(Ordering::Acquire) {
                0 if self.stream.conn_gone.load(Ordering::Acquire) => {
                    Err(StreamError::ConnectionClosed)
                }
                0 => Ok(None),
                status => Err(StreamError::Reset { status }),
            },
        }
    }
}

impl SendHalf {
    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Writes `data` in DATA frames of at most `max_write_frame`; returns once written.
    pub async fn send(&mut self, mut data: Bytes) -> Result<(), StreamError> {
        while !data.is_empty() {
            let piece = data.split_to(data.len().min(self.max_write_frame));
            self.data(false, piece).await?;
        }
        Ok(())
    }

    /// Ends the stream from our side (an empty DATA with FIN); returns once written.
    pub async fn finish(mut self) -> Result<(), StreamError> {
        self.ended = true;
        self.data(true, Bytes::new()).await
    }

    /// Resets the stream with `status` (see [`rst`]).
    pub async fn reset(mut self, status: u32) -> Result<(), StreamError> {
        self.ended = true;
        self.out
            .send(Out::Rst {
                id: self.id,
                status,
            })
            .await
            .map_err(|_| StreamError::ConnectionClosed)
    }

    async fn data(&mut self, fin: bool, data: Bytes) -> Result<(), StreamError> {
        match self.stream.reset.load(Ordering::Acquire) {
            0 => {}
            status => return Err(StreamError::Reset { status }),
        }
        let (done, written) = oneshot::channel();
        let out = Out::Data {
            id: self.id,
            fin,
            data,
            done,
        };
        self.out
            .send(out)
            .await
            .map_err(|_| StreamError::ConnectionClosed)?;
        written.await.map_err(|_| StreamError::ConnectionClosed)
    }
}

impl Drop for SendHalf {
    fn drop(&mut self) {
        if !self.ended && self.stream.reset.load(Ordering::Acquire) == 0 {
            let _ = self.out.try_send(Out::Rst {
                id: self.id,
                status: rst::CANCEL,
            });
        }
    }
}

struct Reader<R> {
    io: ReadHalf<R>,
    decoder: Decoder,
    zlib: headers::Decoder,
    config: Config,
    streams: HashMap<u32, (mpsc::Sender<Bytes>, Arc<StreamState>)>,
    incoming: Option<mpsc::Sender<Incoming>>,
    out: mpsc::Sender<Out>,
    state: Arc<ConnState>,
    /// The id of our last PING (even, as a server's are).
    ping_id: u32,
}

impl<R: AsyncRead> Reader<R> {
    async fn run(mut self) -> Result<(), Error> {
        let result = self.read_all().await;
        if let Err(err) = &result {
            tracing::debug!(%err, "SPDY connection refused a frame");
            let status = match err {
                Error::Io { .. } | Error::Truncated => None,
                Error::Silent(_) => Some(goaway::OK),
                _ => Some(goaway::PROTOCOL_ERROR),
            };
            if let Some(status) = status {
                let _ = self.out.send(Out::GoAway { status }).await;
            }
        }
        for (_, (_, stream)) in self.streams.drain() {
            stream.conn_gone.store(true, Ordering::Release);
        }
        result
    }

    async fn read_all(&mut self) -> Result<(), Error> {
        let mut buf = BytesMut::with_capacity(16 * 1024);
        loop {
            while let Some(event) = self.decoder.decode(&mut buf)? {
                match event {
                    Event::Data(slice) => self.data(slice).await,
                    Event::Control(frame) => self.control(frame).await?,
                }
            }
            buf.reserve(16 * 1024);
            let n = self.read_some(&mut buf).await?;
            if n == 0 {
                return if buf.is_empty() && self.decoder.at_frame_boundary() {
                    Ok(())
                } else {
                    Err(Error::Truncated)
                };
            }
        }
    }

    /// Reads what the socket has, pinging the client while it is quiet and giving up past
    /// the silence limit.
    async fn read_some(&mut self, buf: &mut BytesMut) -> Result<usize, Error> {
        let since = tokio::time::Instant::now();
        let far = std::time::Duration::from_secs(86_400 * 365);
        let every = self.config.ping_interval.unwrap_or(far);
        let limit = self.config.silence_limit.unwrap_or(far);
        let mut next_ping = since + every;
        loop {
            let wake = next_ping.min(since + limit);
            tokio::select! {
                // Cancel-safe: bytes are only taken into `buf` by a completed read.
                read = self.io.read_buf(buf) => return read.map_err(|source| Error::Io { source }),
                () = tokio::time::sleep_until(wake) => {}
            }
            let now = tokio::time::Instant::now();
            if now >= since + limit {
                return Err(Error::Silent(limit));
            }
            if now >= next_ping {
                self.ping_id = self.ping_id.wrapping_add(2);
                // A full queue means the client is not reading either: the limit decides.
                let _ = self.out.try_send(Out::Ping { id: self.ping_id });
                next_ping = now + every;
            }
        }
    }

    async fn data(&mut self, slice: DataSlice) {
        let Some((tx, _)) = self.streams.get(&slice.stream_id) else {
            // A stream we refused, reset or finished reading: its late DATA is dropped.
            return;
        };
        // A receiver that is gone (refused, or its reader dropped) drops the data; whoever
        // dropped the stream's send half reset it.
        let gone = !slice.data.is_empty() && {
            // A copy: the slice is a view of the read buffer, and a small one kept would pin
            // all of it; so a stream's buffer holds at most `stream_buffer × max_slice`.
            let data = Bytes::copy_from_slice(&slice.data);
            let every = self.config.ping_interval;
            let sent = hand(tx, data, every, &self.out, &mut self.ping_id).await;
            sent.is_err()
        };
        if gone || slice.fin {
            self.streams.remove(&slice.stream_id);
        }
    }

    async fn control(&mut self, frame: Frame) -> Result<(), Error> {
        match frame {
            Frame::SynStream {
                stream_id,
                fin,
                headers,
                ..
            } => {
                let headers = self.zlib.decode(&headers)?;
                self.open(stream_id, fin, headers).await?;
            }
            // Keep the inflating context in step, then ignore.
            Frame::SynReply { headers, .. } | Frame::Headers { headers, .. } => {
                self.zlib.decode(&headers)?;
            }
            Frame::RstStream { stream_id, status } => {
                if let Some((_, stream)) = self.streams.remove(&stream_id) {
                    stream.reset.store(status.max(1), Ordering::Release);
                }
            }
            Frame::Ping { id } if !id.is_multiple_of(2) => {
                let _ = self.out.send(Out::Ping { id }).await;
            }
            // No new streams after the client's GOAWAY.
            Frame::GoAway { .. } => self.incoming = None,
            Frame::Ping { .. }
            | Frame::Settings { .. }
            | Frame::WindowUpdate { .. }
            | Frame::Unknown { .. }
            | Frame::Data { .. } => {}
        }
        Ok(())
    }

    async fn open(&mut self, id: u32, fin: bool, headers: Headers) -> Result<(), Error> {
        let last = self.state.last_stream.load(Ordering::Relaxed);
        if id.is_multiple_of(2) || id <= last {
            return Err(Error::Protocol {
                what: "a client stream id must be odd and larger than the last",
            });
        }
        self.state.last_stream.store(id, Ordering::Relaxed);
        let refuse = || Out::Rst {
            id,
            status: rst::REFUSED_STREAM,
        };
        let Some(incoming) = &self.incoming else {
            let _ = self.out.send(refuse()).await;
            return Ok(());
        };
        self.streams.retain(|_, (tx, _)| !tx.is_closed());
        if self.streams.len() >= self.config.max_streams {
            let _ = self.out.send(refuse()).await;
            return Ok(());
        }
        let (tx, rx) = mpsc::channel(self.config.stream_buffer.max(1));
        let stream = Arc::new(StreamState::default());
        if !fin {
            self.streams.insert(id, (tx, stream.clone()));
        }
        let new = Incoming {
            id,
            headers,
            rx,
            stream,
            out: self.out.clone(),
            max_write_frame: self.config.max_write_frame,
        };
        if incoming.send(new).await.is_err() {
            // Nobody takes streams any more.
            self.streams.remove(&id);
            self.incoming = None;
            let _ = self.out.send(refuse()).await;
        }
        Ok(())
    }
}

/// Hands `data` to its stream, waiting while the stream's buffer is full (head-of-line). The
/// client is pinged meanwhile, four times as often as when it is quiet (`every` / 4): the
/// socket is not read while we wait, and a client that went away is found by a ping's write
/// failing, which ends the connection. Its silence does not count here: it is our own stream
/// that has no room.
async fn hand(
    tx: &mpsc::Sender<Bytes>,
    data: Bytes,
    every: Option<std::time::Duration>,
    out: &mpsc::Sender<Out>,
    ping_id: &mut u32,
) -> Result<(), mpsc::error::SendError<Bytes>> {
    let Some(every) = every else {
        return tx.send(data).await;
    };
    let every = every / 4;
    let send = tx.send(data);
    tokio::pin!(send);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            sent = &mut send => return sent,
            _ = ping.tick() => {
                *ping_id = ping_id.wrapping_add(2);
                let _ = out.try_send(Out::Ping { id: *ping_id });
            }
        }
    }
}

async fn writer<W: AsyncWrite>(
    mut io: WriteHalf<W>,
    mut rx: mpsc::Receiver<Out>,
    state: Arc<ConnState>,
) -> Result<(), Error> {
    let mut zlib = headers::Encoder::new()?;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut acks = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        // Batch what is already queued into one write.
        while let Some(out) = next.take() {
            let last = state.last_stream.load(Ordering::Relaxed);
            encode(out, &mut zlib, &mut buf, &mut acks, last)?;
            if buf.len() < 64 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        io.write_all(&buf)
            .await
            .map_err(|source| Error::Io { source })?;
        io.flush().await.map_err(|source| Error::Io { source })?;
        buf.clear();
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
    io.shutdown().await.map_err(|source| Error::Io { source })
}

fn encode(
    out: Out,
    zlib: &mut headers::Encoder,
    buf: &mut BytesMut,
    acks: &mut Vec<oneshot::Sender<()>>,
    last_stream: u32,
) -> Result<(), Error> {
    let frame = match out {
        Out::Reply { id } => Frame::SynReply {
            stream_id: id,
            fin: false,
            headers: zlib.encode(&Headers::new())?,
        },
        Out::Data {
            id,
            fin,
            data,
            done,
        } => {
            acks.push(done);
            Frame::Data {
                stream_id: id,
                fin,
                data,
            }
        }
        Out::Rst { id, status } => Frame::RstStream {
            stream_id: id,
            status,
        },
        Out::Ping { id } => Frame::Ping { id },
        Out::GoAway { status } => Frame::GoAway {
            last_good_stream_id: last_stream,
            status,
        },
    };
    frame.encode(buf)?;
    Ok(())
}

//! exec and attach over SPDY/3.1 (pure): the streams kubectl ≤ 1.29 — and kubectl 1.30+ with
//! `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, or after a refused WebSocket — opens on the
//! upgraded connection once the server answered `101` with `v4.channel.k8s.io`, gathered as
//! the kubelet gathers them, and the resize stream's JSON.
//!
//! client-go (`tools/remotecommand/v2.go`, `v3.go`, `v4.go`) opens one stream per role, each
//! with a `streamtype` header, in this order: `error`, then `stdin`, `stdout`, `stderr` (not
//! with a tty) as the request asked, then `resize` with a tty. It waits for each stream's
//! SYN_REPLY before opening the next. Then:
//! - stdin's bytes go on `stdin`; its end is the client's FIN (SPDY half-closes, so v4 over
//!   SPDY can end stdin, which v4 over a WebSocket cannot);
//! - `resize` carries terminal sizes as a sequence of JSON objects (Go's `json.Encoder`:
//!   `{"Width":80,"Height":24}` and a newline, one per change);
//! - the server writes the process's output on `stdout`/`stderr` and FINs them; kubectl reads
//!   both to their end, then reads `error` to its end: empty or a `Success` `Status` is a
//!   success, a `Failure` with reason `NonZeroExitCode` exits with that code, any other
//!   `Failure` prints its message.
//!
//! The kubelet (`pkg/kubelet/cri/streaming/remotecommand/httpstream.go`) expects exactly the
//! streams the request's query asked for, each once, within the stream-creation timeout
//! (30 s); past it the connection is closed.

use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use crate::channel::TerminalSize;
use crate::spdy::headers::Headers;

#[cfg(test)]
mod tests;

/// The header naming a stream's role.
pub const STREAM_TYPE: &str = "streamtype";
/// How long the client has to open every stream the request asked for (the kubelet's
/// stream-creation timeout).
pub const STREAMS_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest resize message kept while its end has not come (`{"Width":65535,"Height":65535}`
/// is 30 bytes).
pub const MAX_RESIZE: usize = 256;

/// An exec or attach stream's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamType {
    /// The end: the server writes the `Status` here.
    Error,
    /// The process's stdin, from the client.
    Stdin,
    /// The process's stdout, to the client.
    Stdout,
    /// The process's stderr, to the client (not with a tty).
    Stderr,
    /// Terminal sizes, from the client (tty only).
    Resize,
}

impl StreamType {
    /// Every role, in the order kubectl opens them.
    pub const ALL: [StreamType; 5] = [
        StreamType::Error,
        StreamType::Stdin,
        StreamType::Stdout,
        StreamType::Stderr,
        StreamType::Resize,
    ];

    /// The header value.
    pub fn name(self) -> &'static str {
        match self {
            StreamType::Error => "error",
            StreamType::Stdin => "stdin",
            StreamType::Stdout => "stdout",
            StreamType::Stderr => "stderr",
            StreamType::Resize => "resize",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a stream (or the resize stream's content) was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// No `streamtype`, or not one of the five roles.
    #[error("invalid stream type {value:?}")]
    StreamType {
        /// The header's value (cut to 64 characters).
        value: Option<String>,
    },
    /// A role the request did not ask for (e.g. `stdin` without `stdin=true`).
    #[error("the request did not ask for a {} stream", .0.name())]
    NotExpected(StreamType),
    /// A second stream of one role.
    #[error("a {} stream is already open", .0.name())]
    AlreadyOpen(StreamType),
    /// A resize message that is not a terminal size.
    #[error("resize stream: not a terminal size: {0}")]
    BadResize(String),
    /// A resize message longer than [`MAX_RESIZE`].
    #[error("resize stream: a message of more than {MAX_RESIZE} bytes")]
    ResizeTooLarge,
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads a stream's role from its headers.
pub fn stream_type(headers: &Headers) -> Result<StreamType> {
    let value = headers.get(STREAM_TYPE);
    StreamType::ALL
        .into_iter()
        .find(|t| Some(t.name()) == value)
        .ok_or_else(|| Error::StreamType {
            value: value.map(|v| v.chars().take(64).collect()),
        })
}

/// The streams a request asks for, as its query says (and as the kubelet counts them):
/// always `error`; `stdin`, `stdout` as asked; `stderr` as asked unless there is a tty;
/// `resize` with a tty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wanted {
    /// `stdin=true`.
    pub stdin: bool,
    /// `stdout=true`.
    pub stdout: bool,
    /// `stderr=true`.
    pub stderr: bool,
    /// `tty=true`.
    pub tty: bool,
}

impl Wanted {
    /// Whether a stream of `t` belongs to this request.
    pub fn wants(self, t: StreamType) -> bool {
        match t {
            StreamType::Error => true,
            StreamType::Stdin => self.stdin,
            StreamType::Stdout => self.stdout,
            StreamType::Stderr => self.stderr && !self.tty,
            StreamType::Resize => self.tty,
        }
    }
}

/// Every stream of one exec or attach, gathered.
#[derive(Debug, PartialEq, Eq)]
pub struct Streams<S> {
    /// Where the `Status` goes.
    pub error: S,
    /// The process's stdin, if asked for.
    pub stdin: Option<S>,
    /// Its stdout, if asked for.
    pub stdout: Option<S>,
    /// Its stderr, if asked for (never with a tty).
    pub stderr: Option<S>,
    /// Terminal sizes, with a tty.
    pub resize: Option<S>,
}

/// What became of an added stream.
#[derive(Debug)]
pub enum Added<S> {
    /// More are to come.
    Waiting,
    /// It was the last one asked for.
    Complete(Streams<S>),
    /// It was refused; the caller resets it.
    Refused(S, Error),
}

/// The streams of one exec or attach connection while the client opens them, with the
/// kubelet's deadline over a clock the caller passes.
#[derive(Debug)]
pub struct Gathering<S> {
    wanted: Wanted,
    got: [Option<S>; 5],
    deadline: Instant,
}

impl<S> Gathering<S> {
    /// Starts gathering the streams `wanted` asks for at `now`; they must all be open by
    /// `now + timeout`.
    pub fn new(wanted: Wanted, now: Instant, timeout: Duration) -> Gathering<S> {
        Gathering {
            wanted,
            got: [None, None, None, None, None],
            deadline: now + timeout,
        }
    }

    /// When the client's time to open its streams runs out.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Adds a stream of role `t`.
    pub fn add(&mut self, t: StreamType, stream: S) -> Added<S> {
        if !self.wanted.wants(t) {
            return Added::Refused(stream, Error::NotExpected(t));
        }
        let slot = &mut self.got[t.index()];
        if slot.is_some() {
            return Added::Refused(stream, Error::AlreadyOpen(t));
        }
        *slot = Some(stream);
        let missing = StreamType::ALL
            .into_iter()
            .any(|t| self.wanted.wants(t) && self.got[t.index()].is_none());
        if missing {
            return Added::Waiting;
        }
        let [error, stdin, stdout, stderr, resize] = std::mem::take(&mut self.got);
        match error {
            Some(error) => Added::Complete(Streams {
                error,
                stdin,
                stdout,
                stderr,
                resize,
            }),
            // The error stream is always wanted, so it is here when nothing is missing.
            None => Added::Waiting,
        }
    }
}

/// The resize stream's content, read as it comes: a sequence of JSON terminal sizes.
#[derive(Debug, Default)]
pub struct ResizeReader {
    buf: BytesMut,
}

impl ResizeReader {
    /// Takes `data` from the stream and returns the sizes it completes, in order.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<TerminalSize>> {
        self.buf.extend_from_slice(data);
        let mut sizes = Vec::new();
        loop {
            let mut stream =
                serde_json::Deserializer::from_slice(&self.buf).into_iter::<TerminalSize>();
            match stream.next() {
                Some(Ok(size)) => {
                    let used = stream.byte_offset();
                    self.buf.advance(used);
                    sizes.push(size);
                }
                // Only whitespace left, or a message whose end has not come yet.
                None => {
                    self.buf.clear();
                    break;
                }
                Some(Err(e)) if e.is_eof() => {
                    if self.buf.len() > MAX_RESIZE {
                        return Err(Error::ResizeTooLarge);
                    }
                    break;
                }
                Some(Err(e)) => return Err(Error::BadResize(e.to_string())),
            }
        }
        Ok(sizes)
    }
}

//! A simulated process's standard streams: stdin from the session (or a pipe, a file),
//! stdout and stderr to the session (or a pipe, a file). Writing to the session waits for
//! room, which the agent makes only within the hub's credit: `cat` of a large file streams,
//! and a client that stops reading stalls the command, not the agent's memory.

use crate::backend::session::{Channel, Input, Output};
use bytes::Bytes;
use tokio::sync::mpsc;

/// Largest piece written to the session at once.
const PIECE: usize = 32 * 1024;

/// Most bytes a pipe, a redirected stream or a command reading its stdin whole (`tail`,
/// `tar x`) holds: 8 MiB, so a session's commands cannot make the agent hold more than a few
/// of these however much the client sends (past it: "No space left on device").
pub const MAX_BUFFER: usize = 8 * 1024 * 1024;

/// The session's end of a simulated process: the client's input and where outputs go.
pub struct Term {
    /// Outputs for the session.
    pub out: mpsc::Sender<Output>,
    /// The client's input.
    pub input: mpsc::Receiver<Input>,
    /// The client's stdin ended.
    pub eof: bool,
    /// A terminal (`kubectl exec -t`), simulated as a pty's line discipline in its default
    /// modes: stderr goes where stdout goes (one stream), `\n` is written as `\r\n`, typed
    /// `\r` is read as `\n` and what is typed is echoed. No job control, no line editing.
    pub tty: bool,
}

impl Term {
    /// The session's next stdin bytes (`None` at its end); resizes are taken and dropped (no
    /// line discipline is simulated).
    pub async fn read(&mut self) -> Option<Bytes> {
        while !self.eof {
            match self.input.recv().await {
                Some(Input::Data(b)) if !b.is_empty() && self.tty => {
                    let typed: Vec<u8> = b
                        .iter()
                        .map(|&c| if c == b'\r' { b'\n' } else { c })
                        .collect();
                    self.write(Channel::Stdout, &typed).await;
                    return Some(Bytes::from(typed));
                }
                Some(Input::Data(b)) if !b.is_empty() => return Some(b),
                Some(Input::Data(_) | Input::Resize { .. }) => {}
                Some(Input::End) | None => self.eof = true,
            }
        }
        None
    }

    async fn write(&self, channel: Channel, data: &[u8]) {
        let translated;
        let (channel, data) = if self.tty {
            translated = onlcr(data);
            (Channel::Stdout, &translated[..])
        } else {
            (channel, data)
        };
        for piece in data.chunks(PIECE) {
            // A session whose client went reads no more; the command runs to its end.
            let _ = self
                .out
                .send(Output::Data(channel, Bytes::copy_from_slice(piece)))
                .await;
        }
    }
}

/// Output through a terminal: each `\n` as `\r\n`.
fn onlcr(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 16);
    for &c in data {
        if c == b'\n' {
            out.push(b'\r');
        }
        out.push(c);
    }
    out
}

/// Where a process reads stdin from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The session.
    Term,
    /// A pipe's or a file's bytes, read once.
    Bytes(Bytes),
}

/// Where a process writes one of its outputs.
#[derive(Debug)]
pub enum Sink {
    /// The session, on this channel.
    Term(Channel),
    /// Kept for a pipe or a file (bounded by [`MAX_BUFFER`]; `true` once over it).
    Buffer(Vec<u8>, bool),
}

impl Sink {
    /// An empty buffer.
    pub fn buffer() -> Sink {
        Sink::Buffer(Vec::new(), false)
    }

    /// A sink for a child writing where this one does: the session itself, or a buffer
    /// appended to this one after the child ran.
    pub fn child(&self) -> Sink {
        match self {
            Sink::Term(channel) => Sink::Term(*channel),
            Sink::Buffer(..) => Sink::buffer(),
        }
    }
}

/// One process's streams.
pub struct Io<'t> {
    /// The session.
    pub term: &'t mut Term,
    /// stdin.
    pub stdin: Source,
    /// stdout.
    pub stdout: Sink,
    /// stderr.
    pub stderr: Sink,
}

impl<'t> Io<'t> {
    /// Streams over the session: stdin, stdout and stderr its channels.
    pub fn session(term: &'t mut Term) -> Self {
        Io {
            term,
            stdin: Source::Term,
            stdout: Sink::Term(Channel::Stdout),
            stderr: Sink::Term(Channel::Stderr),
        }
    }

    /// The next stdin bytes (`None` at its end).
    pub async fn read(&mut self) -> Option<Bytes> {
        match &mut self.stdin {
            Source::Term => self.term.read().await,
            Source::Bytes(b) if b.is_empty() => None,
            Source::Bytes(b) => Some(std::mem::take(b)),
        }
    }

    /// stdin whole, or `None` past `limit` bytes.
    pub async fn read_all(&mut self, limit: usize) -> Option<Vec<u8>> {
        let mut all = Vec::new();
        while let Some(b) = self.read().await {
            if all.len() + b.len() > limit {
                return None;
            }
            all.extend_from_slice(&b);
        }
        Some(all)
    }

    async fn write(term: &Term, sink: &mut Sink, data: &[u8]) {
        match sink {
            Sink::Term(channel) => term.write(*channel, data).await,
            Sink::Buffer(buf, over) => {
                if buf.len() + data.len() > MAX_BUFFER {
                    *over = true;
                } else {
                    buf.extend_from_slice(data);
                }
            }
        }
    }

    /// Writes to stdout.
    pub async fn out(&mut self, data: impl AsRef<[u8]>) {
        Self::write(self.term, &mut self.stdout, data.as_ref()).await;
    }

    /// Writes to stderr.
    pub async fn err(&mut self, data: impl AsRef<[u8]>) {
        Self::write(self.term, &mut self.stderr, data.as_ref()).await;
    }

    /// Streams for a child: stdin handed over whole, outputs where this one writes them
    /// (collected by [`Io::absorb`]).
    pub fn child(&mut self) -> Io<'_> {
        let stdin = match &mut self.stdin {
            Source::Term => Source::Term,
            Source::Bytes(b) => Source::Bytes(std::mem::take(b)),
        };
        Io {
            stdout: self.stdout.child(),
            stderr: self.stderr.child(),
            stdin,
            term: self.term,
        }
    }

    /// Appends what a child kept in buffers to this one's outputs.
    pub async fn absorb(&mut self, stdout: Sink, stderr: Sink) {
        if let Sink::Buffer(b, _) = stdout {
            self.out(b).await;
        }
        if let Sink::Buffer(b, _) = stderr {
            self.err(b).await;
        }
    }
}

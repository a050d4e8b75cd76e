//! A simulated process's standard streams: stdin from the session (or a pipe, a file),
//! stdout and stderr to the session (or a pipe, a file). Writing to the session waits for
//! room, which the agent makes only within the hub's credit: `cat` of a large file streams,
//! and a client that stops reading stalls the command, not the agent's memory.

use crate::backend::session::{Channel, Input, Output};
use bytes::Bytes;
use tokio::sync::mpsc;

/// Largest piece written to the session at once.
const PIECE: usize = 32 * 1024;

/// Most bytes a pipe or a redirected stream holds (the command's output is kept whole).
pub const MAX_BUFFER: usize = super::fs::POD_LAYER_BYTES;

/// The session's end of a simulated process: the client's input and where outputs go.
pub struct Term {
    /// Outputs for the session.
    pub out: mpsc::Sender<Output>,
    /// The client's input.
    pub input: mpsc::Receiver<Input>,
    /// The client's stdin ended.
    pub eof: bool,
}

impl Term {
    /// The session's next stdin bytes (`None` at its end); resizes are taken and dropped (no
    /// line discipline is simulated).
    pub async fn read(&mut self) -> Option<Bytes> {
        while !self.eof {
            match self.input.recv().await {
                Some(Input::Data(b)) if !b.is_empty() => return Some(b),
                Some(Input::Data(_) | Input::Resize { .. }) => {}
                Some(Input::End) | None => self.eof = true,
            }
        }
        None
    }

    async fn write(&self, channel: Channel, data: &[u8]) {
        for piece in data.chunks(PIECE) {
            // A session whose client went reads no more; the command runs to its end.
            let _ = self
                .out
                .send(Output::Data(channel, Bytes::copy_from_slice(piece)))
                .await;
        }
    }
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

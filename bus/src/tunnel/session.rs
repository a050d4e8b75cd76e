//! What each side of a session may send, and when (pure): the checks both ends run on every
//! frame of an exec, attach or port-forward call once it is a session
//! ([`flotilla_api::v1::TunnelRequest::session`]).
//!
//! ```text
//! agent → hub: credit, then response — 101 opens the session; any other status is an ordinary
//!              answer (data… end) — then chunks on the channels it sends (exec/attach: 1
//!              stdout, 2 stderr, those the client asked for; port-forward: 0), a close per
//!              channel, exit once (exec/attach; a port-forward's failure), end (after the exit,
//!              or a port-forward's close of channel 0)
//! hub → agent: after the agent's 101, chunks on channel 0 (stdin, when asked for; a
//!              port-forward's data), its close, resizes (tty only)
//! both:        credit, ping and cancel at any time
//! ```
//!
//! Everything a spoke sends is hostile: a chunk on a channel its side or kind does not send,
//! after that channel's close, before the 101 or after the exit, a second exit or response, a
//! resize from an agent, an end before the exit — each is a [`Violation`] that ends the call.
//! Chunks count against the receiver's credit as data does ([`super::RecvWindow`]): the
//! windows bound what each end holds, these rules bound what it must believe. The hub's
//! resizes go through a [`ResizeGate`] (at most one per [`RESIZE_INTERVAL`], the latest size
//! winning), so a resize storm cannot overflow the agent's mailbox.

use super::Frame;
use flotilla_api::v1::{TunnelSession, tunnel_session};
use std::fmt;
use std::time::{Duration, Instant};
use thiserror::Error;

#[cfg(test)]
mod tests;

/// exec/attach: the client's stdin (hub → agent).
pub const STDIN: u32 = 0;
/// exec/attach: the process's stdout (agent → hub).
pub const STDOUT: u32 = 1;
/// exec/attach: the process's stderr (agent → hub).
pub const STDERR: u32 = 2;
/// port-forward: the connection's bytes, both ways.
pub const DATA: u32 = 0;
/// The hub passes on at most one resize per this interval (the latest size).
pub const RESIZE_INTERVAL: Duration = Duration::from_millis(250);
/// Most arguments an exec command may have.
pub const MAX_COMMAND_ARGS: usize = 4096;
/// Longest container name (a DNS label is 63; room for what an API server would refuse).
pub const MAX_CONTAINER_LEN: usize = 253;
/// Longest command line in a log line (the command is audited, as an API server's audit log
/// records the query; cut beyond this).
pub const MAX_LOGGED_COMMAND: usize = 256;

/// What a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A command run in a container.
    Exec,
    /// The container's main process.
    Attach,
    /// One TCP connection to a pod's port.
    PortForward,
}

impl Kind {
    /// Its name in logs, metrics and errors (the pod subresource).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Exec => "exec",
            Kind::Attach => "attach",
            Kind::PortForward => "portforward",
        }
    }

    fn to_wire(self) -> tunnel_session::Kind {
        match self {
            Kind::Exec => tunnel_session::Kind::Exec,
            Kind::Attach => tunnel_session::Kind::Attach,
            Kind::PortForward => tunnel_session::Kind::PortForward,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which end sends the frames a [`Rules`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The hub (the client's side).
    Hub,
    /// The agent (the pod's side).
    Agent,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Hub => "hub",
            Side::Agent => "agent",
        })
    }
}

/// The standard streams an exec or attach client opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Streams {
    /// The client sends stdin (channel 0).
    pub stdin: bool,
    /// The client reads stdout (channel 1).
    pub stdout: bool,
    /// The client reads stderr (channel 2); never with a tty, whose output is one stream.
    pub stderr: bool,
    /// A terminal: resizes allowed.
    pub tty: bool,
}

/// A session as the hub asks for it (the exec/attach/port-forward query, parsed by the hub).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// What it is.
    pub kind: Kind,
    /// exec/attach: the container (`None`: the pod's default one).
    pub container: Option<String>,
    /// exec: the command and its arguments (empty otherwise).
    pub command: Vec<String>,
    /// exec/attach: the streams (all off for a port-forward).
    pub streams: Streams,
    /// port-forward: the pod's port (0 otherwise).
    pub port: u16,
}

impl Spec {
    /// The session from its wire form, refusing what no API server would serve: an unknown
    /// kind, an exec without a command, attach with one, no stream at all, a tty with stderr,
    /// a port-forward without a port.
    pub fn from_wire(s: &TunnelSession) -> Result<Spec, Violation> {
        let bad = |why: &'static str| Err(Violation::Request(why));
        let kind = match tunnel_session::Kind::try_from(s.kind) {
            Ok(tunnel_session::Kind::Exec) => Kind::Exec,
            Ok(tunnel_session::Kind::Attach) => Kind::Attach,
            Ok(tunnel_session::Kind::PortForward) => Kind::PortForward,
            _ => return bad("unknown session kind"),
        };
        if s.container.len() > MAX_CONTAINER_LEN {
            return bad("container name too long");
        }
        let streams = Streams {
            stdin: s.stdin,
            stdout: s.stdout,
            stderr: s.stderr,
            tty: s.tty,
        };
        if kind == Kind::PortForward {
            let Ok(port) = u16::try_from(s.port) else {
                return bad("port over 65535");
            };
            if port == 0 {
                return bad("port-forward without a port");
            }
            if !s.command.is_empty() || !s.container.is_empty() || streams != Streams::default() {
                return bad("port-forward with exec fields");
            }
            return Ok(Spec {
                kind,
                container: None,
                command: Vec::new(),
                streams,
                port,
            });
        }
        match kind {
            Kind::Exec if s.command.is_empty() => return bad("exec without a command"),
            Kind::Exec if s.command.len() > MAX_COMMAND_ARGS => {
                return bad("exec with too many arguments");
            }
            Kind::Attach if !s.command.is_empty() => return bad("attach with a command"),
            _ => {}
        }
        if !(streams.stdin || streams.stdout || streams.stderr) {
            return bad("no stream: one of stdin, stdout or stderr is required");
        }
        if streams.tty && streams.stderr {
            return bad("a tty has no separate stderr");
        }
        if s.port != 0 {
            return bad("exec or attach with a port");
        }
        Ok(Spec {
            kind,
            container: (!s.container.is_empty()).then(|| s.container.clone()),
            command: s.command.clone(),
            streams,
            port: 0,
        })
    }

    /// Its wire form.
    pub fn to_wire(&self) -> TunnelSession {
        TunnelSession {
            kind: self.kind.to_wire() as i32,
            container: self.container.clone().unwrap_or_default(),
            command: self.command.clone(),
            stdin: self.streams.stdin,
            stdout: self.streams.stdout,
            stderr: self.streams.stderr,
            tty: self.streams.tty,
            port: u32::from(self.port),
        }
    }

    /// The channels `side` sends on, as a bit per channel.
    fn sends(&self, side: Side) -> u8 {
        let bit = |on: bool, channel: u32| if on { 1u8 << channel } else { 0 };
        match (self.kind, side) {
            (Kind::PortForward, _) => bit(true, DATA),
            (_, Side::Hub) => bit(self.streams.stdin, STDIN),
            (_, Side::Agent) => bit(self.streams.stdout, STDOUT) | bit(self.streams.stderr, STDERR),
        }
    }
}

/// The pod a session's path names, `(namespace, name)`: the path must be exactly
/// `/api/v1/namespaces/{namespace}/pods/{name}/{subresource}` with `kind`'s subresource.
pub fn pod_of(path: &str, kind: Kind) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let &[namespace, "pods", pod, subresource] = parts.as_slice() else {
        return None;
    };
    let name = |s: &str| !s.is_empty() && s.len() <= 253 && s != "." && s != "..";
    (subresource == kind.name() && name(namespace) && name(pod)).then_some((namespace, pod))
}

/// An exec command as the logs of both ends show it: joined with spaces, cut to
/// [`MAX_LOGGED_COMMAND`] characters (and `…`), its control characters escaped
/// ([`loggable`]).
pub fn command_line(command: &[String]) -> String {
    let line = command.join(" ");
    if line.chars().count() <= MAX_LOGGED_COMMAND {
        return loggable(&line);
    }
    let mut cut: String = line.chars().take(MAX_LOGGED_COMMAND).collect();
    cut.push('…');
    loggable(&cut)
}

/// A caller's text (a command, a container's name) as a log field: control characters
/// escaped (`\n`, `\u{1b}`), so a caller cannot end the audit line and forge the next one.
pub fn loggable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A session frame its sender may not send now: the call ends.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    /// The session asked for is not one an API server serves.
    #[error("invalid session request: {0}")]
    Request(&'static str),
    /// A session frame before the agent's 101.
    #[error("a {frame} frame before the session opened")]
    NotOpen {
        /// The frame's name.
        frame: &'static str,
    },
    /// A frame this side never sends in a session.
    #[error("a {frame} frame from the {from} in a session")]
    Wrong {
        /// The frame's name.
        frame: &'static str,
        /// Who sent it.
        from: Side,
    },
    /// A chunk on a channel its sender does not send.
    #[error("a chunk on channel {channel}, which the {from} does not send in this {kind} session")]
    Channel {
        /// The channel.
        channel: u32,
        /// Who sent it.
        from: Side,
        /// The session's kind.
        kind: Kind,
    },
    /// A chunk on a channel its sender closed.
    #[error("a chunk on channel {channel} after its close")]
    AfterClose {
        /// The channel.
        channel: u32,
    },
    /// A close of a channel that is not open (never was, or closed already).
    #[error("a close of channel {channel}, which is not open")]
    Close {
        /// The channel.
        channel: u32,
    },
    /// A frame after the exit (only the end may follow it).
    #[error("a {frame} frame after the exit")]
    AfterExit {
        /// The frame's name.
        frame: &'static str,
    },
    /// A second response or exit.
    #[error("a second {frame} frame")]
    Twice {
        /// The frame's name.
        frame: &'static str,
    },
    /// A resize in a session without a terminal.
    #[error("a resize in a session without a tty")]
    NotTty,
    /// The end of a session that has not said how it ended.
    #[error("the end of a {kind} session before its exit")]
    EarlyEnd {
        /// The session's kind.
        kind: Kind,
    },
    /// A frame after the end.
    #[error("a {frame} frame after the end")]
    AfterEnd {
        /// The frame's name.
        frame: &'static str,
    },
}

/// Where a session is, as the receiver of one side's frames sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the agent's response head.
    Opening,
    /// The agent answered 101: full duplex.
    Open,
    /// The agent answered another status: an ordinary answer (data, end).
    Plain,
    /// The agent sent its exit: only the end may follow.
    Exited,
    /// The agent sent its end.
    Ended,
}

/// What one side may still send in a session: the receiver checks each of its frames (after
/// the sequence check) with [`Rules::check`] — the hub the agent's, the agent the hub's.
#[derive(Debug, Clone)]
pub struct Rules {
    kind: Kind,
    from: Side,
    tty: bool,
    /// The channels the sender may send on, a bit per channel.
    sends: u8,
    /// Those it has not closed yet.
    open: u8,
    phase: Phase,
}

impl Rules {
    /// The rules for what `from` sends in the session `spec`, before the agent's response.
    pub fn new(spec: &Spec, from: Side) -> Self {
        let sends = spec.sends(from);
        Self {
            kind: spec.kind,
            from,
            tty: spec.streams.tty,
            sends,
            open: sends,
            phase: Phase::Opening,
        }
    }

    /// The agent answered 101 (for the hub's frames, checked at the agent: from now on the hub
    /// may send chunks, closes and resizes).
    pub fn opened(&mut self) {
        if self.phase == Phase::Opening {
            self.phase = Phase::Open;
        }
    }

    /// Whether the session is open (the agent answered 101 and has not ended it).
    pub fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Open | Phase::Exited)
    }

    /// Whether the sender may still send on `channel` (it sends on it and has not closed it).
    pub fn sending(&self, channel: u32) -> bool {
        channel < 8 && self.open & (1 << channel) != 0
    }

    /// Checks one frame of the sender and takes it into account.
    pub fn check(&mut self, frame: &Frame) -> Result<(), Violation> {
        let name = frame.name();
        match frame {
            Frame::Credit(_) | Frame::Ping | Frame::Cancel(_) => return Ok(()),
            Frame::Request(_) => return Err(self.wrong(name)),
            _ => {}
        }
        if self.phase == Phase::Ended {
            return Err(Violation::AfterEnd { frame: name });
        }
        match self.from {
            Side::Agent => self.check_agent(frame, name),
            Side::Hub => self.check_hub(frame, name),
        }
    }

    fn wrong(&self, frame: &'static str) -> Violation {
        Violation::Wrong {
            frame,
            from: self.from,
        }
    }

    /// An agent's frame (the hub's check).
    fn check_agent(&mut self, frame: &Frame, name: &'static str) -> Result<(), Violation> {
        match (frame, self.phase) {
            (Frame::Response(head), Phase::Opening) => {
                self.phase = if head.status == 101 {
                    Phase::Open
                } else {
                    Phase::Plain
                };
                Ok(())
            }
            (Frame::Response(_), _) => Err(Violation::Twice { frame: name }),
            (Frame::Resize { .. }, _) => Err(self.wrong(name)),
            (_, Phase::Opening) => Err(Violation::NotOpen { frame: name }),
            // A refused session is an ordinary answer.
            (Frame::Data(_), Phase::Plain) => Ok(()),
            (Frame::End, Phase::Plain | Phase::Exited) => {
                self.phase = Phase::Ended;
                Ok(())
            }
            (_, Phase::Plain) | (Frame::Data(_), _) => Err(self.wrong(name)),
            (Frame::End, _) if self.kind == Kind::PortForward && self.open == 0 => {
                self.phase = Phase::Ended;
                Ok(())
            }
            (Frame::End, _) => Err(Violation::EarlyEnd { kind: self.kind }),
            (Frame::Exit(_), Phase::Open) => {
                self.phase = Phase::Exited;
                self.open = 0;
                Ok(())
            }
            (Frame::Exit(_), _) => Err(Violation::Twice { frame: name }),
            (_, Phase::Exited) => Err(Violation::AfterExit { frame: name }),
            (Frame::Chunk { channel, .. }, _) => self.chunk(*channel),
            (Frame::Close(channel), _) => self.close(*channel),
            _ => Err(self.wrong(name)),
        }
    }

    /// A hub's frame (the agent's check).
    fn check_hub(&mut self, frame: &Frame, name: &'static str) -> Result<(), Violation> {
        match frame {
            Frame::Chunk { .. } | Frame::Close(_) | Frame::Resize { .. }
                if self.phase == Phase::Opening =>
            {
                Err(Violation::NotOpen { frame: name })
            }
            Frame::Chunk { channel, .. } => self.chunk(*channel),
            Frame::Close(channel) => self.close(*channel),
            Frame::Resize { .. } if self.tty => Ok(()),
            Frame::Resize { .. } => Err(Violation::NotTty),
            // Sessions carry no request body; responses and exits are the agent's.
            _ => Err(self.wrong(name)),
        }
    }

    fn chunk(&self, channel: u32) -> Result<(), Violation> {
        if channel >= 8 || self.sends & (1 << channel) == 0 {
            return Err(Violation::Channel {
                channel,
                from: self.from,
                kind: self.kind,
            });
        }
        if !self.sending(channel) {
            return Err(Violation::AfterClose { channel });
        }
        Ok(())
    }

    fn close(&mut self, channel: u32) -> Result<(), Violation> {
        if !self.sending(channel) {
            return Err(Violation::Close { channel });
        }
        self.open &= !(1 << channel);
        Ok(())
    }
}

/// The resizes a hub passes on to the agent: at most one per [`RESIZE_INTERVAL`], the latest
/// size winning (kubectl sends one per `SIGWINCH`; the agent's mailbox is bounded).
#[derive(Debug, Default, Clone)]
pub struct ResizeGate {
    last: Option<Instant>,
    kept: Option<(u16, u16)>,
}

impl ResizeGate {
    /// The client asked for `size` at `now`: `Some` to send now, or `None` and kept for
    /// [`ResizeGate::take_due`] (replacing one kept before).
    pub fn offer(&mut self, size: (u16, u16), now: Instant) -> Option<(u16, u16)> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < RESIZE_INTERVAL => {
                self.kept = Some(size);
                None
            }
            _ => {
                self.last = Some(now);
                self.kept = None;
                Some(size)
            }
        }
    }

    /// When the kept size may go (`None`: nothing is kept).
    pub fn due_at(&self) -> Option<Instant> {
        self.kept?;
        self.last.map(|last| last + RESIZE_INTERVAL)
    }

    /// The kept size, when it may go at `now`.
    pub fn take_due(&mut self, now: Instant) -> Option<(u16, u16)> {
        let due = self.due_at()?;
        if now < due {
            return None;
        }
        self.last = Some(now);
        self.kept.take()
    }
}

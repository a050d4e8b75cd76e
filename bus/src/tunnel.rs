//! The cluster proxy's wire protocol: one Kubernetes API call streamed between the hub and an
//! agent as [`TunnelFrame`]s, each the payload of a CloudEvent under NATS' `max_payload`.
//!
//! ```text
//! hub                                   agent
//!  ── request (window W, max_chunk) ──▶  seq 0
//!  ◀── credit (request body window) ──   seq 0: the agent has the call (the hub's open timeout)
//!  ── data … end ─────────────────────▶  (only when has_body, within the agent's credit)
//!  ◀── response (status, headers) ─────
//!  ◀── data … ─────────────────────────  at most W data frames beyond the hub's last credit
//!  ── credit ─────────────────────────▶  as the hub's client takes the data
//!  ◀── end ────────────────────────────
//! ```
//!
//! A *session* (exec, attach, port-forward: [`TunnelRequest::session`] set) is full duplex
//! after the response head: the agent answers `101` once its backend opened the session, then
//! [`Frame::Chunk`]s flow both ways, each within its receiver's credit exactly as `data`,
//! [`Frame::Close`] half-closes a channel, [`Frame::Resize`] goes to a tty, and exec/attach end
//! with [`Frame::Exit`] then `end`. [`session`] says what each side may send when (pure).
//!
//! Either side may `cancel` (the HTTP client went away, a timeout, a protocol violation); both
//! `ping` every open call at [`KEEPALIVE`], and a side that hears nothing on a call for
//! [`idle_timeout`] ends it — so a watch or `logs -f` whose client or agent vanished does not
//! stay open on the other side.
//!
//! Everything from a spoke is hostile: [`decode`] checks the event type, the cluster, the
//! stream id's shape and the size of each data frame, chunk, exit and resize; [`SeqCheck`]
//! ends a call whose frames skip or repeat; [`RecvWindow`] ends one whose sender ignores its
//! credit. Frames go hub → agent on
//! [`crate::subjects::kubeapi`] and agent → hub on [`crate::subjects::kubeapi_back`], a
//! subject built from the hub's own token: the spoke never names where the hub reads.

use crate::envelope::{Action, Direction, EnvelopeError, Event, EventType};
use flotilla_api::v1::{
    TunnelCancel, TunnelChunk, TunnelClose, TunnelCredit, TunnelEnd, TunnelExit, TunnelFrame,
    TunnelPing, TunnelRequest, TunnelResize, TunnelResponse, tunnel_frame,
};
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// How often each side pings an open call.
pub const KEEPALIVE: Duration = Duration::from_secs(5);
/// Data frames a receiver allows beyond what it has consumed (the default window).
pub const DEFAULT_WINDOW: u32 = 8;
/// Largest data frame by default: with [`DEFAULT_WINDOW`], 1 MiB in flight per call.
pub const DEFAULT_MAX_CHUNK: u32 = 128 * 1024;
/// Room kept in every event for the envelope and the frame's other fields.
pub const FRAME_OVERHEAD: usize = 4096;
/// Largest window a sender may ask for (bounds what a receiver buffers).
pub const MAX_WINDOW: u32 = 64;
/// Largest request head (method, path, query, headers): Kubernetes API servers refuse far
/// smaller ones.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest exit `Status` (JSON) an agent may send: what the hub parses of it is bounded.
pub const MAX_EXIT_BYTES: usize = 16 * 1024;

pub mod session;

/// A side that hears nothing on a call for this long ends it (three keepalives).
pub fn idle_timeout() -> Duration {
    KEEPALIVE * 3
}

/// The largest data frame that fits an event of `max_event_bytes` (a server's `max_payload`).
pub fn max_chunk_for(max_event_bytes: usize) -> u32 {
    let room = max_event_bytes.saturating_sub(FRAME_OVERHEAD).max(1024);
    u32::try_from(room)
        .unwrap_or(u32::MAX)
        .min(DEFAULT_MAX_CHUNK)
}

/// Event type of frames hub → agent.
pub fn down_type() -> EventType {
    EventType::new(
        "cluster",
        "v1",
        "kubeapi",
        Direction::Spec,
        Action::UpdateRequest,
    )
}

/// Event type of frames agent → hub.
pub fn up_type() -> EventType {
    EventType::new(
        "cluster",
        "v1",
        "kubeapi",
        Direction::Status,
        Action::UpdateRequest,
    )
}

/// A call's id: 32 lower-case hex digits, chosen by the hub.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(String);

impl StreamId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }

    /// Parses an id, refusing anything but 32 lower-case hex digits.
    pub fn parse(s: &str) -> Result<Self, ProtocolError> {
        if s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Self(s.to_string()))
        } else {
            Err(ProtocolError::BadStream(s.chars().take(64).collect()))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a frame carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// The call (hub → agent, first frame).
    Request(Box<TunnelRequest>),
    /// The response head (agent → hub).
    Response(TunnelResponse),
    /// A body chunk.
    Data(bytes::Bytes),
    /// The body is complete.
    End,
    /// The receiver allows data frames up to this count.
    Credit(u64),
    /// Stop the call, and why.
    Cancel(String),
    /// Keepalive.
    Ping,
    /// Session bytes on a channel (Kubernetes' numbers: 0 stdin or port-forward data, 1
    /// stdout, 2 stderr); counts against the receiver's credit as [`Frame::Data`] does.
    Chunk {
        /// The channel.
        channel: u32,
        /// The bytes, at most the receiver's `max_chunk`.
        data: bytes::Bytes,
    },
    /// The sender sends no more on this channel (half-close).
    Close(u32),
    /// The terminal's new size (hub → agent, tty sessions).
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
    /// How the session ended: a `metav1.Status` as JSON, at most [`MAX_EXIT_BYTES`].
    Exit(bytes::Bytes),
}

impl Frame {
    /// A short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Frame::Request(_) => "request",
            Frame::Response(_) => "response",
            Frame::Data(_) => "data",
            Frame::End => "end",
            Frame::Credit(_) => "credit",
            Frame::Cancel(_) => "cancel",
            Frame::Ping => "ping",
            Frame::Chunk { .. } => "chunk",
            Frame::Close(_) => "close",
            Frame::Resize { .. } => "resize",
            Frame::Exit(_) => "exit",
        }
    }

    /// Whether the frame counts against the receiver's credit (data and chunks; every other
    /// frame is control).
    pub fn is_counted(&self) -> bool {
        matches!(self, Frame::Data(_) | Frame::Chunk { .. })
    }
}

/// One decoded frame of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The call.
    pub stream: StreamId,
    /// The sender's counter.
    pub seq: u64,
    /// What it carries.
    pub frame: Frame,
}

/// A frame that breaks the protocol (the call is cancelled with this as the reason).
#[derive(Debug, Error)]
pub enum ProtocolError {
    /// The event is not a valid Flotilla event.
    #[error("not a cluster-proxy frame: {0}")]
    Envelope(#[from] EnvelopeError),
    /// The event's type is not the one this direction carries.
    #[error("event type {found} where {want} was expected")]
    WrongType {
        /// The type received.
        found: String,
        /// The type expected.
        want: String,
    },
    /// The event names another cluster than its subject.
    #[error("frame for cluster {found:?} on cluster {want:?}'s subject")]
    WrongCluster {
        /// The cluster named in the event.
        found: String,
        /// The subject's cluster.
        want: String,
    },
    /// The stream id is malformed.
    #[error("stream id {0:?} is not 32 lower-case hex digits")]
    BadStream(String),
    /// The frame carries nothing.
    #[error("frame {seq} of stream {stream} carries no frame")]
    Empty {
        /// The call.
        stream: String,
        /// Its counter.
        seq: u64,
    },
    /// A data frame is larger than the receiver accepts.
    #[error("data frame of {size} bytes, over the {max}-byte limit")]
    ChunkTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A frame skipped or repeated the counter.
    #[error("frame {found} where {want} was expected")]
    Sequence {
        /// The counter received.
        found: u64,
        /// The counter expected.
        want: u64,
    },
    /// The sender sent data beyond its credit.
    #[error("data frame {sent} beyond the credit of {allowed} frames")]
    OverCredit {
        /// Data frames received, this one included.
        sent: u64,
        /// Data frames allowed.
        allowed: u64,
    },
    /// A credit went backwards.
    #[error("credit lowered from {from} to {to}")]
    CreditLowered {
        /// The credit before.
        from: u64,
        /// The credit received.
        to: u64,
    },
    /// A frame that this side never expects at this point.
    #[error("unexpected {frame} frame {detail}")]
    Unexpected {
        /// The frame's name.
        frame: &'static str,
        /// When.
        detail: &'static str,
    },
    /// An exit `Status` larger than [`MAX_EXIT_BYTES`].
    #[error("exit status of {size} bytes, over the {MAX_EXIT_BYTES}-byte limit")]
    ExitTooLarge {
        /// Its size.
        size: usize,
    },
    /// A terminal size no terminal has.
    #[error("resize to {width}x{height}: a size is at most 65535")]
    BadResize {
        /// Columns asked for.
        width: u32,
        /// Rows asked for.
        height: u32,
    },
    /// A session frame its sender may not send now ([`session::Rules`]).
    #[error(transparent)]
    Session(#[from] session::Violation),
}

/// Whom a call acts as on the spoke, for the logs of both ends: the user the hub names, the
/// caller's ManagedServiceAccount token, or the agent itself.
pub fn as_user(request: &TunnelRequest) -> &str {
    if !request.bearer.is_empty() {
        "its ManagedServiceAccount token"
    } else {
        request
            .impersonate
            .as_ref()
            .map_or("agent", |i| i.user.as_str())
    }
}

/// Builds the event carrying one frame.
pub fn encode(
    event_type: EventType,
    source: &str,
    cluster: &str,
    stream: &StreamId,
    seq: u64,
    frame: Frame,
) -> Event {
    let frame = match frame {
        Frame::Request(r) => tunnel_frame::Frame::Request(*r),
        Frame::Response(r) => tunnel_frame::Frame::Response(r),
        Frame::Data(d) => tunnel_frame::Frame::Data(d.to_vec()),
        Frame::End => tunnel_frame::Frame::End(TunnelEnd {}),
        Frame::Credit(allowed) => tunnel_frame::Frame::Credit(TunnelCredit { allowed }),
        Frame::Cancel(reason) => tunnel_frame::Frame::Cancel(TunnelCancel { reason }),
        Frame::Ping => tunnel_frame::Frame::Ping(TunnelPing {}),
        Frame::Chunk { channel, data } => tunnel_frame::Frame::Chunk(TunnelChunk {
            channel,
            data: data.to_vec(),
        }),
        Frame::Close(channel) => tunnel_frame::Frame::Close(TunnelClose { channel }),
        Frame::Resize { width, height } => tunnel_frame::Frame::Resize(TunnelResize {
            width: u32::from(width),
            height: u32::from(height),
        }),
        Frame::Exit(status) => tunnel_frame::Frame::Exit(TunnelExit {
            status: status.to_vec(),
        }),
    };
    let mut event = Event::new(
        event_type,
        source,
        cluster,
        &TunnelFrame {
            stream: stream.as_str().to_string(),
            seq,
            frame: Some(frame),
        },
    );
    // Frames are ordered by `seq` and never stored: no time, no wasted bytes per chunk.
    event.time = None;
    event
}

/// Decodes and checks a frame received on `cluster`'s subject: the event type must be `want`,
/// the event must name `cluster`, a data frame or chunk must be at most `max_chunk` bytes, an
/// exit at most [`MAX_EXIT_BYTES`], a resize a size a terminal can have.
pub fn decode(
    bytes: &[u8],
    max_event_bytes: usize,
    want: &EventType,
    cluster: &str,
    max_chunk: usize,
) -> Result<Received, ProtocolError> {
    let event = Event::decode(bytes, max_event_bytes)?;
    if &event.event_type != want {
        return Err(ProtocolError::WrongType {
            found: event.event_type.to_string(),
            want: want.to_string(),
        });
    }
    if event.cluster != cluster {
        return Err(ProtocolError::WrongCluster {
            found: event.cluster.chars().take(64).collect(),
            want: cluster.to_string(),
        });
    }
    let frame: TunnelFrame = event.decode_data("TunnelFrame")?;
    let stream = StreamId::parse(&frame.stream)?;
    let seq = frame.seq;
    let Some(frame) = frame.frame else {
        return Err(ProtocolError::Empty {
            stream: stream.to_string(),
            seq,
        });
    };
    let frame = from_wire(frame, max_chunk)?;
    Ok(Received { stream, seq, frame })
}

/// A frame from its wire form, checking its sizes.
fn from_wire(frame: tunnel_frame::Frame, max_chunk: usize) -> Result<Frame, ProtocolError> {
    let too_large = |size: usize| ProtocolError::ChunkTooLarge {
        size,
        max: max_chunk,
    };
    Ok(match frame {
        tunnel_frame::Frame::Request(r) => Frame::Request(Box::new(r)),
        tunnel_frame::Frame::Response(r) => Frame::Response(r),
        tunnel_frame::Frame::Data(d) if d.len() > max_chunk => return Err(too_large(d.len())),
        tunnel_frame::Frame::Data(d) => Frame::Data(d.into()),
        tunnel_frame::Frame::End(_) => Frame::End,
        tunnel_frame::Frame::Credit(c) => Frame::Credit(c.allowed),
        tunnel_frame::Frame::Cancel(c) => Frame::Cancel(c.reason.chars().take(512).collect()),
        tunnel_frame::Frame::Ping(_) => Frame::Ping,
        tunnel_frame::Frame::Chunk(c) if c.data.len() > max_chunk => {
            return Err(too_large(c.data.len()));
        }
        tunnel_frame::Frame::Chunk(c) => Frame::Chunk {
            channel: c.channel,
            data: c.data.into(),
        },
        tunnel_frame::Frame::Close(c) => Frame::Close(c.channel),
        tunnel_frame::Frame::Resize(r) => {
            let bad = || ProtocolError::BadResize {
                width: r.width,
                height: r.height,
            };
            Frame::Resize {
                width: u16::try_from(r.width).map_err(|_| bad())?,
                height: u16::try_from(r.height).map_err(|_| bad())?,
            }
        }
        tunnel_frame::Frame::Exit(e) if e.status.len() > MAX_EXIT_BYTES => {
            return Err(ProtocolError::ExitTooLarge {
                size: e.status.len(),
            });
        }
        tunnel_frame::Frame::Exit(e) => Frame::Exit(e.status.into()),
    })
}

/// The sender's counter as the receiver follows it: each frame must be the next.
#[derive(Debug, Default, Clone)]
pub struct SeqCheck {
    next: u64,
}

impl SeqCheck {
    /// Accepts `seq` when it is the next one.
    pub fn check(&mut self, seq: u64) -> Result<(), ProtocolError> {
        if seq != self.next {
            return Err(ProtocolError::Sequence {
                found: seq,
                want: self.next,
            });
        }
        self.next += 1;
        Ok(())
    }
}

/// The sending side of a body: how many data frames were sent and how many are allowed.
#[derive(Debug, Clone)]
pub struct SendWindow {
    sent: u64,
    allowed: u64,
}

impl SendWindow {
    /// A window allowing `initial` data frames before the first credit.
    pub fn new(initial: u64) -> Self {
        Self {
            sent: 0,
            allowed: initial,
        }
    }

    /// Whether another data frame may go now.
    pub fn may_send(&self) -> bool {
        self.sent < self.allowed
    }

    /// Counts a data frame sent.
    pub fn sent(&mut self) {
        self.sent += 1;
    }

    /// Takes a credit (cumulative); a lower one than before breaks the protocol.
    pub fn credit(&mut self, allowed: u64) -> Result<(), ProtocolError> {
        if allowed < self.allowed {
            return Err(ProtocolError::CreditLowered {
                from: self.allowed,
                to: allowed,
            });
        }
        self.allowed = allowed;
        Ok(())
    }
}

/// The receiving side of a body: counts data frames against the credit given and says when
/// to give more (half a window consumed), so at most `window` frames are ever buffered.
#[derive(Debug, Clone)]
pub struct RecvWindow {
    window: u64,
    received: u64,
    consumed: u64,
    granted: u64,
}

impl RecvWindow {
    /// A window of `window` data frames (also the initial credit).
    pub fn new(window: u32) -> Self {
        let window = u64::from(window.clamp(1, MAX_WINDOW));
        Self {
            window,
            received: 0,
            consumed: 0,
            granted: window,
        }
    }

    /// The credit given so far.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// Counts a data frame received; one beyond the credit breaks the protocol.
    pub fn received(&mut self) -> Result<(), ProtocolError> {
        self.received += 1;
        if self.received > self.granted {
            return Err(ProtocolError::OverCredit {
                sent: self.received,
                allowed: self.granted,
            });
        }
        Ok(())
    }

    /// Counts a data frame consumed; returns a new credit to send when half a window has
    /// been consumed since the last one.
    pub fn consumed(&mut self) -> Option<u64> {
        self.consumed += 1;
        let target = self.consumed + self.window;
        if target >= self.granted + self.window.div_ceil(2) {
            self.granted = target;
            Some(target)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;

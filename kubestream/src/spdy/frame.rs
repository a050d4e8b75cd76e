//! SPDY/3.1 frames (pure): the codec and an incremental decoder fed arbitrary slices.
//!
//! Every frame starts with 8 bytes, big-endian (SPDY draft 3.1 §2.2):
//! - control: `1 | version:15 (=3) | type:16 | flags:8 | length:24 | payload`;
//! - data: `0 | stream-id:31 | flags:8 (FIN=0x01) | length:24 | payload`.
//!
//! The [`Decoder`] never holds a DATA payload whole: a client may declare up to 16 MiB, so a
//! payload is handed on in [`DataSlice`]s of at most `max_slice` bytes as they arrive. Control
//! frames are held whole but bounded by `max_control`; past it the connection must end with
//! GOAWAY(PROTOCOL_ERROR). Header blocks stay compressed here — [`super::headers`] owns the
//! connection's zlib contexts. The checks are those of moby/spdystream's reader (the peer
//! kubectl uses), except that an unknown control type is passed on as [`Frame::Unknown`] for
//! the connection to ignore, as the draft says.

use bytes::{Buf, BufMut, Bytes, BytesMut};

#[cfg(test)]
mod tests;

/// The SPDY version spoken.
pub const VERSION: u16 = 3;
/// The length of every frame's header.
pub const HEADER_LEN: usize = 8;
/// The largest length a frame can declare (24 bits).
pub const MAX_LENGTH: usize = (1 << 24) - 1;
/// The default bound on a control frame's payload (design note §1.6).
pub const DEFAULT_MAX_CONTROL: usize = 64 * 1024;
/// The default size of the slices a DATA payload is handed on in.
pub const DEFAULT_MAX_SLICE: usize = 128 * 1024;
/// The largest stream id (31 bits).
pub const MAX_STREAM_ID: u32 = 0x7fff_ffff;

/// Control frame types.
pub mod kind {
    /// SYN_STREAM: open a stream.
    pub const SYN_STREAM: u16 = 1;
    /// SYN_REPLY: accept a stream.
    pub const SYN_REPLY: u16 = 2;
    /// RST_STREAM: end a stream abnormally.
    pub const RST_STREAM: u16 = 3;
    /// SETTINGS.
    pub const SETTINGS: u16 = 4;
    /// PING.
    pub const PING: u16 = 6;
    /// GOAWAY: no new streams; the connection ends.
    pub const GOAWAY: u16 = 7;
    /// HEADERS: more headers for a stream.
    pub const HEADERS: u16 = 8;
    /// WINDOW_UPDATE (spdystream ignores it: SPDY flow control is not used).
    pub const WINDOW_UPDATE: u16 = 9;
}

/// RST_STREAM status codes.
pub mod rst {
    /// A generic protocol error.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// A frame for a stream that is not open.
    pub const INVALID_STREAM: u32 = 2;
    /// The stream was refused before any processing (spdystream's `Refuse()`).
    pub const REFUSED_STREAM: u32 = 3;
    /// The stream is no longer needed (spdystream's `Reset()` sends this).
    pub const CANCEL: u32 = 5;
    /// An internal error.
    pub const INTERNAL_ERROR: u32 = 6;
}

/// GOAWAY status codes.
pub mod goaway {
    /// A normal end.
    pub const OK: u32 = 0;
    /// The peer broke the protocol.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// An internal error.
    pub const INTERNAL_ERROR: u32 = 2;
}

/// The FIN flag (DATA, SYN_STREAM, SYN_REPLY, HEADERS): the sender's last frame on the stream.
pub const FLAG_FIN: u8 = 0x01;
/// SYN_STREAM's UNIDIRECTIONAL flag.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// SETTINGS' CLEAR_SETTINGS flag.
pub const FLAG_CLEAR_SETTINGS: u8 = 0x01;

/// One SETTINGS entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The entry's flags (8 bits).
    pub flags: u8,
    /// The setting's id (24 bits).
    pub id: u32,
    /// Its value.
    pub value: u32,
}

/// A SPDY/3.1 frame. Header blocks (`headers`) are the compressed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// DATA; the decoder hands these on as [`DataSlice`]s instead.
    Data {
        /// The stream (odd: opened by the client).
        stream_id: u32,
        /// The sender's last bytes on this stream.
        fin: bool,
        /// The payload.
        data: Bytes,
    },
    /// SYN_STREAM.
    SynStream {
        /// The new stream's id.
        stream_id: u32,
        /// The stream it is associated to (0: none).
        associated_to: u32,
        /// Priority, 0 (highest) to 7.
        priority: u8,
        /// The credential slot (unused by spdystream).
        slot: u8,
        /// FIN: the sender sends nothing more on the stream.
        fin: bool,
        /// UNIDIRECTIONAL: the receiver may not send on it.
        unidirectional: bool,
        /// The compressed header block.
        headers: Bytes,
    },
    /// SYN_REPLY.
    SynReply {
        /// The stream accepted.
        stream_id: u32,
        /// FIN.
        fin: bool,
        /// The compressed header block.
        headers: Bytes,
    },
    /// RST_STREAM.
    RstStream {
        /// The stream ended.
        stream_id: u32,
        /// Why (see [`rst`]).
        status: u32,
    },
    /// SETTINGS.
    Settings {
        /// CLEAR_SETTINGS.
        clear: bool,
        /// The entries.
        entries: Vec<Setting>,
    },
    /// PING: echoed by the side that did not send it (ids of the other parity).
    Ping {
        /// The ping's id.
        id: u32,
    },
    /// GOAWAY.
    GoAway {
        /// The last stream the sender processed.
        last_good_stream_id: u32,
        /// Why (see [`goaway`]).
        status: u32,
    },
    /// HEADERS.
    Headers {
        /// The stream.
        stream_id: u32,
        /// FIN.
        fin: bool,
        /// The compressed header block.
        headers: Bytes,
    },
    /// WINDOW_UPDATE.
    WindowUpdate {
        /// The stream.
        stream_id: u32,
        /// The window's increase.
        delta: u32,
    },
    /// A control frame of a type SPDY/3.1 does not define: ignored by the connection.
    Unknown {
        /// Its type.
        kind: u16,
        /// Its flags.
        flags: u8,
        /// Its payload.
        payload: Bytes,
    },
}

/// A piece of a DATA frame's payload, as the [`Decoder`] hands it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSlice {
    /// The stream.
    pub stream_id: u32,
    /// The bytes (empty only for a frame with an empty payload).
    pub data: Bytes,
    /// This is the frame's last slice.
    pub end_of_frame: bool,
    /// The frame carried FIN and this is its last slice.
    pub fin: bool,
}

/// What the decoder read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A whole control frame (never [`Frame::Data`]).
    Control(Frame),
    /// A piece of a DATA frame.
    Data(DataSlice),
}

/// A frame that breaks the protocol or our bounds; the connection ends with
/// GOAWAY(PROTOCOL_ERROR).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A control frame of another SPDY version.
    #[error("SPDY version {version} is not served; only 3")]
    Version {
        /// The version read.
        version: u16,
    },
    /// A control frame longer than the bound.
    #[error("control frame of type {kind} declares {length} bytes; the limit is {max}")]
    ControlTooLarge {
        /// Its type.
        kind: u16,
        /// Its declared length.
        length: usize,
        /// The bound.
        max: usize,
    },
    /// A control frame whose length does not fit its type.
    #[error("control frame of type {kind} has a wrong length {length}")]
    BadLength {
        /// Its type.
        kind: u16,
        /// Its length.
        length: usize,
    },
    /// A frame for stream 0 where a stream is required.
    #[error("frame of type {kind} for stream 0 (0 is DATA)")]
    ZeroStreamId {
        /// Its type (0 for DATA).
        kind: u16,
    },
    /// Encoding: a payload over 2²⁴ − 1 bytes or a stream id over 31 bits.
    #[error("cannot encode a frame of {length} bytes for stream {stream_id}")]
    Unencodable {
        /// The payload's length.
        length: usize,
        /// The stream id.
        stream_id: u32,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The part of a DATA frame still to come.
#[derive(Debug, Clone, Copy)]
struct InData {
    stream_id: u32,
    remaining: usize,
    fin: bool,
}

/// An incremental frame decoder: feed it the bytes read so far, in any pieces.
#[derive(Debug)]
pub struct Decoder {
    max_control: usize,
    max_slice: usize,
    data: Option<InData>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DEFAULT_MAX_CONTROL, DEFAULT_MAX_SLICE)
    }
}

impl Decoder {
    /// A decoder bounding control payloads to `max_control` and handing DATA on in slices of
    /// at most `max_slice` (at least 1) bytes.
    pub fn new(max_control: usize, max_slice: usize) -> Decoder {
        Decoder {
            max_control,
            max_slice: max_slice.max(1),
            data: None,
        }
    }

    /// Whether the decoder is between frames (an end of input here is a clean end).
    pub fn at_frame_boundary(&self) -> bool {
        self.data.is_none()
    }

    /// Takes the next event from `src`, or `None` when more bytes are needed. Consumed bytes
    /// are removed from `src`; after an error the connection cannot go on.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Event>> {
        if self.data.is_none() {
            if src.len() < HEADER_LEN {
                return Ok(None);
            }
            let first = u32::from_be_bytes([src[0], src[1], src[2], src[3]]);
            let flags = src[4];
            let length = usize::from(src[5]) << 16 | usize::from(src[6]) << 8 | usize::from(src[7]);
            if first & 0x8000_0000 != 0 {
                return self.control(src, first, flags, length);
            }
            let stream_id = first & MAX_STREAM_ID;
            if stream_id == 0 {
                return Err(Error::ZeroStreamId { kind: 0 });
            }
            src.advance(HEADER_LEN);
            self.data = Some(InData {
                stream_id,
                remaining: length,
                fin: flags & FLAG_FIN != 0,
            });
        }
        Ok(self.data_slice(src))
    }

    fn data_slice(&mut self, src: &mut BytesMut) -> Option<Event> {
        let state = self.data.as_mut()?;
        if state.remaining > 0 && src.is_empty() {
            return None;
        }
        let n = state.remaining.min(src.len()).min(self.max_slice);
        let data = src.split_to(n).freeze();
        state.remaining -= n;
        let end_of_frame = state.remaining == 0;
        let slice = DataSlice {
            stream_id: state.stream_id,
            data,
            end_of_frame,
            fin: end_of_frame && state.fin,
        };
        if end_of_frame {
            self.data = None;
        }
        Some(Event::Data(slice))
    }

    fn control(
        &mut self,
        src: &mut BytesMut,
        first: u32,
        flags: u8,
        length: usize,
    ) -> Result<Option<Event>> {
        let version = ((first >> 16) & 0x7fff) as u16;
        let kind = (first & 0xffff) as u16;
        if version != VERSION {
            return Err(Error::Version { version });
        }
        if length > self.max_control {
            return Err(Error::ControlTooLarge {
                kind,
                length,
                max: self.max_control,
            });
        }
        if src.len() < HEADER_LEN + length {
            src.reserve(HEADER_LEN + length - src.len());
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let payload = src.split_to(length).freeze();
        parse_control(kind, flags, payload).map(|f| Some(Event::Control(f)))
    }
}

fn parse_control(kind: u16, flags: u8, mut p: Bytes) -> Result<Frame> {
    let length = p.len();
    let bad = || Error::BadLength { kind, length };
    let fin = flags & FLAG_FIN != 0;
    let frame = match kind {
        kind::SYN_STREAM => {
            if length < 10 {
                return Err(bad());
            }
            let stream_id = p.get_u32() & MAX_STREAM_ID;
            let associated_to = p.get_u32() & MAX_STREAM_ID;
            let priority = p.get_u8() >> 5;
            let slot = p.get_u8();
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                slot,
                fin,
                unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                headers: p,
            }
        }
        kind::SYN_REPLY | kind::HEADERS => {
            if length < 4 {
                return Err(bad());
            }
            let stream_id = p.get_u32() & MAX_STREAM_ID;
            if kind == kind::SYN_REPLY {
                Frame::SynReply {
                    stream_id,
                    fin,
                    headers: p,
                }
            } else {
                Frame::Headers {
                    stream_id,
                    fin,
                    headers: p,
                }
            }
        }
        kind::RST_STREAM | kind::GOAWAY | kind::WINDOW_UPDATE => {
            if length != 8 {
                return Err(bad());
            }
            let id = p.get_u32() & MAX_STREAM_ID;
            let value = p.get_u32();
            match kind {
                kind::RST_STREAM => Frame::RstStream {
                    stream_id: id,
                    status: value,
                },
                kind::GOAWAY => Frame::GoAway {
                    last_good_stream_id: id,
                    status: value,
                },
                _ => Frame::WindowUpdate {
                    stream_id: id,
                    delta: value & MAX_STREAM_ID,
                },
            }
        }
        kind::SETTINGS => parse_settings(flags, p).ok_or_else(bad)?,
        kind::PING => {
            if length != 4 {
                return Err(bad());
            }
            Frame::Ping { id: p.get_u32() }
        }
        _ => Frame::Unknown {
            kind,
            flags,
            payload: p,
        },
    };
    match frame {
        Frame::SynStream { stream_id: 0, .. }
        | Frame::SynReply { stream_id: 0, .. }
        | Frame::Headers { stream_id: 0, .. }
        | Frame::RstStream { stream_id: 0, .. } => Err(Error::ZeroStreamId { kind }),
        frame => Ok(frame),
    }
}

fn parse_settings(flags: u8, mut p: Bytes) -> Option<Frame> {
    if p.len() < 4 {
        return None;
    }
    let count = p.get_u32() as usize;
    if count.checked_mul(8)? != p.len() {
        return None;
    }
    let entries = (0..count)
        .map(|_| {
            let flag_id = p.get_u32();
            Setting {
                flags: (flag_id >> 24) as u8,
                id: flag_id & 0x00ff_ffff,
                value: p.get_u32(),
            }
        })
        .collect();
    Some(Frame::Settings {
        clear: flags & FLAG_CLEAR_SETTINGS != 0,
        entries,
    })
}

impl Frame {
    /// Appends the frame's bytes to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<()> {
        match self {
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                data_header(*stream_id, *fin, data.len(), dst)?;
                dst.put_slice(data);
            }
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                slot,
                fin,
                unidirectional,
                headers,
            } => {
                let flags = fin_flag(*fin)
                    | if *unidirectional {
                        FLAG_UNIDIRECTIONAL
                    } else {
                        0
                    };
                control_header(kind::SYN_STREAM, flags, 10 + headers.len(), *stream_id, dst)?;
                dst.put_u32(*stream_id);
                dst.put_u32(*associated_to & MAX_STREAM_ID);
                dst.put_u8(priority << 5);
                dst.put_u8(*slot);
                dst.put_slice(headers);
            }
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            } => stream_block(kind::SYN_REPLY, *stream_id, *fin, headers, dst)?,
            Frame::Headers {
                stream_id,
                fin,
                headers,
            } => stream_block(kind::HEADERS, *stream_id, *fin, headers, dst)?,
            Frame::RstStream { stream_id, status } => {
                two_words(kind::RST_STREAM, *stream_id, *status, dst)?
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => two_words(kind::GOAWAY, *last_good_stream_id, *status, dst)?,
            Frame::WindowUpdate { stream_id, delta } => {
                two_words(kind::WINDOW_UPDATE, *stream_id, *delta & MAX_STREAM_ID, dst)?
            }
            Frame::Settings { clear, entries } => {
                let flags = if *clear { FLAG_CLEAR_SETTINGS } else { 0 };
                control_header(kind::SETTINGS, flags, 4 + 8 * entries.len(), 0, dst)?;
                dst.put_u32(entries.len() as u32);
                for e in entries {
                    dst.put_u32(u32::from(e.flags) << 24 | (e.id & 0x00ff_ffff));
                    dst.put_u32(e.value);
                }
            }
            Frame::Ping { id } => {
                control_header(kind::PING, 0, 4, 0, dst)?;
                dst.put_u32(*id);
            }
            Frame::Unknown {
                kind,
                flags,
                payload,
            } => {
                control_header(*kind, *flags, payload.len(), 0, dst)?;
                dst.put_slice(payload);
            }
        }
        Ok(())
    }
}

/// Appends a DATA frame's 8-byte header; the caller appends `length` payload bytes (so a
/// writer need not copy its payload into a [`Frame`]).
pub fn data_header(stream_id: u32, fin: bool, length: usize, dst: &mut BytesMut) -> Result<()> {
    check(stream_id, length)?;
    dst.put_u32(stream_id);
    dst.put_u32(u32::from(fin_flag(fin)) << 24 | length as u32);
    Ok(())
}

fn fin_flag(fin: bool) -> u8 {
    if fin { FLAG_FIN } else { 0 }
}

fn check(stream_id: u32, length: usize) -> Result<()> {
    if length > MAX_LENGTH || stream_id > MAX_STREAM_ID {
        return Err(Error::Unencodable { length, stream_id });
    }
    Ok(())
}

fn control_header(
    kind: u16,
    flags: u8,
    length: usize,
    stream_id: u32,
    dst: &mut BytesMut,
) -> Result<()> {
    check(stream_id, length)?;
    dst.put_u16(0x8000 | VERSION);
    dst.put_u16(kind);
    dst.put_u32(u32::from(flags) << 24 | length as u32);
    Ok(())
}

fn stream_block(
    kind: u16,
    stream_id: u32,
    fin: bool,
    headers: &[u8],
    dst: &mut BytesMut,
) -> Result<()> {
    control_header(kind, fin_flag(fin), 4 + headers.len(), stream_id, dst)?;
    dst.put_u32(stream_id);
    dst.put_slice(headers);
    Ok(())
}

fn two_words(kind: u16, id: u32, value: u32, dst: &mut BytesMut) -> Result<()> {
    control_header(kind, 0, 8, id, dst)?;
    dst.put_u32(id);
    dst.put_u32(value);
    Ok(())
}

//! SPDY/3.1, the protocol kubectl's port-forward speaks (raw, or tunnelled in a WebSocket),
//! as far as a server of moby/spdystream's clients needs it (design note §1.6).
//!
//! - [`frame`]: the frame codec and an incremental decoder fed arbitrary slices, with bounds
//!   on control frames and DATA handed on in slices (pure).
//! - [`headers`]: header blocks — lower-case unique names, one zlib context per direction
//!   with the SPDY dictionary, bounds against zip bombs (pure).
//! - [`dictionary`]: the SPDY/3 zlib dictionary (pure data).
//! - [`conn`]: a server connection over `AsyncRead + AsyncWrite` — accepted streams as
//!   handles with bounded buffers, one writer, pings echoed, GOAWAY (I/O).

pub mod conn;
pub mod dictionary;
pub mod frame;
pub mod headers;

//! Port-forward's SPDY streams (pure): reading a stream's headers and pairing each local
//! connection's `error` and `data` streams by `requestid`, with the kubelet's timeout as a
//! rule over a clock the caller passes in.
//!
//! For every local TCP connection kubectl opens two streams with headers `streamtype`
//! (`error`, then `data`), `port` (the pod's port) and `requestid` (a counter), lower-case on
//! the wire (client-go `tools/portforward/portforward.go`). The kubelet pairs them by request
//! id (`pkg/kubelet/cri/streaming/portforward/httpstream.go`): a second stream of one type is
//! an error, a pair not complete within the stream-creation timeout (30 s) gets
//! `timed out waiting for streams` on its error stream, and a failed forward gets
//! `error forwarding port P to pod NAME, uid UID: …` there.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::spdy::headers::Headers;

#[cfg(test)]
mod tests;

/// The header naming a stream's role.
pub const STREAM_TYPE: &str = "streamtype";
/// The header naming the pod's port.
pub const PORT: &str = "port";
/// The header pairing a connection's two streams.
pub const REQUEST_ID: &str = "requestid";
/// How long the first stream of a pair waits for its partner (the kubelet's
/// stream-creation timeout).
pub const PAIR_TIMEOUT: Duration = Duration::from_secs(30);
/// What an unpaired stream's error stream receives when the timeout passes.
pub const TIMED_OUT: &str = "timed out waiting for streams";
/// The most pairs waiting for their partner at once on one connection.
pub const MAX_PENDING: usize = 64;
/// The longest request id accepted (kubectl's are decimal counters).
pub const MAX_REQUEST_ID: usize = 64;

/// A port-forward stream's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamType {
    /// Text written here is the connection's error; kubectl half-closes it at once.
    Error,
    /// The forwarded bytes, both ways.
    Data,
}

impl StreamType {
    /// The header value.
    pub fn name(self) -> &'static str {
        match self {
            StreamType::Error => "error",
            StreamType::Data => "data",
        }
    }
}

/// What a port-forward stream's headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHeaders {
    /// Its role.
    pub stream_type: StreamType,
    /// The pod's port, 1–65535.
    pub port: u16,
    /// The id pairing it with its partner.
    pub request_id: String,
}

/// Why a stream was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `streamtype`, or not `error`/`data`.
    #[error("invalid stream type {value:?}")]
    StreamType {
        /// The header's value (cut to 64 characters).
        value: Option<String>,
    },
    /// No `port`, or not a port number.
    #[error("invalid port {value:?}: a port is a number from 1 to 65535")]
    Port {
        /// The header's value (cut to 64 characters).
        value: Option<String>,
    },
    /// A request id longer than [`MAX_REQUEST_ID`].
    #[error("request id of {len} bytes is over the limit of {MAX_REQUEST_ID}")]
    RequestId {
        /// Its length.
        len: usize,
    },
    /// A second stream of one type for one request id.
    #[error("{} stream already assigned for request {request_id}", stream_type.name())]
    AlreadyAssigned {
        /// The request id.
        request_id: String,
        /// The type seen twice.
        stream_type: StreamType,
    },
    /// Too many pairs waiting for their partner.
    #[error("{MAX_PENDING} stream pairs are already waiting for their partner")]
    TooManyPending,
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads a stream's headers. A stream without `requestid` (clients before it existed) gets
/// the kubelet's guess: an error stream's own id, a data stream's id less 2.
pub fn stream_headers(stream_id: u32, headers: &Headers) -> Result<StreamHeaders> {
    let stream_type = match headers.get(STREAM_TYPE) {
        Some("error") => StreamType::Error,
        Some("data") => StreamType::Data,
        other => {
            return Err(Error::StreamType {
                value: other.map(cut),
            });
        }
    };
    let port = headers.get(PORT);
    let port = port
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| Error::Port {
            value: port.map(cut),
        })?;
    let request_id = match headers.get(REQUEST_ID).filter(|id| !id.is_empty()) {
        Some(id) if id.len() > MAX_REQUEST_ID => return Err(Error::RequestId { len: id.len() }),
        Some(id) => id.to_owned(),
        None => match stream_type {
            StreamType::Error => stream_id.to_string(),
            StreamType::Data => stream_id.wrapping_sub(2).to_string(),
        },
    };
    Ok(StreamHeaders {
        stream_type,
        port,
        request_id,
    })
}

/// The kubelet's words for a forward that failed.
pub fn forward_error(port: u16, pod: &str, uid: &str, cause: &str) -> String {
    format!("error forwarding port {port} to pod {pod}, uid {uid}: {cause}")
}

/// A complete pair: one local connection to forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair<S> {
    /// The request id.
    pub request_id: String,
    /// The pod's port (the data stream's, as the kubelet uses).
    pub port: u16,
    /// The error stream.
    pub error: S,
    /// The data stream.
    pub data: S,
}

/// What became of an added stream.
#[derive(Debug)]
pub enum Added<S> {
    /// It waits for its partner.
    Waiting,
    /// It completed a pair.
    Paired(Pair<S>),
    /// It was refused; the caller resets it (RST_STREAM).
    Refused(S, Error),
}

/// A pair given up on: its partner did not come in time, or the caller cancelled it.
#[derive(Debug, PartialEq, Eq)]
pub struct Unpaired<S> {
    /// The request id.
    pub request_id: String,
    /// The error stream, if it came (it receives [`TIMED_OUT`]).
    pub error: Option<S>,
    /// The data stream, if it came.
    pub data: Option<S>,
}

#[derive(Debug)]
struct Pending<S> {
    since: Instant,
    port: u16,
    error: Option<S>,
    data: Option<S>,
}

/// The pairs of one port-forward connection still waiting for a partner.
#[derive(Debug)]
pub struct Pairing<S> {
    pending: HashMap<String, Pending<S>>,
    timeout: Duration,
    max_pending: usize,
}

impl<S> Default for Pairing<S> {
    fn default() -> Self {
        Pairing::new(PAIR_TIMEOUT, MAX_PENDING)
    }
}

impl<S> Pairing<S> {
    /// Pairs waiting at most `timeout`, at most `max_pending` at once.
    pub fn new(timeout: Duration, max_pending: usize) -> Pairing<S> {
        Pairing {
            pending: HashMap::new(),
            timeout,
            max_pending,
        }
    }

    /// Adds a stream whose headers were read at `now`.
    pub fn add(&mut self, now: Instant, stream: S, headers: &StreamHeaders) -> Added<S> {
        let id = &headers.request_id;
        if !self.pending.contains_key(id) && self.pending.len() >= self.max_pending {
            return Added::Refused(stream, Error::TooManyPending);
        }
        let entry = self.pending.entry(id.clone()).or_insert_with(|| Pending {
            since: now,
            port: headers.port,
            error: None,
            data: None,
        });
        let slot = match headers.stream_type {
            StreamType::Error => &mut entry.error,
            StreamType::Data => {
                entry.port = headers.port;
                &mut entry.data
            }
        };
        if slot.is_some() {
            return Added::Refused(
                stream,
                Error::AlreadyAssigned {
                    request_id: id.clone(),
                    stream_type: headers.stream_type,
                },
            );
        }
        *slot = Some(stream);
        if entry.error.is_none() || entry.data.is_none() {
            return Added::Waiting;
        }
        match self.pending.remove(id) {
            Some(Pending {
                port,
                error: Some(error),
                data: Some(data),
                ..
            }) => Added::Paired(Pair {
                request_id: id.clone(),
                port,
                error,
                data,
            }),
            // Both halves were just seen present.
            _ => Added::Waiting,
        }
    }

    /// Removes and returns the pairs that waited `timeout` or longer at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<Unpaired<S>> {
        let expired: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.since) >= self.timeout)
            .map(|(id, _)| id.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.cancel(&id))
            .collect()
    }

    /// Removes a waiting pair (its stream was reset, or the connection ends).
    pub fn cancel(&mut self, request_id: &str) -> Option<Unpaired<S>> {
        self.pending.remove(request_id).map(|p| Unpaired {
            request_id: request_id.to_owned(),
            error: p.error,
            data: p.data,
        })
    }

    /// When the oldest waiting pair times out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.since + self.timeout).min()
    }

    /// How many pairs wait.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

//! Which JetStream failures an election explains (pure). While a clustered JetStream elects a
//! stream's leader (or its meta leader) after a node is lost, a write finds "no stream" (its
//! publish reaches no leader: no responders), a read or an API request times out or has no
//! responders, and the API answers "not leader", "cluster not available" or "stream offline".
//! Each of those is worth trying again within the caller's patience; anything else (a lost
//! compare-and-set, a refused configuration, a full store) is an answer.
//!
//! The client's errors are matched by kind, walking the chain of sources (async-nats wraps one
//! error in another: a KV entry's error holds the direct get's, which holds the request's),
//! never by their text.

use async_nats::jetstream::{self, ErrorCode, context, kv, stream};
use std::error::Error;

/// Why a failure looks like an election in progress (a metric's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Why {
    /// A write reached no stream leader ("no stream found for given subject").
    NoStream,
    /// A request reached no one (the stream's or the API's leader is being elected).
    NoResponders,
    /// A request or an acknowledgement timed out.
    TimedOut,
    /// The server answered that there is no leader, no quorum or the stream is offline.
    NoLeader,
    /// The connection to the server broke (the node being lost was this client's).
    Disconnected,
    /// JetStream is not (yet) enabled on the server (a node still starting).
    NotReady,
}

impl Why {
    /// The label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::NoStream => "no_stream",
            Self::NoResponders => "no_responders",
            Self::TimedOut => "timed_out",
            Self::NoLeader => "no_leader",
            Self::Disconnected => "disconnected",
            Self::NotReady => "not_ready",
        }
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NoStream => "no stream leader answered the write",
            Self::NoResponders => "no one answered the request",
            Self::TimedOut => "the request timed out",
            Self::NoLeader => "the stream has no leader",
            Self::Disconnected => "the connection to NATS broke",
            Self::NotReady => "JetStream is not ready",
        })
    }
}

/// Whether an election explains `error` (or any error it wraps), and how.
pub fn explains(error: &(dyn Error + 'static)) -> Option<Why> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(why) = one(e) {
            return Some(why);
        }
        next = e.source();
    }
    None
}

/// The server's own error code, when an election explains it.
pub fn code(code: ErrorCode) -> Option<Why> {
    const NO_LEADER: [ErrorCode; 8] = [
        ErrorCode::CLUSTER_NOT_AVAILABLE,
        ErrorCode::CLUSTER_NOT_LEADER,
        ErrorCode::CLUSTER_NOT_ACTIVE,
        ErrorCode::CLUSTER_NO_PEERS,
        ErrorCode::CLUSTER_INCOMPLETE,
        ErrorCode::STREAM_OFFLINE,
        ErrorCode::CONSUMER_OFFLINE,
        ErrorCode::PEER_REMAP,
    ];
    if NO_LEADER.contains(&code) {
        Some(Why::NoLeader)
    } else if code == ErrorCode::STREAM_NOT_FOUND {
        // Asked of a stream the caller opened: during a meta-leader change the API forgets it.
        Some(Why::NoStream)
    } else if code == ErrorCode::JETSTREAM_NOT_ENABLED
        || code == ErrorCode::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT
    {
        Some(Why::NotReady)
    } else {
        None
    }
}

/// One error of the chain, by its type and kind.
fn one(e: &(dyn Error + 'static)) -> Option<Why> {
    if let Some(e) = e.downcast_ref::<context::PublishError>() {
        return match e.kind() {
            context::PublishErrorKind::StreamNotFound => Some(Why::NoStream),
            context::PublishErrorKind::TimedOut => Some(Why::TimedOut),
            context::PublishErrorKind::BrokenPipe => Some(Why::Disconnected),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<context::RequestError>() {
        return match e.kind() {
            context::RequestErrorKind::NoResponders => Some(Why::NoResponders),
            context::RequestErrorKind::TimedOut => Some(Why::TimedOut),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<async_nats::RequestError>() {
        return match e.kind() {
            async_nats::RequestErrorKind::NoResponders => Some(Why::NoResponders),
            async_nats::RequestErrorKind::TimedOut => Some(Why::TimedOut),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<async_nats::PublishError>() {
        // The client could not hand the message on: its connection is gone.
        let _ = e;
        return Some(Why::Disconnected);
    }
    if let Some(e) = e.downcast_ref::<context::CreateStreamError>() {
        return match e.kind() {
            context::CreateStreamErrorKind::TimedOut => Some(Why::TimedOut),
            context::CreateStreamErrorKind::JetStreamUnavailable => Some(Why::NotReady),
            context::CreateStreamErrorKind::JetStream(e) => code(e.error_code()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<jetstream::Error>() {
        return code(e.error_code());
    }
    if let Some(e) = e.downcast_ref::<stream::DirectGetError>() {
        return match e.kind() {
            stream::DirectGetErrorKind::TimedOut => Some(Why::TimedOut),
            stream::DirectGetErrorKind::ErrorResponse(status, _)
                if status == async_nats::StatusCode::NO_RESPONDERS =>
            {
                Some(Why::NoResponders)
            }
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<stream::LastRawMessageError>() {
        return match e.kind() {
            stream::LastRawMessageErrorKind::JetStream(e) => code(e.error_code()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<stream::ConsumerError>() {
        return match e.kind() {
            stream::ConsumerErrorKind::TimedOut => Some(Why::TimedOut),
            stream::ConsumerErrorKind::JetStream(e) => code(e.error_code()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<jetstream::consumer::pull::OrderedError>() {
        return match e.kind() {
            jetstream::consumer::pull::OrderedErrorKind::NoResponders => Some(Why::NoResponders),
            jetstream::consumer::pull::OrderedErrorKind::MissingHeartbeat => Some(Why::TimedOut),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<jetstream::consumer::pull::MessagesError>() {
        return match e.kind() {
            jetstream::consumer::pull::MessagesErrorKind::NoResponders => Some(Why::NoResponders),
            jetstream::consumer::pull::MessagesErrorKind::MissingHeartbeat => Some(Why::TimedOut),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<kv::EntryError>() {
        return (e.kind() == kv::EntryErrorKind::TimedOut).then_some(Why::TimedOut);
    }
    if let Some(e) = e.downcast_ref::<kv::UpdateError>() {
        return (e.kind() == kv::UpdateErrorKind::TimedOut).then_some(Why::TimedOut);
    }
    if let Some(e) = e.downcast_ref::<kv::WatchError>() {
        return (e.kind() == kv::WatchErrorKind::TimedOut).then_some(Why::TimedOut);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped<K>(
        kind: K,
        source: impl Error + Send + Sync + 'static,
    ) -> async_nats::error::Error<K>
    where
        K: Clone + PartialEq + std::fmt::Debug + std::fmt::Display,
    {
        async_nats::error::Error::with_source(kind, source)
    }

    fn server(code: u64) -> jetstream::Error {
        serde_json::from_value(serde_json::json!({
            "code": 503, "err_code": code, "description": "from the server"
        }))
        .expect("a JetStream error")
    }

    #[test]
    fn elections_are_told_by_kind_through_wrapping_errors() {
        let publish = context::PublishError::new(context::PublishErrorKind::StreamNotFound);
        assert_eq!(explains(&publish), Some(Why::NoStream));
        let timed_out = context::PublishError::new(context::PublishErrorKind::TimedOut);
        assert_eq!(explains(&timed_out), Some(Why::TimedOut));
        // A KV create's publish, two levels down.
        let create = wrapped(kv::CreateErrorKind::Publish, publish);
        assert_eq!(explains(&create), Some(Why::NoStream));
        // A KV read through a direct get nobody answered.
        let direct = stream::DirectGetError::new(stream::DirectGetErrorKind::ErrorResponse(
            async_nats::StatusCode::NO_RESPONDERS,
            "no responders".into(),
        ));
        let entry = wrapped(kv::EntryErrorKind::Other, direct);
        assert_eq!(explains(&entry), Some(Why::NoResponders));
        let info = context::RequestError::new(context::RequestErrorKind::NoResponders);
        assert_eq!(explains(&info), Some(Why::NoResponders));
        let not_leader = stream::LastRawMessageError::new(
            stream::LastRawMessageErrorKind::JetStream(server(10009)),
        );
        assert_eq!(explains(&not_leader), Some(Why::NoLeader));
        let offline = context::CreateStreamError::new(context::CreateStreamErrorKind::JetStream(
            server(10118),
        ));
        assert_eq!(explains(&offline), Some(Why::NoLeader));
    }

    #[test]
    fn answers_are_not_elections() {
        let lost_race = context::PublishError::new(context::PublishErrorKind::WrongLastSequence);
        assert_eq!(explains(&lost_race), None);
        let exists = kv::CreateError::new(kv::CreateErrorKind::AlreadyExists);
        assert_eq!(explains(&exists), None);
        let revision = kv::UpdateError::new(kv::UpdateErrorKind::WrongLastRevision);
        assert_eq!(explains(&revision), None);
        let full = context::CreateStreamError::new(context::CreateStreamErrorKind::JetStream(
            server(10047),
        ));
        assert_eq!(explains(&full), None, "insufficient resources is an answer");
        let missing =
            stream::LastRawMessageError::new(stream::LastRawMessageErrorKind::NoMessageFound);
        assert_eq!(explains(&missing), None);
        assert_eq!(explains(&std::io::Error::other("something else")), None);
    }
}

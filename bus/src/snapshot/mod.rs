//! Backups of JetStream streams through the server's own snapshot API
//! (`$JS.API.STREAM.SNAPSHOT.<stream>` and `$JS.API.STREAM.RESTORE.<stream>`, which async-nats
//! has no client for), on nats-server 2.9 and current servers alike.
//!
//! - [`frames`] (pure): a snapshot message is a chunk, the end or a failure; API answers.
//! - [`plan`] (pure): which streams of the account a backup takes, in restore order.
//! - [`manifest`] (pure): `manifest.json`, and the checks a restore makes before sending.
//! - [`client`] (I/O): one stream's snapshot written out, and one stream restored.
//!
//! The data is the server's own archive: stored as received, never parsed.

pub mod client;
pub mod frames;
pub mod manifest;
pub mod plan;

pub use client::{Restored, Snapshot, SnapshotOptions, restore, snapshot};

/// A snapshot or restore of one stream that failed; every variant names the stream.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Subscribing to the snapshot's deliver subject failed.
    #[error("{stream}: subscribing for the snapshot's chunks: {source}")]
    Subscribe {
        /// The stream.
        stream: String,
        /// The client's error.
        #[source]
        source: async_nats::SubscribeError,
    },
    /// Acknowledging a chunk failed.
    #[error("{stream}: acknowledging a chunk: {source}")]
    Publish {
        /// The stream.
        stream: String,
        /// The client's error.
        #[source]
        source: async_nats::PublishError,
    },
    /// A request (to the API, or a restore chunk) went unanswered or could not be sent.
    #[error("{stream}: {what}: {source}")]
    Request {
        /// The stream.
        stream: String,
        /// Which request (`the snapshot request`, `chunk 12`, …).
        what: String,
        /// The client's error.
        #[source]
        source: async_nats::RequestError,
    },
    /// The JetStream API answered with an error.
    #[error(
        "{stream}: the server answered {} {:?}{}",
        error.err_code,
        error.description,
        frames::hint(error.err_code).map(|h| format!(" — {h}")).unwrap_or_default()
    )]
    Api {
        /// The stream.
        stream: String,
        /// The server's error.
        error: frames::ApiError,
    },
    /// The server answered something the API does not document.
    #[error("{stream}: {what}: the server answered {answer:?}")]
    Answer {
        /// The stream.
        stream: String,
        /// Which request.
        what: String,
        /// The answer, as text.
        answer: String,
    },
    /// The chunks stopped coming, or the server ended the snapshot with a failure.
    #[error("{stream}: {description}")]
    Flow {
        /// The stream.
        stream: String,
        /// What happened and what to do.
        description: String,
    },
    /// Writing the snapshot out or reading it in failed.
    #[error("{stream}: {what}: {source}")]
    Io {
        /// The stream.
        stream: String,
        /// Writing or reading.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Results of this module.
pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;

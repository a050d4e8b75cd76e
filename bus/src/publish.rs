//! The one way to send an event: encode it within the event size limit, publish it with its
//! headers (`Content-Type`, `Nats-Msg-Id` for JetStream de-duplication), and — for the status
//! stream — wait for JetStream's acknowledgement, or for a request's answer, bounded by a
//! timeout. Every failure is one [`PublishError`] that names the subject and keeps its cause.
//!
//! ```no_run
//! # async fn example(client: async_nats::Client, ev: flotilla_bus::Event) -> Result<(), flotilla_bus::publish::PublishError> {
//! use flotilla_bus::publish::Publisher;
//! use std::time::Duration;
//!
//! let publisher = Publisher::new(client, 1024 * 1024, Duration::from_secs(5));
//! let ack = publisher.publish_acked("flotilla.status.5.c1.lease".into(), &ev).await?;
//! println!("stored as {}", ack.sequence);
//! # Ok(()) }
//! ```

use crate::envelope::{EnvelopeError, Event, headers};
use async_nats::jetstream::{self, context::PublishAckFuture, publish::PublishAck};
use bytes::Bytes;
use prost::Message;
use std::time::Duration;
use thiserror::Error;

/// Why an event was not sent, or its answer not read.
#[derive(Debug, Error)]
pub enum PublishError {
    /// The event could not be encoded.
    #[error("{subject}: the event cannot be encoded: {source}")]
    Encode {
        /// Where it was going.
        subject: String,
        /// The envelope's error.
        #[source]
        source: EnvelopeError,
    },
    /// The encoded event is over the size limit: sending it again will not help.
    #[error("{subject}: the event is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// Where it was going.
        subject: String,
        /// Its encoded size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The client could not send it (connection closed, no responders for a request, ...).
    #[error("{subject}: sending failed: {source}")]
    Publish {
        /// Where it was going.
        subject: String,
        /// The client's error.
        #[source]
        source: SendError,
    },
    /// JetStream refused it or did not store it (no stream, wrong expected sequence, stream
    /// unavailable). Whether it was stored is unknown when the cause is a lost connection.
    #[error("{subject}: JetStream did not acknowledge the event: {source}")]
    Ack {
        /// Where it was going.
        subject: String,
        /// The client's error.
        #[source]
        source: jetstream::context::PublishError,
    },
    /// No acknowledgement or answer within the timeout: the outcome is unknown.
    #[error("{subject}: no acknowledgement or answer within {timeout:?}")]
    Timeout {
        /// Where it was going.
        subject: String,
        /// The bound that passed.
        timeout: Duration,
    },
    /// The answer to a request is not an event carrying the expected message.
    #[error("{subject}: the answer is unreadable: {source}")]
    Decode {
        /// Where the request went.
        subject: String,
        /// The envelope's error.
        #[source]
        source: EnvelopeError,
    },
}

impl PublishError {
    /// The subject the event was for.
    pub fn subject(&self) -> &str {
        match self {
            Self::Encode { subject, .. }
            | Self::TooLarge { subject, .. }
            | Self::Publish { subject, .. }
            | Self::Ack { subject, .. }
            | Self::Timeout { subject, .. }
            | Self::Decode { subject, .. } => subject,
        }
    }

    /// Whether sending the same event again cannot succeed (it is too large or cannot be
    /// encoded): retrying is pointless, unlike a lost connection or a timeout.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Encode { .. } | Self::TooLarge { .. })
    }
}

/// What the client said when it could not send.
#[derive(Debug, Error)]
pub enum SendError {
    /// A core NATS publish failed.
    #[error(transparent)]
    Core(#[from] async_nats::PublishError),
    /// A JetStream publish could not be sent.
    #[error(transparent)]
    JetStream(#[from] jetstream::context::PublishError),
    /// A request could not be sent or was not answered (no responders).
    #[error(transparent)]
    Request(#[from] async_nats::RequestError),
}

/// Sends events over one NATS connection: core publishes, JetStream publishes waiting for the
/// acknowledgement, and requests waiting for a typed answer, each bounded by `timeout`.
/// Cheap to clone.
///
/// An agent of the prefix wire makes its publishers [`with_spoke`](Self::with_spoke): answers
/// and acknowledgements then come back through its one subscription ([`crate::spoke`]) instead
/// of async-nats' muxed inbox.
#[derive(Clone, Debug)]
pub struct Publisher {
    client: async_nats::Client,
    js: jetstream::Context,
    max_event_bytes: usize,
    timeout: Duration,
    spoke: Option<crate::spoke::Spoke>,
}

impl Publisher {
    /// A publisher over `client` refusing events larger than `max_event_bytes` and waiting at
    /// most `timeout` for each send, acknowledgement or answer.
    pub fn new(client: async_nats::Client, max_event_bytes: usize, timeout: Duration) -> Self {
        let js = jetstream::new(client.clone());
        Self::with_context(client, js, max_event_bytes, timeout)
    }

    /// As [`Publisher::new`], over a JetStream context already made for the connection: its
    /// clones share one acknowledgement task, where each new context starts its own (an agent
    /// makes one per connection and derives every publisher from it).
    pub fn over(js: &jetstream::Context, max_event_bytes: usize, timeout: Duration) -> Self {
        Self::with_context(js.client(), js.clone(), max_event_bytes, timeout)
    }

    /// As [`Publisher::new`], with a JetStream context of the caller's (a domain or API
    /// prefix).
    pub fn with_context(
        client: async_nats::Client,
        js: jetstream::Context,
        max_event_bytes: usize,
        timeout: Duration,
    ) -> Self {
        Self {
            client,
            js,
            max_event_bytes,
            timeout,
            spoke: None,
        }
    }

    /// The same publisher, its requests' answers and its JetStream acknowledgements read
    /// through `spoke` (an agent of the prefix wire; `None`: through async-nats' inbox).
    pub fn with_spoke(self, spoke: Option<crate::spoke::Spoke>) -> Self {
        Self { spoke, ..self }
    }

    /// The spoke its answers come through, if any.
    pub fn spoke(&self) -> Option<&crate::spoke::Spoke> {
        self.spoke.as_ref()
    }

    /// The same publisher with another timeout (requests and publishes often differ).
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            timeout,
            ..self.clone()
        }
    }

    /// The largest event it sends.
    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// The bound of each send, acknowledgement or answer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The connection it sends over.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Encodes `event` within the size limit.
    pub fn encode(&self, subject: &str, event: &Event) -> Result<Bytes, PublishError> {
        event
            .encode(self.max_event_bytes)
            .map_err(|source| match source {
                EnvelopeError::TooLarge { size, max } => PublishError::TooLarge {
                    subject: subject.to_string(),
                    size,
                    max,
                },
                source => PublishError::Encode {
                    subject: subject.to_string(),
                    source,
                },
            })
    }

    /// Publishes `event` on core NATS (a notification, or an answer to a request's reply
    /// subject): done once the client has taken it, nothing is acknowledged.
    pub async fn publish(&self, subject: String, event: &Event) -> Result<(), PublishError> {
        let bytes = self.encode(&subject, event)?;
        let sent = self
            .client
            .publish_with_headers(subject.clone(), headers(event), bytes);
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(PublishError::Publish {
                subject,
                source: source.into(),
            }),
            Err(_) => Err(self.timed_out(subject)),
        }
    }

    /// Publishes `event` into JetStream and waits for the stream's acknowledgement, the whole
    /// bounded by the timeout. A retry of the same event is de-duplicated by the stream
    /// (`Nats-Msg-Id` = the event id).
    pub async fn publish_acked(
        &self,
        subject: String,
        event: &Event,
    ) -> Result<PublishAck, PublishError> {
        let bytes = self.encode(&subject, event)?;
        if let Some(spoke) = &self.spoke {
            let asked = spoke.request(subject.clone(), headers(event), bytes, self.timeout);
            let limit = self.timeout + Duration::from_millis(100);
            return match tokio::time::timeout(limit, asked).await {
                Ok(Ok(answer)) => acknowledgement(subject, &answer),
                Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                    // As async-nats reads it: no stream listens on the subject.
                    Err(PublishError::Ack {
                        subject,
                        source: jetstream::context::PublishError::new(
                            jetstream::context::PublishErrorKind::StreamNotFound,
                        ),
                    })
                }
                Ok(Err(e)) if e.kind() != async_nats::RequestErrorKind::TimedOut => {
                    Err(PublishError::Publish {
                        subject,
                        source: e.into(),
                    })
                }
                Ok(Err(_)) | Err(_) => Err(self.timed_out(subject)),
            };
        }
        let attempt = async {
            let ack: PublishAckFuture = self
                .js
                .publish_with_headers(subject.clone(), headers(event), bytes)
                .await
                .map_err(|source| PublishError::Publish {
                    subject: subject.clone(),
                    source: source.into(),
                })?;
            ack.await.map_err(|source| PublishError::Ack {
                subject: subject.clone(),
                source,
            })
        };
        tokio::time::timeout(self.timeout, attempt)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(subject.clone())))
    }

    /// Sends `event` as a request and decodes the answer: an event whose data is a `T`
    /// (`message` names it in errors, e.g. `"RegistrationResponse"`). No answer within the
    /// timeout is [`PublishError::Timeout`]; nobody listening is [`PublishError::Publish`]
    /// (no responders, at once).
    pub async fn request<T: Message + Default>(
        &self,
        subject: String,
        event: &Event,
        message: &'static str,
    ) -> Result<T, PublishError> {
        let bytes = self.encode(&subject, event)?;
        // The client bounds the answer; this bounds a client too busy to send.
        let sent = async {
            match &self.spoke {
                Some(spoke) => {
                    spoke
                        .request(subject.clone(), headers(event), bytes, self.timeout)
                        .await
                }
                None => {
                    let request = async_nats::Request::new()
                        .payload(bytes)
                        .headers(headers(event))
                        .timeout(Some(self.timeout));
                    self.client.send_request(subject.clone(), request).await
                }
            }
        };
        let reply =
            match tokio::time::timeout(self.timeout + Duration::from_millis(100), sent).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::TimedOut => {
                    return Err(self.timed_out(subject));
                }
                Ok(Err(source)) => {
                    return Err(PublishError::Publish {
                        subject,
                        source: source.into(),
                    });
                }
                Err(_) => return Err(self.timed_out(subject)),
            };
        Event::decode(&reply.payload, self.max_event_bytes)
            .and_then(|answer| answer.decode_data::<T>(message))
            .map_err(|source| PublishError::Decode { subject, source })
    }

    fn timed_out(&self, subject: String) -> PublishError {
        PublishError::Timeout {
            subject,
            timeout: self.timeout,
        }
    }
}

/// Reads JetStream's answer to a publish as async-nats does: an acknowledgement, or the
/// stream's refusal with its kind (wrong expected sequence or message id, other).
fn acknowledgement(
    subject: String,
    answer: &async_nats::Message,
) -> Result<PublishAck, PublishError> {
    use jetstream::context::{PublishError as JsError, PublishErrorKind as Kind};
    use jetstream::response::Response;
    let refused = |source: JsError| PublishError::Ack {
        subject: subject.clone(),
        source,
    };
    match serde_json::from_slice::<Response<PublishAck>>(&answer.payload) {
        Ok(Response::Ok(ack)) => Ok(ack),
        Ok(Response::Err { error }) => {
            let code = error.error_code();
            let kind = if code == jetstream::ErrorCode::STREAM_WRONG_LAST_MESSAGE_ID {
                Kind::WrongLastMessageId
            } else if code == jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE {
                Kind::WrongLastSequence
            } else {
                Kind::Other
            };
            Err(refused(JsError::with_source(kind, error)))
        }
        Err(e) => Err(refused(JsError::with_source(Kind::Other, e))),
    }
}

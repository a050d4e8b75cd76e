//! CloudEvents (spec 1.0) in the CNCF protobuf format, with Flotilla's `type` grammar and
//! extension attributes.
//!
//! `type` = `io.flotilla.<group>.<version>.<resource>.<spec|status>.<action>`; the extension
//! attributes are `clustername`, `resourceid`, `resourceversion`, `sequenceid`, `statushash`,
//! `deletiontimestamp` and `traceparent`. 64-bit numbers travel as decimal strings because the
//! CloudEvents `Integer` type is 32-bit.

use bytes::Bytes;
use flotilla_api::cloudevents::{
    CloudEvent, cloud_event::CloudEventAttributeValue, cloud_event::Data,
    cloud_event::cloud_event_attribute_value::Attr,
};
use prost::Message;
use std::fmt;
use thiserror::Error;

/// Media type of an event in the protobuf format (NATS `Content-Type` header).
pub const CONTENT_TYPE: &str = "application/cloudevents+protobuf";
/// The only CloudEvents spec version accepted.
pub const SPEC_VERSION: &str = "1.0";
/// Default largest encoded event: NATS' default `max_payload`.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Extension attribute: target or origin cluster.
pub const ATTR_CLUSTERNAME: &str = "clustername";
/// Extension attribute: stable resource UUID.
pub const ATTR_RESOURCEID: &str = "resourceid";
/// Extension attribute: spec generation.
pub const ATTR_RESOURCEVERSION: &str = "resourceversion";
/// Extension attribute: agent-side monotonic counter.
pub const ATTR_SEQUENCEID: &str = "sequenceid";
/// Extension attribute: hash of the status payload.
pub const ATTR_STATUSHASH: &str = "statushash";
/// Extension attribute: marks a delete.
pub const ATTR_DELETIONTIMESTAMP: &str = "deletiontimestamp";
/// Extension attribute: W3C trace context.
pub const ATTR_TRACEPARENT: &str = "traceparent";
/// Optional CloudEvents attribute: event time.
pub const ATTR_TIME: &str = "time";
/// Optional CloudEvents attribute: media type of the data.
pub const ATTR_DATACONTENTTYPE: &str = "datacontenttype";

/// Why bytes are not a valid Flotilla event.
#[derive(Debug, Error)]
pub enum EnvelopeError {
    /// The encoded event is larger than allowed.
    #[error("event is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// Encoded size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The bytes are not a protobuf CloudEvent.
    #[error("not a protobuf CloudEvent: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A required attribute is missing.
    #[error("missing required attribute {0:?}")]
    Missing(&'static str),
    /// An attribute has a bad value.
    #[error("attribute {name:?}: {reason}")]
    Invalid {
        /// Attribute name.
        name: String,
        /// What was wrong.
        reason: String,
    },
    /// The event has no `binary_data` payload.
    #[error("event {event_type} carries no binary data")]
    NoData {
        /// The event type.
        event_type: String,
    },
    /// The payload does not decode as the message its type promises.
    #[error("event {event_type}: data is not a valid {message}: {source}")]
    Data {
        /// The event type.
        event_type: String,
        /// Expected message name.
        message: &'static str,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
}

impl EnvelopeError {
    /// A short, bounded label for metrics (`too_large`, `decode`, `missing_clustername`, …).
    pub fn reason(&self) -> String {
        match self {
            Self::TooLarge { .. } => "too_large".into(),
            Self::Decode(_) => "decode".into(),
            Self::Missing(a) => format!("missing_{a}"),
            Self::Invalid { name, .. } => match name.as_str() {
                "id"
                | "source"
                | "specversion"
                | "type"
                | ATTR_CLUSTERNAME
                | ATTR_RESOURCEID
                | ATTR_RESOURCEVERSION
                | ATTR_SEQUENCEID
                | ATTR_STATUSHASH
                | ATTR_DELETIONTIMESTAMP
                | ATTR_TRACEPARENT
                | ATTR_TIME => {
                    format!("invalid_{name}")
                }
                _ => "invalid_attribute".into(),
            },
            Self::NoData { .. } => "no_data".into(),
            Self::Data { .. } => "bad_data".into(),
        }
    }
}

/// Direction of an event: `spec` (hub → agent) or `status` (agent → hub).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Desired state, hub → agent.
    Spec,
    /// Observed state, agent → hub.
    Status,
}

/// The action of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Create.
    CreateRequest,
    /// Update.
    UpdateRequest,
    /// Delete.
    DeleteRequest,
    /// Ask the other side for its full state.
    ResyncRequest,
    /// Answer to a resync request.
    ResyncResponse,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Self::CreateRequest => "create_request",
            Self::UpdateRequest => "update_request",
            Self::DeleteRequest => "delete_request",
            Self::ResyncRequest => "resync_request",
            Self::ResyncResponse => "resync_response",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "create_request" => Self::CreateRequest,
            "update_request" => Self::UpdateRequest,
            "delete_request" => Self::DeleteRequest,
            "resync_request" => Self::ResyncRequest,
            "resync_response" => Self::ResyncResponse,
            _ => return None,
        })
    }
}

/// A parsed event `type`: `io.flotilla.<group>.<version>.<resource>.<spec|status>.<action>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventType {
    /// API group (`cluster`, `work`, …).
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Resource (`registration`, `lease`, `managedcluster`, `manifestwork`, …).
    pub resource: String,
    /// spec or status.
    pub direction: Direction,
    /// The action.
    pub action: Action,
}

impl EventType {
    /// Builds a type.
    pub fn new(
        group: &str,
        version: &str,
        resource: &str,
        direction: Direction,
        action: Action,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            direction,
            action,
        }
    }

    /// Parses a type string, saying what is wrong with it.
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 7 {
            return Err(format!(
                "{s:?} must have 7 dot-separated tokens: io.flotilla.<group>.<version>.<resource>.<spec|status>.<action>"
            ));
        }
        if parts[0] != "io" || parts[1] != "flotilla" {
            return Err(format!("{s:?} must start with io.flotilla."));
        }
        for (what, tok) in [
            ("group", parts[2]),
            ("version", parts[3]),
            ("resource", parts[4]),
        ] {
            if tok.is_empty()
                || !tok
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            {
                return Err(format!(
                    "{s:?}: {what} token {tok:?} must be lower-case alphanumeric"
                ));
            }
        }
        let direction = match parts[5] {
            "spec" => Direction::Spec,
            "status" => Direction::Status,
            other => return Err(format!("{s:?}: {other:?} must be spec or status")),
        };
        let action = Action::parse(parts[6]).ok_or_else(|| {
            format!(
                "{s:?}: unknown action {:?} (want create_request, update_request, delete_request, resync_request or resync_response)",
                parts[6]
            )
        })?;
        Ok(Self::new(parts[2], parts[3], parts[4], direction, action))
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "io.flotilla.{}.{}.{}.{}.{}",
            self.group,
            self.version,
            self.resource,
            match self.direction {
                Direction::Spec => "spec",
                Direction::Status => "status",
            },
            self.action.as_str()
        )
    }
}

/// Well-known event types.
pub mod types {
    use super::{Action, Direction, EventType};

    /// Agent asks to join (payload `RegistrationRequest`).
    pub fn registration_request() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "registration",
            Direction::Status,
            Action::CreateRequest,
        )
    }
    /// Hub answers or announces a registration state (payload `RegistrationResponse`).
    pub fn registration_response() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "registration",
            Direction::Spec,
            Action::UpdateRequest,
        )
    }
    /// Hub tells the agent its cluster was deleted (payload `RegistrationResponse`).
    pub fn cluster_deleted() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "managedcluster",
            Direction::Spec,
            Action::DeleteRequest,
        )
    }
    /// Agent renews its lease (payload `LeaseRenewal`).
    pub fn lease_renewal() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "lease",
            Direction::Status,
            Action::UpdateRequest,
        )
    }
    /// Hub asks an agent to read spoke resources (payload `ProxyRequest`).
    pub fn proxy_request() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "proxy",
            Direction::Spec,
            Action::CreateRequest,
        )
    }
    /// The agent's answer to a proxy request (payload `ProxyResponse`).
    pub fn proxy_response() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "proxy",
            Direction::Status,
            Action::CreateRequest,
        )
    }
    /// Agent reports cluster status (payload `ClusterStatusReport`).
    pub fn cluster_status() -> EventType {
        EventType::new(
            "cluster",
            "v1",
            "managedcluster",
            Direction::Status,
            Action::UpdateRequest,
        )
    }
}

/// A Flotilla CloudEvent with its attributes parsed and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Unique id (UUIDv4 unless set).
    pub id: String,
    /// URI-reference of the producer (`flotilla-hub`, `flotilla-agent/<cluster>`).
    pub source: String,
    /// Event type.
    pub event_type: EventType,
    /// `clustername` (required on every Flotilla event).
    pub cluster: String,
    /// `resourceid`.
    pub resource_id: Option<String>,
    /// `resourceversion`.
    pub resource_version: Option<i64>,
    /// `sequenceid`.
    pub sequence_id: Option<u64>,
    /// `statushash`.
    pub status_hash: Option<String>,
    /// `deletiontimestamp`.
    pub deletion_timestamp: Option<prost_types::Timestamp>,
    /// `traceparent`.
    pub traceparent: Option<String>,
    /// `time`.
    pub time: Option<prost_types::Timestamp>,
    /// The payload (`binary_data`): an encoded Flotilla protobuf message.
    pub data: Bytes,
}

impl Event {
    /// A new event with a fresh id and the current time.
    pub fn new(
        event_type: EventType,
        source: impl Into<String>,
        cluster: impl Into<String>,
        data: &impl Message,
    ) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            source: source.into(),
            event_type,
            cluster: cluster.into(),
            resource_id: None,
            resource_version: None,
            sequence_id: None,
            status_hash: None,
            deletion_timestamp: None,
            traceparent: None,
            time: Some(flotilla_api::meta::now()),
            data: Bytes::from(data.encode_to_vec()),
        }
    }

    /// Sets `sequenceid`.
    pub fn with_sequence(mut self, seq: u64) -> Self {
        self.sequence_id = Some(seq);
        self
    }

    /// Sets `statushash` to the hash of the payload.
    pub fn with_status_hash(mut self) -> Self {
        self.status_hash = Some(crate::ids::status_hash(&self.data));
        self
    }

    /// Sets `resourceid`.
    pub fn with_resource_id(mut self, id: impl Into<String>) -> Self {
        self.resource_id = Some(id.into());
        self
    }

    /// Sets `resourceversion`.
    pub fn with_resource_version(mut self, v: i64) -> Self {
        self.resource_version = Some(v);
        self
    }

    /// Decodes the payload as `M`.
    pub fn decode_data<M: Message + Default>(
        &self,
        message: &'static str,
    ) -> Result<M, EnvelopeError> {
        M::decode(self.data.as_ref()).map_err(|source| EnvelopeError::Data {
            event_type: self.event_type.to_string(),
            message,
            source,
        })
    }

    /// Converts to the protobuf CloudEvent.
    pub fn to_cloudevent(&self) -> CloudEvent {
        let mut attributes = std::collections::HashMap::new();
        let s = |v: String| CloudEventAttributeValue {
            attr: Some(Attr::CeString(v)),
        };
        let ts = |v: prost_types::Timestamp| CloudEventAttributeValue {
            attr: Some(Attr::CeTimestamp(v)),
        };
        attributes.insert(ATTR_CLUSTERNAME.to_string(), s(self.cluster.clone()));
        attributes.insert(
            ATTR_DATACONTENTTYPE.to_string(),
            s("application/protobuf".into()),
        );
        if let Some(v) = &self.resource_id {
            attributes.insert(ATTR_RESOURCEID.into(), s(v.clone()));
        }
        if let Some(v) = self.resource_version {
            attributes.insert(ATTR_RESOURCEVERSION.into(), s(v.to_string()));
        }
        if let Some(v) = self.sequence_id {
            attributes.insert(ATTR_SEQUENCEID.into(), s(v.to_string()));
        }
        if let Some(v) = &self.status_hash {
            attributes.insert(ATTR_STATUSHASH.into(), s(v.clone()));
        }
        if let Some(v) = self.deletion_timestamp {
            attributes.insert(ATTR_DELETIONTIMESTAMP.into(), ts(v));
        }
        if let Some(v) = &self.traceparent {
            attributes.insert(ATTR_TRACEPARENT.into(), s(v.clone()));
        }
        if let Some(v) = self.time {
            attributes.insert(ATTR_TIME.into(), ts(v));
        }
        CloudEvent {
            id: self.id.clone(),
            source: self.source.clone(),
            spec_version: SPEC_VERSION.into(),
            r#type: self.event_type.to_string(),
            attributes,
            data: Some(Data::BinaryData(self.data.to_vec())),
        }
    }

    /// Encodes the event, refusing to produce more than `max` bytes.
    pub fn encode(&self, max: usize) -> Result<Bytes, EnvelopeError> {
        let bytes = self.to_cloudevent().encode_to_vec();
        if bytes.len() > max {
            return Err(EnvelopeError::TooLarge {
                size: bytes.len(),
                max,
            });
        }
        Ok(Bytes::from(bytes))
    }

    /// Decodes and validates bytes received from the wire. Never panics.
    pub fn decode(bytes: &[u8], max: usize) -> Result<Self, EnvelopeError> {
        if bytes.len() > max {
            return Err(EnvelopeError::TooLarge {
                size: bytes.len(),
                max,
            });
        }
        let ce = CloudEvent::decode(bytes)?;
        Self::from_cloudevent(ce)
    }

    /// Validates a protobuf CloudEvent and extracts Flotilla's attributes.
    pub fn from_cloudevent(ce: CloudEvent) -> Result<Self, EnvelopeError> {
        let invalid = |name: &str, reason: String| EnvelopeError::Invalid {
            name: name.to_string(),
            reason,
        };
        if ce.id.is_empty() {
            return Err(EnvelopeError::Missing("id"));
        }
        if ce.source.is_empty() {
            return Err(EnvelopeError::Missing("source"));
        }
        if ce.spec_version.is_empty() {
            return Err(EnvelopeError::Missing("specversion"));
        }
        if ce.spec_version != SPEC_VERSION {
            return Err(invalid(
                "specversion",
                format!(
                    "{:?} is not supported (want {SPEC_VERSION})",
                    ce.spec_version
                ),
            ));
        }
        if ce.r#type.is_empty() {
            return Err(EnvelopeError::Missing("type"));
        }
        let event_type = EventType::parse(&ce.r#type).map_err(|r| invalid("type", r))?;
        for name in ce.attributes.keys() {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            {
                return Err(invalid(
                    name,
                    "attribute names must be lower-case letters and digits".into(),
                ));
            }
        }
        let string_attr = |name: &'static str| -> Result<Option<String>, EnvelopeError> {
            match ce.attributes.get(name).and_then(|v| v.attr.as_ref()) {
                None => Ok(None),
                Some(Attr::CeString(s) | Attr::CeUri(s) | Attr::CeUriRef(s)) => Ok(Some(s.clone())),
                Some(Attr::CeInteger(i)) => Ok(Some(i.to_string())),
                Some(_) => Err(EnvelopeError::Invalid {
                    name: name.into(),
                    reason: "must be a string".into(),
                }),
            }
        };
        let time_attr =
            |name: &'static str| -> Result<Option<prost_types::Timestamp>, EnvelopeError> {
                match ce.attributes.get(name).and_then(|v| v.attr.as_ref()) {
                    None => Ok(None),
                    Some(Attr::CeTimestamp(t)) => Ok(Some(*t)),
                    Some(Attr::CeString(s)) => flotilla_api::meta::parse_rfc3339(s)
                        .map(Some)
                        .ok_or_else(|| EnvelopeError::Invalid {
                            name: name.into(),
                            reason: format!("{s:?} is not an RFC 3339 timestamp"),
                        }),
                    Some(_) => Err(EnvelopeError::Invalid {
                        name: name.into(),
                        reason: "must be a timestamp".into(),
                    }),
                }
            };
        let cluster =
            string_attr(ATTR_CLUSTERNAME)?.ok_or(EnvelopeError::Missing(ATTR_CLUSTERNAME))?;
        flotilla_api::names::validate_cluster_name(&cluster)
            .map_err(|e| invalid(ATTR_CLUSTERNAME, e.reason))?;
        let resource_version = string_attr(ATTR_RESOURCEVERSION)?
            .map(|s| {
                s.parse::<i64>()
                    .map_err(|_| invalid(ATTR_RESOURCEVERSION, format!("{s:?} is not an int64")))
            })
            .transpose()?;
        let sequence_id = string_attr(ATTR_SEQUENCEID)?
            .map(|s| {
                s.parse::<u64>().map_err(|_| {
                    invalid(ATTR_SEQUENCEID, format!("{s:?} is not an unsigned integer"))
                })
            })
            .transpose()?;
        let resource_id = string_attr(ATTR_RESOURCEID)?;
        if let Some(id) = &resource_id {
            uuid::Uuid::parse_str(id)
                .map_err(|_| invalid(ATTR_RESOURCEID, format!("{id:?} is not a UUID")))?;
        }
        let data = match ce.data {
            Some(Data::BinaryData(b)) => Bytes::from(b),
            Some(Data::ProtoData(any)) => Bytes::from(any.value),
            Some(Data::TextData(_)) | None => {
                return Err(EnvelopeError::NoData {
                    event_type: event_type.to_string(),
                });
            }
        };
        Ok(Self {
            id: ce.id,
            source: ce.source,
            cluster,
            resource_id,
            resource_version,
            sequence_id,
            status_hash: string_attr(ATTR_STATUSHASH)?,
            deletion_timestamp: time_attr(ATTR_DELETIONTIMESTAMP)?,
            traceparent: string_attr(ATTR_TRACEPARENT)?,
            time: time_attr(ATTR_TIME)?,
            event_type,
            data,
        })
    }
}

/// NATS headers for an event: `Content-Type`, and `Nats-Msg-Id` (JetStream de-duplication of
/// retried publishes).
pub fn headers(event: &Event) -> async_nats::HeaderMap {
    let mut h = async_nats::HeaderMap::new();
    h.insert("Content-Type", CONTENT_TYPE);
    h.insert("Nats-Msg-Id", event.id.as_str());
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::LeaseRenewal;
    use proptest::prelude::*;

    fn lease(cluster: &str) -> Event {
        Event::new(
            types::lease_renewal(),
            "flotilla-agent/c1",
            cluster,
            &LeaseRenewal {
                cluster_name: cluster.into(),
                renew_time: Some(flotilla_api::meta::now()),
            },
        )
    }

    #[test]
    fn encode_decode_round_trips_every_attribute() {
        let mut ev = lease("c1")
            .with_sequence(u64::MAX)
            .with_status_hash()
            .with_resource_id(crate::ids::resource_id("c1", "w", "c1", "w"))
            .with_resource_version(i64::MAX);
        ev.deletion_timestamp = Some(flotilla_api::meta::now());
        ev.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        let bytes = ev.encode(DEFAULT_MAX_EVENT_BYTES).unwrap();
        let back = Event::decode(&bytes, DEFAULT_MAX_EVENT_BYTES).unwrap();
        assert_eq!(back, ev);
        let payload: LeaseRenewal = back.decode_data("LeaseRenewal").unwrap();
        assert_eq!(payload.cluster_name, "c1");
    }

    #[test]
    fn oversized_events_are_refused_both_ways() {
        let ev = lease("c1");
        assert!(matches!(ev.encode(10), Err(EnvelopeError::TooLarge { .. })));
        let big = vec![0u8; 100];
        assert!(matches!(
            Event::decode(&big, 10),
            Err(EnvelopeError::TooLarge { .. })
        ));
    }

    #[test]
    fn type_grammar_is_enforced() {
        assert!(EventType::parse("io.flotilla.cluster.v1.lease.status.update_request").is_ok());
        for bad in [
            "io.flotilla.cluster.v1.lease.status",
            "com.example.cluster.v1.lease.status.update_request",
            "io.flotilla.Cluster.v1.lease.status.update_request",
            "io.flotilla.cluster.v1.lease.sideways.update_request",
            "io.flotilla.cluster.v1.lease.status.explode",
        ] {
            assert!(EventType::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn missing_and_invalid_attributes_name_the_attribute() {
        let mut ce = lease("c1").to_cloudevent();
        ce.attributes.remove(ATTR_CLUSTERNAME);
        let err = Event::from_cloudevent(ce).unwrap_err();
        assert!(
            matches!(err, EnvelopeError::Missing("clustername")),
            "{err}"
        );

        let mut ce = lease("c1").to_cloudevent();
        ce.attributes.insert(
            ATTR_SEQUENCEID.into(),
            CloudEventAttributeValue {
                attr: Some(Attr::CeString("minus-one".into())),
            },
        );
        let err = Event::from_cloudevent(ce).unwrap_err();
        assert_eq!(err.reason(), "invalid_sequenceid");

        let mut ce = lease("c1").to_cloudevent();
        ce.spec_version = "0.3".into();
        assert_eq!(
            Event::from_cloudevent(ce).unwrap_err().reason(),
            "invalid_specversion"
        );

        let mut ce = lease("Bad.Name").to_cloudevent();
        ce.id = "x".into();
        assert_eq!(
            Event::from_cloudevent(ce).unwrap_err().reason(),
            "invalid_clustername"
        );
    }

    #[test]
    fn text_data_is_rejected() {
        let mut ce = lease("c1").to_cloudevent();
        ce.data = Some(Data::TextData("hi".into()));
        assert!(matches!(
            Event::from_cloudevent(ce),
            Err(EnvelopeError::NoData { .. })
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            // Whatever decodes has passed validation.
            if let Ok(ev) = Event::decode(&bytes, DEFAULT_MAX_EVENT_BYTES) {
                prop_assert!(flotilla_api::names::validate_cluster_name(&ev.cluster).is_ok());
                prop_assert!(EventType::parse(&ev.event_type.to_string()).is_ok());
            }
        }

        #[test]
        fn round_trip_arbitrary_events(
            cluster in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
            seq in any::<u64>(),
            rv in any::<i64>(),
            payload in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let mut ev = lease(&cluster).with_sequence(seq).with_resource_version(rv);
            ev.data = Bytes::from(payload);
            let bytes = ev.encode(DEFAULT_MAX_EVENT_BYTES).unwrap();
            prop_assert_eq!(Event::decode(&bytes, DEFAULT_MAX_EVENT_BYTES).unwrap(), ev);
        }

        #[test]
        fn truncated_events_give_typed_errors(cut in 0usize..64) {
            let bytes = lease("c1").encode(DEFAULT_MAX_EVENT_BYTES).unwrap();
            let cut = cut.min(bytes.len());
            let result = Event::decode(&bytes[..bytes.len() - cut], DEFAULT_MAX_EVENT_BYTES);
            if cut == 0 {
                prop_assert!(result.is_ok());
            } else if let Ok(ev) = result {
                // A cut on a field boundary can still decode; it must still be valid.
                prop_assert!(!ev.id.is_empty() && !ev.cluster.is_empty());
            }
        }
    }
}

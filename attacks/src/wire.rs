//! The wire format as an attacker writes it: CloudEvents in the protobuf format carrying
//! Flotilla's protobuf payloads, and the subject scheme (DESIGN.md §3). Written from the
//! protocol description, not from the bus crate, so that the suite attacks what goes over the
//! wire rather than what the project's own code happens to produce.

use bytes::Bytes;
use flotilla_api::cloudevents::CloudEvent;
use flotilla_api::cloudevents::cloud_event::cloud_event_attribute_value::Attr;
use flotilla_api::cloudevents::cloud_event::{CloudEventAttributeValue, Data};
use flotilla_api::v1;
use prost::Message;
use std::collections::HashMap;

/// Number of status shards (a protocol constant).
pub const SHARDS: u32 = 32;

/// `Content-Type` of a protobuf CloudEvent.
pub const CONTENT_TYPE: &str = "application/cloudevents+protobuf";

/// Event type of a registration request.
pub const REGISTRATION_REQUEST: &str = "io.flotilla.cluster.v1.registration.status.create_request";
/// Event type of a lease renewal.
pub const LEASE_RENEWAL: &str = "io.flotilla.cluster.v1.lease.status.update_request";
/// Event type of a cluster status report.
pub const CLUSTER_STATUS: &str = "io.flotilla.cluster.v1.managedcluster.status.update_request";
/// Event type of a work status report.
pub const WORK_STATUS: &str = "io.flotilla.work.v1.manifestwork.status.update_request";
/// Event type of a MirrorPeer request.
pub const PEER_SYNC: &str = "io.flotilla.multicluster.v1alpha1.mirrorpeer.spec.resync_request";
/// Event type of a spec resync request.
pub const SPEC_RESYNC: &str = "io.flotilla.work.v1.manifestwork.spec.resync_request";
/// Event type of an add-on credentials request.
pub const ADDON_CREDENTIALS: &str = "io.flotilla.addon.v1alpha1.credentials.status.create_request";
/// Event type of an add-on placement score report.
pub const SCORE_REPORT: &str =
    "io.flotilla.cluster.v1alpha1.addonplacementscore.status.update_request";

/// Event type of a policy status report.
pub const POLICY_STATUS: &str = "io.flotilla.policy.v1.policy.status.update_request";

/// The UUID namespace of resource ids (a protocol constant).
const RESOURCE_ID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x5c1f_6c1e_8a0b_4c9e_9d3f_1b2a_7e6d_4f10);

/// The resource id of the replicated policy `name` (`<namespace>.<name>`) on `cluster`: UUID v5
/// of `<cluster>/Policy/<cluster>/<name>`.
pub fn policy_resource_id(cluster: &str, name: &str) -> String {
    let key = format!("{cluster}/Policy/{cluster}/{name}");
    uuid::Uuid::new_v5(&RESOURCE_ID_NAMESPACE, key.as_bytes()).to_string()
}

/// A policy status report sent as `sender`, claiming to be about `claimed`'s copy of policy
/// `name` (resource id `id`) at `generation`, with compliance `compliant`.
pub fn policy_status(
    sender: &str,
    claimed: &str,
    name: &str,
    id: &str,
    generation: i64,
    compliant: &str,
) -> Bytes {
    event(
        POLICY_STATUS,
        sender,
        &v1::PolicyStatusReport {
            cluster_name: claimed.into(),
            policy_name: name.into(),
            resource_id: id.into(),
            observed_generation: generation,
            compliant: compliant.into(),
            details: Vec::new(),
            deleted: false,
        },
        &[
            ("resourceid", id.into()),
            ("resourceversion", generation.to_string()),
            ("sequenceid", u64::MAX.to_string()),
        ],
    )
}

/// A cluster's status shard: FNV-1a (32 bit) of its name, mod [`SHARDS`].
pub fn shard(cluster: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in cluster.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % SHARDS
}

/// `flotilla.status.<shard>.<cluster>.<kind>[.<id>]`.
pub fn status_subject(cluster: &str, kind: &str, id: Option<&str>) -> String {
    match id {
        Some(id) => format!("flotilla.status.{}.{cluster}.{kind}.{id}", shard(cluster)),
        None => format!("flotilla.status.{}.{cluster}.{kind}", shard(cluster)),
    }
}

/// Every status subject of `cluster` (a stream subject filter).
pub fn status_filter(cluster: &str) -> String {
    format!("flotilla.status.{}.{cluster}.>", shard(cluster))
}

/// `flotilla.register.<cluster>`.
pub fn register_subject(cluster: &str) -> String {
    format!("flotilla.register.{cluster}")
}

/// `flotilla.sync.<cluster>`.
pub fn sync_subject(cluster: &str) -> String {
    format!("flotilla.sync.{cluster}")
}

/// `flotilla.peers.<cluster>` (MirrorPeer exchange).
pub fn peers_subject(cluster: &str) -> String {
    format!("flotilla.peers.{cluster}")
}

/// `flotilla.addoncreds.<cluster>`.
pub fn addoncreds_subject(cluster: &str) -> String {
    format!("flotilla.addoncreds.{cluster}")
}

/// `flotilla.spec.<cluster>` (the previous wire).
pub fn spec_subject(cluster: &str) -> String {
    format!("flotilla.spec.{cluster}")
}

/// `flotilla.to.<cluster>.<kind>`: what the hub sends an agent of the one-subscription wire
/// (`spec`, `proxy`, `kubeapi`), and `reply.<token>` for the answers to its own requests.
pub fn to_subject(cluster: &str, kind: &str) -> String {
    format!("flotilla.to.{cluster}.{kind}")
}

/// `flotilla.to.<cluster>.>`: the one subscription of an agent of that wire.
pub fn to_all(cluster: &str) -> String {
    format!("flotilla.to.{cluster}.>")
}

/// A protobuf CloudEvent of type `ty` from `cluster` carrying `data`, with extra string
/// attributes.
pub fn event(ty: &str, cluster: &str, data: &impl Message, extra: &[(&str, String)]) -> Bytes {
    let s = |v: String| CloudEventAttributeValue {
        attr: Some(Attr::CeString(v)),
    };
    let mut attributes = HashMap::new();
    attributes.insert("clustername".to_string(), s(cluster.to_string()));
    attributes.insert(
        "datacontenttype".to_string(),
        s("application/protobuf".into()),
    );
    for (k, v) in extra {
        attributes.insert((*k).to_string(), s(v.clone()));
    }
    CloudEvent {
        id: uuid::Uuid::new_v4().to_string(),
        source: format!("flotilla-agent/{cluster}"),
        spec_version: "1.0".into(),
        r#type: ty.into(),
        attributes,
        data: Some(Data::BinaryData(data.encode_to_vec())),
    }
    .encode_to_vec()
    .into()
}

/// NATS headers of an event (the content type).
pub fn headers() -> async_nats::HeaderMap {
    let mut h = async_nats::HeaderMap::new();
    h.insert("Content-Type", CONTENT_TYPE);
    h
}

/// Bytes that are no event at all.
pub fn junk() -> Bytes {
    Bytes::from_static(b"\xff\x00not a cloudevent {\"purge\":true}")
}

/// What a registration says about the cluster.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// The name asked for.
    pub cluster: String,
    /// The agent's public NKey (`U…`).
    pub public_key: String,
    /// Ask for credentials (what an agent without any does).
    pub credentials_wanted: bool,
    /// Cluster claims (`name`, `value`).
    pub claims: Vec<(String, String)>,
    /// Capacity (`cpu`, `memory`).
    pub capacity: Vec<(String, String)>,
    /// Labels asked for.
    pub labels: Vec<(String, String)>,
    /// Kubernetes version.
    pub kubernetes_version: String,
}

impl Registration {
    /// A plain request for `cluster` with `public_key`, asking for credentials.
    pub fn new(cluster: &str, public_key: &str) -> Self {
        Self {
            cluster: cluster.into(),
            public_key: public_key.into(),
            credentials_wanted: true,
            kubernetes_version: "v1.30.2".into(),
            ..Self::default()
        }
    }

    /// The `RegistrationRequest` payload.
    pub fn request(&self) -> v1::RegistrationRequest {
        v1::RegistrationRequest {
            cluster_name: self.cluster.clone(),
            labels: self.labels.iter().cloned().collect(),
            claims: self
                .claims
                .iter()
                .map(|(name, value)| v1::ClusterClaim {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
            capacity: self.capacity.iter().cloned().collect(),
            allocatable: self.capacity.iter().cloned().collect(),
            kubernetes_version: self.kubernetes_version.clone(),
            // A hostile agent claims whatever version the hub accepts (the version narrows
            // what a hub accepts; it never authenticates).
            agent_version: flotilla_api::version::VERSION.into(),
            agent_public_key: self.public_key.clone(),
            credentials_wanted: self.credentials_wanted,
            request_id: uuid::Uuid::new_v4().to_string(),
            // The previous wire: an attacker's registration never moves where a cluster's
            // specs go (only a registration whose report counts does).
            listens_under_prefix: false,
        }
    }

    /// The request as an event.
    pub fn event(&self) -> Bytes {
        event(REGISTRATION_REQUEST, &self.cluster, &self.request(), &[])
    }
}

/// A lease renewal from `cluster`.
pub fn lease(cluster: &str) -> Bytes {
    event(
        LEASE_RENEWAL,
        cluster,
        &v1::LeaseRenewal {
            cluster_name: cluster.into(),
            renew_time: Some(now()),
        },
        &[("sequenceid", "1".into())],
    )
}

/// A cluster status report from `cluster`.
pub fn cluster_status(cluster: &str) -> Bytes {
    event(
        CLUSTER_STATUS,
        cluster,
        &v1::ClusterStatusReport {
            cluster_name: cluster.into(),
            healthy: true,
            ..Default::default()
        },
        &[("sequenceid", "1".into())],
    )
}

/// A work status report from `cluster` for resource `id`.
pub fn work_status(cluster: &str, id: &str, sequence: u64) -> Bytes {
    event(
        WORK_STATUS,
        cluster,
        &v1::WorkStatusReport {
            cluster_name: cluster.into(),
            work_name: format!("w-{id}"),
            resource_id: id.into(),
            observed_generation: 1,
            status: None,
            deleted: false,
            received_generation: 0,
        },
        &[
            ("resourceid", id.into()),
            ("sequenceid", sequence.to_string()),
        ],
    )
}

/// A spec resync request from `cluster` holding nothing.
pub fn spec_resync(cluster: &str) -> Bytes {
    event(
        SPEC_RESYNC,
        cluster,
        &v1::SpecResyncRequest {
            cluster_name: cluster.into(),
            versions: HashMap::new(),
            digest: String::new(),
            takes_specs: true,
            takes_busy: true,
            uids: HashMap::new(),
        },
        &[],
    )
}

/// A MirrorPeer request from `cluster` with a fresh curve key and nothing else.
pub fn peer_sync(cluster: &str) -> Bytes {
    event(
        PEER_SYNC,
        cluster,
        &v1::PeerSyncRequest {
            cluster_name: cluster.into(),
            xkey: nkeys::XKey::new().public_key(),
            ..Default::default()
        },
        &[],
    )
}

/// An add-on credentials request from `cluster`.
pub fn addon_credentials(cluster: &str, public_key: &str) -> Bytes {
    event(
        ADDON_CREDENTIALS,
        cluster,
        &v1::AddOnCredentialsRequest {
            cluster_name: cluster.into(),
            addon_name: "reporter".into(),
            public_key: public_key.into(),
        },
        &[],
    )
}

/// The current time as a protobuf timestamp.
pub fn now() -> prost_types::Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Why a hub answer to a registration request does not decode.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The payload is no CloudEvent.
    #[error("not a CloudEvent: {0}")]
    NotCloudEvent(#[source] prost::DecodeError),
    /// The event carries no binary data.
    #[error("event {0} carries no binary data")]
    NoData(String),
    /// The event's data is no `RegistrationResponse`.
    #[error("not a RegistrationResponse: {0}")]
    NotResponse(#[source] prost::DecodeError),
}

/// Decodes a hub answer to a registration request.
pub fn registration_response(payload: &[u8]) -> Result<v1::RegistrationResponse, AnswerError> {
    let ce = CloudEvent::decode(payload).map_err(AnswerError::NotCloudEvent)?;
    match ce.data {
        Some(Data::BinaryData(bytes)) => {
            v1::RegistrationResponse::decode(bytes.as_slice()).map_err(AnswerError::NotResponse)
        }
        _ => Err(AnswerError::NoData(ce.r#type)),
    }
}

/// Whether `bytes` look like something other than a stored object: a JSON document (a
/// JetStream API request or acknowledgement) or a CloudEvent (a hub answer).
pub fn foreign(bytes: &[u8]) -> Option<String> {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
        return Some(format!("a JSON document: {v}"));
    }
    if let Ok(ce) = CloudEvent::decode(bytes)
        && ce.spec_version == "1.0"
        && ce.r#type.starts_with("io.flotilla.")
    {
        return Some(format!("a CloudEvent of type {}", ce.r#type));
    }
    None
}

/// The subject (`sub`) and expiry of a NATS user JWT, read without checking its signature.
pub fn jwt_subject(jwt: &str) -> Option<String> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = data_encoding::BASE64URL_NOPAD
        .decode(payload.trim_end_matches('=').as_bytes())
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v["sub"].as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_follow_the_protocol_constant() {
        // FNV-1a 32 of "" is the offset basis.
        assert_eq!(shard(""), 0x811c_9dc5 % SHARDS);
        assert!(status_subject("edge-1", "lease", None).starts_with("flotilla.status."));
        assert_eq!(
            status_subject("edge-1", "work", Some("x")),
            format!("flotilla.status.{}.edge-1.work.x", shard("edge-1"))
        );
    }

    #[test]
    fn registration_events_round_trip_and_junk_is_not_foreign_json() {
        let reg = Registration::new("edge-1", "UKEY");
        let ce = CloudEvent::decode(reg.event().as_ref()).unwrap();
        assert_eq!(ce.r#type, REGISTRATION_REQUEST);
        assert!(foreign(&reg.event()).is_some());
        assert!(foreign(br#"{"stream":"FLOTILLA_STATUS","seq":3}"#).is_some());
        assert!(foreign(&junk()).is_none());
    }
}

//! A ManifestWork as the hub holds it (pure): metadata and the hub's bookkeeping in prost's
//! types, the spec and the status as their protobuf encodings, decoded when they are read.
//!
//! Agents write a work's status far more often than the API, the dashboard, replica sets and
//! add-ons read it, and prost's types give every condition's four strings and every manifest's
//! names an allocation each: a one-manifest work's status was 3.4 KB of the hub's heap per
//! cluster in a fanout (`heaptrack`), its encoding a few hundred bytes. A [`StoredWork`] encodes
//! to exactly a ManifestWork's bytes and decodes from them ([`prost::Message`]), so the works
//! bucket, the views and the works inventory hold it as it is; a reader that wants the status
//! decodes it ([`StoredWork::status`], [`StoredWork::to_work`]).
//!
//! The spec is held the same way, shared: every status report copies the work it updates
//! (the copy is written to the bucket, the original stays with readers), and a spec of three
//! manifests was most of that copy and of its encoding (allocation and copying were half of
//! the hub's CPU in a 10,000-cluster fanout's profile). An encoded spec is one `Arc<[u8]>`: a
//! copy takes a reference, an encoding copies its bytes, and equal specs — a work applied to
//! every cluster of a fleet — share one allocation through [`intern`].

use super::work_states::WorkState;
use bytes::{Buf, BufMut};
use flotilla_api::v1::{
    Condition, HubWorkState, ManifestWork, ManifestWorkSpec, ManifestWorkStatus, ObjectMeta,
};
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};
use std::sync::Arc;

mod intern;

/// A ManifestWork whose status is held encoded. The fields have ManifestWork's names and tags.
#[derive(Clone, Default, PartialEq)]
pub struct StoredWork {
    /// `metadata`, as in ManifestWork (tag 1).
    pub metadata: Option<ObjectMeta>,
    /// `spec` (tag 2), encoded.
    spec: Option<EncodedSpec>,
    /// The hub's bookkeeping (tag 4).
    pub hub: Option<HubWorkState>,
    /// `status` (tag 3), encoded.
    status: Option<EncodedStatus>,
}

/// A status as its encoding. prost writes a message's fields in one order and the status has no
/// map fields (whose order would vary), so the encoding is a function of the value: two
/// statuses are equal exactly when their encodings are ([`StoredWork::status_is`] relies on it).
/// The state its conditions give is kept beside it, read once when it is set: the works
/// inventory counts works by state at every change (`flotilla_hub_works`), and a status's
/// conditions are a decode away.
#[derive(Clone, PartialEq, Eq)]
struct EncodedStatus {
    bytes: Box<[u8]>,
    state: WorkState,
}

impl EncodedStatus {
    fn of(status: &ManifestWorkStatus) -> Self {
        Self {
            bytes: status.encode_to_vec().into_boxed_slice(),
            state: WorkState::of(false, &status.conditions),
        }
    }

    fn decode(&self) -> ManifestWorkStatus {
        // Made by `of`, from a value: it decodes.
        ManifestWorkStatus::decode(&*self.bytes).unwrap_or_default()
    }
}

/// A status's field 1 (`conditions`) alone: decoding a status's bytes as it skips the other
/// fields without building them.
#[derive(Clone, PartialEq, prost::Message)]
struct ConditionsOnly {
    #[prost(message, repeated, tag = "1")]
    conditions: Vec<Condition>,
}

/// A spec as its encoding, shared ([`intern`]), with the one field the cluster actor reads on
/// every message (`deleteOption.ttlSecondsAfterFinished`) kept decoded.
#[derive(Clone)]
struct EncodedSpec {
    bytes: Arc<[u8]>,
    ttl_seconds_after_finished: Option<i64>,
}

impl EncodedSpec {
    fn of(spec: &ManifestWorkSpec) -> Self {
        Self {
            bytes: intern::shared(spec.encode_to_vec()),
            ttl_seconds_after_finished: spec
                .delete_option
                .as_ref()
                .and_then(|d| d.ttl_seconds_after_finished),
        }
    }

    fn decode(&self) -> ManifestWorkSpec {
        // Made by `of`, from a value: it decodes.
        ManifestWorkSpec::decode(&*self.bytes).unwrap_or_default()
    }
}

/// Equal encodings are equal specs; unequal ones are compared decoded, so a field whose
/// encoding could vary (a map's order) never reads as a change of spec.
impl PartialEq for EncodedSpec {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.bytes, &other.bytes)
            || self.bytes == other.bytes
            || self.decode() == other.decode()
    }
}

impl std::fmt::Debug for StoredWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredWork")
            .field("metadata", &self.metadata)
            .field("spec", &self.spec())
            .field("status", &self.status())
            .field("hub", &self.hub)
            .finish()
    }
}

impl StoredWork {
    /// The spec, decoded.
    pub fn spec(&self) -> Option<ManifestWorkSpec> {
        self.spec.as_ref().map(EncodedSpec::decode)
    }

    /// Replaces the spec with `spec`; false (the held one kept, shared) when they are equal.
    pub fn replace_spec(&mut self, spec: Option<&ManifestWorkSpec>) -> bool {
        let new = spec.map(EncodedSpec::of);
        if new == self.spec {
            return false;
        }
        self.spec = new;
        true
    }

    /// `spec.deleteOption.ttlSecondsAfterFinished`, without decoding the spec.
    pub fn ttl_seconds_after_finished(&self) -> Option<i64> {
        self.spec.as_ref()?.ttl_seconds_after_finished
    }

    /// Bytes of the encoded spec (shared by every work of an equal spec).
    pub fn spec_len(&self) -> usize {
        self.spec.as_ref().map_or(0, |s| s.bytes.len())
    }

    /// Whether `other` holds the same allocation of the same spec.
    pub fn shares_spec_with(&self, other: &StoredWork) -> bool {
        match (&self.spec, &other.spec) {
            (Some(a), Some(b)) => Arc::ptr_eq(&a.bytes, &b.bytes),
            _ => false,
        }
    }

    /// The metadata and spec only (a spec event's payload: the status stays on the hub), the
    /// spec shared.
    pub fn metadata_and_spec(&self) -> StoredWork {
        Self {
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
            hub: None,
            status: None,
        }
    }

    /// A copy without the status, for a new status to be set on (every status report makes
    /// one: copying the old status only to drop it was a copy of its bytes per report).
    pub fn without_status(&self) -> StoredWork {
        Self {
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
            hub: self.hub.clone(),
            status: None,
        }
    }

    /// The status, decoded.
    pub fn status(&self) -> Option<ManifestWorkStatus> {
        self.status.as_ref().map(EncodedStatus::decode)
    }

    /// The status's conditions, decoded without its resource status (the manifests' statuses
    /// are most of a status's bytes).
    pub fn conditions(&self) -> Vec<Condition> {
        self.status.as_ref().map_or_else(Vec::new, |s| {
            // Made from a status's encoding: it decodes.
            ConditionsOnly::decode(&*s.bytes)
                .map(|c| c.conditions)
                .unwrap_or_default()
        })
    }

    /// The work's state as `flotilla_hub_works` counts it, without decoding anything: deleting
    /// from the metadata, else what the status's conditions gave when it was set.
    pub fn state(&self) -> WorkState {
        if self
            .metadata
            .as_ref()
            .is_some_and(|m| m.deletion_timestamp.is_some())
        {
            return WorkState::Deleting;
        }
        self.status
            .as_ref()
            .map_or(WorkState::of(false, &[]), |s| s.state)
    }

    /// Whether the status is `status` (compared encoded: equal exactly when the values are).
    pub fn status_is(&self, status: Option<&ManifestWorkStatus>) -> bool {
        match (&self.status, status) {
            (None, None) => true,
            (Some(held), Some(s)) => {
                held.bytes.len() == s.encoded_len() && *held == EncodedStatus::of(s)
            }
            _ => false,
        }
    }

    /// Replaces the status.
    pub fn set_status(&mut self, status: Option<&ManifestWorkStatus>) {
        self.status = status.map(EncodedStatus::of);
    }

    /// This work with `other`'s status.
    pub fn with_status_of(mut self, other: &StoredWork) -> Self {
        self.status = other.status.clone();
        self
    }

    /// Bytes of the encoded status (what the status costs the hub, besides a 16-byte box).
    pub fn status_len(&self) -> usize {
        self.status.as_ref().map_or(0, |s| s.bytes.len())
    }

    /// The ManifestWork, its status decoded.
    pub fn to_work(&self) -> ManifestWork {
        ManifestWork {
            metadata: self.metadata.clone(),
            spec: self.spec(),
            status: self.status(),
            hub: self.hub.clone(),
        }
    }

    /// [`Self::to_work`], taking this one apart.
    pub fn into_work(self) -> ManifestWork {
        let status = self.status();
        let spec = self.spec();
        ManifestWork {
            metadata: self.metadata,
            spec,
            status,
            hub: self.hub,
        }
    }
}

impl From<ManifestWork> for StoredWork {
    fn from(w: ManifestWork) -> Self {
        Self {
            metadata: w.metadata,
            spec: w.spec.as_ref().map(EncodedSpec::of),
            hub: w.hub,
            status: w.status.as_ref().map(EncodedStatus::of),
        }
    }
}

impl From<&StoredWork> for ManifestWork {
    fn from(w: &StoredWork) -> Self {
        w.to_work()
    }
}

/// Names the field a decode error was in, as prost's derived decoders do.
fn in_field(field: &'static str) -> impl FnOnce(DecodeError) -> DecodeError {
    move |mut e| {
        e.push("ManifestWork", field);
        e
    }
}

/// A message field held encoded: its key, its length and its bytes, as a bytes field is written.
fn encode_bytes(tag: u32, bytes: &[u8], buf: &mut impl BufMut) {
    encoding::encode_key(tag, WireType::LengthDelimited, buf);
    encoding::encode_varint(bytes.len() as u64, buf);
    buf.put_slice(bytes);
}

/// The length [`encode_bytes`] writes.
fn bytes_len(tag: u32, bytes: &[u8]) -> usize {
    encoding::key_len(tag) + encoding::encoded_len_varint(bytes.len() as u64) + bytes.len()
}

/// ManifestWork's wire format (what `#[derive(prost::Message)]` writes for it, field by field).
impl Message for StoredWork {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(m) = &self.metadata {
            encoding::message::encode(1, m, buf);
        }
        if let Some(s) = &self.spec {
            encode_bytes(2, &s.bytes, buf);
        }
        if let Some(s) = &self.status {
            encode_bytes(3, &s.bytes, buf);
        }
        if let Some(h) = &self.hub {
            encoding::message::encode(4, h, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => encoding::message::merge(
                wire_type,
                self.metadata.get_or_insert_with(Default::default),
                buf,
                ctx,
            )
            .map_err(in_field("metadata")),
            2 => {
                // Decoded (a malformed spec fails the record) and merged, as the status is.
                let mut spec = self.spec().unwrap_or_default();
                encoding::message::merge(wire_type, &mut spec, buf, ctx)
                    .map_err(in_field("spec"))?;
                self.spec = Some(EncodedSpec::of(&spec));
                Ok(())
            }
            3 => {
                // Decoded, so that a malformed status fails the work's decoding as it did, and
                // merged into an earlier occurrence of the field, as protobuf merges messages.
                let mut status = self.status().unwrap_or_default();
                encoding::message::merge(wire_type, &mut status, buf, ctx)
                    .map_err(in_field("status"))?;
                self.status = Some(EncodedStatus::of(&status));
                Ok(())
            }
            4 => encoding::message::merge(
                wire_type,
                self.hub.get_or_insert_with(Default::default),
                buf,
                ctx,
            )
            .map_err(in_field("hub")),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        self.metadata
            .as_ref()
            .map_or(0, |m| encoding::message::encoded_len(1, m))
            + self.spec.as_ref().map_or(0, |s| bytes_len(2, &s.bytes))
            + self.status.as_ref().map_or(0, |s| bytes_len(3, &s.bytes))
            + self
                .hub
                .as_ref()
                .map_or(0, |h| encoding::message::encoded_len(4, h))
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

impl crate::views::Versioned for StoredWork {
    fn revision(&self) -> u64 {
        self.metadata.as_ref().map_or(0, |m| m.resource_version)
    }
    fn set_revision(&mut self, revision: u64) {
        self.metadata
            .get_or_insert_with(Default::default)
            .resource_version = revision;
    }
}

#[cfg(test)]
mod tests;

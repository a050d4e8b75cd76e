//! A ManifestWork as the hub holds it (pure): metadata, spec and the hub's bookkeeping in
//! prost's types, the status as its protobuf encoding, decoded when it is read.
//!
//! Agents write a work's status far more often than the API, the dashboard, replica sets and
//! add-ons read it, and prost's types give every condition's four strings and every manifest's
//! names an allocation each: a one-manifest work's status was 3.4 KB of the hub's heap per
//! cluster in a fanout (`heaptrack`), its encoding a few hundred bytes. A [`StoredWork`] encodes
//! to exactly a ManifestWork's bytes and decodes from them ([`prost::Message`]), so the works
//! bucket, the views and the works inventory hold it as it is; a reader that wants the status
//! decodes it ([`StoredWork::status`], [`StoredWork::to_work`]).

use bytes::{Buf, BufMut};
use flotilla_api::v1::{
    HubWorkState, ManifestWork, ManifestWorkSpec, ManifestWorkStatus, ObjectMeta,
};
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};

/// A ManifestWork whose status is held encoded. The fields have ManifestWork's names and tags.
#[derive(Clone, Default, PartialEq)]
pub struct StoredWork {
    /// `metadata`, as in ManifestWork (tag 1).
    pub metadata: Option<ObjectMeta>,
    /// `spec` (tag 2).
    pub spec: Option<ManifestWorkSpec>,
    /// The hub's bookkeeping (tag 4).
    pub hub: Option<HubWorkState>,
    /// `status` (tag 3), encoded.
    status: Option<EncodedStatus>,
}

/// A status as its encoding. prost writes a message's fields in one order and the status has no
/// map fields (whose order would vary), so the encoding is a function of the value: two
/// statuses are equal exactly when their encodings are ([`StoredWork::status_is`] relies on it).
#[derive(Clone, PartialEq, Eq)]
struct EncodedStatus(Box<[u8]>);

impl EncodedStatus {
    fn of(status: &ManifestWorkStatus) -> Self {
        Self(status.encode_to_vec().into_boxed_slice())
    }

    fn decode(&self) -> ManifestWorkStatus {
        // Made by `of`, from a value: it decodes.
        ManifestWorkStatus::decode(&*self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for StoredWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredWork")
            .field("metadata", &self.metadata)
            .field("spec", &self.spec)
            .field("status", &self.status())
            .field("hub", &self.hub)
            .finish()
    }
}

impl StoredWork {
    /// The status, decoded.
    pub fn status(&self) -> Option<ManifestWorkStatus> {
        self.status.as_ref().map(EncodedStatus::decode)
    }

    /// Whether the status is `status` (compared encoded: equal exactly when the values are).
    pub fn status_is(&self, status: Option<&ManifestWorkStatus>) -> bool {
        match (&self.status, status) {
            (None, None) => true,
            (Some(held), Some(s)) => {
                held.0.len() == s.encoded_len() && *held == EncodedStatus::of(s)
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
        self.status.as_ref().map_or(0, |s| s.0.len())
    }

    /// The ManifestWork, its status decoded.
    pub fn to_work(&self) -> ManifestWork {
        ManifestWork {
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
            status: self.status(),
            hub: self.hub.clone(),
        }
    }

    /// [`Self::to_work`], taking this one apart.
    pub fn into_work(self) -> ManifestWork {
        let status = self.status();
        ManifestWork {
            metadata: self.metadata,
            spec: self.spec,
            status,
            hub: self.hub,
        }
    }
}

impl From<ManifestWork> for StoredWork {
    fn from(w: ManifestWork) -> Self {
        Self {
            metadata: w.metadata,
            spec: w.spec,
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

/// ManifestWork's wire format (what `#[derive(prost::Message)]` writes for it, field by field).
impl Message for StoredWork {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(m) = &self.metadata {
            encoding::message::encode(1, m, buf);
        }
        if let Some(s) = &self.spec {
            encoding::message::encode(2, s, buf);
        }
        if let Some(s) = &self.status {
            // A message field is its length and bytes, as a bytes field is.
            encoding::encode_key(3, WireType::LengthDelimited, buf);
            encoding::encode_varint(s.0.len() as u64, buf);
            buf.put_slice(&s.0);
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
            2 => encoding::message::merge(
                wire_type,
                self.spec.get_or_insert_with(Default::default),
                buf,
                ctx,
            )
            .map_err(in_field("spec")),
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
            + self
                .spec
                .as_ref()
                .map_or(0, |s| encoding::message::encoded_len(2, s))
            + self.status.as_ref().map_or(0, |s| {
                encoding::key_len(3) + encoding::encoded_len_varint(s.0.len() as u64) + s.0.len()
            })
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

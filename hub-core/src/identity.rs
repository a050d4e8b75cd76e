//! The identity the hub sets on every stored object, as the Kubernetes API server does: a new
//! object gets a fresh `uid`, its `creationTimestamp` and `generation` 1; a replaced object keeps
//! its `uid` and `creationTimestamp`, and its `generation` grows only when its spec changed.

use flotilla_api::meta;
use flotilla_api::v1::ObjectMeta;

/// Stamps a new object's identity.
pub fn create(m: &mut ObjectMeta) {
    m.uid = uuid::Uuid::new_v4().to_string();
    m.creation_timestamp = Some(meta::now());
    m.generation = 1;
}

/// Carries a replaced object's identity over from the stored one.
pub fn keep(m: &mut ObjectMeta, stored: &ObjectMeta, spec_changed: bool) {
    m.uid.clone_from(&stored.uid);
    m.creation_timestamp.clone_from(&stored.creation_timestamp);
    m.generation = stored.generation + i64::from(spec_changed);
}

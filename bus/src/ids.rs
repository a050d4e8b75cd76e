//! Stable identifiers and hashes carried in CloudEvent extension attributes.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Namespace UUID for Flotilla resource ids (a fixed random UUID; never change it).
const FLOTILLA_NAMESPACE: Uuid = Uuid::from_u128(0x5c1f_6c1e_8a0b_4c9e_9d3f_1b2a_7e6d_4f10);

/// The stable `resourceid` of a resource: UUIDv5 of `cluster/kind/namespace/name`.
pub fn resource_id(cluster: &str, kind: &str, namespace: &str, name: &str) -> String {
    let key = format!("{cluster}/{kind}/{namespace}/{name}");
    Uuid::new_v5(&FLOTILLA_NAMESPACE, key.as_bytes()).to_string()
}

/// The `statushash` of a status payload: hex of the first 16 bytes of its SHA-256.
pub fn status_hash(payload: &[u8]) -> String {
    let digest = Sha256::digest(payload);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_ids_are_stable_and_distinct() {
        let a = resource_id("c1", "ManifestWork", "c1", "w");
        assert_eq!(a, resource_id("c1", "ManifestWork", "c1", "w"));
        assert_ne!(a, resource_id("c2", "ManifestWork", "c2", "w"));
        assert_eq!(Uuid::parse_str(&a).unwrap().get_version_num(), 5);
    }

    #[test]
    fn status_hash_changes_with_payload() {
        assert_eq!(status_hash(b"a").len(), 32);
        assert_ne!(status_hash(b"a"), status_hash(b"b"));
    }
}

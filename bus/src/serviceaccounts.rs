//! ManagedServiceAccount events, both directions, and the sealing of tokens to the hub.
//!
//! - spec (hub → agent, `flotilla.spec.<cluster>`): `io.flotilla.authentication.v1beta1.
//!   managedserviceaccount.spec.{create,update,delete}_request`, payload
//!   `ServiceAccountDelivery` (the ManagedServiceAccount and the hub's public curve key),
//!   `resourceid`, `resourceversion` = its generation;
//! - status (agent → hub, `flotilla.status.<shard>.<cluster>.msa.<resourceid>`):
//!   `…managedserviceaccount.status.update_request`, payload `ServiceAccountTokenReport`.
//!
//! Both ride subjects a cluster's NATS permissions already scope to itself (its own spec
//! subject; its own status subjects), so a cluster receives only its own specs and reports only
//! for itself.
//!
//! A token crosses the wire and rests in JetStream only as a box sealed (NKeys xkeys: X25519,
//! XSalsa20-Poly1305) from a fresh sender key to the hub's curve key ([`seal`], [`open`]); the
//! hub finds a presented token by its SHA-256 ([`token_hash`]), never by the token.

use crate::envelope::{Action, Direction, EventType};
use nkeys::XKey;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Status kind of ManagedServiceAccount reports (followed by the resource id).
pub const KIND_MSA: &str = "msa";
/// Kind name used in the resource id.
pub const MSA_KIND: &str = "ManagedServiceAccount";
/// The largest token a spoke may report (Kubernetes tokens are JWTs of a few KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

fn msa_type(direction: Direction, action: Action) -> EventType {
    EventType::new(
        "authentication",
        "v1beta1",
        "managedserviceaccount",
        direction,
        action,
    )
}

/// Event type of specs with the given action (create, update, delete).
pub fn spec_type(action: Action) -> EventType {
    msa_type(Direction::Spec, action)
}

/// Event type of reports.
pub fn status_type() -> EventType {
    msa_type(Direction::Status, Action::UpdateRequest)
}

/// Whether `ty` is a ManagedServiceAccount event type (either direction).
pub fn is_msa(ty: &EventType) -> bool {
    ty.group == "authentication" && ty.resource == "managedserviceaccount"
}

/// The stable resource id of the ManagedServiceAccount `name` of `cluster`.
pub fn resource_id(cluster: &str, name: &str) -> String {
    crate::ids::resource_id(cluster, MSA_KIND, cluster, name)
}

/// The status subject of the ManagedServiceAccount with resource id `resource_id`.
pub fn status_subject(cluster: &str, resource_id: &str) -> String {
    crate::subjects::status(cluster, KIND_MSA, Some(resource_id))
}

/// The SHA-256 of a token, hex: how the hub stores and finds it.
pub fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The shortest token [`jwt_shaped`] lets through.
pub const MIN_TOKEN_BYTES: usize = 16;

/// Whether `token` could be a ServiceAccount token: shaped like a JWT (three non-empty
/// base64url segments joined by dots, as Kubernetes' TokenRequest and legacy Secret tokens
/// are), at least [`MIN_TOKEN_BYTES`] and at most [`MAX_TOKEN_BYTES`] long. A check that costs
/// nothing, made before any lookup: a bearer that fails it is nobody's token.
pub fn jwt_shaped(token: &str) -> bool {
    (MIN_TOKEN_BYTES..=MAX_TOKEN_BYTES).contains(&token.len())
        && token.split('.').count() == 3
        && token.split('.').all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Why a token could not be sealed or opened.
#[derive(Debug, Error)]
pub enum SealError {
    /// A public curve key that is not one.
    #[error("{what}: not a public curve key (an NKeys xkey starting with X)")]
    Key {
        /// Which key.
        what: &'static str,
    },
    /// The box does not open with this key from this sender (forged, corrupted, or sealed to
    /// another hub key).
    #[error("the sealed token does not open with the hub's key")]
    Open,
    /// What the box holds is not a token.
    #[error("the sealed token is not a token (empty, too long or not text)")]
    NotAToken,
    /// Sealing failed.
    #[error("sealing the token failed")]
    Seal,
}

/// Seals `token` to the hub's public curve key `hub_xkey` from a fresh sender key: the sealed
/// box and the sender's public key (both go in the report).
pub fn seal(token: &str, hub_xkey: &str) -> Result<(Vec<u8>, String), SealError> {
    let recipient = XKey::from_public_key(hub_xkey).map_err(|_| SealError::Key {
        what: "the hub's xkey",
    })?;
    let sender = XKey::new();
    let sealed = sender
        .seal(token.as_bytes(), &recipient)
        .map_err(|_| SealError::Seal)?;
    Ok((sealed, sender.public_key()))
}

/// Opens a box sealed by `sender_xkey` to `hub` (the hub's key pair). The result is checked: a
/// non-empty UTF-8 token of at most [`MAX_TOKEN_BYTES`] without whitespace.
pub fn open(hub: &XKey, sealed: &[u8], sender_xkey: &str) -> Result<String, SealError> {
    let sender =
        XKey::from_public_key(sender_xkey).map_err(|_| SealError::Key { what: "senderXkey" })?;
    let plain = hub.open(sealed, &sender).map_err(|_| SealError::Open)?;
    let token = String::from_utf8(plain).map_err(|_| SealError::NotAToken)?;
    if token.is_empty()
        || token.len() > MAX_TOKEN_BYTES
        || token.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(SealError::NotAToken);
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subjects::StatusSubject;

    #[test]
    fn a_sealed_token_opens_only_with_the_hubs_key() {
        let hub = XKey::new();
        let (sealed, sender) = seal("tok-123", &hub.public_key()).unwrap();
        assert!(!sealed.windows(7).any(|w| w == b"tok-123"));
        assert_eq!(open(&hub, &sealed, &sender).unwrap(), "tok-123");
        assert!(matches!(
            open(&XKey::new(), &sealed, &sender),
            Err(SealError::Open)
        ));
        let mut forged = sealed.clone();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        assert!(matches!(open(&hub, &forged, &sender), Err(SealError::Open)));
        assert!(matches!(
            open(&hub, &sealed, "not-a-key"),
            Err(SealError::Key { .. })
        ));
        let (blank, sender) = seal("with space", &hub.public_key()).unwrap();
        assert!(matches!(
            open(&hub, &blank, &sender),
            Err(SealError::NotAToken)
        ));
    }

    #[test]
    fn events_follow_the_grammar_and_subjects_parse() {
        assert_eq!(
            spec_type(Action::CreateRequest).to_string(),
            "io.flotilla.authentication.v1beta1.managedserviceaccount.spec.create_request"
        );
        assert_eq!(
            EventType::parse(&status_type().to_string()).unwrap(),
            status_type()
        );
        assert!(is_msa(&status_type()));
        let rid = resource_id("edge-1", "sa");
        assert_ne!(rid, resource_id("edge-2", "sa"));
        let s = status_subject("edge-1", &rid);
        let p = StatusSubject::parse(&s).unwrap();
        assert_eq!((p.cluster, p.kind), ("edge-1", KIND_MSA));
        assert_eq!(token_hash("a").len(), 64);
    }

    #[test]
    fn only_jwt_shaped_bearers_are_looked_up() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXNpZ24_-A";
        assert!(jwt_shaped(jwt));
        for bad in [
            "",
            "short.a.b",
            "no-dots-at-all-but-long-enough",
            "two.segments-only-but-long-enough",
            "four.seg.ments.here-long-enough",
            "empty..segment-long-enough",
            "padded.base64url=.not-allowed-here",
            "white space.in.a-token-long-enough",
            "plus+slash/.std.base64-is-not-url",
        ] {
            assert!(!jwt_shaped(bad), "{bad:?}");
        }
        let long = format!("a.b.{}", "c".repeat(MAX_TOKEN_BYTES));
        assert!(!jwt_shaped(&long));
    }
}

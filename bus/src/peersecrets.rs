//! MirrorPeer secret exchange on the wire, and the sealing of a peer's Secret to another peer.
//!
//! - `flotilla.peers.<cluster>` (agent → hub, request/reply): `…mirrorpeer.spec.resync_request`
//!   with a `PeerSyncRequest` (the agent's curve key, the boxes it sealed, what it applied),
//!   answered `…mirrorpeer.spec.resync_response` with a `PeerSyncResponse` (its MirrorPeers, the
//!   peers' keys, the boxes for it). Only the cluster's own credentials may publish there.
//! - `flotilla.spec.<cluster>` (hub → agent): `…mirrorpeer.spec.update_request` with no payload —
//!   a poke: "ask again".
//!
//! A box is sealed (NKeys xkeys: X25519, XSalsa20-Poly1305) with the source agent's **static**
//! curve key to the destination agent's key, so opening it proves the sender; inside, a
//! `PeerSecretPayload` names its MirrorPeer, both peers and its revision ([`Expect`]), so a
//! box replayed to another pair, another MirrorPeer or as an older revision is refused.

use crate::envelope::{Action, Direction, EventType};
use flotilla_api::mirrorpeer::MAX_SECRET_BYTES;
use flotilla_api::v1::PeerSecretPayload;
use nkeys::XKey;
use prost::Message;
use thiserror::Error;

/// Wildcard of every cluster's peer requests (the hub's subscription).
pub const PEERS_ALL: &str = "flotilla.peers.*";

/// The subject a cluster asks for its MirrorPeers on.
pub fn subject(cluster: &str) -> String {
    format!("flotilla.peers.{cluster}")
}

fn mirrorpeer_type(action: Action) -> EventType {
    EventType::new(
        "multicluster",
        "v1alpha1",
        "mirrorpeer",
        Direction::Spec,
        action,
    )
}

/// The poke (hub → agent, on the spec subject, empty payload): ask again.
pub fn poke_type() -> EventType {
    mirrorpeer_type(Action::UpdateRequest)
}

/// A `PeerSyncRequest` (agent → hub).
pub fn request_type() -> EventType {
    mirrorpeer_type(Action::ResyncRequest)
}

/// A `PeerSyncResponse` (hub → agent).
pub fn response_type() -> EventType {
    mirrorpeer_type(Action::ResyncResponse)
}

/// Whether `ty` is a MirrorPeer event type.
pub fn is_mirrorpeer(ty: &EventType) -> bool {
    ty.group == "multicluster" && ty.resource == "mirrorpeer"
}

/// What a box must say about itself to be taken.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// The MirrorPeer.
    pub mirror_peer: &'a str,
    /// The source peer (whose key sealed it).
    pub from: &'a str,
    /// This peer.
    pub to: &'a str,
    /// The revision the box claims on the wire; the payload must say the same.
    pub revision: u64,
    /// The revision already applied: only a newer one is taken.
    pub applied: u64,
}

/// Why a box could not be sealed or opened.
#[derive(Debug, Error)]
pub enum SealError {
    /// A public curve key that is not one.
    #[error("{what}: not a public curve key (an NKeys xkey starting with X)")]
    Key {
        /// Which key.
        what: &'static str,
    },
    /// The box does not open with this key from this sender (forged, corrupted, sealed by
    /// someone else or to another key).
    #[error("the box does not open with this peer's key from {from:?}'s key")]
    Open {
        /// The claimed sender.
        from: String,
    },
    /// What the box holds is not a payload.
    #[error("the box holds no PeerSecretPayload")]
    Malformed,
    /// The payload names another MirrorPeer, pair or revision than the box claims: replayed.
    #[error("replayed box: its payload says {field} {got:?}, expected {want:?}")]
    Replayed {
        /// Which field.
        field: &'static str,
        /// What the payload says.
        got: String,
        /// What it should say.
        want: String,
    },
    /// The revision is not newer than the one applied.
    #[error("revision {revision} is not newer than the applied revision {applied}")]
    Stale {
        /// The box's revision.
        revision: u64,
        /// Applied already.
        applied: u64,
    },
    /// The Secret is larger than a peer may exchange.
    #[error("the Secret's data is {bytes} bytes, at most {MAX_SECRET_BYTES} are exchanged")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// Sealing failed.
    #[error("sealing failed")]
    Seal,
}

/// The size of a payload's data (what [`MAX_SECRET_BYTES`] limits).
pub fn data_bytes(p: &PeerSecretPayload) -> usize {
    p.data.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// Seals `payload` with this agent's static key `own` to the peer's public key.
pub fn seal(
    payload: &PeerSecretPayload,
    own: &XKey,
    recipient_xkey: &str,
) -> Result<Vec<u8>, SealError> {
    let bytes = data_bytes(payload);
    if bytes > MAX_SECRET_BYTES {
        return Err(SealError::TooLarge { bytes });
    }
    let recipient = XKey::from_public_key(recipient_xkey).map_err(|_| SealError::Key {
        what: "the peer's xkey",
    })?;
    own.seal(&payload.encode_to_vec(), &recipient)
        .map_err(|_| SealError::Seal)
}

/// Opens a box sealed by `sender_xkey` (the source peer's key, as the hub handed it out) to
/// `own`, and checks that it is what `expect` says: not replayed, newer than applied, within
/// the size limit.
pub fn open(
    own: &XKey,
    sealed: &[u8],
    sender_xkey: &str,
    expect: Expect<'_>,
) -> Result<PeerSecretPayload, SealError> {
    let sender = XKey::from_public_key(sender_xkey).map_err(|_| SealError::Key {
        what: "the source peer's xkey",
    })?;
    let plain = own.open(sealed, &sender).map_err(|_| SealError::Open {
        from: expect.from.to_string(),
    })?;
    let p = PeerSecretPayload::decode(plain.as_slice()).map_err(|_| SealError::Malformed)?;
    let checks: [(&'static str, &str, &str); 3] = [
        ("mirror_peer", &p.mirror_peer, expect.mirror_peer),
        ("from", &p.from, expect.from),
        ("to", &p.to, expect.to),
    ];
    for (field, got, want) in checks {
        if got != want {
            return Err(SealError::Replayed {
                field,
                got: got.to_string(),
                want: want.to_string(),
            });
        }
    }
    if p.revision != expect.revision {
        return Err(SealError::Replayed {
            field: "revision",
            got: p.revision.to_string(),
            want: expect.revision.to_string(),
        });
    }
    if p.revision <= expect.applied {
        return Err(SealError::Stale {
            revision: p.revision,
            applied: expect.applied,
        });
    }
    let bytes = data_bytes(&p);
    if bytes > MAX_SECRET_BYTES {
        return Err(SealError::TooLarge { bytes });
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(from: &str, to: &str, revision: u64) -> PeerSecretPayload {
        PeerSecretPayload {
            mirror_peer: "dr".into(),
            from: from.into(),
            to: to.into(),
            revision,
            data: [("key".to_string(), b"marker-123".to_vec())].into(),
            namespace: "openshift-storage".into(),
            storage_cluster_name: "ocs".into(),
        }
    }

    fn expect<'a>(from: &'a str, to: &'a str, revision: u64, applied: u64) -> Expect<'a> {
        Expect {
            mirror_peer: "dr",
            from,
            to,
            revision,
            applied,
        }
    }

    #[test]
    fn a_box_opens_only_for_its_peer_from_its_sender() {
        let (a, b, c) = (XKey::new(), XKey::new(), XKey::new());
        let sealed = seal(&payload("a", "b", 1), &a, &b.public_key()).unwrap();
        assert!(!sealed.windows(10).any(|w| w == b"marker-123"));
        let p = open(&b, &sealed, &a.public_key(), expect("a", "b", 1, 0)).unwrap();
        assert_eq!(p.data["key"], b"marker-123");
        // Another recipient, or a sender other than the one the hub named, cannot open it.
        assert!(matches!(
            open(&c, &sealed, &a.public_key(), expect("a", "b", 1, 0)),
            Err(SealError::Open { .. })
        ));
        assert!(matches!(
            open(&b, &sealed, &c.public_key(), expect("a", "b", 1, 0)),
            Err(SealError::Open { .. })
        ));
        let mut forged = sealed.clone();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        assert!(matches!(
            open(&b, &forged, &a.public_key(), expect("a", "b", 1, 0)),
            Err(SealError::Open { .. })
        ));
        assert!(matches!(
            open(&b, &sealed, "nope", expect("a", "b", 1, 0)),
            Err(SealError::Key { .. })
        ));
    }

    #[test]
    fn replays_across_pairs_and_older_revisions_are_refused() {
        let (a, b) = (XKey::new(), XKey::new());
        // a sealed a box for b; c's peer a claims it is for (a → c) or another MirrorPeer.
        let sealed = seal(&payload("a", "b", 3), &a, &b.public_key()).unwrap();
        let as_other_pair = open(&b, &sealed, &a.public_key(), expect("a", "x", 3, 0));
        assert!(
            matches!(as_other_pair, Err(SealError::Replayed { field: "to", .. })),
            "{as_other_pair:?}"
        );
        let mut other_mp = expect("a", "b", 3, 0);
        other_mp.mirror_peer = "other";
        assert!(matches!(
            open(&b, &sealed, &a.public_key(), other_mp),
            Err(SealError::Replayed {
                field: "mirror_peer",
                ..
            })
        ));
        // The hub relabels an old box as a newer revision: the payload says otherwise.
        assert!(matches!(
            open(&b, &sealed, &a.public_key(), expect("a", "b", 4, 3)),
            Err(SealError::Replayed {
                field: "revision",
                ..
            })
        ));
        // An old box handed again after a newer one was applied.
        assert!(matches!(
            open(&b, &sealed, &a.public_key(), expect("a", "b", 3, 3)),
            Err(SealError::Stale {
                revision: 3,
                applied: 3
            })
        ));
    }

    #[test]
    fn secrets_over_the_limit_are_not_sealed() {
        let a = XKey::new();
        let mut p = payload("a", "b", 1);
        p.data.insert("big".into(), vec![0; MAX_SECRET_BYTES + 1]);
        assert!(matches!(
            seal(&p, &a, &XKey::new().public_key()),
            Err(SealError::TooLarge { .. })
        ));
    }

    #[test]
    fn event_types_follow_the_grammar() {
        assert_eq!(
            poke_type().to_string(),
            "io.flotilla.multicluster.v1alpha1.mirrorpeer.spec.update_request"
        );
        assert!(is_mirrorpeer(&request_type()) && is_mirrorpeer(&response_type()));
        assert_eq!(subject("east"), "flotilla.peers.east");
        assert_eq!(
            crate::subjects::cluster_token(&subject("east"), "peers"),
            Some("east")
        );
    }
}

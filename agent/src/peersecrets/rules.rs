//! Pure rules of the agent's side of the peer secret exchange: a source Secret's data, the
//! GREEN Secret written for a box, and which peers need a new box.

use flotilla_api::mirrorpeer as mp;
use flotilla_api::v1::{MirrorPeerDelivery, PeerSecretPayload};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// What this agent last sealed for one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The box's revision.
    pub revision: u64,
    /// The source's content hash it was sealed from.
    pub hash: u64,
    /// The key it was sealed to.
    pub recipient: String,
}

/// The revision this agent applied from one peer, and the key that box was sealed with:
/// revisions count per pair of keys, so it binds only boxes under the same sender key (and,
/// read back from a GREEN Secret, only while this agent has the key it was sealed to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The box's revision.
    pub revision: u64,
    /// The sender's key it was sealed with.
    pub sender_xkey: String,
}

impl Applied {
    /// The revision a box sealed with `sender_xkey` must be newer than (0: a new count).
    pub fn floor(applied: Option<&Self>, sender_xkey: &str) -> u64 {
        applied
            .filter(|a| a.sender_xkey == sender_xkey)
            .map_or(0, |a| a.revision)
    }
}

/// A source Secret's data (`data`, plus `stringData` as the API server would merge it), or
/// why it cannot be exchanged.
pub fn source_data(secret: &Value) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let s: Secret = serde_json::from_value(secret.clone())
        .map_err(|e| format!("not a readable Secret: {e}"))?;
    let mut data: BTreeMap<String, Vec<u8>> = s
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in s.string_data.unwrap_or_default() {
        data.insert(k, v.into_bytes());
    }
    if data.is_empty() {
        return Err("the Secret has no data".into());
    }
    let bytes: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > mp::MAX_SECRET_BYTES {
        return Err(format!(
            "the Secret's data is {bytes} bytes, at most {} are exchanged",
            mp::MAX_SECRET_BYTES
        ));
    }
    Ok(data)
}

/// A hash of a source's content, to notice a rotation (kept in memory only).
pub fn content_hash(data: &BTreeMap<String, Vec<u8>>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

/// The peers of `d` that need a new box from this agent, with its revision: those whose key
/// is known and whose stored box is missing, not the one sent (older, or a floor the peer
/// reported above it), sealed to another key, or sealed from other content. After a restart
/// (`sent` empty) every peer gets one.
pub fn outbound(
    d: &MirrorPeerDelivery,
    hash: u64,
    sent: &BTreeMap<(String, String), Sent>,
) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for peer in d.peers.iter().filter(|p| !p.xkey.is_empty()) {
        let stored = d.stored.iter().find(|s| s.to == peer.cluster);
        let last = sent.get(&(d.mirror_peer.clone(), peer.cluster.clone()));
        // Revisions count per pair of keys: a box to another key of the peer starts no count
        // (the hub dropped it when the peer presented its new key).
        let to_this_key = (
            stored.filter(|s| s.recipient_xkey == peer.xkey),
            last.filter(|s| s.recipient == peer.xkey),
        );
        // Only the box sent is current: a stored revision above it is a floor the peer
        // reported (it holds a newer box from this agent's earlier life), and the peer refuses
        // every box at or below it — the next box must pass it.
        let current = match (last, stored) {
            (Some(s), Some(st)) => {
                s.hash == hash
                    && s.recipient == peer.xkey
                    && st.revision == s.revision
                    && st.recipient_xkey == peer.xkey
            }
            _ => false,
        };
        if !current {
            // Saturating: a revision the hub holds at the top (a previous, compromised key's
            // box) must not wrap to 0 or panic the task.
            let revision = to_this_key
                .0
                .map_or(0, |s| s.revision)
                .max(to_this_key.1.map_or(0, |s| s.revision))
                .saturating_add(1);
            out.push((peer.cluster.clone(), peer.xkey.clone(), revision));
        }
    }
    out
}

/// Whether `secret` is the GREEN copy this agent writes for `mirror_peer`'s box from `from`
/// (by its labels): anything else of that name — a Secret someone else made, or another
/// MirrorPeer's copy whose name collides — is never overwritten.
pub fn is_green_copy(secret: &Value, mirror_peer: &str, from: &str) -> bool {
    let labels = &secret["metadata"]["labels"];
    labels[mp::SECRET_TYPE_LABEL] == mp::SECRET_TYPE_GREEN
        && labels[mp::MIRROR_PEER_LABEL] == mirror_peer
        && labels[mp::FROM_LABEL] == from
}

/// The GREEN Secret holding an opened box, in `namespace` (the destination's item's), with
/// ODF's labels and data keys; Flotilla's label names the MirrorPeer and the annotations the
/// revision and the keys the box was sealed with and to (read back after a restart by
/// [`applied_of`]).
pub fn green_secret(
    namespace: &str,
    p: &PeerSecretPayload,
    sender_xkey: &str,
    recipient_xkey: &str,
) -> Value {
    let inner: BTreeMap<&String, ByteString> = p
        .data
        .iter()
        .map(|(k, v)| (k, ByteString(v.clone())))
        .collect();
    let secret_data = serde_json::to_vec(&inner).unwrap_or_default();
    let mut s = Secret {
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    s.metadata.name = Some(mp::green_name(&p.mirror_peer, &p.from));
    s.metadata.namespace = Some(namespace.to_string());
    s.metadata.labels = Some(
        [
            (mp::SECRET_TYPE_LABEL, mp::SECRET_TYPE_GREEN),
            (mp::MIRROR_PEER_LABEL, p.mirror_peer.as_str()),
            (mp::FROM_LABEL, p.from.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    s.metadata.annotations = Some(
        [
            (mp::REVISION_ANNOTATION, p.revision.to_string()),
            (mp::SENDER_XKEY_ANNOTATION, sender_xkey.to_string()),
            (mp::RECIPIENT_XKEY_ANNOTATION, recipient_xkey.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    );
    s.data = Some(
        [
            (mp::KEY_NAMESPACE, p.namespace.as_bytes().to_vec()),
            (
                mp::KEY_STORAGE_CLUSTER_NAME,
                p.storage_cluster_name.as_bytes().to_vec(),
            ),
            (mp::KEY_SECRET_ORIGIN, mp::ORIGIN.as_bytes().to_vec()),
            (mp::KEY_SECRET_DATA, secret_data),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v)))
        .collect(),
    );
    let mut v = serde_json::to_value(&s).unwrap_or_default();
    v["apiVersion"] = "v1".into();
    v["kind"] = "Secret".into();
    v
}

/// The source data a GREEN Secret holds (its `secret-data`), for checks and tests.
pub fn green_data(secret: &Value) -> Option<BTreeMap<String, Vec<u8>>> {
    let s: Secret = serde_json::from_value(secret.clone()).ok()?;
    let raw = s.data?.remove(mp::KEY_SECRET_DATA)?;
    let inner: BTreeMap<String, ByteString> = serde_json::from_slice(&raw.0).ok()?;
    Some(inner.into_iter().map(|(k, v)| (k, v.0)).collect())
}

/// Whether `secret` is a GREEN Secret Flotilla wrote for `mirror_peer`.
pub fn is_green_of(secret: &Value, mirror_peer: &str) -> bool {
    let labels = &secret["metadata"]["labels"];
    labels[mp::SECRET_TYPE_LABEL] == mp::SECRET_TYPE_GREEN
        && labels[mp::MIRROR_PEER_LABEL] == mirror_peer
}

/// The revision a GREEN Secret holds (0 when it says none).
pub fn applied_revision(secret: &Value) -> u64 {
    secret["metadata"]["annotations"][mp::REVISION_ANNOTATION]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// What a GREEN Secret says was applied, when it was sealed to `own_xkey` (this agent's key):
/// one sealed to another key of this agent (its state was lost), or naming no keys, binds no
/// box of the current pair of keys.
pub fn applied_of(secret: &Value, own_xkey: &str) -> Option<Applied> {
    let annotations = &secret["metadata"]["annotations"];
    let sender_xkey = annotations[mp::SENDER_XKEY_ANNOTATION].as_str()?;
    if sender_xkey.is_empty() || annotations[mp::RECIPIENT_XKEY_ANNOTATION] != own_xkey {
        return None;
    }
    Some(Applied {
        revision: applied_revision(secret),
        sender_xkey: sender_xkey.to_string(),
    })
}

/// A generated source Secret: 32 random bytes under [`mp::GENERATED_KEY`], labelled BLUE.
pub fn generated_source(namespace: &str, name: &str, bytes: [u8; 32]) -> Value {
    let mut s = Secret {
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    s.metadata.name = Some(name.to_string());
    s.metadata.namespace = Some(namespace.to_string());
    s.metadata.labels = Some(
        [(
            mp::SECRET_TYPE_LABEL.to_string(),
            mp::SECRET_TYPE_BLUE.to_string(),
        )]
        .into_iter()
        .collect(),
    );
    s.data = Some(
        [(mp::GENERATED_KEY.to_string(), ByteString(bytes.to_vec()))]
            .into_iter()
            .collect(),
    );
    let mut v = serde_json::to_value(&s).unwrap_or_default();
    v["apiVersion"] = "v1".into();
    v["kind"] = "Secret".into();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{PeerKey, StoredPeerSecret};

    fn delivery(stored: Vec<StoredPeerSecret>) -> MirrorPeerDelivery {
        MirrorPeerDelivery {
            mirror_peer: "dr".into(),
            peers: vec![
                PeerKey {
                    cluster: "b".into(),
                    xkey: "XB".into(),
                },
                PeerKey {
                    cluster: "c".into(),
                    xkey: String::new(),
                },
            ],
            stored,
            ..Default::default()
        }
    }

    #[test]
    fn a_box_is_sealed_again_only_when_content_key_or_store_moved() {
        let mut sent = BTreeMap::new();
        // Nothing sent, nothing stored: b gets revision 1; c has no key yet.
        assert_eq!(
            outbound(&delivery(vec![]), 7, &sent),
            [("b".into(), "XB".into(), 1)]
        );
        sent.insert(
            ("dr".to_string(), "b".to_string()),
            Sent {
                revision: 1,
                hash: 7,
                recipient: "XB".into(),
            },
        );
        let stored = |revision, key: &str| {
            vec![StoredPeerSecret {
                to: "b".into(),
                revision,
                recipient_xkey: key.into(),
            }]
        };
        assert!(outbound(&delivery(stored(1, "XB")), 7, &sent).is_empty());
        // Rotated source, or the store lost it, or b's key changed: revision 2.
        assert_eq!(outbound(&delivery(stored(1, "XB")), 8, &sent)[0].2, 2);
        assert_eq!(outbound(&delivery(vec![]), 7, &sent)[0].2, 2);
        assert_eq!(outbound(&delivery(stored(1, "XOLD")), 7, &sent)[0].2, 2);
        // After a restart (nothing sent) the stored revision is passed.
        assert_eq!(
            outbound(&delivery(stored(5, "XB")), 7, &BTreeMap::new())[0].2,
            6
        );
        // A floor above what was sent (the peer holds revision 3 from this agent's earlier
        // life and refused 1): the same content is sealed again past it.
        assert_eq!(
            outbound(&delivery(stored(3, "XB")), 7, &sent),
            [("b".into(), "XB".into(), 4)]
        );
    }

    #[test]
    fn a_box_to_a_new_key_of_the_peer_starts_a_new_count() {
        let mut sent = BTreeMap::new();
        sent.insert(
            ("dr".to_string(), "b".to_string()),
            Sent {
                revision: 1500,
                hash: 7,
                recipient: "XBOLD".into(),
            },
        );
        // b presented a new key: the box to its old key was dropped (or is still listed).
        let old_box = vec![StoredPeerSecret {
            to: "b".into(),
            revision: 1500,
            recipient_xkey: "XBOLD".into(),
        }];
        assert_eq!(
            outbound(&delivery(vec![]), 7, &sent),
            [("b".into(), "XB".into(), 1)]
        );
        assert_eq!(outbound(&delivery(old_box), 7, &sent)[0].2, 1);
    }

    #[test]
    fn an_applied_revision_binds_only_boxes_under_the_same_keys() {
        let p = PeerSecretPayload {
            mirror_peer: "dr".into(),
            from: "a".into(),
            revision: 9,
            ..Default::default()
        };
        let green = green_secret("ns", &p, "XA", "XB");
        let applied = applied_of(&green, "XB");
        assert_eq!(Applied::floor(applied.as_ref(), "XA"), 9);
        // a's new key starts a new count; so does this agent's own new key (state lost).
        assert_eq!(Applied::floor(applied.as_ref(), "XANEW"), 0);
        assert_eq!(applied_of(&green, "XBNEW"), None);
        // A GREEN Secret naming no keys binds nothing.
        let mut bare = green.clone();
        bare["metadata"]["annotations"] = serde_json::json!({});
        bare["metadata"]["annotations"][mp::REVISION_ANNOTATION] = "9".into();
        assert_eq!(applied_of(&bare, "XB"), None);
    }

    #[test]
    fn only_a_green_copy_of_the_same_mirror_peer_and_sender_is_overwritten() {
        let p = PeerSecretPayload {
            mirror_peer: "x".into(),
            from: "y-z".into(),
            revision: 1,
            ..Default::default()
        };
        let green = green_secret("ns", &p, "XA", "XB");
        assert!(is_green_copy(&green, "x", "y-z"));
        // MirrorPeer "x-y" with peer "z" names its copy "x-y-z" too: not the same copy.
        assert!(!is_green_copy(&green, "x-y", "z"));
        let someone_elses = serde_json::json!({"metadata": {"name": "x-y-z", "labels": {}}});
        assert!(!is_green_copy(&someone_elses, "x", "y-z"));
    }

    #[test]
    fn green_secrets_carry_odfs_keys_and_the_revision() {
        let p = PeerSecretPayload {
            mirror_peer: "dr".into(),
            from: "a".into(),
            to: "b".into(),
            revision: 3,
            data: [("token".to_string(), b"s3cr3t".to_vec())].into(),
            namespace: "openshift-storage".into(),
            storage_cluster_name: "ocs".into(),
        };
        let g = green_secret("openshift-storage", &p, "XA", "XB");
        assert_eq!(g["metadata"]["name"], "dr-a");
        assert!(is_green_of(&g, "dr") && !is_green_of(&g, "other"));
        assert_eq!(applied_revision(&g), 3);
        assert_eq!(
            applied_of(&g, "XB"),
            Some(Applied {
                revision: 3,
                sender_xkey: "XA".into()
            })
        );
        assert_eq!(green_data(&g).unwrap()["token"], b"s3cr3t");
        for key in [
            "namespace",
            "storage-cluster-name",
            "secret-origin",
            "secret-data",
        ] {
            assert!(g["data"][key].is_string(), "{key}");
        }
    }

    #[test]
    fn sources_are_read_from_data_and_string_data_within_the_limit() {
        let s = generated_source("ns", "x", [1; 32]);
        assert_eq!(source_data(&s).unwrap()["key"], vec![1; 32]);
        let mut t = s.clone();
        t["stringData"] = serde_json::json!({"extra": "v"});
        assert_eq!(source_data(&t).unwrap()["extra"], b"v");
        let empty =
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
        assert!(source_data(&empty).is_err());
        let mut big = s;
        big["stringData"] = serde_json::json!({"big": "x".repeat(mp::MAX_SECRET_BYTES)});
        assert!(source_data(&big).unwrap_err().contains("at most"));
    }
}

//! MirrorPeer facts shared by the hub, the agent and the CLI: ODF's API group, labels and data
//! keys, the limits, the phases, and ODF's webhook rules (defaults, the checks on create and the
//! immutable fields on update).

use crate::v1;

/// API group/version of MirrorPeers (ODF's Multicluster Orchestrator).
pub const MULTICLUSTER_ODF_V1ALPHA1: &str = "multicluster.odf.openshift.io/v1alpha1";
/// The kind.
pub const KIND: &str = "MirrorPeer";
/// ODF's label naming a Secret's role.
pub const SECRET_TYPE_LABEL: &str = "multicluster.odf.openshift.io/secret-type";
/// A source Secret (on a peer).
pub const SECRET_TYPE_BLUE: &str = "BLUE";
/// A destination Secret (a copy of another peer's source).
pub const SECRET_TYPE_GREEN: &str = "GREEN";
/// Flotilla's label on the GREEN Secrets it writes: the MirrorPeer's name.
pub const MIRROR_PEER_LABEL: &str = "flotilla.io/mirror-peer";
/// Flotilla's label on a GREEN Secret: the peer it came from.
pub const FROM_LABEL: &str = "flotilla.io/mirror-peer-from";
/// Flotilla's annotation on a GREEN Secret: the revision of the source it holds.
pub const REVISION_ANNOTATION: &str = "flotilla.io/mirror-peer-revision";
/// Flotilla's annotation on a GREEN Secret: the curve key the box was sealed with. Revisions
/// count per pair of keys (sender's, recipient's): the revision binds only boxes under both.
pub const SENDER_XKEY_ANNOTATION: &str = "flotilla.io/mirror-peer-sender-xkey";
/// Flotilla's annotation on a GREEN Secret: the destination's curve key the box was sealed to.
pub const RECIPIENT_XKEY_ANNOTATION: &str = "flotilla.io/mirror-peer-recipient-xkey";
/// ODF's data keys of an exchanged Secret.
pub const KEY_NAMESPACE: &str = "namespace";
/// The source's storage cluster.
pub const KEY_STORAGE_CLUSTER_NAME: &str = "storage-cluster-name";
/// Where the Secret came from.
pub const KEY_SECRET_ORIGIN: &str = "secret-origin";
/// The source Secret's data (JSON: key → base64, as Kubernetes writes `data`).
pub const KEY_SECRET_DATA: &str = "secret-data";
/// The `secret-origin` Flotilla writes.
pub const ORIGIN: &str = "flotilla";
/// The key of a generated source Secret.
pub const GENERATED_KEY: &str = "key";
/// At most this many peers in one MirrorPeer.
pub const MAX_PEERS: usize = 16;
/// The largest source Secret exchanged (the sum of its data values).
pub const MAX_SECRET_BYTES: usize = 64 * 1024;
/// The default of `schedulingIntervals` (ODF's mutating webhook).
pub const DEFAULT_INTERVAL: &str = "5m";

/// ODF's phases (the S3 phases are never reached: `manageS3` is not served).
pub mod phase {
    /// Some exchange is not applied yet.
    pub const EXCHANGING: &str = "ExchangingSecret";
    /// Every exchange is applied.
    pub const EXCHANGED: &str = "ExchangedSecret";
}

/// The phases of one exchange (one ordered pair).
pub mod exchange {
    /// No box from the source for the destination's current key yet.
    pub const PENDING: &str = "Pending";
    /// The hub holds the source's box.
    pub const SEALED: &str = "Sealed";
    /// The box was handed to the destination.
    pub const DELIVERED: &str = "Delivered";
    /// The destination wrote its GREEN Secret at the box's revision.
    pub const APPLIED: &str = "Applied";
}

/// Condition: every peer is Available.
pub const CONDITION_PEERS_REACHABLE: &str = "PeersReachable";
/// Condition: S3 profiles (`manageS3`).
pub const CONDITION_S3: &str = "S3ProfileSynced";
/// Condition: the peers' curve keys are authenticated (False, reason `InsecureMode`, when the
/// hub is not in secure mode and MirrorPeers were allowed anyway).
pub const CONDITION_KEYS_AUTHENTICATED: &str = "PeerKeysAuthenticated";

/// The source Secret's name of an item: `secretName`, or `<storageClusterRef.name>-peer-secret`.
pub fn secret_name(item: &v1::PeerRef) -> String {
    if !item.secret_name.is_empty() {
        return item.secret_name.clone();
    }
    let sc = item.storage_cluster_ref.clone().unwrap_or_default();
    format!("{}-peer-secret", sc.name)
}

/// The namespace of an item's Secrets (`storageClusterRef.namespace`).
pub fn namespace(item: &v1::PeerRef) -> String {
    item.storage_cluster_ref
        .as_ref()
        .map(|s| s.namespace.clone())
        .unwrap_or_default()
}

/// The name of the GREEN Secret on a destination holding `from`'s source.
pub fn green_name(mirror_peer: &str, from: &str) -> String {
    format!("{mirror_peer}-{from}")
}

/// ODF's mutating webhook: `schedulingIntervals` defaults to `["5m"]`.
pub fn set_defaults(p: &mut v1::MirrorPeer) {
    let spec = p.spec.get_or_insert_with(Default::default);
    if spec.scheduling_intervals.is_empty() {
        spec.scheduling_intervals = vec![DEFAULT_INTERVAL.to_string()];
    }
}

/// Whether `s` is `^\d+[mhd]$`.
fn interval(s: &str) -> bool {
    let Some(digits) = s.strip_suffix(['m', 'h', 'd']) else {
        return false;
    };
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// ODF's validating webhook on create (plus Flotilla's limits): every problem, each naming its
/// field. Call [`set_defaults`] first.
pub fn validate(p: &v1::MirrorPeer) -> Vec<String> {
    let mut errors = Vec::new();
    let name = p.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or("");
    if let Err(e) = crate::names::validate_dns1123_label("metadata.name", name) {
        errors.push(e.to_string());
    }
    let spec = p.spec.clone().unwrap_or_default();
    if spec.items.is_empty() {
        errors.push("spec.items: at least one peer is required".into());
    }
    if spec.items.len() > MAX_PEERS {
        errors.push(format!(
            "spec.items: {} peers, at most {MAX_PEERS}",
            spec.items.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, item) in spec.items.iter().enumerate() {
        let at = format!("spec.items[{i}]");
        if let Err(e) = crate::names::validate_cluster_name(&item.cluster_name) {
            errors.push(format!("{at}.clusterName: {e}"));
        } else if !seen.insert(item.cluster_name.clone()) {
            errors.push(format!(
                "{at}.clusterName: {:?} is listed twice",
                item.cluster_name
            ));
        }
        match &item.storage_cluster_ref {
            None => errors.push(format!(
                "{at}.storageClusterRef: required (name, namespace)"
            )),
            Some(sc) => {
                if let Err(e) = crate::names::validate_dns1123_subdomain(
                    &format!("{at}.storageClusterRef.name"),
                    &sc.name,
                ) {
                    errors.push(e.to_string());
                }
                if let Err(e) = crate::names::validate_dns1123_label(
                    &format!("{at}.storageClusterRef.namespace"),
                    &sc.namespace,
                ) {
                    errors.push(e.to_string());
                }
            }
        }
        if !item.secret_name.is_empty()
            && let Err(e) = crate::names::validate_dns1123_subdomain(
                &format!("{at}.secretName"),
                &item.secret_name,
            )
        {
            errors.push(e.to_string());
        }
    }
    if spec.scheduling_intervals.is_empty() {
        errors.push("spec.schedulingIntervals: required (e.g. [\"5m\"])".into());
    }
    for (i, s) in spec.scheduling_intervals.iter().enumerate() {
        if !interval(s) {
            errors.push(format!(
                "spec.schedulingIntervals[{i}]: {s:?} does not match ^\\d+[mhd]$"
            ));
        }
    }
    if spec.r#type != "async" && spec.r#type != "sync" {
        errors.push(format!(
            "spec.type: {:?} is neither \"async\" nor \"sync\"",
            spec.r#type
        ));
    }
    errors
}

/// ODF's validating webhook on update: `type` and `items` are immutable.
pub fn validate_update(old: &v1::MirrorPeer, new: &v1::MirrorPeer) -> Vec<String> {
    let (old, new) = (
        old.spec.clone().unwrap_or_default(),
        new.spec.clone().unwrap_or_default(),
    );
    let mut errors = Vec::new();
    if old.r#type != new.r#type {
        errors.push(format!(
            "spec.type: immutable ({:?} → {:?}); delete the MirrorPeer and create it again",
            old.r#type, new.r#type
        ));
    }
    if old.items != new.items {
        errors.push(
            "spec.items: immutable; delete the MirrorPeer and create it again to change its peers"
                .into(),
        );
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(cluster: &str) -> v1::PeerRef {
        v1::PeerRef {
            cluster_name: cluster.into(),
            storage_cluster_ref: Some(v1::StorageClusterRef {
                name: "ocs-storagecluster".into(),
                namespace: "openshift-storage".into(),
            }),
            ..Default::default()
        }
    }

    fn peer(items: Vec<v1::PeerRef>) -> v1::MirrorPeer {
        v1::MirrorPeer {
            metadata: Some(v1::ObjectMeta {
                name: "mp".into(),
                ..Default::default()
            }),
            spec: Some(v1::MirrorPeerSpec {
                items,
                r#type: "async".into(),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn intervals_default_and_follow_odfs_pattern() {
        let mut p = peer(vec![item("a"), item("b")]);
        set_defaults(&mut p);
        assert_eq!(p.spec.as_ref().unwrap().scheduling_intervals, ["5m"]);
        assert!(validate(&p).is_empty());
        for bad in ["5", "m", "5s", "-5m", "5 m", "1.5h"] {
            assert!(!interval(bad), "{bad}");
        }
        for ok in ["5m", "10h", "1d"] {
            assert!(interval(ok), "{ok}");
        }
    }

    #[test]
    fn create_problems_name_their_fields() {
        let mut p = peer(vec![item("a"), item("a"), item("B_")]);
        let spec = p.spec.as_mut().unwrap();
        spec.scheduling_intervals = vec!["5s".into()];
        spec.r#type = "later".into();
        spec.items[0].secret_name = "Not_A_Name".into();
        spec.items[1].storage_cluster_ref = None;
        let errors = validate(&p).join("\n");
        for field in [
            "spec.items[1].clusterName",
            "spec.items[2].clusterName",
            "spec.items[1].storageClusterRef",
            "spec.items[0].secretName",
            "spec.schedulingIntervals[0]",
            "spec.type",
        ] {
            assert!(errors.contains(field), "{field} missing in {errors}");
        }
        assert!(validate(&peer(vec![])).join("").contains("spec.items"));
        let many = (0..17).map(|i| item(&format!("c{i}"))).collect();
        assert!(validate(&peer(many)).join("").contains("at most 16"));
    }

    #[test]
    fn type_and_items_are_immutable() {
        let old = peer(vec![item("a"), item("b")]);
        let mut new = old.clone();
        new.spec.as_mut().unwrap().scheduling_intervals = vec!["1h".into()];
        assert!(validate_update(&old, &new).is_empty());
        new.spec.as_mut().unwrap().r#type = "sync".into();
        new.spec.as_mut().unwrap().items.pop();
        let e = validate_update(&old, &new).join("\n");
        assert!(e.contains("spec.type") && e.contains("spec.items"), "{e}");
    }

    #[test]
    fn secret_names_default_from_the_storage_cluster() {
        let mut i = item("a");
        assert_eq!(secret_name(&i), "ocs-storagecluster-peer-secret");
        i.secret_name = "mine".into();
        assert_eq!(secret_name(&i), "mine");
        assert_eq!(namespace(&i), "openshift-storage");
    }
}

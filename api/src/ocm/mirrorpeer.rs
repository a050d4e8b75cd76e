//! MirrorPeer (`multicluster.odf.openshift.io/v1alpha1`) in the YAML shape users write:
//!
//! ```yaml
//! apiVersion: multicluster.odf.openshift.io/v1alpha1
//! kind: MirrorPeer
//! metadata: {name: dr}
//! spec:
//!   items:
//!   - clusterName: east
//!     storageClusterRef: {name: ocs-storagecluster, namespace: openshift-storage}
//!   - clusterName: west
//!     storageClusterRef: {name: ocs-storagecluster, namespace: openshift-storage}
//!     secretName: west-peer-secret   # Flotilla extension
//!     generate: true                 # Flotilla extension
//!   type: async
//! ```

use super::meta::{Condition, Metadata, conditions};
use crate::mirrorpeer::{KIND, MULTICLUSTER_ODF_V1ALPHA1};
use crate::v1;
use serde::{Deserialize, Serialize};

/// MirrorPeer in the YAML shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MirrorPeer {
    /// `multicluster.odf.openshift.io/v1alpha1`.
    pub api_version: String,
    /// `MirrorPeer`.
    pub kind: String,
    /// Metadata (cluster-scoped: no namespace).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: MirrorPeerSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MirrorPeerStatus>,
}

/// The spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MirrorPeerSpec {
    /// The peers.
    #[serde(default)]
    pub items: Vec<PeerRef>,
    /// S3 profiles (accepted, not served).
    #[serde(
        default,
        rename = "manageS3",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub manage_s3: bool,
    /// Each `^\d+[mhd]$`; default `["5m"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling_intervals: Vec<String>,
    /// `async` or `sync`.
    #[serde(default, rename = "type")]
    pub type_: String,
}

/// One peer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeerRef {
    /// The ManagedCluster.
    #[serde(default)]
    pub cluster_name: String,
    /// Its StorageCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_cluster_ref: Option<StorageClusterRef>,
    /// The source Secret (Flotilla extension).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret_name: String,
    /// Create the source Secret when absent (Flotilla extension).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generate: bool,
}

/// `storageClusterRef`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageClusterRef {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
}

/// The status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MirrorPeerStatus {
    /// ODF's phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// One per ordered pair of peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<PeerExchange>,
    /// `PeersReachable`, `S3ProfileSynced`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation the status is for.
    #[serde(default)]
    pub observed_generation: i64,
}

/// One exchange.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PeerExchange {
    /// Source peer.
    pub from: String,
    /// Destination peer.
    pub to: String,
    /// Pending, Sealed, Delivered, Applied.
    pub phase: String,
    /// The box's revision.
    #[serde(default)]
    pub revision: u64,
    /// Why it waits.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl MirrorPeer {
    /// Converts to protobuf with ODF's defaults, checking every field; each error names its
    /// field.
    pub fn to_proto(&self) -> Result<v1::MirrorPeer, Vec<String>> {
        let mut errors = Vec::new();
        if self.api_version != MULTICLUSTER_ODF_V1ALPHA1 || self.kind != KIND {
            errors.push(format!(
                "apiVersion/kind: {:?}/{:?} is not {MULTICLUSTER_ODF_V1ALPHA1}/{KIND}",
                self.api_version, self.kind
            ));
        }
        if !self.metadata.namespace.is_empty() {
            errors.push(format!(
                "metadata.namespace: a MirrorPeer is cluster-scoped; {:?} must be left out",
                self.metadata.namespace
            ));
        }
        let metadata = self.metadata.to_proto().map_err(|e| errors.push(e)).ok();
        let s = &self.spec;
        let mut p = v1::MirrorPeer {
            metadata,
            spec: Some(v1::MirrorPeerSpec {
                items: s
                    .items
                    .iter()
                    .map(|i| v1::PeerRef {
                        cluster_name: i.cluster_name.clone(),
                        storage_cluster_ref: i.storage_cluster_ref.as_ref().map(|r| {
                            v1::StorageClusterRef {
                                name: r.name.clone(),
                                namespace: r.namespace.clone(),
                            }
                        }),
                        secret_name: i.secret_name.clone(),
                        generate: i.generate,
                    })
                    .collect(),
                manage_s3: s.manage_s3,
                scheduling_intervals: s.scheduling_intervals.clone(),
                r#type: s.type_.clone(),
            }),
            status: None,
        };
        crate::mirrorpeer::set_defaults(&mut p);
        errors.extend(crate::mirrorpeer::validate(&p));
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors)
        }
    }
}

impl From<&v1::MirrorPeer> for MirrorPeer {
    fn from(p: &v1::MirrorPeer) -> Self {
        let spec = p.spec.clone().unwrap_or_default();
        Self {
            api_version: MULTICLUSTER_ODF_V1ALPHA1.into(),
            kind: KIND.into(),
            metadata: p.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: MirrorPeerSpec {
                items: spec
                    .items
                    .into_iter()
                    .map(|i| PeerRef {
                        cluster_name: i.cluster_name,
                        storage_cluster_ref: i.storage_cluster_ref.map(|r| StorageClusterRef {
                            name: r.name,
                            namespace: r.namespace,
                        }),
                        secret_name: i.secret_name,
                        generate: i.generate,
                    })
                    .collect(),
                manage_s3: spec.manage_s3,
                scheduling_intervals: spec.scheduling_intervals,
                type_: spec.r#type,
            },
            status: p.status.as_ref().map(|s| MirrorPeerStatus {
                phase: s.phase.clone(),
                exchanges: s
                    .exchanges
                    .iter()
                    .map(|e| PeerExchange {
                        from: e.from.clone(),
                        to: e.to.clone(),
                        phase: e.phase.clone(),
                        revision: e.revision,
                        message: e.message.clone(),
                    })
                    .collect(),
                conditions: conditions(&s.conditions),
                observed_generation: s.observed_generation,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
apiVersion: multicluster.odf.openshift.io/v1alpha1
kind: MirrorPeer
metadata:
  name: dr
spec:
  items:
  - clusterName: east
    storageClusterRef:
      name: ocs-storagecluster
      namespace: openshift-storage
  - clusterName: west
    storageClusterRef:
      name: ocs-storagecluster
      namespace: openshift-storage
    secretName: west-secret
    generate: true
  manageS3: true
  type: async
"#;

    #[test]
    fn yaml_round_trips_with_odfs_default_interval() {
        let o: MirrorPeer = serde_yaml::from_str(YAML).unwrap();
        let p = o.to_proto().unwrap();
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.scheduling_intervals, ["5m"]);
        assert!(spec.manage_s3 && spec.items[1].generate);
        let back = MirrorPeer::from(&p);
        assert_eq!(back.spec.items, o.spec.items);
        assert_eq!(back.spec.type_, "async");
        assert_eq!(back.to_proto().unwrap(), p);
    }

    #[test]
    fn mirrorpeer_bad_fields_are_named() {
        let mut o: MirrorPeer = serde_yaml::from_str(YAML).unwrap();
        o.metadata.namespace = "x".into();
        o.spec.items[1].cluster_name.clear();
        o.spec.scheduling_intervals = vec!["5 minutes".into()];
        o.spec.type_.clear();
        let errors = o.to_proto().unwrap_err().join("\n");
        for field in [
            "metadata.namespace",
            "spec.items[1].clusterName",
            "spec.schedulingIntervals[0]",
            "spec.type",
        ] {
            assert!(errors.contains(field), "{field} missing in {errors}");
        }
        o.spec.items.clear();
        assert!(o.to_proto().unwrap_err().join("").contains("spec.items"));
    }

    #[test]
    fn mirrorpeer_unknown_fields_are_refused() {
        let bad = YAML.replace("    secretName:", "    secretNam:");
        let e = serde_yaml::from_str::<MirrorPeer>(&bad).unwrap_err();
        assert!(e.to_string().contains("secretNam"), "{e}");
    }
}

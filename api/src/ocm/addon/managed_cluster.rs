//! ManagedClusterAddOn: an add-on installed on one cluster (in the cluster's namespace).

use super::{
    AddOnConfig, AddOnMeta, ConfigGroupResource, ConfigSpecHash, Subject, config_from_proto,
    config_to_proto, hash_from_proto, meta_from_proto, subject_from_proto,
};
use crate::addon::ADDON_V1ALPHA1;
use crate::ocm::meta::{Condition, Metadata, conditions};
use crate::v1;
use serde::{Deserialize, Serialize};

/// ManagedClusterAddOn in the OCM shape (in its cluster's namespace, named after the add-on).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOn {
    /// `addon.open-cluster-management.io/v1alpha1`.
    pub api_version: String,
    /// `ManagedClusterAddOn`.
    pub kind: String,
    /// Metadata (namespace = cluster name, name = add-on name).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ManagedClusterAddOnSpec,
    /// Status (ignored on input: the hub computes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ManagedClusterAddOnStatus>,
}

/// ManagedClusterAddOn spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterAddOnSpec {
    /// Namespace of the add-on agent (default `open-cluster-management-agent-addon`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub install_namespace: String,
    /// This cluster's configs (per group/resource over the placement's and the defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// ManagedClusterAddOn status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    /// Available, Degraded, Progressing, Configured, ManifestApplied, RegistrationApplied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Objects of the add-on on the hub.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
    /// The add-on's display name and description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// The config group/resources the add-on takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_configs: Vec<ConfigGroupResource>,
    /// The effective configs: desired and last applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<ConfigReference>,
    /// Where the add-on agent runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Hub credentials the add-on agent gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,
    /// How health is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// `relatedObjects[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ObjectReference {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// `configReferences[]` of a ManagedClusterAddOn.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Generation of the config last seen.
    #[serde(default)]
    pub last_observed_generation: i64,
    /// What the cluster should run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    /// What its work last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// `registrations[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    /// Signer of the credentials.
    #[serde(default)]
    pub signer_name: String,
    /// Who the credentials are for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

/// `healthCheck`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HealthCheck {
    /// `Lease` or `Customized`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
}

impl ManagedClusterAddOn {
    /// Converts to protobuf (status is dropped: the hub computes it).
    pub fn to_proto(&self) -> Result<v1::ManagedClusterAddOn, String> {
        Ok(v1::ManagedClusterAddOn {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ManagedClusterAddOnSpec {
                install_namespace: self.spec.install_namespace.clone(),
                configs: self.spec.configs.iter().map(config_to_proto).collect(),
            }),
            status: None,
            hub: None,
        })
    }
}

impl From<&v1::ManagedClusterAddOn> for ManagedClusterAddOn {
    fn from(a: &v1::ManagedClusterAddOn) -> Self {
        let spec = a.spec.clone().unwrap_or_default();
        Self {
            api_version: ADDON_V1ALPHA1.into(),
            kind: "ManagedClusterAddOn".into(),
            metadata: a.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ManagedClusterAddOnSpec {
                install_namespace: spec.install_namespace.clone(),
                configs: spec.configs.iter().map(config_from_proto).collect(),
            },
            // `hub` is hub-private: not part of the OCM shape.
            status: a.status.as_ref().map(|st| ManagedClusterAddOnStatus {
                conditions: conditions(&st.conditions),
                related_objects: st
                    .related_objects
                    .iter()
                    .map(|o| ObjectReference {
                        group: o.group.clone(),
                        resource: o.resource.clone(),
                        namespace: o.namespace.clone(),
                        name: o.name.clone(),
                    })
                    .collect(),
                add_on_meta: st
                    .add_on_meta
                    .as_ref()
                    .filter(|m| !m.display_name.is_empty() || !m.description.is_empty())
                    .map(meta_from_proto),
                supported_configs: st
                    .supported_configs
                    .iter()
                    .map(|c| ConfigGroupResource {
                        group: c.group.clone(),
                        resource: c.resource.clone(),
                    })
                    .collect(),
                config_references: st
                    .config_references
                    .iter()
                    .map(|r| ConfigReference {
                        group: r.group.clone(),
                        resource: r.resource.clone(),
                        namespace: r.namespace.clone(),
                        name: r.name.clone(),
                        last_observed_generation: r.last_observed_generation,
                        desired_config: r.desired_config.as_ref().map(hash_from_proto),
                        last_applied_config: r.last_applied_config.as_ref().map(hash_from_proto),
                    })
                    .collect(),
                namespace: st.namespace.clone(),
                registrations: st
                    .registrations
                    .iter()
                    .map(|r| RegistrationConfig {
                        signer_name: r.signer_name.clone(),
                        subject: r.subject.as_ref().map(subject_from_proto),
                    })
                    .collect(),
                health_check: st
                    .health_check
                    .as_ref()
                    .filter(|h| !h.mode.is_empty())
                    .map(|h| HealthCheck {
                        mode: h.mode.clone(),
                    }),
            }),
        }
    }
}

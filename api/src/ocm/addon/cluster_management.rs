//! ClusterManagementAddOn (cluster-scoped): an add-on, its configs and how it is installed.

use super::{
    AddOnConfig, AddOnMeta, ConfigReferent, ConfigSpecHash, config_from_proto, config_to_proto,
    hash_from_proto, meta_from_proto, meta_to_proto, referent_from_proto, referent_to_proto,
};
use crate::addon::ADDON_V1ALPHA1;
use crate::ocm::meta::{Condition, Metadata, conditions};
use crate::ocm::replicaset::RolloutStrategy;
use crate::v1;
use serde::{Deserialize, Serialize};

/// ClusterManagementAddOn in the OCM shape (cluster-scoped).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOn {
    /// `addon.open-cluster-management.io/v1alpha1`.
    pub api_version: String,
    /// `ClusterManagementAddOn`.
    pub kind: String,
    /// Metadata (the name is the add-on's name).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ClusterManagementAddOnSpec,
    /// Status (ignored on input: the hub computes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterManagementAddOnStatus>,
}

/// ClusterManagementAddOn spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterManagementAddOnSpec {
    /// Display name and description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// OCM's deprecated single config (`{crdName, crName}`): accepted only when empty (as OCM
    /// prints it), never printed.
    #[serde(default, skip_serializing)]
    pub add_on_configuration: Option<ConfigCoordinates>,
    /// The group/resources of config the add-on takes, with their defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_configs: Vec<ConfigMeta>,
    /// `Manual` (default) or `Placements`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_strategy: Option<InstallStrategy>,
}

/// OCM's deprecated `addOnConfiguration`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigCoordinates {
    /// CRD of the config.
    #[serde(default)]
    pub crd_name: String,
    /// The config object.
    #[serde(default)]
    pub cr_name: String,
    /// Generation last seen.
    #[serde(default)]
    pub last_observed_generation: i64,
}

/// A supported config group/resource and its default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMeta {
    /// API group (`""` for core).
    #[serde(default)]
    pub group: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// The config every installation gets unless a placement or the cluster names another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_config: Option<ConfigReferent>,
}

/// `installStrategy`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InstallStrategy {
    /// `Manual` (default) or `Placements`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Placements whose clusters get the add-on (type `Placements`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<PlacementStrategy>,
}

/// One placement of `installStrategy.placements`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementStrategy {
    /// Placement namespace.
    #[serde(default)]
    pub namespace: String,
    /// Placement name.
    #[serde(default)]
    pub name: String,
    /// Configs of this placement's clusters (per group/resource over the defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
    /// How config changes roll out (default `All`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
}

/// ClusterManagementAddOn status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// The default configs with their spec hashes (`defaultconfigReferences`, lower-case c, as
    /// OCM v1alpha1 spells it).
    #[serde(
        default,
        rename = "defaultconfigReferences",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub default_config_references: Vec<DefaultConfigReference>,
    /// Per placement: its configs and rollout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}

/// A default config and its hash.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DefaultConfigReference {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// The config and its spec hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
}

/// A config of a placement: desired, last applied everywhere, last known good.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallConfigReference {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// What the placement's clusters should run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    /// The last config every cluster ran without failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_good_config: Option<ConfigSpecHash>,
    /// The last config every cluster applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// One placement's install progression (OCM's fields, then Flotilla's).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallProgression {
    /// Placement namespace.
    #[serde(default)]
    pub namespace: String,
    /// Placement name.
    #[serde(default)]
    pub name: String,
    /// Its configs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<InstallConfigReference>,
    /// `Progressing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Flotilla: per decision group, its clusters and how many are done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroupProgress>,
    /// Flotilla: why the rollout stopped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stopped_reason: String,
    /// Flotilla: settings clamped or defaulted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Flotilla: the placement's clusters (shown with `updated` and `failed` once any is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i32>,
    /// Flotilla: clusters running the placement's desired configs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<i32>,
    /// Flotilla: clusters whose rollout failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
}

/// Flotilla: one decision group of a placement's rollout.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupProgress {
    /// Index of the group.
    #[serde(default)]
    pub index: i32,
    /// Name of the group (empty for unnamed groups).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Clusters in the group.
    #[serde(default)]
    pub total: i32,
    /// Of which done.
    #[serde(default)]
    pub available: i32,
}

impl ClusterManagementAddOn {
    /// Converts to protobuf (status is dropped: the hub computes it).
    pub fn to_proto(&self) -> Result<v1::ClusterManagementAddOn, String> {
        let s = &self.spec;
        if let Some(c) = &s.add_on_configuration
            && *c != ConfigCoordinates::default()
        {
            return Err(
                "spec.addOnConfiguration: deprecated in OCM and not supported; \
                 declare the config under spec.supportedConfigs"
                    .into(),
            );
        }
        Ok(v1::ClusterManagementAddOn {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ClusterManagementAddOnSpec {
                add_on_meta: s.add_on_meta.as_ref().map(meta_to_proto),
                supported_configs: s
                    .supported_configs
                    .iter()
                    .map(|c| v1::ConfigMeta {
                        group: c.group.clone(),
                        resource: c.resource.clone(),
                        default_config: c.default_config.as_ref().map(referent_to_proto),
                    })
                    .collect(),
                install_strategy: s.install_strategy.as_ref().map(|i| v1::InstallStrategy {
                    r#type: i.type_.clone(),
                    placements: i
                        .placements
                        .iter()
                        .map(|p| v1::PlacementStrategy {
                            namespace: p.namespace.clone(),
                            name: p.name.clone(),
                            configs: p.configs.iter().map(config_to_proto).collect(),
                            rollout_strategy: p
                                .rollout_strategy
                                .as_ref()
                                .map(RolloutStrategy::to_proto),
                        })
                        .collect(),
                }),
            }),
            status: None,
        })
    }
}

impl From<&v1::ClusterManagementAddOn> for ClusterManagementAddOn {
    fn from(a: &v1::ClusterManagementAddOn) -> Self {
        let spec = a.spec.clone().unwrap_or_default();
        Self {
            api_version: ADDON_V1ALPHA1.into(),
            kind: "ClusterManagementAddOn".into(),
            metadata: a.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ClusterManagementAddOnSpec {
                add_on_meta: spec.add_on_meta.as_ref().map(meta_from_proto),
                add_on_configuration: None,
                supported_configs: spec
                    .supported_configs
                    .iter()
                    .map(|c| ConfigMeta {
                        group: c.group.clone(),
                        resource: c.resource.clone(),
                        default_config: c.default_config.as_ref().map(referent_from_proto),
                    })
                    .collect(),
                install_strategy: spec.install_strategy.as_ref().map(|i| InstallStrategy {
                    type_: i.r#type.clone(),
                    placements: i
                        .placements
                        .iter()
                        .map(|p| PlacementStrategy {
                            namespace: p.namespace.clone(),
                            name: p.name.clone(),
                            configs: p.configs.iter().map(config_from_proto).collect(),
                            rollout_strategy: p
                                .rollout_strategy
                                .as_ref()
                                .map(RolloutStrategy::from),
                        })
                        .collect(),
                }),
            },
            status: a.status.as_ref().map(|st| ClusterManagementAddOnStatus {
                default_config_references: st
                    .default_config_references
                    .iter()
                    .map(|r| DefaultConfigReference {
                        group: r.group.clone(),
                        resource: r.resource.clone(),
                        desired_config: r.desired_config.as_ref().map(hash_from_proto),
                    })
                    .collect(),
                install_progressions: st
                    .install_progressions
                    .iter()
                    .map(|p| {
                        let counted = p.total != 0 || p.updated != 0 || p.failed != 0;
                        InstallProgression {
                            namespace: p.namespace.clone(),
                            name: p.name.clone(),
                            config_references: p
                                .config_references
                                .iter()
                                .map(|r| InstallConfigReference {
                                    group: r.group.clone(),
                                    resource: r.resource.clone(),
                                    desired_config: r.desired_config.as_ref().map(hash_from_proto),
                                    last_known_good_config: r
                                        .last_known_good_config
                                        .as_ref()
                                        .map(hash_from_proto),
                                    last_applied_config: r
                                        .last_applied_config
                                        .as_ref()
                                        .map(hash_from_proto),
                                })
                                .collect(),
                            conditions: conditions(&p.conditions),
                            decision_groups: p
                                .decision_groups
                                .iter()
                                .map(|g| DecisionGroupProgress {
                                    index: g.index,
                                    name: g.name.clone(),
                                    total: g.total,
                                    available: g.available,
                                })
                                .collect(),
                            stopped_reason: p.stopped_reason.clone(),
                            notes: p.notes.clone(),
                            total: counted.then_some(p.total),
                            updated: counted.then_some(p.updated),
                            failed: counted.then_some(p.failed),
                        }
                    })
                    .collect(),
            }),
        }
    }
}

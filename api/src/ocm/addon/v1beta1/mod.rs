//! `addon.open-cluster-management.io/v1beta1` ClusterManagementAddOn, ManagedClusterAddOn and
//! AddOnDeploymentConfig as input: each is read in OCM's v1beta1 shape and converted to the
//! v1alpha1 objects Flotilla stores and prints (v1alpha1 is the storage version, as in OCM), by
//! OCM's conversion rules (`addon/v1beta1/conversion.go` of open-cluster-management-io/api):
//!
//! - ClusterManagementAddOn: `spec.defaultConfigs[] {group, resource, namespace, name}` is
//!   v1alpha1's `spec.supportedConfigs[] {group, resource, defaultConfig: {namespace, name}}`;
//!   the name [`RESERVED_NO_DEFAULT`] stands for a supported config without a default (v1beta1
//!   has no other way to say it), so it never becomes a real config name.
//! - ManagedClusterAddOn: v1beta1 has no `spec.installNamespace`; OCM keeps it in the annotation
//!   [`INSTALL_NAMESPACE_ANNOTATION`], which becomes `spec.installNamespace` again (and is not
//!   stored as an annotation: the spec says it).
//! - AddOnDeploymentConfig: the same spec in both versions (parsed by the v1alpha1 shape).
//!
//! Errors name the v1beta1 field (`spec.defaultConfigs[1].name`), not the v1alpha1 one it is
//! converted to. Statuses are the hub's and ignored on input, as in v1alpha1; that includes a
//! ManagedClusterAddOn's typed `status.registrations` (`type: kubeClient|customSigner`), which
//! only the hub writes. AddOnTemplate has no v1beta1 version upstream.

use super::{AddOnConfig, AddOnMeta, ConfigMeta, ConfigReferent, InstallStrategy};
use crate::addon::validate;
use crate::ocm::meta::Metadata;
use crate::v1;
use serde::Deserialize;

/// apiVersion of the v1beta1 add-on kinds.
pub const ADDON_V1BETA1: &str = "addon.open-cluster-management.io/v1beta1";
/// OCM's `ReservedNoDefaultConfigName`: a v1beta1 default config of this name is a supported
/// config group/resource without a default.
pub use crate::addon::configs::RESERVED_NO_DEFAULT;
/// OCM's `InstallNamespaceAnnotation`: a v1beta1 ManagedClusterAddOn's install namespace.
pub const INSTALL_NAMESPACE_ANNOTATION: &str =
    "addon.open-cluster-management.io/v1alpha1-install-namespace";

/// ClusterManagementAddOn in OCM's v1beta1 shape (input only).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOn {
    /// `addon.open-cluster-management.io/v1beta1`.
    pub api_version: String,
    /// `ClusterManagementAddOn`.
    pub kind: String,
    /// Metadata (the name is the add-on's name).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ClusterManagementAddOnSpec,
    /// Status: the hub's, ignored.
    #[serde(default)]
    pub status: Option<serde_yaml::Value>,
}

/// v1beta1 ClusterManagementAddOn spec.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterManagementAddOnSpec {
    /// Display name and description.
    #[serde(default)]
    pub add_on_meta: Option<AddOnMeta>,
    /// The config group/resources the add-on takes, each with its default (or
    /// [`RESERVED_NO_DEFAULT`]).
    #[serde(default)]
    pub default_configs: Vec<AddOnConfig>,
    /// `Manual` (default) or `Placements`: as in v1alpha1.
    #[serde(default)]
    pub install_strategy: Option<InstallStrategy>,
    /// v1alpha1's name of `defaultConfigs`: refused with a hint.
    #[serde(default)]
    pub supported_configs: Option<serde_yaml::Value>,
}

/// ManagedClusterAddOn in OCM's v1beta1 shape (input only).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOn {
    /// `addon.open-cluster-management.io/v1beta1`.
    pub api_version: String,
    /// `ManagedClusterAddOn`.
    pub kind: String,
    /// Metadata (namespace = cluster name, name = add-on name; the install namespace in
    /// [`INSTALL_NAMESPACE_ANNOTATION`]).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ManagedClusterAddOnSpec,
    /// Status: the hub's, ignored.
    #[serde(default)]
    pub status: Option<serde_yaml::Value>,
}

/// v1beta1 ManagedClusterAddOn spec.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterAddOnSpec {
    /// This cluster's configs: as in v1alpha1.
    #[serde(default)]
    pub configs: Vec<AddOnConfig>,
    /// Removed in v1beta1: refused with a hint.
    #[serde(default)]
    pub install_namespace: Option<serde_yaml::Value>,
}

impl ClusterManagementAddOn {
    /// The v1alpha1 object this document is, checked (every problem at once, each naming its
    /// v1beta1 field: `path: message; also path: message`).
    pub fn to_proto(&self) -> Result<v1::ClusterManagementAddOn, String> {
        if self.spec.supported_configs.is_some() {
            return Err(format!(
                "spec.supportedConfigs: not a field of {ADDON_V1BETA1} (its spec.defaultConfigs \
                 lists the supported configs with their defaults; name \
                 {RESERVED_NO_DEFAULT:?} for one without a default)"
            ));
        }
        let mut errors = Vec::new();
        for (i, c) in self.spec.default_configs.iter().enumerate() {
            if c.name.is_empty() {
                errors.push(format!(
                    "spec.defaultConfigs[{i}].name: required (name {RESERVED_NO_DEFAULT:?} for a \
                     supported config without a default)"
                ));
            }
        }
        check(errors)?;
        let alpha = super::ClusterManagementAddOn {
            api_version: crate::addon::ADDON_V1ALPHA1.into(),
            kind: self.kind.clone(),
            metadata: self.metadata.clone(),
            spec: super::ClusterManagementAddOnSpec {
                add_on_meta: self.spec.add_on_meta.clone(),
                add_on_configuration: None,
                supported_configs: self
                    .spec
                    .default_configs
                    .iter()
                    .map(supported_config)
                    .collect(),
                install_strategy: self.spec.install_strategy.clone(),
            },
            status: None,
        };
        let proto = alpha.to_proto()?;
        check(
            validate::cluster_management_addon(&proto)
                .into_iter()
                .map(|e| default_configs_path(&e))
                .collect(),
        )?;
        Ok(proto)
    }
}

/// A v1beta1 default config as v1alpha1's supported config: [`RESERVED_NO_DEFAULT`] is none.
fn supported_config(c: &AddOnConfig) -> ConfigMeta {
    ConfigMeta {
        group: c.group.clone(),
        resource: c.resource.clone(),
        default_config: (c.name != RESERVED_NO_DEFAULT).then(|| ConfigReferent {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
        }),
    }
}

/// A v1alpha1 validation error about `spec.supportedConfigs` with the v1beta1 path it came from
/// (`spec.supportedConfigs[1].defaultConfig.name` → `spec.defaultConfigs[1].name`); the list
/// is converted entry by entry, so the indexes are the document's.
fn default_configs_path(error: &str) -> String {
    error
        .replace("].defaultConfig", "]")
        .replace("supportedConfigs[", "defaultConfigs[")
}

impl ManagedClusterAddOn {
    /// The v1alpha1 object this document is, checked (every problem at once, each naming its
    /// v1beta1 field). The install namespace moves from [`INSTALL_NAMESPACE_ANNOTATION`] to
    /// `spec.installNamespace`.
    pub fn to_proto(&self) -> Result<v1::ManagedClusterAddOn, String> {
        if self.spec.install_namespace.is_some() {
            return Err(format!(
                "spec.installNamespace: not a field of {ADDON_V1BETA1} (set the annotation \
                 {INSTALL_NAMESPACE_ANNOTATION:?}, or write the document as v1alpha1)"
            ));
        }
        let mut metadata = self.metadata.clone();
        let install_namespace = metadata
            .annotations
            .remove(INSTALL_NAMESPACE_ANNOTATION)
            .unwrap_or_default();
        if !install_namespace.is_empty()
            && let Err(e) = crate::names::validate_dns1123_label(
                &format!("metadata.annotations[{INSTALL_NAMESPACE_ANNOTATION:?}]"),
                &install_namespace,
            )
        {
            return Err(e.to_string());
        }
        let alpha = super::ManagedClusterAddOn {
            api_version: crate::addon::ADDON_V1ALPHA1.into(),
            kind: self.kind.clone(),
            metadata,
            spec: super::ManagedClusterAddOnSpec {
                install_namespace,
                configs: self.spec.configs.clone(),
            },
            status: None,
        };
        alpha.to_proto()
    }
}

/// `Ok` when there is no error, else every error in one string (`first; also second`).
fn check(errors: Vec<String>) -> Result<(), String> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; also "))
    }
}

#[cfg(test)]
mod tests;

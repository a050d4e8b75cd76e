//! `addon.open-cluster-management.io/v1alpha1` ClusterManagementAddOn, ManagedClusterAddOn,
//! AddOnTemplate and AddOnDeploymentConfig in the shapes OCM users write and `kubectl get -o
//! yaml` prints; [`v1beta1`] reads OCM's v1beta1 shapes as input, converted to these.
//!
//! Input keeps OCM's field names exactly (unknown fields of a spec are refused, naming their
//! path); statuses are printed but ignored on input (the hub computes them). The few places the
//! protobuf is flatter than OCM's YAML:
//! - a hub permission's `currentCluster: {clusterRoleName}` and `singleNamespace: {namespace,
//!   roleRef}` are flat fields;
//! - `nodePlacement.nodeSelector` given at all (even `{}`) is `has_node_selector`;
//! - `proxyConfig.caBundle` is base64 in YAML (Go `[]byte`) and bytes in protobuf;
//! - resource quantities (`cpu: 1`, `memory: 64Mi`) are strings.

use crate::v1;
use serde::{Deserialize, Serialize};

mod cluster_management;
mod deployment_config;
mod managed_cluster;
mod template;
pub mod v1beta1;

pub use cluster_management::*;
pub use deployment_config::*;
pub use managed_cluster::*;
pub use template::*;

// ---- shared pieces ----

/// `addOnMeta`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddOnMeta {
    /// Name shown to users.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What the add-on does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A config object: `{namespace?, name}` (also a custom signer's `signingCA`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigReferent {
    /// Namespace (empty for cluster-scoped configs such as AddOnTemplates).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// `AddOnConfig`: a config of one group/resource.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AddOnConfig {
    /// API group (`""` for core).
    #[serde(default)]
    pub group: String,
    /// Plural resource (`addondeploymentconfigs`).
    #[serde(default)]
    pub resource: String,
    /// Namespace (empty for cluster-scoped configs).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// `ConfigGroupResource`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigGroupResource {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
}

/// `ConfigSpecHash`: a config and the hash of its spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSpecHash {
    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// sha256 of the spec (hex).
    #[serde(default)]
    pub spec_hash: String,
}

/// `Subject` of a registration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// User name.
    #[serde(default)]
    pub user: String,
    /// Groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Organization units (`organizationUnit` in OCM's JSON).
    #[serde(
        default,
        rename = "organizationUnit",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub organization_units: Vec<String>,
}

fn referent_to_proto(r: &ConfigReferent) -> v1::ConfigReferent {
    v1::ConfigReferent {
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

fn referent_from_proto(r: &v1::ConfigReferent) -> ConfigReferent {
    ConfigReferent {
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

fn config_to_proto(c: &AddOnConfig) -> v1::AddOnConfig {
    v1::AddOnConfig {
        group: c.group.clone(),
        resource: c.resource.clone(),
        namespace: c.namespace.clone(),
        name: c.name.clone(),
    }
}

fn config_from_proto(c: &v1::AddOnConfig) -> AddOnConfig {
    AddOnConfig {
        group: c.group.clone(),
        resource: c.resource.clone(),
        namespace: c.namespace.clone(),
        name: c.name.clone(),
    }
}

fn meta_to_proto(m: &AddOnMeta) -> v1::AddOnMeta {
    v1::AddOnMeta {
        display_name: m.display_name.clone(),
        description: m.description.clone(),
    }
}

fn meta_from_proto(m: &v1::AddOnMeta) -> AddOnMeta {
    AddOnMeta {
        display_name: m.display_name.clone(),
        description: m.description.clone(),
    }
}

fn hash_from_proto(h: &v1::ConfigSpecHash) -> ConfigSpecHash {
    ConfigSpecHash {
        namespace: h.namespace.clone(),
        name: h.name.clone(),
        spec_hash: h.spec_hash.clone(),
    }
}

fn subject_to_proto(s: &Subject) -> v1::Subject {
    v1::Subject {
        user: s.user.clone(),
        groups: s.groups.clone(),
        organization_unit: s.organization_units.clone(),
    }
}

fn subject_from_proto(s: &v1::Subject) -> Subject {
    Subject {
        user: s.user.clone(),
        groups: s.groups.clone(),
        organization_units: s.organization_unit.clone(),
    }
}

#[cfg(test)]
mod tests;

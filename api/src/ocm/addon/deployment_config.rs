//! AddOnDeploymentConfig (namespaced): variables, node placement, registries, proxy and
//! resources of an add-on agent.

use crate::addon::ADDON_V1ALPHA1;
use crate::ocm::meta::Metadata;
use crate::ocm::placement::Toleration;
use crate::v1;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// AddOnDeploymentConfig in the OCM shape (namespaced).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfig {
    /// `addon.open-cluster-management.io/v1alpha1`.
    pub api_version: String,
    /// `AddOnDeploymentConfig`.
    pub kind: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: AddOnDeploymentConfigSpec,
}

/// AddOnDeploymentConfig spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddOnDeploymentConfigSpec {
    /// Values of the template's `{{VARIABLES}}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub customized_variables: Vec<CustomizedVariable>,
    /// Node selector and tolerations of the add-on agent's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,
    /// Image mirrors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<ImageMirror>,
    /// Proxy settings of the add-on agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_config: Option<ProxyConfig>,
    /// Namespace of the add-on agent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent_install_namespace: String,
    /// Resource requirements per container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_requirements: Vec<ContainerResourceRequirements>,
}

/// `customizedVariables[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CustomizedVariable {
    /// Variable name (`LOG_LEVEL`).
    #[serde(default)]
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

/// `nodePlacement`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePlacement {
    /// Node labels the pods require (given at all, even `{}`, is kept apart from absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Pod tolerations (Kubernetes effects: NoSchedule, PreferNoSchedule, NoExecute).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// `registries[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ImageMirror {
    /// Mirror to pull from.
    #[serde(default)]
    pub mirror: String,
    /// Registry (prefix) it mirrors.
    #[serde(default)]
    pub source: String,
}

/// `proxyConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyConfig {
    /// HTTP proxy URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub http_proxy: String,
    /// HTTPS proxy URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub https_proxy: String,
    /// CA bundle of the HTTPS proxy, base64 (Go `[]byte`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_bundle: String,
    /// Hosts not proxied.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_proxy: String,
}

/// `resourceRequirements[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ContainerResourceRequirements {
    /// `<kind>:<name>:<container>`, each part may be `*`.
    #[serde(default, rename = "containerID")]
    pub container_id: String,
    /// Limits and requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// Kubernetes `ResourceRequirements` (quantities as strings; `claims` is not supported).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResourceRequirements {
    /// Limits (`cpu: 500m`).
    #[serde(
        default,
        deserialize_with = "quantities",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub limits: BTreeMap<String, String>,
    /// Requests.
    #[serde(
        default,
        deserialize_with = "quantities",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub requests: BTreeMap<String, String>,
}

/// A quantity as YAML may hold it: `1`, `0.5` or `"500m"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum QuantityIn {
    Int(i64),
    Float(f64),
    Str(String),
}

fn quantities<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: BTreeMap<String, QuantityIn> = BTreeMap::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                QuantityIn::Int(n) => n.to_string(),
                QuantityIn::Float(f) => f.to_string(),
                QuantityIn::Str(s) => s,
            };
            (k, text)
        })
        .collect())
}

/// Standard base64 with padding, as Go's `encoding/json` writes a `[]byte`.
pub fn base64_encode(bytes: &[u8]) -> String {
    data_encoding::BASE64.encode(bytes)
}

/// Decodes standard base64 with padding (line breaks are skipped, as Go does).
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let chars: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b'\r' | b'\n'))
        .collect();
    // Go refuses text after the padding; data-encoding would decode padded blocks one after
    // another.
    if let Some(pad) = chars.iter().position(|c| *c == b'=')
        && chars[pad..].iter().any(|c| *c != b'=')
    {
        return Err("not base64: '=' padding only ends the text".into());
    }
    data_encoding::BASE64
        .decode(&chars)
        .map_err(|e| format!("not base64: {e}"))
}

impl AddOnDeploymentConfig {
    /// Converts to protobuf; a `caBundle` that is not base64 is an error naming it.
    pub fn to_proto(&self) -> Result<v1::AddOnDeploymentConfig, String> {
        let s = &self.spec;
        let proxy_config = match &s.proxy_config {
            None => None,
            Some(p) => Some(v1::ProxyConfig {
                http_proxy: p.http_proxy.clone(),
                https_proxy: p.https_proxy.clone(),
                ca_bundle: base64_decode(&p.ca_bundle)
                    .map_err(|e| format!("spec.proxyConfig.caBundle: {e}"))?,
                no_proxy: p.no_proxy.clone(),
            }),
        };
        Ok(v1::AddOnDeploymentConfig {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::AddOnDeploymentConfigSpec {
                customized_variables: s
                    .customized_variables
                    .iter()
                    .map(|v| v1::CustomizedVariable {
                        name: v.name.clone(),
                        value: v.value.clone(),
                    })
                    .collect(),
                node_placement: s.node_placement.as_ref().map(|n| v1::NodePlacement {
                    node_selector: n
                        .node_selector
                        .clone()
                        .unwrap_or_default()
                        .into_iter()
                        .collect(),
                    tolerations: n
                        .tolerations
                        .iter()
                        .map(|t| v1::Toleration {
                            key: t.key.clone(),
                            operator: t.operator.clone(),
                            value: t.value.clone(),
                            effect: t.effect.clone(),
                            toleration_seconds: t.toleration_seconds,
                        })
                        .collect(),
                    has_node_selector: n.node_selector.is_some(),
                }),
                registries: s
                    .registries
                    .iter()
                    .map(|r| v1::ImageMirror {
                        mirror: r.mirror.clone(),
                        source: r.source.clone(),
                    })
                    .collect(),
                proxy_config,
                agent_install_namespace: s.agent_install_namespace.clone(),
                resource_requirements: s
                    .resource_requirements
                    .iter()
                    .map(|r| v1::ContainerResourceRequirements {
                        container_id: r.container_id.clone(),
                        resources: r.resources.as_ref().map(|q| v1::ResourceRequirements {
                            limits: q.limits.clone().into_iter().collect(),
                            requests: q.requests.clone().into_iter().collect(),
                        }),
                    })
                    .collect(),
            }),
        })
    }
}

impl From<&v1::AddOnDeploymentConfig> for AddOnDeploymentConfig {
    fn from(c: &v1::AddOnDeploymentConfig) -> Self {
        let spec = c.spec.clone().unwrap_or_default();
        let sorted = |m: &std::collections::HashMap<String, String>| -> BTreeMap<String, String> {
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        Self {
            api_version: ADDON_V1ALPHA1.into(),
            kind: "AddOnDeploymentConfig".into(),
            metadata: c.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: AddOnDeploymentConfigSpec {
                customized_variables: spec
                    .customized_variables
                    .iter()
                    .map(|v| CustomizedVariable {
                        name: v.name.clone(),
                        value: v.value.clone(),
                    })
                    .collect(),
                node_placement: spec.node_placement.as_ref().map(|n| NodePlacement {
                    node_selector: (n.has_node_selector || !n.node_selector.is_empty())
                        .then(|| sorted(&n.node_selector)),
                    tolerations: n
                        .tolerations
                        .iter()
                        .map(|t| Toleration {
                            key: t.key.clone(),
                            operator: t.operator.clone(),
                            value: t.value.clone(),
                            effect: t.effect.clone(),
                            toleration_seconds: t.toleration_seconds,
                        })
                        .collect(),
                }),
                registries: spec
                    .registries
                    .iter()
                    .map(|r| ImageMirror {
                        mirror: r.mirror.clone(),
                        source: r.source.clone(),
                    })
                    .collect(),
                proxy_config: spec.proxy_config.as_ref().map(|p| ProxyConfig {
                    http_proxy: p.http_proxy.clone(),
                    https_proxy: p.https_proxy.clone(),
                    ca_bundle: base64_encode(&p.ca_bundle),
                    no_proxy: p.no_proxy.clone(),
                }),
                agent_install_namespace: spec.agent_install_namespace.clone(),
                resource_requirements: spec
                    .resource_requirements
                    .iter()
                    .map(|r| ContainerResourceRequirements {
                        container_id: r.container_id.clone(),
                        resources: r.resources.as_ref().map(|q| ResourceRequirements {
                            limits: sorted(&q.limits),
                            requests: sorted(&q.requests),
                        }),
                    })
                    .collect(),
            },
        }
    }
}

//! AddOnTemplate (cluster-scoped): the add-on agent's ManifestWork spec and its registrations.

use super::{
    ConfigReferent, Subject, referent_from_proto, referent_to_proto, subject_from_proto,
    subject_to_proto,
};
use crate::addon::ADDON_V1ALPHA1;
use crate::ocm::meta::Metadata;
use crate::ocm::work::{ManifestWork, WORK_V1, WorkSpec};
use crate::v1;
use serde::{Deserialize, Serialize};

/// AddOnTemplate in the OCM shape (cluster-scoped).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AddOnTemplate {
    /// `addon.open-cluster-management.io/v1alpha1`.
    pub api_version: String,
    /// `AddOnTemplate`.
    pub kind: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: AddOnTemplateSpec,
}

/// AddOnTemplate spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddOnTemplateSpec {
    /// The add-on this template deploys.
    #[serde(default)]
    pub addon_name: String,
    /// The ManifestWork spec of the add-on agent (manifests may hold `{{VARIABLES}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_spec: Option<WorkSpec>,
    /// Hub credentials the add-on agent needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registration: Vec<RegistrationSpec>,
}

/// `registration[]` of a template.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrationSpec {
    /// `KubeClient` or `CustomSigner`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Settings of `KubeClient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client: Option<KubeClientRegistration>,
    /// Settings of `CustomSigner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_signer: Option<CustomSignerRegistration>,
}

/// `kubeClient`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeClientRegistration {
    /// What the add-on agent may do on the hub.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hub_permissions: Vec<HubPermission>,
}

/// `hubPermissions[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HubPermission {
    /// `CurrentCluster` or `SingleNamespace`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Settings of `CurrentCluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_cluster: Option<CurrentClusterBinding>,
    /// Settings of `SingleNamespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_namespace: Option<SingleNamespaceBinding>,
}

/// `currentCluster`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CurrentClusterBinding {
    /// ClusterRole bound in the cluster's namespace.
    #[serde(default)]
    pub cluster_role_name: String,
}

/// `singleNamespace`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SingleNamespaceBinding {
    /// Namespace on the hub.
    #[serde(default)]
    pub namespace: String,
    /// Role or ClusterRole bound there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_ref: Option<RoleRef>,
}

/// An RBAC `roleRef`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleRef {
    /// `rbac.authorization.k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// `customSigner`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomSignerRegistration {
    /// Signer name (`example.com/signer-name`).
    #[serde(default)]
    pub signer_name: String,
    /// Who the credentials are for (default: the add-on agent's identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// The secret with the signing CA.
    #[serde(default, rename = "signingCA", skip_serializing_if = "Option::is_none")]
    pub signing_ca: Option<ConfigReferent>,
}

impl AddOnTemplate {
    /// Converts to protobuf; errors name the field (`spec.agentSpec.workload.manifests[0]: …`).
    pub fn to_proto(&self) -> Result<v1::AddOnTemplate, String> {
        let s = &self.spec;
        let agent_spec = match &s.agent_spec {
            None => None,
            // The agent spec converts as a ManifestWork's would; its errors get our path.
            Some(spec) => {
                ManifestWork {
                    api_version: WORK_V1.into(),
                    kind: "ManifestWork".into(),
                    metadata: Metadata::default(),
                    spec: spec.clone(),
                    status: None,
                }
                .to_proto()
                .map_err(|e| match e.strip_prefix("spec.") {
                    Some(rest) => format!("spec.agentSpec.{rest}"),
                    None => format!("spec.agentSpec: {e}"),
                })?
                .spec
            }
        };
        Ok(v1::AddOnTemplate {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::AddOnTemplateSpec {
                addon_name: s.addon_name.clone(),
                agent_spec,
                registration: s
                    .registration
                    .iter()
                    .map(|r| v1::RegistrationSpec {
                        r#type: r.type_.clone(),
                        kube_client: r.kube_client.as_ref().map(|k| {
                            v1::KubeClientRegistrationConfig {
                                hub_permissions: k
                                    .hub_permissions
                                    .iter()
                                    .map(|p| {
                                        let single = p.single_namespace.clone().unwrap_or_default();
                                        v1::HubPermissionConfig {
                                            r#type: p.type_.clone(),
                                            current_cluster_role_name: p
                                                .current_cluster
                                                .as_ref()
                                                .map(|c| c.cluster_role_name.clone())
                                                .unwrap_or_default(),
                                            single_namespace: single.namespace,
                                            single_namespace_role_ref: single.role_ref.map(|r| {
                                                v1::RoleRef {
                                                    api_group: r.api_group,
                                                    kind: r.kind,
                                                    name: r.name,
                                                }
                                            }),
                                        }
                                    })
                                    .collect(),
                            }
                        }),
                        custom_signer: r.custom_signer.as_ref().map(|c| {
                            v1::CustomSignerRegistrationConfig {
                                signer_name: c.signer_name.clone(),
                                subject: c.subject.as_ref().map(subject_to_proto),
                                signing_ca: c.signing_ca.as_ref().map(referent_to_proto),
                            }
                        }),
                    })
                    .collect(),
            }),
        })
    }
}

impl From<&v1::AddOnTemplate> for AddOnTemplate {
    fn from(t: &v1::AddOnTemplate) -> Self {
        let spec = t.spec.clone().unwrap_or_default();
        Self {
            api_version: ADDON_V1ALPHA1.into(),
            kind: "AddOnTemplate".into(),
            metadata: t.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: AddOnTemplateSpec {
                addon_name: spec.addon_name.clone(),
                agent_spec: spec.agent_spec.as_ref().map(|a| {
                    ManifestWork::from(&v1::ManifestWork {
                        metadata: None,
                        spec: Some(a.clone()),
                        status: None,
                        hub: None,
                    })
                    .spec
                }),
                registration: spec
                    .registration
                    .iter()
                    .map(|r| RegistrationSpec {
                        type_: r.r#type.clone(),
                        kube_client: r.kube_client.as_ref().map(|k| KubeClientRegistration {
                            hub_permissions: k
                                .hub_permissions
                                .iter()
                                .map(|p| HubPermission {
                                    type_: p.r#type.clone(),
                                    current_cluster: (!p.current_cluster_role_name.is_empty())
                                        .then(|| CurrentClusterBinding {
                                            cluster_role_name: p.current_cluster_role_name.clone(),
                                        }),
                                    single_namespace: (!p.single_namespace.is_empty()
                                        || p.single_namespace_role_ref.is_some())
                                    .then(|| SingleNamespaceBinding {
                                        namespace: p.single_namespace.clone(),
                                        role_ref: p.single_namespace_role_ref.as_ref().map(|r| {
                                            RoleRef {
                                                api_group: r.api_group.clone(),
                                                kind: r.kind.clone(),
                                                name: r.name.clone(),
                                            }
                                        }),
                                    }),
                                })
                                .collect(),
                        }),
                        custom_signer: r.custom_signer.as_ref().map(|c| CustomSignerRegistration {
                            signer_name: c.signer_name.clone(),
                            subject: c.subject.as_ref().map(subject_from_proto),
                            signing_ca: c.signing_ca.as_ref().map(referent_from_proto),
                        }),
                    })
                    .collect(),
            },
        }
    }
}

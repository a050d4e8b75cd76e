//! Governance documents in the shapes policy-collection writes and `kubectl get -o yaml` prints:
//! Policy and PlacementBinding (`policy.open-cluster-management.io/v1`), PolicySet
//! (`v1beta1`), and the legacy PlacementRule (`apps.open-cluster-management.io/v1`).
//!
//! Conversion checks what OCM's CRDs and webhooks check and reports every problem with its
//! path (`spec.policy-templates[0].objectDefinition.spec.object-templates[1].complianceType`).
//! A template of a kind Flotilla does not evaluate (OperatorPolicy, Gatekeeper, Kyverno…) is
//! accepted as written: the agent reports it NonCompliant, naming the kind. A CertificatePolicy
//! is accepted as written too and judged by the agent.

use super::meta::{LabelSelector, Metadata};
use crate::policy::config::{ConfigurationPolicy, Remediation, TemplateMeta};
use crate::policy::{APPS_GROUP, CLUSTER_GROUP, FieldError, GROUP};
use crate::v1;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest `<namespace>.<name>` of a policy: OCM names the copy on each cluster so, and it must
/// be a label value (63) — the webhook's limit.
pub const MAX_QUALIFIED_NAME: usize = 62;

fn is_false(b: &bool) -> bool {
    !*b
}

/// Policy in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `policy.open-cluster-management.io/v1`.
    pub api_version: String,
    /// `Policy`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: PolicySpec,
    /// Status (ignored on input: the hub computes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PolicyStatus>,
}

/// Policy spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// A disabled policy is removed from its clusters.
    #[serde(default)]
    pub disabled: bool,
    /// `inform` or `enforce`; overrides every template's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub remediation_action: String,
    /// The templates.
    #[serde(default, rename = "policy-templates")]
    pub policy_templates: Vec<PolicyTemplate>,
    /// Policies (or other objects) this one waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<PolicyDependency>,
    /// Whether labels and annotations are copied to the clusters' copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_policy_metadata: Option<bool>,
    /// Hub templates' options: accepted for compatibility, not used (Flotilla resolves no hub
    /// templates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_template_options: Option<Value>,
}

/// One of `policy-templates[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTemplate {
    /// The template object (a ConfigurationPolicy, or any other kind).
    #[serde(default)]
    pub object_definition: Value,
    /// Dependencies of this template only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_dependencies: Vec<PolicyDependency>,
    /// Whether a Pending template counts as compliant.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignore_pending: bool,
}

/// A dependency (`dependencies[]`, `extraDependencies[]`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyDependency {
    /// apiVersion of the object depended on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Its kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its namespace (default: the policy's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The compliance it must have.
    #[serde(default)]
    pub compliance: String,
}

/// Policy status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// Root compliance (absent while unknown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compliant: String,
    /// Bindings that select the policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<PolicyPlacement>,
    /// Per decided cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<ClusterCompliance>,
}

/// `status.placement[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyPlacement {
    /// The binding.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub placement_binding: String,
    /// The Placement it refers to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub placement: String,
    /// The PlacementRule it refers to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub placement_rule: String,
    /// The PolicySet through which the policy is bound.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub policy_set: String,
    /// The clusters the binding's placement decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
}

/// `status.placement[].decisions[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// Cluster.
    pub cluster_name: String,
    /// Its namespace on the hub (the cluster's name).
    pub cluster_namespace: String,
}

/// `status.status[]` (OCM's lower-case field names).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterCompliance {
    /// Cluster.
    #[serde(default)]
    pub clustername: String,
    /// Its namespace on the hub (the cluster's name).
    #[serde(default)]
    pub clusternamespace: String,
    /// Its compliance (absent while unknown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compliant: String,
}

fn problems(errors: Vec<FieldError>) -> Result<(), Vec<FieldError>> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Checks a namespaced object's name (DNS-1123 subdomain).
fn check_name(meta: &Metadata, errors: &mut Vec<FieldError>) {
    if meta.name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    } else if let Err(e) = crate::names::validate_dns1123_subdomain("metadata.name", &meta.name) {
        errors.push(FieldError::new("metadata.name", e.to_string()));
    }
}

fn check_dependencies(deps: &[PolicyDependency], path: &str, errors: &mut Vec<FieldError>) {
    for (i, d) in deps.iter().enumerate() {
        let p = format!("{path}[{i}]");
        for (field, value) in [
            ("apiVersion", &d.api_version),
            ("kind", &d.kind),
            ("name", &d.name),
        ] {
            if value.is_empty() {
                errors.push(FieldError::new(format!("{p}.{field}"), "required"));
            }
        }
        if matches!(d.kind.as_str(), "ConfigurationPolicy" | "CertificatePolicy")
            && !d.namespace.is_empty()
        {
            errors.push(FieldError::new(
                format!("{p}.namespace"),
                format!(
                    "must be empty for a {}: templates live in the cluster's namespace",
                    d.kind
                ),
            ));
        }
        if !matches!(
            d.compliance.as_str(),
            "Compliant" | "NonCompliant" | "Pending"
        ) {
            errors.push(FieldError::new(
                format!("{p}.compliance"),
                format!(
                    "{:?} is not one of Compliant, NonCompliant, Pending",
                    d.compliance
                ),
            ));
        }
    }
}

fn dependency_to_proto(d: &PolicyDependency) -> v1::PolicyDependency {
    v1::PolicyDependency {
        api_version: d.api_version.clone(),
        kind: d.kind.clone(),
        name: d.name.clone(),
        namespace: d.namespace.clone(),
        compliance: d.compliance.clone(),
    }
}

fn dependency_from_proto(d: &v1::PolicyDependency) -> PolicyDependency {
    PolicyDependency {
        api_version: d.api_version.clone(),
        kind: d.kind.clone(),
        name: d.name.clone(),
        namespace: d.namespace.clone(),
        compliance: d.compliance.clone(),
    }
}

impl Policy {
    /// Converts to protobuf, checking every field; each problem names its path.
    pub fn to_proto(&self) -> Result<v1::Policy, Vec<FieldError>> {
        let mut errors = Vec::new();
        check_name(&self.metadata, &mut errors);
        let qualified = self.metadata.namespace.len() + 1 + self.metadata.name.len();
        if !self.metadata.namespace.is_empty() && qualified > MAX_QUALIFIED_NAME {
            errors.push(FieldError::new(
                "metadata.name",
                format!(
                    "namespace and name together are {qualified} characters; OCM names each \
                     cluster's copy <namespace>.<name>, which must be at most \
                     {MAX_QUALIFIED_NAME}"
                ),
            ));
        }
        let s = &self.spec;
        let root = if s.remediation_action.is_empty() {
            None
        } else {
            let r = Remediation::parse(&s.remediation_action);
            if r.is_none() {
                errors.push(FieldError::new(
                    "spec.remediationAction",
                    format!(
                        "unknown value {:?} (want inform or enforce)",
                        s.remediation_action
                    ),
                ));
            }
            r
        };
        let mut seen: Vec<(String, String)> = Vec::new();
        let mut templates = Vec::new();
        for (i, t) in s.policy_templates.iter().enumerate() {
            let p = format!("spec.policy-templates[{i}].objectDefinition");
            let before = errors.len();
            match TemplateMeta::of(&t.object_definition) {
                Err(es) => errors.extend(es.into_iter().map(|e| e.under(&p))),
                Ok(meta) => {
                    let id = (meta.kind.clone(), meta.name.clone());
                    if let Some(j) = seen.iter().position(|x| *x == id) {
                        errors.push(FieldError::new(
                            format!("{p}.metadata.name"),
                            format!(
                                "{} {:?} is already policy-templates[{j}]; template names must be \
                                 unique per kind",
                                meta.kind, meta.name
                            ),
                        ));
                    }
                    seen.push(id);
                    if meta.is_configuration_policy() {
                        match ConfigurationPolicy::from_value(&t.object_definition) {
                            Err(es) => errors.extend(es.into_iter().map(|e| e.under(&p))),
                            Ok(cp) if cp.remediation.is_none() && root.is_none() => {
                                errors.push(FieldError::new(
                                    format!("{p}.spec.remediationAction"),
                                    "required when the Policy sets no spec.remediationAction",
                                ))
                            }
                            Ok(_) => {}
                        }
                    }
                }
            }
            check_dependencies(
                &t.extra_dependencies,
                &format!("spec.policy-templates[{i}].extraDependencies"),
                &mut errors,
            );
            if errors.len() == before {
                let bytes = serde_json::to_vec(&t.object_definition).unwrap_or_default();
                if bytes.len() > crate::work::MAX_MANIFESTS_BYTES {
                    errors.push(FieldError::new(
                        &p,
                        format!(
                            "{} bytes; a template may be at most {} bytes",
                            bytes.len(),
                            crate::work::MAX_MANIFESTS_BYTES
                        ),
                    ));
                }
                templates.push(v1::PolicyTemplate {
                    object_definition: bytes,
                    extra_dependencies: t
                        .extra_dependencies
                        .iter()
                        .map(dependency_to_proto)
                        .collect(),
                    ignore_pending: t.ignore_pending,
                });
            }
        }
        check_dependencies(&s.dependencies, "spec.dependencies", &mut errors);
        let metadata = self
            .metadata
            .to_proto()
            .map_err(|m| split_message(&m))
            .map_err(|e| vec![e]);
        let metadata = match metadata {
            Ok(m) => Some(m),
            Err(es) => {
                errors.extend(es);
                None
            }
        };
        problems(errors)?;
        Ok(v1::Policy {
            metadata,
            spec: Some(v1::PolicySpec {
                disabled: s.disabled,
                remediation_action: s.remediation_action.clone(),
                policy_templates: templates,
                dependencies: s.dependencies.iter().map(dependency_to_proto).collect(),
                copy_policy_metadata: s.copy_policy_metadata,
            }),
            status: None,
        })
    }
}

/// `"path: message"` as a [`FieldError`].
fn split_message(m: &str) -> FieldError {
    match m.split_once(": ") {
        Some((path, message)) => FieldError::new(path, message),
        None => FieldError::new("", m),
    }
}

impl From<&v1::Policy> for Policy {
    fn from(p: &v1::Policy) -> Self {
        let spec = p.spec.clone().unwrap_or_default();
        Self {
            api_version: crate::policy::POLICY_V1.into(),
            kind: "Policy".into(),
            metadata: p.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: PolicySpec {
                disabled: spec.disabled,
                remediation_action: spec.remediation_action.clone(),
                policy_templates: spec
                    .policy_templates
                    .iter()
                    .map(|t| PolicyTemplate {
                        object_definition: serde_json::from_slice(&t.object_definition)
                            .unwrap_or(Value::Null),
                        extra_dependencies: t
                            .extra_dependencies
                            .iter()
                            .map(dependency_from_proto)
                            .collect(),
                        ignore_pending: t.ignore_pending,
                    })
                    .collect(),
                dependencies: spec
                    .dependencies
                    .iter()
                    .map(dependency_from_proto)
                    .collect(),
                copy_policy_metadata: spec.copy_policy_metadata,
                hub_template_options: None,
            },
            status: p.status.as_ref().map(|s| PolicyStatus {
                compliant: s.compliant.clone(),
                placement: s
                    .placement
                    .iter()
                    .map(|pl| PolicyPlacement {
                        placement_binding: pl.placement_binding.clone(),
                        placement: pl.placement.clone(),
                        placement_rule: pl.placement_rule.clone(),
                        policy_set: pl.policy_set.clone(),
                        decisions: pl
                            .clusters
                            .iter()
                            .map(|c| Decision {
                                cluster_name: c.clone(),
                                cluster_namespace: c.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
                status: s
                    .status
                    .iter()
                    .map(|c| ClusterCompliance {
                        clustername: c.cluster_name.clone(),
                        clusternamespace: c.cluster_namespace.clone(),
                        compliant: c.compliant.clone(),
                    })
                    .collect(),
            }),
        }
    }
}

// ---- PlacementBinding ----

/// PlacementBinding in the OCM shape (its fields are top-level, not under `spec`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementBinding {
    /// `policy.open-cluster-management.io/v1`.
    pub api_version: String,
    /// `PlacementBinding`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// The Placement or PlacementRule whose decisions the subjects follow.
    #[serde(default)]
    pub placement_ref: PlacementSubject,
    /// Policies and PolicySets bound.
    #[serde(default)]
    pub subjects: Vec<Subject>,
    /// Overrides applied to the bound policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_overrides: Option<BindingOverrides>,
    /// `restricted`: only policies of a bound PolicySet that the set also selects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub_filter: String,
    /// Status (always empty in OCM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// `placementRef`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementSubject {
    /// `cluster.open-cluster-management.io` or `apps.open-cluster-management.io`.
    #[serde(default)]
    pub api_group: String,
    /// `Placement` or `PlacementRule`.
    #[serde(default)]
    pub kind: String,
    /// Name in the binding's namespace.
    #[serde(default)]
    pub name: String,
}

/// `subjects[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subject {
    /// `policy.open-cluster-management.io`.
    #[serde(default)]
    pub api_group: String,
    /// `Policy` or `PolicySet`.
    #[serde(default)]
    pub kind: String,
    /// Name in the binding's namespace.
    #[serde(default)]
    pub name: String,
}

/// `bindingOverrides`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingOverrides {
    /// `Enforce`/`enforce`: enforce the bound policies on this binding's clusters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub remediation_action: String,
}

impl PlacementBinding {
    /// Converts to protobuf, checking what OCM's CRD checks.
    pub fn to_proto(&self) -> Result<v1::PlacementBinding, Vec<FieldError>> {
        let mut errors = Vec::new();
        check_name(&self.metadata, &mut errors);
        let r = &self.placement_ref;
        match (r.api_group.as_str(), r.kind.as_str()) {
            (CLUSTER_GROUP, "Placement") | (APPS_GROUP, "PlacementRule") => {}
            (_, "") => errors.push(FieldError::new("placementRef.kind", "required")),
            (CLUSTER_GROUP | APPS_GROUP, k) => errors.push(FieldError::new(
                "placementRef.kind",
                format!(
                    "{k:?} in {:?} (want Placement in {CLUSTER_GROUP}, or PlacementRule in \
                     {APPS_GROUP})",
                    r.api_group
                ),
            )),
            (g, _) => errors.push(FieldError::new(
                "placementRef.apiGroup",
                format!("{g:?} is not {CLUSTER_GROUP} or {APPS_GROUP}"),
            )),
        }
        if r.name.is_empty() {
            errors.push(FieldError::new("placementRef.name", "required"));
        }
        if self.subjects.is_empty() {
            errors.push(FieldError::new(
                "subjects",
                "at least one subject is required",
            ));
        }
        for (i, s) in self.subjects.iter().enumerate() {
            let p = format!("subjects[{i}]");
            if s.api_group != GROUP {
                errors.push(FieldError::new(
                    format!("{p}.apiGroup"),
                    format!("{:?} is not {GROUP}", s.api_group),
                ));
            }
            if !matches!(s.kind.as_str(), "Policy" | "PolicySet") {
                errors.push(FieldError::new(
                    format!("{p}.kind"),
                    format!("{:?} is not Policy or PolicySet", s.kind),
                ));
            }
            if s.name.is_empty() {
                errors.push(FieldError::new(format!("{p}.name"), "required"));
            }
        }
        let overrides = self
            .binding_overrides
            .as_ref()
            .map(|o| o.remediation_action.clone())
            .unwrap_or_default();
        if !matches!(overrides.as_str(), "" | "Enforce" | "enforce") {
            errors.push(FieldError::new(
                "bindingOverrides.remediationAction",
                format!("{overrides:?} is not Enforce (the only override)"),
            ));
        }
        if !matches!(self.sub_filter.as_str(), "" | "restricted") {
            errors.push(FieldError::new(
                "subFilter",
                format!("{:?} is not restricted", self.sub_filter),
            ));
        }
        let metadata = match self.metadata.to_proto() {
            Ok(m) => Some(m),
            Err(m) => {
                errors.push(split_message(&m));
                None
            }
        };
        problems(errors)?;
        Ok(v1::PlacementBinding {
            metadata,
            placement_ref: Some(v1::PlacementSubject {
                api_group: r.api_group.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
            }),
            subjects: self
                .subjects
                .iter()
                .map(|s| v1::BindingSubject {
                    api_group: s.api_group.clone(),
                    kind: s.kind.clone(),
                    name: s.name.clone(),
                })
                .collect(),
            binding_overrides: Some(v1::BindingOverrides {
                remediation_action: overrides,
            }),
            sub_filter: self.sub_filter.clone(),
        })
    }
}

impl From<&v1::PlacementBinding> for PlacementBinding {
    fn from(b: &v1::PlacementBinding) -> Self {
        let r = b.placement_ref.clone().unwrap_or_default();
        let overrides = b
            .binding_overrides
            .as_ref()
            .map(|o| o.remediation_action.clone())
            .unwrap_or_default();
        Self {
            api_version: crate::policy::POLICY_V1.into(),
            kind: "PlacementBinding".into(),
            metadata: b.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            placement_ref: PlacementSubject {
                api_group: r.api_group,
                kind: r.kind,
                name: r.name,
            },
            subjects: b
                .subjects
                .iter()
                .map(|s| Subject {
                    api_group: s.api_group.clone(),
                    kind: s.kind.clone(),
                    name: s.name.clone(),
                })
                .collect(),
            binding_overrides: (!overrides.is_empty()).then_some(BindingOverrides {
                remediation_action: overrides,
            }),
            sub_filter: b.sub_filter.clone(),
            status: None,
        }
    }
}

// ---- PolicySet ----

/// PolicySet in the OCM shape (`policy.open-cluster-management.io/v1beta1`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicySet {
    /// `policy.open-cluster-management.io/v1beta1`.
    pub api_version: String,
    /// `PolicySet`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: PolicySetSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PolicySetStatus>,
}

/// PolicySet spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySetSpec {
    /// Free text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Names of policies in the set's namespace.
    #[serde(default)]
    pub policies: Vec<String>,
}

/// PolicySet status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicySetStatus {
    /// Aggregated compliance (absent while some policy has not reported).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compliant: String,
    /// Which policies are pending, disabled, silent or missing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_message: String,
    /// Bindings of the set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<PolicyPlacement>,
}

impl PolicySet {
    /// Converts to protobuf, checking every policy name.
    pub fn to_proto(&self) -> Result<v1::PolicySet, Vec<FieldError>> {
        let mut errors = Vec::new();
        check_name(&self.metadata, &mut errors);
        for (i, p) in self.spec.policies.iter().enumerate() {
            if p.is_empty() {
                errors.push(FieldError::new(
                    format!("spec.policies[{i}]"),
                    "must not be empty",
                ));
            }
        }
        let metadata = match self.metadata.to_proto() {
            Ok(m) => Some(m),
            Err(m) => {
                errors.push(split_message(&m));
                None
            }
        };
        problems(errors)?;
        Ok(v1::PolicySet {
            metadata,
            spec: Some(v1::PolicySetSpec {
                description: self.spec.description.clone(),
                policies: self.spec.policies.clone(),
            }),
            status: None,
        })
    }
}

impl From<&v1::PolicySet> for PolicySet {
    fn from(s: &v1::PolicySet) -> Self {
        let spec = s.spec.clone().unwrap_or_default();
        Self {
            api_version: crate::policy::POLICY_V1BETA1.into(),
            kind: "PolicySet".into(),
            metadata: s.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: PolicySetSpec {
                description: spec.description,
                policies: spec.policies,
            },
            status: s.status.as_ref().map(|st| PolicySetStatus {
                compliant: st.compliant.clone(),
                status_message: st.status_message.clone(),
                placement: st
                    .placement
                    .iter()
                    .map(|p| PolicyPlacement {
                        placement_binding: p.placement_binding.clone(),
                        placement: p.placement.clone(),
                        placement_rule: p.placement_rule.clone(),
                        policy_set: String::new(),
                        decisions: Vec::new(),
                    })
                    .collect(),
            }),
        }
    }
}

// ---- PlacementRule ----

/// PlacementRule in the OCM shape (`apps.open-cluster-management.io/v1`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRule {
    /// `apps.open-cluster-management.io/v1`.
    pub api_version: String,
    /// `PlacementRule`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: PlacementRuleSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PlacementRuleStatus>,
}

/// PlacementRule spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementRuleSpec {
    /// Labels the clusters must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// Conditions the clusters must have (default: Available=True).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_conditions: Vec<ClusterConditionFilter>,
    /// At most this many clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_replicas: Option<i32>,
    /// Explicit clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterName>,
    /// Scheduler (only the default one is served).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    /// Accepted for compatibility, not used (Flotilla's rule has no resource hints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_hint: Option<Value>,
    /// Accepted for compatibility, not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Value>,
}

/// `clusterConditions[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterConditionFilter {
    /// Condition type (`ManagedClusterConditionAvailable`).
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True` (default), `False`, `Unknown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
}

/// `clusters[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterName {
    /// Cluster name.
    pub name: String,
}

/// PlacementRule status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRuleStatus {
    /// Decided clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<PlacementRuleDecision>,
}

/// `status.decisions[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRuleDecision {
    /// Cluster.
    pub cluster_name: String,
    /// Its namespace on the hub.
    pub cluster_namespace: String,
}

impl PlacementRule {
    /// Converts to protobuf, checking the selector, conditions and replicas.
    pub fn to_proto(&self) -> Result<v1::PlacementRule, Vec<FieldError>> {
        let mut errors = Vec::new();
        check_name(&self.metadata, &mut errors);
        let s = &self.spec;
        let selector = s.cluster_selector.as_ref().map(v1::LabelSelector::from);
        if let Some(sel) = &selector {
            for e in crate::selector::validate("spec.clusterSelector", sel) {
                errors.push(FieldError::new(e.field, e.reason));
            }
        }
        for (i, c) in s.cluster_conditions.iter().enumerate() {
            if c.type_.is_empty() {
                errors.push(FieldError::new(
                    format!("spec.clusterConditions[{i}].type"),
                    "required",
                ));
            }
            if !matches!(c.status.as_str(), "" | "True" | "False" | "Unknown") {
                errors.push(FieldError::new(
                    format!("spec.clusterConditions[{i}].status"),
                    format!("{:?} is not True, False or Unknown", c.status),
                ));
            }
        }
        if let Some(n) = s.cluster_replicas
            && n < 0
        {
            errors.push(FieldError::new(
                "spec.clusterReplicas",
                format!("{n} is negative"),
            ));
        }
        for (i, c) in s.clusters.iter().enumerate() {
            if c.name.is_empty() {
                errors.push(FieldError::new(
                    format!("spec.clusters[{i}].name"),
                    "required",
                ));
            }
        }
        let metadata = match self.metadata.to_proto() {
            Ok(m) => Some(m),
            Err(m) => {
                errors.push(split_message(&m));
                None
            }
        };
        problems(errors)?;
        Ok(v1::PlacementRule {
            metadata,
            spec: Some(v1::PlacementRuleSpec {
                cluster_selector: selector,
                cluster_conditions: s
                    .cluster_conditions
                    .iter()
                    .map(|c| v1::ClusterConditionFilter {
                        r#type: c.type_.clone(),
                        status: c.status.clone(),
                    })
                    .collect(),
                cluster_replicas: s.cluster_replicas,
                clusters: s.clusters.iter().map(|c| c.name.clone()).collect(),
                scheduler_name: s.scheduler_name.clone(),
            }),
            status: None,
        })
    }
}

impl From<&v1::PlacementRule> for PlacementRule {
    fn from(r: &v1::PlacementRule) -> Self {
        let spec = r.spec.clone().unwrap_or_default();
        Self {
            api_version: crate::policy::APPS_V1.into(),
            kind: "PlacementRule".into(),
            metadata: r.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: PlacementRuleSpec {
                cluster_selector: spec.cluster_selector.as_ref().map(LabelSelector::from),
                cluster_conditions: spec
                    .cluster_conditions
                    .iter()
                    .map(|c| ClusterConditionFilter {
                        type_: c.r#type.clone(),
                        status: c.status.clone(),
                    })
                    .collect(),
                cluster_replicas: spec.cluster_replicas,
                clusters: spec
                    .clusters
                    .iter()
                    .map(|n| ClusterName { name: n.clone() })
                    .collect(),
                scheduler_name: spec.scheduler_name,
                resource_hint: None,
                policies: None,
            },
            status: r.status.as_ref().map(|s| PlacementRuleStatus {
                decisions: s
                    .decisions
                    .iter()
                    .map(|d| PlacementRuleDecision {
                        cluster_name: d.cluster_name.clone(),
                        cluster_namespace: d.cluster_namespace.clone(),
                    })
                    .collect(),
            }),
        }
    }
}

#[cfg(test)]
mod tests;

//! ClusterImportPolicy (`cluster.flotilla.io/v1alpha1`) in the YAML shape users write:
//!
//! ```yaml
//! apiVersion: cluster.flotilla.io/v1alpha1
//! kind: ClusterImportPolicy
//! metadata: {name: edge}
//! spec:
//!   source:
//!     group: registration.flotilla.io
//!     resource: registrations
//!     selector: 'source.metadata.labels["site"] == "edge"'
//!   creationCondition: 'source.metadata.labels["ready"] == "yes"'
//!   template: '{"labels": {"tier": "edge"}, "clusterSet": "edge"}'
//! ```
//!
//!
//! or Kubernetes objects listed through the agents of management clusters (Cluster API):
//!
//! ```yaml
//! apiVersion: cluster.flotilla.io/v1alpha1
//! kind: ClusterImportPolicy
//! metadata: {name: capi}
//! spec:
//!   source:
//!     group: cluster.x-k8s.io
//!     resource: clusters
//!     versions: [v1beta1]
//!     clusters: [mgmt-1]
//!   references:
//!   - {resource: secrets, namespace: source.metadata.namespace,
//!      name: 'source.metadata.name + "-kubeconfig"', key: kubeconfig}
//!   nameTemplate: source.metadata.name
//!   creationCondition: 'source.status.phase == "Provisioned"'
//!   template: '{"labels": {"provider": "capi"}}'
//! ```
//!
//! Unlike Clusterpedia's `policy.clusterpedia.io` policy, the expressions are CEL (variables
//! `source` and `references`), not Go templates.

use super::meta::{Condition, Metadata, conditions};
use crate::importpolicy::{CLUSTER_FLOTILLA_V1ALPHA1, KIND};
use crate::v1;
use serde::{Deserialize, Serialize};

/// ClusterImportPolicy in the YAML shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterImportPolicy {
    /// `cluster.flotilla.io/v1alpha1`.
    pub api_version: String,
    /// `ClusterImportPolicy`.
    pub kind: String,
    /// Metadata (cluster-scoped: no namespace).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ClusterImportPolicySpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterImportPolicyStatus>,
}

/// The spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterImportPolicySpec {
    /// What clusters come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ImportSource>,
    /// CEL: the cluster's name (object sources only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name_template: String,
    /// CEL: a map with `labels`, `clusterSet`, `hubAcceptsClient`.
    #[serde(default)]
    pub template: String,
    /// CEL: import only when true.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub creation_condition: String,
    /// Objects read on the source's spoke (object sources).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<ImportReference>,
}

/// `spec.references[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportReference {
    /// API group (empty: the core group).
    #[serde(default)]
    pub group: String,
    /// Resource (plural).
    #[serde(default)]
    pub resource: String,
    /// Versions (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// CEL: the namespace (empty: cluster-scoped).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// CEL: the name.
    #[serde(default)]
    pub name: String,
    /// Later expressions read it as `references.<key>`.
    #[serde(default)]
    pub key: String,
}

/// `spec.source`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportSource {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Resource (plural).
    #[serde(default)]
    pub resource: String,
    /// Versions (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// CEL: which source objects count.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    /// Spokes the objects are listed on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
}

/// The status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterImportPolicyStatus {
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Clusters imported by the policy.
    #[serde(default)]
    pub imported: i32,
    /// Clusters adopted (access fields only).
    #[serde(default)]
    pub adopted: i32,
    /// Evaluation errors (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// The generation the counts are for.
    #[serde(default)]
    pub observed_generation: i64,
    /// Source objects in the last complete lists (object sources).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sources: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl ClusterImportPolicy {
    /// Converts to protobuf, checking every field; each error names its field.
    pub fn to_proto(&self) -> Result<v1::ClusterImportPolicy, Vec<String>> {
        let mut errors = Vec::new();
        if self.api_version != CLUSTER_FLOTILLA_V1ALPHA1 || self.kind != KIND {
            errors.push(format!(
                "apiVersion/kind: {:?}/{:?} is not {CLUSTER_FLOTILLA_V1ALPHA1}/{KIND}",
                self.api_version, self.kind
            ));
        }
        if !self.metadata.namespace.is_empty() {
            errors.push(format!(
                "metadata.namespace: a ClusterImportPolicy is cluster-scoped; {:?} must be left out",
                self.metadata.namespace
            ));
        }
        let metadata = self.metadata.to_proto().map_err(|e| errors.push(e)).ok();
        let s = &self.spec;
        let p = v1::ClusterImportPolicy {
            metadata,
            spec: Some(v1::ClusterImportPolicySpec {
                source: s.source.as_ref().map(|x| v1::ImportSource {
                    group: x.group.clone(),
                    resource: x.resource.clone(),
                    versions: x.versions.clone(),
                    selector: x.selector.clone(),
                    clusters: x.clusters.clone(),
                }),
                name_template: s.name_template.clone(),
                template: s.template.clone(),
                creation_condition: s.creation_condition.clone(),
                references: s
                    .references
                    .iter()
                    .map(|r| v1::ImportReference {
                        group: r.group.clone(),
                        resource: r.resource.clone(),
                        versions: r.versions.clone(),
                        namespace: r.namespace.clone(),
                        name: r.name.clone(),
                        key: r.key.clone(),
                    })
                    .collect(),
            }),
            status: None,
        };
        errors.extend(crate::importpolicy::validate(&p));
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors)
        }
    }
}

impl From<&v1::ClusterImportPolicy> for ClusterImportPolicy {
    fn from(p: &v1::ClusterImportPolicy) -> Self {
        let spec = p.spec.clone().unwrap_or_default();
        Self {
            api_version: CLUSTER_FLOTILLA_V1ALPHA1.into(),
            kind: KIND.into(),
            metadata: p.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ClusterImportPolicySpec {
                source: spec.source.map(|x| ImportSource {
                    group: x.group,
                    resource: x.resource,
                    versions: x.versions,
                    selector: x.selector,
                    clusters: x.clusters,
                }),
                name_template: spec.name_template,
                template: spec.template,
                creation_condition: spec.creation_condition,
                references: spec
                    .references
                    .into_iter()
                    .map(|r| ImportReference {
                        group: r.group,
                        resource: r.resource,
                        versions: r.versions,
                        namespace: r.namespace,
                        name: r.name,
                        key: r.key,
                    })
                    .collect(),
            },
            status: p.status.as_ref().map(|s| ClusterImportPolicyStatus {
                conditions: conditions(&s.conditions),
                imported: s.imported,
                adopted: s.adopted,
                errors: s.errors.clone(),
                observed_generation: s.observed_generation,
                sources: s.sources,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterImportPolicy
metadata:
  name: edge
spec:
  source:
    group: registration.flotilla.io
    resource: registrations
    selector: 'source.metadata.labels["site"] == "edge"'
  creationCondition: 'true'
  template: '{"labels": {"tier": "edge"}, "clusterSet": "edge"}'
"#;

    #[test]
    fn yaml_round_trips_unchanged() {
        let o: ClusterImportPolicy = serde_yaml::from_str(YAML).unwrap();
        let p = o.to_proto().unwrap();
        assert_eq!(
            p.spec.as_ref().unwrap().source.as_ref().unwrap().resource,
            "registrations"
        );
        assert_eq!(ClusterImportPolicy::from(&p), o);
    }

    #[test]
    fn importpolicy_bad_fields_are_named() {
        let mut o: ClusterImportPolicy = serde_yaml::from_str(YAML).unwrap();
        o.metadata.namespace = "x".into();
        o.spec.template.clear();
        o.spec.name_template = "source.metadata.name".into();
        o.spec.source.as_mut().unwrap().clusters = vec!["mgmt".into()];
        let errors = o.to_proto().unwrap_err().join("\n");
        for field in [
            "metadata.namespace",
            "spec.template",
            "spec.nameTemplate",
            "spec.source.clusters",
        ] {
            assert!(errors.contains(field), "{field} missing in {errors}");
        }
        o.spec.source = None;
        assert!(o.to_proto().unwrap_err().join("").contains("spec.source"));
        o.spec.source = Some(ImportSource {
            group: "cluster.x-k8s.io".into(),
            resource: "clusters".into(),
            ..Default::default()
        });
        o.spec.name_template.clear();
        let e = o.to_proto().unwrap_err().join("\n");
        for field in [
            "spec.source.clusters: required",
            "spec.nameTemplate: required",
        ] {
            assert!(e.contains(field), "{field} missing in {e}");
        }
        o.spec.source = Some(ImportSource {
            group: "registration.flotilla.io".into(),
            resource: "clusters".into(),
            ..Default::default()
        });
        let e = o.to_proto().unwrap_err().join("");
        assert!(
            e.contains("registration.flotilla.io/clusters is not served"),
            "{e}"
        );
    }

    const CAPI: &str = r#"
apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterImportPolicy
metadata: {name: capi}
spec:
  source:
    group: cluster.x-k8s.io
    resource: clusters
    versions: [v1beta1]
    clusters: [mgmt-1]
  references:
  - {resource: secrets, namespace: source.metadata.namespace, name: 'source.metadata.name + "-kubeconfig"', key: kubeconfig}
  - {resource: configmaps, namespace: source.metadata.namespace, name: 'references.kubeconfig.metadata.name', key: extra}
  nameTemplate: source.metadata.name
  creationCondition: 'source.status.phase == "Provisioned"'
  template: '{"labels": {"provider": "capi"}, "taints": [], "leaseDurationSeconds": 60}'
"#;

    #[test]
    fn the_capi_example_parses() {
        let o: ClusterImportPolicy =
            serde_yaml::from_str(include_str!("../../../examples/importpolicy-capi.yaml")).unwrap();
        let p = o.to_proto().expect("the example is valid");
        let spec = p.spec.unwrap();
        assert_eq!(spec.source.unwrap().clusters, ["mgmt-1"]);
        assert_eq!(spec.references[0].key, "kubeconfig");
    }

    #[test]
    fn object_source_round_trips_and_its_references_are_checked() {
        let o: ClusterImportPolicy = serde_yaml::from_str(CAPI).unwrap();
        let p = o.to_proto().unwrap();
        assert_eq!(p.spec.as_ref().unwrap().references.len(), 2);
        assert_eq!(ClusterImportPolicy::from(&p), o);

        let mut bad = o.clone();
        bad.spec.references[1].key = "kubeconfig".into();
        bad.spec.references[0].name.clear();
        bad.spec.source.as_mut().unwrap().clusters = vec!["Mgmt_1".into()];
        let e = bad.to_proto().unwrap_err().join("\n");
        for field in [
            "spec.references[1].key: \"kubeconfig\" is used twice",
            "spec.references[0].name: required",
            "spec.source.clusters[0]",
        ] {
            assert!(e.contains(field), "{field} missing in {e}");
        }
        let mut reg: ClusterImportPolicy = serde_yaml::from_str(YAML).unwrap();
        reg.spec.references = o.spec.references.clone();
        let e = reg.to_proto().unwrap_err().join("");
        assert!(e.contains("spec.references: a registration"), "{e}");
    }

    #[test]
    fn importpolicy_unknown_spec_fields_are_refused() {
        let bad = YAML.replace("  template:", "  templates:");
        let e = serde_yaml::from_str::<ClusterImportPolicy>(&bad).unwrap_err();
        assert!(e.to_string().contains("templates"), "{e}");
    }
}

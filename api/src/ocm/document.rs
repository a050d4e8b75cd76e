//! Apply documents: multi-document YAML or JSON parsed into typed objects, with errors that
//! name the document, its kind and name, and the field.

use super::addon::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn, v1beta1,
};
use super::clusterset::{ManagedClusterSet, ManagedClusterSetBinding};
use super::placement::{self, AddOnPlacementScore, Placement};
use super::work::{ManifestWork, WORK_V1};
use crate::v1;
use serde::Deserialize;
use thiserror::Error;

/// A document that cannot be applied.
#[derive(Debug, Error)]
pub enum DocError {
    /// The text is not YAML, or nests deeper than [`MAX_NESTING`].
    #[error("document {doc}: invalid YAML{}: {message}", at(*.line, *.column))]
    Yaml {
        /// 1-based document index in the input.
        doc: usize,
        /// What the parser found wrong.
        message: String,
        /// 1-based line of the problem in the whole input, when known.
        line: Option<usize>,
        /// 1-based column of the problem, when known.
        column: Option<usize>,
    },
    /// A field has the wrong shape.
    #[error("document {doc} ({kind} {name}): {path}: {message}")]
    Field {
        /// 1-based document index.
        doc: usize,
        /// The document's kind.
        kind: String,
        /// The object's name, when known.
        name: String,
        /// Path of the bad field (`spec.clusterSelector.selectorType`).
        path: String,
        /// What was wrong.
        message: String,
    },
    /// apiVersion/kind is not one Flotilla accepts.
    #[error(
        "document {doc}: unsupported apiVersion/kind {api_version:?}/{kind:?} (supported: {supported})"
    )]
    Unsupported {
        /// 1-based document index.
        doc: usize,
        /// The document's apiVersion.
        api_version: String,
        /// The document's kind.
        kind: String,
        /// What is supported.
        supported: String,
    },
}

/// One object read from an apply document.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// A ManagedClusterSet.
    ClusterSet(v1::ManagedClusterSet),
    /// A ManagedClusterSetBinding.
    Binding(v1::ManagedClusterSetBinding),
    /// A ManifestWork.
    Work(v1::ManifestWork),
    /// A Placement.
    Placement(v1::Placement),
    /// An AddOnPlacementScore.
    Score(v1::AddOnPlacementScore),
    /// A ManifestWorkReplicaSet.
    ReplicaSet(v1::ManifestWorkReplicaSet),
    /// A ManagedCluster created ahead of its agent, or edited.
    Cluster(v1::ManagedCluster),
    /// A ClusterManagementAddOn (an add-on and how it is installed).
    ClusterManagementAddOn(v1::ClusterManagementAddOn),
    /// A ManagedClusterAddOn (an add-on installed on one cluster).
    ManagedClusterAddOn(v1::ManagedClusterAddOn),
    /// An AddOnTemplate (the add-on agent's manifests).
    AddOnTemplate(v1::AddOnTemplate),
    /// An AddOnDeploymentConfig (variables and placement of an add-on agent).
    AddOnDeploymentConfig(v1::AddOnDeploymentConfig),
    /// A governance Policy.
    Policy(v1::Policy),
    /// A PlacementBinding (policies and policy sets to a Placement or PlacementRule).
    PlacementBinding(v1::PlacementBinding),
    /// A PolicySet.
    PolicySet(v1::PolicySet),
    /// A legacy PlacementRule (`apps.open-cluster-management.io/v1`).
    PlacementRule(v1::PlacementRule),
    /// A ManagedServiceAccount (`authentication.open-cluster-management.io/v1beta1`).
    ManagedServiceAccount(v1::ManagedServiceAccount),
}

const SUPPORTED: &str = "cluster.open-cluster-management.io/v1 ManagedCluster, \
cluster.open-cluster-management.io/v1beta2 ManagedClusterSet, \
cluster.open-cluster-management.io/v1beta2 ManagedClusterSetBinding, \
work.open-cluster-management.io/v1 ManifestWork, \
cluster.open-cluster-management.io/v1beta1 Placement, \
cluster.open-cluster-management.io/v1alpha1 AddOnPlacementScore, \
work.open-cluster-management.io/v1alpha1 ManifestWorkReplicaSet, \
addon.open-cluster-management.io/v1alpha1 ClusterManagementAddOn, \
addon.open-cluster-management.io/v1alpha1 ManagedClusterAddOn, \
addon.open-cluster-management.io/v1alpha1 AddOnTemplate, \
addon.open-cluster-management.io/v1alpha1 AddOnDeploymentConfig, \
addon.open-cluster-management.io/v1beta1 ClusterManagementAddOn, \
addon.open-cluster-management.io/v1beta1 ManagedClusterAddOn, \
addon.open-cluster-management.io/v1beta1 AddOnDeploymentConfig, \
policy.open-cluster-management.io/v1 Policy, \
policy.open-cluster-management.io/v1 PlacementBinding, \
policy.open-cluster-management.io/v1beta1 PolicySet, \
apps.open-cluster-management.io/v1 PlacementRule, \
authentication.open-cluster-management.io/v1beta1 ManagedServiceAccount";

/// The add-on kinds (`addon.open-cluster-management.io`).
const ADDON_KINDS: [&str; 4] = [
    "ClusterManagementAddOn",
    "ManagedClusterAddOn",
    "AddOnTemplate",
    "AddOnDeploymentConfig",
];

/// Parses multi-document YAML (or JSON) into objects. Every document is parsed; the result has
/// one entry per non-empty document, in order, so a caller can report all errors at once and
/// apply nothing when any document is bad.
pub fn parse_documents(text: &str) -> Vec<Result<Document, DocError>> {
    let mut out = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let doc = i + 1;
        let value = match serde_yaml::Value::deserialize(de) {
            Ok(serde_yaml::Value::Null) => continue,
            Ok(v) => v,
            Err(source) => {
                out.push(Err(yaml_error(doc, &source)));
                // After a syntax error the rest of the stream cannot be trusted.
                break;
            }
        };
        out.push(parse_document(doc, value));
    }
    out
}

fn str_field(v: &serde_yaml::Value, key: &str) -> String {
    v.get(key)
        .and_then(|x| x.as_str())
        .unwrap_or_default()
        .to_string()
}

fn typed<T: serde::de::DeserializeOwned>(
    doc: usize,
    kind: &str,
    name: &str,
    value: serde_yaml::Value,
) -> Result<T, DocError> {
    serde_path_to_error::deserialize(value).map_err(|e| DocError::Field {
        doc,
        kind: kind.to_string(),
        name: name.to_string(),
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

fn parse_document(doc: usize, value: serde_yaml::Value) -> Result<Document, DocError> {
    let api_version = str_field(&value, "apiVersion");
    let kind = str_field(&value, "kind");
    let name = value
        .get("metadata")
        .map(|m| str_field(m, "name"))
        .unwrap_or_default();
    let field_err = |path: &str, message: String| DocError::Field {
        doc,
        kind: kind.clone(),
        name: name.clone(),
        path: path.to_string(),
        message,
    };
    let is_set_group = matches!(
        api_version.as_str(),
        "cluster.open-cluster-management.io/v1beta2" | "cluster.open-cluster-management.io/v1beta1"
    );
    match (is_set_group, kind.as_str()) {
        (true, "ManagedClusterSet") => {
            let s: ManagedClusterSet = typed(doc, &kind, &name, value)?;
            s.to_proto()
                .map(Document::ClusterSet)
                .map_err(|m| field_err("metadata.resourceVersion", m))
        }
        (true, "ManagedClusterSetBinding") => {
            let b: ManagedClusterSetBinding = typed(doc, &kind, &name, value)?;
            b.to_proto()
                .map(Document::Binding)
                .map_err(|m| field_err("metadata.resourceVersion", m))
        }
        _ if api_version == super::replicaset::WORK_V1ALPHA1
            && kind == "ManifestWorkReplicaSet" =>
        {
            let r: super::replicaset::ManifestWorkReplicaSet = typed(doc, &kind, &name, value)?;
            r.to_proto()
                .map(Document::ReplicaSet)
                .map_err(|m| match m.split_once(": ") {
                    Some((path, message)) => field_err(path, message.to_string()),
                    None => field_err("", m),
                })
        }
        _ if api_version == super::CLUSTER_V1 && kind == "ManagedCluster" => {
            let c: super::cluster::ManagedCluster = typed(doc, &kind, &name, value)?;
            c.to_proto()
                .map(Document::Cluster)
                .map_err(|m| match m.split_once(": ") {
                    Some((path, message)) => field_err(path, message.to_string()),
                    None => field_err("", m),
                })
        }
        _ if api_version == WORK_V1 && kind == "ManifestWork" => {
            let w: ManifestWork = typed(doc, &kind, &name, value)?;
            w.to_proto()
                .map(Document::Work)
                .map_err(|m| field_err("", m))
        }
        _ if api_version == placement::CLUSTER_V1BETA1 && kind == "Placement" => {
            let p: Placement = typed(doc, &kind, &name, value)?;
            p.to_proto()
                .map(Document::Placement)
                .map_err(|m| field_err("metadata.resourceVersion", m))
        }
        _ if api_version == placement::CLUSTER_V1ALPHA1 && kind == "AddOnPlacementScore" => {
            let s: AddOnPlacementScore = typed(doc, &kind, &name, value)?;
            s.to_proto()
                .map(Document::Score)
                .map_err(|m| match m.split_once(": ") {
                    Some((path, message)) => field_err(path, message.to_string()),
                    None => field_err("", m),
                })
        }
        _ if api_version == crate::addon::ADDON_V1ALPHA1
            && ADDON_KINDS.contains(&kind.as_str()) =>
        {
            let split = |m: String| match m.split_once(": ") {
                Some((path, message)) => field_err(path, message.to_string()),
                None => field_err("", m),
            };
            match kind.as_str() {
                "ClusterManagementAddOn" => {
                    let a: ClusterManagementAddOn = typed(doc, &kind, &name, value)?;
                    a.to_proto()
                        .map(Document::ClusterManagementAddOn)
                        .map_err(split)
                }
                "ManagedClusterAddOn" => {
                    let a: ManagedClusterAddOn = typed(doc, &kind, &name, value)?;
                    a.to_proto()
                        .map(Document::ManagedClusterAddOn)
                        .map_err(split)
                }
                "AddOnTemplate" => {
                    let t: AddOnTemplate = typed(doc, &kind, &name, value)?;
                    t.to_proto().map(Document::AddOnTemplate).map_err(split)
                }
                _ => {
                    let c: AddOnDeploymentConfig = typed(doc, &kind, &name, value)?;
                    c.to_proto()
                        .map(Document::AddOnDeploymentConfig)
                        .map_err(split)
                }
            }
        }
        _ if api_version == crate::policy::POLICY_V1 && kind == "Policy" => {
            let p: super::policy::Policy = typed(doc, &kind, &name, value)?;
            p.to_proto()
                .map(Document::Policy)
                .map_err(|es| field_errors(doc, &kind, &name, es))
        }
        _ if api_version == crate::policy::POLICY_V1 && kind == "PlacementBinding" => {
            let b: super::policy::PlacementBinding = typed(doc, &kind, &name, value)?;
            b.to_proto()
                .map(Document::PlacementBinding)
                .map_err(|es| field_errors(doc, &kind, &name, es))
        }
        _ if api_version == crate::policy::POLICY_V1BETA1 && kind == "PolicySet" => {
            let p: super::policy::PolicySet = typed(doc, &kind, &name, value)?;
            p.to_proto()
                .map(Document::PolicySet)
                .map_err(|es| field_errors(doc, &kind, &name, es))
        }
        _ if api_version == crate::serviceaccount::AUTHENTICATION_V1BETA1
            && kind == crate::serviceaccount::KIND =>
        {
            let m: super::serviceaccount::ManagedServiceAccount = typed(doc, &kind, &name, value)?;
            m.to_proto()
                .map(Document::ManagedServiceAccount)
                .map_err(|es| {
                    let all = es.join("; ");
                    match all.split_once(": ") {
                        Some((path, message)) => field_err(path, message.to_string()),
                        None => field_err("", all),
                    }
                })
        }
        _ if api_version == crate::policy::APPS_V1 && kind == "PlacementRule" => {
            let r: super::policy::PlacementRule = typed(doc, &kind, &name, value)?;
            r.to_proto()
                .map(Document::PlacementRule)
                .map_err(|es| field_errors(doc, &kind, &name, es))
        }
        // OCM's v1beta1: read in its shape, converted to the v1alpha1 objects stored.
        _ if api_version == v1beta1::ADDON_V1BETA1
            && kind != "AddOnTemplate"
            && ADDON_KINDS.contains(&kind.as_str()) =>
        {
            let split = |m: String| match m.split_once(": ") {
                Some((path, message)) => field_err(path, message.to_string()),
                None => field_err("", m),
            };
            match kind.as_str() {
                "ClusterManagementAddOn" => {
                    let a: v1beta1::ClusterManagementAddOn = typed(doc, &kind, &name, value)?;
                    a.to_proto()
                        .map(Document::ClusterManagementAddOn)
                        .map_err(split)
                }
                "ManagedClusterAddOn" => {
                    let a: v1beta1::ManagedClusterAddOn = typed(doc, &kind, &name, value)?;
                    a.to_proto()
                        .map(Document::ManagedClusterAddOn)
                        .map_err(split)
                }
                // The same spec in both versions.
                _ => {
                    let c: AddOnDeploymentConfig = typed(doc, &kind, &name, value)?;
                    c.to_proto()
                        .map(Document::AddOnDeploymentConfig)
                        .map_err(split)
                }
            }
        }
        // Another version of an add-on kind (v1beta1 has no AddOnTemplate).
        _ if api_version.starts_with(&format!("{}/", crate::addon::GROUP))
            && ADDON_KINDS.contains(&kind.as_str()) =>
        {
            Err(DocError::Unsupported {
                supported: if kind == "AddOnTemplate" {
                    format!(
                        "{} {kind} (OCM has no other version of it)",
                        crate::addon::ADDON_V1ALPHA1
                    )
                } else {
                    format!(
                        "{} {kind} (OCM's storage version) and {} {kind}",
                        crate::addon::ADDON_V1ALPHA1,
                        v1beta1::ADDON_V1BETA1
                    )
                },
                doc,
                api_version,
                kind,
            })
        }
        _ => Err(DocError::Unsupported {
            doc,
            api_version,
            kind,
            supported: SUPPORTED.into(),
        }),
    }
}

/// Every problem of one document as one error: the first names the field, the rest follow in
/// the message (`…: required; also spec.x: …`), so nothing is reported one run at a time.
fn field_errors(
    doc: usize,
    kind: &str,
    name: &str,
    errors: Vec<crate::policy::FieldError>,
) -> DocError {
    let mut it = errors.into_iter();
    let first = it
        .next()
        .unwrap_or_else(|| crate::policy::FieldError::new("", "invalid"));
    let rest: Vec<String> = it.map(|e| e.to_string()).collect();
    let mut message = first.message;
    if !rest.is_empty() {
        message.push_str(&format!("; also {}", rest.join("; also ")));
    }
    DocError::Field {
        doc,
        kind: kind.to_string(),
        name: name.to_string(),
        path: first.path,
        message,
    }
}

/// Deepest nesting of collections a document may have: the YAML deserializer's own limit, which
/// stops hostile input (`[[[[…`) before it can exhaust the stack.
pub const MAX_NESTING: usize = 128;

fn at(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

/// The parser's error as message, line and column (its type stays out of our API).
fn yaml_error(doc: usize, e: &serde_yaml::Error) -> DocError {
    let location = e.location();
    let mut message = e.to_string();
    if message.starts_with("recursion limit exceeded") {
        message = format!("nesting deeper than {MAX_NESTING} levels");
    }
    if let Some(l) = &location {
        let suffix = format!(" at line {} column {}", l.line(), l.column());
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_string();
        }
    }
    DocError::Yaml {
        doc,
        message,
        line: location.as_ref().map(|l| l.line()),
        column: location.as_ref().map(|l| l.column()),
    }
}

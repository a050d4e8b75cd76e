//! Apply documents: multi-document YAML or JSON parsed into typed objects, with errors that
//! name the document, its kind and name, and the field.

use super::addon::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn, v1beta1,
};
use super::clusterset::{ManagedClusterSet, ManagedClusterSetBinding};
use super::placement::{AddOnPlacementScore, Placement};
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
    /// A ClusterImportPolicy (`cluster.flotilla.io/v1alpha1`).
    ImportPolicy(v1::ClusterImportPolicy),
    /// A MirrorPeer (`multicluster.odf.openshift.io/v1alpha1`).
    MirrorPeer(v1::MirrorPeer),
    /// A `v1 ConfigMap` kept on the hub for hub templates.
    HubConfigMap(v1::HubConfigMap),
    /// A `v1 Secret` kept on the hub (sealed at rest) for hub templates.
    HubSecret(v1::HubSecret),
    /// A GitRepo (`apps.flotilla.io/v1alpha1`): a repository followed into replica sets.
    GitRepo(v1::GitRepo),
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
authentication.open-cluster-management.io/v1beta1 ManagedServiceAccount, \
cluster.flotilla.io/v1alpha1 ClusterImportPolicy, \
multicluster.odf.openshift.io/v1alpha1 MirrorPeer, \
apps.flotilla.io/v1alpha1 GitRepo, \
v1 ConfigMap, v1 Secret (kept on the hub for hub templates)";

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

/// Where a document's problems are reported: its index, kind and name.
struct Place {
    doc: usize,
    kind: String,
    name: String,
}

impl Place {
    fn field(&self, path: &str, message: String) -> DocError {
        DocError::Field {
            doc: self.doc,
            kind: self.kind.clone(),
            name: self.name.clone(),
            path: path.to_string(),
            message,
        }
    }

    /// The document read into its serde shape; a shape error names the field's path.
    fn typed<T: serde::de::DeserializeOwned>(
        &self,
        value: serde_yaml::Value,
    ) -> Result<T, DocError> {
        serde_path_to_error::deserialize(value)
            .map_err(|e| self.field(&e.path().to_string(), e.inner().to_string()))
    }
}

/// Why a shape could not become a stored object, as its conversion says it.
enum Fault {
    /// A message about one known field.
    At(&'static str, String),
    /// `path: message` (or a message without a path).
    Split(String),
    /// Every problem, each with its field.
    Fields(Vec<crate::policy::FieldError>),
}

impl Fault {
    fn at(path: &'static str) -> impl FnOnce(String) -> Self {
        move |message| Self::At(path, message)
    }

    fn into_error(self, place: &Place) -> DocError {
        match self {
            Self::At(path, message) => place.field(path, message),
            Self::Split(m) => match m.split_once(": ") {
                Some((path, message)) => place.field(path, message.to_string()),
                None => place.field("", m),
            },
            Self::Fields(errors) => field_errors(place, errors),
        }
    }
}

/// One OCM shape an apply document may hold: read by serde, then converted to the object Flotilla
/// stores.
trait Shape: serde::de::DeserializeOwned {
    fn convert(self) -> Result<Document, Fault>;
}

/// Reads a document as shape `T`.
fn read<T: Shape>(place: &Place, value: serde_yaml::Value) -> Result<Document, DocError> {
    place
        .typed::<T>(value)?
        .convert()
        .map_err(|f| f.into_error(place))
}

/// Which shape reads `apiVersion`/`kind`, if any.
type Reader = fn(&Place, serde_yaml::Value) -> Result<Document, DocError>;

fn reader(api_version: &str, kind: &str) -> Option<Reader> {
    use super::addon::v1beta1::ADDON_V1BETA1;
    use super::placement::{CLUSTER_V1ALPHA1, CLUSTER_V1BETA1};
    use super::replicaset::{ManifestWorkReplicaSet, WORK_V1ALPHA1};
    use super::{CLUSTER_V1, CLUSTER_V1BETA2};
    use crate::addon::ADDON_V1ALPHA1;
    use crate::policy::{APPS_V1, POLICY_V1, POLICY_V1BETA1};
    use crate::serviceaccount::AUTHENTICATION_V1BETA1;
    Some(match (api_version, kind) {
        (CLUSTER_V1, "ManagedCluster") => read::<super::cluster::ManagedCluster>,
        (CLUSTER_V1BETA2 | CLUSTER_V1BETA1, "ManagedClusterSet") => read::<ManagedClusterSet>,
        (CLUSTER_V1BETA2 | CLUSTER_V1BETA1, "ManagedClusterSetBinding") => {
            read::<ManagedClusterSetBinding>
        }
        (WORK_V1, "ManifestWork") => read::<ManifestWork>,
        (WORK_V1ALPHA1, "ManifestWorkReplicaSet") => read::<ManifestWorkReplicaSet>,
        (CLUSTER_V1BETA1, "Placement") => read::<Placement>,
        (CLUSTER_V1ALPHA1, "AddOnPlacementScore") => read::<AddOnPlacementScore>,
        (ADDON_V1ALPHA1, "ClusterManagementAddOn") => read::<ClusterManagementAddOn>,
        (ADDON_V1ALPHA1, "ManagedClusterAddOn") => read::<ManagedClusterAddOn>,
        (ADDON_V1ALPHA1, "AddOnTemplate") => read::<AddOnTemplate>,
        // The same spec in both versions.
        (ADDON_V1ALPHA1 | ADDON_V1BETA1, "AddOnDeploymentConfig") => read::<AddOnDeploymentConfig>,
        // OCM's v1beta1: read in its shape, converted to the v1alpha1 objects stored.
        (ADDON_V1BETA1, "ClusterManagementAddOn") => read::<v1beta1::ClusterManagementAddOn>,
        (ADDON_V1BETA1, "ManagedClusterAddOn") => read::<v1beta1::ManagedClusterAddOn>,
        (POLICY_V1, "Policy") => read::<super::policy::Policy>,
        (POLICY_V1, "PlacementBinding") => read::<super::policy::PlacementBinding>,
        (POLICY_V1BETA1, "PolicySet") => read::<super::policy::PolicySet>,
        (APPS_V1, "PlacementRule") => read::<super::policy::PlacementRule>,
        (AUTHENTICATION_V1BETA1, crate::serviceaccount::KIND) => {
            read::<super::serviceaccount::ManagedServiceAccount>
        }
        (crate::importpolicy::CLUSTER_FLOTILLA_V1ALPHA1, crate::importpolicy::KIND) => {
            read::<super::importpolicy::ClusterImportPolicy>
        }
        (crate::mirrorpeer::MULTICLUSTER_ODF_V1ALPHA1, crate::mirrorpeer::KIND) => {
            read::<super::mirrorpeer::MirrorPeer>
        }
        (super::hubdata::CORE_V1, "ConfigMap") => read::<super::hubdata::ConfigMap>,
        (super::hubdata::CORE_V1, "Secret") => read::<super::hubdata::Secret>,
        (super::gitrepo::APPS_V1ALPHA1, super::gitrepo::KIND) => read::<super::gitrepo::GitRepo>,
        _ => return None,
    })
}

/// Implements [`Shape`] for shapes whose conversion returns `Result<_, E>`: `$variant` wraps
/// the object, `$fault` turns the error into a [`Fault`].
macro_rules! shapes {
    ($($shape:ty => $variant:ident, $fault:expr;)*) => {$(
        impl Shape for $shape {
            fn convert(self) -> Result<Document, Fault> {
                self.to_proto().map(Document::$variant).map_err($fault)
            }
        }
    )*};
}

shapes! {
    super::cluster::ManagedCluster => Cluster, Fault::Split;
    ManagedClusterSet => ClusterSet, Fault::at("metadata.resourceVersion");
    ManagedClusterSetBinding => Binding, Fault::at("metadata.resourceVersion");
    ManifestWork => Work, Fault::at("");
    super::replicaset::ManifestWorkReplicaSet => ReplicaSet, Fault::Split;
    Placement => Placement, Fault::at("metadata.resourceVersion");
    AddOnPlacementScore => Score, Fault::Split;
    ClusterManagementAddOn => ClusterManagementAddOn, Fault::Split;
    ManagedClusterAddOn => ManagedClusterAddOn, Fault::Split;
    AddOnTemplate => AddOnTemplate, Fault::Split;
    AddOnDeploymentConfig => AddOnDeploymentConfig, Fault::Split;
    v1beta1::ClusterManagementAddOn => ClusterManagementAddOn, Fault::Split;
    v1beta1::ManagedClusterAddOn => ManagedClusterAddOn, Fault::Split;
    super::policy::Policy => Policy, Fault::Fields;
    super::policy::PlacementBinding => PlacementBinding, Fault::Fields;
    super::policy::PolicySet => PolicySet, Fault::Fields;
    super::policy::PlacementRule => PlacementRule, Fault::Fields;
    super::serviceaccount::ManagedServiceAccount => ManagedServiceAccount,
        |es: Vec<String>| Fault::Split(es.join("; "));
    super::importpolicy::ClusterImportPolicy => ImportPolicy,
        |es: Vec<String>| Fault::Split(es.join("; "));
    super::mirrorpeer::MirrorPeer => MirrorPeer,
        |es: Vec<String>| Fault::Split(es.join("; "));
    super::hubdata::ConfigMap => HubConfigMap,
        |es: Vec<String>| Fault::Split(es.join("; "));
    super::hubdata::Secret => HubSecret,
        |es: Vec<String>| Fault::Split(es.join("; "));
    super::gitrepo::GitRepo => GitRepo,
        |es: Vec<String>| Fault::Split(es.join("; "));
}

fn parse_document(doc: usize, value: serde_yaml::Value) -> Result<Document, DocError> {
    let api_version = str_field(&value, "apiVersion");
    let kind = str_field(&value, "kind");
    let name = value
        .get("metadata")
        .map(|m| str_field(m, "name"))
        .unwrap_or_default();
    if let Some(read) = reader(&api_version, &kind) {
        return read(&Place { doc, kind, name }, value);
    }
    let supported = if api_version.starts_with(&format!("{}/", crate::addon::GROUP))
        && ADDON_KINDS.contains(&kind.as_str())
    {
        // Another version of an add-on kind (v1beta1 has no AddOnTemplate).
        if kind == "AddOnTemplate" {
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
        }
    } else {
        SUPPORTED.into()
    };
    Err(DocError::Unsupported {
        doc,
        api_version,
        kind,
        supported,
    })
}

/// Every problem of one document as one error: the first names the field, the rest follow in
/// the message (`…: required; also spec.x: …`), so nothing is reported one run at a time.
fn field_errors(place: &Place, errors: Vec<crate::policy::FieldError>) -> DocError {
    let mut it = errors.into_iter();
    let first = it
        .next()
        .unwrap_or_else(|| crate::policy::FieldError::new("", "invalid"));
    let rest: Vec<String> = it.map(|e| e.to_string()).collect();
    let mut message = first.message;
    if !rest.is_empty() {
        message.push_str(&format!("; also {}", rest.join("; also ")));
    }
    place.field(&first.path, message)
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

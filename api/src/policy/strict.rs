//! The strict check a policy template meets on OCM's spoke (pure): the framework add-on creates
//! each template with `fieldValidation=Strict`, and the API server refuses fields the kind's
//! CRD does not define — policy-collection's network-policy-samples puts `severity` and
//! `remediationAction` inside an object-template, which OCM reports as a `template-error`
//! instead of evaluating it.
//!
//! [`unknown_fields`] finds them as the apiextensions server's structural pruning does
//! (`pruning.PruneWithOptions` with unknown-field tracking: dotted keys, `[i]` for list
//! items, sorted; `apiVersion`, `kind` and `metadata` of the root are not pruned, a field kept
//! with `x-kubernetes-preserve-unknown-fields` — an `objectDefinition` — is not looked into).
//! The field trees are those of the CRDs OCM ships (config-policy-controller@ecf24b4
//! `deploy/crds/policy.open-cluster-management.io_configurationpolicies.yaml`,
//! cert-policy-controller@6077229 `deploy/crds/policy.open-cluster-management.io_certificatepolicies.yaml`).
//! [`refusal`] is the status message the add-on reports, with the API server's text
//! (`transformDecodeError` around `strict decoding error: unknown field "…", …`).

use serde_json::Value;

/// A node of a CRD's structural schema, as far as field names go.
#[derive(Debug)]
enum Node {
    /// No properties: a scalar, or a schema that defines nothing below (every key of a map
    /// found here is unknown, as pruning finds it).
    Leaf,
    /// Any keys (`additionalProperties`), each value of this node.
    Map(&'static Node),
    /// These properties only.
    Object(&'static [(&'static str, Node)]),
    /// Items of this node.
    List(&'static Node),
    /// Anything (`x-kubernetes-preserve-unknown-fields`).
    Free,
}

const STRINGS: Node = Node::List(&Node::Leaf);
const LABELS: Node = Node::Map(&Node::Leaf);

/// `matchExpressions` of a label selector.
const EXPRESSIONS: Node = Node::List(&Node::Object(&[
    ("key", Node::Leaf),
    ("operator", Node::Leaf),
    ("values", STRINGS),
]));

/// A label selector (`objectSelector`).
const LABEL_SELECTOR: Node =
    Node::Object(&[("matchExpressions", EXPRESSIONS), ("matchLabels", LABELS)]);

/// `metadata` (ObjectMeta's fields; their contents are the API server's business).
static METADATA: Node = Node::Object(&[
    ("annotations", LABELS),
    ("creationTimestamp", Node::Free),
    ("deletionGracePeriodSeconds", Node::Free),
    ("deletionTimestamp", Node::Free),
    ("finalizers", Node::Free),
    ("generateName", Node::Free),
    ("generation", Node::Free),
    ("labels", LABELS),
    ("managedFields", Node::Free),
    ("name", Node::Free),
    ("namespace", Node::Free),
    ("ownerReferences", Node::Free),
    ("resourceVersion", Node::Free),
    ("selfLink", Node::Free),
    ("uid", Node::Free),
]);

/// A ConfigurationPolicy's `spec`.
static CONFIGURATION_POLICY_SPEC: Node = Node::Object(&[
    (
        "customMessage",
        Node::Object(&[("compliant", Node::Leaf), ("noncompliant", Node::Leaf)]),
    ),
    (
        "evaluationInterval",
        Node::Object(&[("compliant", Node::Leaf), ("noncompliant", Node::Leaf)]),
    ),
    (
        "namespaceSelector",
        Node::Object(&[
            ("exclude", STRINGS),
            ("include", STRINGS),
            ("matchExpressions", EXPRESSIONS),
            ("matchLabels", LABELS),
            ("terminatingInclusion", Node::Leaf),
        ]),
    ),
    (
        "object-templates",
        Node::List(&Node::Object(&[
            ("complianceType", Node::Leaf),
            ("metadataComplianceType", Node::Leaf),
            ("objectDefinition", Node::Free),
            ("objectSelector", LABEL_SELECTOR),
            ("recordDiff", Node::Leaf),
            ("recreateOption", Node::Leaf),
        ])),
    ),
    ("object-templates-raw", Node::Leaf),
    ("pruneObjectBehavior", Node::Leaf),
    ("remediationAction", Node::Leaf),
    ("severity", Node::Leaf),
]);

/// A CertificatePolicy's `spec`.
static CERTIFICATE_POLICY_SPEC: Node = Node::Object(&[
    ("allowedSANPattern", Node::Leaf),
    ("disallowedSANPattern", Node::Leaf),
    ("labelSelector", LABELS),
    ("maximumCADuration", Node::Leaf),
    ("maximumDuration", Node::Leaf),
    ("minimumCADuration", Node::Leaf),
    ("minimumDuration", Node::Leaf),
    (
        "namespaceSelector",
        Node::Object(&[
            ("exclude", STRINGS),
            ("include", STRINGS),
            ("matchExpressions", EXPRESSIONS),
            ("matchLabels", LABELS),
        ]),
    ),
    ("remediationAction", Node::Leaf),
    ("severity", Node::Leaf),
]);

/// The spec tree of a policy template kind Flotilla knows the CRD of.
fn spec_of(kind: &str) -> Option<&'static Node> {
    match kind {
        super::CONFIGURATION_POLICY => Some(&CONFIGURATION_POLICY_SPEC),
        super::certificate::CERTIFICATE_POLICY => Some(&CERTIFICATE_POLICY_SPEC),
        _ => None,
    }
}

/// Paths of the fields a policy template of `kind` has that its CRD does not define
/// (`spec.object-templates[0].severity`), sorted as the API server lists them; `None` for a
/// kind whose CRD Flotilla does not know. The root's `apiVersion` and `kind` are free,
/// `metadata` is checked against ObjectMeta's fields, `status` is not looked into.
pub fn unknown_fields(kind: &str, object: &Value) -> Option<Vec<String>> {
    let spec = spec_of(kind)?;
    let mut out = Vec::new();
    if let Some(root) = object.as_object() {
        for (k, v) in root {
            let node = match k.as_str() {
                "apiVersion" | "kind" | "status" => continue,
                "metadata" => &METADATA,
                "spec" => spec,
                _ => {
                    out.push(k.clone());
                    continue;
                }
            };
            walk(v, node, k, &mut out);
        }
    }
    out.sort();
    Some(out)
}

/// Records the unknown fields below `value` (at `path`), judged by `node`.
fn walk(value: &Value, node: &Node, path: &str, out: &mut Vec<String>) {
    match (value, node) {
        (_, Node::Free) => {}
        (Value::Object(map), _) => {
            for (k, v) in map {
                let child = match node {
                    Node::Object(props) => {
                        props.iter().find(|(n, _)| *n == k.as_str()).map(|(_, c)| c)
                    }
                    Node::Map(c) => Some(*c),
                    _ => None,
                };
                let at = format!("{path}.{k}");
                match child {
                    Some(c) => walk(v, c, &at, out),
                    None => out.push(at),
                }
            }
        }
        (Value::Array(items), _) => {
            let child = match node {
                Node::List(c) => *c,
                // Pruning goes on with no schema: every key below is unknown.
                _ => &Node::Leaf,
            };
            for (i, v) in items.iter().enumerate() {
                walk(v, child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The API server's refusal of a `<kind>` (`apiVersion` `api_version`) created with
/// `fieldValidation=Strict` that has the `unknown` fields: `ConfigurationPolicy in version
/// "v1" cannot be handled as a ConfigurationPolicy: strict decoding error: unknown field
/// "spec.object-templates[0].remediationAction", unknown field "…"` (Kubernetes
/// `handlers/rest.go` `transformDecodeError`, `runtime.NewStrictDecodingError`).
pub fn strict_decoding_error(kind: &str, api_version: &str, unknown: &[String]) -> String {
    let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
    let fields: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {}", go_quote(f)))
        .collect();
    format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", ")
    )
}

/// What the framework add-on reports for a template whose create the API server refused
/// (governance-policy-framework-addon@322d55c `controllers/templatesync/template_sync.go`
/// l. 553, then `emitTemplateError`): the status message after `NonCompliant; template-error; `.
pub fn create_error(server_message: &str) -> String {
    format!("Failed to create policy template: {server_message}")
}

/// The template-error of a template with `unknown` fields, as the framework add-on words it
/// after the API server: `Failed to create policy template: <Kind> in version "v1" cannot be
/// handled as a <Kind>: strict decoding error: unknown field "…"`.
pub fn refusal(kind: &str, api_version: &str, unknown: &[String]) -> String {
    create_error(&strict_decoding_error(kind, api_version, unknown))
}

/// Go's `%q` of a field path (quotes and backslashes escaped; paths are printable).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

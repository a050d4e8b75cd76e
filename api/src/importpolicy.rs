//! ClusterImportPolicy facts shared by the hub and the CLI: the API group, the sources served,
//! the template's keys and the checks of a policy's shape (CEL is compiled by the hub, which
//! owns the CEL environment).

use crate::v1;

/// API group/version of ClusterImportPolicies (Flotilla's own: Clusterpedia's
/// `policy.clusterpedia.io` documents are Go templates, which would not evaluate the same).
pub const CLUSTER_FLOTILLA_V1ALPHA1: &str = "cluster.flotilla.io/v1alpha1";
/// The kind.
pub const KIND: &str = "ClusterImportPolicy";
/// The group of the registration source: agents that registered themselves.
pub const REGISTRATION_GROUP: &str = "registration.flotilla.io";
/// The resource of the registration source.
pub const REGISTRATIONS: &str = "registrations";
/// The keys a template's map may have.
pub const TEMPLATE_KEYS: [&str; 5] = [
    "labels",
    "clusterSet",
    "hubAcceptsClient",
    "taints",
    "leaseDurationSeconds",
];
/// At most this many evaluation errors are kept in a policy's status.
pub const MAX_STATUS_ERRORS: usize = 10;
/// At most this many spokes list an object source.
pub const MAX_SOURCE_CLUSTERS: usize = 16;
/// At most this many references per policy.
pub const MAX_REFERENCES: usize = 8;
/// At most this many objects are taken from one spoke's list: a longer list is a failed list
/// (it changes nothing), so a hostile or broken spoke cannot make the hub create without bound.
pub const MAX_SOURCE_OBJECTS: usize = 5_000;
/// The Ready condition.
pub const CONDITION_READY: &str = "Ready";
/// The SourcesListed condition (object sources): every spoke answered its last list.
pub const CONDITION_SOURCES_LISTED: &str = "SourcesListed";

/// Whether `source` is the registration source.
pub fn is_registrations(source: &v1::ImportSource) -> bool {
    source.group == REGISTRATION_GROUP && source.resource == REGISTRATIONS
}

/// `group/resource`: what one policy at most may hold.
pub fn source_kind(source: &v1::ImportSource) -> String {
    format!("{}/{}", source.group, source.resource)
}

/// Every problem of a policy's shape, each naming its field (CEL syntax is the hub's check).
pub fn validate(p: &v1::ClusterImportPolicy) -> Vec<String> {
    let mut errors = Vec::new();
    let name = p.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or("");
    if let Err(e) = crate::names::validate_dns1123_label("metadata.name", name) {
        errors.push(e.to_string());
    }
    let spec = p.spec.clone().unwrap_or_default();
    let Some(source) = spec.source.as_ref() else {
        errors.push(format!(
            "spec.source: required (group {REGISTRATION_GROUP}, resource {REGISTRATIONS})"
        ));
        return errors;
    };
    if source.resource.is_empty() {
        errors.push(format!(
            "spec.source.resource: required (e.g. {REGISTRATION_GROUP}/{REGISTRATIONS}, or \
             cluster.x-k8s.io/clusters listed on the spokes of spec.source.clusters)"
        ));
    } else if source.group == REGISTRATION_GROUP && !is_registrations(source) {
        errors.push(format!(
            "spec.source: {} is not served: the group {REGISTRATION_GROUP} has only the \
             resource {REGISTRATIONS}",
            source_kind(source)
        ));
    } else if !is_registrations(source) {
        validate_object_source(source, &spec, &mut errors);
    }
    if is_registrations(source) {
        if !spec.references.is_empty() {
            errors.push(
                "spec.references: a registration has nothing to look up on a spoke; leave it out"
                    .into(),
            );
        }
        if !source.clusters.is_empty() {
            errors.push(
                "spec.source.clusters: registrations are not listed on a spoke; leave it out"
                    .into(),
            );
        }
        if !spec.name_template.is_empty() {
            errors.push(
                "spec.nameTemplate: a registering agent chose its cluster's name; leave it out"
                    .into(),
            );
        }
    }
    if spec.template.trim().is_empty() {
        errors.push(format!(
            "spec.template: required (a CEL map with keys among {})",
            TEMPLATE_KEYS.join(", ")
        ));
    }
    errors
}

/// The rules of an object source (objects listed through the agents of `source.clusters`).
fn validate_object_source(
    source: &v1::ImportSource,
    spec: &v1::ClusterImportPolicySpec,
    errors: &mut Vec<String>,
) {
    resource_name("spec.source.resource", &source.resource, errors);
    versions("spec.source.versions", &source.versions, errors);
    if source.clusters.is_empty() {
        errors.push(format!(
            "spec.source.clusters: required for {}: the managed clusters whose Kubernetes API \
             lists the objects (the hub reads no Kubernetes of its own)",
            source_kind(source)
        ));
    } else if source.clusters.len() > MAX_SOURCE_CLUSTERS {
        errors.push(format!(
            "spec.source.clusters: {} clusters, at most {MAX_SOURCE_CLUSTERS}",
            source.clusters.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in source.clusters.iter().enumerate() {
        if let Err(e) =
            crate::names::validate_dns1123_label(&format!("spec.source.clusters[{i}]"), c)
        {
            errors.push(e.to_string());
        } else if !seen.insert(c) {
            errors.push(format!("spec.source.clusters[{i}]: {c:?} is listed twice"));
        }
    }
    if spec.name_template.trim().is_empty() {
        errors.push(
            "spec.nameTemplate: required for an object source (CEL over `source`, e.g. \
             source.metadata.name)"
                .into(),
        );
    }
    if spec.references.len() > MAX_REFERENCES {
        errors.push(format!(
            "spec.references: {} references, at most {MAX_REFERENCES}",
            spec.references.len()
        ));
    }
    let mut keys = std::collections::BTreeSet::new();
    for (i, r) in spec.references.iter().enumerate() {
        let field = format!("spec.references[{i}]");
        resource_name(&format!("{field}.resource"), &r.resource, errors);
        versions(&format!("{field}.versions"), &r.versions, errors);
        if r.name.trim().is_empty() {
            errors.push(format!(
                "{field}.name: required (CEL yielding the object's name)"
            ));
        }
        if !is_identifier(&r.key) {
            errors.push(format!(
                "{field}.key: {:?} must be an identifier (letters, digits, _; not starting with \
                 a digit): later expressions read references.<key>",
                r.key
            ));
        } else if !keys.insert(r.key.as_str()) {
            errors.push(format!("{field}.key: {:?} is used twice", r.key));
        }
    }
}

fn resource_name(field: &str, resource: &str, errors: &mut Vec<String>) {
    if resource.is_empty() {
        errors.push(format!(
            "{field}: required (the lower-case plural, e.g. clusters)"
        ));
    } else if !resource
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    {
        errors.push(format!(
            "{field}: {resource:?} is not a resource name (the lower-case plural, e.g. clusters)"
        ));
    }
}

fn versions(field: &str, versions: &[String], errors: &mut Vec<String>) {
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty()
            || !v
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            errors.push(format!(
                "{field}[{i}]: {v:?} is not a version (e.g. v1beta1)"
            ));
        }
    }
}

/// A CEL identifier: what `references.<key>` can name.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= 63
}

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
pub const TEMPLATE_KEYS: [&str; 3] = ["labels", "clusterSet", "hubAcceptsClient"];
/// At most this many evaluation errors are kept in a policy's status.
pub const MAX_STATUS_ERRORS: usize = 10;
/// The Ready condition.
pub const CONDITION_READY: &str = "Ready";

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
    if source.group.is_empty() && source.resource.is_empty() {
        errors.push(format!(
            "spec.source.group/resource: required (e.g. {REGISTRATION_GROUP}/{REGISTRATIONS})"
        ));
    } else if !is_registrations(source) {
        errors.push(format!(
            "spec.source: {} is not served: only {REGISTRATION_GROUP}/{REGISTRATIONS} (agents \
             that registered themselves) is",
            source_kind(source)
        ));
    }
    if is_registrations(source) {
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

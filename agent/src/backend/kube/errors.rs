//! How the API server's refusals become [`BackendError`]s: not found, forbidden (with RBAC's
//! refusal of an escalating Role or binding named as such), server-side apply conflicts with
//! their fields and managers, invalid input, and everything else as unavailable.

use super::unavailable;
use crate::backend::{BackendError, Executor, ManifestId};

/// The group of the kinds whose writing can escalate rights.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What the API server's refusal of a Role or binding that grants more than its writer holds
/// says (RBAC's escalation check).
const ESCALATION_REFUSED: &str = "attempting to grant RBAC permissions not currently held";

/// Whether writing an object of this plural resource of [`RBAC_GROUP`] can grant rights.
fn escalates(plural: &str) -> bool {
    matches!(
        plural,
        "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
    )
}

/// The error of a write (`verb`) of `id` made as `executor`: the API server's, with RBAC's
/// refusal of a Role or binding that grants more than the executor holds named as permission
/// escalation.
pub(super) fn write_error(
    executor: Option<&Executor>,
    id: &ManifestId,
    verb: &str,
    e: kube::Error,
) -> BackendError {
    match (executor, e) {
        (Some(executor), kube::Error::Api(r))
            if r.code == 403
                && id.group == RBAC_GROUP
                && escalates(&id.resource())
                && r.message.contains(ESCALATION_REFUSED) =>
        {
            BackendError::Forbidden(format!(
                "the executor {} may not {verb} {}.{RBAC_GROUP} {:?}: permission escalation ({})",
                executor.username(),
                id.resource(),
                id.name,
                r.message
            ))
        }
        (_, e) => map_error(e),
    }
}

pub(super) fn map_error(e: kube::Error) -> BackendError {
    match e {
        kube::Error::Api(r) if r.code == 404 => BackendError::NotFound(r.message),
        // The API server's own words: who may not do what to which object.
        kube::Error::Api(r) if r.code == 403 => BackendError::Forbidden(r.message),
        kube::Error::Api(r) if r.code == 409 && r.message.contains("conflict with") => {
            let (fields, managers) = parse_conflicts(&r.message);
            BackendError::Conflict {
                fields,
                manager: managers.join(", "),
            }
        }
        kube::Error::Api(r) if (400..500).contains(&r.code) => {
            BackendError::Invalid(format!("{} ({})", r.message, r.reason))
        }
        other => unavailable(other),
    }
}

/// Fields and managers of an apply conflict, from the API server's message:
/// `Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas`, or
/// for several, `conflicts with "m" using apps/v1:` followed by `- .field` lines.
pub fn parse_conflicts(message: &str) -> (Vec<String>, Vec<String>) {
    let mut fields = Vec::new();
    let mut managers: Vec<String> = Vec::new();
    let add_manager = |m: &str, managers: &mut Vec<String>| {
        if !managers.iter().any(|x| x == m) {
            managers.push(m.to_string());
        }
    };
    for line in message.lines() {
        let line = line.trim();
        if let Some(field) = line.strip_prefix("- ") {
            fields.push(field.trim().to_string());
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("conflict") {
            rest = &rest[at..];
            let Some(open) = rest.find('"') else { break };
            let Some(len) = rest[open + 1..].find('"') else {
                break;
            };
            add_manager(&rest[open + 1..open + 1 + len], &mut managers);
            rest = &rest[open + 1 + len + 1..];
            // `using apps/v1: .spec.replicas` or `: .spec.replicas`
            if let Some(colon) = rest.find(": ") {
                let after = &rest[colon + 2..];
                let end = after.find([',', '\n']).unwrap_or(after.len());
                let field = after[..end].trim();
                if field.starts_with('.') {
                    fields.push(field.to_string());
                }
            }
        }
    }
    (fields, managers)
}

//! Errors as the API server answers them (pure): an [`ApiError`] is written as a Kubernetes
//! `Status` ([`flotilla_api::kubestatus`]), with the object it is about and the field causes of
//! apply conflicts.

use crate::resources::Resource;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// An API error, written as a `Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP code.
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ….
    pub reason: &'static str,
    /// Message.
    pub message: String,
    /// `(field, message)` causes (apply conflicts).
    pub causes: Vec<(String, String)>,
    /// What the error is about (`name`, `group`, `kind`), as the `Status`'s `details` say it.
    pub details: Map<String, Value>,
}

impl ApiError {
    /// An error without causes.
    pub fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            causes: Vec::new(),
            details: Map::new(),
        }
    }

    /// A 400 `BadRequest`.
    pub fn bad_request(message: String) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// This error about object `name` of `resource` (the `Status`'s `details`: its name, group
    /// and plural, as the API server writes them).
    pub fn about(mut self, resource: &Resource, name: &str) -> Self {
        self.details.insert("name".into(), json!(name));
        self.details.insert("group".into(), json!(resource.group));
        self.details.insert("kind".into(), json!(resource.plural));
        self
    }

    /// A 404 `NotFound` of object `name` of `resource` (`deployments.apps "web" not found`).
    pub fn not_found(resource: &Resource, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", resource.qualified()),
        )
        .about(resource, name)
    }

    /// The 409 `Conflict` of a server-side apply that would change fields other managers own:
    /// `(manager, field)` pairs, worded as the API server words them (one conflict on one line,
    /// several grouped per manager with one `- field` line each), each a cause.
    pub fn apply_conflict(api_version: &str, conflicts: &[(String, String)]) -> Self {
        let message = if let [(m, p)] = conflicts {
            format!("Apply failed with 1 conflict: conflict with \"{m}\" using {api_version}: {p}")
        } else {
            let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (m, p) in conflicts {
                by_manager.entry(m).or_default().push(p);
            }
            let mut text = format!("Apply failed with {} conflicts:", conflicts.len());
            for (m, fields) in by_manager {
                text.push_str(&format!(" conflicts with \"{m}\" using {api_version}:"));
                for f in fields {
                    text.push_str(&format!("\n- {f}"));
                }
            }
            text
        };
        let mut err = Self::new(409, "Conflict", message);
        err.causes = conflicts
            .iter()
            .map(|(m, p)| (p.clone(), format!("conflict with \"{m}\"")))
            .collect();
        err
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let causes: Vec<Value> = self
            .causes
            .iter()
            .map(|(field, message)| {
                json!({"reason": "FieldManagerConflict", "message": message, "field": field})
            })
            .collect();
        let mut details = self.details.clone();
        details.insert("causes".into(), Value::Array(causes));
        flotilla_api::kubestatus::failure(
            self.code,
            self.reason,
            &self.message,
            Some(Value::Object(details)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_a_failure_status_with_its_causes() {
        let mut e = ApiError::new(409, "Conflict", "Apply failed".into());
        e.causes
            .push((".spec.replicas".into(), "conflict with \"a\"".into()));
        let v = e.status();
        assert_eq!(
            (&v["kind"], &v["code"], &v["reason"]),
            (&json!("Status"), &json!(409), &json!("Conflict"))
        );
        assert_eq!(v["details"]["causes"][0]["field"], ".spec.replicas");
        assert_eq!(
            ApiError::bad_request("x".into()).status()["details"]["causes"],
            json!([])
        );
    }
}

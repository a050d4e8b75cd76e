//! Errors as the API server answers them (pure): an [`ApiError`] is written as a Kubernetes
//! `Status` ([`flotilla_api::kubestatus`]), with the field causes of apply conflicts.

use serde_json::{Value, json};

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
}

impl ApiError {
    /// An error without causes.
    pub fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            causes: Vec::new(),
        }
    }

    /// A 400 `BadRequest`.
    pub fn bad_request(message: String) -> Self {
        Self::new(400, "BadRequest", message)
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
        flotilla_api::kubestatus::failure(
            self.code,
            self.reason,
            &self.message,
            Some(json!({"causes": causes})),
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

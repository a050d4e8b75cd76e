//! Field errors of specs, shared by validation and selector compilation (a leaf module, so
//! neither has to import the other).

/// How OCM treats a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// OCM's API would reject the object (schema violation).
    Invalid,
    /// OCM accepts the object and reports `PlacementMisconfigured=True`.
    Misconfigured,
}

/// One problem in a spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.tolerations[2].value`.
    pub path: String,
    /// Rejection or PlacementMisconfigured.
    pub kind: ErrorKind,
    /// What is wrong and what is wanted.
    pub message: String,
}

impl FieldError {
    /// A field error.
    pub fn new(path: impl Into<String>, kind: ErrorKind, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            kind,
            message: message.into(),
        }
    }
}

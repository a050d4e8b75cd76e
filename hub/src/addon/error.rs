//! What an add-on call can fail with (pure): the one error of the handle's calls, which the
//! gRPC service maps to its status codes.

use crate::store::StoreError;
use thiserror::Error;

/// Why an add-on call failed.
#[derive(Debug, Error)]
pub enum AddOnError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such object.
    #[error("{0} not found")]
    NotFound(String),
    /// The object was changed meanwhile.
    #[error("{0}")]
    Conflict(String),
    /// The object is being deleted (it waits for a pre-delete hook): not now.
    #[error("{0}")]
    Deleting(String),
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for AddOnError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

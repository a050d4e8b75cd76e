//! How a failed call is worded for the operator: what the hub refused and why, or that the hub
//! could not be reached (naming it, with only the innermost cause).

use super::Hub;
use anyhow::anyhow;
use std::error::Error as _;
use tonic::{Code, Status};

impl Hub {
    /// A failed call as one line for the operator: what the hub refused and why, or that the
    /// hub could not be reached.
    pub fn error(&self, status: Status) -> anyhow::Error {
        failure(&self.endpoint, status)
    }
}

/// Words a failed call. A status with a source was made on this side from a transport failure
/// (the hub said nothing); one without came from the hub, and its code says what kind of
/// refusal it is.
fn failure(endpoint: &str, status: Status) -> anyhow::Error {
    if status.source().is_some() {
        return unreachable(endpoint, &status);
    }
    let what = match status.code() {
        Code::InvalidArgument => "invalid",
        Code::NotFound => "not found",
        Code::Aborted => "conflict",
        Code::FailedPrecondition => "refused",
        Code::Unavailable => "unavailable",
        Code::PermissionDenied | Code::Unauthenticated => "forbidden",
        Code::AlreadyExists => "already exists",
        Code::ResourceExhausted => "resource exhausted",
        Code::DeadlineExceeded => "deadline exceeded",
        Code::Cancelled => "cancelled",
        Code::OutOfRange => "out of range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::DataLoss => "data loss",
        Code::Ok | Code::Unknown => "unknown",
    };
    anyhow!("{what}: {}", status.message())
}

/// The innermost cause of an error. Transport errors wrap one failure several times
/// ("transport error: tcp connect error: tcp connect error: Connection refused"); only the
/// innermost says what happened.
pub(super) fn innermost<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    let mut cause = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause
}

/// "cannot reach the hub at ENDPOINT: CAUSE", with only the innermost cause.
pub(super) fn unreachable(
    endpoint: &str,
    error: &(dyn std::error::Error + 'static),
) -> anyhow::Error {
    let cause = innermost(error);
    anyhow!(
        "cannot reach the hub at {endpoint}: {cause}; is flotilla-hub running? (set --hub or FLOTILLA_HUB)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_from_the_hub_is_worded_by_its_code() {
        let e = failure(
            "http://hub:50051",
            Status::not_found("cluster \"c9\" not found"),
        );
        assert_eq!(e.to_string(), "not found: cluster \"c9\" not found");
        let e = failure("http://hub:50051", Status::unknown("boom"));
        assert_eq!(e.to_string(), "unknown: boom");
    }

    #[test]
    fn a_transport_failure_names_the_hub_and_the_innermost_cause_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let status = Status::from_error(Box::new(refused));
        let e = failure("http://127.0.0.1:1", status);
        let text = format!("error: {e:#}");
        assert!(
            text.starts_with("error: cannot reach the hub at http://127.0.0.1:1: refused;"),
            "{text}"
        );
        assert_eq!(text.matches("error").count(), 1, "{text}");
    }
}

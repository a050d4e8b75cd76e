//! Kubernetes `Status` objects (`kind: Status`, `status: Failure`): the one shape of the
//! errors the cluster proxy answers, whether the hub or a simulated cluster words them, as
//! kubectl shows them (`Error from server (NotFound): …`).

use serde_json::{Value, json};

/// Kubernetes' `reason` for an HTTP status code (`InternalError` for codes it has none for).
pub fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        501 => "NotImplemented",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// A failure `Status` with `reason` (`AlreadyExists` and `Conflict` share 409) and, when
/// given, `details` (`name`, `group`, `kind`).
pub fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut v = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_carry_kubernetes_reasons_and_details() {
        let v = failure(403, reason(403), "no", None);
        assert_eq!(
            (&v["kind"], &v["reason"], &v["code"], &v["message"]),
            (
                &json!("Status"),
                &json!("Forbidden"),
                &json!(403),
                &json!("no")
            )
        );
        assert!(v.get("details").is_none());
        let v = failure(409, "AlreadyExists", "x", Some(json!({"name": "a"})));
        assert_eq!(v["details"]["name"], "a");
        assert_eq!(reason(503), "ServiceUnavailable");
        assert_eq!(reason(599), "InternalError");
    }
}

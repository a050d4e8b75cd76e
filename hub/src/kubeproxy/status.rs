//! The hub's own answers, as the Kubernetes `Status` objects kubectl shows (`Error from server
//! (Forbidden): …`).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// The body type of every proxy response.
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, super::BodyError>;

/// A `Status` object (`status: Failure`) with Kubernetes' `reason` for `code`.
pub fn body(code: http::StatusCode, message: &str) -> Bytes {
    let reason = match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        413 => "RequestEntityTooLarge",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    Bytes::from(status.to_string())
}

/// A response carrying a `Status` object.
pub fn response(code: http::StatusCode, message: &str) -> http::Response<Body> {
    let mut resp = http::Response::new(
        Full::new(body(code, message))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_carry_kubernetes_reasons() {
        let v: serde_json::Value =
            serde_json::from_slice(&body(http::StatusCode::FORBIDDEN, "no")).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["reason"], "Forbidden");
        assert_eq!(v["code"], 403);
        assert_eq!(v["message"], "no");
        let v: serde_json::Value =
            serde_json::from_slice(&body(http::StatusCode::SERVICE_UNAVAILABLE, "off")).unwrap();
        assert_eq!(v["reason"], "ServiceUnavailable");
    }
}

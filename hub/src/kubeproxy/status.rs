//! The hub's own answers, as the Kubernetes `Status` objects kubectl shows (`Error from server
//! (Forbidden): …`).

use bytes::Bytes;
use flotilla_api::kubestatus;
use http_body_util::{BodyExt, Full};

/// The body type of every proxy response.
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, super::BodyError>;

/// A `Status` object (`status: Failure`) with Kubernetes' `reason` for `code`.
pub fn body(code: http::StatusCode, message: &str) -> Bytes {
    let reason = kubestatus::reason(code.as_u16());
    Bytes::from(kubestatus::failure(code.as_u16(), reason, message, None).to_string())
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

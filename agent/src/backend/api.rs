//! A Kubernetes API request as the cluster proxy hands it to a backend
//! ([`super::Backend::serve_api`]), its body as it comes, and the response it streams back.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::pin::Pin;

/// Kubernetes impersonation for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: String,
    /// `Impersonate-Group` (empty: the API server's own groups for the user).
    pub groups: Vec<String>,
}

/// A bearer token (its `Debug` never shows it).
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer(pub String);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(<redacted>)")
    }
}

/// One request.
#[derive(Debug)]
pub struct ApiRequest {
    /// The method.
    pub method: http::Method,
    /// The path on the API server, from `/`.
    pub path: String,
    /// The raw query (no `?`).
    pub query: String,
    /// End-to-end headers (no credentials, no impersonation).
    pub headers: http::HeaderMap,
    /// Act as this user (`None`: as the agent).
    pub impersonate: Option<Impersonation>,
    /// A ManagedServiceAccount token the caller presented: sent as `Authorization: Bearer`
    /// instead of the agent's credential, so the cluster authenticates the caller.
    pub bearer: Option<Bearer>,
    /// The request body as it comes from the caller (the proxy bounds what it holds of it).
    pub body: RequestBody,
}

impl ApiRequest {
    /// The value of query parameter `name`, percent-decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == name).then(|| percent_decode(v))
        })
    }

    /// A header's value, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Decodes `%XX` escapes and `+` (as in a query string).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A request body: whole (a backend's own calls, tests), or streamed as the caller sends it —
/// the cluster proxy hands a backend each chunk as it arrives and asks the caller for more
/// only as the backend takes them, so a body never sits whole in the agent unless a backend
/// gathers it ([`RequestBody::gather`]).
pub struct RequestBody(Inner);

enum Inner {
    Whole(Bytes),
    /// (In a mutex only so that a request may be shared between threads: it is taken whole.)
    Streamed(std::sync::Mutex<BodyStream>),
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Inner::Whole(b) => write!(f, "RequestBody::Whole({} bytes)", b.len()),
            Inner::Streamed(_) => f.write_str("RequestBody::Streamed"),
        }
    }
}

/// Why a body could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// It is larger than the limit.
    #[error("the request body is over {0} bytes")]
    TooLarge(usize),
    /// It broke off.
    #[error("the request body broke off: {0}")]
    BrokeOff(std::io::Error),
}

impl RequestBody {
    /// No body.
    pub fn empty() -> Self {
        Self(Inner::Whole(Bytes::new()))
    }

    /// A body that is already whole.
    pub fn whole(bytes: impl Into<Bytes>) -> Self {
        Self(Inner::Whole(bytes.into()))
    }

    /// A body that comes as `chunks`; an error breaks it off (the backend drops the request).
    pub fn streamed(chunks: BodyStream) -> Self {
        Self(Inner::Streamed(std::sync::Mutex::new(chunks)))
    }

    /// The bytes of a whole body (nothing of a streamed one: [`RequestBody::gather`] it first).
    pub fn bytes(&self) -> &[u8] {
        match &self.0 {
            Inner::Whole(b) => b,
            Inner::Streamed(_) => &[],
        }
    }

    /// The whole body, at most `limit` bytes of it (what an API server reads before it
    /// answers 413).
    pub async fn gather(self, limit: usize) -> Result<Bytes, GatherError> {
        match self.0 {
            Inner::Whole(b) if b.len() > limit => Err(GatherError::TooLarge(limit)),
            Inner::Whole(b) => Ok(b),
            Inner::Streamed(chunks) => {
                let mut chunks = chunks
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut body = bytes::BytesMut::new();
                while let Some(chunk) = chunks.next().await {
                    let chunk = chunk.map_err(GatherError::BrokeOff)?;
                    if body.len() + chunk.len() > limit {
                        return Err(GatherError::TooLarge(limit));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(body.freeze())
            }
        }
    }

    /// The body as chunks (one for a whole body, none for an empty one).
    pub fn into_stream(self) -> BodyStream {
        match self.0 {
            Inner::Whole(b) if b.is_empty() => Box::pin(futures::stream::empty()),
            Inner::Whole(b) => Box::pin(futures::stream::iter([Ok(b)])),
            Inner::Streamed(chunks) => chunks
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }
}

/// A body as it comes; an error breaks it off.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>;

/// One response.
pub struct ApiResponse {
    /// The status.
    pub status: http::StatusCode,
    /// End-to-end headers.
    pub headers: http::HeaderMap,
    /// The body.
    pub body: BodyStream,
}

impl std::fmt::Debug for ApiResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl ApiResponse {
    /// A whole JSON body.
    pub fn json(status: http::StatusCode, value: &serde_json::Value) -> Self {
        Self::bytes(status, "application/json", Bytes::from(value.to_string()))
    }

    /// A whole body of `content_type`.
    pub fn bytes(status: http::StatusCode, content_type: &'static str, body: Bytes) -> Self {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(content_type),
        );
        Self {
            status,
            headers,
            body: Box::pin(futures::stream::iter([Ok(body)])),
        }
    }

    /// A Kubernetes `Status` failure (`reason` as Kubernetes names it: `NotFound`,
    /// `AlreadyExists`, `Conflict`, `Invalid`, `Forbidden`, `BadRequest`, …).
    pub fn status(status: http::StatusCode, reason: &str, message: &str) -> Self {
        Self::json(status, &status_object(status, reason, message, None))
    }
}

/// A Kubernetes `Status` failure object ([`flotilla_api::kubestatus`]).
pub fn status_object(
    status: http::StatusCode,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> serde_json::Value {
    flotilla_api::kubestatus::failure(status.as_u16(), reason, message, details)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_decoded() {
        let req = ApiRequest {
            method: http::Method::GET,
            path: "/".into(),
            query: "labelSelector=app%3Dweb&watch=true&fieldManager=kubectl+client".into(),
            headers: http::HeaderMap::new(),
            impersonate: None,
            bearer: Some(Bearer("s3cret".into())),
            body: RequestBody::empty(),
        };
        assert!(!format!("{req:?}").contains("s3cret"));
        assert_eq!(req.param("labelSelector").as_deref(), Some("app=web"));
        assert_eq!(req.param("watch").as_deref(), Some("true"));
        assert_eq!(req.param("fieldManager").as_deref(), Some("kubectl client"));
        assert_eq!(req.param("missing"), None);
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[tokio::test]
    async fn a_streamed_body_is_gathered_within_its_limit() {
        let chunks = || -> BodyStream {
            Box::pin(futures::stream::iter(
                [&b"ab"[..], b"cd", b"e"].map(|c| Ok(Bytes::from_static(c))),
            ))
        };
        let whole = RequestBody::streamed(chunks()).gather(5).await.unwrap();
        assert_eq!(&whole[..], b"abcde");
        assert!(matches!(
            RequestBody::streamed(chunks()).gather(4).await,
            Err(GatherError::TooLarge(4))
        ));
        assert!(matches!(
            RequestBody::whole(&b"abcde"[..]).gather(4).await,
            Err(GatherError::TooLarge(4))
        ));
        let broken: BodyStream = Box::pin(futures::stream::iter([
            Ok(Bytes::from_static(b"ab")),
            Err(std::io::Error::other("the caller went away")),
        ]));
        let err = RequestBody::streamed(broken).gather(5).await.unwrap_err();
        assert!(err.to_string().contains("the caller went away"), "{err}");
        assert_eq!(RequestBody::empty().into_stream().count().await, 0);
    }
}

use super::*;
use crate::Options;

fn store() -> Store {
    Store::new(&Options::default())
}

fn req(method: Method, uri: &str, content_type: &str, body: Value) -> Request {
    let mut headers = HeaderMap::new();
    if !content_type.is_empty() {
        headers.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
    }
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    Request::new(method, &uri.parse().unwrap(), headers, body)
}

#[test]
fn queries_are_decoded_and_logged_as_sent() {
    let r = req(
        Method::GET,
        "/api/v1/pods?labelSelector=app%3Dweb&x=a+b",
        "",
        Value::Null,
    );
    assert_eq!(r.param("labelSelector").as_deref(), Some("app=web"));
    assert_eq!(r.param("x").as_deref(), Some("a b"));
    assert_eq!(r.line(), "GET /api/v1/pods?labelSelector=app%3Dweb&x=a+b");
    assert_eq!(decode("100%"), "100%");
    assert_eq!(parse_version("v1.30.2+k3s1"), ("1".into(), "30".into()));
}

#[test]
fn open_paths_serve_discovery_and_openapi() {
    let s = store();
    let ok = |path: &str| open(&s, &req(Method::GET, path, "", Value::Null)).map(|r| r.status());
    assert_eq!(ok("/apis"), Some(StatusCode::OK));
    assert_eq!(ok("/api/v1"), Some(StatusCode::OK));
    assert_eq!(ok("/openapi/v3/apis/apps/v1"), Some(StatusCode::OK));
    assert_eq!(ok("/openapi/v3/apis/nope/v1"), Some(StatusCode::NOT_FOUND));
    assert_eq!(
        ok("/api/v1/namespaces/default/pods/p/log"),
        Some(StatusCode::OK)
    );
    assert_eq!(ok("/api/v1/pods"), None);
}

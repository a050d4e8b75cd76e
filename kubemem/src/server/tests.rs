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

fn call(store: &mut Store, r: &Request) -> Result<Value, ApiError> {
    let t = parse_target(store, &r.segments()).expect("a resource path");
    serve(store, r, &t)
}

fn cm(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"}})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

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
fn lists_and_deletecollection_follow_the_selectors() {
    let mut s = store();
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        call(
            &mut s,
            &req(Method::POST, CMS, "application/json", cm(name, app)),
        )
        .unwrap();
    }
    let list = call(
        &mut s,
        &req(
            Method::GET,
            &format!("{CMS}?labelSelector=app%3Dweb"),
            "",
            Value::Null,
        ),
    )
    .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let list = call(
        &mut s,
        &req(
            Method::GET,
            &format!("{CMS}?fieldSelector=metadata.name%3Db"),
            "",
            Value::Null,
        ),
    )
    .unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "b");
    let bad = call(
        &mut s,
        &req(
            Method::GET,
            &format!("{CMS}?fieldSelector=spec.x%3D1"),
            "",
            Value::Null,
        ),
    )
    .unwrap_err();
    assert_eq!(bad.code, 400);
    let gone = call(
        &mut s,
        &req(
            Method::DELETE,
            &format!("{CMS}?labelSelector=app%3Dweb"),
            "",
            Value::Null,
        ),
    )
    .unwrap();
    assert_eq!(gone["items"].as_array().unwrap().len(), 2);
    let left = call(&mut s, &req(Method::GET, CMS, "", Value::Null)).unwrap();
    assert_eq!(left["items"].as_array().unwrap().len(), 1);
}

#[test]
fn every_patch_type_applies_and_unknown_ones_are_refused() {
    let mut s = store();
    let item = format!("{CMS}/a");
    call(
        &mut s,
        &req(Method::POST, CMS, "application/json", cm("a", "web")),
    )
    .unwrap();
    let v = call(
        &mut s,
        &req(
            Method::PATCH,
            &item,
            "application/merge-patch+json",
            json!({"data": {"j": "1"}}),
        ),
    )
    .unwrap();
    assert_eq!(v["data"], json!({"k": "v", "j": "1"}));
    let v = call(
        &mut s,
        &req(
            Method::PATCH,
            &item,
            "application/strategic-merge-patch+json",
            json!({"data": {"k": null}}),
        ),
    )
    .unwrap();
    assert_eq!(v["data"], json!({"j": "1"}));
    let v = call(
        &mut s,
        &req(
            Method::PATCH,
            &item,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/z", "value": "2"}]),
        ),
    )
    .unwrap();
    assert_eq!(v["data"], json!({"j": "1", "z": "2"}));
    let e = call(
        &mut s,
        &req(
            Method::PATCH,
            &item,
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/data/nope"}]),
        ),
    )
    .unwrap_err();
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    let e = call(&mut s, &req(Method::PATCH, &item, "text/plain", json!({}))).unwrap_err();
    assert_eq!(e.code, 415);
    // A YAML apply patch, as kubectl may send one.
    let mut r = req(
        Method::PATCH,
        &format!("{item}?fieldManager=me"),
        "application/apply-patch+yaml",
        Value::Null,
    );
    r.body =
        Bytes::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  y: \"3\"\n");
    let v = call(&mut s, &r).unwrap();
    assert_eq!(v["data"]["y"], "3");
}

#[test]
fn namespaces_are_objects_at_their_own_path_and_dry_runs_store_nothing() {
    let s = store();
    let t = parse_target(&s, &["api", "v1", "namespaces", "default"]).unwrap();
    assert_eq!(
        (t.resource.plural.as_str(), t.name.as_deref()),
        ("namespaces", Some("default"))
    );
    assert!(parse_target(&s, &["api", "v1", "namespaces", "default", "nodes"]).is_none());
    let mut s = s;
    let dry = call(
        &mut s,
        &req(
            Method::POST,
            &format!("{CMS}?dryRun=All"),
            "application/json",
            cm("d", "x"),
        ),
    )
    .unwrap();
    assert_eq!(dry["metadata"]["namespace"], "default");
    assert!(
        s.get(&ObjectKey::new("", "configmaps", "default", "d"))
            .is_none()
    );
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

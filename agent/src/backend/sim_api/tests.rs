use super::*;
use crate::backend::sim::{SimBackend, SimConfig};
use futures::StreamExt;
use http::Method;
use std::time::Duration;

fn sim() -> Arc<dyn Backend> {
    Arc::new(SimBackend::new(8, 32, "v1.30.2").with_config(SimConfig {
        ready_delay: Duration::from_millis(10),
        nodes: 3,
        apply_error: None,
        token_max_lifetime: None,
    }))
}

fn req(method: Method, path: &str, query: &str, content_type: &str, body: Value) -> ApiRequest {
    let mut headers = http::HeaderMap::new();
    if !content_type.is_empty() {
        headers.insert("content-type", content_type.parse().unwrap());
    }
    ApiRequest {
        method,
        path: path.into(),
        query: query.into(),
        headers,
        impersonate: None,
        bearer: None,
        body: if body.is_null() {
            RequestBody::empty()
        } else {
            RequestBody::whole(body.to_string())
        },
    }
}

async fn call(backend: &Arc<dyn Backend>, r: ApiRequest) -> (StatusCode, Value) {
    let resp = serve(backend.clone(), r).await;
    let mut body = resp.body;
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    (
        resp.status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn discovery_lists_builtin_groups_and_resources() {
    let b = sim();
    let (code, v) = call(&b, req(Method::GET, "/api", "", "", Value::Null)).await;
    assert_eq!(
        (code, v["versions"][0].as_str()),
        (StatusCode::OK, Some("v1"))
    );
    let (_, v) = call(&b, req(Method::GET, "/apis", "", "", Value::Null)).await;
    assert!(
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "apps")
    );
    let (_, v) = call(&b, req(Method::GET, "/apis/apps/v1", "", "", Value::Null)).await;
    assert!(
        v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "deployments")
    );
    let (_, v) = call(&b, req(Method::GET, "/version", "", "", Value::Null)).await;
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("30"))
    );
    let (code, _) = call(&b, req(Method::GET, "/apis/nope/v1", "", "", Value::Null)).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn objects_are_created_read_listed_updated_and_deleted_like_on_an_api_server() {
    let b = sim();
    let (code, created) = call(
        &b,
        req(
            Method::POST,
            CMS,
            "",
            "application/json",
            cm("a", json!({"k": "1"})),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["namespace"], "default");
    let (code, again) = call(
        &b,
        req(
            Method::POST,
            CMS,
            "",
            "application/json",
            cm("a", json!({})),
        ),
    )
    .await;
    assert_eq!(
        (code, again["reason"].as_str()),
        (StatusCode::CONFLICT, Some("AlreadyExists"))
    );
    let (code, got) = call(
        &b,
        req(Method::GET, &format!("{CMS}/a"), "", "", Value::Null),
    )
    .await;
    assert_eq!((code, &got["data"]["k"]), (StatusCode::OK, &json!("1")));
    let (_, list) = call(
        &b,
        req(
            Method::GET,
            CMS,
            "fieldSelector=metadata.name%3Da",
            "",
            Value::Null,
        ),
    )
    .await;
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    // A stale resourceVersion is refused; the current one is taken.
    let mut stale = got.clone();
    stale["metadata"]["resourceVersion"] = json!("999");
    stale["data"]["k"] = json!("2");
    let (code, _) = call(
        &b,
        req(
            Method::PUT,
            &format!("{CMS}/a"),
            "",
            "application/json",
            stale,
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CONFLICT);
    let mut fresh = got.clone();
    fresh["data"]["k"] = json!("2");
    let (code, updated) = call(
        &b,
        req(
            Method::PUT,
            &format!("{CMS}/a"),
            "",
            "application/json",
            fresh,
        ),
    )
    .await;
    assert_eq!((code, &updated["data"]["k"]), (StatusCode::OK, &json!("2")));
    let (code, _) = call(
        &b,
        req(Method::DELETE, &format!("{CMS}/a"), "", "", Value::Null),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (code, gone) = call(
        &b,
        req(Method::GET, &format!("{CMS}/a"), "", "", Value::Null),
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(gone["message"], "configmaps \"a\" not found");
    // A namespace that does not exist is named.
    let (code, v) = call(
        &b,
        req(
            Method::POST,
            "/api/v1/namespaces/nope/configmaps",
            "",
            "application/json",
            cm("b", json!({})),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{v}");
}

#[tokio::test]
async fn every_patch_type_applies_and_server_side_apply_reports_conflicts() {
    let b = sim();
    call(
        &b,
        req(
            Method::POST,
            CMS,
            "",
            "application/json",
            cm("p", json!({"a": "1", "b": "1"})),
        ),
    )
    .await;
    let path = format!("{CMS}/p");
    let (code, v) = call(
        &b,
        req(
            Method::PATCH,
            &path,
            "",
            "application/merge-patch+json",
            json!({"data": {"a": null, "c": "3"}}),
        ),
    )
    .await;
    assert_eq!(
        (code, &v["data"]),
        (StatusCode::OK, &json!({"b": "1", "c": "3"}))
    );
    let (_, v) = call(
        &b,
        req(
            Method::PATCH,
            &path,
            "",
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/data/b", "value": "2"}]),
        ),
    )
    .await;
    assert_eq!(v["data"]["b"], "2");
    let (_, v) = call(
        &b,
        req(
            Method::PATCH,
            &path,
            "",
            "application/strategic-merge-patch+json",
            json!({"data": {"d": "4"}}),
        ),
    )
    .await;
    assert_eq!(v["data"]["d"], "4");
    let (code, bad) = call(
        &b,
        req(
            Method::PATCH,
            &path,
            "",
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/data/zz"}]),
        ),
    )
    .await;
    assert_eq!(
        (code, bad["reason"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid"))
    );
    // Server-side apply: one manager, then another one changing its field.
    let applied = cm("s", json!({"x": "1"}));
    let (code, v) = call(
        &b,
        req(
            Method::PATCH,
            &format!("{CMS}/s"),
            "fieldManager=alice",
            "application/apply-patch+yaml",
            applied,
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{v}");
    let (code, v) = call(
        &b,
        req(
            Method::PATCH,
            &format!("{CMS}/s"),
            "fieldManager=bob",
            "application/apply-patch+yaml",
            cm("s", json!({"x": "2"})),
        ),
    )
    .await;
    assert_eq!(
        (code, v["reason"].as_str()),
        (StatusCode::CONFLICT, Some("Conflict")),
        "{v}"
    );
    assert!(v["message"].as_str().unwrap().contains("alice"), "{v}");
    let (code, v) = call(
        &b,
        req(
            Method::PATCH,
            &format!("{CMS}/s"),
            "fieldManager=bob&force=true",
            "application/apply-patch+yaml",
            cm("s", json!({"x": "2"})),
        ),
    )
    .await;
    assert_eq!((code, &v["data"]["x"]), (StatusCode::OK, &json!("2")));
}

#[tokio::test]
async fn a_watch_streams_added_modified_and_deleted_events() {
    let b = sim();
    call(
        &b,
        req(
            Method::POST,
            CMS,
            "",
            "application/json",
            cm("w1", json!({})),
        ),
    )
    .await;
    let resp = serve(
        b.clone(),
        req(Method::GET, CMS, "watch=true", "", Value::Null),
    )
    .await;
    assert_eq!(resp.status, StatusCode::OK);
    let mut body = resp.body;
    let mut next = async || {
        let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&chunk).unwrap();
        format!(
            "{} {}",
            v["type"].as_str().unwrap(),
            v["object"]["metadata"]["name"].as_str().unwrap()
        )
    };
    assert_eq!(next().await, "ADDED w1");
    call(
        &b,
        req(
            Method::POST,
            CMS,
            "",
            "application/json",
            cm("w2", json!({})),
        ),
    )
    .await;
    assert_eq!(next().await, "ADDED w2");
    call(
        &b,
        req(
            Method::PATCH,
            &format!("{CMS}/w1"),
            "",
            "application/merge-patch+json",
            json!({"data": {"k": "v"}}),
        ),
    )
    .await;
    assert_eq!(next().await, "MODIFIED w1");
    call(
        &b,
        req(Method::DELETE, &format!("{CMS}/w2"), "", "", Value::Null),
    )
    .await;
    assert_eq!(next().await, "DELETED w2");
}

#[tokio::test]
async fn deployments_scale_through_the_scale_subresource() {
    let b = sim();
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let (code, _) = call(&b, req(Method::POST, path, "", "application/json", d)).await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, scale) = call(
        &b,
        req(
            Method::PATCH,
            &format!("{path}/web/scale"),
            "",
            "application/merge-patch+json",
            json!({"spec": {"replicas": 4}}),
        ),
    )
    .await;
    assert_eq!(
        (code, &scale["kind"], &scale["spec"]["replicas"]),
        (StatusCode::OK, &json!("Scale"), &json!(4))
    );
    let (_, got) = call(
        &b,
        req(Method::GET, &format!("{path}/web"), "", "", Value::Null),
    )
    .await;
    assert_eq!(got["spec"]["replicas"], 4);
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
}

#[tokio::test]
async fn a_watch_with_a_huge_timeout_serves_instead_of_panicking() {
    let b = sim();
    let query = format!("watch=true&timeoutSeconds={}", u64::MAX);
    let resp = serve(b.clone(), req(Method::GET, CMS, &query, "", Value::Null)).await;
    assert_eq!(resp.status, StatusCode::OK);
}

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str, containers: &[&str]) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": format!("registry.example/{c}:1")}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": containers}})
}

async fn text(backend: &Arc<dyn Backend>, path: &str, query: &str) -> (StatusCode, String) {
    let resp = serve(
        backend.clone(),
        req(Method::GET, path, query, "", Value::Null),
    )
    .await;
    let mut body = resp.body;
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    (resp.status, String::from_utf8(bytes).unwrap())
}

#[tokio::test]
async fn a_pods_log_is_its_simulated_kubelets_with_the_api_servers_parameters() {
    let b = sim();
    let (code, _) = call(
        &b,
        req(
            Method::POST,
            PODS,
            "",
            "application/json",
            pod("web", &["nginx"]),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (code, log) = text(&b, &format!("{PODS}/web/log"), "").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        log,
        "simulated kubelet: pulled image \"registry.example/nginx:1\"\n\
         simulated kubelet: started container nginx\n\
         simulated kubelet: container nginx is ready\n"
    );
    let (_, tail) = text(
        &b,
        &format!("{PODS}/web/log"),
        "tailLines=1&timestamps=true",
    )
    .await;
    let (stamp, line) = tail.split_once(' ').unwrap();
    assert!(stamp.ends_with('Z') && stamp.contains('T'), "{tail}");
    assert_eq!(line, "simulated kubelet: container nginx is ready\n");
    let (_, cut) = text(&b, &format!("{PODS}/web/log"), "limitBytes=10").await;
    assert_eq!(cut, "simulated ");

    // Refusals as the API server words them.
    let (code, v) = call(
        &b,
        req(
            Method::GET,
            &format!("{PODS}/web/log"),
            "container=php",
            "",
            Value::Null,
        ),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(v["message"], "container php is not valid for pod web");
    call(
        &b,
        req(
            Method::POST,
            PODS,
            "",
            "application/json",
            pod("two", &["a", "b"]),
        ),
    )
    .await;
    let (code, v) = call(
        &b,
        req(Method::GET, &format!("{PODS}/two/log"), "", "", Value::Null),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["message"],
        "a container name must be specified for pod two, choose one of: [a b]"
    );
    let (code, _) = call(
        &b,
        req(
            Method::GET,
            &format!("{PODS}/two/log"),
            "container=b&tailLines=x",
            "",
            Value::Null,
        ),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    let (code, _) = call(
        &b,
        req(
            Method::GET,
            &format!("{PODS}/gone/log"),
            "",
            "",
            Value::Null,
        ),
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_followed_log_streams_changes_and_ends_when_the_pod_is_deleted() {
    let b = sim();
    call(
        &b,
        req(
            Method::POST,
            PODS,
            "",
            "application/json",
            pod("web", &["nginx"]),
        ),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let resp = serve(
        b.clone(),
        req(
            Method::GET,
            &format!("{PODS}/web/log"),
            "follow=true",
            "",
            Value::Null,
        ),
    )
    .await;
    let mut body = resp.body;
    let mut next = async || {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("a line in time");
        chunk.map(|c| String::from_utf8(c.unwrap().to_vec()).unwrap())
    };
    for _ in 0..3 {
        next().await.expect("the history");
    }
    let patch = json!({"metadata": {"labels": {"tier": "front"}}});
    call(
        &b,
        req(
            Method::PATCH,
            &format!("{PODS}/web"),
            "",
            "application/merge-patch+json",
            patch,
        ),
    )
    .await;
    let updated = next().await.unwrap();
    assert!(
        updated.starts_with("simulated kubelet: pod updated (resourceVersion "),
        "{updated}"
    );
    call(
        &b,
        req(Method::DELETE, &format!("{PODS}/web"), "", "", Value::Null),
    )
    .await;
    assert_eq!(
        next().await.unwrap(),
        "simulated kubelet: container nginx terminated (pod deleted)\n"
    );
    assert_eq!(next().await, None, "the stream ends with the pod");
}

#[tokio::test]
async fn a_watch_sees_an_object_become_ready_as_an_api_servers_status_update() {
    let b = sim();
    let resp = serve(
        b.clone(),
        req(Method::GET, PODS, "watch=true", "", Value::Null),
    )
    .await;
    let mut body = resp.body;
    let mut next = async || {
        let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&chunk).unwrap();
        format!(
            "{} {}",
            v["type"].as_str().unwrap(),
            v["object"]["status"]["phase"].as_str().unwrap_or_default()
        )
    };
    call(
        &b,
        req(
            Method::POST,
            PODS,
            "",
            "application/json",
            pod("web", &["nginx"]),
        ),
    )
    .await;
    assert_eq!(next().await, "ADDED Pending");
    // No write: the simulated kubelet's readiness (after ready_delay) is the event.
    assert_eq!(next().await, "MODIFIED Running");
}

#[tokio::test]
async fn a_refused_field_selector_says_the_simulated_cluster_refuses_it() {
    let b = sim();
    let (code, v) = call(
        &b,
        req(
            Method::GET,
            CMS,
            "fieldSelector=spec.x%3D1",
            "",
            Value::Null,
        ),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["message"],
        "fieldSelector \"spec.x\": the simulated cluster selects only on metadata.name and metadata.namespace"
    );
}

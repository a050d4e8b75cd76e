use super::*;
use crate::Options;
use crate::server::Served;
use crate::store::{ObjectKey, Store};
use std::sync::{Arc, Mutex};

fn served() -> Served {
    Served {
        store: Arc::new(Mutex::new(Store::new(&Options::default()))),
        options: Options::default(),
    }
}

fn req(method: Method, uri: &str, content_type: &str, body: Value) -> Request {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    Request::new(method, path, query, content_type, body)
}

/// A failed request's code and reason.
#[derive(Debug)]
struct Failed {
    code: u16,
    reason: String,
    message: String,
}

async fn call(objects: &dyn Objects, r: &Request) -> Result<Value, Failed> {
    match serve(objects, r).await {
        Answer::Json(code, v) if code < 300 => Ok(v),
        Answer::Json(code, v) => Err(Failed {
            code,
            reason: v["reason"].as_str().unwrap_or_default().to_string(),
            message: v["message"].as_str().unwrap_or_default().to_string(),
        }),
        other => panic!("not a JSON answer: {other:?}"),
    }
}

fn cm(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"}})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn lists_and_deletecollection_follow_the_selectors() {
    let s = served();
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        call(
            &s,
            &req(Method::POST, CMS, "application/json", cm(name, app)),
        )
        .await
        .unwrap();
    }
    let list = call(
        &s,
        &req(
            Method::GET,
            &format!("{CMS}?labelSelector=app%3Dweb"),
            "",
            Value::Null,
        ),
    )
    .await
    .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let list = call(
        &s,
        &req(
            Method::GET,
            &format!("{CMS}?fieldSelector=metadata.name%3Db"),
            "",
            Value::Null,
        ),
    )
    .await
    .unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "b");
    let bad = call(
        &s,
        &req(
            Method::GET,
            &format!("{CMS}?fieldSelector=spec.x%3D1"),
            "",
            Value::Null,
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(bad.code, 400);
    let gone = call(
        &s,
        &req(
            Method::DELETE,
            &format!("{CMS}?labelSelector=app%3Dweb"),
            "",
            Value::Null,
        ),
    )
    .await
    .unwrap();
    assert_eq!(gone["items"].as_array().unwrap().len(), 2);
    let left = call(&s, &req(Method::GET, CMS, "", Value::Null))
        .await
        .unwrap();
    assert_eq!(left["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn every_patch_type_applies_and_unknown_ones_are_refused() {
    let s = served();
    let item = format!("{CMS}/a");
    call(
        &s,
        &req(Method::POST, CMS, "application/json", cm("a", "web")),
    )
    .await
    .unwrap();
    let v = call(
        &s,
        &req(
            Method::PATCH,
            &item,
            "application/merge-patch+json",
            json!({"data": {"j": "1"}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(v["data"], json!({"k": "v", "j": "1"}));
    let v = call(
        &s,
        &req(
            Method::PATCH,
            &item,
            "application/strategic-merge-patch+json",
            json!({"data": {"k": null}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(v["data"], json!({"j": "1"}));
    let v = call(
        &s,
        &req(
            Method::PATCH,
            &item,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/z", "value": "2"}]),
        ),
    )
    .await
    .unwrap();
    assert_eq!(v["data"], json!({"j": "1", "z": "2"}));
    let e = call(
        &s,
        &req(
            Method::PATCH,
            &item,
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/data/nope"}]),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let e = call(&s, &req(Method::PATCH, &item, "text/plain", json!({})))
        .await
        .unwrap_err();
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
    let v = call(&s, &r).await.unwrap();
    assert_eq!(v["data"]["y"], "3");
}

#[tokio::test]
async fn namespaces_are_objects_at_their_own_path_and_dry_runs_store_nothing() {
    let s = served();
    let resources = s.lock().resources().to_vec();
    let Route::Resource(t) = route(&["api", "v1", "namespaces", "default"], &resources) else {
        panic!("the Namespace's path is a resource path");
    };
    assert_eq!(
        (t.resource.plural.as_str(), t.name.as_str()),
        ("namespaces", "default")
    );
    assert!(matches!(
        route(&["api", "v1", "namespaces", "default", "nodes"], &resources),
        Route::Unknown(_)
    ));
    let dry = call(
        &s,
        &req(
            Method::POST,
            &format!("{CMS}?dryRun=All"),
            "application/json",
            cm("d", "x"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(dry["metadata"]["namespace"], "default");
    assert!(
        s.lock()
            .get(&ObjectKey::new("", "configmaps", "default", "d"))
            .is_none()
    );
}

#[tokio::test]
async fn a_refused_field_selector_names_the_cluster_that_refuses_it() {
    let s = served();
    let e = call(
        &s,
        &req(
            Method::GET,
            &format!("{CMS}?fieldSelector=spec.x%3D1"),
            "",
            Value::Null,
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.message,
        "fieldSelector \"spec.x\": an in-memory cluster selects only on metadata.name and metadata.namespace"
    );
}

#[tokio::test]
async fn errors_name_the_qualified_resource_and_stale_versions_conflict() {
    let s = served();
    let e = call(
        &s,
        &req(
            Method::GET,
            "/apis/apps/v1/namespaces/default/deployments/web",
            "",
            Value::Null,
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "deployments.apps \"web\" not found")
    );
    let created = call(
        &s,
        &req(Method::POST, CMS, "application/json", cm("a", "web")),
    )
    .await
    .unwrap();
    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let e = call(
        &s,
        &req(Method::PUT, &format!("{CMS}/a"), "application/json", stale),
    )
    .await
    .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let e = call(
        &s,
        &req(Method::POST, CMS, "application/json", cm("a", "web")),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (409, "configmaps \"a\" already exists")
    );
    // Apply needs a field manager.
    let e = call(
        &s,
        &req(
            Method::PATCH,
            &format!("{CMS}/a"),
            "application/apply-patch+yaml",
            cm("a", "web"),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 400);
}

#[tokio::test]
async fn deployments_scale_and_take_status_through_their_subresources() {
    let s = served();
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1}});
    call(&s, &req(Method::POST, path, "application/json", d))
        .await
        .unwrap();
    let scale = call(
        &s,
        &req(
            Method::PATCH,
            &format!("{path}/web/scale"),
            "application/merge-patch+json",
            json!({"spec": {"replicas": 3}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        (&scale["kind"], &scale["spec"]["replicas"]),
        (&json!("Scale"), &json!(3))
    );
    let mut d = call(
        &s,
        &req(Method::GET, &format!("{path}/web"), "", Value::Null),
    )
    .await
    .unwrap();
    assert_eq!(d["spec"]["replicas"], 3);
    d["status"] = json!({"replicas": 3, "readyReplicas": 2});
    let v = call(
        &s,
        &req(
            Method::PUT,
            &format!("{path}/web/status"),
            "application/json",
            d,
        ),
    )
    .await
    .unwrap();
    assert_eq!(v["status"]["readyReplicas"], 2);
    let e = call(
        &s,
        &req(Method::GET, &format!("{path}/web/exec"), "", Value::Null),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 404);
}

#[test]
fn identity_fills_what_the_path_implies_and_refuses_what_contradicts_it() {
    let resources = crate::resources::builtin();
    let Route::Resource(t) = route(
        &["api", "v1", "namespaces", "prod", "configmaps"],
        &resources,
    ) else {
        panic!("a resource path");
    };
    let mut o = json!({"metadata": {"generateName": "x-"}});
    let (name, ns) = identity(&t, &mut o, "").unwrap();
    assert!(name.starts_with("x-") && name.len() == 7, "{name}");
    assert_eq!(
        (ns.as_str(), &o["kind"], &o["apiVersion"]),
        ("prod", &json!("ConfigMap"), &json!("v1"))
    );
    let mut o = json!({"metadata": {"name": "a", "namespace": "dev"}});
    assert_eq!(identity(&t, &mut o, "").unwrap_err().code, 400);
    let mut o = json!({"metadata": {}});
    assert_eq!(identity(&t, &mut o, "").unwrap_err().code, 422);
    assert!(matches!(
        route(&["apis", "nope", "v1", "things"], &resources),
        Route::Unknown(_)
    ));
}

#[tokio::test]
async fn discovery_openapi_and_writes_follow_the_kubernetes_version() {
    let at = |git: &str| {
        let options = Options {
            git_version: git.into(),
            ..Options::default()
        };
        Served {
            store: Arc::new(Mutex::new(Store::new(&options))),
            options,
        }
    };
    let cronjob = json!({"apiVersion": "batch/v1beta1", "kind": "CronJob",
        "metadata": {"name": "c", "namespace": "default"}, "spec": {"schedule": "* * * * *"}});
    let path = "/apis/batch/v1beta1/namespaces/default/cronjobs";

    // 1.24 still serves batch/v1beta1: discovery, OpenAPI and writes.
    let old = at("v1.24.17");
    let list = call(
        &old,
        &req(Method::GET, "/apis/batch/v1beta1", "", Value::Null),
    )
    .await
    .unwrap();
    assert_eq!(list["resources"][0]["kind"], "CronJob");
    let root = call(&old, &req(Method::GET, "/openapi/v3", "", Value::Null))
        .await
        .unwrap();
    assert!(root["paths"]["apis/batch/v1beta1"].is_object(), "{root}");
    call(
        &old,
        &req(Method::POST, path, "application/json", cronjob.clone()),
    )
    .await
    .unwrap();

    // 1.30 does not: 404 everywhere, as from a real API server.
    let new = at("v1.30.2+k3s1");
    let e = call(
        &new,
        &req(Method::GET, "/apis/batch/v1beta1", "", Value::Null),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 404);
    let root = call(&new, &req(Method::GET, "/openapi/v3", "", Value::Null))
        .await
        .unwrap();
    assert!(root["paths"].get("apis/batch/v1beta1").is_none());
    assert!(root["paths"]["apis/batch/v1"].is_object());
    let e = call(&new, &req(Method::POST, path, "application/json", cronjob))
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"), "{e:?}");
}

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deploy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn deploy_spec() -> Value {
    json!({"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}})
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields_and_stores_nothing() {
    let s = served();
    let mut misspelt = deploy_spec();
    misspelt["replcas"] = json!(3);
    let strict = format!("{DEPLOYS}?fieldValidation=Strict");
    let e = call(
        &s,
        &req(
            Method::POST,
            &strict,
            "application/json",
            deploy("web", misspelt.clone()),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
         unknown field \"spec.replcas\""
    );
    let key = ObjectKey::new("apps", "deployments", "default", "web");
    assert!(s.lock().get(&key).is_none(), "refused: nothing stored");
    // A dry run is refused alike (what the agent's Kubernetes backend asks before it writes).
    let e = call(
        &s,
        &req(
            Method::POST,
            &format!("{strict}&dryRun=All"),
            "application/json",
            deploy("web", misspelt.clone()),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 400);
    // Without Strict the engine keeps what it is sent (the API server's default, Warn, would
    // drop the field with a warning: a documented difference).
    call(
        &s,
        &req(
            Method::POST,
            DEPLOYS,
            "application/json",
            deploy("web", deploy_spec()),
        ),
    )
    .await
    .unwrap();
    // An update and a patch are refused alike; the stored object is unchanged.
    let one = format!("{DEPLOYS}/web?fieldValidation=Strict");
    let e = call(
        &s,
        &req(
            Method::PUT,
            &one,
            "application/json",
            deploy("web", misspelt),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message.ends_with("unknown field \"spec.replcas\""),
        "{}",
        e.message
    );
    let e = call(
        &s,
        &req(
            Method::PATCH,
            &one,
            "application/strategic-merge-patch+json",
            json!({"spec": {"replcas": 3}}),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        " \"\" is invalid: patch: Invalid value: \"map[spec:map[replcas:3]]\": strict decoding \
         error: unknown field \"spec.replcas\""
    );
    assert!(s.lock().get(&key).unwrap()["spec"].get("replcas").is_none());
    // Valid writes pass under Strict; kinds without a schema are not judged.
    call(
        &s,
        &req(
            Method::PATCH,
            &one,
            "application/merge-patch+json",
            json!({"spec": {"replicas": 3}}),
        ),
    )
    .await
    .unwrap();
    call(
        &s,
        &req(
            Method::POST,
            &format!("{CMS}?fieldValidation=Strict"),
            "application/json",
            cm("c", "web"),
        ),
    )
    .await
    .unwrap();
}

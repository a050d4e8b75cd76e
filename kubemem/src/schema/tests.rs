use super::*;
use serde_json::json;

fn deployment(spec_extra: Value, container_extra: Value) -> Value {
    let mut container = json!({"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "500m", "memory": 128}}});
    container
        .as_object_mut()
        .unwrap()
        .extend(container_extra.as_object().unwrap().clone());
    let mut spec = json!({"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
            "spec": {"containers": [container]}}});
    spec.as_object_mut()
        .unwrap()
        .extend(spec_extra.as_object().unwrap().clone());
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
            "annotations": {"a.example.io/b": "c"}},
        "spec": spec})
}

#[test]
fn a_valid_object_of_each_listed_kind_has_no_unknown_fields() {
    let valid = [
        deployment(json!({}), json!({})),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"any.key": "v", "replcas": "3"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque",
            "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
            "automountServiceAccountToken": false}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "namespace": "default"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
    ];
    for o in valid {
        let (api_version, kind) = (
            o["apiVersion"].as_str().unwrap(),
            o["kind"].as_str().unwrap(),
        );
        assert_eq!(
            unknown_fields(api_version, kind, &o),
            Some(Vec::new()),
            "{kind}"
        );
    }
}

#[test]
fn misspelt_fields_are_named_by_their_path_in_key_order() {
    let d = deployment(
        json!({"replcas": 3}),
        json!({"imagePullPolice": "Always", "resources": {"limits": {"cpu": "1"}, "limts": {}}}),
    );
    assert_eq!(
        unknown_fields("apps/v1", "Deployment", &d).unwrap(),
        [
            "spec.replcas",
            "spec.template.spec.containers[0].imagePullPolice",
            "spec.template.spec.containers[0].resources.limts",
        ]
    );
    let mut d = deployment(json!({}), json!({}));
    d["metadata"]["lables"] = json!({"a": "b"});
    d["spc"] = json!({});
    assert_eq!(
        unknown_fields("apps/v1", "Deployment", &d).unwrap(),
        ["metadata.lables", "spc"]
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}, {"verbs": ["list"], "resource": ["pods"]}]});
    assert_eq!(
        unknown_fields("rbac.authorization.k8s.io/v1", "Role", &role).unwrap(),
        ["rules[1].resource"]
    );
    // A ConfigMap has no spec; a field set to null is no field at all.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
        "spec": {"a": 1}, "immutable": null, "bogus": null});
    assert_eq!(unknown_fields("v1", "ConfigMap", &cm).unwrap(), ["spec"]);
}

#[test]
fn kinds_without_a_schema_and_objects_that_do_not_decode_are_not_judged() {
    let widget = json!({"apiVersion": "example.io/v1", "kind": "Widget", "spec": {"anything": 1}});
    assert_eq!(unknown_fields("example.io/v1", "Widget", &widget), None);
    let old = json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "spec": {"x": 1}});
    assert_eq!(unknown_fields("batch/v1beta1", "CronJob", &old), None);
    let d = deployment(json!({"replicas": "three"}), json!({}));
    assert_eq!(unknown_fields("apps/v1", "Deployment", &d), None);
}

#[test]
fn refusals_read_as_the_api_servers() {
    let fields = vec!["spec.replcas".to_string(), "spec.x[0].y".to_string()];
    assert_eq!(
        refused_body("Deployment", "v1", &fields),
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding \
         error: unknown field \"spec.replcas\", unknown field \"spec.x[0].y\""
    );
    let patch = json!({"spec": {"replcas": 3, "ratio": 0.5, "big": 1.5e7, "on": true,
        "list": ["a", 1], "none": null}});
    assert_eq!(
        refused_patch(&patch, &fields[..1]),
        " \"\" is invalid: patch: Invalid value: \"map[spec:map[big:1.5e+07 list:[a 1] none:<nil> \
         on:true ratio:0.5 replcas:3]]\": strict decoding error: unknown field \"spec.replcas\""
    );
    assert_eq!(go_float(0.00001), "1e-05");
    assert_eq!(go_float(123456.5), "123456.5");
}

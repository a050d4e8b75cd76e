use crate::policy::compare::{compare, equivalent, quantity};
use crate::policy::config::ComplianceType::{self, *};
use serde_json::{Value, json};

fn check(template: Value, existing: Value, c: ComplianceType) -> (bool, Value) {
    let out = compare(template.as_object().unwrap(), &existing, c, None);
    (out.matches, out.desired)
}

fn limits(items: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": items}})
}

#[test]
fn musthave_accepts_extra_fields_and_reports_missing_or_different_ones() {
    let t = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "uid": "u", "resourceVersion": "9"}, "data": {"a": "1", "b": "2"}});
    assert!(
        check(t.clone(), live.clone(), MustHave).0,
        "extra data keys are fine"
    );
    let (ok, desired) = check(
        t.clone(),
        json!({"metadata": {"name": "c"}, "data": {"a": "0", "b": "2"}}),
        MustHave,
    );
    assert!(!ok);
    assert_eq!(
        desired["data"],
        json!({"a": "1", "b": "2"}),
        "merged, extra key kept"
    );
    let (ok, desired) = check(t, json!({"metadata": {"name": "c"}}), MustHave);
    assert!(!ok, "a missing field is a difference");
    assert_eq!(desired["data"], json!({"a": "1"}));
}

#[test]
fn mustonlyhave_refuses_extra_fields_and_writes_exactly_the_template() {
    let t = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let live = json!({"metadata": {"name": "c", "uid": "u"}, "data": {"a": "1", "b": "2"}});
    let (ok, desired) = check(t.clone(), live, MustOnlyHave);
    assert!(!ok, "an extra key is a violation");
    assert_eq!(desired["data"], json!({"a": "1"}));
    assert_eq!(
        desired["metadata"]["uid"], "u",
        "untemplated metadata is kept"
    );
    assert!(
        check(
            t,
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            MustOnlyHave
        )
        .0
    );
}

#[test]
fn musthave_lists_merge_without_thrashing() {
    let t = limits(json!([{"type": "Container", "default": {"memory": "512Mi"}}]));
    // The cluster holds the item with more fields, and another item.
    let live = limits(json!([
        {"type": "Pod", "max": {"cpu": "2"}},
        {"type": "Container", "default": {"memory": "512Mi"}, "defaultRequest": {"memory": "256Mi"}},
    ]));
    let (ok, desired) = check(t.clone(), live.clone(), MustHave);
    assert!(ok, "the item is contained in an existing item");
    assert_eq!(desired, live, "nothing moves");

    // A missing item is appended once; enforcing again changes nothing.
    let t2 = limits(json!([{"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}}]));
    let (ok, desired) = check(t2.clone(), live.clone(), MustHave);
    assert!(!ok);
    let items = desired["spec"]["limits"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0], live["spec"]["limits"][0], "existing order kept");
    let (ok, again) = check(t2, desired.clone(), MustHave);
    assert!(ok, "the merged object satisfies the template");
    assert_eq!(again, desired, "a second enforce writes the same object");
}

#[test]
fn musthave_merges_a_same_named_item_instead_of_appending() {
    let t = json!({"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}});
    let live = json!({"spec": {"containers": [
        {"name": "sidecar", "image": "envoy"},
        {"name": "app", "image": "nginx:1", "imagePullPolicy": "Always"},
    ]}});
    let (ok, desired) = check(t, live, MustHave);
    assert!(!ok);
    assert_eq!(
        desired["spec"]["containers"],
        json!([
            {"name": "sidecar", "image": "envoy"},
            {"name": "app", "image": "nginx:2", "imagePullPolicy": "Always"},
        ])
    );
}

#[test]
fn musthave_adds_no_duplicate_of_an_item_already_there() {
    let t = json!({"rules": [{"verbs": ["get"]}, {"verbs": ["get"]}]});
    let live = json!({"rules": [{"verbs": ["get"], "resources": ["pods"]}]});
    let (ok, desired) = check(t, live.clone(), MustHave);
    assert!(ok);
    assert_eq!(desired, live);
}

#[test]
fn mustonlyhave_lists_are_exact_in_any_order() {
    let t = json!({"rules": [{"apiGroups": ["apps"], "verbs": ["get", "list"]}]});
    let same = json!({"rules": [{"apiGroups": ["apps"], "verbs": ["list", "get"]}]});
    assert!(
        check(t.clone(), same, MustOnlyHave).0,
        "order does not matter"
    );
    let more = json!({"rules": [{"apiGroups": ["apps"], "verbs": ["get", "list", "delete"]}]});
    let (ok, desired) = check(t.clone(), more, MustOnlyHave);
    assert!(!ok, "an extra list item is a violation");
    assert_eq!(desired["rules"], t["rules"]);
    let extra_item =
        json!({"rules": [{"apiGroups": ["apps"], "verbs": ["get", "list"]}, {"verbs": ["*"]}]});
    assert!(!check(t.clone(), extra_item, MustOnlyHave).0);
    // The same under musthave: the extra item is fine.
    let extra_item =
        json!({"rules": [{"apiGroups": ["apps"], "verbs": ["get", "list"]}, {"verbs": ["*"]}]});
    assert!(check(t, extra_item, MustHave).0);
}

#[test]
fn missing_fields_equal_zero_values_and_null_means_anything() {
    let t = json!({"spec": {"paused": false, "replicas": 0, "note": "", "tags": [], "extra": {}}});
    assert!(check(t, json!({"spec": {}}), MustHave).0);
    let t = json!({"spec": {"replicas": null}});
    assert!(check(t, json!({"spec": {"replicas": 3}}), MustHave).0);
    // But a non-zero value missing is a difference.
    assert!(
        !check(
            json!({"spec": {"replicas": 1}}),
            json!({"spec": {}}),
            MustHave
        )
        .0
    );
}

#[test]
fn scalars_compare_as_printed_and_quantities_by_value() {
    assert!(equivalent(&json!("80"), &json!(80)));
    assert!(equivalent(&json!(1), &json!(1.0)));
    assert!(equivalent(&json!("true"), &json!(true)));
    assert!(equivalent(&json!("512Mi"), &json!("0.5Gi")));
    assert!(equivalent(&json!("1000m"), &json!("1")));
    assert!(!equivalent(&json!("512Mi"), &json!("512M")));
    assert!(!equivalent(&json!("abc"), &json!("abd")));
    assert_eq!(quantity("2k"), Some(2000.0));
    assert_eq!(quantity("1e3"), Some(1000.0));
    assert_eq!(quantity("Mi"), None);
    assert_eq!(quantity("12x"), None);
}

#[test]
fn only_labels_and_annotations_of_metadata_are_compared() {
    let t = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}});
    let live = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "prod", "uid": "x", "labels": {"env": "prod", "kubernetes.io/metadata.name": "prod"}}});
    assert!(check(t.clone(), live.clone(), MustHave).0);
    // mustonlyhave: the extra label is a violation...
    let (ok, desired) = check(t.clone(), live.clone(), MustOnlyHave);
    assert!(!ok);
    assert_eq!(desired["metadata"]["labels"], json!({"env": "prod"}));
    assert_eq!(desired["metadata"]["uid"], "x");
    // ...unless metadataComplianceType says musthave.
    let out = compare(t.as_object().unwrap(), &live, MustOnlyHave, Some(MustHave));
    assert!(out.matches);
}

#[test]
fn differences_are_reported_by_path() {
    let t = json!({"metadata": {"labels": {"env": "prod"}}, "data": {"a": "1", "b": "2"}});
    let live = json!({"metadata": {"labels": {"env": "dev"}}, "data": {"a": "1", "b": "3"}});
    let out = compare(t.as_object().unwrap(), &live, MustHave, None);
    assert_eq!(out.diffs, ["data.b", "metadata.labels.env"]);
}

#[test]
fn a_type_mismatch_is_a_difference_and_the_template_wins() {
    let (ok, desired) = check(
        json!({"data": {"a": "1"}}),
        json!({"data": ["x"]}),
        MustHave,
    );
    assert!(!ok);
    assert_eq!(desired["data"], json!({"a": "1"}));
}

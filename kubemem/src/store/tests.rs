use super::*;

fn store() -> Store {
    Store::new(&Options {
        nodes: Vec::new(),
        ..Options::default()
    })
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("apps", "deployments", "default", name)
}

#[test]
fn server_side_apply_refuses_another_managers_fields_unless_forced() {
    let mut s = store();
    let v = s
        .apply(&key("web"), deployment("web", 1), "a", false)
        .unwrap();
    assert_eq!(v["metadata"]["managedFields"][0]["manager"], "a");
    assert_eq!(
        v["status"]["readyReplicas"], 1,
        "workloads are marked ready"
    );
    let e = s
        .apply(&key("web"), deployment("web", 3), "b", false)
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    assert!(e.message.contains("conflict with \"a\""), "{}", e.message);
    assert_eq!(e.causes[0].0, ".spec.replicas");
    let v = s
        .apply(&key("web"), deployment("web", 3), "b", true)
        .unwrap();
    assert_eq!(v["spec"]["replicas"], 3);
    assert_eq!(v["metadata"]["generation"], 2);
    // The same values by another manager are shared, not a conflict.
    s.apply(&key("web"), deployment("web", 3), "c", false)
        .unwrap();
}

#[test]
fn updates_refuse_a_stale_resource_version_and_namespaces_must_exist() {
    let mut s = store();
    let v = s
        .create("apps", "deployments", "default", deployment("web", 1), "m")
        .unwrap();
    let mut stale = v.clone();
    s.merge_patch(&key("web"), &json!({"spec": {"replicas": 2}}), "m")
        .unwrap();
    stale["spec"]["replicas"] = json!(5);
    let e = s.replace(&key("web"), stale, "m").unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    let e = s
        .create("apps", "deployments", "nowhere", deployment("x", 1), "m")
        .unwrap_err();
    assert_eq!(e.code, 404);
    let e = s
        .create("apps", "deployments", "default", deployment("web", 1), "m")
        .unwrap_err();
    assert_eq!(e.reason, "AlreadyExists");
}

#[test]
fn a_delete_takes_dependents_unless_orphaned_and_a_namespace_takes_its_objects() {
    let mut s = store();
    let owner = s
        .create("apps", "deployments", "default", deployment("web", 1), "m")
        .unwrap();
    let uid = owner["metadata"]["uid"].clone();
    let dependent = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
            "ownerReferences": [{"uid": uid, "kind": "Deployment", "name": "web"}]}})
    };
    s.create("", "configmaps", "default", dependent("a"), "m")
        .unwrap();
    s.delete(&key("web"), Propagation::Orphan).unwrap();
    let a = ObjectKey::new("", "configmaps", "default", "a");
    assert_eq!(s.get(&a).unwrap()["metadata"]["ownerReferences"], json!([]));
    s.create("apps", "deployments", "default", deployment("web", 1), "m")
        .unwrap();
    let uid = s.get(&key("web")).unwrap()["metadata"]["uid"].clone();
    let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b",
        "ownerReferences": [{"uid": uid, "kind": "Deployment", "name": "web"}]}});
    s.create("", "configmaps", "default", b, "m").unwrap();
    s.delete(&key("web"), Propagation::Background).unwrap();
    assert!(
        s.get(&ObjectKey::new("", "configmaps", "default", "b"))
            .is_none()
    );
    s.delete(
        &ObjectKey::new("", "namespaces", "", "default"),
        Propagation::Background,
    )
    .unwrap();
    assert!(s.get(&a).is_none());
}

#[test]
fn the_history_replays_changes_since_a_version() {
    let mut s = store();
    let before = s.list("", "configmaps", None).1.parse::<u64>().unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    s.create("", "configmaps", "default", cm, "m").unwrap();
    let k = ObjectKey::new("", "configmaps", "default", "x");
    s.patch(&k, PatchType::Strategic, &json!({"data": {"a": "1"}}), "m")
        .unwrap();
    s.delete(&k, Propagation::Background).unwrap();
    let kinds: Vec<&str> = s
        .events_since(before)
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    let e = s.patch(&k, PatchType::Json, &json!([]), "m").unwrap_err();
    assert_eq!(e.code, 404);
}

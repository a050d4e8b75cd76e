use super::*;
use flotilla_api::work::manifest_id;

fn sim() -> SimBackend {
    SimBackend::new(8, 32, "v1.30.0").with_config(SimConfig {
        ready_delay: Duration::from_millis(50),
        nodes: 3,
        apply_error: None,
        token_max_lifetime: None,
    })
}

fn deploy(name: &str, ns: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
           "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})
}

fn ns(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

#[tokio::test]
async fn the_executor_is_allowed_and_shown_on_the_object_it_applied() {
    let b = sim();
    let d = deploy("web", "default", 1);
    let id = manifest_id(&d).unwrap();
    let executor = flotilla_api::work::Executor {
        namespace: "default".into(),
        name: "executor1".into(),
    };
    b.authorize(Some(&executor), &id, &d, &["create"])
        .await
        .expect("the simulated cluster allows every executor");
    b.apply(&id, &d, &Strategy::Update).await.unwrap();
    let shown = b.get(&id).await.unwrap().unwrap();
    assert_eq!(
        shown["metadata"]["annotations"][ANNOTATION_EXECUTOR],
        "system:serviceaccount:default:executor1"
    );
    let listed = b.list("deployments", Some("default")).await.unwrap();
    assert_eq!(
        listed[0]["metadata"]["annotations"][ANNOTATION_EXECUTOR],
        "system:serviceaccount:default:executor1"
    );
    // The work drops its executor: the agent's own identity applies, nothing is shown.
    b.authorize(None, &id, &d, &["create"]).await.unwrap();
    assert_eq!(b.executor_of(&id), None);
    assert!(b.get(&id).await.unwrap().unwrap()["metadata"]["annotations"].is_null());
}

#[tokio::test]
async fn changes_are_signalled_and_nodes_reported() {
    let b = sim();
    assert_eq!(b.info().await.nodes, Some(3), "SimConfig::nodes");
    b.set_nodes(7);
    assert_eq!(b.info().await.nodes, Some(7));
    let mut rx = b.changes().expect("the simulated cluster signals changes");
    let d = deploy("web", "default", 1);
    let id = manifest_id(&d).unwrap();
    b.apply(&id, &d, &Strategy::Update).await.unwrap();
    assert!(rx.has_changed().unwrap());
    rx.borrow_and_update();
    // An unchanged apply is no change.
    b.apply(&id, &d, &Strategy::Update).await.unwrap();
    assert!(!rx.has_changed().unwrap());
    b.delete(&id).await.unwrap();
    assert!(rx.has_changed().unwrap());
}

#[tokio::test]
async fn sim_reports_capacity_and_injected_failures() {
    let b = SimBackend::new(8, 32, "v1.30.0").with_platform("AWS");
    let i = b.info().await;
    assert_eq!(i.capacity["cpu"], "8");
    assert_eq!(i.allocatable["cpu"], "7600m");
    assert_eq!(i.platform, "AWS");
    b.set_health(false, "apiserver down");
    assert!(!b.info().await.healthy);
}

#[tokio::test]
async fn namespaced_objects_need_their_namespace() {
    let b = sim();
    let d = deploy("web", "shop", 1);
    let id = manifest_id(&d).unwrap();
    assert!(matches!(
        b.apply(&id, &d, &Strategy::Update).await,
        Err(BackendError::NotFound(_))
    ));
    let n = ns("shop");
    assert_eq!(
        b.apply(&manifest_id(&n).unwrap(), &n, &Strategy::Update)
            .await
            .unwrap(),
        ApplyOutcome::Created
    );
    assert_eq!(
        b.apply(&id, &d, &Strategy::Update).await.unwrap(),
        ApplyOutcome::Created
    );
    assert_eq!(
        b.apply(&id, &d, &Strategy::Update).await.unwrap(),
        ApplyOutcome::Unchanged
    );
    // Deleting the namespace deletes its content.
    assert!(b.delete(&manifest_id(&n).unwrap()).await.unwrap());
    assert!(b.get(&id).await.unwrap().is_none());
}

#[tokio::test]
async fn deployments_become_ready_after_the_delay() {
    let b = sim();
    let d = deploy("web", "default", 2);
    let id = manifest_id(&d).unwrap();
    b.apply(&id, &d, &Strategy::Update).await.unwrap();
    let now = b.get(&id).await.unwrap().unwrap();
    assert_eq!(now["status"]["readyReplicas"], 0);
    std::thread::sleep(Duration::from_millis(60));
    let later = b.get(&id).await.unwrap().unwrap();
    assert_eq!(later["status"]["readyReplicas"], 2);
    assert_eq!(later["status"]["conditions"][0]["status"], "True");
    // A spec change restarts the rollout and bumps the generation.
    b.apply(&id, &deploy("web", "default", 3), &Strategy::Update)
        .await
        .unwrap();
    let again = b.get(&id).await.unwrap().unwrap();
    assert_eq!(again["metadata"]["generation"], 2);
    assert_eq!(again["status"]["readyReplicas"], 0);
}

#[tokio::test]
async fn server_side_apply_reports_conflicts_unless_forced() {
    let b = sim();
    let d = deploy("web", "default", 1);
    let id = manifest_id(&d).unwrap();
    b.apply(&id, &d, &Strategy::Update).await.unwrap();
    let ssa = |force| Strategy::ServerSideApply {
        force,
        field_manager: "other".into(),
    };
    let err = b
        .apply(&id, &deploy("web", "default", 5), &ssa(false))
        .await
        .unwrap_err();
    let BackendError::Conflict { fields, manager } = err else {
        panic!("{err:?}")
    };
    assert_eq!(fields, vec!["spec.replicas"]);
    assert_eq!(manager, UPDATE_MANAGER);
    assert_eq!(
        b.apply(&id, &deploy("web", "default", 5), &ssa(true))
            .await
            .unwrap(),
        ApplyOutcome::Updated
    );
    assert_eq!(b.get(&id).await.unwrap().unwrap()["spec"]["replicas"], 5);
    // Same values never conflict.
    assert_eq!(
        b.apply(&id, &deploy("web", "default", 5), &ssa(false))
            .await
            .unwrap(),
        ApplyOutcome::Unchanged
    );
}

#[tokio::test]
async fn server_side_apply_keeps_dotted_label_keys_whole() {
    let b = sim();
    let key = "clusterset.open-cluster-management.io/abc";
    let labelled = |value: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "team", "labels": {key: value}}})
    };
    let id = manifest_id(&labelled("true")).unwrap();
    b.apply(&id, &ns("team"), &Strategy::Update).await.unwrap();
    let ssa = Strategy::ServerSideApply {
        force: true,
        field_manager: "agent".into(),
    };
    for value in ["true", "false"] {
        b.apply(&id, &labelled(value), &ssa).await.unwrap();
        let got = b.get(&id).await.unwrap().unwrap();
        assert_eq!(got["metadata"]["labels"][key], value, "{got}");
        assert!(
            got["metadata"]["labels"].get("clusterset").is_none(),
            "{got}"
        );
    }
}

#[tokio::test]
async fn create_only_and_read_only_never_change_existing_objects() {
    let b = sim();
    let d = deploy("web", "default", 1);
    let id = manifest_id(&d).unwrap();
    assert_eq!(
        b.apply(&id, &d, &Strategy::ReadOnly).await.unwrap(),
        ApplyOutcome::Skipped
    );
    assert!(b.get(&id).await.unwrap().is_none());
    assert_eq!(
        b.apply(&id, &d, &Strategy::CreateOnly).await.unwrap(),
        ApplyOutcome::Created
    );
    assert_eq!(
        b.apply(&id, &deploy("web", "default", 9), &Strategy::CreateOnly)
            .await
            .unwrap(),
        ApplyOutcome::Skipped
    );
    assert_eq!(b.get(&id).await.unwrap().unwrap()["spec"]["replicas"], 1);
}

#[tokio::test]
async fn jobs_complete_or_fail_and_errors_can_be_injected() {
    let b = sim();
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {ANNOTATION_JOB_OUTCOME: "fail"}}});
    let id = manifest_id(&job).unwrap();
    b.apply(&id, &job, &Strategy::Update).await.unwrap();
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(b.get(&id).await.unwrap().unwrap()["status"]["failed"], 1);
    b.inject_apply_error("Job", "j", Some("admission webhook denied"));
    assert_eq!(
        b.apply(&id, &job, &Strategy::Update).await.unwrap_err(),
        BackendError::Invalid("admission webhook denied".into())
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": {ANNOTATION_APPLY_ERROR: "quota exceeded"}}});
    assert!(
        b.apply(&manifest_id(&cm).unwrap(), &cm, &Strategy::Update)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn persisted_clusters_survive_a_restart_and_list_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.json");
    let b = sim().persisted(file.clone()).unwrap();
    let d = deploy("web", "default", 1);
    b.apply(&manifest_id(&d).unwrap(), &d, &Strategy::Update)
        .await
        .unwrap();
    drop(b);
    let b = sim().persisted(file).unwrap();
    assert_eq!(b.list("deploy", None).await.unwrap().len(), 1);
    assert_eq!(b.list("Deployment", Some("other")).await.unwrap().len(), 0);
}

#[tokio::test]
async fn sim_list_in_group_never_confuses_two_groups_kinds_of_one_name() {
    let b = sim();
    for (group, name) in [("example.com", "other"), ("cluster.x-k8s.io", "capi-1")] {
        let o = serde_json::json!({"apiVersion": format!("{group}/v1beta1"), "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"}});
        b.apply(&manifest_id(&o).unwrap(), &o, &Strategy::Update)
            .await
            .unwrap();
    }
    let capi = b
        .list_in_group("cluster.x-k8s.io", "clusters", None)
        .await
        .unwrap();
    assert_eq!(capi.len(), 1, "{capi:?}");
    assert_eq!(capi[0]["metadata"]["name"], "capi-1");
    let other = b
        .list_in_group("example.com", "Cluster", Some("default"))
        .await
        .unwrap();
    assert_eq!(other.len(), 1, "{other:?}");
    assert_eq!(other[0]["metadata"]["name"], "other");
    assert_eq!(b.list("clusters", None).await.unwrap().len(), 2);
    assert!(
        b.list_in_group("", "namespaces", None)
            .await
            .unwrap()
            .iter()
            .any(|n| n["metadata"]["name"] == "default")
    );
}

#[tokio::test]
async fn ownership_is_kept_field_by_field_once_a_second_manager_applies_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.json");
    let b = sim().persisted(file.clone()).unwrap();
    let d = deploy("web", "default", 1);
    let id = manifest_id(&d).unwrap();
    b.apply(&id, &d, &Strategy::Update).await.unwrap();
    let ssa = |manager: &str, force| Strategy::ServerSideApply {
        force,
        field_manager: manager.into(),
    };
    // "other" applies only the replicas (and the identity): the rest stays the Update
    // manager's.
    let replicas = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 5}});
    b.apply(&id, &replicas, &ssa("other", true)).await.unwrap();
    let b = sim().persisted(file).unwrap();
    let conflict = |err: BackendError| match err {
        BackendError::Conflict { fields, manager } => (fields, manager),
        other => panic!("{other:?}"),
    };
    let err = b
        .apply(
            &id,
            &deploy("web", "default", 7),
            &ssa(UPDATE_MANAGER, false),
        )
        .await
        .unwrap_err();
    assert_eq!(
        conflict(err),
        (vec!["spec.replicas".to_string()], "other".to_string())
    );
    let mut image = deploy("web", "default", 5);
    image["spec"]["template"]["spec"]["containers"] = json!([{"name": "c", "image": "y"}]);
    let err = b
        .apply(&id, &image, &ssa("other", false))
        .await
        .unwrap_err();
    assert_eq!(
        conflict(err),
        (
            vec!["spec.template.spec.containers".to_string()],
            UPDATE_MANAGER.to_string()
        )
    );
    // An Update makes every field its manager's again.
    b.apply(&id, &deploy("web", "default", 2), &Strategy::Update)
        .await
        .unwrap();
    let err = b
        .apply(&id, &deploy("web", "default", 3), &ssa("other", false))
        .await
        .unwrap_err();
    assert_eq!(conflict(err).1, UPDATE_MANAGER);
}

#[test]
fn a_sole_manager_owns_exactly_the_objects_leaves_until_another_takes_some() {
    let object = deploy("web", "default", 1);
    let current = content(&object);
    let mut m = Managers::Sole("a".into());
    assert_eq!(m.owner("spec.replicas", &current), Some("a"));
    assert_eq!(m.owner("spec.paused", &current), None);
    let replicas = "spec.replicas".to_string();
    m.take("a", std::iter::once(&replicas), &current);
    assert_eq!(
        m,
        Managers::Sole("a".into()),
        "the same manager keeps it whole"
    );
    m.take("b", std::iter::once(&replicas), &current);
    assert_eq!(m.owner("spec.replicas", &current), Some("b"));
    assert_eq!(m.owner("metadata.name", &current), Some("a"));
    let Managers::Fields(fields) = &m else {
        panic!("{m:?}")
    };
    assert_eq!(fields.len(), current.len());
}

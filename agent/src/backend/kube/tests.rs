use super::facts::{platform, product, sum_quantities};
use super::objects::declared_matches;
use super::*;

#[test]
fn conflicts_name_their_fields_and_managers() {
    let one = r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas"#;
    assert_eq!(
        parse_conflicts(one),
        (vec![".spec.replicas".into()], vec!["kubectl-edit".into()])
    );
    let many = "Apply failed with 2 conflicts: conflicts with \"helm\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"web\"].image";
    let (fields, managers) = parse_conflicts(many);
    assert_eq!(managers, ["helm"]);
    assert_eq!(fields.len(), 2, "{fields:?}");
}

#[test]
fn quantities_sum_like_kubernetes_prints_them() {
    assert_eq!(sum_quantities(&["4", "4"], false), "8");
    assert_eq!(sum_quantities(&["500m", "1"], false), "1500m");
    assert_eq!(sum_quantities(&["16Gi", "16Gi"], true), "32Gi");
    assert_eq!(sum_quantities(&["512Mi", "1Gi"], true), "1536Mi");
}

#[test]
fn platform_and_product_are_detected() {
    assert_eq!(platform("aws:///eu-west-1a/i-123"), "AWS");
    assert_eq!(platform("gce://p/z/n"), "GCP");
    assert_eq!(platform("kind://docker/x"), "Other");
    assert_eq!(product("v1.30.2+k3s1", &[]), "K3s");
    assert_eq!(product("v1.29.3-eks-adc7111", &[]), "EKS");
    assert_eq!(product("v1.30.2", &[]), "Other");
}

#[test]
fn update_skips_objects_that_already_match() {
    let declared = serde_json::json!({"spec": {"replicas": 2}, "metadata": {"name": "a"}});
    let live = serde_json::json!({"spec": {"replicas": 2, "paused": false}, "metadata": {"name": "a", "uid": "x"}, "status": {}});
    assert!(declared_matches(&declared, &live));
    let changed = serde_json::json!({"spec": {"replicas": 3}, "metadata": {"name": "a"}});
    assert!(!declared_matches(&changed, &live));
}

#[tokio::test]
async fn executor_clients_are_bounded_and_the_least_recently_used_goes_with_its_caches() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // Never contacted: clients are built, not used.
    flotilla_testkit::kube::write_kubeconfig(&kubeconfig, "http://127.0.0.1:9").unwrap();
    let backend = KubeBackend::connect(Some(&kubeconfig)).await.unwrap();
    let executor = |i: usize| Executor {
        namespace: "team-a".into(),
        name: format!("sa-{i}"),
    };
    for i in 0..MAX_EXECUTOR_CLIENTS {
        backend.client_as(Some(&executor(i))).unwrap();
    }
    // sa-0 is used again, so sa-1 is now the least recently used.
    backend.client_as(Some(&executor(0))).unwrap();
    let kind = (String::new(), "v1".to_string(), "ConfigMap".to_string());
    for i in [0, 1] {
        backend.caches.lock().unwrap().insert(
            (executor(i).username(), kind.clone(), "team-a".into()),
            Arc::default(),
        );
    }
    backend
        .client_as(Some(&executor(MAX_EXECUTOR_CLIENTS)))
        .unwrap();
    let clients = backend.impersonating.lock().unwrap();
    assert_eq!(clients.len(), MAX_EXECUTOR_CLIENTS);
    assert!(!clients.contains_key(&executor(1).username()));
    assert!(clients.contains_key(&executor(0).username()));
    let caches = backend.caches.lock().unwrap();
    assert!(
        caches
            .keys()
            .all(|(who, _, _)| *who != executor(1).username())
    );
    assert_eq!(caches.len(), 1, "sa-0's cache stays");
}

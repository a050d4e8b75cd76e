use super::*;
use crate::v1;

#[test]
fn parses_the_hello_work_demo_seed_example() {
    let text = include_str!("../../../examples/hello-work.yaml").replace("CLUSTER", "cluster1");
    let docs = parse_documents(&text);
    let Ok(Document::Work(w)) = &docs[0] else {
        panic!("{docs:?}")
    };
    assert_eq!(w.metadata.as_ref().unwrap().namespace, "cluster1");
    let spec = w.spec.as_ref().unwrap();
    assert_eq!(spec.workload.as_ref().unwrap().manifests.len(), 1);
    assert_eq!(spec.manifest_configs[0].feedback_rules.len(), 2);
    let back = ManifestWork::from(w);
    assert_eq!(back.spec.workload.manifests[0]["metadata"]["name"], "hello");
    assert_eq!(back.to_proto().unwrap().spec, w.spec);
}

#[test]
fn parses_sets_and_bindings_as_ocm_users_write_them() {
    let text = include_str!("../../../examples/prod-clusterset.yaml");
    let docs: Vec<_> = parse_documents(text)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(docs.len(), 2);
    let Document::ClusterSet(set) = &docs[0] else {
        panic!("first document should be a set")
    };
    let sel = set
        .spec
        .as_ref()
        .unwrap()
        .cluster_selector
        .as_ref()
        .unwrap();
    assert_eq!(sel.selector_type, "LabelSelector");
    assert_eq!(
        sel.label_selector.as_ref().unwrap().match_labels["env"],
        "prod"
    );
    let Document::Binding(b) = &docs[1] else {
        panic!("second document should be a binding")
    };
    assert_eq!(b.metadata.as_ref().unwrap().namespace, "default");
}

#[test]
fn bad_fields_name_document_and_path() {
    let text = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata:\n  name: s\nspec:\n  clusterSelector:\n    selectorTyp: X\n";
    let err = parse_documents(text).remove(0).unwrap_err().to_string();
    assert!(err.contains("document 1"), "{err}");
    assert!(err.contains("spec.clusterSelector"), "{err}");
    assert!(err.contains("selectorTyp"), "{err}");
}

#[test]
fn unknown_kinds_and_broken_yaml_are_reported() {
    let errs = parse_documents("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n");
    assert!(matches!(errs[0], Err(DocError::Unsupported { .. })));
    let errs = parse_documents("a: [b\n");
    assert!(matches!(errs[0], Err(DocError::Yaml { .. })));
}

#[test]
fn broken_yaml_is_reported_with_line_and_column() {
    let errs = parse_documents("kind: ManifestWork\nmetadata:\n  name: [a\n");
    let Err(DocError::Yaml {
        doc,
        message,
        line,
        column,
    }) = &errs[0]
    else {
        panic!("{errs:?}");
    };
    assert_eq!((*doc, *line), (1, Some(4)), "{message}");
    assert!(column.is_some());
    assert!(
        errs[0]
            .as_ref()
            .unwrap_err()
            .to_string()
            .starts_with("document 1: invalid YAML at line 4, column "),
        "{}",
        errs[0].as_ref().unwrap_err()
    );
}

/// Hostile nesting (`[[[[…` 20,000 deep, or as deep in block style) is refused with an error
/// naming the limit, not a stack overflow.
#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    for text in [
        "[".repeat(20_000),
        "{a: ".repeat(5_000),
        (0..1_000)
            .map(|i| format!("{}- \n", "  ".repeat(i)))
            .collect::<String>(),
    ] {
        let errs = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                parse_documents(&text)
                    .into_iter()
                    .map(|r| r.map(|_| ()).map_err(|e| e.to_string()))
                    .collect::<Vec<_>>()
            })
            .expect("spawn")
            .join()
            .expect("parsing overflowed a 2 MiB stack");
        let err = errs[0].as_ref().expect_err("hostile document accepted");
        assert!(err.contains("nest"), "{err}");
    }
}

#[test]
fn parses_a_manifest_work_replica_set_as_ocm_users_write_it() {
    let docs = parse_documents(include_str!("../../../examples/replicaset.yaml"));
    let Ok(Document::ReplicaSet(r)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let spec = r.spec.as_ref().unwrap();
    assert_eq!(spec.placement_refs[0].name, "edge");
    let strategy = spec.placement_refs[0].rollout_strategy.as_ref().unwrap();
    assert_eq!(strategy.r#type, "Progressive");
    let p = strategy.progressive.as_ref().unwrap();
    assert_eq!(p.max_concurrency, "25%");
    assert_eq!(p.max_failures, "2");
    assert_eq!(p.mandatory_decision_groups[0].group_name, "canary");
    let template = spec.manifest_work_template.as_ref().unwrap();
    assert_eq!(template.workload.as_ref().unwrap().manifests.len(), 1);
    // And back to the OCM shape.
    let back = ManifestWorkReplicaSet::from(r);
    assert_eq!(back.to_proto().unwrap().spec, r.spec);
    // A wrong field is named.
    let bad =
        include_str!("../../../examples/replicaset.yaml").replace("maxFailures", "maxFailure");
    let err = parse_documents(&bad).remove(0).unwrap_err().to_string();
    assert!(err.contains("maxFailure"), "{err}");
}

#[test]
fn parses_ocms_executor_example_and_round_trips_it() {
    let text = include_str!("../../../examples/executor-work.yaml").replace("CLUSTER", "cluster1");
    let docs = parse_documents(&text);
    let Ok(Document::Work(w)) = &docs[0] else {
        panic!("{docs:?}")
    };
    assert!(
        crate::work::validate(w).is_empty(),
        "{:?}",
        crate::work::validate(w)
    );
    let executor = crate::work::Executor::of_work(w).expect("the executor is carried");
    assert_eq!(
        executor.username(),
        "system:serviceaccount:default:executor1"
    );
    // Back to the OCM shape (what `flotilla get work -o yaml` prints) and to protobuf again.
    let back = ManifestWork::from(w);
    let yaml = serde_yaml::to_string(&back).unwrap();
    assert!(
        yaml.contains("executor:\n    subject:\n      type: ServiceAccount\n      serviceAccount:\n        namespace: default\n        name: executor1"),
        "{yaml}"
    );
    assert_eq!(back.to_proto().unwrap().spec, w.spec);
    // A work without an executor prints none.
    let plain = include_str!("../../../examples/hello-work.yaml").replace("CLUSTER", "cluster1");
    let Ok(Document::Work(p)) = parse_documents(&plain).remove(0) else {
        panic!("hello-work parses")
    };
    assert!(
        !serde_yaml::to_string(&ManifestWork::from(&p))
            .unwrap()
            .contains("executor")
    );
}

#[test]
fn executors_are_validated_like_ocms_schema_with_the_field_named() {
    let work = |executor: &str| {
        format!(
            "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata:\n  namespace: cluster1\n  name: w\nspec:\n  executor:\n{executor}  workload:\n    manifests:\n      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c, namespace: default}}}}\n"
        )
    };
    for (executor, field) in [
        (
            "    subject:\n      type: User\n      serviceAccount: {namespace: default, name: a}\n",
            "spec.executor.subject.type",
        ),
        (
            "    subject:\n      type: ServiceAccount\n",
            "spec.executor.subject.serviceAccount",
        ),
        (
            "    subject:\n      type: ServiceAccount\n      serviceAccount: {name: a}\n",
            "spec.executor.subject.serviceAccount.namespace",
        ),
        (
            "    subject:\n      type: ServiceAccount\n      serviceAccount: {namespace: default, name: Bad_Name}\n",
            "spec.executor.subject.serviceAccount.name",
        ),
    ] {
        let Ok(Document::Work(w)) = parse_documents(&work(executor)).remove(0) else {
            panic!("{executor} parses")
        };
        let errors = crate::work::validate(&w);
        assert_eq!(errors.len(), 1, "{executor}: {errors:?}");
        assert!(errors[0].starts_with(field), "{executor}: {errors:?}");
    }
    // Unknown fields are refused at parse time, naming the path.
    let err = parse_documents(&work("    subject:\n      kind: ServiceAccount\n"))
        .remove(0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.executor.subject"), "{err}");
}

#[test]
fn managed_namespaces_of_a_set_survive_yaml_round_trip() {
    let text = include_str!("../../../examples/managed-namespaces.yaml");
    let Ok(Document::ClusterSet(set)) = parse_documents(text).remove(0) else {
        panic!("the example should parse as a set")
    };
    let names: Vec<&str> = set
        .spec
        .as_ref()
        .unwrap()
        .managed_namespaces
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["app-frontend", "app-backend"]);
    let shown = ManagedClusterSet::from(&set);
    let yaml = serde_yaml::to_string(&shown).unwrap();
    assert!(
        yaml.contains("managedNamespaces:\n  - name: app-frontend\n  - name: app-backend"),
        "{yaml}"
    );
    assert_eq!(shown.to_proto().unwrap().spec, set.spec);
}

#[test]
fn unknown_fields_of_a_managed_namespace_are_rejected() {
    let text = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata:\n  name: s\nspec:\n  managedNamespaces:\n  - nam: x\n";
    let err = parse_documents(text).remove(0).unwrap_err().to_string();
    assert!(err.contains("spec.managedNamespaces"), "{err}");
    assert!(err.contains("nam"), "{err}");
}

#[test]
fn cluster_status_shows_managed_namespaces_in_the_ocm_shape() {
    let c = v1::ManagedCluster {
        metadata: Some(v1::ObjectMeta {
            name: "c1".into(),
            ..Default::default()
        }),
        status: Some(v1::ManagedClusterStatus {
            managed_namespaces: vec![v1::ClusterSetManagedNamespaceConfig {
                name: "app-frontend".into(),
                cluster_set: "app-team".into(),
                conditions: vec![v1::Condition {
                    r#type: "NamespaceAvailable".into(),
                    status: "True".into(),
                    reason: "NamespaceApplied".into(),
                    message: "Namespace successfully applied and managed".into(),
                    ..Default::default()
                }],
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let json = serde_json::to_value(ManagedCluster::from(&c)).unwrap();
    let entry = &json["status"]["managedNamespaces"][0];
    assert_eq!(entry["name"], "app-frontend");
    assert_eq!(entry["clusterSet"], "app-team");
    assert_eq!(entry["conditions"][0]["type"], "NamespaceAvailable");
    assert_eq!(entry["conditions"][0]["reason"], "NamespaceApplied");
}

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn paths(entries: &[(&str, &str)]) -> FeedbackRule {
    FeedbackRule::JsonPaths(
        entries
            .iter()
            .map(|&(name, path)| JsonPathRule {
                name: name.into(),
                path: path.into(),
                version: String::new(),
            })
            .collect(),
    )
}

fn value_of(object: &Value, path: &str) -> FeedbackResult {
    evaluate(&[paths(&[("v", path)])], "", "ConfigMap", object)
}

fn single(object: &Value, path: &str) -> Option<FieldValue> {
    let result = value_of(object, path);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    result.values.into_iter().next().map(|(_, v)| v)
}

/// Evaluation with the `RawFeedbackJsonString` gate on.
fn raw_value_of(object: &Value, path: &str) -> FeedbackResult {
    CompiledRules::new(&[paths(&[("v", path)])])
        .with_raw_json(RawJson::Enabled)
        .evaluate("", "ConfigMap", object)
}

fn raw_single(object: &Value, path: &str) -> Option<FieldValue> {
    let result = raw_value_of(object, path);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    result.values.into_iter().next().map(|(_, v)| v)
}

/// The one error of evaluating `path` with the gate off (and that no value was reported).
fn not_scalar_error(object: &Value, path: &str) -> String {
    let result = value_of(object, path);
    assert!(result.values.is_empty(), "{:?}", result.values);
    assert_eq!(result.errors.len(), 1, "{:?}", result.errors);
    result.errors[0].clone()
}

fn ints(values: &[(&str, i64)]) -> Vec<(String, FieldValue)> {
    values
        .iter()
        .map(|&(n, v)| (n.to_owned(), FieldValue::Integer(v)))
        .collect()
}

// --- WellKnownStatus --------------------------------------------------------------------

#[test]
fn well_known_table_matches_ocm() {
    assert_eq!(
        well_known_paths("apps", "Deployment"),
        [
            ("ReadyReplicas", ".status.readyReplicas"),
            ("Replicas", ".status.replicas"),
            ("AvailableReplicas", ".status.availableReplicas"),
        ]
    );
    assert_eq!(
        well_known_paths("apps", "DaemonSet"),
        [
            ("NumberReady", ".status.numberReady"),
            ("DesiredNumberScheduled", ".status.desiredNumberScheduled"),
            ("NumberAvailable", ".status.numberAvailable"),
        ]
    );
    assert_eq!(
        well_known_paths("batch", "Job"),
        [
            (
                "JobComplete",
                r#".status.conditions[?(@.type=="Complete")].status"#
            ),
            ("JobSucceeded", ".status.succeeded"),
        ]
    );
    assert_eq!(
        well_known_paths("", "Pod"),
        [
            (
                "PodReady",
                r#".status.conditions[?(@.type=="Ready")].status"#
            ),
            ("PodPhase", ".status.phase"),
        ]
    );
}

#[test]
fn well_known_paths_parse_to_their_canonical_form() {
    for (group, kind) in [
        ("apps", "Deployment"),
        ("apps", "DaemonSet"),
        ("batch", "Job"),
        ("", "Pod"),
    ] {
        for &(name, path) in well_known_paths(group, kind) {
            let parsed = parse(path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(parsed.to_string(), path, "{name}");
        }
    }
}

#[test]
fn well_known_paths_need_exact_group_and_kind() {
    assert!(well_known_paths("apps", "StatefulSet").is_empty());
    assert!(well_known_paths("extensions", "Deployment").is_empty());
    assert!(well_known_paths("core", "Pod").is_empty());
    assert!(well_known_paths("apps", "deployment").is_empty());
    assert!(well_known_paths("", "Job").is_empty());
}

#[test]
fn deployment_well_known_status() {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "generation": 3},
        "spec": {"replicas": 3},
        "status": {
            "observedGeneration": 3, "replicas": 3, "updatedReplicas": 3,
            "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
                {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
            ],
        },
    });
    let result = evaluate(
        &[FeedbackRule::WellKnownStatus],
        "apps",
        "Deployment",
        &deployment,
    );
    assert_eq!(result.errors, Vec::<String>::new());
    assert_eq!(
        result.values,
        ints(&[
            ("AvailableReplicas", 2),
            ("ReadyReplicas", 2),
            ("Replicas", 3)
        ])
    );
}

#[test]
fn new_deployment_without_ready_replicas_reports_only_present_values() {
    // A fresh Deployment omits zero counters from status.
    let deployment = json!({"status": {"replicas": 1, "unavailableReplicas": 1}});
    let result = evaluate(
        &[FeedbackRule::WellKnownStatus],
        "apps",
        "Deployment",
        &deployment,
    );
    assert!(result.is_synced());
    assert_eq!(result.values, ints(&[("Replicas", 1)]));
}

#[test]
fn daemonset_well_known_status() {
    let daemonset = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "status": {
            "currentNumberScheduled": 4, "desiredNumberScheduled": 4,
            "numberAvailable": 3, "numberMisscheduled": 0, "numberReady": 3,
            "numberUnavailable": 1, "observedGeneration": 2, "updatedNumberScheduled": 4,
        },
    });
    let result = evaluate(
        &[FeedbackRule::WellKnownStatus],
        "apps",
        "DaemonSet",
        &daemonset,
    );
    assert!(result.is_synced());
    assert_eq!(
        result.values,
        ints(&[
            ("DesiredNumberScheduled", 4),
            ("NumberAvailable", 3),
            ("NumberReady", 3),
        ])
    );
}

#[test]
fn completed_job_well_known_status() {
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "status": {
            "active": 0, "ready": 0, "succeeded": 1, "terminating": 0,
            "startTime": "2025-01-01T00:00:00Z", "completionTime": "2025-01-01T00:00:09Z",
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True", "lastProbeTime": "2025-01-01T00:00:09Z"},
            ],
        },
    });
    let result = evaluate(&[FeedbackRule::WellKnownStatus], "batch", "Job", &job);
    assert!(result.is_synced());
    assert_eq!(
        result.values,
        [
            ("JobComplete".to_owned(), FieldValue::String("True".into())),
            ("JobSucceeded".to_owned(), FieldValue::Integer(1)),
        ]
    );
}

#[test]
fn running_job_has_no_job_complete_value() {
    let job = json!({"status": {"active": 1, "ready": 1, "startTime": "2025-01-01T00:00:00Z"}});
    let result = evaluate(&[FeedbackRule::WellKnownStatus], "batch", "Job", &job);
    assert!(result.is_synced());
    assert!(result.values.is_empty());
}

#[test]
fn pod_well_known_status() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.7",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                {"type": "ContainersReady", "status": "False"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [{"name": "app", "ready": false, "restartCount": 2}],
        },
    });
    let result = evaluate(&[FeedbackRule::WellKnownStatus], "", "Pod", &pod);
    assert!(result.is_synced());
    assert_eq!(
        result.values,
        [
            ("PodPhase".to_owned(), FieldValue::String("Running".into())),
            ("PodReady".to_owned(), FieldValue::String("False".into())),
        ]
    );
}

#[test]
fn well_known_status_on_unknown_kind_is_an_error() {
    let result = evaluate(
        &[FeedbackRule::WellKnownStatus],
        "apps",
        "StatefulSet",
        &json!({"status": {"readyReplicas": 1}}),
    );
    assert!(result.values.is_empty());
    assert_eq!(
        result.errors,
        [
            "feedback rule 0: WellKnownStatus has no values for kind StatefulSet in group \
             \"apps\"; use JSONPaths for this resource"
        ]
    );
}

// --- typing -----------------------------------------------------------------------------

#[test]
fn integer_is_integer() {
    let obj = json!({"n": 7, "neg": -3, "max": i64::MAX});
    assert_eq!(single(&obj, ".n"), Some(FieldValue::Integer(7)));
    assert_eq!(single(&obj, ".neg"), Some(FieldValue::Integer(-3)));
    assert_eq!(single(&obj, ".max"), Some(FieldValue::Integer(i64::MAX)));
}

#[test]
fn integer_beyond_i64_is_not_reported_without_the_gate_and_json_raw_with_it() {
    let obj = json!({"n": u64::MAX});
    assert!(not_scalar_error(&obj, ".n").contains("a number that is not a 64-bit integer"));
    assert_eq!(
        raw_single(&obj, ".n"),
        Some(FieldValue::JsonRaw(u64::MAX.to_string()))
    );
}

#[test]
fn string_and_boolean_keep_their_type() {
    let obj = json!({"s": "Running", "empty": "", "b": true});
    for single in [single, raw_single] {
        assert_eq!(
            single(&obj, ".s"),
            Some(FieldValue::String("Running".into()))
        );
        assert_eq!(
            single(&obj, ".empty"),
            Some(FieldValue::String(String::new()))
        );
        assert_eq!(single(&obj, ".b"), Some(FieldValue::Boolean(true)));
    }
}

#[test]
fn float_is_not_reported_without_the_gate_and_json_raw_with_it() {
    let obj = json!({"f": 0.75});
    assert!(not_scalar_error(&obj, ".f").contains("not a 64-bit integer"));
    assert_eq!(
        raw_single(&obj, ".f"),
        Some(FieldValue::JsonRaw("0.75".into()))
    );
}

#[test]
fn object_or_list_without_the_gate_is_no_value_and_an_error_naming_the_gate() {
    let obj = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
    assert_eq!(
        not_scalar_error(&obj, ".status.loadBalancer"),
        "value of rule v is an object; only integers, strings and booleans are reported: \
         select a scalar field, or start flotilla-agent with \
         --feature-gates RawFeedbackJsonString=true to report it as JSON"
    );
    assert!(not_scalar_error(&obj, ".status.loadBalancer.ingress").contains("is a list;"));
    // A scalar inside is fine.
    assert_eq!(
        single(&obj, ".status.loadBalancer.ingress[0].ip"),
        Some(FieldValue::String("192.0.2.1".into()))
    );
}

#[test]
fn object_and_array_are_compact_json_raw_with_the_gate() {
    let obj = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
    assert_eq!(
        raw_single(&obj, ".status.loadBalancer"),
        Some(FieldValue::JsonRaw(
            r#"{"ingress":[{"ip":"192.0.2.1"}]}"#.into()
        ))
    );
    assert_eq!(
        raw_single(&obj, ".status.loadBalancer.ingress"),
        Some(FieldValue::JsonRaw(r#"[{"ip":"192.0.2.1"}]"#.into()))
    );
}

#[test]
fn several_matches_keep_the_first_without_the_gate() {
    let obj = json!({"spec": {"containers": [
        {"name": "app", "image": "nginx:1.27"},
        {"name": "proxy", "image": "envoy:1.30"},
    ]}});
    assert_eq!(
        single(&obj, ".spec.containers[*].image"),
        Some(FieldValue::String("nginx:1.27".into()))
    );
    assert_eq!(
        single(&obj, ".spec.containers[-1:].image"),
        Some(FieldValue::String("envoy:1.30".into()))
    );
    // Only the first match is looked at: a null first reports nothing, an object first fails
    // even when a scalar follows.
    let mixed = json!({"a": [null, 1], "b": [{"x": 1}, 2]});
    let result = value_of(&mixed, ".a[*]");
    assert!(result.is_synced() && result.values.is_empty(), "{result:?}");
    assert!(not_scalar_error(&mixed, ".b[*]").contains("is an object;"));
}

#[test]
fn several_matches_are_a_json_raw_array_with_the_gate() {
    let obj = json!({"spec": {"containers": [
        {"name": "app", "image": "nginx:1.27"},
        {"name": "proxy", "image": "envoy:1.30"},
    ]}});
    assert_eq!(
        raw_single(&obj, ".spec.containers[*].image"),
        Some(FieldValue::JsonRaw(r#"["nginx:1.27","envoy:1.30"]"#.into()))
    );
    assert_eq!(
        raw_single(&obj, ".spec.containers[0:1].image"),
        Some(FieldValue::String("nginx:1.27".into()))
    );
}

#[test]
fn missing_field_yields_no_value() {
    let result = value_of(&json!({"status": {}}), ".status.readyReplicas");
    assert!(result.is_synced());
    assert!(result.values.is_empty());
}

#[test]
fn null_yields_no_value() {
    let result = value_of(&json!({"status": {"x": null}}), ".status.x");
    assert!(result.is_synced());
    assert!(result.values.is_empty());
}

#[test]
fn json_raw_at_limit_is_reported() {
    // ["xxx…"] with the quotes and brackets taking 4 characters.
    let s = "x".repeat(JSON_RAW_MAX_LEN - 4);
    let obj = json!({"a": [s]});
    match raw_single(&obj, ".a") {
        Some(FieldValue::JsonRaw(raw)) => assert_eq!(raw.len(), JSON_RAW_MAX_LEN),
        other => panic!("expected JsonRaw, got {other:?}"),
    }
}

#[test]
fn json_raw_over_limit_is_an_error() {
    let obj = json!({"a": ["x".repeat(JSON_RAW_MAX_LEN - 3)]});
    let result = raw_value_of(&obj, ".a");
    assert!(result.values.is_empty());
    assert_eq!(
        result.errors,
        ["value of rule v is 1025 characters, over the 1024 limit"]
    );
}

#[test]
fn json_raw_limit_counts_characters_not_bytes() {
    // 1020 two-byte characters: 2044 bytes but 1024 characters.
    let obj = json!({"a": ["é".repeat(JSON_RAW_MAX_LEN - 4)]});
    assert!(matches!(
        raw_single(&obj, ".a"),
        Some(FieldValue::JsonRaw(_))
    ));
}

#[test]
fn long_string_is_not_limited() {
    let obj = json!({"s": "x".repeat(4 * JSON_RAW_MAX_LEN)});
    assert!(matches!(single(&obj, ".s"), Some(FieldValue::String(s)) if s.len() == 4096));
}

#[test]
fn type_names_match_ocm() {
    assert_eq!(FieldValue::Integer(1).type_name(), "Integer");
    assert_eq!(FieldValue::String(String::new()).type_name(), "String");
    assert_eq!(FieldValue::Boolean(true).type_name(), "Boolean");
    assert_eq!(FieldValue::JsonRaw("{}".into()).type_name(), "JsonRaw");
}

// --- evaluation ---------------------------------------------------------------------------

#[test]
fn values_are_sorted_by_name_across_rules() {
    let deployment = json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True"}]}});
    let rules = [
        paths(&[
            ("zeta", ".status.replicas"),
            (
                "available",
                r#".status.conditions[?(@.type=="Available")].status"#,
            ),
        ]),
        FeedbackRule::WellKnownStatus,
    ];
    let result = evaluate(&rules, "apps", "Deployment", &deployment);
    assert!(result.is_synced());
    let names: Vec<&str> = result.values.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "AvailableReplicas",
            "ReadyReplicas",
            "Replicas",
            "available",
            "zeta"
        ]
    );
    assert_eq!(result, evaluate(&rules, "apps", "Deployment", &deployment));
}

#[test]
fn invalid_path_is_reported_and_other_rules_still_evaluate() {
    let obj = json!({"status": {"phase": "Running"}});
    let rules = [paths(&[
        ("broken", ".status.conditions[?(@.type==\"Ready\""),
        ("phase", ".status.phase"),
    ])];
    let result = evaluate(&rules, "", "Pod", &obj);
    assert_eq!(
        result.values,
        [("phase".to_owned(), FieldValue::String("Running".into()))]
    );
    assert_eq!(
        result.errors,
        [
            "feedback rule 0, JSONPaths entry 0 \"broken\": invalid JSONPath: path \
             \".status.conditions[?(@.type==\\\"Ready\\\"\": unclosed filter at position 19"
        ]
    );
}

#[test]
fn empty_name_is_reported_at_evaluation() {
    let result = evaluate(&[paths(&[(" ", ".a")])], "", "Pod", &json!({"a": 1}));
    assert!(result.values.is_empty());
    assert_eq!(
        result.errors,
        ["feedback rule 0, JSONPaths entry 0: name is empty; give every path a name"]
    );
}

#[test]
fn duplicate_value_name_keeps_first_rule_and_reports() {
    let deployment = json!({"status": {"replicas": 2, "readyReplicas": 1}});
    let rules = [
        FeedbackRule::WellKnownStatus,
        paths(&[("Replicas", ".status.readyReplicas")]),
    ];
    let result = evaluate(&rules, "apps", "Deployment", &deployment);
    assert_eq!(
        result.values,
        ints(&[("ReadyReplicas", 1), ("Replicas", 2)])
    );
    assert_eq!(
        result.errors,
        [
            "value \"Replicas\" of feedback rule 1 is also produced by rule 0; reporting rule \
             0's value"
        ]
    );
}

#[test]
fn compiled_rules_evaluate_like_evaluate() {
    let rules = [
        FeedbackRule::WellKnownStatus,
        paths(&[("image", ".spec.containers[0].image"), ("bad", ".a[")]),
    ];
    let compiled = CompiledRules::new(&rules);
    let pod = json!({"spec": {"containers": [{"image": "nginx"}]}, "status": {"phase": "Pending"}});
    let result = compiled.evaluate("", "Pod", &pod);
    assert_eq!(result, evaluate(&rules, "", "Pod", &pod));
    assert_eq!(result.values.len(), 2);
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn path_version_must_match_object_version() {
    let rule = |version: &str| {
        FeedbackRule::JsonPaths(vec![JsonPathRule {
            name: "ready".into(),
            path: ".status.readyReplicas".into(),
            version: version.into(),
        }])
    };
    let deployment = json!({"apiVersion": "apps/v1", "status": {"readyReplicas": 1}});
    for version in ["", "v1"] {
        let result = evaluate(&[rule(version)], "apps", "Deployment", &deployment);
        assert!(result.is_synced(), "{version}: {:?}", result.errors);
        assert_eq!(result.values, ints(&[("ready", 1)]));
    }
    let result = evaluate(&[rule("v1beta1")], "apps", "Deployment", &deployment);
    assert!(result.values.is_empty());
    assert_eq!(
        result.errors,
        [
            "feedback rule 0, JSONPaths entry 0 \"ready\": the path is for version \"v1beta1\" \
             but the object is \"v1\"; fix or clear the version"
        ]
    );
    let pod = json!({"apiVersion": "v1", "status": {"readyReplicas": 1}});
    assert!(evaluate(&[rule("v1")], "", "Pod", &pod).is_synced());
}

#[test]
fn no_rules_report_nothing() {
    let result = evaluate(
        &[],
        "apps",
        "Deployment",
        &json!({"status": {"replicas": 1}}),
    );
    assert_eq!(result, FeedbackResult::default());
    assert!(result.is_synced());
}

// --- rule types and validation ------------------------------------------------------------

#[test]
fn rule_type_from_str_accepts_exact_names() {
    assert_eq!(
        rule_type_from_str("WellKnownStatus"),
        Ok(FeedbackRuleType::WellKnownStatus)
    );
    assert_eq!(
        rule_type_from_str("JSONPaths"),
        Ok(FeedbackRuleType::JsonPaths)
    );
    assert_eq!(
        FeedbackRule::JsonPaths(vec![]).rule_type().to_string(),
        "JSONPaths"
    );
}

#[test]
fn rule_type_from_str_rejects_others_listing_valid_types() {
    for bad in [
        "jsonpaths",
        "JsonPaths",
        "wellknownstatus",
        "",
        " JSONPaths",
    ] {
        assert_eq!(
            rule_type_from_str(bad),
            Err(format!(
                "unknown feedback rule type \"{bad}\"; valid types are WellKnownStatus, JSONPaths"
            ))
        );
    }
}

// --- properties ---------------------------------------------------------------------------

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter_map("finite", serde_json::Number::from_f64)
            .prop_map(Value::Number),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("\\PC{0,4}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn typing_without_the_gate_reports_only_scalars(v in arb_json()) {
        let obj = json!({"status": {"x": v.clone()}});
        let result = value_of(&obj, ".status.x");
        match (&v, result.values.first().map(|(_, fv)| fv)) {
            (Value::Null, None) => prop_assert!(result.is_synced()),
            (Value::Bool(b), Some(FieldValue::Boolean(got))) => prop_assert_eq!(b, got),
            (Value::String(s), Some(FieldValue::String(got))) => prop_assert_eq!(s, got),
            (Value::Number(n), Some(FieldValue::Integer(got))) => {
                prop_assert_eq!(n.as_i64(), Some(*got));
            }
            (_, None) => {
                prop_assert!(v.is_object() || v.is_array() || v.as_f64().is_some());
                prop_assert!(v.as_i64().is_none());
                prop_assert_eq!(result.errors.len(), 1);
                prop_assert!(result.errors[0].contains("RawFeedbackJsonString=true"));
            }
            (v, Some(other)) => {
                return Err(TestCaseError::fail(format!("{v} typed as {other:?}")));
            }
        }
    }

    #[test]
    fn typing_with_the_gate_follows_ocm_rules(v in arb_json()) {
        let obj = json!({"status": {"x": v.clone()}});
        let result = raw_value_of(&obj, ".status.x");
        match (&v, result.values.first().map(|(_, fv)| fv)) {
            (Value::Null, None) => prop_assert!(result.is_synced()),
            (Value::Bool(b), Some(FieldValue::Boolean(got))) => prop_assert_eq!(b, got),
            (Value::String(s), Some(FieldValue::String(got))) => prop_assert_eq!(s, got),
            (Value::Number(n), Some(FieldValue::Integer(got))) => {
                prop_assert_eq!(n.as_i64(), Some(*got));
            }
            (_, Some(FieldValue::JsonRaw(raw))) => {
                prop_assert!(!matches!(v, Value::Bool(_) | Value::String(_) | Value::Null));
                prop_assert!(v.as_i64().is_none());
                prop_assert!(raw.chars().count() <= JSON_RAW_MAX_LEN);
                // Compact JSON of the value itself (serde_json's float parsing is not
                // exact without `float_roundtrip`, so compare the text, then check it is JSON).
                prop_assert_eq!(Some(raw.clone()), serde_json::to_string(&v).ok());
                prop_assert!(serde_json::from_str::<Value>(raw).is_ok());
            }
            (_, None) => {
                prop_assert_eq!(result.errors.len(), 1);
                prop_assert!(result.errors[0].contains("over the 1024 limit"));
            }
            (v, Some(other)) => {
                return Err(TestCaseError::fail(format!("{v} typed as {other:?}")));
            }
        }
    }

    #[test]
    fn evaluation_is_sorted_unique_and_never_panics(
        obj in arb_json(),
        rule_paths in proptest::collection::vec("[.\\[\\]?()@*'\"=!<>:0-9a-c-]{0,16}", 0..6),
    ) {
        let entries: Vec<(String, String)> = rule_paths
            .into_iter()
            .enumerate()
            .map(|(i, p)| (format!("r{}", i % 4), p))
            .collect();
        let borrowed: Vec<(&str, &str)> =
            entries.iter().map(|(n, p)| (n.as_str(), p.as_str())).collect();
        let rules = [FeedbackRule::WellKnownStatus, paths(&borrowed)];
        let result = evaluate(&rules, "apps", "Deployment", &obj);
        prop_assert!(result.values.windows(2).all(|w| w[0].0 < w[1].0));
        prop_assert_eq!(result.clone(), evaluate(&rules, "apps", "Deployment", &obj));
    }
}

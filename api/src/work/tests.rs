use super::*;
use crate::v1::{
    FeedbackRule, Manifest, ManifestConfigOption, ManifestWorkSpec, ManifestsTemplate, ObjectMeta,
};
use serde_json::json;

fn work(manifests: Vec<Value>) -> ManifestWork {
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: "w".into(),
            namespace: "cluster1".into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkSpec {
            workload: Some(ManifestsTemplate {
                manifests: manifests
                    .into_iter()
                    .map(|v| Manifest {
                        raw: serde_json::to_vec(&v).unwrap(),
                    })
                    .collect(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn deploy(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"}})
}

#[test]
fn kinds_map_to_api_server_resource_names() {
    assert_eq!(kind_to_resource("Deployment"), "deployments");
    assert_eq!(kind_to_resource("Ingress"), "ingresses");
    assert_eq!(kind_to_resource("NetworkPolicy"), "networkpolicies");
    assert_eq!(kind_to_resource("Endpoints"), "endpoints");
    assert_eq!(kind_to_resource("Gateway"), "gateways");
}

#[test]
fn identity_defaults_namespace_and_knows_cluster_scoped_kinds() {
    let id =
        manifest_id(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))
            .unwrap();
    assert_eq!((id.group.as_str(), id.namespace.as_str()), ("", "default"));
    let id = manifest_id(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "namespace": "x"}})).unwrap();
    assert_eq!(id.namespace, "");
    assert_eq!(
        manifest_id(&json!({"kind": "X", "metadata": {"name": "n"}})).unwrap_err(),
        "apiVersion: required"
    );
    assert_eq!(
        manifest_id(&json!({"apiVersion": "v1", "metadata": {"name": "n"}})).unwrap_err(),
        "kind: required"
    );
    assert_eq!(
        manifest_id(&json!({"apiVersion": "v1", "kind": "X"})).unwrap_err(),
        "metadata.name: required"
    );
}

#[test]
fn validation_names_manifest_index_and_field() {
    let errs = validate(&work(vec![
        deploy("a"),
        json!({"apiVersion": "v1", "kind": "ConfigMap"}),
        deploy("a"),
    ]));
    assert!(
        errs.iter()
            .any(|e| e == "spec.workload.manifests[1].metadata.name: required"),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.starts_with("spec.workload.manifests[2]: duplicate resource apps/v1 Deployment default/a (also manifests[0])")), "{errs:?}");
    assert!(validate(&work(vec![deploy("a")])).is_empty());
    assert!(!validate(&work(vec![])).is_empty());
}

#[test]
fn oversized_works_and_unknown_rules_are_rejected() {
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": "y".repeat(MAX_MANIFESTS_BYTES)}});
    let errs = validate(&work(vec![big]));
    assert!(
        errs.iter()
            .any(|e| e.contains("over the 512000-byte limit")),
        "{errs:?}"
    );
    let mut w = work(vec![deploy("a")]);
    w.spec
        .as_mut()
        .unwrap()
        .manifest_configs
        .push(ManifestConfigOption {
            resource_identifier: Some(ResourceIdentifier {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "default".into(),
                name: "a".into(),
            }),
            feedback_rules: vec![FeedbackRule {
                r#type: "Magic".into(),
                json_paths: vec![],
            }],
            update_strategy: None,
            condition_rules: vec![],
            feedback_scrape_type: String::new(),
        });
    let errs = validate(&w);
    assert_eq!(
        errs,
        vec![
            "spec.manifestConfigs[0].feedbackRules[0].type: unknown feedback rule type \"Magic\"; valid types are WellKnownStatus, JSONPaths"
        ]
    );
}

#[test]
fn resource_identifiers_select_manifests() {
    let id = manifest_id(&deploy("hello")).unwrap();
    let r = ResourceIdentifier {
        group: "apps".into(),
        resource: "deployments".into(),
        namespace: "default".into(),
        name: "hello".into(),
    };
    assert!(id.matches(&r));
    assert!(!id.matches(&ResourceIdentifier {
        name: "other".into(),
        ..r
    }));
}

fn with_rules(rules: Vec<FeedbackRule>) -> ManifestWork {
    let mut w = work(vec![deploy("web")]);
    let spec = w.spec.as_mut().expect("fixture has a spec");
    spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: Some(ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "default".into(),
            name: "web".into(),
        }),
        feedback_rules: rules,
        ..Default::default()
    }];
    w
}

fn json_paths(entries: &[(&str, &str)]) -> FeedbackRule {
    FeedbackRule {
        r#type: "JSONPaths".into(),
        json_paths: entries
            .iter()
            .map(|&(name, path)| crate::v1::JsonPath {
                name: name.into(),
                path: path.into(),
                ..Default::default()
            })
            .collect(),
    }
}

fn well_known() -> FeedbackRule {
    FeedbackRule {
        r#type: "WellKnownStatus".into(),
        json_paths: vec![],
    }
}

#[test]
fn a_broken_jsonpath_is_refused_naming_manifest_rule_and_position() {
    let errors = validate(&with_rules(vec![json_paths(&[(
        "available",
        r#".status.conditions[?(@.type=="Available"'"#,
    )])]));
    assert_eq!(
        errors,
        [
            "spec.manifestConfigs[0].feedbackRules[0].jsonPaths[0].path: rule \"available\" of \
             manifest deployments.apps default/web: invalid JSONPath: path \
             \".status.conditions[?(@.type==\\\"Available\\\"'\": unexpected '\\'', expected ')' at \
             position 41"
        ]
    );
}

#[test]
fn valid_feedback_rules_pass() {
    let errors = validate(&with_rules(vec![
        well_known(),
        json_paths(&[
            ("ready", r#".status.conditions[?(@.type=="Ready")].status"#),
            ("image", "{.spec.template.spec.containers[0].image}"),
        ]),
        json_paths(&[("labels", ".metadata.labels['app.kubernetes.io/name']")]),
    ]));
    assert_eq!(errors, Vec::<String>::new());
}

#[test]
fn feedback_names_are_unique_across_a_manifests_rules() {
    let errors = validate(&with_rules(vec![
        json_paths(&[("ready", ".a")]),
        well_known(),
        json_paths(&[("ready", ".b"), ("", ".c")]),
    ]));
    assert_eq!(
        errors,
        [
            "spec.manifestConfigs[0].feedbackRules[2].jsonPaths[0].name: \"ready\" is already \
             used by spec.manifestConfigs[0].feedbackRules[0].jsonPaths[0]; names must be unique \
             within a manifest",
            "spec.manifestConfigs[0].feedbackRules[2].jsonPaths[1].name: required",
        ]
    );
}

#[test]
fn well_known_status_is_requested_at_most_once() {
    let errors = validate(&with_rules(vec![well_known(), well_known()]));
    assert_eq!(
        errors,
        [
            "spec.manifestConfigs[0].feedbackRules[1].type: WellKnownStatus is already requested by \
          feedbackRules[0]"
        ]
    );
}

#[test]
fn every_bad_path_is_reported_not_just_the_first() {
    let errors = validate(&with_rules(vec![json_paths(&[
        ("a", ".a["),
        ("b", ".b"),
        ("c", ".."),
    ])]));
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors[0].contains("jsonPaths[0].path") && errors[0].contains("position 3"));
    assert!(errors[1].contains("jsonPaths[2].path"));
}

#[test]
fn a_manifests_identity_read_from_bytes_is_the_one_its_tree_gives() {
    let cases: &[&str] = &[
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"x"},"data":{"k":"v"}}"#,
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":1}}"#,
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","namespace":"ignored"}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":""}}"#,
        r#"{"apiVersion":"v1","kind":"Config\u004dap","metadata":{"name":"\u0061"}}"#,
        r#"{"apiVersion":null,"kind":"ConfigMap","metadata":{"name":"a"}}"#,
        r#"{"apiVersion":"","kind":"ConfigMap","metadata":{"name":"a"}}"#,
        r#"{"kind":"ConfigMap","metadata":{"name":"a"}}"#,
        r#"{"apiVersion":"v1","kind":7,"metadata":{"name":"a"}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":[]}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":5}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":null}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","kind":"Secret","metadata":{"name":"a"}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"}}"#,
        r#"[{"apiVersion":"v1"}]"#,
        r#""a string""#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} trailing"#,
    ];
    // Bytes that are not UTF-8 in a part the fast path skips (found by the fuzzer).
    let mut not_utf8 =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"#.to_vec();
    not_utf8.extend([b'"', 0xff, 0xfe, b'"', b'}', b'}']);
    let cases = cases
        .iter()
        .map(|c| c.as_bytes().to_vec())
        .chain([not_utf8]);
    for case in cases {
        let slow = serde_json::from_slice::<serde_json::Value>(&case)
            .map_err(|e| e.to_string())
            .and_then(|v| manifest_id(&v));
        let fast = read_manifest_id(&case).map_err(|e| match e {
            ManifestIdError::Json(e) => e.to_string(),
            ManifestIdError::Id(e) => e,
        });
        assert_eq!(fast, slow, "{}", String::from_utf8_lossy(&case));
    }
}

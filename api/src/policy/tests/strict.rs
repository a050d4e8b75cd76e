use crate::policy::strict::{refusal, strict_decoding_error, unknown_fields};
use serde_json::{Value, json};

const NETWORK_POLICY_SAMPLES: &str =
    include_str!("../../ocm/policy/testdata/policy-network-policy-samples.yaml");

/// The `objectDefinition`s of policy-collection's network-policy-samples.
fn samples() -> Vec<Value> {
    let policy: Value = serde_yaml::from_str(NETWORK_POLICY_SAMPLES).unwrap();
    policy["spec"]["policy-templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["objectDefinition"].clone())
        .collect()
}

#[test]
fn network_policy_samples_puts_two_fields_where_the_crd_defines_none() {
    let templates = samples();
    assert_eq!(templates.len(), 4);
    for t in &templates[..3] {
        assert_eq!(
            unknown_fields("ConfigurationPolicy", t),
            Some(vec![]),
            "{t}"
        );
    }
    let unknown = unknown_fields("ConfigurationPolicy", &templates[3]).unwrap();
    assert_eq!(
        unknown,
        [
            "spec.object-templates[0].remediationAction",
            "spec.object-templates[0].severity"
        ]
    );
    assert_eq!(
        refusal(
            "ConfigurationPolicy",
            "policy.open-cluster-management.io/v1",
            &unknown
        ),
        "Failed to create policy template: ConfigurationPolicy in version \"v1\" cannot be \
         handled as a ConfigurationPolicy: strict decoding error: unknown field \
         \"spec.object-templates[0].remediationAction\", unknown field \
         \"spec.object-templates[0].severity\""
    );
}

#[test]
fn unknown_fields_are_found_as_structural_pruning_finds_them() {
    let t = json!({
        "apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy",
        "metadata": {"name": "c", "labels": {"any": "label"}, "nickname": "x"},
        "status": {"whatever": true},
        "extra": 1,
        "spec": {
            "namespaceSelector": {"include": ["a"], "matchExpressions": [
                {"key": "k", "operator": "In", "values": ["v"], "value": "v"}]},
            "evaluationInterval": {"compliant": "10s", "sometimes": "1m"},
            "customMessage": {"compliant": "ok"},
            "object-templates": [
                {"complianceType": "musthave",
                 "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap", "free": {"form": 1}},
                 "objectSelector": {"matchLabels": {"a": "b"}, "matchFields": {}}},
                {"complianceType": "musthave", "recordDiff": "None", "recreateOption": "None",
                 "metadataComplianceType": "musthave", "objectDefinition": {}},
            ],
            // A scalar where the CRD has one is fine; a map where it has a string has only
            // unknown keys.
            "severity": {"level": "low"},
            "pruneObjectBehavior": "None",
        },
    });
    assert_eq!(
        unknown_fields("ConfigurationPolicy", &t).unwrap(),
        [
            "extra",
            "metadata.nickname",
            "spec.evaluationInterval.sometimes",
            "spec.namespaceSelector.matchExpressions[0].value",
            "spec.object-templates[0].objectSelector.matchFields",
            "spec.severity.level",
        ]
    );
    // A list where the CRD has a map: its items' keys are unknown, with their index.
    let t = json!({"kind": "CertificatePolicy", "metadata": {"name": "c"},
        "spec": {"labelSelector": {"app": "web"}, "severity": [{"a": 1}], "minimumDuration": "1h"}});
    assert_eq!(
        unknown_fields("CertificatePolicy", &t).unwrap(),
        ["spec.severity[0].a"]
    );
    assert_eq!(unknown_fields("OperatorPolicy", &t), None);
}

#[test]
fn the_api_servers_refusal_quotes_each_path_and_names_the_version() {
    assert_eq!(
        strict_decoding_error(
            "Pet",
            "zoo.example.com/v1alpha1",
            &["spec.favoriteColor".into()]
        ),
        "Pet in version \"v1alpha1\" cannot be handled as a Pet: strict decoding error: unknown \
         field \"spec.favoriteColor\""
    );
    assert_eq!(
        strict_decoding_error("ConfigMap", "v1", &["data.\"q\"".into()]),
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: \
         unknown field \"data.\\\"q\\\"\""
    );
}

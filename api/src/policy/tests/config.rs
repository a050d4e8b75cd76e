use super::policy;
use crate::policy::config::*;
use serde_json::json;
use std::time::Duration;

fn errors(spec: serde_json::Value) -> Vec<String> {
    ConfigurationPolicy::from_value(&json!({
        "apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy",
        "metadata": {"name": "c"},
        "spec": spec,
    }))
    .expect_err("invalid")
    .into_iter()
    .map(|e| e.to_string())
    .collect()
}

#[test]
fn every_field_is_read_in_the_spellings_ocm_accepts() {
    let p = policy(json!({
        "remediationAction": "Enforce",
        "severity": "Critical",
        "pruneObjectBehavior": "DeleteIfCreated",
        "evaluationInterval": {"compliant": "1h30m", "noncompliant": "watch"},
        "namespaceSelector": {"include": ["prod-*"], "exclude": ["prod-x"], "matchLabels": {"env": "prod"}},
        "object-templates": [{
            "complianceType": "MustOnlyHave",
            "metadataComplianceType": "musthave",
            "recordDiff": "Log",
            "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
        }],
    }));
    assert_eq!(p.remediation, Some(Remediation::Enforce));
    assert_eq!(p.severity, Severity::Critical);
    assert_eq!(p.prune, Prune::DeleteIfCreated);
    assert_eq!(
        p.interval.compliant,
        Interval::Every(Duration::from_secs(5400))
    );
    assert_eq!(p.interval.noncompliant, Interval::Watch);
    assert_eq!(p.namespace_selector.exclude, ["prod-x"]);
    assert_eq!(
        p.namespace_selector.labels.as_ref().unwrap().match_labels["env"],
        "prod"
    );
    let Templates::Objects(t) = &p.templates else {
        panic!("objects")
    };
    assert_eq!(t[0].compliance, ComplianceType::MustOnlyHave);
    assert_eq!(t[0].metadata_compliance, Some(ComplianceType::MustHave));
    assert_eq!(t[0].record_diff, Some(RecordDiff::Log));
}

#[test]
fn every_problem_is_reported_with_its_path() {
    let e = errors(json!({
        "remediationAction": "fix",
        "severity": "extreme",
        "pruneObjectBehavior": "deleteall",
        "evaluationInterval": {"compliant": "10 minutes"},
        "namespaceSelector": {"include": ["[abc"], "matchExpressions": [{"key": "k", "operator": "Is"}]},
        "object-templates": [
            {"complianceType": "musthave", "objectDefinition": {"kind": "ConfigMap"}},
            {"objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"a": 1}}}},
        ],
    }));
    let paths: Vec<&str> = e.iter().map(|s| s.split(':').next().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "spec.remediationAction",
            "spec.severity",
            "spec.pruneObjectBehavior",
            "spec.evaluationInterval.compliant",
            "spec.namespaceSelector.include[0]",
            "spec.namespaceSelector.matchExpressions[0].operator",
            "spec.object-templates[0].objectDefinition.apiVersion",
            "spec.object-templates[1].complianceType",
            "spec.object-templates[1].objectDefinition.metadata.labels",
        ],
        "{e:#?}"
    );
}

#[test]
fn raw_object_templates_without_templating_are_read_and_templated_ones_kept_apart() {
    let p = policy(json!({
        "remediationAction": "inform",
        "object-templates-raw": "- complianceType: musthave\n  objectDefinition:\n    apiVersion: v1\n    kind: Namespace\n    metadata: {name: raw}\n",
    }));
    let Templates::Objects(t) = &p.templates else {
        panic!("objects")
    };
    assert_eq!(t[0].name(), Some("raw"));
    let p = policy(json!({
        "remediationAction": "inform",
        "object-templates-raw": "{{ range $i := until 3 }}- complianceType: musthave{{ end }}",
    }));
    assert!(matches!(p.templates, Templates::Templated(_)));
    let e = errors(json!({"object-templates": [], "object-templates-raw": "- a"}));
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("mutually exclusive"), "{e:?}");
}

#[test]
fn go_durations_parse_as_go_reads_them() {
    assert_eq!(parse_go_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_go_duration("1.5m"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_go_duration("2h3m4s"), Ok(Duration::from_secs(7384)));
    for bad in ["", "10", "s", "10x", "1h 2m", "-1s"] {
        assert!(parse_go_duration(bad).is_err(), "{bad}");
    }
    assert_eq!(Interval::parse("never"), Ok(Interval::Never));
}

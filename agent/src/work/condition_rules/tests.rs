use super::*;
use serde_json::json;

fn id(group: &str, kind: &str) -> ManifestId {
    ManifestId {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: "default".into(),
        name: "x".into(),
    }
}

fn rule(condition: &str, type_: &str, exprs: &[&str]) -> ConditionRule {
    ConditionRule {
        condition: condition.into(),
        r#type: type_.into(),
        cel_expressions: exprs.iter().map(|e| (*e).to_string()).collect(),
        ..Default::default()
    }
}

fn job(conditions: serde_json::Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
           "status": {"conditions": conditions}})
}

#[test]
fn well_known_complete_follows_a_jobs_complete_or_failed_condition() {
    let rules = ConditionRules::new(&[rule("Complete", "WellKnownConditions", &[])]).unwrap();
    let done = rules.evaluate(
        &id("batch", "Job"),
        Some(&job(json!([{"type": "Complete", "status": "True"}]))),
    );
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].status.as_str(), done[0].reason.as_str()),
        ("True", EVALUATED)
    );
    assert_eq!(done[0].message, "Job is finished");
    let failed = rules.evaluate(
        &id("batch", "Job"),
        Some(&job(json!([{"type": "Failed", "status": "True"}]))),
    );
    assert_eq!(failed[0].status, "True");
    let running = rules.evaluate(
        &id("batch", "Job"),
        Some(&json!({"kind": "Job", "status": {}})),
    );
    assert_eq!(running[0].status, "False");
    assert_eq!(running[0].message, "Job is not finished");
    let pod = rules.evaluate(
        &id("", "Pod"),
        Some(&json!({"status": {"phase": "Succeeded"}})),
    );
    assert_eq!(
        (pod[0].status.as_str(), pod[0].message.as_str()),
        ("True", "Pod is in phase Succeeded")
    );
    assert!(
        rules
            .evaluate(&id("apps", "Deployment"), Some(&json!({})))
            .is_empty(),
        "no well-known rule for a Deployment: no condition, as in OCM"
    );
    let missing = rules.evaluate(&id("batch", "Job"), None);
    assert_eq!(missing[0].status, "Unknown");
}

#[test]
fn cel_rules_and_all_their_expressions_decide_and_messages_follow_ocm() {
    let mut r = rule(
        "Ready",
        "CEL",
        &[
            "object.status.readyReplicas == object.spec.replicas",
            "object.spec.replicas > 0",
        ],
    );
    r.message_expression = "result ? 'all ' + string(object.spec.replicas) + ' ready' : ''".into();
    let rules = ConditionRules::new(&[r]).unwrap();
    let ready = json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 2}});
    let c = &rules.evaluate(&id("apps", "Deployment"), Some(&ready))[0];
    assert_eq!((c.r#type.as_str(), c.status.as_str()), ("Ready", "True"));
    assert_eq!(c.message, "all 2 ready");
    let not_ready = json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 1}});
    let c = &rules.evaluate(&id("apps", "Deployment"), Some(&not_ready))[0];
    assert_eq!(c.status, "False");
    assert_eq!(
        c.message, "Manifest is not Ready",
        "an empty message expression falls back"
    );
}

#[test]
fn bad_expressions_and_types_become_conditions_naming_the_problem() {
    let rules = ConditionRules::new(&[
        rule("A", "CEL", &["object.status.("]),
        rule("B", "CEL", &["'not a bool'"]),
        rule("C", "CEL", &["nosuch.field == 1"]),
        rule("D", "Sometimes", &[]),
        rule("E", "CEL", &["object.status.missing == 1"]),
    ])
    .unwrap();
    let out = rules.evaluate(&id("", "ConfigMap"), Some(&json!({"status": {}})));
    let by = |t: &str| out.iter().find(|c| c.r#type == t).unwrap().clone();
    assert_eq!(
        (by("A").status.as_str(), by("A").reason.as_str()),
        ("False", EXPRESSION_ERROR)
    );
    assert!(
        by("A").message.starts_with("celExpressions[0]: "),
        "{}",
        by("A").message
    );
    assert_eq!(by("B").reason, EXPRESSION_ERROR);
    assert!(
        by("B").message.contains("expected a bool"),
        "{}",
        by("B").message
    );
    assert!(
        by("C")
            .message
            .contains("undeclared reference to \"nosuch\""),
        "{}",
        by("C").message
    );
    assert_eq!(
        (by("D").status.as_str(), by("D").reason.as_str()),
        ("Unknown", INVALID)
    );
    assert_eq!(
        by("E").reason,
        EXPRESSION_ERROR,
        "a missing field is an evaluation error"
    );
}

#[test]
fn rule_conditions_merge_into_a_manifest_and_aggregate_on_the_work() {
    let mut manifest = vec![Condition {
        r#type: "Applied".into(),
        status: "True".into(),
        reason: "AppliedManifestComplete".into(),
        ..Default::default()
    }];
    let produced = vec![condition(
        "Complete",
        "True",
        EVALUATED,
        "Job is finished".into(),
    )];
    assert!(merge(&mut manifest, &produced));
    assert!(
        !merge(&mut manifest, &produced),
        "unchanged the second time"
    );
    let other = vec![condition(
        "Complete",
        "False",
        EVALUATED,
        "Job is not finished".into(),
    )];
    let mut work = Vec::new();
    assert!(aggregate(&mut work, &[&manifest, &other]));
    let complete = work.iter().find(|c| c.r#type == "Complete").unwrap();
    assert_eq!(complete.status, "False", "any False makes the work's False");
    assert_eq!(complete.message, "Aggregated from 2 manifest conditions");
    aggregate(&mut work, &[&manifest]);
    let complete = work.iter().find(|c| c.r#type == "Complete").unwrap();
    assert_eq!(
        (complete.status.as_str(), complete.message.as_str()),
        ("True", "Job is finished")
    );
    // A rule that no longer exists takes its conditions with it.
    assert!(merge(&mut manifest, &[]));
    assert_eq!(manifest.len(), 1);
    aggregate(&mut work, &[&manifest]);
    assert!(work.iter().all(|c| c.r#type != "Complete"));
}

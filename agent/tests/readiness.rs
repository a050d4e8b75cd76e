//! Readiness and feedback on Kubernetes objects as the API server returns them (dumps of real
//! objects in `tests/fixtures/`).

use flotilla_agent::work::conditions::{Health, health};
use flotilla_api::feedback::{FeedbackRule, FieldValue, JsonPathRule, evaluate};
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).expect("fixture JSON")
}

fn health_of(name: &str) -> Health {
    let o = fixture(name);
    let api_version = o["apiVersion"].as_str().unwrap();
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    health(group, o["kind"].as_str().unwrap(), &o)
}

#[test]
fn a_deployment_mid_rollout_is_available_and_progressing() {
    let h = health_of("deployment-rolling");
    assert_eq!(h.ready, Some(true), "{h:?}");
    assert!(h.progressing && !h.failed, "{h:?}");
}

#[test]
fn a_deployment_past_its_progress_deadline_is_degraded() {
    let h = health_of("deployment-stuck");
    assert_eq!(h.ready, Some(false));
    assert!(h.failed && !h.progressing, "{h:?}");
}

#[test]
fn a_ready_statefulset_is_available_and_settled() {
    let h = health_of("statefulset-ready");
    assert_eq!(h.ready, Some(true));
    assert!(!h.progressing && !h.failed, "{h:?}");
}

#[test]
fn a_job_past_its_backoff_limit_failed() {
    let h = health_of("job-failed");
    assert_eq!(h.ready, Some(false));
    assert!(h.failed, "{h:?}");
}

#[test]
fn a_crash_looping_pod_is_degraded() {
    let h = health_of("pod-crashloop");
    assert_eq!(h.ready, Some(false));
    assert!(h.failed && h.message.contains("CrashLoopBackOff"), "{h:?}");
}

#[test]
fn a_custom_resource_with_a_ready_condition_is_available() {
    let h = health_of("certificate-ready");
    assert_eq!(h.ready, Some(true), "{h:?}");
}

#[test]
fn feedback_reads_real_deployment_status() {
    let o = fixture("deployment-rolling");
    let rules = [
        FeedbackRule::WellKnownStatus,
        FeedbackRule::JsonPaths(vec![JsonPathRule {
            name: "isAvailable".into(),
            path: r#".status.conditions[?(@.type=="Available")].status"#.into(),
            version: String::new(),
        }]),
    ];
    let result = evaluate(&rules, "apps", "Deployment", &o);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let value = |n: &str| {
        result
            .values
            .iter()
            .find(|(name, _)| name == n)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(value("ReadyReplicas"), Some(FieldValue::Integer(3)));
    assert_eq!(value("Replicas"), Some(FieldValue::Integer(4)));
    assert_eq!(value("AvailableReplicas"), Some(FieldValue::Integer(3)));
    assert_eq!(
        value("isAvailable"),
        Some(FieldValue::String("True".into()))
    );
}

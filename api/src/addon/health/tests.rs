use super::*;
use crate::v1::{
    AddOnTemplate, Condition, FeedbackValue, FieldValue, Manifest, ManifestCondition,
    ManifestResourceStatus, ManifestWork, ManifestWorkSpec, ManifestWorkStatus, ManifestsTemplate,
    ObjectMeta, ResourceMeta, StatusFeedbackResult,
};
use std::time::UNIX_EPOCH;

fn template(annotations: &[(&str, &str)]) -> AddOnTemplate {
    AddOnTemplate {
        metadata: Some(ObjectMeta {
            name: "t".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }),
        spec: None,
    }
}

#[test]
fn modes_come_from_the_annotations() {
    assert_eq!(mode_of(&template(&[])), Ok(Mode::WorkStatus));
    assert_eq!(
        mode_of(&AddOnTemplate::default()),
        Ok(Mode::WorkStatus),
        "no metadata at all"
    );
    assert_eq!(
        mode_of(&template(&[(HEALTH_CHECK_ANNOTATION, "Lease")])),
        Ok(Mode::Lease)
    );
    assert_eq!(
        mode_of(&template(&[(HEALTH_CHECK_ANNOTATION, "WorkStatus")])),
        Ok(Mode::WorkStatus)
    );
    assert_eq!(
        mode_of(&template(&[
            (HEALTH_CHECK_ANNOTATION, "Customized"),
            (HEALTH_PROBE_FIELD_ANNOTATION, "isHealthy"),
        ])),
        Ok(Mode::Customized("isHealthy".into()))
    );
    let e = mode_of(&template(&[(HEALTH_CHECK_ANNOTATION, "Customized")])).unwrap_err();
    assert!(
        e.starts_with("metadata.annotations[addon.flotilla.io/health-probe-field]: required"),
        "{e}"
    );
    let e = mode_of(&template(&[(HEALTH_CHECK_ANNOTATION, "lease")])).unwrap_err();
    assert!(
        e.starts_with(
            "metadata.annotations[addon.flotilla.io/health-check]: \"lease\" is not one of"
        ),
        "{e}"
    );
    let e = mode_of(&template(&[(HEALTH_PROBE_FIELD_ANNOTATION, "x")])).unwrap_err();
    assert!(e.contains("only used with"), "{e}");
    assert_eq!(ocm_mode(&Mode::Lease), "Lease");
    assert_eq!(ocm_mode(&Mode::WorkStatus), "Customized");
    assert_eq!(ocm_mode(&Mode::Customized("x".into())), "Customized");
}

#[test]
fn lease_follows_ocms_lease_controller() {
    let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let v = lease(None, t0, DEFAULT_LEASE_GRACE, "hello");
    assert_eq!(
        v,
        Verdict {
            status: status::UNKNOWN,
            reason: "ManagedClusterAddOnLeaseNotFound",
            message: "The status of hello add-on is unknown.".into(),
        }
    );
    let v = lease(
        Some(t0),
        t0 + Duration::from_secs(299),
        DEFAULT_LEASE_GRACE,
        "hello",
    );
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::TRUE,
            "ManagedClusterAddOnLeaseUpdated",
            "hello add-on is available."
        )
    );
    // At exactly renewed + grace the lease is stale (OCM: now.Before(renew + grace)).
    let v = lease(
        Some(t0),
        t0 + DEFAULT_LEASE_GRACE,
        DEFAULT_LEASE_GRACE,
        "hello",
    );
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::FALSE,
            "ManagedClusterAddOnLeaseUpdateStopped",
            "hello add-on is not available."
        )
    );
    assert_eq!(DEFAULT_LEASE_GRACE, Duration::from_secs(300));
    assert_eq!(
        lease_expires(t0, DEFAULT_LEASE_GRACE),
        t0 + Duration::from_secs(300)
    );
    // A renewal in the future (clock skew) is fresh.
    let v = lease(
        Some(t0 + Duration::from_secs(10)),
        t0,
        DEFAULT_LEASE_GRACE,
        "a",
    );
    assert_eq!(v.status, status::TRUE);
}

fn manifest(json: &str) -> Manifest {
    Manifest {
        raw: json.as_bytes().to_vec(),
    }
}

fn deployment(name: &str, replicas: Option<i64>) -> Manifest {
    let spec = match replicas {
        Some(r) => format!(r#","spec":{{"replicas":{r}}}"#),
        None => String::new(),
    };
    manifest(&format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}","namespace":"ns"}}{spec}}}"#
    ))
}

fn daemonset(name: &str) -> Manifest {
    manifest(&format!(
        r#"{{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{{"name":"{name}","namespace":"ns"}}}}"#
    ))
}

fn cond(type_: &str, status: &str, message: &str) -> Condition {
    Condition {
        r#type: type_.into(),
        status: status.into(),
        reason: "R".into(),
        message: message.into(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> FeedbackValue {
    FeedbackValue {
        name: name.into(),
        field_value: Some(FieldValue {
            r#type: "Integer".into(),
            integer: Some(v),
            ..Default::default()
        }),
    }
}

fn feedback(resource: &str, name: &str, values: Vec<FeedbackValue>) -> ManifestCondition {
    ManifestCondition {
        resource_meta: Some(ResourceMeta {
            group: "apps".into(),
            resource: resource.into(),
            namespace: "ns".into(),
            name: name.into(),
            ..Default::default()
        }),
        status_feedback: Some(StatusFeedbackResult { values }),
        conditions: vec![],
    }
}

fn work_with(
    manifests: Vec<Manifest>,
    conditions: Vec<Condition>,
    statuses: Vec<ManifestCondition>,
) -> ManifestWork {
    ManifestWork {
        spec: Some(ManifestWorkSpec {
            workload: Some(ManifestsTemplate { manifests }),
            ..Default::default()
        }),
        status: Some(ManifestWorkStatus {
            conditions,
            resource_status: Some(ManifestResourceStatus {
                manifests: statuses,
            }),
        }),
        ..Default::default()
    }
}

fn available() -> Vec<Condition> {
    vec![cond(AVAILABLE, status::TRUE, "")]
}

#[test]
fn work_level_verdicts_come_first() {
    let v = work(&[], &Mode::WorkStatus, "a");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::UNKNOWN,
            "WorkNotFound",
            "Addon manifestWork is not found"
        )
    );
    let w = work_with(vec![deployment("d", None)], vec![], vec![]);
    let v = work(&[&w], &Mode::WorkStatus, "a");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::UNKNOWN,
            "WorkNotApplied",
            "Addon manifestWork is not applied yet"
        )
    );
    let w = work_with(
        vec![deployment("d", None)],
        vec![cond(
            AVAILABLE,
            status::FALSE,
            "deployments.apps ns/d is missing",
        )],
        vec![],
    );
    let v = work(&[&w], &Mode::WorkStatus, "a");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::FALSE,
            "WorkNotApplied",
            "deployments.apps ns/d is missing"
        )
    );
    // Lease mode judges the work only.
    let w = work_with(vec![deployment("d", None)], available(), vec![]);
    let v = work(&[&w], &Mode::Lease, "a");
    assert_eq!((v.status, v.reason), (status::TRUE, "WorkApplied"));
}

#[test]
fn workload_availability_follows_ocms_checker() {
    let manifests = || {
        vec![
            deployment("d", None),
            daemonset("ds"),
            deployment("idle", Some(0)),
        ]
    };
    // No feedback at all → Unknown.
    let w = work_with(manifests(), available(), vec![]);
    let v = work(&[&w], &Mode::WorkStatus, "hello");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::UNKNOWN,
            "NoProbeResult",
            "Probe results are not returned"
        )
    );
    // Ready Deployment, DaemonSet not reporting yet → available (OCM skips missing results).
    let w = work_with(
        manifests(),
        available(),
        vec![feedback(
            "deployments",
            "d",
            vec![int("ReadyReplicas", 1), int("Replicas", 3)],
        )],
    );
    let v = work(&[&w], &Mode::WorkStatus, "hello");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (status::TRUE, "ProbeAvailable", "hello add-on is available.")
    );
    // DaemonSet not fully ready → unavailable with OCM's message.
    let w = work_with(
        manifests(),
        available(),
        vec![
            feedback(
                "deployments",
                "d",
                vec![int("ReadyReplicas", 1), int("Replicas", 1)],
            ),
            feedback(
                "daemonsets",
                "ds",
                vec![int("NumberReady", 2), int("DesiredNumberScheduled", 3)],
            ),
        ],
    );
    let v = work(&[&w], &Mode::WorkStatus, "hello");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::FALSE,
            "ProbeUnavailable",
            "Probe addon unavailable with err desiredNumberReplicas is 3 but readyReplica is 2 \
             for daemonsets ns/ds"
        )
    );
    // Deployment with no ready replica.
    let w = work_with(
        manifests(),
        available(),
        vec![feedback(
            "deployments",
            "d",
            vec![int("ReadyReplicas", 0), int("Replicas", 2)],
        )],
    );
    assert_eq!(work(&[&w], &Mode::WorkStatus, "h").status, status::FALSE);
    // Scaled to zero in status is healthy.
    let w = work_with(
        manifests(),
        available(),
        vec![feedback(
            "deployments",
            "d",
            vec![int("ReadyReplicas", 0), int("Replicas", 0)],
        )],
    );
    assert_eq!(work(&[&w], &Mode::WorkStatus, "h").status, status::TRUE);
    // A missing value is an error, as in OCM.
    let w = work_with(
        manifests(),
        available(),
        vec![feedback(
            "deployments",
            "d",
            vec![int("AvailableReplicas", 1)],
        )],
    );
    let v = work(&[&w], &Mode::WorkStatus, "h");
    assert_eq!(
        v.message,
        "Probe addon unavailable with err readyReplica is not probed"
    );
    // The Deployment with replicas 0 in its spec is not probed even when it reports unready.
    let w = work_with(
        manifests(),
        available(),
        vec![feedback(
            "deployments",
            "idle",
            vec![int("ReadyReplicas", 0), int("Replicas", 1)],
        )],
    );
    let v = work(&[&w], &Mode::WorkStatus, "h");
    assert_eq!(v.reason, "NoProbeResult");
}

#[test]
fn a_work_without_workloads_is_available_once_applied() {
    let w = work_with(
        vec![manifest(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}"#,
        )],
        available(),
        vec![],
    );
    assert_eq!(work(&[&w], &Mode::WorkStatus, "h").reason, "ProbeAvailable");
}

fn value(name: &str, fv: FieldValue) -> FeedbackValue {
    FeedbackValue {
        name: name.into(),
        field_value: Some(fv),
    }
}

#[test]
fn customized_needs_the_field_true_everywhere_it_is_reported() {
    let mode = Mode::Customized("isHealthy".into());
    let t = FieldValue {
        r#type: "Boolean".into(),
        boolean: Some(true),
        ..Default::default()
    };
    let s = |x: &str| FieldValue {
        r#type: "String".into(),
        string: Some(x.into()),
        ..Default::default()
    };
    let w = work_with(vec![deployment("d", None)], available(), vec![]);
    let v = work(&[&w], &mode, "h");
    assert_eq!((v.status, v.reason), (status::UNKNOWN, "NoProbeResult"));
    assert!(v.message.contains("isHealthy"));
    for good in [t.clone(), s("true"), s("True")] {
        let w = work_with(
            vec![deployment("d", None)],
            available(),
            vec![feedback("deployments", "d", vec![value("isHealthy", good)])],
        );
        assert_eq!(work(&[&w], &mode, "h").reason, "ProbeAvailable");
    }
    let w = work_with(
        vec![deployment("d", None)],
        available(),
        vec![
            feedback("deployments", "d", vec![value("isHealthy", t)]),
            feedback("deployments", "e", vec![value("isHealthy", s("no"))]),
        ],
    );
    let v = work(&[&w], &mode, "h");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::FALSE,
            "ProbeUnavailable",
            "Probe addon unavailable: isHealthy of deployments.apps ns/e is \"no\", not true"
        )
    );
}

#[test]
fn degraded_mirrors_the_works_condition() {
    assert_eq!(degraded(&[]), None);
    let w = work_with(vec![], available(), vec![]);
    assert_eq!(degraded(&[&w]), None);
    let w = work_with(vec![], vec![cond(DEGRADED, status::FALSE, "")], vec![]);
    let v = degraded(&[&w]).unwrap();
    assert_eq!((v.status, v.reason), (status::FALSE, "WorkNotDegraded"));
    let mut m = feedback("deployments", "d", vec![]);
    m.conditions = vec![cond(DEGRADED, status::TRUE, "image pull failed")];
    let w = work_with(vec![], vec![cond(DEGRADED, status::TRUE, "")], vec![m]);
    let v = degraded(&[&w]).unwrap();
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::TRUE,
            "WorkDegraded",
            "degraded: deployments.apps ns/d: image pull failed"
        )
    );
    let w = work_with(
        vec![],
        vec![cond(DEGRADED, status::TRUE, "own message")],
        vec![],
    );
    assert_eq!(degraded(&[&w]).unwrap().message, "own message");
    let w = work_with(vec![], vec![cond(DEGRADED, "Unknown", "")], vec![]);
    assert_eq!(degraded(&[&w]).unwrap().status, status::UNKNOWN);
}

#[test]
fn an_add_on_split_into_several_works_is_judged_over_all_of_them() {
    let ready = |name: &str| {
        feedback(
            "deployments",
            name,
            vec![int("ReadyReplicas", 1), int("Replicas", 1)],
        )
    };
    let first = work_with(vec![deployment("a", None)], available(), vec![ready("a")]);
    let second = work_with(vec![deployment("b", None)], available(), vec![ready("b")]);
    let v = work(&[&first, &second], &Mode::WorkStatus, "h");
    assert_eq!((v.status, v.reason), (status::TRUE, "ProbeAvailable"));
    // A workload of the second work that is not ready makes the add-on unavailable.
    let unready = feedback(
        "deployments",
        "b",
        vec![int("ReadyReplicas", 0), int("Replicas", 1)],
    );
    let second = work_with(vec![deployment("b", None)], available(), vec![unready]);
    let v = work(&[&first, &second], &Mode::WorkStatus, "h");
    assert_eq!((v.status, v.reason), (status::FALSE, "ProbeUnavailable"));
    assert!(v.message.contains("ns/b"), "{}", v.message);
    // Every work must be Available before anything is probed.
    let pending = work_with(vec![deployment("b", None)], vec![], vec![]);
    let v = work(&[&first, &pending], &Mode::WorkStatus, "h");
    assert_eq!((v.status, v.reason), (status::UNKNOWN, "WorkNotApplied"));
    // Degraded: one degraded work is enough, and says which manifest.
    let calm = work_with(vec![], vec![cond(DEGRADED, status::FALSE, "")], vec![]);
    let hurt = work_with(
        vec![],
        vec![cond(DEGRADED, status::TRUE, "disk full")],
        vec![],
    );
    let v = degraded(&[&calm, &hurt]).unwrap();
    assert_eq!((v.status, v.message.as_str()), (status::TRUE, "disk full"));
    let unsure = work_with(vec![], vec![cond(DEGRADED, "Unknown", "")], vec![]);
    assert_eq!(degraded(&[&calm, &unsure]).unwrap().status, status::UNKNOWN);
    assert_eq!(degraded(&[&calm, &calm]).unwrap().status, status::FALSE);
}

#[test]
fn cluster_unknown_keeps_the_clusters_reason() {
    let v = cluster_unknown(
        "ManagedClusterLeaseUpdateStopped",
        "Registration agent stopped updating its lease.",
    );
    assert_eq!(
        v,
        Verdict {
            status: status::UNKNOWN,
            reason: "ManagedClusterLeaseUpdateStopped",
            message: "Registration agent stopped updating its lease.".into(),
        }
    );
    let v = cluster_unknown("SomethingElse", "why");
    assert_eq!(
        (v.status, v.reason, v.message.as_str()),
        (
            status::UNKNOWN,
            "ManagedClusterAvailabilityUnknown",
            "SomethingElse: why"
        )
    );
}

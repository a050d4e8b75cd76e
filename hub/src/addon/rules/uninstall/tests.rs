use super::*;
use flotilla_api::v1::{
    Condition, FeedbackValue, ManifestCondition, ManifestConfigOption, ManifestResourceStatus,
    ManifestWorkSpec, ManifestWorkStatus, ObjectMeta, ResourceIdentifier, ResourceMeta,
    StatusFeedbackResult,
};

fn job(name: &str) -> ResourceIdentifier {
    ResourceIdentifier {
        group: "batch".into(),
        resource: "jobs".into(),
        namespace: "ns".into(),
        name: name.into(),
    }
}

fn pod(name: &str) -> ResourceIdentifier {
    ResourceIdentifier {
        group: String::new(),
        resource: "pods".into(),
        namespace: "ns".into(),
        name: name.into(),
    }
}

/// A hook work asking for feedback of `hooks`.
fn hook(hooks: &[ResourceIdentifier]) -> ManifestWork {
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: "addon-a-pre-delete".into(),
            namespace: "c1".into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkSpec {
            manifest_configs: hooks
                .iter()
                .map(|r| ManifestConfigOption {
                    resource_identifier: Some(r.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn string(name: &str, v: &str) -> FeedbackValue {
    FeedbackValue {
        name: name.into(),
        field_value: Some(FieldValue {
            r#type: "String".into(),
            string: Some(v.into()),
            ..Default::default()
        }),
    }
}

/// `w` as the agent reports it: `work` conditions and each hook's feedback values.
fn reported(
    mut w: ManifestWork,
    work: &[(&str, &str)],
    feedback: &[(ResourceIdentifier, Vec<FeedbackValue>)],
) -> ManifestWork {
    w.status = Some(ManifestWorkStatus {
        conditions: work
            .iter()
            .map(|(t, s)| Condition {
                r#type: t.to_string(),
                status: s.to_string(),
                message: format!("{t} is {s}"),
                ..Default::default()
            })
            .collect(),
        resource_status: Some(ManifestResourceStatus {
            manifests: feedback
                .iter()
                .map(|(r, values)| ManifestCondition {
                    resource_meta: Some(ResourceMeta {
                        group: r.group.clone(),
                        resource: r.resource.clone(),
                        namespace: r.namespace.clone(),
                        name: r.name.clone(),
                        ..Default::default()
                    }),
                    status_feedback: Some(StatusFeedbackResult {
                        values: values.clone(),
                    }),
                    conditions: vec![],
                })
                .collect(),
        }),
    });
    w
}

const AVAILABLE_WORK: &[(&str, &str)] = &[("Applied", "True"), ("Available", "True")];

fn view<'a>(
    hook: Option<&'a ManifestWork>,
    applied: Option<&'a ManifestWork>,
) -> UninstallView<'a> {
    UninstallView {
        cluster_exists: true,
        hook: Ok(hook),
        applied_hook: applied,
        hook_completed: false,
        works_left: true,
    }
}

#[test]
fn a_hook_is_applied_then_waited_for_then_the_works_go() {
    let desired = hook(&[job("cleanup")]);
    assert_eq!(step(&view(Some(&desired), None)), UninstallStep::ApplyHook);
    let running = reported(desired.clone(), &[("Applied", "True")], &[]);
    match step(&view(Some(&desired), Some(&running))) {
        UninstallStep::WaitHook { reason, message } => {
            assert_eq!(reason, REASON_NOT_COMPLETED);
            assert_eq!(
                message,
                "waiting for the pre-delete hook: Job ns/cleanup has not completed"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    // Complete, but the work not Available yet: OCM waits for both.
    let complete = [(job("cleanup"), vec![string("JobComplete", "True")])];
    let settling = reported(desired.clone(), &[("Applied", "True")], &complete);
    assert!(matches!(
        step(&view(Some(&desired), Some(&settling))),
        UninstallStep::WaitHook { .. }
    ));
    let done = reported(desired.clone(), AVAILABLE_WORK, &complete);
    assert_eq!(
        step(&view(Some(&desired), Some(&done))),
        UninstallStep::DeleteWorks { record_hook: true }
    );
    // Recorded: the hook never runs again, the works go, then the installation.
    let mut v = view(Some(&desired), None);
    v.hook_completed = true;
    assert_eq!(step(&v), UninstallStep::DeleteWorks { record_hook: false });
    v.works_left = false;
    assert_eq!(step(&v), UninstallStep::Done);
}

#[test]
fn a_failed_hook_keeps_removal_waiting_and_says_which_job_and_why() {
    let desired = hook(&[job("cleanup"), pod("report")]);
    assert_eq!(hooks_named(&desired), "Job ns/cleanup, Pod ns/report");
    // The agent reports the work of a failed Job not Available: the failure is told anyway.
    let failed = reported(
        desired.clone(),
        &[("Applied", "True"), ("Available", "False")],
        &[
            (
                job("cleanup"),
                vec![
                    string("JobFailed", "True"),
                    string("JobFailedReason", "BackoffLimitExceeded"),
                ],
            ),
            (pod("report"), vec![string("PodPhase", "Running")]),
        ],
    );
    match step(&view(Some(&desired), Some(&failed))) {
        UninstallStep::WaitHook { reason, message } => {
            assert_eq!(reason, REASON_FAILED);
            assert!(
                message.contains("Job ns/cleanup failed (BackoffLimitExceeded)"),
                "{message}"
            );
            assert!(message.contains("delete the cluster"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // The work itself could not be applied.
    let refused = reported(desired.clone(), &[("Applied", "False")], &[]);
    assert_eq!(
        hook_state(&refused),
        HookState::Failed(
            "the hook work addon-a-pre-delete cannot be applied: Applied is False".into()
        )
    );
    // A Pod must succeed; a failed one fails the hook.
    let pods = hook(&[pod("report")]);
    let phase = |p: &str| {
        hook_state(&reported(
            pods.clone(),
            AVAILABLE_WORK,
            &[(pod("report"), vec![string("PodPhase", p)])],
        ))
    };
    assert_eq!(phase("Succeeded"), HookState::Completed);
    assert!(matches!(phase("Failed"), HookState::Failed(m) if m.contains("Pod ns/report failed")));
    assert!(matches!(phase("Running"), HookState::Waiting(m) if m.contains("phase Running")));
}

#[test]
fn a_changed_hook_is_applied_again_and_a_gone_cluster_waits_for_nothing() {
    let desired = hook(&[job("cleanup-v2")]);
    let old = reported(hook(&[job("cleanup")]), AVAILABLE_WORK, &[]);
    assert_eq!(
        step(&view(Some(&desired), Some(&old))),
        UninstallStep::ApplyHook
    );
    let mut v = view(Some(&desired), Some(&old));
    v.cluster_exists = false;
    assert_eq!(step(&v), UninstallStep::Done);
    // No hooks: the works go at once.
    assert_eq!(
        step(&view(None, None)),
        UninstallStep::DeleteWorks { record_hook: false }
    );
}

#[test]
fn a_hook_that_cannot_be_rendered_waits_and_says_why() {
    let mut v = view(None, None);
    v.hook = Err("spec.agentSpec.workload.manifests[1]: unknown variable {{LIMIT}}");
    match step(&v) {
        UninstallStep::WaitHook { reason, message } => {
            assert_eq!(reason, REASON_FAILED);
            assert!(message.contains("unknown variable {{LIMIT}}"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Once it completed, a later render error does not matter.
    v.hook_completed = true;
    assert_eq!(step(&v), UninstallStep::DeleteWorks { record_hook: false });
}

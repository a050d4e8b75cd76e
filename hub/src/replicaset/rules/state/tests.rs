use super::*;
use crate::replicaset::rules::{TEMPLATE_HASH_ANNOTATION, WorkFacts};
use flotilla_api::v1::{ManifestWorkStatus, ObjectMeta};

/// A work at template `hash` and generation 2 with `conditions` (type, status, generation seen).
fn work(hash: &str, conditions: &[(&str, &str, i64)]) -> ManifestWork {
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: "web".into(),
            namespace: "c1".into(),
            generation: 2,
            annotations: [
                (TEMPLATE_HASH_ANNOTATION.to_string(), hash.to_string()),
                (COMMIT_ANNOTATION.to_string(), "abc".to_string()),
            ]
            .into(),
            ..Default::default()
        }),
        status: Some(ManifestWorkStatus {
            conditions: conditions
                .iter()
                .map(|(t, s, g)| Condition {
                    r#type: t.to_string(),
                    status: s.to_string(),
                    observed_generation: *g,
                    message: format!("{t} says {s}"),
                    ..Default::default()
                })
                .collect(),
            resource_status: None,
        }),
        ..Default::default()
    }
}

#[test]
fn each_state_is_the_first_rule_that_holds() {
    let (t, f) = (status::TRUE, status::FALSE);
    let cases: Vec<(Option<ManifestWork>, State)> = vec![
        (None, State::Pending),
        (Some(work("old", &[(APPLIED, t, 2)])), State::OutOfSync),
        (
            Some(work("h", &[(APPLIED, f, 2), (AVAILABLE, t, 2)])),
            State::ErrApplied,
        ),
        (
            Some(work("h", &[(APPLIED, t, 2), (DEGRADED, t, 2)])),
            State::ErrApplied,
        ),
        (
            Some(work("h", &[(APPLIED, t, 1), (AVAILABLE, t, 1)])),
            State::WaitApplied,
        ),
        (Some(work("h", &[])), State::WaitApplied),
        (
            Some(work("h", &[(APPLIED, t, 2), (AVAILABLE, f, 2)])),
            State::NotReady,
        ),
        (
            Some(work(
                "h",
                &[(APPLIED, t, 2), (AVAILABLE, t, 2), (CONTESTED, t, 2)],
            )),
            State::Modified,
        ),
        (
            Some(work(
                "h",
                &[(APPLIED, t, 2), (AVAILABLE, t, 2), (REPAIRED, t, 2)],
            )),
            State::Modified,
        ),
        (
            Some(work(
                "h",
                &[(APPLIED, t, 2), (AVAILABLE, t, 2), (REPAIRED, f, 2)],
            )),
            State::Ready,
        ),
        (
            Some(work("h", &[(APPLIED, t, 2), (AVAILABLE, t, 2)])),
            State::Ready,
        ),
    ];
    for (w, want) in &cases {
        let (got, message) = state(w.as_ref(), "h");
        assert_eq!(got, *want, "{w:?}");
        // A reconcile reads the same state from the work as the hub stores it.
        let stored = w.clone().map(WorkFacts::from);
        assert_eq!(of(stored.as_ref().map(WorkFacts::view), "h"), got, "{w:?}");
        assert_eq!(
            message.is_empty(),
            *want == State::Ready,
            "{want:?}: {message}"
        );
    }
    let failed = work("h", &[(APPLIED, f, 2)]);
    assert_eq!(state(Some(&failed), "h").1, "Applied says False");
    let repaired = work("h", &[(APPLIED, t, 2), (AVAILABLE, t, 2), (REPAIRED, t, 2)]);
    assert_eq!(state(Some(&repaired), "h").1, "Repaired says True");
}

/// A spoke's condition message is quoted in its row, never at more than 4 KiB.
#[test]
fn a_spokes_long_message_is_cut_in_its_row() {
    let t = status::TRUE;
    let mut w = work("h", &[(APPLIED, t, 2), (AVAILABLE, t, 2), (REPAIRED, t, 2)]);
    let long = "é".repeat(600_000);
    if let Some(s) = w.status.as_mut() {
        s.conditions[2].message = long;
    }
    let (got, why) = state(Some(&w), "h");
    assert_eq!(got, State::Modified);
    assert!(why.len() <= flotilla_api::policy::history::MAX_MESSAGE);
    assert!(why.ends_with('…'), "{}", &why[why.len() - 10..]);
}

#[test]
fn counts_add_up_and_the_worst_follows_fleet_s_rank() {
    let a = count([State::Ready, State::Ready, State::OutOfSync]);
    let b = count([State::Pending, State::ErrApplied]);
    let both = sum(&a, &b);
    assert_eq!(
        (both.ready, both.out_of_sync, both.pending, both.err_applied),
        (2, 1, 1, 1)
    );
    assert_eq!(total(&both), 5);
    assert_eq!(worst(&a), Some(State::OutOfSync));
    assert_eq!(worst(&both), Some(State::ErrApplied));
    assert_eq!(
        worst(&count([State::Modified, State::Pending])),
        Some(State::Modified)
    );
    assert_eq!(worst(&ClusterStates::default()), None);
    assert!(State::WaitApplied > State::Modified && State::Pending > State::NotReady);
}

#[test]
fn rows_name_each_decided_cluster_once_with_its_work_s_commit() {
    let works: BTreeMap<String, Arc<ManifestWork>> = [(
        "c1".to_string(),
        Arc::new(work(
            "h",
            &[(APPLIED, status::TRUE, 2), (AVAILABLE, status::TRUE, 2)],
        )),
    )]
    .into();
    let decided = ["c1", "c2", "c1"].map(String::from);
    let rows = rows(&decided, &works, "h");
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].state, rows[0].commit.as_str()),
        (State::Ready, "abc")
    );
    assert_eq!(
        (rows[1].cluster.as_str(), rows[1].state),
        ("c2", State::Pending)
    );
    assert_eq!(rows[1].commit, "");
}

#[test]
fn an_err_applied_cluster_says_which_manifest_failed_and_why() {
    use flotilla_api::v1::{ManifestCondition, ManifestResourceStatus, ResourceMeta};
    let mut w = work(
        "h",
        &[(APPLIED, status::FALSE, 2), (DEGRADED, status::TRUE, 2)],
    );
    w.status.as_mut().unwrap().resource_status = Some(ManifestResourceStatus {
        manifests: vec![ManifestCondition {
            resource_meta: Some(ResourceMeta {
                ordinal: 0,
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "default".into(),
                name: "web".into(),
                ..Default::default()
            }),
            conditions: vec![Condition {
                r#type: APPLIED.into(),
                status: status::FALSE.into(),
                message: "disk full".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    });
    assert_eq!(
        state(Some(&w), "h"),
        (
            State::ErrApplied,
            "manifest 0 (v1 ConfigMap default/web): disk full".to_string()
        )
    );
    // Without manifest details, the work's own Applied message.
    let w = work("h", &[(APPLIED, status::FALSE, 2)]);
    assert_eq!(state(Some(&w), "h").1, "Applied says False");
}

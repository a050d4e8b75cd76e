use super::*;
use flotilla_api::v1::{
    LocalPlacementReference, Manifest, ManifestWorkReplicaSetSpec, ManifestWorkSpec,
    ManifestsTemplate, RolloutConfig, RolloutStrategy,
};

fn rs(strategy: RolloutStrategy) -> ManifestWorkReplicaSet {
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: "web".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: vec![Manifest {
                        raw: br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}"#.to_vec(),
                    }],
                }),
                ..Default::default()
            }),
            placement_refs: vec![LocalPlacementReference {
                name: "edge".into(),
                rollout_strategy: Some(strategy),
            }],
            cascade_deletion_policy: String::new(),
        }),
        status: None,
        hub: None,
    }
}

fn progressive(max_concurrency: &str, max_failures: &str) -> RolloutStrategy {
    RolloutStrategy {
        r#type: "Progressive".into(),
        progressive: Some(RolloutConfig {
            max_concurrency: max_concurrency.into(),
            max_failures: max_failures.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_valid_replica_set_passes_and_its_works_are_labelled() {
    let r = rs(progressive("1", "0"));
    assert_eq!(validate(&r), Vec::<String>::new());
    let hash = template_hash(&r);
    let w = work_for(&r, "edge-1", "edge", &hash, template_of(&r));
    let m = w.metadata.as_ref().unwrap();
    assert_eq!((m.name.as_str(), m.namespace.as_str()), ("web", "edge-1"));
    assert_eq!(m.labels[REPLICASET_LABEL], "default.web");
    assert_eq!(m.labels[PLACEMENT_LABEL], "edge");
    assert_eq!(m.annotations[TEMPLATE_HASH_ANNOTATION], hash);
}

#[test]
fn works_made_from_a_template_never_carry_the_keys_reserved_for_add_on_works() {
    // The replica set's own labels and annotations stay on it: a user cannot reach the keys the
    // agent trusts to hand an add-on its hub credentials through a replica set.
    let mut r = rs(progressive("1", "0"));
    let m = r.metadata.as_mut().unwrap();
    for key in flotilla_api::addon::RESERVED_WORK_KEYS {
        m.labels.insert(key.into(), "x".into());
        m.annotations.insert(key.into(), "x".into());
    }
    assert_eq!(validate(&r), Vec::<String>::new());
    let w = work_for(&r, "edge-1", "edge", &template_hash(&r), template_of(&r));
    assert_eq!(
        flotilla_api::addon::reserved_key_errors(w.metadata.as_ref().unwrap()),
        Vec::<String>::new()
    );
}

#[test]
fn bad_strategies_and_templates_name_their_fields() {
    let mut r = rs(progressive("0", "lots"));
    r.spec.as_mut().unwrap().cascade_deletion_policy = "Foreground".into();
    r.spec
        .as_mut()
        .unwrap()
        .manifest_work_template
        .as_mut()
        .unwrap()
        .workload = None;
    let errors = validate(&r);
    let text = errors.join("\n");
    for part in [
        "spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency",
        "spec.placementRefs[0].rolloutStrategy.progressive.maxFailures",
        "spec.cascadeDeletionPolicy",
        "spec.manifestWorkTemplate.workload.manifests",
    ] {
        assert!(text.contains(part), "{part} missing from {errors:#?}");
    }
    let mut r = rs(RolloutStrategy {
        r#type: "Canary".into(),
        ..Default::default()
    });
    r.spec
        .as_mut()
        .unwrap()
        .placement_refs
        .push(LocalPlacementReference {
            name: "edge".into(),
            rollout_strategy: None,
        });
    let text = validate(&r).join("\n");
    assert!(text.contains("rolloutStrategy.type: \"Canary\""), "{text}");
    assert!(
        text.contains("placementRefs[1].name: placement \"edge\" is listed twice"),
        "{text}"
    );
}

/// Where `w` stands against `hash`, read from the work decoded and from the work as the hub
/// stores it (conditions alone decoded): both read the same.
fn judged(w: &ManifestWork, hash: &str) -> Status {
    let decoded = status_of(Some(w.into()), hash);
    let stored = WorkFacts::from(w.clone());
    assert_eq!(status_of(Some(stored.view()), hash), decoded, "{w:?}");
    decoded.0
}

#[test]
fn a_work_is_judged_against_the_current_template_and_generation() {
    let r = rs(progressive("1", "0"));
    let hash = template_hash(&r);
    assert_eq!(status_of(None, &hash).0, Status::ToApply);
    let mut w = work_for(&r, "edge-1", "edge", "old-hash", template_of(&r));
    assert_eq!(judged(&w, &hash), Status::ToApply);
    w = work_for(&r, "edge-1", "edge", &hash, template_of(&r));
    w.metadata.as_mut().unwrap().generation = 2;
    assert_eq!(judged(&w, &hash), Status::Progressing);
    let cond = |t: &str, s: &str, generation: i64| Condition {
        r#type: t.into(),
        status: s.into(),
        observed_generation: generation,
        last_transition_time: Some(meta::now()),
        ..Default::default()
    };
    w.status = Some(flotilla_api::v1::ManifestWorkStatus {
        conditions: vec![cond(APPLIED, "True", 1), cond(AVAILABLE, "True", 1)],
        ..Default::default()
    });
    assert_eq!(
        judged(&w, &hash),
        Status::Progressing,
        "conditions of an older generation do not count"
    );
    w.status.as_mut().unwrap().conditions =
        vec![cond(APPLIED, "True", 2), cond(AVAILABLE, "True", 2)];
    assert_eq!(judged(&w, &hash), Status::Succeeded);
    w.status
        .as_mut()
        .unwrap()
        .conditions
        .push(cond(DEGRADED, "True", 2));
    assert_eq!(judged(&w, &hash), Status::Failed);
    let s = summary([WorkView::from(&w)]);
    assert_eq!((s.total, s.applied, s.available, s.degraded), (1, 1, 1, 1));
    let stored = WorkFacts::from(w.clone());
    assert_eq!(summary([stored.view()]), s);
}

use super::*;
use flotilla_api::v1::{Condition, ManifestCondition, ManifestResourceStatus, ResourceMeta};
use proptest::prelude::*;

fn condition(ty: &str, status: &str, reason: &str, message: &str, at: i64) -> Condition {
    Condition {
        r#type: ty.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Some(prost_types::Timestamp {
            seconds: at,
            nanos: 125_000_000,
        }),
        observed_generation: 1,
    }
}

/// The status an agent reports for the fanout's work: one ConfigMap, applied and available
/// (the work's four aggregate conditions and the manifest's five, as agent/src/work writes them).
fn typical_status() -> ManifestWorkStatus {
    let at = 1_790_000_000;
    ManifestWorkStatus {
        conditions: vec![
            condition(
                "Applied",
                "True",
                "AppliedManifestWorkComplete",
                "Apply manifest work complete",
                at,
            ),
            condition(
                "Available",
                "True",
                "ResourcesAvailable",
                "All resources are available",
                at,
            ),
            condition("Progressing", "False", "Stable", "", at),
            condition("Degraded", "False", "AsExpected", "", at),
        ],
        resource_status: Some(ManifestResourceStatus {
            manifests: vec![ManifestCondition {
                resource_meta: Some(ResourceMeta {
                    ordinal: 0,
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                    resource: "configmaps".into(),
                    namespace: "default".into(),
                    name: "fanout".into(),
                }),
                status_feedback: None,
                conditions: vec![
                    condition(
                        "Applied",
                        "True",
                        "AppliedManifestComplete",
                        "Apply manifest complete",
                        at,
                    ),
                    condition(
                        "Available",
                        "True",
                        "ResourceAvailable",
                        "Resource is available",
                        at,
                    ),
                    condition("Progressing", "False", "Stable", "", at),
                    condition("Degraded", "False", "AsExpected", "", at),
                    condition(
                        "StatusFeedbackSynced",
                        "True",
                        "StatusFeedbackSynced",
                        "",
                        at,
                    ),
                ],
            }],
        }),
    }
}

fn typical_work() -> ManifestWork {
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: "fanout".into(),
            namespace: "edge-00042".into(),
            labels: [("app".to_string(), "fanout".to_string())].into(),
            uid: "6f1c2d3e-0000-4000-8000-000000000042".into(),
            resource_version: 7,
            generation: 1,
            ..Default::default()
        }),
        spec: Some(ManifestWorkSpec::default()),
        status: Some(typical_status()),
        hub: Some(HubWorkState {
            last_sequence: 3,
            last_status_hash: "9b2f".into(),
            observed_generation: 1,
            resource_id: "edge-00042/fanout".into(),
            ..Default::default()
        }),
    }
}

#[test]
fn a_stored_work_is_a_manifest_work_on_the_wire() {
    let work = typical_work();
    let stored = StoredWork::from(work.clone());
    let bytes = work.encode_to_vec();
    assert_eq!(stored.encode_to_vec(), bytes);
    assert_eq!(stored.encoded_len(), work.encoded_len());
    assert_eq!(StoredWork::decode(&*bytes).unwrap(), stored);
    assert_eq!(
        ManifestWork::decode(&*stored.encode_to_vec()).unwrap(),
        work
    );
    assert_eq!(stored.to_work(), work);
    assert_eq!(stored.clone().into_work(), work);
    assert_eq!(stored.status(), work.status);
    // No status, and an empty one, stay apart.
    for status in [None, Some(ManifestWorkStatus::default())] {
        let w = ManifestWork {
            status,
            ..work.clone()
        };
        let s = StoredWork::from(w.clone());
        assert_eq!(s.encode_to_vec(), w.encode_to_vec());
        assert_eq!(
            StoredWork::decode(&*w.encode_to_vec()).unwrap().to_work(),
            w
        );
    }
}

#[test]
fn a_status_given_twice_merges_and_unknown_fields_are_skipped_as_manifest_work_does() {
    let first = typical_work();
    let mut second = ManifestWork {
        status: Some(typical_status()),
        ..Default::default()
    };
    if let Some(s) = second.status.as_mut() {
        s.conditions.truncate(1);
        s.resource_status = None;
    }
    let mut bytes = first.encode_to_vec();
    bytes.extend(second.encode_to_vec());
    // Field 9, a varint: not ManifestWork's.
    bytes.extend([9 << 3, 1]);
    let plain = ManifestWork::decode(&*bytes).unwrap();
    let stored = StoredWork::decode(&*bytes).unwrap();
    assert_eq!(stored.to_work(), plain);
    assert_eq!(plain.status.as_ref().unwrap().conditions.len(), 5);
}

#[test]
fn a_malformed_status_fails_the_works_decoding() {
    let mut bytes = ManifestWork {
        status: None,
        ..typical_work()
    }
    .encode_to_vec();
    // Field 3, five bytes long, holding a truncated string field.
    bytes.extend([(3 << 3) | 2, 5, (1 << 3) | 2, 9, b'x', b'y', b'z']);
    assert!(ManifestWork::decode(&*bytes).is_err());
    let err = StoredWork::decode(&*bytes).unwrap_err();
    assert!(err.to_string().contains("ManifestWork.status"), "{err}");
}

#[test]
fn the_status_is_replaced_and_carried_over() {
    let mut stored = StoredWork::from(typical_work());
    assert!(stored.status_is(Some(&typical_status())));
    stored.set_status(None);
    assert!(stored.status_is(None) && stored.status_len() == 0);
    let next = StoredWork::from(ManifestWork {
        status: None,
        ..typical_work()
    })
    .with_status_of(&StoredWork::from(typical_work()));
    assert_eq!(next.to_work(), typical_work());
}

fn arb_condition() -> impl Strategy<Value = Condition> {
    (
        prop::sample::select(vec!["Applied", "Available"]),
        prop::sample::select(vec!["True", "False", ""]),
        "[ab]{0,2}",
        proptest::option::of(0i64..2),
        0i64..2,
    )
        .prop_map(|(ty, status, message, at, generation)| Condition {
            r#type: ty.into(),
            status: status.into(),
            reason: String::new(),
            message,
            last_transition_time: at.map(|s| prost_types::Timestamp {
                seconds: s,
                nanos: 0,
            }),
            observed_generation: generation,
        })
}

fn arb_status() -> impl Strategy<Value = Option<ManifestWorkStatus>> {
    proptest::option::of(
        (
            prop::collection::vec(arb_condition(), 0..3),
            proptest::option::of(prop::collection::vec(
                (
                    proptest::option::of("[cd]{0,1}"),
                    prop::collection::vec(arb_condition(), 0..2),
                ),
                0..2,
            )),
        )
            .prop_map(|(conditions, manifests)| ManifestWorkStatus {
                conditions,
                resource_status: manifests.map(|ms| ManifestResourceStatus {
                    manifests: ms
                        .into_iter()
                        .map(|(name, conditions)| ManifestCondition {
                            resource_meta: name.map(|name| ResourceMeta {
                                name,
                                ..Default::default()
                            }),
                            status_feedback: None,
                            conditions,
                        })
                        .collect(),
                }),
            }),
    )
}

proptest! {
    /// What `receipt_only` asks ("is the status the one stored?") answers as the decoded
    /// statuses' equality did.
    #[test]
    fn status_is_answers_as_equality_of_the_decoded_statuses(a in arb_status(), b in arb_status()) {
        let mut stored = StoredWork::default();
        stored.set_status(a.as_ref());
        prop_assert_eq!(stored.status_is(b.as_ref()), a == b);
        prop_assert_eq!(stored.status(), a);
    }
}

/// What glibc's malloc takes for an allocation of `n` bytes (an 8-byte header, 16-byte chunks,
/// 32 at least).
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).div_ceil(16).max(2) * 16
    }
}

fn text(s: &str) -> usize {
    chunk(s.len())
}

fn condition_heap(c: &Condition) -> usize {
    text(&c.r#type) + text(&c.status) + text(&c.reason) + text(&c.message)
}

fn conditions_heap(cs: &[Condition]) -> usize {
    chunk(std::mem::size_of_val(cs)) + cs.iter().map(condition_heap).sum::<usize>()
}

/// The heap a status takes as prost's types (vectors exactly as long as they are, as a clone
/// makes them; what the cluster actor stored before).
fn decoded_heap(s: &ManifestWorkStatus) -> usize {
    let manifests = s
        .resource_status
        .as_ref()
        .map_or(&[][..], |r| r.manifests.as_slice());
    conditions_heap(&s.conditions)
        + chunk(std::mem::size_of_val(manifests))
        + manifests
            .iter()
            .map(|m| {
                let meta = m.resource_meta.as_ref().map_or(0, |r| {
                    [
                        &r.group,
                        &r.version,
                        &r.kind,
                        &r.resource,
                        &r.namespace,
                        &r.name,
                    ]
                    .iter()
                    .map(|s| text(s))
                    .sum()
                });
                meta + conditions_heap(&m.conditions)
            })
            .sum::<usize>()
}

/// A regression guard on the representation, computed (not timed): the typical work's status
/// held encoded takes under a third of the heap it took as prost's types.
#[test]
fn a_typical_status_held_encoded_takes_under_a_third_of_its_decoded_heap() {
    let status = typical_status();
    let stored = StoredWork::from(typical_work());
    let before = decoded_heap(&status);
    let after = chunk(stored.status_len());
    eprintln!(
        "typical work status: {before} B as prost's types, {} B encoded ({after} B allocated)",
        stored.status_len()
    );
    assert!(
        after * 3 < before,
        "{after} B encoded vs {before} B decoded"
    );
}

/// The fanout's spec: a Deployment, a Service and a ConfigMap, as raw JSON.
fn fanout_spec(ttl: Option<i64>) -> ManifestWorkSpec {
    let raw = |kind: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"{kind}","metadata":{{"name":"fanout","namespace":"default"}},"data":{{"k":"{}"}}}}"#,
            "v".repeat(300)
        )
        .into_bytes()
    };
    ManifestWorkSpec {
        workload: Some(flotilla_api::v1::ManifestsTemplate {
            manifests: ["Deployment", "Service", "ConfigMap"]
                .iter()
                .map(|k| flotilla_api::v1::Manifest { raw: raw(k) })
                .collect(),
        }),
        delete_option: ttl.map(|t| flotilla_api::v1::DeleteOption {
            ttl_seconds_after_finished: Some(t),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn fanout_work(cluster: &str) -> ManifestWork {
    let mut w = typical_work();
    w.spec = Some(fanout_spec(None));
    if let Some(m) = w.metadata.as_mut() {
        m.namespace = cluster.into();
    }
    w
}

#[test]
fn a_spec_is_held_encoded_and_equal_specs_share_one_allocation() {
    let a = StoredWork::from(fanout_work("edge-1"));
    let b = StoredWork::from(fanout_work("edge-2"));
    assert!(a.shares_spec_with(&b), "equal specs of two clusters' works");
    assert_eq!(a.spec(), Some(fanout_spec(None)));
    assert_eq!(a.encode_to_vec(), fanout_work("edge-1").encode_to_vec());
    // Read back from the bucket, the spec joins the allocation already held.
    let read = StoredWork::decode(&*a.encode_to_vec()).unwrap();
    assert!(read.shares_spec_with(&a));
    assert_eq!(read.to_work(), fanout_work("edge-1"));
    // A copy (what every status report makes) shares it too.
    assert!(a.clone().shares_spec_with(&a));
    let other = StoredWork::from(ManifestWork {
        spec: Some(fanout_spec(Some(60))),
        ..fanout_work("edge-3")
    });
    assert!(!other.shares_spec_with(&a));
}

#[test]
fn replacing_a_spec_by_an_equal_one_is_no_change_and_keeps_it_shared() {
    let held = StoredWork::from(fanout_work("edge-1"));
    let mut next = held.clone();
    assert!(!next.replace_spec(Some(&fanout_spec(None))));
    assert!(next.shares_spec_with(&held));
    assert!(next.replace_spec(Some(&fanout_spec(Some(30)))));
    assert_eq!(next.ttl_seconds_after_finished(), Some(30));
    assert_eq!(held.ttl_seconds_after_finished(), None);
    assert!(next.replace_spec(None));
    assert_eq!(next.spec(), None);
    assert_eq!(next.spec_len(), 0);
}

#[test]
fn a_spec_given_twice_merges_and_a_malformed_one_fails_the_decoding() {
    let first = fanout_work("edge-1");
    let second = ManifestWork {
        spec: Some(ManifestWorkSpec {
            delete_option: Some(flotilla_api::v1::DeleteOption {
                ttl_seconds_after_finished: Some(9),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut bytes = first.encode_to_vec();
    bytes.extend(second.encode_to_vec());
    let plain = ManifestWork::decode(&*bytes).unwrap();
    let stored = StoredWork::decode(&*bytes).unwrap();
    assert_eq!(stored.to_work(), plain);
    assert_eq!(stored.ttl_seconds_after_finished(), Some(9));
    let mut bad = ManifestWork {
        spec: None,
        ..typical_work()
    }
    .encode_to_vec();
    bad.extend([(2 << 3) | 2, 3, (1 << 3) | 2, 9, b'x']);
    let err = StoredWork::decode(&*bad).unwrap_err();
    assert!(err.to_string().contains("ManifestWork.spec"), "{err}");
}

#[test]
fn a_spec_event_carries_the_work_without_status_or_bookkeeping() {
    let held = StoredWork::from(fanout_work("edge-1"));
    let payload = held.metadata_and_spec();
    let decoded = ManifestWork::decode(&*payload.encode_to_vec()).unwrap();
    assert_eq!(
        decoded,
        ManifestWork {
            metadata: fanout_work("edge-1").metadata,
            spec: Some(fanout_spec(None)),
            status: None,
            hub: None,
        }
    );
}

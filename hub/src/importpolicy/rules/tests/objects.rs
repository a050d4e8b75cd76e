//! Object sources: lists judged, absences counted, clusters created within their limits.

use super::*;
use crate::importpolicy::source::Reason;

impl C {
    fn origin(mut self, o: ClusterOrigin) -> Self {
        self.0.hub.as_mut().unwrap().origin = o as i32;
        self
    }
}

/// An object policy fixture: CAPI clusters on `mgmt`, created once Provisioned.
fn capi(name: &str) -> P {
    P(ClusterImportPolicy {
        metadata: Some(ObjectMeta {
            name: name.into(),
            generation: 1,
            ..Default::default()
        }),
        spec: Some(ClusterImportPolicySpec {
            source: Some(ImportSource {
                group: "cluster.x-k8s.io".into(),
                resource: "clusters".into(),
                versions: vec!["v1beta1".into()],
                clusters: vec!["mgmt".into()],
                ..Default::default()
            }),
            name_template: "source.metadata.name".into(),
            creation_condition: r#"source.status.phase == "Provisioned""#.into(),
            template: r#"{"labels": {"provider": "capi"}, "leaseDurationSeconds": 90}"#.into(),
            ..Default::default()
        }),
        status: None,
    })
}

fn object(name: &str, phase: &str) -> SourceObject {
    SourceObject {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        object: serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "status": {"phase": phase}}),
        references: Ok(vec![]),
    }
}

/// Lists as read, by policy then spoke.
type Raw = BTreeMap<String, BTreeMap<String, Listing<SourceObject>>>;

fn listed(fresh: bool, result: Result<Vec<SourceObject>, Reason>) -> Raw {
    BTreeMap::from([(
        "capi".to_string(),
        BTreeMap::from([("mgmt".to_string(), Listing { fresh, result })]),
    )])
}

/// The lists as the hub keeps them: each object judged by its policy.
fn judged(policies: &[CompiledPolicy], raw: &Raw) -> BTreeMap<String, BTreeMap<String, Listing>> {
    raw.iter()
        .map(|(name, spokes)| {
            let p = policies
                .iter()
                .find(|p| p.name == *name)
                .expect("listed policy");
            let spokes = spokes
                .iter()
                .map(|(spoke, l)| {
                    let result = l.result.clone().map(|objects| {
                        objects.into_iter().map(|o| judge(p, o)).collect::<Vec<_>>()
                    });
                    let listing = Listing {
                        fresh: l.fresh,
                        result,
                    };
                    (spoke.clone(), listing)
                })
                .collect();
            (name.clone(), spokes)
        })
        .collect()
}

/// No creation limits.
fn unlimited(policies: &[CompiledPolicy]) -> BTreeMap<String, usize> {
    policies
        .iter()
        .map(|p| (p.name.clone(), usize::MAX))
        .collect()
}

fn run_objects(
    policies: &[CompiledPolicy],
    clusters: &[Arc<ManagedCluster>],
    records: &BTreeMap<String, ImportRecord>,
    lists: &Raw,
) -> Plan {
    let stored = policies.iter().map(|p| p.name.clone()).collect();
    plan(&Snapshot {
        policies,
        stored: &stored,
        clusters,
        records,
        secure: false,
        lists: &judged(policies, lists),
        budget: &unlimited(policies),
        max_created: usize::MAX,
    })
}

fn own_record(name: &str, created: bool, missing: u32) -> ImportRecord {
    ImportRecord {
        policy: "capi".into(),
        source_ref: Some(ImportSourceRef {
            cluster: "mgmt".into(),
            group: "cluster.x-k8s.io".into(),
            resource: "clusters".into(),
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }),
        created,
        applied_labels: labels(&[("provider", "capi")]),
        policy_generation: 1,
        missing_lists: missing,
    }
}

#[test]
fn a_provisioned_object_creates_its_cluster_ahead_of_its_agent() {
    let p = [capi("capi").build()];
    let lists = listed(
        true,
        Ok(vec![
            object("a", "Provisioned"),
            object("b", "Provisioning"),
        ]),
    );
    let plan = run_objects(&p, &[], &BTreeMap::new(), &lists);
    assert_eq!(plan.records_put.len(), 1, "{plan:?}");
    let (name, r) = &plan.records_put[0];
    assert_eq!((name.as_str(), r.created), ("a", true));
    assert_eq!(r.source_ref.as_ref().unwrap().cluster, "mgmt");
    assert_eq!(
        plan.edits,
        [Edit {
            cluster: "a".into(),
            set_labels: labels(&[("provider", "capi")]),
            accept: true,
            create: true,
            lease_seconds: Some(90),
            ..Default::default()
        }]
    );
    let t = &plan.statuses["capi"];
    assert_eq!((t.imported, t.sources), (1, 2));
    assert!(t.unlisted.is_empty());
}

#[test]
fn one_missing_list_never_deletes_two_do() {
    let p = [capi("capi").build()];
    let c = [cluster("a")
        .accepted()
        .origin(ClusterOrigin::Import)
        .label("provider", "capi")
        .build()];
    let empty = listed(true, Ok(vec![]));
    let records = BTreeMap::from([("a".to_string(), own_record("a", true, 0))]);
    let plan = run_objects(&p, &c, &records, &empty);
    assert!(plan.deletes.is_empty(), "one list without it: {plan:?}");
    assert_eq!(plan.records_put[0].1.missing_lists, 1);
    // The same list seen again (a pass on a cluster change) counts nothing.
    let records = BTreeMap::from([("a".to_string(), own_record("a", true, 1))]);
    let stale = listed(false, Ok(vec![]));
    let plan = run_objects(&p, &c, &records, &stale);
    assert!(
        plan.deletes.is_empty() && plan.records_put.is_empty(),
        "{plan:?}"
    );
    // Back in the next list: the count starts over.
    let back = listed(true, Ok(vec![object("a", "Provisioned")]));
    let plan = run_objects(&p, &c, &records, &back);
    assert!(plan.deletes.is_empty());
    assert_eq!(plan.records_put[0].1.missing_lists, 0, "{plan:?}");
    // A second complete list without it: deleted.
    let plan = run_objects(&p, &c, &records, &empty);
    assert_eq!(plan.deletes, ["a"]);
    assert!(
        plan.records_delete.is_empty(),
        "the record goes once the cluster is gone"
    );
    assert_eq!(plan.statuses["capi"].imported, 0);
}

#[test]
fn a_failed_list_deletes_nothing_and_names_the_spoke() {
    let p = [capi("capi").build()];
    let c = [cluster("a")
        .accepted()
        .origin(ClusterOrigin::Import)
        .build()];
    let records = BTreeMap::from([("a".to_string(), own_record("a", true, 1))]);
    let failed = listed(true, Err("the agent of \"mgmt\" did not answer".into()));
    let plan = run_objects(&p, &c, &records, &failed);
    assert!(
        plan.deletes.is_empty() && plan.records_put.is_empty() && plan.records_delete.is_empty(),
        "{plan:?}"
    );
    let t = &plan.statuses["capi"];
    assert_eq!(t.unlisted[0].0, "mgmt");
    assert!(t.unlisted[0].1.contains("did not answer"));
    assert_eq!(t.imported, 1, "still counted");
    // Not polled yet: the same.
    let plan = run_objects(&p, &c, &records, &BTreeMap::new());
    assert!(plan.deletes.is_empty() && plan.records_put.is_empty());
    assert_eq!(plan.statuses["capi"].unlisted[0].1, "not listed yet");
}

#[test]
fn hand_made_and_adopted_clusters_are_never_deleted() {
    let p = [capi("capi").build()];
    // A cluster made by hand before the policy matched its name: adopted (access only).
    let c = [cluster("a").build()];
    let lists = listed(true, Ok(vec![object("a", "Provisioned")]));
    let plan = run_objects(&p, &c, &BTreeMap::new(), &lists);
    let (_, r) = &plan.records_put[0];
    assert!(!r.created, "{r:?}");
    assert_eq!(
        plan.edits,
        [Edit {
            cluster: "a".into(),
            accept: true,
            ..Default::default()
        }],
        "no labels, no lease: access fields only"
    );
    assert_eq!(plan.statuses["capi"].adopted, 1);
    // Its source gone twice: only the record goes.
    let records = BTreeMap::from([("a".to_string(), own_record("a", false, 1))]);
    let empty = listed(true, Ok(vec![]));
    let plan = run_objects(&p, &c, &records, &empty);
    assert!(plan.deletes.is_empty());
    assert_eq!(plan.records_delete, ["a"]);
    // A record that says "created" for a cluster without the IMPORT origin (hand-made, or a
    // record older than the marker): never deleted either.
    let records = BTreeMap::from([("a".to_string(), own_record("a", true, 1))]);
    for o in [
        ClusterOrigin::Unspecified,
        ClusterOrigin::Document,
        ClusterOrigin::Registration,
    ] {
        let c = [cluster("a").accepted().origin(o).build()];
        let plan = run_objects(&p, &c, &records, &empty);
        assert!(plan.deletes.is_empty(), "{o:?}");
        assert_eq!(plan.records_delete, ["a"]);
    }
}

#[test]
fn references_chain_and_feed_the_condition_and_the_template() {
    let mut p = capi("capi");
    let spec = p.0.spec.as_mut().unwrap();
    spec.references = vec![
        flotilla_api::v1::ImportReference {
            resource: "secrets".into(),
            namespace: "source.metadata.namespace".into(),
            name: r#"source.metadata.name + "-kubeconfig""#.into(),
            key: "kubeconfig".into(),
            ..Default::default()
        },
        flotilla_api::v1::ImportReference {
            resource: "configmaps".into(),
            namespace: "references.kubeconfig.metadata.namespace".into(),
            name: r#"references.kubeconfig.metadata.labels["site"]"#.into(),
            key: "site".into(),
            ..Default::default()
        },
    ];
    spec.creation_condition = r#"references.site.data.ready == "yes""#.into();
    spec.template = r#"{"labels": {"site": references.site.metadata.name}}"#.into();
    let p = p.build();
    // The second reference's target comes from the first one's object.
    let vars =
        crate::importpolicy::compiled::Vars::of(json_value(&object("a", "Provisioned").object));
    assert_eq!(
        p.reference_target(0, &vars).unwrap(),
        ("default".to_string(), "a-kubeconfig".to_string())
    );
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "a-kubeconfig", "namespace": "default", "labels": {"site": "lyon"}}});
    let vars = with_reference(&vars, "kubeconfig", json_value(&secret));
    assert_eq!(
        p.reference_target(1, &vars).unwrap(),
        ("default".to_string(), "lyon".to_string())
    );
    let site = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "lyon", "namespace": "default"}, "data": {"ready": "yes"}});
    let mut a = object("a", "Provisioned");
    a.references = Ok(vec![("kubeconfig".into(), secret), ("site".into(), site)]);
    let mut b = object("b", "Provisioned");
    b.references =
        Err("spec.references[0] (kubeconfig): secrets default/b-kubeconfig not found".into());
    let ps = [p];
    let plan = run_objects(&ps, &[], &BTreeMap::new(), &listed(true, Ok(vec![a, b])));
    assert_eq!(plan.edits.len(), 1, "{plan:?}");
    assert_eq!(plan.edits[0].set_labels, labels(&[("site", "lyon")]));
    let errors = &plan.statuses["capi"].errors;
    assert!(
        errors[0].contains("mgmt: default/b") && errors[0].contains("not found"),
        "{errors:?}"
    );
}

#[test]
fn a_name_held_by_another_source_is_an_error_not_a_takeover() {
    let p = [capi("capi").build(), policy("edge").build()];
    let c = [cluster("a").accepted().build()];
    let records = BTreeMap::from([(
        "a".to_string(),
        ImportRecord {
            policy: "edge".into(),
            created: true,
            ..Default::default()
        },
    )]);
    let lists = listed(true, Ok(vec![object("a", "Provisioned")]));
    let plan = run_objects(&p, &c, &records, &lists);
    assert!(plan.edits.iter().all(|e| !e.create), "{plan:?}");
    assert!(
        plan.records_put.iter().all(|(_, r)| r.policy == "edge"),
        "{plan:?}"
    );
    assert!(plan.statuses["capi"].errors[0].contains("held by ClusterImportPolicy \"edge\""));
    // Two objects (in two namespaces) naming one cluster: the first one wins.
    let mut other = object("a", "Provisioned");
    other.namespace = "team-b".into();
    let lists = listed(true, Ok(vec![object("a", "Provisioned"), other]));
    let plan = run_objects(&p[..1], &[], &BTreeMap::new(), &lists);
    assert_eq!(plan.edits.len(), 1);
    assert!(plan.statuses["capi"].errors[0].contains("named by another source"));
}

#[test]
fn template_taints_and_lease_follow_on_own_clusters_only() {
    let mut p = capi("capi");
    p.0.spec.as_mut().unwrap().template =
        r#"{"labels": {"provider": "capi"}, "taints": [{"key": "capi.io/new", "effect": "NoSelect"}], "leaseDurationSeconds": 90}"#.into();
    let p = [p.build()];
    let own = cluster("a")
        .accepted()
        .origin(ClusterOrigin::Import)
        .label("provider", "capi")
        .build();
    let records = BTreeMap::from([("a".to_string(), own_record("a", true, 0))]);
    let lists = listed(true, Ok(vec![object("a", "Provisioned")]));
    let plan = run_objects(&p, &[own], &records, &lists);
    let e = &plan.edits[0];
    assert_eq!(e.lease_seconds, Some(90));
    assert_eq!(e.taints.as_ref().unwrap()[0].key, "capi.io/new");
    assert!(!e.create && !e.accept);
    // Adopted: none of it.
    let hand = cluster("a").accepted().build();
    let records = BTreeMap::from([("a".to_string(), own_record("a", false, 0))]);
    let plan = run_objects(&p, &[hand], &records, &lists);
    assert!(plan.edits.is_empty(), "{plan:?}");
    // A bad taint or lease is an error naming the template key.
    for (t, field) in [
        (
            r#"{"taints": [{"key": "x", "effect": "Sometimes"}]}"#,
            "effect",
        ),
        (r#"{"leaseDurationSeconds": 0}"#, "leaseDurationSeconds"),
    ] {
        let p = [capi("capi").template(t).build()];
        let plan = run_objects(&p, &[], &BTreeMap::new(), &lists);
        assert!(plan.edits.is_empty());
        let e = &plan.statuses["capi"].errors[0];
        assert!(e.contains(field), "{e}");
    }
}

#[test]
fn the_capi_example_creates_a_provisioned_cluster_with_its_kubeconfig() {
    let yaml = include_str!("../../../../../examples/importpolicy-capi.yaml");
    let Ok(flotilla_api::ocm::Document::ImportPolicy(p)) =
        flotilla_api::ocm::parse_documents(yaml).remove(0)
    else {
        panic!("the example is a ClusterImportPolicy");
    };
    let p = [CompiledPolicy::new(&p).expect("the example compiles")];
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "a-kubeconfig", "namespace": "default"}});
    let mut a = object("a", "Provisioned");
    a.references = Ok(vec![("kubeconfig".into(), secret)]);
    let mut skipped = object("b", "Provisioned");
    skipped.object["metadata"]["labels"] = serde_json::json!({"flotilla.io/skip": "yes"});
    let lists = BTreeMap::from([(
        "capi".to_string(),
        BTreeMap::from([(
            "mgmt-1".to_string(),
            Listing {
                fresh: true,
                result: Ok(vec![a, skipped, object("c", "Provisioning")]),
            },
        )]),
    )]);
    let plan = run_objects(&p, &[], &BTreeMap::new(), &lists);
    assert!(plan.statuses["capi"].errors.is_empty(), "{plan:?}");
    assert_eq!(plan.edits.len(), 1, "{plan:?}");
    let e = &plan.edits[0];
    assert_eq!(e.cluster, "a");
    assert_eq!(e.set_labels[CLUSTERSET_LABEL], "capi");
    assert_eq!(e.taints.as_ref().unwrap()[0].key, "capi.flotilla.io/new");
    assert_eq!(e.lease_seconds, Some(60));
}

#[test]
fn in_secure_mode_an_object_source_never_accepts_a_pending_cluster_it_adopts() {
    let p = [capi("capi").build()];
    let lists = listed(true, Ok(vec![object("a", "Provisioned")]));
    let stored = p.iter().map(|p| p.name.clone()).collect();
    let run = |c: &[Arc<ManagedCluster>], records: &BTreeMap<String, ImportRecord>| {
        plan(&Snapshot {
            policies: &p,
            stored: &stored,
            clusters: c,
            records,
            secure: true,
            lists: &judged(&p, &lists),
            budget: &unlimited(&p),
            max_created: usize::MAX,
        })
    };
    // "a" registered first with the bootstrap credential (its key bound), then a CAPI object
    // of that name appeared: adopted, but its key is the admin's to accept, not the policy's.
    let c = [cluster("a").build()];
    let plan = run(&c, &BTreeMap::new());
    assert!(plan.edits.iter().all(|e| !e.accept), "{:?}", plan.edits);
    assert_eq!(plan.statuses["capi"].adopted, 1);
    assert_eq!(plan.statuses["capi"].waiting, 1);
    // A cluster the policy created ahead of its agent, whose agent joined with a join
    // credential (key bound): accepted.
    let records = BTreeMap::from([("a".to_string(), own_record("a", true, 0))]);
    let c = [cluster("a").origin(ClusterOrigin::Import).build()];
    let plan = run(&c, &records);
    assert!(plan.edits.iter().any(|e| e.accept), "{:?}", plan.edits);
}

#[test]
fn status_errors_are_cut_however_long_what_failed_is() {
    let mut t = Tally::default();
    t.error("x".repeat(1 << 20));
    assert!(t.errors[0].len() <= crate::importpolicy::source::MAX_ERROR_LEN + 3);
}

fn creations(plan: &Plan) -> Vec<&str> {
    plan.edits
        .iter()
        .filter(|e| e.create)
        .map(|e| e.cluster.as_str())
        .collect()
}

#[test]
fn creations_wait_for_the_policys_rate_and_stop_at_its_cap() {
    let p = [capi("capi").build()];
    let objects = (0..6)
        .map(|i| object(&format!("c{i}"), "Provisioned"))
        .collect();
    let lists = judged(&p, &listed(true, Ok(objects)));
    let stored = p.iter().map(|p| p.name.clone()).collect();
    let run = |clusters: &[Arc<ManagedCluster>],
               records: &BTreeMap<String, ImportRecord>,
               budget: usize,
               max_created: usize| {
        plan(&Snapshot {
            policies: &p,
            stored: &stored,
            clusters,
            records,
            secure: false,
            lists: &lists,
            budget: &BTreeMap::from([("capi".to_string(), budget)]),
            max_created,
        })
    };
    // The rate: two now, the other four in later passes (no error: they only wait).
    let first = run(&[], &BTreeMap::new(), 2, 100);
    assert_eq!(creations(&first), ["c0", "c1"]);
    assert_eq!(first.created["capi"], 2);
    assert_eq!(first.records_put.len(), 2, "no record for what waits");
    let t = &first.statuses["capi"];
    assert_eq!((t.deferred, t.over_cap), (4, 0));
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    // The cap: holding two, the policy may create one more, whatever its rate allows.
    let live: Vec<Arc<ManagedCluster>> = ["c0", "c1"]
        .iter()
        .map(|n| {
            cluster(n)
                .accepted()
                .origin(ClusterOrigin::Import)
                .label("provider", "capi")
                .build()
        })
        .collect();
    let records = BTreeMap::from([
        ("c0".to_string(), own_record("c0", true, 0)),
        ("c1".to_string(), own_record("c1", true, 0)),
    ]);
    let capped = run(&live, &records, 10, 3);
    assert_eq!(creations(&capped), ["c2"]);
    let t = &capped.statuses["capi"];
    assert_eq!((t.deferred, t.over_cap, t.imported), (0, 3, 3));
    assert!(
        t.errors[0].contains("3 source objects") && t.errors[0].contains("--import-max-clusters"),
        "{:?}",
        t.errors
    );
    // Adopting a cluster that exists creates nothing: neither limit applies.
    let hand = [cluster("c0").build()];
    let adopted = run(&hand, &BTreeMap::new(), 0, 0);
    assert!(
        adopted
            .records_put
            .iter()
            .any(|(k, r)| k == "c0" && !r.created),
        "{adopted:?}"
    );
    assert!(creations(&adopted).is_empty());
}

#[test]
fn a_verdict_keeps_nothing_of_the_object_or_its_references() {
    let p = capi("capi").build();
    let mut o = object("a", "Provisioned");
    o.object["metadata"]["annotations"] = serde_json::json!({"big": "x".repeat(1 << 20)});
    o.references = Ok(vec![(
        "kubeconfig".into(),
        serde_json::json!({"data": {"value": "y".repeat(1 << 20)}}),
    )]);
    let j = judge(&p, o);
    assert!(matches!(j.verdict, Verdict::Selected(_)), "{j:?}");
    assert!(j.weight() < 1024, "{} bytes kept", j.weight());
    // A template copying a spoke's labels is bounded.
    let p = capi("capi")
        .template(r#"{"labels": source.metadata.labels}"#)
        .build();
    let mut o = object("b", "Provisioned");
    o.object["metadata"]["labels"] = (0..100)
        .map(|i| (format!("k{i}"), serde_json::json!("v")))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let Verdict::Selected(s) = judge(&p, o).verdict else {
        panic!("selected");
    };
    let e = s.template.unwrap_err();
    assert!(e.contains("100 labels, at most 64"), "{e}");
    // An error is cut: a spoke chooses the values CEL errors print.
    let p = capi("capi")
        .template(r#"{"labels": {"x": source.metadata.name + 1}}"#)
        .build();
    let mut o = object("c", "Provisioned");
    o.name = "c".repeat(5000);
    o.object["metadata"]["name"] = serde_json::json!("c".repeat(5000));
    match judge(&p, o).verdict {
        Verdict::Failed(e) => assert!(e.len() <= 303, "{} bytes", e.len()),
        Verdict::Selected(s) => {
            assert!(s.template.unwrap_err().len() <= 303)
        }
        Verdict::Skipped => panic!("selected"),
    }
}

use super::*;
use crate::importpolicy::compiled::CompiledPolicy;
use crate::importpolicy::compiled::{json_value, with_reference};
use flotilla_api::meta::{COND_HUB_DENIED, status};
use flotilla_api::v1::ClusterOrigin;
use flotilla_api::v1::{
    ClusterImportPolicy, ClusterImportPolicySpec, Condition, HubClusterState, ImportSource,
    ManagedClusterSpec, ManagedClusterStatus, ObjectMeta,
};

/// A cluster fixture: pending, no labels, an agent key bound.
struct C(ManagedCluster);

fn cluster(name: &str) -> C {
    C(ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.into(),
            uid: format!("uid-{name}"),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSpec::default()),
        status: Some(ManagedClusterStatus::default()),
        hub: Some(HubClusterState {
            agent_public_key: format!("U{name}"),
            ..Default::default()
        }),
    })
}

impl C {
    fn label(mut self, k: &str, v: &str) -> Self {
        let m = self.0.metadata.as_mut().unwrap();
        m.labels.insert(k.into(), v.into());
        self
    }
    fn accepted(mut self) -> Self {
        self.0.spec.as_mut().unwrap().hub_accepts_client = true;
        self
    }
    fn denied(mut self) -> Self {
        self.0.status.as_mut().unwrap().conditions.push(Condition {
            r#type: COND_HUB_DENIED.into(),
            status: status::TRUE.into(),
            ..Default::default()
        });
        self
    }
    fn no_key(mut self) -> Self {
        self.0.hub.as_mut().unwrap().agent_public_key.clear();
        self
    }
    fn waiting_key(mut self) -> Self {
        self.0.hub.as_mut().unwrap().requested_public_key = "Uother".into();
        self
    }
    fn build(self) -> Arc<ManagedCluster> {
        Arc::new(self.0)
    }
}

/// A registration policy fixture: selects `site=edge`, labels `tier=edge`, set `edge`.
struct P(ClusterImportPolicy);

fn policy(name: &str) -> P {
    P(ClusterImportPolicy {
        metadata: Some(ObjectMeta {
            name: name.into(),
            generation: 1,
            ..Default::default()
        }),
        spec: Some(ClusterImportPolicySpec {
            source: Some(ImportSource {
                group: REGISTRATION_GROUP.into(),
                resource: REGISTRATIONS.into(),
                selector: r#"source.metadata.labels["site"] == "edge""#.into(),
                ..Default::default()
            }),
            template: r#"{"labels": {"tier": "edge"}, "clusterSet": "edge"}"#.into(),
            ..Default::default()
        }),
        status: None,
    })
}

impl P {
    fn template(mut self, t: &str) -> Self {
        let m = self.0.metadata.as_mut().unwrap();
        m.generation += 1;
        self.0.spec.as_mut().unwrap().template = t.into();
        self
    }
    fn condition(mut self, c: &str) -> Self {
        self.0.spec.as_mut().unwrap().creation_condition = c.into();
        self
    }
    fn build(self) -> CompiledPolicy {
        CompiledPolicy::new(&self.0).expect("the fixture compiles")
    }
}

fn run(
    policies: &[CompiledPolicy],
    clusters: &[Arc<ManagedCluster>],
    records: &BTreeMap<String, ImportRecord>,
    secure: bool,
) -> Plan {
    // A stored policy that does not compile: its records stay.
    let stored = policies
        .iter()
        .map(|p| p.name.clone())
        .chain(["broken".to_string()])
        .collect();
    plan(&Snapshot {
        policies,
        stored: &stored,
        clusters,
        records,
        secure,
        lists: &BTreeMap::new(),
    })
}

fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

#[test]
fn a_matching_pending_cluster_is_recorded_labelled_and_accepted() {
    let p = [policy("edge").build()];
    let c = [cluster("c1").label("site", "edge").build()];
    let plan = run(&p, &c, &BTreeMap::new(), false);
    assert_eq!(plan.records_put.len(), 1);
    let (name, r) = &plan.records_put[0];
    assert_eq!(
        (name.as_str(), r.policy.as_str(), r.created),
        ("c1", "edge", true)
    );
    assert_eq!(
        plan.edits,
        [Edit {
            cluster: "c1".into(),
            set_labels: labels(&[("tier", "edge"), (CLUSTERSET_LABEL, "edge")]),
            remove_labels: vec![],
            accept: true,
            ..Default::default()
        }]
    );
    assert_eq!(plan.statuses["edge"].imported, 1);
}

#[test]
fn non_matching_and_condition_false_clusters_stay_pending() {
    let p = [policy("edge")
        .condition(r#"source.metadata.labels["ready"] == "yes""#)
        .build()];
    let c = [
        cluster("other").label("site", "core").build(),
        cluster("unready").label("site", "edge").build(),
    ];
    let plan = run(&p, &c, &BTreeMap::new(), false);
    assert_eq!(
        plan,
        Plan {
            statuses: plan.statuses.clone(),
            ..Default::default()
        }
    );
    // A string "TRUE" counts as true, as Clusterpedia's templates.
    let p = [policy("edge").condition(r#""TRUE""#).build()];
    assert_eq!(run(&p, &c[1..], &BTreeMap::new(), false).edits.len(), 1);
}

#[test]
fn a_template_edit_relabels_only_own_clusters_and_only_its_own_labels() {
    let first = [policy("edge").build()];
    let own = cluster("own")
        .label("site", "edge")
        .label("tier", "edge")
        .label("admin", "x")
        .label(CLUSTERSET_LABEL, "edge")
        .accepted()
        .build();
    let adopted = cluster("hand")
        .label("site", "edge")
        .label("tier", "old")
        .accepted()
        .build();
    // Records as the first plan left them.
    let mut records = BTreeMap::new();
    let created = ImportRecord {
        policy: "edge".into(),
        created: true,
        applied_labels: labels(&[("tier", "edge"), (CLUSTERSET_LABEL, "edge")]),
        policy_generation: 1,
        ..Default::default()
    };
    records.insert("own".to_string(), created);
    let plan = run(&first, std::slice::from_ref(&own), &records, false);
    assert!(
        plan.edits.is_empty() && plan.records_put.is_empty(),
        "{plan:?}"
    );
    let edited = [policy("edge")
        .template(r#"{"labels": {"zone": "z1"}, "clusterSet": "edge2"}"#)
        .build()];
    let plan = run(&edited, &[own, adopted], &records, false);
    assert_eq!(
        plan.edits,
        [Edit {
            cluster: "own".into(),
            set_labels: labels(&[("zone", "z1"), (CLUSTERSET_LABEL, "edge2")]),
            remove_labels: vec!["tier".into()],
            accept: false,
            ..Default::default()
        }],
        "the adopted cluster and the admin's label are untouched"
    );
    let hand = &plan
        .records_put
        .iter()
        .find(|(n, _)| n == "hand")
        .unwrap()
        .1;
    assert!(!hand.created && hand.applied_labels.is_empty());
    assert_eq!(
        (
            plan.statuses["edge"].imported,
            plan.statuses["edge"].adopted
        ),
        (1, 1)
    );
}

#[test]
fn an_adopted_pending_cluster_gets_access_fields_only() {
    let p = [policy("edge").build()];
    let c = [cluster("c1").label("site", "edge").build()];
    let mut records = BTreeMap::new();
    records.insert(
        "c1".to_string(),
        ImportRecord {
            policy: "edge".into(),
            created: false,
            policy_generation: 1,
            ..Default::default()
        },
    );
    let plan = run(&p, &c, &records, false);
    assert_eq!(
        plan.edits,
        [Edit {
            cluster: "c1".into(),
            accept: true,
            ..Default::default()
        }]
    );
}

#[test]
fn secure_mode_accepts_only_a_bound_key_with_none_waiting() {
    let p = [policy("edge").build()];
    let c = [
        cluster("unbound").label("site", "edge").no_key().build(),
        cluster("waiting")
            .label("site", "edge")
            .waiting_key()
            .build(),
        cluster("denied").label("site", "edge").denied().build(),
        cluster("ok").label("site", "edge").build(),
    ];
    let plan = run(&p, &c, &BTreeMap::new(), true);
    let accepted: Vec<&str> = plan
        .edits
        .iter()
        .filter(|e| e.accept)
        .map(|e| e.cluster.as_str())
        .collect();
    assert_eq!(accepted, ["ok"]);
    assert_eq!(
        plan.statuses["edge"].waiting, 2,
        "the denied one does not wait"
    );
    // Outside secure mode an unbound key is fine, a waiting one still is not.
    let plan = run(&p, &c, &BTreeMap::new(), false);
    assert_eq!(plan.edits.iter().filter(|e| e.accept).count(), 2);
}

#[test]
fn records_of_gone_clusters_or_policies_are_dropped() {
    let p = [policy("edge").build()];
    let mut records = BTreeMap::new();
    for (cluster, owner) in [
        ("gone", "edge"),
        ("orphan", "deleted-policy"),
        ("kept", "broken"),
    ] {
        records.insert(
            cluster.to_string(),
            ImportRecord {
                policy: owner.into(),
                ..Default::default()
            },
        );
    }
    let c = [
        cluster("orphan").accepted().build(),
        cluster("kept").accepted().build(),
    ];
    let plan = run(&p, &c, &records, false);
    assert_eq!(plan.records_delete, ["gone", "orphan"]);
    assert!(plan.edits.is_empty());
    // A cluster held by a policy that does not compile is not taken by another one.
    let c = [cluster("kept").label("site", "edge").build()];
    let plan = run(&p, &c, &records, false);
    assert!(
        plan.edits.is_empty() && plan.records_put.is_empty(),
        "{plan:?}"
    );
}

#[test]
fn template_errors_are_reported_bounded_and_touch_nothing() {
    let p = [policy("edge")
        .template(r#"{"labels": {"tier": 1}, "bogus": true}"#)
        .build()];
    let c: Vec<_> = (0..20)
        .map(|i| cluster(&format!("c{i}")).label("site", "edge").build())
        .collect();
    let plan = run(&p, &c, &BTreeMap::new(), false);
    assert!(plan.edits.is_empty() && plan.records_put.is_empty());
    let errors = &plan.statuses["edge"].errors;
    assert_eq!(errors.len(), MAX_STATUS_ERRORS);
    assert!(errors[0].contains("spec.template"), "{errors:?}");
}

#[test]
fn a_second_policy_for_the_same_source_names_the_owner() {
    let held = [policy("first").0];
    assert_eq!(
        owner_of("registration.flotilla.io/registrations", "second", &held),
        Some("first".into())
    );
    assert_eq!(
        owner_of("registration.flotilla.io/registrations", "first", &held),
        None
    );
}

#[test]
fn bad_expressions_are_refused_naming_their_field() {
    let mut p = policy("edge").condition("nope(").0;
    p.spec.as_mut().unwrap().source.as_mut().unwrap().selector = "managedCluster.x".into();
    let e = CompiledPolicy::new(&p).unwrap_err().join("\n");
    assert!(e.contains("spec.creationCondition"), "{e}");
    assert!(
        e.contains("spec.source.selector") && e.contains("undeclared"),
        "{e}"
    );
}

// ---- Object sources (Cluster API `Cluster`s listed on a management cluster) ----

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

fn listed(
    fresh: bool,
    result: Result<Vec<SourceObject>, String>,
) -> BTreeMap<String, BTreeMap<String, Listing>> {
    BTreeMap::from([(
        "capi".to_string(),
        BTreeMap::from([("mgmt".to_string(), Listing { fresh, result })]),
    )])
}

fn run_objects(
    policies: &[CompiledPolicy],
    clusters: &[Arc<ManagedCluster>],
    records: &BTreeMap<String, ImportRecord>,
    lists: &BTreeMap<String, BTreeMap<String, Listing>>,
) -> Plan {
    let stored = policies.iter().map(|p| p.name.clone()).collect();
    plan(&Snapshot {
        policies,
        stored: &stored,
        clusters,
        records,
        secure: false,
        lists,
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
    let vars = super::super::compiled::Vars::of(json_value(&object("a", "Provisioned").object));
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
    let yaml = include_str!("../../../../examples/importpolicy-capi.yaml");
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
            lists: &lists,
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
    assert!(t.errors[0].len() <= super::super::source::MAX_ERROR_LEN + 3);
}

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
        budget: &BTreeMap::new(),
        max_created: usize::MAX,
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

mod objects;

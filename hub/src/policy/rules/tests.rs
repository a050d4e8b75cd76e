use super::*;
use flotilla_api::v1::{
    BindingSubject, Condition, ManagedClusterSpec, ManagedClusterStatus, ObjectMeta,
    PlacementRuleSpec, PlacementSubject, PolicySetSpec, PolicySpec,
};
use std::sync::Arc;

fn meta(ns: &str, name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    })
}

/// A PlacementBinding builder.
fn binding(ns: &str, name: &str, kind: &str, placement: &str) -> PlacementBinding {
    PlacementBinding {
        metadata: meta(ns, name),
        placement_ref: Some(PlacementSubject {
            api_group: if kind == "Placement" {
                "cluster.open-cluster-management.io".into()
            } else {
                "apps.open-cluster-management.io".into()
            },
            kind: kind.into(),
            name: placement.into(),
        }),
        subjects: Vec::new(),
        binding_overrides: None,
        sub_filter: String::new(),
    }
}

fn subject(mut b: PlacementBinding, kind: &str, name: &str) -> PlacementBinding {
    b.subjects.push(BindingSubject {
        api_group: "policy.open-cluster-management.io".into(),
        kind: kind.into(),
        name: name.into(),
    });
    b
}

fn set(ns: &str, name: &str, policies: &[&str]) -> PolicySet {
    PolicySet {
        metadata: meta(ns, name),
        spec: Some(PolicySetSpec {
            description: String::new(),
            policies: policies.iter().map(|s| s.to_string()).collect(),
        }),
        status: None,
    }
}

fn cluster(name: &str, labels: &[(&str, &str)], available: &str) -> Arc<ManagedCluster> {
    Arc::new(ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSpec {
            hub_accepts_client: true,
            ..Default::default()
        }),
        status: Some(ManagedClusterStatus {
            conditions: vec![Condition {
                r#type: DEFAULT_RULE_CONDITION.into(),
                status: available.into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn a_policy_is_bound_directly_and_through_its_sets_in_its_namespace_only() {
    let bindings = vec![
        subject(binding("p", "b1", "Placement", "all"), "Policy", "pol"),
        subject(
            binding("p", "b2", "PlacementRule", "dev"),
            "PolicySet",
            "set",
        ),
        subject(binding("p", "b3", "Placement", "x"), "Policy", "other"),
        subject(binding("q", "b4", "Placement", "all"), "Policy", "pol"),
    ];
    let sets = vec![
        set("p", "set", &["pol", "other"]),
        set("q", "set", &["pol"]),
    ];
    let bound = bindings_of("p", "pol", &bindings, &sets);
    assert_eq!(
        bound,
        vec![
            Bound {
                binding: "b1".into(),
                placement: PlacementKind::Placement("all".into()),
                policy_set: None,
                enforce: false
            },
            Bound {
                binding: "b2".into(),
                placement: PlacementKind::Rule("dev".into()),
                policy_set: Some("set".into()),
                enforce: false
            },
        ]
    );
    // A binding to a set that does not list the policy binds nothing.
    assert!(bindings_of("p", "nope", &bindings, &sets).is_empty());
}

/// A built-in-style set: `global` selects every cluster, any other name by the exclusive label.
fn cluster_set(name: &str) -> ManagedClusterSet {
    ManagedClusterSet {
        metadata: meta("", name),
        spec: Some(flotilla_api::clusterset::builtin_spec(name)),
        status: None,
    }
}

const GLOBAL: &str = flotilla_api::meta::GLOBAL_CLUSTERSET;

#[test]
fn a_placement_rule_decides_only_clusters_of_the_sets_bound_in_its_namespace() {
    let set_label = flotilla_api::meta::CLUSTERSET_LABEL;
    let clusters = vec![
        cluster("a1", &[(set_label, "team-a")], "True"),
        cluster("b1", &[(set_label, "team-b")], "True"),
        cluster("loose", &[], "True"),
    ];
    // Every cluster matches: no selector, no names.
    let rule = PlacementRule {
        metadata: meta("team-a-apps", "all"),
        spec: Some(PlacementRuleSpec::default()),
        status: None,
    };
    assert!(
        rule_clusters(&rule, &clusters, &[]).is_empty(),
        "nothing bound"
    );
    assert_eq!(
        rule_clusters(&rule, &clusters, &[cluster_set("team-a")]),
        ["a1"]
    );
    assert_eq!(
        rule_clusters(
            &rule,
            &clusters,
            &[cluster_set("team-a"), cluster_set("team-b")]
        ),
        ["a1", "b1"]
    );
    assert_eq!(
        rule_clusters(&rule, &clusters, &[cluster_set(GLOBAL)]),
        ["a1", "b1", "loose"]
    );
}

#[test]
fn placement_rules_select_by_labels_conditions_names_and_replicas() {
    let clusters = vec![
        cluster("a", &[("env", "dev")], "True"),
        cluster("b", &[("env", "dev")], "Unknown"),
        cluster("c", &[("env", "prod")], "True"),
        cluster("d", &[("env", "dev")], "True"),
    ];
    let mut rule = PlacementRule {
        metadata: meta("p", "dev"),
        spec: Some(PlacementRuleSpec {
            cluster_selector: Some(flotilla_api::selector::parse("env=dev").unwrap()),
            ..Default::default()
        }),
        status: None,
    };
    assert_eq!(
        rule_clusters(&rule, &clusters, &[cluster_set(GLOBAL)]),
        ["a", "d"],
        "available by default"
    );
    let spec = rule.spec.as_mut().unwrap();
    spec.cluster_conditions = vec![flotilla_api::v1::ClusterConditionFilter {
        r#type: DEFAULT_RULE_CONDITION.into(),
        status: "Unknown".into(),
    }];
    assert_eq!(
        rule_clusters(&rule, &clusters, &[cluster_set(GLOBAL)]),
        ["b"]
    );
    let spec = rule.spec.as_mut().unwrap();
    spec.cluster_conditions.clear();
    spec.cluster_replicas = Some(1);
    assert_eq!(
        rule_clusters(&rule, &clusters, &[cluster_set(GLOBAL)]),
        ["a"]
    );
    let spec = rule.spec.as_mut().unwrap();
    spec.cluster_replicas = None;
    spec.cluster_selector = None;
    spec.clusters = vec!["c".into(), "zz".into()];
    assert_eq!(
        rule_clusters(&rule, &clusters, &[cluster_set(GLOBAL)]),
        ["c"]
    );
}

#[test]
fn a_binding_override_enforces_only_on_its_clusters_and_changes_the_spec_hash() {
    let mut b = Bound {
        binding: "b".into(),
        placement: PlacementKind::Placement("p1".into()),
        policy_set: None,
        enforce: true,
    };
    let other = Bound {
        binding: "o".into(),
        placement: PlacementKind::Placement("p2".into()),
        policy_set: None,
        enforce: false,
    };
    let decided: Vec<BTreeSet<String>> = vec![
        ["a".to_string()].into(),
        ["a".to_string(), "b".to_string()].into(),
    ];
    let t = targets(&[b.clone(), other.clone()], &decided);
    assert_eq!(t, BTreeMap::from([("a".into(), true), ("b".into(), false)]));
    b.enforce = false;
    assert!(!targets(&[b.clone(), other.clone()], &decided)["a"]);
    let st = root_status(&[b, other], &decided, &BTreeMap::new(), false);
    assert_eq!(st.placement[1].clusters, ["a", "b"]);

    let root = Policy {
        metadata: meta("policies", "ns"),
        spec: Some(PolicySpec {
            remediation_action: "inform".into(),
            ..Default::default()
        }),
        status: None,
    };
    let informed = replicated(&root, "a", false, 1, &[]);
    let enforced = replicated(&root, "a", true, 1, &[]);
    let m = informed.metadata.as_ref().unwrap();
    assert_eq!(
        (m.name.as_str(), m.namespace.as_str()),
        ("policies.ns", "a")
    );
    assert_eq!(m.labels[policies::ROOT_POLICY_LABEL], "policies.ns");
    assert_eq!(
        enforced.spec.as_ref().unwrap().remediation_action,
        "enforce"
    );
    assert_ne!(spec_hash(&informed), spec_hash(&enforced));
    assert_eq!(
        spec_hash(&informed),
        spec_hash(&replicated(&root, "a", false, 7, &[]))
    );
}

#[test]
fn stale_reports_and_missing_clusters_never_read_as_compliant() {
    let report = |generation: i64, c: &str| PolicyStatusReport {
        observed_generation: generation,
        compliant: c.into(),
        ..Default::default()
    };
    assert_eq!(
        reported(2, Some(&report(2, "Compliant"))),
        Compliance::Compliant
    );
    assert_eq!(
        reported(2, Some(&report(1, "Compliant"))),
        Compliance::Unknown
    );
    assert_eq!(reported(2, None), Compliance::Unknown);
    let per = BTreeMap::from([
        ("a".to_string(), Compliance::Compliant),
        ("b".to_string(), Compliance::Unknown),
    ]);
    let s = root_status(&[], &[], &per, false);
    assert_eq!(s.compliant, "");
    assert_eq!(s.status.len(), 2);
    assert_eq!(s.status[1].compliant, "");
    let none = root_status(&[], &[], &BTreeMap::new(), false);
    assert_eq!(none.compliant, "", "bound to no cluster is not compliant");
}

#[test]
fn reports_that_do_not_match_their_subject_are_refused() {
    let name = "policies.ns";
    let rid = policies::resource_id("edge-1", name);
    let good = PolicyStatusReport {
        cluster_name: "edge-1".into(),
        policy_name: name.into(),
        resource_id: rid.clone(),
        compliant: "Compliant".into(),
        ..Default::default()
    };
    assert_eq!(
        check_report(&good, "edge-1", &rid),
        Ok(("policies".into(), "ns".into()))
    );
    assert!(
        check_report(&good, "edge-2", &rid).is_err(),
        "another cluster"
    );
    let mut forged = good.clone();
    forged.policy_name = "policies.other".into();
    assert!(
        check_report(&forged, "edge-1", &rid).is_err(),
        "another policy"
    );
    let mut bad = good.clone();
    bad.compliant = "Maybe".into();
    assert!(check_report(&bad, "edge-1", &rid).is_err());
    let mut long = good;
    long.details = vec![Default::default(); 65];
    assert!(check_report(&long, "edge-1", &rid).is_err());
}

/// A member policy: its compliance, whether it is disabled, and the `(binding, set)` pairs of
/// its `status.placement` (set empty: bound directly).
fn member(compliant: &str, disabled: bool, placed: &[(&str, &str)]) -> Policy {
    Policy {
        metadata: None,
        spec: Some(PolicySpec {
            disabled,
            ..Default::default()
        }),
        status: Some(PolicyStatus {
            compliant: compliant.into(),
            placement: placed
                .iter()
                .map(|(binding, set)| PolicyPlacementStatus {
                    placement_binding: binding.to_string(),
                    placement: format!("{binding}-placement"),
                    placement_rule: String::new(),
                    policy_set: set.to_string(),
                    clusters: vec!["c1".into()],
                })
                .collect(),
            status: Vec::new(),
        }),
    }
}

fn policies_of(members: &[(&str, Policy)]) -> BTreeMap<String, Policy> {
    members
        .iter()
        .map(|(n, p)| (n.to_string(), p.clone()))
        .collect()
}

#[test]
fn policy_set_status_counts_missing_and_disabled_policies() {
    let s = set("p", "set", &["a", "b", "c"]);
    let policies = policies_of(&[
        ("a", member("NonCompliant", false, &[("bind", "set")])),
        ("b", member("", true, &[])),
    ]);
    let st = policy_set_status(&s, &policies);
    assert_eq!(st.compliant, "NonCompliant");
    assert_eq!(
        st.status_message,
        "Disabled policies: b; Deleted policies: c"
    );
    assert_eq!(st.placement[0].placement_binding, "bind");
}

#[test]
fn a_policy_set_whose_members_do_not_exist_lists_no_placement() {
    let st = policy_set_status(&set("p", "set", &["a", "b"]), &BTreeMap::new());
    assert!(st.placement.is_empty(), "{st:#?}");
    assert_eq!(st.status_message, "Deleted policies: a, b");
    assert_eq!(st.compliant, "");
}

#[test]
fn a_policy_set_lists_the_bindings_its_existing_members_were_bound_through_by_it() {
    let s = set("p", "set", &["a", "gone"]);
    let policies = policies_of(&[(
        "a",
        member(
            "Compliant",
            false,
            &[
                ("through-set", "set"),
                ("direct", ""),
                ("other", "other-set"),
            ],
        ),
    )]);
    let st = policy_set_status(&s, &policies);
    assert_eq!(
        st.placement,
        vec![PolicySetPlacement {
            placement_binding: "through-set".into(),
            placement: "through-set-placement".into(),
            placement_rule: String::new(),
        }]
    );
    assert_eq!(st.status_message, "Deleted policies: gone");
}

#[test]
fn a_disabled_member_still_gives_the_set_its_placement_once_per_binding() {
    let s = set("p", "set", &["a", "b"]);
    let policies = policies_of(&[
        (
            "a",
            member("", true, &[("z-bind", "set"), ("a-bind", "set")]),
        ),
        ("b", member("Compliant", false, &[("z-bind", "set")])),
    ]);
    let st = policy_set_status(&s, &policies);
    let bindings: Vec<&str> = st
        .placement
        .iter()
        .map(|p| p.placement_binding.as_str())
        .collect();
    assert_eq!(bindings, ["a-bind", "z-bind"]);
    assert_eq!(st.status_message, "Disabled policies: a");
    assert_eq!(st.compliant, "Compliant");
}

#[test]
fn a_policy_set_without_members_has_an_empty_status() {
    let st = policy_set_status(&set("p", "set", &[]), &BTreeMap::new());
    assert_eq!(st, PolicySetStatus::default());
}

#[test]
fn a_replicated_policy_depends_on_copies_and_on_the_policies_of_a_set() {
    let dep = |api: &str, kind: &str, name: &str| flotilla_api::v1::PolicyDependency {
        api_version: api.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: String::new(),
        compliance: "Compliant".into(),
    };
    let root = Policy {
        metadata: meta("policies", "app"),
        spec: Some(PolicySpec {
            remediation_action: "enforce".into(),
            dependencies: vec![dep(policy::POLICY_V1, "Policy", "base")],
            policy_templates: vec![flotilla_api::v1::PolicyTemplate {
                extra_dependencies: vec![dep(policy::POLICY_V1BETA1, "PolicySet", "baseline")],
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let set = |members: &[&str]| PolicySet {
        metadata: meta("policies", "baseline"),
        spec: Some(PolicySetSpec {
            policies: members.iter().map(|m| m.to_string()).collect(),
            ..Default::default()
        }),
        status: None,
    };
    let copy = replicated(&root, "a", false, 1, &[set(&["ns", "role"])]);
    let spec = copy.spec.as_ref().unwrap();
    assert_eq!(spec.dependencies[0].name, "policies.base");
    let extra: Vec<&str> = spec.policy_templates[0]
        .extra_dependencies
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(extra, ["policies.ns", "policies.role"]);
    // A set's members are part of the spec: a new member is a new generation for the clusters.
    assert_ne!(
        spec_hash(&copy),
        spec_hash(&replicated(&root, "a", false, 1, &[set(&["ns"])]))
    );
}

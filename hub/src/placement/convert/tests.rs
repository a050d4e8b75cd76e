use super::*;

fn base() -> v1::Placement {
    v1::Placement {
        metadata: Some(v1::ObjectMeta {
            name: "p".into(),
            namespace: "ns".into(),
            ..Default::default()
        }),
        spec: Some(v1::PlacementSpec::default()),
        status: None,
    }
}

#[test]
fn defaults_follow_ocm() {
    let mut p = base();
    p.spec.as_mut().unwrap().prioritizer_policy = Some(v1::PrioritizerPolicy {
        mode: String::new(),
        configurations: vec![v1::PrioritizerConfig {
            score_coordinate: Some(v1::ScoreCoordinate {
                built_in: "Steady".into(),
                ..Default::default()
            }),
            weight: None,
        }],
    });
    let s = placement(&p).unwrap();
    assert_eq!(s.prioritizer_policy.mode, sched::PrioritizerMode::Additive);
    assert_eq!(s.prioritizer_policy.configurations[0].weight, 1);
    assert_eq!(
        s.decision_strategy
            .group_strategy
            .clusters_per_decision_group,
        sched::IntOrString::hundred_percent()
    );
}

#[test]
fn enumerated_fields_ocm_rejects_are_invalid_and_named() {
    let mut p = base();
    let spec = p.spec.as_mut().unwrap();
    spec.prioritizer_policy = Some(v1::PrioritizerPolicy {
        mode: "Exact".into(),
        configurations: vec![v1::PrioritizerConfig {
            score_coordinate: Some(v1::ScoreCoordinate {
                r#type: "Sideways".into(),
                ..Default::default()
            }),
            weight: None,
        }],
    });
    spec.tolerations = vec![v1::Toleration {
        key: "k".into(),
        effect: "Sometimes".into(),
        ..Default::default()
    }];
    let errors = placement(&p).unwrap_err();
    let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.prioritizerPolicy.configurations[0].scoreCoordinate.type",
            "spec.tolerations[0].effect",
        ]
    );
    assert!(errors.iter().all(|e| e.kind == ErrorKind::Invalid));
}

#[test]
fn fields_ocm_leaves_open_are_carried_as_written() {
    let mut p = base();
    let spec = p.spec.as_mut().unwrap();
    spec.prioritizer_policy = Some(v1::PrioritizerPolicy {
        mode: "Fancy".into(),
        configurations: vec![],
    });
    spec.tolerations = vec![v1::Toleration {
        key: "k".into(),
        operator: "Like".into(),
        toleration_seconds: Some(-1),
        ..Default::default()
    }];
    spec.decision_strategy = Some(v1::DecisionStrategy {
        group_strategy: Some(v1::GroupStrategy {
            clusters_per_decision_group: "3".into(),
            clusters_per_decision_group_is_string: true,
            ..Default::default()
        }),
    });
    let s = placement(&p).unwrap();
    assert_eq!(
        s.prioritizer_policy.mode,
        sched::PrioritizerMode::Other("Fancy".into())
    );
    assert_eq!(
        s.tolerations[0].operator,
        sched::TolerationOperator::Other("Like".into())
    );
    assert_eq!(s.tolerations[0].toleration_seconds, Some(-1));
    assert_eq!(
        s.decision_strategy
            .group_strategy
            .clusters_per_decision_group,
        sched::IntOrString::String("3".into())
    );
    let kinds: Vec<_> = sched::validate(&s).into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [ErrorKind::Misconfigured, ErrorKind::Misconfigured]);
}

#[test]
fn spread_constraints_name_unknown_types_and_default_max_skew() {
    let mut errors = Vec::new();
    let c = spread_constraint(
        2,
        &v1::SpreadConstraint {
            topology_key: "zone".into(),
            topology_key_type: "Annotation".into(),
            when_unsatisfiable: "Sometimes".into(),
            ..Default::default()
        },
        &mut errors,
    );
    assert_eq!(c.max_skew, 1);
    assert_eq!(c.topology_key_type, sched::TopologyKeyType::Label);
    let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.spreadPolicy.spreadConstraints[2].topologyKeyType",
            "spec.spreadPolicy.spreadConstraints[2].whenUnsatisfiable",
        ]
    );
}

#[test]
fn a_cel_selector_without_its_predicate_is_invalid() {
    let spec = v1::PlacementSpec {
        predicate_cel_selectors: vec![v1::CelSelector::default()],
        ..Default::default()
    };
    let mut errors = Vec::new();
    assert!(predicates(&spec, &mut errors).is_empty());
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "spec.predicates");
}

#[test]
fn clusters_per_group_is_an_int_only_when_the_wire_says_so() {
    let strategy = |value: &str, is_string| {
        group_strategy(&v1::GroupStrategy {
            clusters_per_decision_group: value.into(),
            clusters_per_decision_group_is_string: is_string,
            ..Default::default()
        })
        .clusters_per_decision_group
    };
    assert_eq!(strategy("3", false), sched::IntOrString::Int(3));
    assert_eq!(strategy("3", true), sched::IntOrString::String("3".into()));
    assert_eq!(
        strategy("25%", false),
        sched::IntOrString::String("25%".into())
    );
    assert_eq!(strategy("", false), sched::IntOrString::hundred_percent());
}

/// A cluster with every field placement reads, and some it does not.
fn full_cluster() -> v1::ManagedCluster {
    v1::ManagedCluster {
        metadata: Some(v1::ObjectMeta {
            name: "edge-1".into(),
            labels: [("env", "prod"), ("region", "eu")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            resource_version: 7,
            ..Default::default()
        }),
        spec: Some(v1::ManagedClusterSpec {
            hub_accepts_client: true,
            taints: vec![
                v1::Taint {
                    key: "gpu".into(),
                    value: "none".into(),
                    effect: "NoSelect".into(),
                    time_added: Some(prost_types::Timestamp {
                        seconds: 1_700_000_000,
                        nanos: 0,
                    }),
                },
                v1::Taint {
                    key: "ignored".into(),
                    effect: "NotAnEffect".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        status: Some(v1::ManagedClusterStatus {
            cluster_claims: vec![
                v1::ClusterClaim {
                    name: "id.k8s.io".into(),
                    value: "edge-1".into(),
                },
                v1::ClusterClaim {
                    name: "platform".into(),
                    value: "k3s".into(),
                },
            ],
            allocatable: [("cpu", "4"), ("memory", "8Gi")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            version: Some(v1::ManagedClusterVersion {
                kubernetes: "v1.30.2".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_cluster_is_unchanged_from_its_own_conversion_and_a_lease_changes_nothing() {
    let c = full_cluster();
    let held = cluster(&c);
    assert!(unchanged(&c, &held));
    let mut renewed = c.clone();
    let st = renewed.status.as_mut().unwrap();
    st.conditions.push(v1::Condition {
        r#type: "ManagedClusterConditionAvailable".into(),
        status: "True".into(),
        ..Default::default()
    });
    renewed.metadata.as_mut().unwrap().resource_version = 8;
    assert!(unchanged(&renewed, &held));
    assert!(unchanged(
        &v1::ManagedCluster::default(),
        &cluster(&v1::ManagedCluster::default())
    ));
}

#[test]
fn every_field_placement_reads_is_a_change() {
    let held = cluster(&full_cluster());
    type Edit = fn(&mut v1::ManagedCluster);
    let edits: Vec<(&str, Edit)> = vec![
        ("name", |c| {
            c.metadata.as_mut().unwrap().name = "edge-2".into()
        }),
        ("label value", |c| {
            c.metadata
                .as_mut()
                .unwrap()
                .labels
                .insert("env".into(), "dev".into());
        }),
        ("label added", |c| {
            c.metadata
                .as_mut()
                .unwrap()
                .labels
                .insert("tier".into(), "x".into());
        }),
        ("label removed", |c| {
            c.metadata.as_mut().unwrap().labels.remove("env");
        }),
        ("claim value", |c| {
            c.status.as_mut().unwrap().cluster_claims[1].value = "eks".into()
        }),
        ("claim removed", |c| {
            c.status.as_mut().unwrap().cluster_claims.pop();
        }),
        ("claim named twice", |c| {
            let st = c.status.as_mut().unwrap();
            st.cluster_claims[1] = st.cluster_claims[0].clone();
        }),
        ("taint effect", |c| {
            c.spec.as_mut().unwrap().taints[0].effect = "PreferNoSelect".into();
        }),
        ("taint time", |c| {
            c.spec.as_mut().unwrap().taints[0].time_added = None
        }),
        ("taint added", |c| {
            c.spec.as_mut().unwrap().taints.push(v1::Taint {
                key: "k".into(),
                effect: "NoSelectIfNew".into(),
                ..Default::default()
            });
        }),
        ("cpu", |c| {
            c.status
                .as_mut()
                .unwrap()
                .allocatable
                .insert("cpu".into(), "3".into());
        }),
        ("memory gone", |c| {
            c.status.as_mut().unwrap().allocatable.remove("memory");
        }),
        ("version", |c| {
            c.status
                .as_mut()
                .unwrap()
                .version
                .as_mut()
                .unwrap()
                .kubernetes = "v1.31.0".into();
        }),
        ("deleting", |c| {
            c.metadata.as_mut().unwrap().deletion_timestamp = Some(Default::default());
        }),
    ];
    for (what, edit) in edits {
        let mut c = full_cluster();
        edit(&mut c);
        assert!(!unchanged(&c, &held), "{what}: taken for unchanged");
    }
    // An unknown taint effect is not placement's: adding one changes nothing.
    let mut c = full_cluster();
    c.spec.as_mut().unwrap().taints.push(v1::Taint {
        key: "other".into(),
        effect: "Unknown".into(),
        ..Default::default()
    });
    assert!(unchanged(&c, &held));
}

#[test]
fn clusters_convert_with_claims_taints_and_quantities() {
    let c = v1::ManagedCluster {
        metadata: Some(v1::ObjectMeta {
            name: "c1".into(),
            labels: [("env".to_string(), "prod".to_string())].into(),
            ..Default::default()
        }),
        spec: Some(v1::ManagedClusterSpec {
            taints: vec![
                v1::Taint {
                    key: "gpu".into(),
                    value: "true".into(),
                    effect: "NoSelect".into(),
                    time_added: Some(meta::timestamp(SystemTime::UNIX_EPOCH)),
                },
                v1::Taint {
                    key: "bad".into(),
                    effect: "Whatever".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        status: Some(v1::ManagedClusterStatus {
            allocatable: [
                ("cpu".to_string(), "7600m".to_string()),
                ("memory".to_string(), "lots".to_string()),
            ]
            .into(),
            cluster_claims: vec![v1::ClusterClaim {
                name: "platform.open-cluster-management.io".into(),
                value: "AWS".into(),
            }],
            ..Default::default()
        }),
        hub: None,
    };
    let s = cluster(&c);
    assert_eq!(s.labels["env"], "prod");
    assert_eq!(s.claims["platform.open-cluster-management.io"], "AWS");
    assert_eq!(s.taints.len(), 1, "unknown effects are ignored");
    assert!((s.allocatable.cpu.unwrap() - 7.6).abs() < 1e-9);
    assert_eq!(s.allocatable.memory, None);
    assert!(!s.deleting);
}

#[test]
fn conditions_keep_transition_times_when_unchanged() {
    let ok = vec![sched::Condition::well_configured()];
    let mut conds = Vec::new();
    assert!(set_conditions(&mut conds, &ok, 1));
    let t = conds[0].last_transition_time;
    assert!(!set_conditions(&mut conds, &ok, 1));
    assert_eq!(conds[0].last_transition_time, t);
    assert!(
        set_conditions(&mut conds, &ok, 2),
        "observedGeneration moved"
    );
}

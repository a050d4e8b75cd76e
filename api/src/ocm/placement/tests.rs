use super::super::{Document, parse_documents};
use super::*;

#[test]
fn parses_the_placement1_seed_example_and_round_trips() {
    let text = include_str!("../../../../examples/placement1.yaml");
    let docs = parse_documents(text);
    let Ok(Document::Placement(p)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.number_of_clusters, Some(3));
    assert_eq!(spec.cluster_sets, ["prod"]);
    let sel = spec.predicates[0]
        .required_cluster_selector
        .as_ref()
        .unwrap();
    assert_eq!(
        sel.label_selector.as_ref().unwrap().match_labels["purpose"],
        "test"
    );
    assert_eq!(
        sel.claim_selector.as_ref().unwrap().match_expressions[0].values,
        ["aws"]
    );
    let back = Placement::from(p);
    assert_eq!(back.to_proto().unwrap().spec, p.spec);
    let yaml = serde_yaml::to_string(&back).unwrap();
    assert!(yaml.contains("numberOfClusters: 3"), "{yaml}");
    assert!(!yaml.contains("prioritizerPolicy"), "{yaml}");
}

#[test]
fn parses_prioritizers_tolerations_groups_and_spread() {
    let text = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: p, namespace: default}
spec:
  numberOfClusters: 2
  prioritizerPolicy:
    mode: Exact
    configurations:
      - scoreCoordinate:
          builtIn: ResourceAllocatableMemory
      - scoreCoordinate:
          builtIn: Steady
        weight: 3
      - scoreCoordinate:
          type: AddOn
          addOn:
            resourceName: default
            scoreName: cpuratio
  tolerations:
    - key: gpu
      value: "true"
      operator: Equal
    - key: cluster.open-cluster-management.io/unreachable
      operator: Exists
      tolerationSeconds: 300
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: 150
      decisionGroups:
        - groupName: canary
          groupClusterSelector:
            labelSelector:
              matchLabels: {canary: "true"}
  spreadPolicy:
    spreadConstraints:
      - topologyKey: zone
        maxSkew: 2
"#;
    let docs = parse_documents(text);
    let Ok(Document::Placement(p)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let spec = p.spec.as_ref().unwrap();
    let policy = spec.prioritizer_policy.as_ref().unwrap();
    assert_eq!(policy.mode, "Exact");
    assert_eq!(policy.configurations[0].weight, None);
    assert_eq!(policy.configurations[1].weight, Some(3));
    assert_eq!(
        policy.configurations[2]
            .score_coordinate
            .as_ref()
            .unwrap()
            .add_on
            .as_ref()
            .unwrap()
            .score_name,
        "cpuratio"
    );
    assert_eq!(spec.tolerations[1].toleration_seconds, Some(300));
    let gs = spec
        .decision_strategy
        .as_ref()
        .unwrap()
        .group_strategy
        .as_ref()
        .unwrap();
    assert_eq!(gs.clusters_per_decision_group, "150");
    assert_eq!(gs.decision_groups[0].group_name, "canary");
    assert_eq!(
        spec.spread_policy.as_ref().unwrap().spread_constraints[0].max_skew,
        Some(2)
    );
    let back = Placement::from(p);
    let yaml = serde_yaml::to_string(&back).unwrap();
    assert!(yaml.contains("clustersPerDecisionGroup: 150"), "{yaml}");
    assert_eq!(back.to_proto().unwrap().spec, p.spec);
}

fn group_strategy(yaml_value: &str) -> v1::GroupStrategy {
    let text = format!(
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
         metadata: {{name: p, namespace: d}}\nspec:\n  decisionStrategy:\n    groupStrategy:\n      \
         clustersPerDecisionGroup: {yaml_value}\n"
    );
    let docs = parse_documents(&text);
    let Ok(Document::Placement(p)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let back = Placement::from(p);
    assert_eq!(back.to_proto().unwrap().spec, p.spec, "round trip");
    p.spec
        .clone()
        .unwrap()
        .decision_strategy
        .unwrap()
        .group_strategy
        .unwrap()
}

#[test]
fn clusters_per_decision_group_keeps_a_quoted_count_apart_from_a_number() {
    // OCM's IntOrString: 3 is a count; "3" is a string (OCM then reports the placement
    // misconfigured), which the protobuf form must not turn into the number 3.
    let number = group_strategy("3");
    assert_eq!(
        (
            number.clusters_per_decision_group.as_str(),
            number.clusters_per_decision_group_is_string
        ),
        ("3", false)
    );
    let quoted = group_strategy("\"3\"");
    assert_eq!(
        (
            quoted.clusters_per_decision_group.as_str(),
            quoted.clusters_per_decision_group_is_string
        ),
        ("3", true)
    );
    let percent = group_strategy("\"25%\"");
    assert_eq!(
        (
            percent.clusters_per_decision_group.as_str(),
            percent.clusters_per_decision_group_is_string
        ),
        ("25%", false)
    );
    assert_eq!(
        IntOrString::from_proto("3", true),
        Some(IntOrString::String("3".into()))
    );
    assert_eq!(
        IntOrString::from_proto("3", false),
        Some(IntOrString::Int(3))
    );
    assert_eq!(
        IntOrString::from_proto("25%", false),
        Some(IntOrString::String("25%".into()))
    );
}

#[test]
fn unknown_prioritizer_mode_and_toleration_operator_parse_as_written() {
    // OCM's CRD has no enum for either; the scheduler decides what they mean.
    let text = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
                metadata: {name: p, namespace: d}\nspec:\n  prioritizerPolicy: {mode: Fancy}\n  \
                tolerations: [{key: k, operator: Like, tolerationSeconds: -1}]\n";
    let docs = parse_documents(text);
    let Ok(Document::Placement(p)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.prioritizer_policy.as_ref().unwrap().mode, "Fancy");
    assert_eq!(spec.tolerations[0].operator, "Like");
    assert_eq!(spec.tolerations[0].toleration_seconds, Some(-1));
}

#[test]
fn unknown_placement_fields_name_their_path() {
    let text = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: d}\nspec:\n  predicates:\n    - requiredClusterSelector:\n        fieldSelector: {}\n";
    let err = parse_documents(text).remove(0).unwrap_err().to_string();
    assert!(
        err.contains("spec.predicates[0].requiredClusterSelector"),
        "{err}"
    );
    assert!(err.contains("fieldSelector"), "{err}");
}

/// A CEL predicate in the shape of OCM's placement documentation.
const CEL_PLACEMENT: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: placement1
  namespace: default
spec:
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels:
            purpose: test
    - requiredClusterSelector:
        celSelector:
          celExpressions:
            - managedCluster.metadata.labels["version"].matches('^1\\.(14|15)\\.\\d+$')
            - managedCluster.scores("resource-usage-score").filter(s, s.name == 'memNodeAvailable').all(e, e.value > 0)
"#;

#[test]
fn cel_selectors_travel_by_predicate_index_and_round_trip() {
    let docs = parse_documents(CEL_PLACEMENT);
    let Ok(Document::Placement(p)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.predicates.len(), 2);
    assert_eq!(spec.predicate_cel_selectors.len(), 2);
    assert!(spec.predicate_cel_selectors[0].cel_expressions.is_empty());
    assert_eq!(
        spec.predicate_cel_selectors[1].cel_expressions[0],
        r#"managedCluster.metadata.labels["version"].matches('^1\\.(14|15)\\.\\d+$')"#
    );
    let back = Placement::from(p);
    assert_eq!(back.to_proto().unwrap().spec, p.spec);
    let yaml = serde_yaml::to_string(&back).unwrap();
    assert!(yaml.contains("celExpressions"), "{yaml}");
}

#[test]
fn a_cel_selector_in_a_decision_group_is_refused() {
    let text = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: d}\nspec:\n  decisionStrategy:\n    groupStrategy:\n      decisionGroups:\n        - groupName: canary\n          groupClusterSelector:\n            celSelector: {celExpressions: ['true']}\n";
    let err = parse_documents(text).remove(0).unwrap_err().to_string();
    assert!(
        err.contains("decisionGroups[0].groupClusterSelector.celSelector"),
        "{err}"
    );
}

#[test]
fn parses_addon_placement_scores_as_providers_write_them() {
    let text = r#"
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata:
  name: default
  namespace: cluster1
status:
  conditions:
    - lastTransitionTime: "2021-10-28T08:31:39Z"
      message: AddOnPlacementScore updated successfully
      reason: AddOnPlacementScoreUpdated
      status: "True"
      type: AddOnPlacementScoreUpdated
  validUntil: "2021-10-29T18:31:39Z"
  scores:
    - name: "cpuAvailable"
      value: 66
    - name: "memAvailable"
      value: 55
"#;
    let docs = parse_documents(text);
    let Ok(Document::Score(s)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let st = s.status.as_ref().unwrap();
    assert_eq!(st.scores.len(), 2);
    assert_eq!(st.scores[0].value, 66);
    assert!(st.valid_until.is_some());
    let back = AddOnPlacementScore::from(s);
    assert_eq!(back.status.valid_until, "2021-10-29T18:31:39Z");
    assert_eq!(back.to_proto().unwrap(), *s);

    let bad = text.replace("2021-10-29T18:31:39Z", "tomorrow");
    let err = parse_documents(&bad).remove(0).unwrap_err().to_string();
    assert!(err.contains("status.validUntil"), "{err}");
}

#[test]
fn decisions_print_in_the_ocm_shape() {
    let d = v1::PlacementDecision {
        metadata: Some(v1::ObjectMeta {
            name: "placement1-decision-1".into(),
            namespace: "default".into(),
            labels: [(
                "cluster.open-cluster-management.io/placement".to_string(),
                "placement1".to_string(),
            )]
            .into(),
            ..Default::default()
        }),
        status: Some(v1::PlacementDecisionStatus {
            decisions: vec![
                v1::ClusterDecision {
                    cluster_name: "cluster1".into(),
                    reason: String::new(),
                    score: 120,
                },
                v1::ClusterDecision {
                    cluster_name: "cluster2".into(),
                    reason: String::new(),
                    score: 0,
                },
            ],
        }),
    };
    let yaml = serde_yaml::to_string(&PlacementDecision::from(&d)).unwrap();
    assert!(yaml.contains("kind: PlacementDecision"), "{yaml}");
    assert!(yaml.contains("clusterName: cluster1"), "{yaml}");
    assert!(yaml.contains("score: 120"), "{yaml}");
    // OCM's `omitzero`: a zero score is left out.
    assert_eq!(yaml.matches("score:").count(), 1, "{yaml}");
}

#[test]
fn sort_by_and_score_rate_limit_round_trip_as_written() {
    let text = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: placement-by-score
  namespace: default
spec:
  numberOfClusters: 3
  sortBy: Score
  scoreRateLimit: 5m
  prioritizerPolicy:
    mode: Exact
    configurations:
      - scoreCoordinate:
          builtIn: ResourceAllocatableMemory
"#;
    let docs = parse_documents(text);
    let Ok(Document::Placement(p)) = &docs[0] else {
        panic!("{docs:?}")
    };
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.sort_by, "Score");
    assert_eq!(spec.score_rate_limit, "5m");
    let back = Placement::from(p);
    assert_eq!(back.to_proto().unwrap().spec, p.spec);
    let yaml = serde_yaml::to_string(&back).unwrap();
    assert!(yaml.contains("sortBy: Score"), "{yaml}");
    assert!(yaml.contains("scoreRateLimit: 5m"), "{yaml}");
}

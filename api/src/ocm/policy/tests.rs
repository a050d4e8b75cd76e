use super::*;
use crate::ocm::document::{DocError, Document, parse_documents};
use crate::policy::config::{ComplianceType, ConfigurationPolicy, Templates};

fn parse_one(text: &str) -> Result<Document, DocError> {
    let mut docs = parse_documents(text);
    assert_eq!(docs.len(), 1, "one document");
    docs.remove(0)
}

fn field_error(text: &str) -> (String, String) {
    match parse_one(text) {
        Err(DocError::Field { path, message, .. }) => (path, message),
        other => panic!("expected a field error, got {other:?}"),
    }
}

fn template(p: &v1::Policy, i: usize) -> Value {
    serde_json::from_slice(&p.spec.as_ref().unwrap().policy_templates[i].object_definition).unwrap()
}

#[test]
fn policy_collection_examples_apply_unchanged() {
    for (file, text) in [
        (
            "policy-namespace.yaml",
            include_str!("testdata/policy-namespace.yaml"),
        ),
        (
            "policy-role.yaml",
            include_str!("testdata/policy-role.yaml"),
        ),
        (
            "policy-limitmemory.yaml",
            include_str!("testdata/policy-limitmemory.yaml"),
        ),
        (
            "policy-certificate.yaml",
            include_str!("testdata/policy-certificate.yaml"),
        ),
    ] {
        let Ok(Document::Policy(p)) = parse_one(text) else {
            panic!("{file} did not parse as a Policy: {:?}", parse_one(text));
        };
        let meta = p.metadata.as_ref().unwrap();
        assert!(
            meta.namespace.is_empty(),
            "{file}: namespace is the CLI's to default"
        );
        assert!(
            meta.annotations
                .contains_key("policy.open-cluster-management.io/standards"),
            "{file}: annotations kept"
        );
        assert_eq!(p.spec.as_ref().unwrap().remediation_action, "inform");
    }
}

#[test]
fn the_role_example_reads_as_a_mustonlyhave_configuration_policy() {
    let Ok(Document::Policy(p)) = parse_one(include_str!("testdata/policy-role.yaml")) else {
        panic!("policy-role.yaml");
    };
    let cp = ConfigurationPolicy::from_value(&template(&p, 0)).unwrap();
    assert_eq!(cp.name, "policy-role-example");
    assert_eq!(cp.namespace_selector.include, ["default"]);
    let Templates::Objects(t) = &cp.templates else {
        panic!("raw templates")
    };
    assert_eq!(t[0].compliance, ComplianceType::MustOnlyHave);
    assert_eq!(t[0].kind(), "Role");
    assert_eq!(t[0].name(), Some("sample-role"));
}

#[test]
fn a_policy_round_trips_through_protobuf_in_ocm_shape() {
    let Ok(Document::Policy(p)) = parse_one(include_str!("testdata/policy-limitmemory.yaml"))
    else {
        panic!("policy-limitmemory.yaml");
    };
    let yaml = Policy::from(&p);
    assert_eq!(yaml.spec.policy_templates.len(), 1);
    assert_eq!(
        yaml.spec.policy_templates[0].object_definition["spec"]["object-templates"][0]["objectDefinition"]
            ["spec"]["limits"][0]["default"]["memory"],
        "512Mi"
    );
    assert_eq!(yaml.to_proto().unwrap(), p);
}

#[test]
fn a_bad_compliance_type_is_named_with_its_full_path() {
    let (path, message) = field_error(
        r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: p}
spec:
  remediationAction: inform
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: c}
        spec:
          object-templates:
            - complianceType: musthavee
              objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: prod}}
            - complianceType: musthave
"#,
    );
    assert_eq!(
        path,
        "spec.policy-templates[0].objectDefinition.spec.object-templates[0].complianceType"
    );
    assert!(
        message.starts_with("unknown value \"musthavee\""),
        "{message}"
    );
    assert!(
        message.contains(
            "also spec.policy-templates[0].objectDefinition.spec.object-templates[1].objectDefinition: required"
        ),
        "every problem is reported at once: {message}"
    );
}

#[test]
fn a_template_without_any_remediation_action_is_refused() {
    let (path, message) = field_error(
        r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: p}
spec:
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: c}
        spec:
          object-templates: []
"#,
    );
    assert_eq!(
        path,
        "spec.policy-templates[0].objectDefinition.spec.remediationAction"
    );
    assert!(message.contains("required"), "{message}");
}

#[test]
fn a_dependency_names_its_kind_and_a_template_dependency_no_namespace() {
    let (path, message) = field_error(
        r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: p}
spec:
  remediationAction: inform
  dependencies:
    - {apiVersion: policy.open-cluster-management.io/v1, name: base, compliance: Compliant}
  policy-templates:
    - extraDependencies:
        - apiVersion: policy.open-cluster-management.io/v1
          kind: ConfigurationPolicy
          name: prerequisite
          namespace: default
          compliance: Compliant
      objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: c}
        spec:
          object-templates: []
"#,
    );
    assert_eq!(
        path,
        "spec.policy-templates[0].extraDependencies[0].namespace"
    );
    assert!(
        message.starts_with("must be empty for a ConfigurationPolicy"),
        "{message}"
    );
    assert!(
        message.contains("also spec.dependencies[0].kind: required"),
        "{message}"
    );
}

#[test]
fn unknown_template_kinds_are_accepted_as_written() {
    let Ok(Document::Policy(p)) = parse_one(
        r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: p, namespace: policies}
spec:
  remediationAction: enforce
  policy-templates:
    - objectDefinition:
        apiVersion: templates.gatekeeper.sh/v1
        kind: ConstraintTemplate
        metadata: {name: k8srequiredlabels}
        spec: {anything: [1, 2]}
"#,
    ) else {
        panic!("an unknown template kind must be accepted");
    };
    assert_eq!(template(&p, 0)["spec"]["anything"][1], 2);
}

#[test]
fn duplicate_template_names_and_long_names_are_refused() {
    let (path, message) = field_error(
        r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: p}
spec:
  remediationAction: inform
  policy-templates:
    - objectDefinition: {apiVersion: policy.open-cluster-management.io/v1, kind: CertificatePolicy, metadata: {name: x}}
    - objectDefinition: {apiVersion: policy.open-cluster-management.io/v1, kind: CertificatePolicy, metadata: {name: x}}
"#,
    );
    assert_eq!(
        path,
        "spec.policy-templates[1].objectDefinition.metadata.name"
    );
    assert!(message.contains("already policy-templates[0]"), "{message}");
    let long = format!(
        "apiVersion: policy.open-cluster-management.io/v1\nkind: Policy\nmetadata: {{name: {}, namespace: policies}}\nspec: {{policy-templates: []}}\n",
        "a".repeat(60)
    );
    let (path, message) = field_error(&long);
    assert_eq!(path, "metadata.name");
    assert!(message.contains("at most 62"), "{message}");
}

#[test]
fn bindings_to_placements_and_placement_rules() {
    let text = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-policy-role}
placementRef:
  name: placement-policy-role
  kind: PlacementRule
  apiGroup: apps.open-cluster-management.io
subjects:
  - name: policy-role
    kind: Policy
    apiGroup: policy.open-cluster-management.io
  - name: set
    kind: PolicySet
    apiGroup: policy.open-cluster-management.io
bindingOverrides:
  remediationAction: enforce
"#;
    let Ok(Document::PlacementBinding(b)) = parse_one(text) else {
        panic!("binding: {:?}", parse_one(text));
    };
    assert_eq!(b.subjects.len(), 2);
    assert_eq!(
        b.binding_overrides.as_ref().unwrap().remediation_action,
        "enforce"
    );
    assert_eq!(
        PlacementBinding::from(&b).to_proto().unwrap(),
        b,
        "round trip"
    );
    let (path, message) = field_error(&text.replace("kind: PlacementRule", "kind: Placement"));
    assert_eq!(path, "placementRef.kind");
    assert!(message.contains("want Placement in cluster.open-cluster-management.io"));
    let (path, _) = field_error(&text.replace("kind: PolicySet", "kind: ConfigMap"));
    assert_eq!(path, "subjects[1].kind");
    let (path, _) =
        field_error(&text.replace("remediationAction: enforce", "remediationAction: inform"));
    assert_eq!(path, "bindingOverrides.remediationAction");
}

#[test]
fn placement_rules_from_policy_collection_and_policy_sets() {
    let Ok(Document::PlacementRule(r)) = parse_one(include_str!("testdata/placementrule.yaml"))
    else {
        panic!("placementrule.yaml");
    };
    let spec = r.spec.as_ref().unwrap();
    assert_eq!(
        spec.cluster_selector.as_ref().unwrap().match_expressions[0].values,
        ["dev"]
    );
    assert_eq!(r.metadata.as_ref().unwrap().namespace, "zts-xcrypt");
    let (path, _) = field_error(
        "apiVersion: apps.open-cluster-management.io/v1\nkind: PlacementRule\nmetadata: {name: r}\nspec: {clusterReplicas: -1, clusterConditions: [{type: ManagedClusterConditionAvailable, status: Maybe}]}\n",
    );
    assert_eq!(path, "spec.clusterConditions[0].status");

    let Ok(Document::PolicySet(s)) = parse_one(
        "apiVersion: policy.open-cluster-management.io/v1beta1\nkind: PolicySet\nmetadata: {name: s}\nspec: {description: d, policies: [a, b]}\n",
    ) else {
        panic!("policy set");
    };
    assert_eq!(s.spec.as_ref().unwrap().policies, ["a", "b"]);
    let (path, _) = field_error(
        "apiVersion: policy.open-cluster-management.io/v1beta1\nkind: PolicySet\nmetadata: {name: s}\nspec: {policies: [a, '']}\n",
    );
    assert_eq!(path, "spec.policies[1]");
}

#[test]
fn the_examples_parse() {
    for (file, text, kinds) in [
        (
            "namespace.yaml",
            include_str!("../../../../examples/policies/namespace.yaml"),
            3,
        ),
        (
            "dev-baseline.yaml",
            include_str!("../../../../examples/policies/dev-baseline.yaml"),
            5,
        ),
    ] {
        let docs = parse_documents(text);
        assert_eq!(docs.len(), kinds, "{file}");
        for d in docs {
            d.unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}

#[test]
fn a_multi_document_file_as_policy_collection_writes_it() {
    let text = format!(
        "{}\n---\n{}",
        include_str!("testdata/policy-namespace.yaml"),
        r#"apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata:
  name: binding-policy-namespace
placementRef:
  name: placement-policy-namespace
  kind: Placement
  apiGroup: cluster.open-cluster-management.io
subjects:
- name: policy-namespace
  kind: Policy
  apiGroup: policy.open-cluster-management.io
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: placement-policy-namespace
spec:
  predicates:
  - requiredClusterSelector:
      labelSelector:
        matchExpressions: []
"#
    );
    let docs: Vec<Document> = parse_documents(&text)
        .into_iter()
        .map(|d| d.unwrap())
        .collect();
    assert!(matches!(docs[0], Document::Policy(_)));
    assert!(matches!(docs[1], Document::PlacementBinding(_)));
    assert!(matches!(docs[2], Document::Placement(_)));
}

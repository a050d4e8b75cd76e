use crate::policy::Compliance;
use crate::policy::dependency::{
    Dependency, Observed, canonicalize, of_template, pending_message, unmet,
};
use crate::v1::PolicyDependency;

fn dep(api_version: &str, kind: &str, namespace: &str, name: &str, c: &str) -> PolicyDependency {
    PolicyDependency {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: namespace.into(),
        compliance: c.into(),
    }
}

const V1: &str = "policy.open-cluster-management.io/v1";
const V1BETA1: &str = "policy.open-cluster-management.io/v1beta1";

#[test]
fn policies_are_named_as_their_copies_and_sets_become_their_policies() {
    let members = |ns: &str, name: &str| match (ns, name) {
        ("default", "base") => Some(vec!["one".to_string(), "two".to_string()]),
        _ => None,
    };
    let got = canonicalize(
        &[
            dep(V1, "Policy", "", "magikarp", "Compliant"),
            dep(V1, "Policy", "colors", "red", "NonCompliant"),
            dep(V1, "Policy", "", "legendary.lugia", "Compliant"),
            dep(V1BETA1, "PolicySet", "", "base", "Compliant"),
            dep(V1BETA1, "PolicySet", "", "gone", "Compliant"),
            dep(V1, "ConfigurationPolicy", "", "cp", "Compliant"),
        ],
        "default",
        members,
    );
    let names: Vec<(&str, &str, &str)> = got
        .iter()
        .map(|d| (d.kind.as_str(), d.namespace.as_str(), d.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("Policy", "", "default.magikarp"),
            ("Policy", "", "colors.red"),
            ("Policy", "", "legendary.lugia"),
            ("Policy", "", "default.one"),
            ("Policy", "", "default.two"),
            // A set the hub does not have stays: the agent reports it pending.
            ("PolicySet", "default", "gone"),
            ("ConfigurationPolicy", "", "cp"),
        ]
    );
    assert_eq!(got[3].api_version, V1);
    assert_eq!(got[3].compliance, "Compliant");
}

#[test]
fn a_template_has_the_policys_dependencies_and_its_own_each_once() {
    let root = [dep(V1, "Policy", "", "default.a", "Compliant")];
    let extra = [
        dep(V1, "Policy", "", "default.a", "Compliant"),
        dep(V1, "ConfigurationPolicy", "elsewhere", "cp", "NonCompliant"),
        dep("v1", "ConfigMap", "kube-system", "flag", "Compliant"),
    ];
    let deps = of_template(&root, &extra, "edge-1").unwrap();
    assert_eq!(deps.len(), 3);
    assert_eq!(
        deps[1].namespace, "edge-1",
        "policy kinds live in the cluster's namespace"
    );
    assert!(deps[1].is_policy_kind() && !deps[1].is_policy());
    assert_eq!(
        (deps[2].group.as_str(), deps[2].version.as_str()),
        ("", "v1")
    );
    assert_eq!(deps[2].namespace, "kube-system");
    assert!(!deps[2].is_policy_kind());
}

#[test]
fn the_same_dependency_in_two_compliance_states_is_an_error() {
    let root = [dep(V1, "Policy", "", "default.a", "Compliant")];
    let extra = [dep(V1, "Policy", "", "default.a", "NonCompliant")];
    assert_eq!(
        of_template(&root, &extra, "edge-1").unwrap_err(),
        "dependency on default.a has conflicting compliance states"
    );
}

#[test]
fn missing_silent_and_other_compliance_are_unmet() {
    let deps: Vec<Dependency> = of_template(
        &[
            dep(V1, "Policy", "", "default.compliant", "Compliant"),
            dep(V1, "Policy", "", "default.missing", "Compliant"),
            dep(V1, "Policy", "", "default.silent", "Compliant"),
            dep(V1, "Policy", "", "default.violating", "Compliant"),
            dep(V1, "Policy", "", "default.waiting", "Pending"),
            dep("example.com/v1", "Scan", "ns", "s", "Done"),
        ],
        &[],
        "c",
    )
    .unwrap();
    let failing = unmet(&deps, |d| match d.name.as_str() {
        "default.compliant" => Observed::Found(Compliance::Compliant),
        "default.silent" => Observed::Found(Compliance::Unknown),
        "default.violating" => Observed::Found(Compliance::NonCompliant),
        "default.waiting" => Observed::Found(Compliance::Pending),
        "s" => Observed::Other("Done".into()),
        _ => Observed::NotFound,
    });
    let names: Vec<&str> = failing.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["default.missing", "default.silent", "default.violating"]
    );
}

#[test]
fn the_pending_message_is_ocms() {
    let deps = of_template(
        &[
            dep(V1, "Policy", "", "default.b", "Compliant"),
            dep(V1, "ConfigurationPolicy", "", "a", "Compliant"),
        ],
        &[],
        "c",
    )
    .unwrap();
    assert_eq!(
        pending_message(&[&deps[0]]),
        "Dependencies were not satisfied: 1 is still pending (Policy default.b)"
    );
    assert_eq!(
        pending_message(&[&deps[0], &deps[1]]),
        "Dependencies were not satisfied: 2 are still pending (ConfigurationPolicy a, Policy default.b)"
    );
}

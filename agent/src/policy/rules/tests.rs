use super::*;
use flotilla_api::v1::{PolicySpec, PolicyTemplate};
use serde_json::json;

fn replicated(templates: &[serde_json::Value]) -> Policy {
    Policy {
        metadata: None,
        spec: Some(PolicySpec {
            remediation_action: "Enforce".into(),
            policy_templates: templates
                .iter()
                .map(|t| PolicyTemplate {
                    object_definition: serde_json::to_vec(t).unwrap(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        status: None,
    }
}

fn config(interval: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": "c"},
        "spec": {"remediationAction": "inform", "evaluationInterval": interval, "object-templates": []}})
}

#[test]
fn templates_are_evaluated_refused_or_reported_unsupported() {
    let p = replicated(&[
        config(json!({})),
        json!({"apiVersion": "policy.open-cluster-management.io/v1beta1", "kind": "OperatorPolicy", "metadata": {"name": "op"}}),
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": {"name": "bad"}, "spec": {"severity": "extreme"}}),
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "CertificatePolicy", "metadata": {"name": "cert"}, "spec": {"minimumDuration": "300h"}}),
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "CertificatePolicy", "metadata": {"name": "bad-cert"}, "spec": {"minimumDuration": "10d"}}),
    ]);
    let t = templates(&p);
    assert!(matches!(&t[0], Template::Config(c) if c.name == "c"));
    assert_eq!(
        t[1].fixed_message().unwrap(),
        "NonCompliant; violation - template kind OperatorPolicy (policy.open-cluster-management.io/v1beta1) is not evaluated by Flotilla; only ConfigurationPolicy and CertificatePolicy are"
    );
    assert_eq!(t[2].id(), ("bad".into(), "ConfigurationPolicy".into()));
    assert!(t[2].fixed_message().unwrap().contains("spec.severity"));
    assert!(matches!(&t[3], Template::Certificate(c) if c.name == "cert"));
    assert_eq!(t[3].fixed_message(), None);
    assert_eq!(t[4].id(), ("bad-cert".into(), "CertificatePolicy".into()));
    assert!(
        t[4].fixed_message()
            .unwrap()
            .contains("spec.minimumDuration: Invalid value: \"10d\""),
        "{:?}",
        t[4].fixed_message()
    );
    assert_eq!(root_remediation(&p), Some(Remediation::Enforce));
}

#[test]
fn templates_with_fields_their_crd_does_not_define_are_refused_as_ocms_spoke_refuses_them() {
    let p = replicated(&[
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
            "metadata": {"name": "allow-pod-and-namespace-both"},
            "spec": {"namespaceSelector": {"include": ["default"]}, "object-templates": [{
                "complianceType": "musthave",
                "objectDefinition": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                    "metadata": {"name": "x"}, "spec": {"anything": "goes"}},
                "severity": "low", "remediationAction": "inform"}]}}),
        // Unknown fields win over invalid values: decoding comes before validation.
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "CertificatePolicy",
            "metadata": {"name": "cert"}, "spec": {"minimumDuration": "10d", "namespaceSelector": {"includes": ["a"]}}}),
    ]);
    let t = templates(&p);
    assert_eq!(
        t[0].id(),
        (
            "allow-pod-and-namespace-both".into(),
            "ConfigurationPolicy".into()
        )
    );
    assert_eq!(
        t[0].fixed_message().unwrap(),
        "NonCompliant; template-error; Failed to create policy template: ConfigurationPolicy in \
         version \"v1\" cannot be handled as a ConfigurationPolicy: strict decoding error: unknown \
         field \"spec.object-templates[0].remediationAction\", unknown field \
         \"spec.object-templates[0].severity\""
    );
    assert_eq!(
        t[1].fixed_message().unwrap(),
        "NonCompliant; template-error; Failed to create policy template: CertificatePolicy in \
         version \"v1\" cannot be handled as a CertificatePolicy: strict decoding error: unknown \
         field \"spec.namespaceSelector.includes\""
    );
}

#[test]
fn a_template_not_evaluated_yet_keeps_the_cluster_from_compliance() {
    use Compliance::*;
    assert_eq!(cluster_compliance(&[Compliant, Unknown]), Unknown);
    assert_eq!(cluster_compliance(&[Pending, NonCompliant]), NonCompliant);
    assert_eq!(cluster_compliance(&[Compliant, Compliant]), Compliant);
    assert_eq!(cluster_compliance(&[]), Compliant);
}

#[test]
fn intervals_decide_the_next_evaluation() {
    let poll = Duration::from_secs(10);
    let Template::Config(c) = &templates(&replicated(&[config(
        json!({"compliant": "1m", "noncompliant": "never"}),
    )]))[0] else {
        panic!("config")
    };
    assert_eq!(
        next_after(c, Compliance::Compliant, true, poll),
        Some(Duration::from_secs(60))
    );
    assert_eq!(next_after(c, Compliance::NonCompliant, true, poll), None);
    assert!(!reevaluate_on_change(c, Compliance::NonCompliant));
    assert!(reevaluate_on_change(c, Compliance::Compliant));
    let Template::Config(w) = &templates(&replicated(&[config(json!({}))]))[0] else {
        panic!("config")
    };
    assert_eq!(next_after(w, Compliance::Compliant, true, poll), None);
    assert_eq!(
        next_after(w, Compliance::Compliant, false, poll),
        Some(poll),
        "a backend without change signals is polled"
    );
}

fn policy_dep(kind: &str, name: &str, compliance: &str) -> flotilla_api::v1::PolicyDependency {
    flotilla_api::v1::PolicyDependency {
        api_version: "policy.open-cluster-management.io/v1".into(),
        kind: kind.into(),
        name: name.into(),
        namespace: String::new(),
        compliance: compliance.into(),
    }
}

/// A policy with one template per `(extraDependencies, ignorePending)` and the root's
/// `dependencies`.
fn with_dependencies(
    root: Vec<flotilla_api::v1::PolicyDependency>,
    templates: Vec<(Vec<flotilla_api::v1::PolicyDependency>, bool)>,
) -> Policy {
    let mut p = replicated(&vec![config(json!({})); templates.len()]);
    let spec = p.spec.as_mut().unwrap();
    spec.dependencies = root;
    for (t, (extra, ignore)) in spec.policy_templates.iter_mut().zip(templates) {
        t.extra_dependencies = extra;
        t.ignore_pending = ignore;
    }
    p
}

fn held(compliance: Compliance, templates: &[(&str, &str, Compliance)]) -> Held {
    Held {
        compliance,
        templates: templates
            .iter()
            .map(|(k, n, c)| (k.to_string(), n.to_string(), *c))
            .collect(),
    }
}

#[test]
fn each_template_waits_for_the_policys_dependencies_and_its_own() {
    let p = with_dependencies(
        vec![policy_dep("Policy", "default.a", "Compliant")],
        vec![
            (vec![], false),
            (
                vec![policy_dep("ConfigurationPolicy", "prereq", "Compliant")],
                true,
            ),
            (
                vec![policy_dep("Policy", "default.a", "NonCompliant")],
                false,
            ),
        ],
    );
    let g = gates(&p, "edge-1");
    let first = g[0].as_ref().unwrap();
    assert_eq!(first.dependencies.len(), 1);
    assert!(!first.ignore_pending);
    let second = g[1].as_ref().unwrap();
    assert_eq!(second.dependencies.len(), 2);
    assert!(second.ignore_pending);
    assert_eq!(
        g[2].as_ref().unwrap_err(),
        "dependency on default.a has conflicting compliance states"
    );
}

#[test]
fn a_template_is_pending_until_the_policy_it_depends_on_is_compliant_here() {
    let p = with_dependencies(
        vec![policy_dep("Policy", "default.a", "Compliant")],
        vec![(vec![], false)],
    );
    let gate = gates(&p, "edge-1").remove(0).unwrap();
    let mut held_here = Compliances::default();
    let waiting = |c: &Compliances| waiting_for(&gate, |d| c.observe(d).unwrap());
    assert_eq!(
        waiting(&held_here).as_deref(),
        Some("Dependencies were not satisfied: 1 is still pending (Policy default.a)"),
        "a policy this cluster does not hold is not found"
    );
    assert!(held_here.set("default.a", held(Compliance::Unknown, &[])));
    assert!(waiting(&held_here).is_some(), "not evaluated yet");
    assert!(held_here.set("default.a", held(Compliance::NonCompliant, &[])));
    assert!(waiting(&held_here).is_some());
    assert!(
        !held_here.set("default.a", held(Compliance::NonCompliant, &[])),
        "the same compliance again is no change (no evaluations woken for nothing)"
    );
    assert!(held_here.set("default.a", held(Compliance::Compliant, &[])));
    assert_eq!(waiting(&held_here), None);
    assert!(held_here.remove("default.a"));
    assert!(waiting(&held_here).is_some(), "a removed policy is gone");
}

#[test]
fn template_dependencies_are_found_by_kind_and_name_in_any_policy_held() {
    let mut c = Compliances::default();
    c.set(
        "default.base",
        held(
            Compliance::NonCompliant,
            &[
                ("ConfigurationPolicy", "prereq", Compliance::Compliant),
                ("CertificatePolicy", "certs", Compliance::NonCompliant),
            ],
        ),
    );
    let gate = |kind: &str, name: &str| {
        gates(
            &with_dependencies(
                vec![policy_dep(kind, name, "Compliant")],
                vec![(vec![], false)],
            ),
            "edge-1",
        )
        .remove(0)
        .unwrap()
    };
    let waiting = |g: &Gate| waiting_for(g, |d| c.observe(d).unwrap());
    assert_eq!(waiting(&gate("ConfigurationPolicy", "prereq")), None);
    assert!(waiting(&gate("CertificatePolicy", "certs")).is_some());
    assert!(
        waiting(&gate("ConfigurationPolicy", "certs")).is_some(),
        "kinds differ"
    );
    assert!(
        waiting(&gate("PolicySet", "not-expanded")).is_some(),
        "a set the hub could not expand is not found"
    );
}

#[test]
fn pending_counts_as_pending_unless_ignored() {
    let msg = "Dependencies were not satisfied: 1 is still pending (Policy default.a)";
    assert_eq!(
        waiting_status(msg, false),
        (Compliance::Pending, format!("Pending; {msg}"))
    );
    assert_eq!(
        waiting_status(msg, true),
        (
            Compliance::Compliant,
            format!("Compliant; {msg} but ignorePending is true")
        )
    );
    use Compliance::*;
    assert_eq!(cluster_compliance(&[Compliant, Pending]), Pending);
    assert_eq!(cluster_compliance(&[Pending, Unknown]), Pending);
}

#[test]
fn other_kinds_are_judged_by_their_status_compliant() {
    use flotilla_api::policy::dependency::Observed;
    assert_eq!(observe_object(None), Observed::NotFound);
    assert_eq!(
        observe_object(Some(&json!({"status": {"compliant": "Compliant"}}))),
        Observed::Found(Compliance::Compliant)
    );
    assert_eq!(
        observe_object(Some(&json!({"metadata": {"name": "x"}}))),
        Observed::Found(Compliance::Unknown)
    );
    assert_eq!(
        observe_object(Some(&json!({"status": {"compliant": "Done"}}))),
        Observed::Other("Done".into())
    );
    let mut c = Compliances::default();
    c.set("default.a", held(Compliance::Compliant, &[]));
    let other = flotilla_api::policy::dependency::of_template(
        &[flotilla_api::v1::PolicyDependency {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "a".into(),
            namespace: "default".into(),
            compliance: "Compliant".into(),
        }],
        &[],
        "edge-1",
    )
    .unwrap();
    assert_eq!(c.observe(&other[0]), None, "read from the cluster");
}

#[test]
fn certificates_are_judged_again_when_one_crosses_its_minimum_and_at_least_every_ten_minutes() {
    let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let poll = Duration::from_secs(30);
    let soon = Some(now + time::Duration::seconds(90));
    assert_eq!(
        certificate_next(soon, now, true, poll),
        Duration::from_secs(90)
    );
    assert_eq!(certificate_next(None, now, true, poll), CERTIFICATE_FLOOR);
    let late = Some(now + time::Duration::days(30));
    assert_eq!(certificate_next(late, now, true, poll), CERTIFICATE_FLOOR);
    // A backend that signals no changes is polled.
    assert_eq!(certificate_next(late, now, false, poll), poll);
    // A crossing already due is looked at shortly, never in a busy loop.
    assert_eq!(
        certificate_next(Some(now), now, true, poll),
        Duration::from_millis(100)
    );
}

#[test]
fn a_template_still_holding_hub_templates_is_a_template_error_not_evaluated() {
    // policy-collection's terminating-configpolicies names the cluster with a hub template.
    let hub = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "ns"},
        "spec": {"remediationAction": "inform", "object-templates": [{"complianceType": "musthave",
            "objectDefinition": {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "{{hub .ManagedClusterName hub}}"}}}]}});
    let spoke = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "claims"},
        "spec": {"remediationAction": "inform", "object-templates": [{"complianceType": "musthave",
            "objectDefinition": {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "{{ fromClusterClaim \"id.k8s.io\" }}"}}}]}});
    let t = templates(&replicated(&[hub, spoke]));
    assert_eq!(
        t[0].fixed_message().unwrap(),
        format!("NonCompliant; template-error; {HUB_TEMPLATES_UNRESOLVED}")
    );
    assert!(matches!(&t[1], Template::Config(c) if c.name == "claims"));
}

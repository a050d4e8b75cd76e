use super::policy;
use crate::policy::Compliance;
use crate::policy::config::{Prune, Remediation};
use crate::policy::evaluate::{Action, ObjectKey, Snapshot, evaluate, kinds, prune};
use crate::policy::namespaces::Namespace;
use serde_json::{Value, json};

/// A cluster snapshot builder.
#[derive(Default)]
struct Cluster(Snapshot);

impl Cluster {
    fn ns(mut self, name: &str) -> Self {
        self.0.namespaces.push(Namespace {
            name: name.into(),
            labels: Default::default(),
        });
        self.0
            .objects
            .push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
        self
    }

    fn obj(mut self, o: Value) -> Self {
        self.0.objects.push(o);
        self
    }
}

fn namespace_policy(ctype: &str) -> crate::policy::config::ConfigurationPolicy {
    policy(json!({
        "remediationAction": "inform",
        "object-templates": [{"complianceType": ctype,
            "objectDefinition": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}}],
    }))
}

fn role(verbs: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "sample-role", "namespace": "default"},
        "rules": [{"apiGroups": ["extensions", "apps"], "resources": ["deployments"], "verbs": verbs}]})
}

fn role_policy() -> crate::policy::config::ConfigurationPolicy {
    // The policy-collection policy-role example's ConfigurationPolicy.
    policy(json!({
        "remediationAction": "inform",
        "severity": "high",
        "namespaceSelector": {"include": ["default"]},
        "object-templates": [{"complianceType": "mustonlyhave", "objectDefinition": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "sample-role"},
            "rules": [{"apiGroups": ["extensions", "apps"], "resources": ["deployments"],
                       "verbs": ["get", "list", "watch", "delete", "patch"]}]}}],
    }))
}

#[test]
fn inform_reports_a_missing_namespace_in_ocms_words_and_writes_nothing() {
    let snap = Cluster::default().ns("default").0;
    let e = evaluate(&namespace_policy("musthave"), None, &snap);
    assert_eq!(e.compliance(), Compliance::NonCompliant);
    assert!(e.actions().is_empty());
    assert_eq!(
        e.settle(&[]),
        (
            Compliance::NonCompliant,
            "NonCompliant; violation - namespaces [prod] not found".into()
        )
    );
    let snap = Cluster::default().ns("prod").0;
    let e = evaluate(&namespace_policy("musthave"), None, &snap);
    assert_eq!(
        e.settle(&[]),
        (
            Compliance::Compliant,
            "Compliant; notification - namespaces [prod] found as specified".into()
        )
    );
}

#[test]
fn the_roots_remediation_overrides_the_templates() {
    let snap = Cluster::default().0;
    let e = evaluate(
        &namespace_policy("musthave"),
        Some(Remediation::Enforce),
        &snap,
    );
    assert_eq!(e.remediation, Remediation::Enforce);
    let actions = e.actions();
    let [Action::Create(key, obj)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(key.name, "prod");
    assert_eq!(obj["metadata"]["name"], "prod");
    assert_eq!(
        e.settle(&[Ok(())]),
        (
            Compliance::Compliant,
            "Compliant; notification - namespaces [prod] was created successfully".into()
        )
    );
    assert_eq!(
        e.settle(&[Err("forbidden".into())]).0,
        Compliance::NonCompliant,
        "a failed repair stays a violation"
    );
}

#[test]
fn mustnothave_deletes_when_enforced() {
    let snap = Cluster::default().ns("prod").0;
    let e = evaluate(
        &namespace_policy("mustnothave"),
        Some(Remediation::Enforce),
        &snap,
    );
    assert_eq!(e.compliance(), Compliance::NonCompliant);
    assert!(matches!(e.actions().as_slice(), [Action::Delete(k)] if k.name == "prod"));
    let e = evaluate(
        &namespace_policy("mustnothave"),
        None,
        &Cluster::default().0,
    );
    assert_eq!(
        e.settle(&[]),
        (
            Compliance::Compliant,
            "Compliant; notification - namespaces [prod] missing as expected".into()
        )
    );
}

#[test]
fn the_role_example_is_judged_exactly_in_the_selected_namespace() {
    let p = role_policy();
    let exact = Cluster::default()
        .ns("default")
        .obj(role(json!(["get", "list", "watch", "delete", "patch"])))
        .0;
    let e = evaluate(&p, None, &exact);
    assert_eq!(
        e.settle(&[]).1,
        "Compliant; notification - roles [sample-role] in namespace default found as specified"
    );
    let wider = Cluster::default()
        .ns("default")
        .obj(role(json!([
            "get", "list", "watch", "delete", "patch", "create"
        ])))
        .0;
    let e = evaluate(&p, Some(Remediation::Enforce), &wider);
    let (c, msg) = e.settle(&[]);
    assert_eq!(c, Compliance::NonCompliant);
    assert!(
        msg.contains("found but not as specified (differs at rules)"),
        "{msg}"
    );
    let actions = e.actions();
    let [Action::Update(_, desired)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(desired["rules"][0]["verbs"].as_array().unwrap().len(), 5);
}

#[test]
fn a_namespaced_template_without_any_namespace_is_a_violation() {
    let p = policy(json!({
        "remediationAction": "enforce",
        "object-templates": [{"complianceType": "musthave",
            "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}}],
    }));
    let e = evaluate(&p, None, &Cluster::default().ns("default").0);
    assert_eq!(e.compliance(), Compliance::NonCompliant);
    assert!(e.actions().is_empty());
    assert!(e.settle(&[]).1.contains("has no namespace"));
}

#[test]
fn a_selector_checks_each_namespace_and_lists_only_violations() {
    let p = policy(json!({
        "remediationAction": "inform",
        "namespaceSelector": {"include": ["team-*"]},
        "object-templates": [{"complianceType": "musthave",
            "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}}],
    }));
    let cm = |ns: &str, v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": ns}, "data": {"k": v}})
    };
    let snap = Cluster::default()
        .ns("team-a")
        .ns("team-b")
        .ns("other")
        .obj(cm("team-a", "v"))
        .obj(cm("team-b", "w"))
        .0;
    let e = evaluate(&p, None, &snap);
    assert_eq!(e.findings.len(), 2);
    assert_eq!(
        e.settle(&[]).1,
        "NonCompliant; violation - configmaps [c] in namespace team-b found but not as specified (differs at data.k)"
    );
}

#[test]
fn unnamed_templates_match_any_object_of_the_kind() {
    let p = policy(json!({
        "remediationAction": "enforce",
        "namespaceSelector": {"include": ["default"]},
        "object-templates": [{"complianceType": "mustnothave",
            "objectDefinition": {"apiVersion": "v1", "kind": "Pod", "spec": {"hostNetwork": true}}}],
    }));
    let pod = |n: &str, host: bool| {
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": n, "namespace": "default"}, "spec": {"hostNetwork": host}})
    };
    let snap = Cluster::default()
        .ns("default")
        .obj(pod("a", true))
        .obj(pod("b", false))
        .obj(pod("c", true))
        .0;
    let e = evaluate(&p, None, &snap);
    let deleted: Vec<String> = e.actions().iter().map(|a| a.key().name.clone()).collect();
    assert_eq!(deleted, ["a", "c"]);
    assert_eq!(
        e.settle(&[Ok(()), Ok(())]),
        (
            Compliance::Compliant,
            "Compliant; notification - pods [a, c] in namespace default was deleted successfully"
                .into()
        )
    );
}

#[test]
fn templated_raw_templates_are_noncompliant_never_silently_compliant() {
    let p = policy(
        json!({"remediationAction": "enforce", "object-templates-raw": "{{ fromConfigMap \"a\" \"b\" \"c\" }}"}),
    );
    let e = evaluate(&p, None, &Cluster::default().0);
    let (c, msg) = e.settle(&[]);
    assert_eq!(c, Compliance::NonCompliant);
    assert!(msg.contains("Go templates"), "{msg}");
    assert!(kinds(&p).is_empty());
}

#[test]
fn prune_deletes_all_or_only_what_the_policy_created() {
    let mut p = namespace_policy("musthave");
    let snap = Cluster::default().ns("prod").0;
    assert!(prune(&p, &snap, &[]).is_empty(), "None by default");
    p.prune = Prune::DeleteAll;
    assert_eq!(prune(&p, &snap, &[]).len(), 1);
    p.prune = Prune::DeleteIfCreated;
    assert!(prune(&p, &snap, &[]).is_empty());
    let created = ObjectKey {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: String::new(),
        name: "prod".into(),
    };
    assert_eq!(prune(&p, &snap, std::slice::from_ref(&created)), [created]);
}

#[test]
fn kinds_lists_what_a_snapshot_must_hold() {
    assert_eq!(
        kinds(&role_policy()),
        [(
            "rbac.authorization.k8s.io/v1".to_string(),
            "Role".to_string()
        )]
    );
}

/// policy-collection's oc-client-cronjob templates, cut to the namespace and the CronJob.
fn cronjob_policy(api_version: &str) -> crate::policy::config::ConfigurationPolicy {
    policy(json!({
        "remediationAction": "inform",
        "object-templates": [
            {"complianceType": "musthave", "objectDefinition":
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobnamespace"}}},
            {"complianceType": "musthave", "objectDefinition":
                {"apiVersion": api_version, "kind": "CronJob",
                 "metadata": {"name": "basic-oc-client", "namespace": "jobnamespace"},
                 "spec": {"schedule": "* * * * *"}}},
        ],
    }))
}

#[test]
fn a_kind_the_cluster_does_not_serve_is_ocms_mapping_error_and_never_enforced() {
    let mut snap = Cluster::default().0;
    snap.unserved
        .insert(("batch/v1beta1".to_string(), "CronJob".to_string()));
    // A batch/v1 CronJob of that name exists: it is not what a batch/v1beta1 template names
    // on a cluster that no longer serves batch/v1beta1.
    snap.objects
        .push(json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "basic-oc-client", "namespace": "jobnamespace"},
        "spec": {"schedule": "* * * * *"}}));
    let e = evaluate(
        &cronjob_policy("batch/v1beta1"),
        Some(Remediation::Enforce),
        &snap,
    );
    assert_eq!(e.compliance(), Compliance::NonCompliant);
    let actions = e.actions();
    let [Action::Create(key, _)] = actions.as_slice() else {
        panic!("only the namespace is created: {actions:?}")
    };
    assert_eq!(key.kind, "Namespace");
    assert_eq!(
        e.settle(&[Ok(())]),
        (
            Compliance::NonCompliant,
            "NonCompliant; violation - couldn't find mapping resource with kind CronJob in API \
             version batch/v1beta1, please check if you have CRD deployed"
                .into()
        )
    );
    // Served (a 1.24 cluster): judged like any kind, against the group's objects.
    snap.unserved.clear();
    let e = evaluate(&cronjob_policy("batch/v1beta1"), None, &snap);
    assert_eq!(
        e.settle(&[]),
        (
            Compliance::NonCompliant,
            "NonCompliant; violation - namespaces [jobnamespace] not found".into()
        )
    );
    assert_eq!(
        crate::policy::evaluate::unserved_message("example.io/v1", "Widget"),
        "couldn't find mapping resource with kind Widget in API version example.io/v1, please \
         check if you have CRD deployed"
    );
}

/// The API server's refusal of `spec.replcas` (kubemem's text, as a real server words it).
const REFUSED: &str = "Deployment in version \"v1\" cannot be handled as a Deployment: strict \
                       decoding error: unknown field \"spec.replcas\"";

fn misspelt_deployment_policy(remediation: &str) -> crate::policy::config::ConfigurationPolicy {
    policy(json!({
        "remediationAction": remediation,
        "object-templates": [{"complianceType": "musthave", "objectDefinition": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replcas": 3}}}],
    }))
}

#[test]
fn writes_are_checked_first_and_a_refused_one_is_ocms_violation_never_written() {
    // Enforce of a missing object: the create is checked; refused, nothing is written.
    let snap = Cluster::default().ns("default").0;
    let mut e = evaluate(&misspelt_deployment_policy("enforce"), None, &snap);
    let checks = e.checks();
    assert_eq!(checks.len(), 1);
    let (i, check) = checks[0];
    assert!(check.create);
    assert_eq!(check.key.name, "web");
    assert_eq!(check.object["spec"]["replcas"], 3);
    e.refuse(i, REFUSED);
    assert!(e.actions().is_empty(), "a refused write is never made");
    let (compliance, message) = e.settle(&[]);
    assert_eq!(compliance, Compliance::NonCompliant);
    assert_eq!(
        message,
        format!(
            "NonCompliant; violation - deployments [web] in namespace default is missing, and \
             cannot be created, reason: `{REFUSED}`"
        )
    );

    // Inform of a missing object: nothing to validate (OCM never validates it), "not found".
    let e = evaluate(&misspelt_deployment_policy("inform"), None, &snap);
    assert!(e.checks().is_empty());

    // A mismatching object: its update is checked in inform too, and refused reads as OCM's.
    let existing = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
        "spec": {"replicas": 1}});
    let snap = Cluster::default().ns("default").obj(existing).0;
    for remediation in ["inform", "enforce"] {
        let mut e = evaluate(&misspelt_deployment_policy(remediation), None, &snap);
        let (i, check) = e.checks()[0];
        assert!(!check.create, "{remediation}");
        assert_eq!(
            check.object["spec"]["replicas"], 1,
            "the existing object, merged"
        );
        assert_eq!(check.object["spec"]["replcas"], 3);
        e.refuse(i, REFUSED);
        assert!(e.actions().is_empty());
        assert_eq!(
            e.settle(&[]).1,
            format!(
                "NonCompliant; violation - Error validating the object web, the error is \
                 `{REFUSED}`"
            )
        );
    }
    // A matching object needs no write, so nothing is checked.
    let fine = policy(json!({"remediationAction": "enforce",
        "object-templates": [{"complianceType": "musthave", "objectDefinition": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 1}}}]}));
    assert!(evaluate(&fine, None, &snap).checks().is_empty());
}

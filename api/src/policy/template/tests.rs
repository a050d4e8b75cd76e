use super::funcs::Mode;
use super::source::{Answer, Fetched, Query};
use super::*;
use serde_json::json;

fn spoke(fetched: Fetched) -> Resolver {
    Resolver {
        mode: Mode::Spoke,
        context: gotmpl::Value::Nil,
        source: Arc::new(fetched),
        protect: None,
        deadline: super::budget::Deadline::after(super::budget::MAX_TIME),
    }
}

fn resolved(o: Outcome) -> serde_json::Value {
    match o {
        Outcome::Resolved(r) => r.value,
        Outcome::Pending(p) => panic!("pending: {p:?}"),
    }
}

#[test]
fn a_template_without_reads_resolves_and_keeps_types() {
    let raw = json!({"data": {"a": "{{ \"6\" | toInt }}", "b": "{{ printf \"%s-%d\" \"x\" 3 }}"}});
    let out = resolved(spoke(Fetched::default()).resolve_json(&raw).unwrap());
    assert_eq!(out, json!({"data": {"a": 6, "b": "x-3"}}));
}

#[test]
fn an_unknown_function_is_gos_parse_error() {
    let raw = json!({"data": {"a": "{{ nosuch \"x\" }}"}});
    let err = spoke(Fetched::default()).resolve_json(&raw).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "failed to parse the template JSON string {raw}: template: tmpl:2: function \
             \"nosuch\" not defined"
        )
    );
}

#[test]
fn a_lookup_not_fetched_is_pending_then_resolves() {
    let raw = json!({"v": "{{ fromConfigMap \"default\" \"site\" \"vlan\" }}"});
    let query = Query::Get {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "default".into(),
        name: "site".into(),
    };
    let Outcome::Pending(p) = spoke(Fetched::default()).resolve_json(&raw).unwrap() else {
        panic!("expected pending");
    };
    assert_eq!(p.into_iter().collect::<Vec<_>>(), vec![query.clone()]);
    let mut f = Fetched::default();
    f.insert(
        query,
        Answer::object(Some(json!({"data": {"vlan": "3620"}}))),
    );
    assert_eq!(
        resolved(spoke(f).resolve_json(&raw).unwrap()),
        json!({"v": "3620"})
    );
}

#[test]
fn a_missing_config_map_is_ocms_error_at_the_call() {
    let raw = json!({"v": "{{ fromConfigMap \"default\" \"site\" \"vlan\" }}"});
    let mut f = Fetched::default();
    f.insert(
        Query::Get {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "site".into(),
        },
        Answer::Object(None),
    );
    let err = spoke(f).resolve_json(&raw).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "failed to resolve the template {raw}: template: tmpl:1:7: executing \"tmpl\" at \
             <fromConfigMap \"default\" \"site\" \"vlan\">: error calling fromConfigMap: failed \
             getting the ConfigMap site from default: configmaps \"site\" not found"
        )
    );
}

/// config-policy-controller's e2e `case13_templatization_test.go` l. 505–511, the text OCM
/// asserts for a denied function.
#[test]
fn env_is_denied_with_ocms_text_and_position() {
    let raw = json!({
        "apiVersion": "v1",
        "data": {"home-env": "{{ printf \"%s\" (env \"HOME\") }}\n"},
        "kind": "ConfigMap",
        "metadata": {"name": "case13-denylist-test-configmap", "namespace": "default"}
    });
    let err = spoke(Fetched::default()).resolve_json(&raw).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "failed to resolve the template {raw}: template: tmpl:4:20: executing \"tmpl\" at \
             <env \"HOME\">: error calling env: use of denylisted template function: function \
             'env' is considered a security risk"
        )
    );
}

mod bounds;
mod funcs;

#[test]
fn a_field_of_the_spoke_context_is_gos_error_never_no_value() {
    // Review finding 4: config-policy-controller's context is a struct; a field it lacks fails.
    let cases = [
        (
            json!({"data": {"cluster": "{{ .ManagedClusterName }}"}}),
            "template: tmpl:2:15: executing \"tmpl\" at <.ManagedClusterName>: can't evaluate \
             field ManagedClusterName in type struct {}",
        ),
        (
            json!({"metadata": {"name": "{{ .ObjectName }}-copy"}}),
            "template: tmpl:2:12: executing \"tmpl\" at <.ObjectName>: can't evaluate field \
             ObjectName in type struct {}",
        ),
        (
            json!({"v": "{{ range list 1 }}{{ $.Object.kind }}{{ end }}"}),
            "template: tmpl:1:25: executing \"tmpl\" at <$.Object.kind>: can't evaluate field \
             Object in type struct {}",
        ),
    ];
    for (raw, go) in cases {
        match spoke(Fetched::default()).resolve_json(&raw) {
            Err(TemplateError::Exec { go: got, .. }) => assert_eq!(got, go, "{raw}"),
            other => panic!("{raw}: {other:?}"),
        }
    }
    // Inside range and with, dot is the element: its fields are read as before.
    let raw = json!({"v": "{{ range (list (dict \"a\" \"x\")) }}{{ .a }}{{ end }}{{ with dict \"b\" \"y\" }}{{ .b }}{{ end }}"});
    assert_eq!(
        resolved(spoke(Fetched::default()).resolve_json(&raw).unwrap()),
        json!({"v": "xy"})
    );
}

fn config_policy(
    selector: serde_json::Value,
    namespace: &str,
) -> crate::policy::config::ConfigurationPolicy {
    let doc = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "p"},
        "spec": {"remediationAction": "enforce", "namespaceSelector": selector,
            "object-templates": [{"complianceType": "musthave", "objectDefinition": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": namespace}, "data": {"a": "b"}}}]}});
    crate::policy::config::ConfigurationPolicy::from_value(&doc).unwrap()
}

/// The findings of `policy` resolved against `fetched` and evaluated on a cluster with the
/// namespaces `prod` and `dev`.
fn findings(policy: &crate::policy::config::ConfigurationPolicy, fetched: Fetched) -> Vec<String> {
    use crate::policy::template::policy::{PolicyOutcome, resolve_policy};
    let PolicyOutcome::Done(r) = resolve_policy(policy, Arc::new(fetched), super::budget::MAX_TIME)
    else {
        panic!("pending");
    };
    let snapshot = crate::policy::evaluate::Snapshot {
        namespaces: ["prod", "dev"]
            .iter()
            .map(|n| crate::policy::namespaces::Namespace {
                name: n.to_string(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let e = crate::policy::evaluate::evaluate(&r.policy, None, &snapshot);
    let mut out: Vec<String> = r.errors.iter().map(|f| f.what.clone()).collect();
    out.extend(
        e.findings
            .iter()
            .map(|f| format!("{} {}", f.namespace, f.what)),
    );
    out
}

fn site(ns: &str) -> Fetched {
    let mut f = Fetched::default();
    f.insert(
        Query::Get {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "site".into(),
        },
        Answer::object(Some(json!({"data": {"ns": ns}}))),
    );
    f
}

#[test]
fn a_namespace_a_template_empties_or_moves_is_refused_as_ocm_refuses_it() {
    // Review finding 5: config-policy-controller's checks after template resolution.
    let templated = "{{ fromConfigMap \"default\" \"site\" \"ns\" }}";
    let all = json!({"include": ["*"]});
    // Empty: never sent to every selected namespace.
    let out = findings(&config_policy(all.clone(), templated), site(""));
    assert_eq!(
        out,
        vec![
            " namespaced object cm of kind ConfigMap has no namespace specified after template resolution"
        ]
    );
    // Outside the selector's choice.
    let out = findings(
        &config_policy(json!({"include": ["dev"]}), templated),
        site("prod"),
    );
    assert_eq!(
        out,
        vec![
            " The object definition's namespace must match the result from the namespace selector after template resolution"
        ]
    );
    // Trimmed as TrimSpace does, and inside the selector: evaluated there.
    let out = findings(&config_policy(all, templated), site("prod\n"));
    assert_eq!(out.len(), 1);
    assert!(out[0].starts_with("prod "), "{out:?}");
}

#[test]
fn a_resolution_that_read_a_secret_reports_no_differences_unless_asked() {
    // Review finding 9: recordDiff defaults as config-policy-controller's Censored would.
    use crate::policy::config::{RecordDiff, Templates};
    use crate::policy::template::policy::{PolicyOutcome, resolve_policy};
    let doc = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "p"},
        "spec": {"remediationAction": "enforce", "object-templates": [
            {"complianceType": "musthave", "objectDefinition": {"apiVersion": "v1",
                "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"},
                "data": {"k": "{{ fromSecret \"default\" \"s\" \"k\" | base64dec }}"}}},
            {"complianceType": "musthave", "recordDiff": "InStatus", "objectDefinition": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "b", "namespace": "default"}, "data": {"k": "v"}}}]}});
    let policy = crate::policy::config::ConfigurationPolicy::from_value(&doc).unwrap();
    let mut f = Fetched::default();
    f.insert(
        Query::Get {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: "default".into(),
            name: "s".into(),
        },
        Answer::object(Some(json!({"data": {"k": "c2VjcmV0"}}))),
    );
    let PolicyOutcome::Done(r) = resolve_policy(&policy, Arc::new(f), super::budget::MAX_TIME)
    else {
        panic!("pending");
    };
    assert!(r.sensitive);
    let Templates::Objects(list) = &r.policy.templates else {
        panic!("objects");
    };
    assert_eq!(list[0].record_diff, Some(RecordDiff::None));
    assert_eq!(list[0].object["data"]["k"], "secret");
    assert_eq!(list[1].record_diff, Some(RecordDiff::InStatus));
}

#[test]
fn a_templated_kind_is_mapped_as_written_as_ocm_maps_it() {
    // Review finding 5: config-policy-controller maps an object template by its unresolved
    // apiVersion and kind, so a template cannot choose the kind it writes.
    use crate::policy::template::policy::{PolicyOutcome, resolve_policy};
    let written = "{{ \"ConfigMap\" }}";
    let doc = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "p"},
        "spec": {"remediationAction": "enforce", "object-templates": [
            {"complianceType": "musthave", "objectDefinition": {"apiVersion": "v1",
                "kind": written, "metadata": {"name": "a", "namespace": "prod"},
                "data": {"k": "{{ \"v\" }}"}}}]}});
    let policy = crate::policy::config::ConfigurationPolicy::from_value(&doc).unwrap();
    let PolicyOutcome::Done(r) = resolve_policy(
        &policy,
        Arc::new(Fetched::default()),
        super::budget::MAX_TIME,
    ) else {
        panic!("pending");
    };
    let kinds = crate::policy::evaluate::kinds(&r.policy);
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        vec![("v1".to_string(), written.to_string())]
    );
    let snapshot = crate::policy::evaluate::Snapshot {
        unserved: [("v1".to_string(), written.to_string())].into(),
        ..Default::default()
    };
    let e = crate::policy::evaluate::evaluate(&r.policy, None, &snapshot);
    assert_eq!(e.findings.len(), 1);
    assert_eq!(
        e.findings[0].what,
        format!(
            "couldn't find mapping resource with kind {written} in API version v1, please check \
             if you have CRD deployed"
        )
    );
    assert!(e.findings[0].actions.is_empty());
}

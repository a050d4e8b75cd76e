//! Pure decisions of a replicated policy on the spoke: which templates it holds and how each is
//! judged, the cluster's compliance over them, and when to evaluate again.

use flotilla_api::policy::Compliance;
use flotilla_api::policy::config::{ConfigurationPolicy, Interval, Remediation, TemplateMeta};
use flotilla_api::v1::Policy;
use std::time::Duration;

/// One policy template as the agent holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Template {
    /// A ConfigurationPolicy: evaluated and enforced here.
    Config(Box<ConfigurationPolicy>),
    /// A kind Flotilla does not evaluate: always NonCompliant, naming the kind.
    Unsupported(TemplateMeta),
    /// A template that cannot be read (the hub checks templates, but nothing it sends is
    /// trusted blindly): NonCompliant with the reason.
    Invalid {
        /// Its name and kind as far as they could be read.
        meta: TemplateMeta,
        /// What is wrong.
        reason: String,
    },
}

impl Template {
    /// `(name, kind)` for status details.
    pub fn id(&self) -> (String, String) {
        match self {
            Template::Config(c) => (c.name.clone(), "ConfigurationPolicy".into()),
            Template::Unsupported(m) | Template::Invalid { meta: m, .. } => {
                (m.name.clone(), m.kind.clone())
            }
        }
    }

    /// The message of a template that is never evaluated (`None` for a ConfigurationPolicy).
    pub fn fixed_message(&self) -> Option<String> {
        match self {
            Template::Config(_) => None,
            Template::Unsupported(m) => Some(format!(
                "NonCompliant; violation - template kind {} ({}) is not evaluated by Flotilla; \
                 only ConfigurationPolicy is",
                m.kind, m.api_version
            )),
            Template::Invalid { reason, .. } => Some(format!(
                "NonCompliant; violation - the template cannot be read: {reason}"
            )),
        }
    }
}

/// The templates of a replicated policy, in order.
pub fn templates(policy: &Policy) -> Vec<Template> {
    let Some(spec) = &policy.spec else {
        return Vec::new();
    };
    spec.policy_templates
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let value: serde_json::Value = match serde_json::from_slice(&t.object_definition) {
                Ok(v) => v,
                Err(e) => {
                    return Template::Invalid {
                        meta: TemplateMeta {
                            name: format!("template-{i}"),
                            ..TemplateMeta::default()
                        },
                        reason: format!("not JSON: {e}"),
                    };
                }
            };
            let meta = match TemplateMeta::of(&value) {
                Ok(m) => m,
                Err(errors) => {
                    return Template::Invalid {
                        meta: TemplateMeta {
                            name: format!("template-{i}"),
                            ..TemplateMeta::default()
                        },
                        reason: join(&errors),
                    };
                }
            };
            if !meta.is_configuration_policy() {
                return Template::Unsupported(meta);
            }
            match ConfigurationPolicy::from_value(&value) {
                Ok(c) => Template::Config(Box::new(c)),
                Err(errors) => Template::Invalid {
                    meta,
                    reason: join(&errors),
                },
            }
        })
        .collect()
}

fn join(errors: &[flotilla_api::policy::FieldError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The replicated policy's remediation (the hub puts the root's, or a binding's override,
/// there); `None` leaves each template's own.
pub fn root_remediation(policy: &Policy) -> Option<Remediation> {
    policy
        .spec
        .as_ref()
        .and_then(|s| Remediation::parse(&s.remediation_action))
}

/// The cluster's compliance over its templates: NonCompliant over Pending over not evaluated
/// over Compliant. A policy without templates has nothing to violate.
pub fn cluster_compliance(templates: &[Compliance]) -> Compliance {
    for worst in [
        Compliance::NonCompliant,
        Compliance::Pending,
        Compliance::Unknown,
    ] {
        if templates.contains(&worst) {
            return worst;
        }
    }
    Compliance::Compliant
}

/// When a ConfigurationPolicy is evaluated again after a result, besides on every change the
/// backend signals: `None` means only on changes (or, with `Never`, not until the policy
/// changes). A backend that signals no changes is polled every `poll`.
pub fn next_after(
    policy: &ConfigurationPolicy,
    result: Compliance,
    backend_signals_changes: bool,
    poll: Duration,
) -> Option<Duration> {
    let interval = if result == Compliance::Compliant {
        policy.interval.compliant
    } else {
        policy.interval.noncompliant
    };
    match interval {
        Interval::Every(d) => Some(d.max(Duration::from_millis(100))),
        Interval::Watch if !backend_signals_changes => Some(poll),
        Interval::Watch | Interval::Never => None,
    }
}

/// Whether a change on the cluster makes the template be evaluated again: not for `never`
/// after a compliant result (OCM: evaluated again only when the policy changes).
pub fn reevaluate_on_change(policy: &ConfigurationPolicy, last: Compliance) -> bool {
    !(last == Compliance::Compliant && policy.interval.compliant == Interval::Never
        || last == Compliance::NonCompliant && policy.interval.noncompliant == Interval::Never)
}

#[cfg(test)]
mod tests {
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
            json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "CertificatePolicy", "metadata": {"name": "cert"}}),
            json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": {"name": "bad"}, "spec": {"severity": "extreme"}}),
        ]);
        let t = templates(&p);
        assert!(matches!(&t[0], Template::Config(c) if c.name == "c"));
        assert_eq!(
            t[1].fixed_message().unwrap(),
            "NonCompliant; violation - template kind CertificatePolicy (policy.open-cluster-management.io/v1) is not evaluated by Flotilla; only ConfigurationPolicy is"
        );
        assert_eq!(t[2].id(), ("bad".into(), "ConfigurationPolicy".into()));
        assert!(t[2].fixed_message().unwrap().contains("spec.severity"));
        assert_eq!(root_remediation(&p), Some(Remediation::Enforce));
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
}

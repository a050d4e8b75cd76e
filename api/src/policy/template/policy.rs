//! A ConfigurationPolicy's managed-cluster templates resolved, as config-policy-controller
//! resolves them: each templated `object-templates[i].objectDefinition` on its own, or
//! `object-templates-raw` once, then read as the list of object templates. A template that
//! fails becomes a NonCompliant finding with OCM's error text; the others are evaluated.

use super::funcs::Mode;
use super::preprocess::{SPOKE, has_template};
use super::source::{Query, Source};
use super::{Outcome, Resolver, TemplateError};
use crate::policy::FieldError;
use crate::policy::config::{ConfigurationPolicy, ObjectTemplate, Templates, object_templates};
use crate::policy::evaluate::Finding;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// A ConfigurationPolicy after its templates were resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedPolicy {
    /// The policy with every template that resolved in place, and the ones that failed left out.
    pub policy: ConfigurationPolicy,
    /// One NonCompliant finding per template that failed, with OCM's text.
    pub errors: Vec<Finding>,
    /// What the resolution read.
    pub reads: BTreeSet<Query>,
    /// Whether a Secret was read.
    pub sensitive: bool,
}

/// The outcome of one round.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyOutcome {
    /// Every template resolved or failed.
    Done(Box<ResolvedPolicy>),
    /// Reads to fetch before the next round.
    Pending(BTreeSet<Query>),
}

/// Whether the policy holds managed-cluster templates.
pub fn is_templated(policy: &ConfigurationPolicy) -> bool {
    match &policy.templates {
        Templates::Templated(_) => true,
        Templates::Objects(list) => list.iter().any(object_is_templated),
    }
}

fn object_is_templated(t: &ObjectTemplate) -> bool {
    has_template(&Value::Object(t.object.clone()).to_string(), SPOKE)
}

/// A template failure as a finding: NonCompliant, its message alone (cut to
/// [`crate::policy::history::MAX_MESSAGE`]: it may quote the whole template), nothing to enforce.
pub fn error_finding(message: String) -> Finding {
    Finding {
        compliant: false,
        resource: String::new(),
        names: Vec::new(),
        namespace: String::new(),
        what: crate::policy::history::cut(&message).into_owned(),
        actions: Vec::new(),
        check: None,
    }
}

/// Resolves the policy's templates against `source` (one round), every function failing once
/// this round has used `budget` of its thread's CPU time (the caller gives a resolution's
/// rounds what the earlier ones left).
pub fn resolve_policy(
    policy: &ConfigurationPolicy,
    source: Arc<dyn Source>,
    budget: Duration,
) -> PolicyOutcome {
    let resolver = Resolver {
        mode: Mode::Spoke,
        context: super::value::map_of([]),
        source,
        protect: None,
        deadline: super::budget::Deadline::after(budget),
    };
    let mut out = ResolvedPolicy {
        policy: policy.clone(),
        errors: Vec::new(),
        reads: BTreeSet::new(),
        sensitive: false,
    };
    let mut pending = BTreeSet::new();
    match &policy.templates {
        Templates::Templated(raw) => match resolver.resolve_yaml(raw) {
            Ok(Outcome::Pending(p)) => pending.extend(p),
            Ok(Outcome::Resolved(r)) => {
                out.reads.extend(r.reads);
                out.sensitive |= r.sensitive;
                let mut errors: Vec<FieldError> = Vec::new();
                let list = object_templates(&r.value, "spec.object-templates-raw", &mut errors);
                if errors.is_empty() {
                    let list =
                        list.into_iter()
                            .map(|mut t| {
                                // Every value of a resolved raw text came out of its template.
                                t.namespace_templated = t.object.get("metadata").is_some_and(|m| {
                                    m.get("namespace").is_some_and(Value::is_string)
                                });
                                trim_identity(&mut t.object);
                                t
                            })
                            .collect();
                    out.policy.templates = Templates::Objects(list);
                } else {
                    out.policy.templates = Templates::Objects(Vec::new());
                    let what: Vec<String> = errors
                        .iter()
                        .map(|e| format!("{}: {}", e.path, e.message))
                        .collect();
                    out.errors.push(error_finding(format!(
                        "the resolved object-templates-raw is not a list of object templates: {}",
                        what.join("; ")
                    )));
                }
            }
            Err(e) => {
                out.policy.templates = Templates::Objects(Vec::new());
                out.errors.push(error_finding(e.to_string()));
            }
        },
        Templates::Objects(list) => {
            let mut kept = Vec::with_capacity(list.len());
            for t in list {
                if !object_is_templated(t) {
                    kept.push(t.clone());
                    continue;
                }
                match resolve_object(&resolver, t) {
                    Ok(Outcome::Pending(p)) => pending.extend(p),
                    Ok(Outcome::Resolved(r)) => {
                        out.reads.extend(r.reads);
                        out.sensitive |= r.sensitive;
                        match r.value {
                            Value::Object(mut object) => {
                                trim_identity(&mut object);
                                kind_as_written(&t.object, &mut object);
                                kept.push(ObjectTemplate {
                                    namespace_templated: namespace_templated(t),
                                    object,
                                    ..t.clone()
                                })
                            }
                            other => out.errors.push(error_finding(format!(
                                "the resolved objectDefinition is not an object: {other}"
                            ))),
                        }
                    }
                    Err(e) => out.errors.push(error_finding(e.to_string())),
                }
            }
            out.policy.templates = Templates::Objects(kept);
        }
    }
    if pending.is_empty() {
        if out.sensitive {
            censor(&mut out.policy);
        }
        PolicyOutcome::Done(Box::new(out))
    } else {
        PolicyOutcome::Pending(pending)
    }
}

/// A resolution that read a Secret reports no differences unless a template asks
/// (config-policy-controller defaults `recordDiff` to `Censored` when `HasSensitiveData`;
/// Flotilla's nearest is `None`): the values compared may be the Secret's.
fn censor(policy: &mut ConfigurationPolicy) {
    if let Templates::Objects(list) = &mut policy.templates {
        for t in list {
            t.record_diff
                .get_or_insert(crate::policy::config::RecordDiff::None);
        }
    }
}

/// Whether the unresolved template's `metadata.namespace` holds a template.
fn namespace_templated(t: &ObjectTemplate) -> bool {
    t.object
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .is_some_and(|ns| has_template(ns, SPOKE))
}

/// config-policy-controller maps an object template by the `apiVersion` and `kind` of its
/// *unresolved* objectDefinition (`getMapping` runs before the template is resolved), so a
/// template cannot choose the kind: a templated `kind` is looked up as written and fails with
/// OCM's mapping error (`couldn't find mapping resource with kind {{ … }} …`).
fn kind_as_written(
    unresolved: &serde_json::Map<String, Value>,
    object: &mut serde_json::Map<String, Value>,
) {
    for key in ["apiVersion", "kind"] {
        if let Some(written @ Value::String(text)) = unresolved.get(key)
            && has_template(text, SPOKE)
        {
            object.insert(key.to_string(), written.clone());
        }
    }
}

/// config-policy-controller trims the name, namespace and kind a template resolved to
/// (`strings.TrimSpace`): a ConfigMap value `"prod\n"` names namespace `prod`.
fn trim_identity(object: &mut serde_json::Map<String, Value>) {
    if let Some(Value::String(k)) = object.get_mut("kind") {
        *k = k.trim().to_string();
    }
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        for key in ["name", "namespace"] {
            if let Some(Value::String(v)) = meta.get_mut(key) {
                *v = v.trim().to_string();
            }
        }
    }
}

fn resolve_object(resolver: &Resolver, t: &ObjectTemplate) -> Result<Outcome, TemplateError> {
    resolver.resolve_json(&Value::Object(t.object.clone()))
}

//! Pure decisions of a replicated policy on the spoke: which templates it holds and how each is
//! judged (a template with fields its CRD does not define is refused, as OCM's spoke refuses
//! it), what each waits for (its dependencies) and what it reports meanwhile, the cluster's
//! compliance over them, and when to evaluate again.

use flotilla_api::policy::certificate::{CERTIFICATE_POLICY, CertificatePolicy};
use flotilla_api::policy::config::{ConfigurationPolicy, Interval, Remediation, TemplateMeta};
use flotilla_api::policy::dependency::{self, Dependency, Observed};
use flotilla_api::policy::strict;
use flotilla_api::policy::template::preprocess::{self, HUB};
use flotilla_api::policy::template::protected;
use flotilla_api::policy::{Compliance, GROUP};
use flotilla_api::v1::Policy;
use std::collections::BTreeMap;
use std::time::Duration;

/// One policy template as the agent holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Template {
    /// A ConfigurationPolicy: evaluated and enforced here.
    Config(Box<ConfigurationPolicy>),
    /// A CertificatePolicy: the cluster's Secrets judged here (enforce is inform).
    Certificate(Box<CertificatePolicy>),
    /// A kind Flotilla does not evaluate: always NonCompliant, naming the kind.
    Unsupported(TemplateMeta),
    /// A template OCM's spoke would not create (its CRD does not define some of its fields:
    /// the API server's strict field validation refuses it): never evaluated, reported as the
    /// framework add-on reports it, `NonCompliant; template-error; <message>`.
    Refused {
        /// Its name and kind.
        meta: TemplateMeta,
        /// The add-on's message (`Failed to create policy template: …`).
        message: String,
    },
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
            Template::Certificate(c) => (c.name.clone(), CERTIFICATE_POLICY.into()),
            Template::Unsupported(m)
            | Template::Invalid { meta: m, .. }
            | Template::Refused { meta: m, .. } => (m.name.clone(), m.kind.clone()),
        }
    }

    /// The message of a template that is never evaluated (`None` for the kinds that are).
    pub fn fixed_message(&self) -> Option<String> {
        match self {
            Template::Config(_) | Template::Certificate(_) => None,
            Template::Unsupported(m) => Some(format!(
                "NonCompliant; violation - template kind {} ({}) is not evaluated by Flotilla; \
                 only ConfigurationPolicy and CertificatePolicy are",
                m.kind, m.api_version
            )),
            Template::Invalid { reason, .. } => Some(format!(
                "NonCompliant; violation - the template cannot be read: {reason}"
            )),
            // Cut to what a report may carry: a hub template's error quotes the template.
            Template::Refused { message, .. } => Some(
                flotilla_api::policy::history::cut(&format!(
                    "NonCompliant; template-error; {message}"
                ))
                .into_owned(),
            ),
        }
    }
}

/// What a template still holding hub templates (`{{hub … hub}}`) reports: the hub did not
/// resolve them (the root turns them off, or the hub predates them). It is never evaluated
/// literally.
pub const HUB_TEMPLATES_UNRESOLVED: &str = "the policy's hub templates ({{hub ... hub}}) were \
    not resolved by the hub (policy.open-cluster-management.io/disable-templates is set on \
    the root policy, or the hub does not resolve hub templates)";

/// Opens a protected value: the box and the sealing hub's key (`X…`).
pub use protected::Open as Opener;

/// The templates of a replicated policy, in order, without opening protected values (a
/// template holding one is refused).
pub fn templates(policy: &Policy) -> Vec<Template> {
    templates_opened(policy, None)
}

/// The templates of a replicated policy, in order, protected values opened with `open` (the
/// agent's curve key).
pub fn templates_opened(policy: &Policy, open: Option<Opener<'_>>) -> Vec<Template> {
    let Some(spec) = &policy.spec else {
        return Vec::new();
    };
    spec.policy_templates
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut value: serde_json::Value = match serde_json::from_slice(&t.object_definition) {
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
            // The hub could not resolve the template's hub templates for this cluster: OCM's
            // framework add-on reports the annotation's error and evaluates nothing of it.
            if let Some(error) = protected::annotation(&value, protected::HUB_TEMPLATES_ERROR) {
                return Template::Refused {
                    meta,
                    message: error.to_string(),
                };
            }
            // Hub templates are the hub's to resolve before delivery: a template still
            // holding one is reported, never evaluated literally.
            if preprocess::has_template(&String::from_utf8_lossy(&t.object_definition), HUB) {
                return Template::Refused {
                    meta,
                    message: HUB_TEMPLATES_UNRESOLVED.into(),
                };
            }
            // Values the hub protected for this cluster, opened before anything reads them.
            if String::from_utf8_lossy(&t.object_definition).contains(protected::ENCRYPTED) {
                let opened = match open {
                    Some(open) => protected::open_all(&mut value, open),
                    None => Err(protected::OpenError::Box("no key to open it with".into())),
                };
                if let Err(e) = opened {
                    return Template::Refused {
                        meta,
                        message: format!("failed to decrypt a protected value: {e}"),
                    };
                }
            }
            // The API server's strict decoding comes before any validation of the values.
            if meta.is_configuration_policy() || is_certificate_policy(&meta) {
                let unknown = strict::unknown_fields(&meta.kind, &value).unwrap_or_default();
                if !unknown.is_empty() {
                    let message = strict::refusal(&meta.kind, &meta.api_version, &unknown);
                    return Template::Refused { meta, message };
                }
            }
            let read = if meta.is_configuration_policy() {
                ConfigurationPolicy::from_value(&value).map(|c| Template::Config(Box::new(c)))
            } else if is_certificate_policy(&meta) {
                CertificatePolicy::from_value(&value).map(|c| Template::Certificate(Box::new(c)))
            } else {
                return Template::Unsupported(meta);
            };
            read.unwrap_or_else(|errors| Template::Invalid {
                meta,
                reason: join(&errors),
            })
        })
        .collect()
}

/// A CertificatePolicy of the policy group.
fn is_certificate_policy(meta: &TemplateMeta) -> bool {
    meta.kind == CERTIFICATE_POLICY
        && meta
            .api_version
            .split_once('/')
            .is_some_and(|(g, _)| g == GROUP)
}

fn join(errors: &[flotilla_api::policy::FieldError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a template waits for before it is evaluated: the policy's `dependencies` and its own
/// `extraDependencies`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    /// Every object the template depends on, each once.
    pub dependencies: Vec<Dependency>,
    /// `ignorePending`: while waiting, the template counts as Compliant (OCM's semantics).
    pub ignore_pending: bool,
}

/// Each template's [`Gate`], in template order, on `cluster`; `Err` names a dependency asked
/// for in two compliance states (that template is not evaluated).
pub fn gates(policy: &Policy, cluster: &str) -> Vec<Result<Gate, String>> {
    let Some(spec) = &policy.spec else {
        return Vec::new();
    };
    spec.policy_templates
        .iter()
        .map(|t| {
            dependency::of_template(&spec.dependencies, &t.extra_dependencies, cluster).map(
                |dependencies| Gate {
                    dependencies,
                    ignore_pending: t.ignore_pending,
                },
            )
        })
        .collect()
}

/// A template that is not evaluated because of its dependencies: `Pending` with OCM's
/// message, or — with `ignorePending` — `Compliant`, saying so.
pub fn waiting_status(pending: &str, ignore_pending: bool) -> (Compliance, String) {
    if ignore_pending {
        (
            Compliance::Compliant,
            format!("Compliant; {pending} but ignorePending is true"),
        )
    } else {
        (Compliance::Pending, format!("Pending; {pending}"))
    }
}

/// A template's message while its dependencies, as `observe` shows them, are not all met;
/// `None` when they are (or it has none).
pub fn waiting_for(gate: &Gate, observe: impl FnMut(&Dependency) -> Observed) -> Option<String> {
    let unmet = dependency::unmet(&gate.dependencies, observe);
    (!unmet.is_empty()).then(|| dependency::pending_message(&unmet))
}

/// One policy this agent holds, as a dependency sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    /// The policy's compliance on this cluster.
    pub compliance: Compliance,
    /// Each template's `(kind, name, compliance)`.
    pub templates: Vec<(String, String, Compliance)>,
}

/// The compliance of every policy this agent holds, by replicated name (`<namespace>.<name>`):
/// what a dependency on a Policy or a policy template is checked against. The agent is the
/// only one evaluating policies on its cluster, so it knows them without reading the cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Compliances(BTreeMap<String, Held>);

impl Compliances {
    /// Records a policy's compliance; whether anything changed.
    pub fn set(&mut self, policy: &str, held: Held) -> bool {
        if self.0.get(policy) == Some(&held) {
            return false;
        }
        self.0.insert(policy.to_string(), held);
        true
    }

    /// Forgets a removed policy; whether it was held.
    pub fn remove(&mut self, policy: &str) -> bool {
        self.0.remove(policy).is_some()
    }

    /// A dependency on one of OCM's governance kinds as this agent sees it (a policy it does
    /// not hold, or a PolicySet the hub could not expand, is not found); `None` for any other
    /// kind, which is read from the cluster.
    pub fn observe(&self, dep: &Dependency) -> Option<Observed> {
        if dep.group != GROUP {
            return None;
        }
        let found = if dep.is_policy() {
            self.0.get(&dep.name).map(|h| h.compliance)
        } else if dep.is_policy_kind() {
            self.0.values().find_map(|h| {
                h.templates
                    .iter()
                    .find(|(kind, name, _)| *kind == dep.kind && *name == dep.name)
                    .map(|(_, _, c)| *c)
            })
        } else {
            None
        };
        Some(found.map_or(Observed::NotFound, Observed::Found))
    }
}

/// What a dependency on another kind shows in the object read from the cluster (`None`:
/// absent): its `status.compliant`, as OCM's framework reads it.
pub fn observe_object(object: Option<&serde_json::Value>) -> Observed {
    let Some(o) = object else {
        return Observed::NotFound;
    };
    match o["status"]["compliant"].as_str() {
        None | Some("") => Observed::Found(Compliance::Unknown),
        Some(s) => match Compliance::parse(s) {
            Compliance::Unknown => Observed::Other(s.to_string()),
            c => Observed::Found(c),
        },
    }
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

/// The longest a CertificatePolicy goes without being judged again (OCM polls every 10 s;
/// here changes and certificates' crossings wake it, this is the floor).
pub const CERTIFICATE_FLOOR: Duration = Duration::from_secs(600);

/// When a CertificatePolicy is judged again, besides on every change the backend signals: at
/// the next instant a certificate crosses its minimum duration, and at least every
/// [`CERTIFICATE_FLOOR`] (every `poll` when the backend signals no changes).
pub fn certificate_next(
    next_check: Option<time::OffsetDateTime>,
    now: time::OffsetDateTime,
    backend_signals_changes: bool,
    poll: Duration,
) -> Duration {
    let floor = if backend_signals_changes {
        CERTIFICATE_FLOOR
    } else {
        poll.min(CERTIFICATE_FLOOR)
    };
    let until_crossing = next_check
        .map(|at| Duration::try_from(at - now).unwrap_or_default())
        .unwrap_or(floor);
    until_crossing.clamp(Duration::from_millis(100), floor)
}

/// Whether a change on the cluster makes the template be evaluated again: not for `never`
/// after a compliant result (OCM: evaluated again only when the policy changes).
pub fn reevaluate_on_change(policy: &ConfigurationPolicy, last: Compliance) -> bool {
    !(last == Compliance::Compliant && policy.interval.compliant == Interval::Never
        || last == Compliance::NonCompliant && policy.interval.noncompliant == Interval::Never)
}

#[cfg(test)]
mod tests;

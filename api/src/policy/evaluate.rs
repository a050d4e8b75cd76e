//! One ConfigurationPolicy against a snapshot of the cluster: compliance, OCM's messages (a
//! template whose kind the cluster does not serve gets OCM's mapping error), and the writes
//! enforce would make — returned as [`Action`]s, never carried out here. The agent
//! reads a [`Snapshot`], calls [`evaluate`], has the cluster validate strictly the writes the
//! evaluation names ([`Evaluation::checks`]; a refused one becomes OCM's violation,
//! [`Evaluation::refuse`]), performs the actions and settles the outcome with
//! [`Evaluation::settle`].

use super::Compliance;
use super::compare::{Comparison, compare};
use super::config::{
    ComplianceType, ConfigurationPolicy, ObjectTemplate, Prune, RecordDiff, Remediation, Templates,
};
use super::namespaces::{Namespace, select};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The objects of the cluster a policy is judged against.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every namespace with its labels.
    pub namespaces: Vec<Namespace>,
    /// Every object of the kinds the policy's templates name (see [`kinds`]).
    pub objects: Vec<Value>,
    /// The `(apiVersion, kind)`s of [`kinds`] the cluster does not serve (a version its
    /// Kubernetes release removed, a CRD not installed): their templates are NonCompliant with
    /// OCM's mapping error, never matched against another version's objects.
    pub unserved: BTreeSet<(String, String)>,
}

/// Identity of one object on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `apiVersion` (`v1`, `rbac.authorization.k8s.io/v1`).
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// API group (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {} {}", self.api_version, self.kind, self.name)
        } else {
            write!(
                f,
                "{} {} {}/{}",
                self.api_version, self.kind, self.namespace, self.name
            )
        }
    }
}

/// A write enforce makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the object.
    Create(ObjectKey, Value),
    /// Replace the object with this one (the existing object with the template merged in).
    Update(ObjectKey, Value),
    /// Delete the object.
    Delete(ObjectKey),
}

impl Action {
    /// The object the action writes.
    pub fn key(&self) -> &ObjectKey {
        match self {
            Action::Create(k, _) | Action::Update(k, _) | Action::Delete(k) => k,
        }
    }
}

/// A write for the cluster to validate strictly before it is made: config-policy-controller
/// creates with `fieldValidation=Strict` and dry-runs the update of a mismatching object — in
/// inform too — so that a field its kind does not define is reported, never silently dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The object.
    pub key: ObjectKey,
    /// What would be written: the template as created, or the existing object merged with it.
    pub object: Value,
    /// A create (the object is missing), or an update of the existing object.
    pub create: bool,
}

/// What one object template found in one namespace (or cluster-wide).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Whether this part is compliant before any enforce.
    pub compliant: bool,
    /// Plural resource (`namespaces`, `roles`); empty for a finding about the template as a
    /// whole (its kind not served), whose message is [`Finding::what`] alone.
    pub resource: String,
    /// Names of the objects concerned (sorted), empty when the template names none.
    pub names: Vec<String>,
    /// Namespace, empty when cluster-scoped.
    pub namespace: String,
    /// What was found (`found as specified`, `not found`, …).
    pub what: String,
    /// The repairs, when enforcing and one is possible (an unnamed `mustnothave` deletes every
    /// match).
    pub actions: Vec<Action>,
    /// The write to validate first (named templates only): the create enforce would make, or
    /// the update of a mismatching object in either remediation.
    pub check: Option<Check>,
}

impl Finding {
    fn text(&self, what: &str) -> String {
        let mut s = self.resource.clone();
        if !self.names.is_empty() {
            s.push_str(&format!(" [{}]", self.names.join(", ")));
        }
        if !self.namespace.is_empty() {
            s.push_str(&format!(" in namespace {}", self.namespace));
        }
        if !what.is_empty() {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(what);
        }
        s
    }
}

/// The result of evaluating a policy template.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The effective remediation.
    pub remediation: Remediation,
    /// Every finding, in template order.
    pub findings: Vec<Finding>,
    /// A problem that makes the template unevaluable (reported NonCompliant).
    pub error: Option<String>,
}

/// How an enforce action turned out.
pub type ActionResult = Result<(), String>;

impl Evaluation {
    /// Compliance before enforce: NonCompliant when anything is violated or unevaluable.
    pub fn compliance(&self) -> Compliance {
        if self.error.is_some() || self.findings.iter().any(|f| !f.compliant) {
            Compliance::NonCompliant
        } else {
            Compliance::Compliant
        }
    }

    /// The writes enforce makes, in template order.
    pub fn actions(&self) -> Vec<Action> {
        self.findings
            .iter()
            .flat_map(|f| f.actions.iter().cloned())
            .collect()
    }

    /// The writes to validate strictly before any is made, with the index of their finding.
    pub fn checks(&self) -> Vec<(usize, &Check)> {
        self.findings
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.check.as_ref().map(|c| (i, c)))
            .collect()
    }

    /// Finding `i`'s write was refused by the cluster's strict validation (`error`, the API
    /// server's words): a violation in config-policy-controller's words, nothing written for
    /// it. A refused create reads "deployments \[web\] in namespace default is missing, and
    /// cannot be created, reason: \`…\`"; a refused update "Error validating the object web, the
    /// error is \`…\`" (a message that names the object itself).
    pub fn refuse(&mut self, i: usize, error: &str) {
        let Some(f) = self.findings.get_mut(i) else {
            return;
        };
        let Some(check) = f.check.take() else {
            return;
        };
        f.compliant = false;
        f.actions.clear();
        if check.create {
            f.what = format!("is missing, and cannot be created, reason: `{error}`");
        } else {
            f.what = format!(
                "Error validating the object {}, the error is `{error}`",
                check.key.name
            );
            f.resource.clear();
            f.names.clear();
            f.namespace.clear();
        }
    }

    /// Compliance and OCM's message once the actions ran: `results[i]` is the outcome of
    /// [`Evaluation::actions`]`[i]`. A violation repaired counts as compliant ("was created
    /// successfully"); one not repaired (inform, a failed or missing result, nothing enforce can
    /// do) stays a violation. When anything is violated the message lists only the violations.
    pub fn settle(&self, results: &[ActionResult]) -> (Compliance, String) {
        if let Some(e) = &self.error {
            return (
                Compliance::NonCompliant,
                format!("NonCompliant; violation - {e}"),
            );
        }
        let mut results = results.iter();
        let mut violations = Vec::new();
        let mut notes = Vec::new();
        for f in &self.findings {
            if f.compliant {
                notes.push(f.text(&f.what));
                continue;
            }
            let Some(first) = f.actions.first() else {
                violations.push(f.text(&f.what));
                continue;
            };
            let outcomes: Vec<&ActionResult> = (&mut results).take(f.actions.len()).collect();
            let errors: Vec<String> = outcomes
                .iter()
                .filter_map(|r| r.as_ref().err().cloned())
                .collect();
            if outcomes.len() < f.actions.len() {
                // Not carried out: still a violation.
                violations.push(f.text(&f.what));
            } else if errors.is_empty() {
                notes.push(f.text(match first {
                    Action::Create(..) => "was created successfully",
                    Action::Update(..) => "was updated successfully",
                    Action::Delete(..) => "was deleted successfully",
                }));
            } else {
                violations.push(format!("{}: {}", f.text(&f.what), errors.join(", ")));
            }
        }
        if violations.is_empty() {
            (
                Compliance::Compliant,
                format!("Compliant; notification - {}", notes.join("; ")),
            )
        } else {
            (
                Compliance::NonCompliant,
                format!("NonCompliant; violation - {}", violations.join("; ")),
            )
        }
    }
}

/// The kinds (`(apiVersion, kind)`) whose objects a policy needs in its [`Snapshot`].
pub fn kinds(policy: &ConfigurationPolicy) -> Vec<(String, String)> {
    let Templates::Objects(templates) = &policy.templates else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = templates
        .iter()
        .map(|t| (t.api_version().to_string(), t.kind().to_string()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Evaluates `policy` against `snapshot`. `root` is the Policy's own `remediationAction`, which
/// overrides the template's (OCM: "the policy-template spec.remediationAction is overridden by
/// the preceding parameter value").
pub fn evaluate(
    policy: &ConfigurationPolicy,
    root: Option<Remediation>,
    snapshot: &Snapshot,
) -> Evaluation {
    let remediation = root.or(policy.remediation).unwrap_or(Remediation::Inform);
    let templates = match &policy.templates {
        Templates::Objects(t) => t,
        Templates::Templated(_) => {
            return Evaluation {
                remediation,
                findings: Vec::new(),
                error: Some(
                    "object-templates-raw uses Go templates ({{ … }}) that were not resolved \
                     before evaluation"
                        .into(),
                ),
            };
        }
    };
    let selected = select(&policy.namespace_selector, &snapshot.namespaces);
    let mut findings = Vec::new();
    for t in templates {
        if snapshot
            .unserved
            .contains(&(t.api_version().to_string(), t.kind().to_string()))
        {
            findings.push(unserved(t));
            continue;
        }
        findings.extend(evaluate_template(
            t,
            remediation,
            &selected,
            &snapshot.objects,
        ));
    }
    Evaluation {
        remediation,
        findings,
        error: None,
    }
}

/// The finding of a template whose kind the cluster does not serve in its apiVersion, in
/// config-policy-controller's words (`getMapping`): NonCompliant, nothing enforce can do.
fn unserved(t: &ObjectTemplate) -> Finding {
    Finding {
        compliant: false,
        resource: String::new(),
        names: Vec::new(),
        namespace: String::new(),
        what: unserved_message(t.api_version(), t.kind()),
        actions: Vec::new(),
        check: None,
    }
}

/// OCM's message for a kind not served: `couldn't find mapping resource with kind CronJob in
/// API version batch/v1beta1, please check if you have CRD deployed`
/// (config-policy-controller@ecf24b4 `controllers/configurationpolicy_controller.go` l. 2567).
pub fn unserved_message(api_version: &str, kind: &str) -> String {
    format!(
        "couldn't find mapping resource with kind {kind} in API version {api_version}, please \
         check if you have CRD deployed"
    )
}

fn evaluate_template(
    t: &ObjectTemplate,
    remediation: Remediation,
    selected: &[String],
    objects: &[Value],
) -> Vec<Finding> {
    let resource = crate::work::kind_to_resource(t.kind());
    if let Some(what) = moved_namespace(t, selected) {
        return vec![Finding {
            compliant: false,
            resource,
            names: t.name().map(str::to_string).into_iter().collect(),
            namespace: String::new(),
            what,
            actions: Vec::new(),
            check: None,
        }];
    }
    let namespaces: Vec<String> = if t.is_cluster_scoped() {
        vec![String::new()]
    } else if let Some(ns) = t.namespace() {
        vec![ns.to_string()]
    } else if selected.is_empty() {
        return vec![Finding {
            compliant: false,
            resource,
            names: t.name().map(str::to_string).into_iter().collect(),
            namespace: String::new(),
            what: format!(
                "is namespaced ({}) but has no namespace: neither the policy's \
                 namespaceSelector nor the object's metadata.namespace names one",
                t.kind()
            ),
            actions: Vec::new(),
            check: None,
        }];
    } else {
        selected.to_vec()
    };
    namespaces
        .iter()
        .map(|ns| evaluate_in(t, remediation, &resource, ns, objects))
        .collect()
}

/// config-policy-controller's checks of a namespace a template resolved (`determineDesiredObjects`):
/// a namespaced object whose templated namespace came out empty is not sent to every selected
/// namespace, and one outside the namespace selector's choice is not used.
fn moved_namespace(t: &ObjectTemplate, selected: &[String]) -> Option<String> {
    if !t.namespace_templated || t.is_cluster_scoped() {
        return None;
    }
    match t.namespace() {
        None => Some(format!(
            "namespaced object {} of kind {} has no namespace specified after template resolution",
            t.name().unwrap_or_default(),
            t.kind()
        )),
        Some(ns) if !selected.is_empty() && !selected.iter().any(|s| s == ns) => Some(
            "The object definition's namespace must match the result from the namespace \
             selector after template resolution"
                .to_string(),
        ),
        Some(_) => None,
    }
}

fn meta_str<'a>(o: &'a Value, key: &str) -> &'a str {
    o.get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn same_kind(o: &Value, t: &ObjectTemplate) -> bool {
    let group = |api: &str| api.split_once('/').map(|(g, _)| g.to_string());
    let o_api = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    o.get("kind").and_then(Value::as_str) == Some(t.kind())
        && group(o_api).unwrap_or_default() == t.group()
}

/// Whether the template says anything beyond the object's identity (`mustnothave` of a bare
/// name matches any object of that name).
fn has_content(t: &ObjectTemplate) -> bool {
    t.object.iter().any(|(k, v)| match k.as_str() {
        "apiVersion" | "kind" => false,
        "metadata" => v
            .as_object()
            .is_some_and(|m| m.contains_key("labels") || m.contains_key("annotations")),
        _ => true,
    })
}

fn key_of(t: &ObjectTemplate, ns: &str, name: &str) -> ObjectKey {
    ObjectKey {
        api_version: t.api_version().to_string(),
        kind: t.kind().to_string(),
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

/// The object a `musthave`/`mustonlyhave` template creates: the template with the namespace
/// it is checked in, without `null` fields.
fn to_create(t: &ObjectTemplate, ns: &str) -> Value {
    let mut obj = Value::Object(strip_nulls(&t.object));
    if !ns.is_empty()
        && let Some(m) = obj.as_object_mut().and_then(|o| {
            o.entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
        })
    {
        m.insert("namespace".into(), Value::String(ns.to_string()));
    }
    obj
}

fn strip_nulls(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let v = match v {
                Value::Object(inner) => Value::Object(strip_nulls(inner)),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn diff_note(t: &ObjectTemplate, c: &Comparison) -> String {
    let record = t.record_diff.unwrap_or(if t.kind() == "Secret" {
        RecordDiff::None
    } else {
        RecordDiff::InStatus
    });
    if record != RecordDiff::InStatus || c.diffs.is_empty() {
        return String::new();
    }
    format!(" (differs at {})", c.diffs.join(", "))
}

fn evaluate_in(
    t: &ObjectTemplate,
    remediation: Remediation,
    resource: &str,
    ns: &str,
    objects: &[Value],
) -> Finding {
    let enforce = remediation == Remediation::Enforce;
    let compare_as = match t.compliance {
        ComplianceType::MustNotHave => ComplianceType::MustHave,
        c => c,
    };
    let candidates = objects.iter().filter(|o| {
        same_kind(o, t)
            && meta_str(o, "namespace") == ns
            && t.object_selector.as_ref().is_none_or(|sel| {
                crate::selector::matches_labels(sel, &super::config::labels_of(o))
            })
    });
    let mut finding = Finding {
        compliant: true,
        resource: resource.to_string(),
        names: Vec::new(),
        namespace: ns.to_string(),
        what: String::new(),
        actions: Vec::new(),
        check: None,
    };
    if let Some(name) = t.name() {
        finding.names = vec![name.to_string()];
        let existing = candidates.into_iter().find(|o| meta_str(o, "name") == name);
        let key = key_of(t, ns, name);
        match (t.compliance, existing) {
            (ComplianceType::MustNotHave, None) => finding.what = "missing as expected".into(),
            (ComplianceType::MustNotHave, Some(o)) => {
                let found = !has_content(t)
                    || compare(&t.object, o, compare_as, t.metadata_compliance).matches;
                if found {
                    finding.compliant = false;
                    finding.what = "found".into();
                    finding
                        .actions
                        .extend(enforce.then_some(Action::Delete(key)));
                } else {
                    finding.what = "missing as expected".into();
                }
            }
            (_, None) => {
                finding.compliant = false;
                finding.what = "not found".into();
                if enforce {
                    let object = to_create(t, ns);
                    finding.check = Some(Check {
                        key: key.clone(),
                        object: object.clone(),
                        create: true,
                    });
                    finding.actions.push(Action::Create(key, object));
                }
            }
            (_, Some(o)) => {
                let c = compare(&t.object, o, compare_as, t.metadata_compliance);
                if c.matches {
                    finding.what = "found as specified".into();
                } else {
                    finding.compliant = false;
                    finding.what = format!("found but not as specified{}", diff_note(t, &c));
                    finding.check = Some(Check {
                        key: key.clone(),
                        object: c.desired.clone(),
                        create: false,
                    });
                    finding
                        .actions
                        .extend(enforce.then_some(Action::Update(key, c.desired)));
                }
            }
        }
        return finding;
    }
    // No name: judge every object of the kind in the namespace.
    let matching: BTreeMap<&str, &Value> = candidates
        .filter(|o| {
            !has_content(t) || compare(&t.object, o, compare_as, t.metadata_compliance).matches
        })
        .map(|o| (meta_str(o, "name"), o))
        .collect();
    finding.names = matching.keys().map(|s| s.to_string()).collect();
    match (t.compliance, matching.is_empty()) {
        (ComplianceType::MustNotHave, true) => finding.what = "missing as expected".into(),
        (ComplianceType::MustNotHave, false) => {
            finding.compliant = false;
            finding.what = "found".into();
            if enforce {
                finding.actions = finding
                    .names
                    .iter()
                    .map(|name| Action::Delete(key_of(t, ns, name)))
                    .collect();
            }
        }
        (_, false) => finding.what = "found as specified".into(),
        (_, true) => {
            finding.compliant = false;
            finding.what = if enforce {
                "not found (the template names no object, so enforce cannot create one)".into()
            } else {
                "not found".into()
            };
        }
    }
    finding
}

/// Objects pruning deletes when the policy is removed (`pruneObjectBehavior`): every object a
/// `musthave`/`mustonlyhave` template names (`DeleteAll`), or only those the policy created
/// (`DeleteIfCreated`, `created` holds them). Unnamed templates prune nothing.
pub fn prune(
    policy: &ConfigurationPolicy,
    snapshot: &Snapshot,
    created: &[ObjectKey],
) -> Vec<ObjectKey> {
    let Templates::Objects(templates) = &policy.templates else {
        return Vec::new();
    };
    if policy.prune == Prune::None {
        return Vec::new();
    }
    let selected = select(&policy.namespace_selector, &snapshot.namespaces);
    let mut out = Vec::new();
    for t in templates {
        if t.compliance == ComplianceType::MustNotHave {
            continue;
        }
        let Some(name) = t.name() else { continue };
        let namespaces: Vec<String> = if t.is_cluster_scoped() {
            vec![String::new()]
        } else if let Some(ns) = t.namespace() {
            vec![ns.to_string()]
        } else {
            selected.clone()
        };
        for ns in namespaces {
            let key = key_of(t, &ns, name);
            let exists = snapshot.objects.iter().any(|o| {
                same_kind(o, t) && meta_str(o, "namespace") == ns && meta_str(o, "name") == name
            });
            let wanted = match policy.prune {
                Prune::DeleteAll => true,
                Prune::DeleteIfCreated => created.contains(&key),
                Prune::None => false,
            };
            if exists && wanted && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

//! A ConfigurationPolicy (`policy.open-cluster-management.io/v1`) read from a policy template's
//! `objectDefinition`, with every problem named by its field. The spellings OCM's CRD accepts
//! are accepted (`musthave`, `MustHave`, `Musthave`; `inform`, `Inform`); a required field missing
//! or a value outside an enum is an error. Fields the CRD does not define are not read here:
//! [`super::strict`] finds them, and the agent reports such a template as OCM does (the API
//! server's strict refusal, a `template-error`) before reading it.

use super::FieldError;
use crate::v1::{LabelSelector, LabelSelectorRequirement};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::time::Duration;

/// `remediationAction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Remediation {
    /// Report only.
    Inform,
    /// Report and repair: create, patch or delete on the cluster.
    Enforce,
}

impl Remediation {
    /// Reads any case OCM accepts (`inform`, `Inform`, `enforce`, `Enforce`, and `InformOnly`,
    /// which a template reads as inform).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "inform" | "informonly" => Some(Self::Inform),
            "enforce" => Some(Self::Enforce),
            _ => None,
        }
    }

    /// OCM's lower-case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inform => "inform",
            Self::Enforce => "enforce",
        }
    }
}

/// `complianceType` of an object template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComplianceType {
    /// The object exists and contains the template's fields (lists merge).
    MustHave,
    /// The object exists and its templated fields are exactly the template's.
    MustOnlyHave,
    /// No object matches the template.
    MustNotHave,
}

impl ComplianceType {
    /// Reads any case OCM accepts.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "musthave" => Some(Self::MustHave),
            "mustonlyhave" => Some(Self::MustOnlyHave),
            "mustnothave" => Some(Self::MustNotHave),
            _ => None,
        }
    }

    /// OCM's lower-case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MustHave => "musthave",
            Self::MustOnlyHave => "mustonlyhave",
            Self::MustNotHave => "mustnothave",
        }
    }
}

/// `severity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Severity {
    /// Low (OCM's default when unset).
    #[default]
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Critical.
    Critical,
}

impl Severity {
    /// Reads `low`/`Low` … `critical`/`Critical`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "low" => Some(Self::Low),
            "medium" => Some(Self::Medium),
            "high" => Some(Self::High),
            "critical" => Some(Self::Critical),
            _ => None,
        }
    }

    /// Lower-case spelling (as `policy_governance_info` labels it).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }
}

/// `pruneObjectBehavior`: what happens to the objects when the policy is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Prune {
    /// Leave them (default).
    #[default]
    None,
    /// Delete every object the policy's musthave/mustonlyhave templates name.
    DeleteAll,
    /// Delete only the objects the policy created.
    DeleteIfCreated,
}

impl Prune {
    /// Reads `None`, `DeleteAll`, `DeleteIfCreated` (exact, as the CRD's enum).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "None" => Some(Self::None),
            "DeleteAll" => Some(Self::DeleteAll),
            "DeleteIfCreated" => Some(Self::DeleteIfCreated),
            _ => None,
        }
    }
}

/// `recordDiff`: whether a mismatch's differences are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RecordDiff {
    /// Not reported (the default for Secrets, whose values must not leave the spoke).
    None,
    /// Logged on the spoke only.
    Log,
    /// Reported in the status message (field paths, never values).
    #[default]
    InStatus,
}

impl RecordDiff {
    /// Reads `None`, `Log`, `InStatus`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "None" => Some(Self::None),
            "Log" => Some(Self::Log),
            "InStatus" => Some(Self::InStatus),
            _ => None,
        }
    }
}

/// When to evaluate again after a result (`evaluationInterval.compliant|noncompliant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Interval {
    /// On every change of the watched objects (and OCM's default).
    #[default]
    Watch,
    /// Not again until the policy changes.
    Never,
    /// After this long (and on changes).
    Every(Duration),
}

impl Interval {
    /// Reads `watch`, `never` or a Go duration (`10s`, `1h30m`, `1.5m`, `500ms`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "" | "watch" => Ok(Self::Watch),
            "never" => Ok(Self::Never),
            _ => parse_go_duration(s).map(Self::Every),
        }
    }
}

/// Parses a Go duration (`time.ParseDuration`, see [`crate::go_duration`]): one or more
/// `<number><unit>` with units `h`, `m`, `s`, `ms`, `us`, `ns`; not negative, at most 10 years.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    const TEN_YEARS: Duration = Duration::from_secs(10 * 365 * 86400);
    let bad = || format!("{s:?} is not a duration (10s, 1h30m, 500ms), \"watch\" or \"never\"");
    crate::go_duration::GoDuration::parse(s)
        .ok()
        .and_then(|d| d.to_std())
        .filter(|d| *d <= TEN_YEARS)
        .ok_or_else(bad)
}

/// `evaluationInterval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EvaluationInterval {
    /// After a Compliant result.
    pub compliant: Interval,
    /// After a NonCompliant result.
    pub noncompliant: Interval,
}

/// `namespaceSelector`: which namespaces a namespaced object template without
/// `metadata.namespace` is checked in.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamespaceSelector {
    /// Names or globs (`*`, `?`, `[a-z]`) of namespaces to include.
    pub include: Vec<String>,
    /// Names or globs to leave out.
    pub exclude: Vec<String>,
    /// Label selector over the namespaces' labels (`matchLabels`, `matchExpressions`).
    pub labels: Option<LabelSelector>,
}

/// One of `object-templates[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectTemplate {
    /// How the object is judged.
    pub compliance: ComplianceType,
    /// How `metadata.labels`/`annotations` are judged (default: as `compliance`).
    pub metadata_compliance: Option<ComplianceType>,
    /// Whether differences are reported.
    pub record_diff: Option<RecordDiff>,
    /// The object (apiVersion, kind, metadata and any fields), as written.
    pub object: Map<String, Value>,
    /// Only objects whose labels match (templates without a name).
    pub object_selector: Option<LabelSelector>,
    /// Whether `metadata.namespace` came out of a managed-cluster template (its result is
    /// checked against the namespace selector, as config-policy-controller does).
    pub namespace_templated: bool,
}

impl ObjectTemplate {
    /// `apiVersion` of the object.
    pub fn api_version(&self) -> &str {
        self.object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `kind` of the object.
    pub fn kind(&self) -> &str {
        self.object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// API group of the object (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version()
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// `metadata.name`, if the template names one object.
    pub fn name(&self) -> Option<&str> {
        self.metadata_str("name")
    }

    /// `metadata.namespace`, if the template names one.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata_str("namespace")
    }

    fn metadata_str(&self, key: &str) -> Option<&str> {
        self.object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Whether the object kind is cluster-scoped (Namespace, ClusterRole, …).
    pub fn is_cluster_scoped(&self) -> bool {
        crate::work::is_cluster_scoped(self.group(), self.kind())
    }
}

/// The object templates: given as a list, or as `object-templates-raw` (a YAML string).
#[derive(Debug, Clone, PartialEq)]
pub enum Templates {
    /// Parsed templates (from `object-templates`, or from a raw string without templating).
    Objects(Vec<ObjectTemplate>),
    /// `object-templates-raw` using Go templates (`{{ … }}`): the agent resolves it into
    /// [`Templates::Objects`] (`template::policy::resolve_policy`) before evaluating; evaluated
    /// unresolved it is NonCompliant, never silently compliant.
    Templated(String),
}

/// A ConfigurationPolicy, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigurationPolicy {
    /// `metadata.name`.
    pub name: String,
    /// The template's own `remediationAction` (the root Policy's overrides it).
    pub remediation: Option<Remediation>,
    /// `severity`.
    pub severity: Severity,
    /// `namespaceSelector`.
    pub namespace_selector: NamespaceSelector,
    /// `object-templates` or `object-templates-raw`.
    pub templates: Templates,
    /// `pruneObjectBehavior`.
    pub prune: Prune,
    /// `evaluationInterval`.
    pub interval: EvaluationInterval,
}

impl ConfigurationPolicy {
    /// Reads a ConfigurationPolicy from a template's `objectDefinition`; every problem is
    /// returned, each with its path inside the object (`spec.object-templates[0].complianceType`).
    pub fn from_value(object: &Value) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = template_name(object, &mut errors);
        let empty = Map::new();
        let spec = match object.get("spec") {
            Some(Value::Object(m)) => m,
            Some(_) => {
                errors.push(FieldError::new("spec", "must be a map"));
                &empty
            }
            None => {
                errors.push(FieldError::new("spec", "required"));
                &empty
            }
        };
        let remediation = opt_enum(
            spec,
            "remediationAction",
            "spec.remediationAction",
            "inform or enforce",
            Remediation::parse,
            &mut errors,
        );
        let severity = opt_enum(
            spec,
            "severity",
            "spec.severity",
            "low, medium, high or critical",
            Severity::parse,
            &mut errors,
        )
        .unwrap_or_default();
        let prune = opt_enum(
            spec,
            "pruneObjectBehavior",
            "spec.pruneObjectBehavior",
            "None, DeleteAll or DeleteIfCreated",
            Prune::parse,
            &mut errors,
        )
        .unwrap_or_default();
        let interval = interval(spec.get("evaluationInterval"), &mut errors);
        let namespace_selector = namespace_selector(spec.get("namespaceSelector"), &mut errors);
        let templates = templates(spec, &mut errors);
        if errors.is_empty() {
            Ok(Self {
                name,
                remediation,
                severity,
                namespace_selector,
                templates,
                prune,
                interval,
            })
        } else {
            Err(errors)
        }
    }
}

/// A policy template's `metadata.name`: required, a DNS subdomain.
pub(crate) fn template_name(object: &Value, errors: &mut Vec<FieldError>) -> String {
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    } else if let Err(e) = crate::names::validate_dns1123_subdomain("metadata.name", &name) {
        errors.push(FieldError::new("metadata.name", e.to_string()));
    }
    name
}

pub(crate) fn opt_str<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match map.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errors.push(FieldError::new(path, "must be a string"));
            None
        }
    }
}

pub(crate) fn opt_enum<T>(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
    want: &str,
    parse: fn(&str) -> Option<T>,
    errors: &mut Vec<FieldError>,
) -> Option<T> {
    let s = opt_str(map, key, path, errors)?;
    let parsed = parse(s);
    if parsed.is_none() {
        errors.push(FieldError::new(
            path,
            format!("unknown value {s:?} (want {want})"),
        ));
    }
    parsed
}

fn interval(v: Option<&Value>, errors: &mut Vec<FieldError>) -> EvaluationInterval {
    let mut out = EvaluationInterval::default();
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return out;
    };
    let Some(map) = v.as_object() else {
        errors.push(FieldError::new("spec.evaluationInterval", "must be a map"));
        return out;
    };
    for (key, slot) in [
        ("compliant", &mut out.compliant),
        ("noncompliant", &mut out.noncompliant),
    ] {
        let path = format!("spec.evaluationInterval.{key}");
        if let Some(s) = opt_str(map, key, &path, errors) {
            match Interval::parse(s) {
                Ok(i) => *slot = i,
                Err(e) => errors.push(FieldError::new(path, e)),
            }
        }
    }
    out
}

fn string_list(v: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item.as_str() {
                Some(s) if !s.is_empty() => Some(s.to_string()),
                Some(_) => {
                    errors.push(FieldError::new(format!("{path}[{i}]"), "must not be empty"));
                    None
                }
                None => {
                    errors.push(FieldError::new(format!("{path}[{i}]"), "must be a string"));
                    None
                }
            })
            .collect(),
        Some(_) => {
            errors.push(FieldError::new(path, "must be a list of strings"));
            Vec::new()
        }
    }
}

/// Reads a metav1.LabelSelector (`matchLabels`, `matchExpressions`) from JSON; `None` when it
/// has neither.
pub fn label_selector(
    map: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Option<LabelSelector> {
    let mut sel = LabelSelector::default();
    let mut given = false;
    match map.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            given = true;
            for (k, v) in labels {
                match v.as_str() {
                    Some(s) => {
                        sel.match_labels.insert(k.clone(), s.to_string());
                    }
                    None => errors.push(FieldError::new(
                        format!("{path}.matchLabels.{k}"),
                        "must be a string",
                    )),
                }
            }
        }
        Some(_) => errors.push(FieldError::new(
            format!("{path}.matchLabels"),
            "must be a map",
        )),
    }
    match map.get("matchExpressions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(exprs)) => {
            given = true;
            for (i, e) in exprs.iter().enumerate() {
                let p = format!("{path}.matchExpressions[{i}]");
                let Some(e) = e.as_object() else {
                    errors.push(FieldError::new(p, "must be a map"));
                    continue;
                };
                let key = opt_str(e, "key", &format!("{p}.key"), errors).unwrap_or_default();
                let operator =
                    opt_str(e, "operator", &format!("{p}.operator"), errors).unwrap_or_default();
                let values = string_list(e.get("values"), &format!("{p}.values"), errors);
                sel.match_expressions.push(LabelSelectorRequirement {
                    key: key.to_string(),
                    operator: operator.to_string(),
                    values,
                });
            }
        }
        Some(_) => errors.push(FieldError::new(
            format!("{path}.matchExpressions"),
            "must be a list",
        )),
    }
    for e in crate::selector::validate(path, &sel) {
        errors.push(FieldError::new(e.field, e.reason));
    }
    given.then_some(sel)
}

pub(crate) fn namespace_selector(
    v: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> NamespaceSelector {
    const PATH: &str = "spec.namespaceSelector";
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return NamespaceSelector::default();
    };
    let Some(map) = v.as_object() else {
        errors.push(FieldError::new(PATH, "must be a map"));
        return NamespaceSelector::default();
    };
    let include = string_list(map.get("include"), &format!("{PATH}.include"), errors);
    let exclude = string_list(map.get("exclude"), &format!("{PATH}.exclude"), errors);
    for (list, field) in [(&include, "include"), (&exclude, "exclude")] {
        for (i, g) in list.iter().enumerate() {
            if let Err(e) = super::namespaces::Glob::new(g) {
                errors.push(FieldError::new(format!("{PATH}.{field}[{i}]"), e));
            }
        }
    }
    let labels = label_selector(map, PATH, errors);
    NamespaceSelector {
        include,
        exclude,
        labels,
    }
}

fn templates(spec: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Templates {
    let list = spec.get("object-templates").filter(|v| !v.is_null());
    let raw = opt_str(
        spec,
        "object-templates-raw",
        "spec.object-templates-raw",
        errors,
    );
    match (list, raw) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "spec.object-templates-raw",
                "object-templates and object-templates-raw are mutually exclusive",
            ));
            Templates::Objects(Vec::new())
        }
        (None, Some(raw)) if raw.contains("{{") => Templates::Templated(raw.to_string()),
        (None, Some(raw)) => match serde_yaml::from_str::<Value>(raw) {
            Ok(v) => Templates::Objects(object_templates(&v, "spec.object-templates-raw", errors)),
            Err(e) => {
                errors.push(FieldError::new(
                    "spec.object-templates-raw",
                    format!("not a YAML list of object templates: {e}"),
                ));
                Templates::Objects(Vec::new())
            }
        },
        (Some(v), None) => Templates::Objects(object_templates(v, "spec.object-templates", errors)),
        (None, None) => Templates::Objects(Vec::new()),
    }
}

pub(crate) fn object_templates(
    v: &Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<ObjectTemplate> {
    let Some(items) = v.as_array() else {
        errors.push(FieldError::new(path, "must be a list"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if let Some(t) = object_template(item, &p, errors) {
            out.push(t);
        }
    }
    out
}

fn object_template(v: &Value, p: &str, errors: &mut Vec<FieldError>) -> Option<ObjectTemplate> {
    let Some(map) = v.as_object() else {
        errors.push(FieldError::new(p, "must be a map"));
        return None;
    };
    let before = errors.len();
    let compliance = match opt_str(
        map,
        "complianceType",
        &format!("{p}.complianceType"),
        errors,
    ) {
        None => {
            errors.push(FieldError::new(format!("{p}.complianceType"), "required"));
            None
        }
        Some(s) => {
            let c = ComplianceType::parse(s);
            if c.is_none() {
                errors.push(FieldError::new(
                    format!("{p}.complianceType"),
                    format!("unknown value {s:?} (want musthave, mustonlyhave or mustnothave)"),
                ));
            }
            c
        }
    };
    let metadata_compliance = opt_enum(
        map,
        "metadataComplianceType",
        &format!("{p}.metadataComplianceType"),
        "musthave or mustonlyhave",
        |s| ComplianceType::parse(s).filter(|c| *c != ComplianceType::MustNotHave),
        errors,
    );
    let record_diff = opt_enum(
        map,
        "recordDiff",
        &format!("{p}.recordDiff"),
        "None, Log or InStatus",
        RecordDiff::parse,
        errors,
    );
    let object_selector = match map.get("objectSelector") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => label_selector(m, &format!("{p}.objectSelector"), errors),
        Some(_) => {
            errors.push(FieldError::new(
                format!("{p}.objectSelector"),
                "must be a map",
            ));
            None
        }
    };
    let od = format!("{p}.objectDefinition");
    let object = match map.get("objectDefinition") {
        Some(Value::Object(o)) => {
            check_object(o, &od, errors);
            Some(o.clone())
        }
        Some(_) => {
            errors.push(FieldError::new(&od, "must be a Kubernetes object (a map)"));
            None
        }
        None => {
            errors.push(FieldError::new(&od, "required"));
            None
        }
    };
    if errors.len() > before {
        return None;
    }
    Some(ObjectTemplate {
        compliance: compliance?,
        metadata_compliance,
        record_diff,
        object: object?,
        object_selector,
        namespace_templated: false,
    })
}

/// An object template's object: apiVersion and kind are required; a name, namespace, labels
/// and annotations, when given, have the right shape.
fn check_object(o: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    for key in ["apiVersion", "kind"] {
        match o.get(key) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(_) => errors.push(FieldError::new(
                format!("{path}.{key}"),
                "must be a non-empty string",
            )),
            None => errors.push(FieldError::new(format!("{path}.{key}"), "required")),
        }
    }
    let Some(meta) = o.get("metadata") else {
        return;
    };
    let Some(meta) = meta.as_object() else {
        errors.push(FieldError::new(format!("{path}.metadata"), "must be a map"));
        return;
    };
    for key in ["name", "namespace"] {
        if let Some(v) = meta.get(key).filter(|v| !v.is_null())
            && !v.is_string()
        {
            errors.push(FieldError::new(
                format!("{path}.metadata.{key}"),
                "must be a string",
            ));
        }
    }
    for key in ["labels", "annotations"] {
        if let Some(v) = meta.get(key).filter(|v| !v.is_null()) {
            let ok = v
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string));
            if !ok {
                errors.push(FieldError::new(
                    format!("{path}.metadata.{key}"),
                    "must be a map of strings",
                ));
            }
        }
    }
}

/// A policy template's identity: kind, apiVersion and `metadata.name`, read leniently (for
/// templates of kinds Flotilla does not evaluate).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TemplateMeta {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
}

impl TemplateMeta {
    /// Reads the identity of a template object, naming what is missing.
    pub fn of(object: &Value) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let Some(map) = object.as_object() else {
            return Err(vec![FieldError::new(
                "",
                "must be a Kubernetes object (a map)",
            )]);
        };
        let mut get = |key: &str, path: &str| match map.get(key) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => {
                errors.push(FieldError::new(path, "must be a non-empty string"));
                String::new()
            }
            None => {
                errors.push(FieldError::new(path, "required"));
                String::new()
            }
        };
        let api_version = get("apiVersion", "apiVersion");
        let kind = get("kind", "kind");
        let name = match map.get("metadata").and_then(|m| m.get("name")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                errors.push(FieldError::new("metadata.name", "required"));
                String::new()
            }
        };
        if errors.is_empty() {
            Ok(Self {
                api_version,
                kind,
                name,
            })
        } else {
            Err(errors)
        }
    }

    /// Whether this is a ConfigurationPolicy of the policy group, the one kind Flotilla
    /// evaluates.
    pub fn is_configuration_policy(&self) -> bool {
        self.kind == super::CONFIGURATION_POLICY
            && self
                .api_version
                .split_once('/')
                .is_some_and(|(g, _)| g == super::GROUP)
    }
}

/// Labels of a namespace (or any object): `metadata.labels` as a map of strings.
pub fn labels_of(object: &Value) -> HashMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

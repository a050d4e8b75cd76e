//! A policy's CEL, compiled once per generation with the checks every Flotilla CEL goes through
//! (`flotilla_placement::cel::compile_checked`: size, cost, free identifiers), and the values
//! the expressions see. The selector and the name template see `source` only; reference
//! targets, the creation condition and the template see `source` and `references` (a map
//! from each reference's key to the object read; a reference sees only the earlier ones).

use cel::objects::{Key, Map, ValueType};
use cel::{Context, ExecutionError, Program, Value};
use flotilla_api::importpolicy::{TEMPLATE_KEYS, is_registrations};
use flotilla_api::v1::{ClusterImportPolicy, ImportSource, ManagedCluster, Taint};
use flotilla_placement::cel::{compile_checked, env};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Why a policy's expression could not be evaluated for one source object, or why what it
/// yielded is not what its field takes. Every variant names the policy's field
/// (`spec.template`, `spec.references[0].name`): the message tells the author where to look.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EvalError {
    /// The expression failed at run time (a missing key, a type error).
    #[error("{field}: {source}")]
    Run {
        /// The policy's field.
        field: String,
        /// What CEL said.
        #[source]
        source: ExecutionError,
    },
    /// The expression yielded a value of another type than the field takes.
    #[error("{field}: {found:?} is not {want}")]
    Type {
        /// The policy's field.
        field: String,
        /// The type yielded.
        found: ValueType,
        /// What the field takes (`a string`, `an int`).
        want: &'static str,
    },
    /// A condition yielded something that is neither a bool nor a string.
    #[error("{field}: yields a {found:?}, not a bool")]
    NotBool {
        /// The policy's field.
        field: &'static str,
        /// The type yielded.
        found: ValueType,
    },
    /// A value is not of the shape the field takes (a map, a list of taints).
    #[error("{field}: not {want}")]
    Shape {
        /// The policy's field.
        field: String,
        /// What the field takes.
        want: &'static str,
    },
    /// The template yielded something other than a map.
    #[error(
        "spec.template: yields a {found:?}, not a map with keys among {}",
        TEMPLATE_KEYS.join(", ")
    )]
    TemplateNotMap {
        /// The type yielded.
        found: ValueType,
    },
    /// A map's key is not a string.
    #[error("{field}: keys must be strings")]
    KeyNotString {
        /// The policy's field.
        field: String,
    },
    /// A map has a key the field does not know.
    #[error("{field}: unknown key {key:?} (known: {known})")]
    UnknownKey {
        /// The policy's field.
        field: String,
        /// The key.
        key: String,
        /// The keys the field knows.
        known: String,
    },
    /// More entries than a template may set.
    #[error("{field}: {count} {what}, at most {max}")]
    TooMany {
        /// The policy's field.
        field: &'static str,
        /// How many it yielded.
        count: usize,
        /// What they are (`labels`, `taints`).
        what: &'static str,
        /// How many it may.
        max: usize,
    },
    /// The lease duration is out of range.
    #[error("spec.template.leaseDurationSeconds: {0} is outside 1..=3600")]
    LeaseOutOfRange(i64),
    /// The policy has no name template (a registration policy names no cluster).
    #[error("spec.nameTemplate: none")]
    NoNameTemplate,
    /// A reference's target is not an object's name.
    #[error("{field}: {namespace:?}/{name:?} is not an object's name")]
    NotAnObjectName {
        /// The reference's field (`spec.references[0]`).
        field: String,
        /// The namespace it rendered.
        namespace: String,
        /// The name it rendered.
        name: String,
    },
    /// A taint the hub maintains (a template sets only the admin's taints).
    #[error("{field}.key: {key:?} is maintained by the hub")]
    HubTaint {
        /// The taint's field (`spec.template.taints[0]`).
        field: String,
        /// Its key.
        key: String,
    },
    /// The taints break the rules a ManagedCluster document's taints follow.
    #[error("spec.template.{0}")]
    Taints(#[source] crate::cluster::rules::RuleError),
    /// A name or label breaks the Kubernetes rules.
    #[error(transparent)]
    Name(#[from] flotilla_api::names::NameError),
}

impl EvalError {
    /// The run-time failure of `field`'s expression.
    fn run(field: &str) -> impl FnOnce(ExecutionError) -> Self + '_ {
        move |source| Self::Run {
            field: field.into(),
            source,
        }
    }
}

/// The source object (or registration) every expression sees.
pub const SOURCE: &str = "source";
/// The references read so far, by key.
pub const REFERENCES: &str = "references";

/// One reference, compiled.
#[derive(Clone)]
pub struct CompiledReference {
    /// API group (`""`: core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Versions accepted (empty: any).
    pub versions: Vec<String>,
    /// The key later expressions read it under.
    pub key: String,
    namespace: Option<Arc<Program>>,
    name: Arc<Program>,
}

/// A policy ready to evaluate.
#[derive(Clone)]
pub struct CompiledPolicy {
    /// The policy's name.
    pub name: String,
    /// Its generation (a template edit bumps it).
    pub generation: i64,
    /// `group/resource` of its source.
    pub source_kind: String,
    /// Its source (object sources: the spokes, group, resource and versions to list).
    pub source: ImportSource,
    /// Object sources: the references, in order.
    pub references: Vec<CompiledReference>,
    selector: Option<Arc<Program>>,
    condition: Option<Arc<Program>>,
    name_template: Option<Arc<Program>>,
    template: Arc<Program>,
}

impl std::fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPolicy")
            .field("name", &self.name)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// What a template says a cluster becomes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Template {
    /// Labels to set.
    pub labels: BTreeMap<String, String>,
    /// The cluster set (set as the `cluster.open-cluster-management.io/clusterset` label).
    pub cluster_set: Option<String>,
    /// Accept the cluster (default true).
    pub accept: bool,
    /// Taints (the admin's taints of its own clusters), when the template has the key.
    pub taints: Option<Vec<Taint>>,
    /// The lease duration, when the template has the key.
    pub lease_seconds: Option<i32>,
}

fn compile(
    field: &str,
    source: &str,
    variables: &[&str],
    errors: &mut Vec<String>,
) -> Option<Arc<Program>> {
    if source.trim().is_empty() {
        return None;
    }
    compile_checked(source, variables)
        .map(Arc::new)
        .map_err(|e| errors.push(format!("{field}: {e}")))
        .ok()
}

/// What the expressions of one source object see.
#[derive(Clone)]
pub struct Vars {
    /// `source`.
    pub source: Value,
    /// `references` (a map by key).
    pub references: Value,
}

impl Vars {
    /// A registration's or object's variables, no references yet.
    pub fn of(source: Value) -> Self {
        Self {
            source,
            references: Value::Map(Map {
                map: Arc::new(HashMap::new()),
            }),
        }
    }
}

impl CompiledPolicy {
    /// Compiles every expression; the errors name their field.
    pub fn new(p: &ClusterImportPolicy) -> Result<Self, Vec<String>> {
        let mut errors = flotilla_api::importpolicy::validate(p);
        let spec = p.spec.clone().unwrap_or_default();
        let source = spec.source.clone().unwrap_or_default();
        let both = [SOURCE, REFERENCES];
        let selector = compile(
            "spec.source.selector",
            &source.selector,
            &[SOURCE],
            &mut errors,
        );
        let condition = compile(
            "spec.creationCondition",
            &spec.creation_condition,
            &both,
            &mut errors,
        );
        let name_template = compile(
            "spec.nameTemplate",
            &spec.name_template,
            &[SOURCE],
            &mut errors,
        );
        let template = compile("spec.template", &spec.template, &both, &mut errors);
        let mut references = Vec::new();
        for (i, r) in spec.references.iter().enumerate() {
            let field = format!("spec.references[{i}]");
            let namespace = compile(
                &format!("{field}.namespace"),
                &r.namespace,
                &both,
                &mut errors,
            );
            let name = compile(&format!("{field}.name"), &r.name, &both, &mut errors);
            if let Some(name) = name {
                references.push(CompiledReference {
                    group: r.group.clone(),
                    resource: r.resource.clone(),
                    versions: r.versions.clone(),
                    key: r.key.clone(),
                    namespace,
                    name,
                });
            }
        }
        match template {
            Some(template) if errors.is_empty() => Ok(Self {
                name: p
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default(),
                generation: p.metadata.as_ref().map_or(0, |m| m.generation),
                source_kind: flotilla_api::importpolicy::source_kind(&source),
                source,
                references,
                selector,
                condition,
                name_template,
                template,
            }),
            _ => Err(errors),
        }
    }

    /// Whether the source is objects listed on spokes (not registrations).
    pub fn is_object_source(&self) -> bool {
        !is_registrations(&self.source)
    }

    /// Whether the selector admits `source`.
    pub fn selects(&self, vars: &Vars) -> Result<bool, EvalError> {
        match &self.selector {
            Some(p) => truthy(
                "spec.source.selector",
                run("spec.source.selector", p, vars)?,
            ),
            None => Ok(true),
        }
    }

    /// Whether the creation condition holds.
    pub fn condition_holds(&self, vars: &Vars) -> Result<bool, EvalError> {
        match &self.condition {
            Some(p) => truthy(
                "spec.creationCondition",
                run("spec.creationCondition", p, vars)?,
            ),
            None => Ok(true),
        }
    }

    /// Whether the selector and the creation condition admit `source`.
    pub fn admits(&self, source: &Value) -> Result<bool, EvalError> {
        let vars = Vars::of(source.clone());
        Ok(self.selects(&vars)? && self.condition_holds(&vars)?)
    }

    /// The cluster name `nameTemplate` renders (a DNS-1123 label).
    pub fn cluster_name(&self, vars: &Vars) -> Result<String, EvalError> {
        let Some(p) = &self.name_template else {
            return Err(EvalError::NoNameTemplate);
        };
        let name = string("spec.nameTemplate", &run("spec.nameTemplate", p, vars)?)?;
        flotilla_api::names::validate_dns1123_label("spec.nameTemplate", &name)?;
        Ok(name)
    }

    /// Where reference `i` is: `(namespace, name)` (namespace empty: cluster-scoped), from
    /// `vars` holding the references before it.
    pub fn reference_target(&self, i: usize, vars: &Vars) -> Result<(String, String), EvalError> {
        let r = &self.references[i];
        let field = format!("spec.references[{i}]");
        let namespace = match &r.namespace {
            Some(p) => {
                let field = format!("{field}.namespace");
                string(&field, &run(&field, p, vars)?)?
            }
            None => String::new(),
        };
        let name = {
            let field = format!("{field}.name");
            string(&field, &run(&field, &r.name, vars)?)?
        };
        if name.is_empty() || name.len() > 253 || namespace.len() > 63 {
            return Err(EvalError::NotAnObjectName {
                field,
                namespace,
                name,
            });
        }
        Ok((namespace, name))
    }

    /// What the template makes of `source` (and the references).
    pub fn template(&self, source: &Value) -> Result<Template, EvalError> {
        self.template_with(&Vars::of(source.clone()))
    }

    /// What the template makes of the variables.
    pub fn template_with(&self, vars: &Vars) -> Result<Template, EvalError> {
        template_of(run("spec.template", &self.template, vars)?)
    }
}

/// Adds a reference's object under its key.
pub fn with_reference(vars: &Vars, key: &str, object: Value) -> Vars {
    let mut map = match &vars.references {
        Value::Map(m) => (*m.map).clone(),
        _ => HashMap::new(),
    };
    map.insert(Key::String(Arc::new(key.to_owned())), object);
    Vars {
        source: vars.source.clone(),
        references: Value::Map(Map { map: Arc::new(map) }),
    }
}

/// A JSON object as a CEL value, at most `MAX_DEPTH` deep (deeper parts become null: a
/// spoke's objects are untrusted).
pub fn json_value(v: &serde_json::Value) -> Value {
    json_at(v, 0)
}

const MAX_DEPTH: usize = 32;

fn json_at(v: &serde_json::Value, depth: usize) -> Value {
    use serde_json::Value as J;
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::Int(i),
            (None, Some(u), _) => Value::UInt(u),
            (_, _, Some(f)) => Value::Float(f),
            _ => Value::Null,
        },
        J::String(s) => text(s),
        J::Array(a) => Value::List(Arc::new(a.iter().map(|x| json_at(x, depth + 1)).collect())),
        J::Object(m) => Value::Map(Map {
            map: Arc::new(
                m.iter()
                    .map(|(k, x)| (Key::String(Arc::new(k.clone())), json_at(x, depth + 1)))
                    .collect(),
            ),
        }),
    }
}

/// Runs `program` (the expression of `field`) on `vars`.
fn run(field: &str, program: &Program, vars: &Vars) -> Result<Value, EvalError> {
    let mut context = Context::with_env(env().clone());
    context.add_variable_from_value(SOURCE, vars.source.clone());
    context.add_variable_from_value(REFERENCES, vars.references.clone());
    program.execute(&context).map_err(EvalError::run(field))
}

/// `true`, or a string equal to "true" in any case (Clusterpedia's rule for its templates).
fn truthy(field: &'static str, v: Value) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(b),
        Value::String(s) => Ok(s.eq_ignore_ascii_case("true")),
        other => Err(EvalError::NotBool {
            field,
            found: other.type_of(),
        }),
    }
}

fn string(field: &str, v: &Value) -> Result<String, EvalError> {
    match v {
        Value::String(s) => Ok(s.to_string()),
        other => Err(EvalError::Type {
            field: field.into(),
            found: other.type_of(),
            want: "a string",
        }),
    }
}

fn template_of(v: Value) -> Result<Template, EvalError> {
    let Value::Map(map) = v else {
        return Err(EvalError::TemplateNotMap { found: v.type_of() });
    };
    let mut t = Template {
        accept: true,
        ..Default::default()
    };
    for (k, v) in map.map.iter() {
        let Key::String(k) = k else {
            return Err(EvalError::KeyNotString {
                field: "spec.template".into(),
            });
        };
        match k.as_str() {
            "labels" => t.labels = labels(v)?,
            "clusterSet" => t.cluster_set = Some(string("spec.template.clusterSet", v)?),
            "taints" => t.taints = Some(taints(v)?),
            "leaseDurationSeconds" => {
                let n = match v {
                    Value::Int(n) => *n,
                    Value::UInt(n) => i64::try_from(*n).unwrap_or(i64::MAX),
                    other => {
                        return Err(EvalError::Type {
                            field: "spec.template.leaseDurationSeconds".into(),
                            found: other.type_of(),
                            want: "an int",
                        });
                    }
                };
                if !(1..=3600).contains(&n) {
                    return Err(EvalError::LeaseOutOfRange(n));
                }
                t.lease_seconds = Some(n as i32);
            }
            "hubAcceptsClient" => match v {
                Value::Bool(b) => t.accept = *b,
                other => {
                    return Err(EvalError::Type {
                        field: "spec.template.hubAcceptsClient".into(),
                        found: other.type_of(),
                        want: "a bool",
                    });
                }
            },
            other => {
                return Err(EvalError::UnknownKey {
                    field: "spec.template".into(),
                    key: other.into(),
                    known: TEMPLATE_KEYS.join(", "),
                });
            }
        }
    }
    check_labels(&t)?;
    Ok(t)
}

/// Labels a template may set, at most (it may read them from a spoke's object).
pub const MAX_TEMPLATE_LABELS: usize = 64;
/// Taints a template may set, at most.
pub const MAX_TEMPLATE_TAINTS: usize = 32;

fn labels(v: &Value) -> Result<BTreeMap<String, String>, EvalError> {
    let Value::Map(m) = v else {
        return Err(EvalError::Shape {
            field: "spec.template.labels".into(),
            want: "a map",
        });
    };
    if m.map.len() > MAX_TEMPLATE_LABELS {
        return Err(EvalError::TooMany {
            field: "spec.template.labels",
            count: m.map.len(),
            what: "labels",
            max: MAX_TEMPLATE_LABELS,
        });
    }
    m.map
        .iter()
        .map(|(k, v)| {
            let Key::String(k) = k else {
                return Err(EvalError::KeyNotString {
                    field: "spec.template.labels".into(),
                });
            };
            Ok((
                k.to_string(),
                string(&format!("spec.template.labels[{k:?}]"), v)?,
            ))
        })
        .collect()
}

fn taints(v: &Value) -> Result<Vec<Taint>, EvalError> {
    let Value::List(items) = v else {
        return Err(EvalError::Shape {
            field: "spec.template.taints".into(),
            want: "a list of {key, value, effect}",
        });
    };
    if items.len() > MAX_TEMPLATE_TAINTS {
        return Err(EvalError::TooMany {
            field: "spec.template.taints",
            count: items.len(),
            what: "taints",
            max: MAX_TEMPLATE_TAINTS,
        });
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("spec.template.taints[{i}]");
        let Value::Map(m) = item else {
            return Err(EvalError::Shape {
                field,
                want: "a map with key, value, effect",
            });
        };
        let mut t = Taint::default();
        for (k, v) in m.map.iter() {
            let Key::String(k) = k else {
                return Err(EvalError::KeyNotString { field });
            };
            match k.as_str() {
                "key" => t.key = string(&format!("{field}.key"), v)?,
                "value" => t.value = string(&format!("{field}.value"), v)?,
                "effect" => t.effect = string(&format!("{field}.effect"), v)?,
                other => {
                    return Err(EvalError::UnknownKey {
                        field,
                        key: other.into(),
                        known: "key, value, effect".into(),
                    });
                }
            }
        }
        if flotilla_api::taints::is_hub_taint(&t.key) {
            return Err(EvalError::HubTaint { field, key: t.key });
        }
        out.push(t);
    }
    // The cluster actor's own check, on a scratch cluster: the same errors as a document's.
    crate::cluster::rules::apply_document_taints(&mut ManagedCluster::default(), &out)
        .map_err(EvalError::Taints)?;
    Ok(out)
}

fn check_labels(t: &Template) -> Result<(), EvalError> {
    let mut all: HashMap<String, String> = t.labels.clone().into_iter().collect();
    if let Some(set) = &t.cluster_set {
        flotilla_api::names::validate_dns1123_label("spec.template.clusterSet", set)?;
        all.insert(flotilla_api::meta::CLUSTERSET_LABEL.into(), set.clone());
    }
    match flotilla_api::names::validate_labels("spec.template.labels", &all)
        .into_iter()
        .next()
    {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(Map {
        map: Arc::new(
            entries
                .into_iter()
                .map(|(k, v)| (Key::String(Arc::new(k.to_owned())), v))
                .collect(),
        ),
    })
}

fn strings(m: &HashMap<String, String>) -> Value {
    Value::Map(Map {
        map: Arc::new(
            m.iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), text(v)))
                .collect(),
        ),
    })
}

/// The `source` of a registration: `{metadata: {name, labels}, claims: [{name, value}],
/// status: {version: {kubernetes}, capacity, allocatable}}`.
pub fn registration_value(c: &ManagedCluster) -> Value {
    let m = c.metadata.clone().unwrap_or_default();
    let s = c.status.clone().unwrap_or_default();
    let claims: Vec<Value> = s
        .cluster_claims
        .iter()
        .map(|x| map(vec![("name", text(&x.name)), ("value", text(&x.value))]))
        .collect();
    let version = s.version.map(|v| v.kubernetes).unwrap_or_default();
    map(vec![
        (
            "metadata",
            map(vec![
                ("name", text(&m.name)),
                ("labels", strings(&m.labels)),
            ]),
        ),
        ("claims", Value::List(Arc::new(claims))),
        (
            "status",
            map(vec![
                ("version", map(vec![("kubernetes", text(&version))])),
                ("capacity", strings(&s.capacity)),
                ("allocatable", strings(&s.allocatable)),
            ]),
        ),
    ])
}

impl From<EvalError> for super::reason::Reason {
    fn from(e: EvalError) -> Self {
        Self::new(e)
    }
}

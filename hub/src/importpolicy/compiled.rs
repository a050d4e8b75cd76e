//! A policy's CEL, compiled once per generation with the checks every Flotilla CEL goes through
//! (`flotilla_placement::cel::compile_checked`: size, cost, free identifiers — only `source`),
//! and the values the expressions see.

use cel::objects::{Key, Map};
use cel::{Context, Program, Value};
use flotilla_api::importpolicy::TEMPLATE_KEYS;
use flotilla_api::v1::{ClusterImportPolicy, ManagedCluster};
use flotilla_placement::cel::{compile_checked, env};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The one variable every expression sees.
pub const SOURCE: &str = "source";

/// A policy ready to evaluate.
#[derive(Clone)]
pub struct CompiledPolicy {
    /// The policy's name.
    pub name: String,
    /// Its generation (a template edit bumps it).
    pub generation: i64,
    /// `group/resource` of its source.
    pub source_kind: String,
    selector: Option<Arc<Program>>,
    condition: Option<Arc<Program>>,
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
}

fn compile(field: &str, source: &str, errors: &mut Vec<String>) -> Option<Arc<Program>> {
    if source.trim().is_empty() {
        return None;
    }
    compile_checked(source, &[SOURCE])
        .map(Arc::new)
        .map_err(|e| errors.push(format!("{field}: {e}")))
        .ok()
}

impl CompiledPolicy {
    /// Compiles every expression; the errors name their field.
    pub fn new(p: &ClusterImportPolicy) -> Result<Self, Vec<String>> {
        let mut errors = flotilla_api::importpolicy::validate(p);
        let spec = p.spec.clone().unwrap_or_default();
        let source = spec.source.clone().unwrap_or_default();
        let selector = compile("spec.source.selector", &source.selector, &mut errors);
        let condition = compile(
            "spec.creationCondition",
            &spec.creation_condition,
            &mut errors,
        );
        let template = compile("spec.template", &spec.template, &mut errors);
        match template {
            Some(template) if errors.is_empty() => Ok(Self {
                name: p
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default(),
                generation: p.metadata.as_ref().map_or(0, |m| m.generation),
                source_kind: flotilla_api::importpolicy::source_kind(&source),
                selector,
                condition,
                template,
            }),
            _ => Err(errors),
        }
    }

    /// Whether the selector and the creation condition admit `source`.
    pub fn admits(&self, source: &Value) -> Result<bool, String> {
        let selected = match &self.selector {
            Some(p) => truthy("spec.source.selector", run(p, source)?)?,
            None => true,
        };
        if !selected {
            return Ok(false);
        }
        match &self.condition {
            Some(p) => truthy("spec.creationCondition", run(p, source)?),
            None => Ok(true),
        }
    }

    /// What the template makes of `source`.
    pub fn template(&self, source: &Value) -> Result<Template, String> {
        template_of(run(&self.template, source).map_err(|e| format!("spec.template: {e}"))?)
    }
}

fn run(program: &Program, source: &Value) -> Result<Value, String> {
    let mut context = Context::with_env(env().clone());
    context.add_variable_from_value(SOURCE, source.clone());
    program.execute(&context).map_err(|e| e.to_string())
}

/// `true`, or a string equal to "true" in any case (Clusterpedia's rule for its templates).
fn truthy(field: &str, v: Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(b),
        Value::String(s) => Ok(s.eq_ignore_ascii_case("true")),
        other => Err(format!(
            "{field}: yields a {:?}, not a bool",
            other.type_of()
        )),
    }
}

fn string(field: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.to_string()),
        other => Err(format!("{field}: {:?} is not a string", other.type_of())),
    }
}

fn template_of(v: Value) -> Result<Template, String> {
    let Value::Map(map) = v else {
        return Err(format!(
            "spec.template: yields a {:?}, not a map with keys among {}",
            v.type_of(),
            TEMPLATE_KEYS.join(", ")
        ));
    };
    let mut t = Template {
        accept: true,
        ..Default::default()
    };
    for (k, v) in map.map.iter() {
        let Key::String(k) = k else {
            return Err("spec.template: keys must be strings".into());
        };
        match k.as_str() {
            "labels" => t.labels = labels(v)?,
            "clusterSet" => t.cluster_set = Some(string("spec.template.clusterSet", v)?),
            "hubAcceptsClient" => match v {
                Value::Bool(b) => t.accept = *b,
                other => {
                    return Err(format!(
                        "spec.template.hubAcceptsClient: {:?} is not a bool",
                        other.type_of()
                    ));
                }
            },
            other => {
                return Err(format!(
                    "spec.template: unknown key {other:?} (known: {})",
                    TEMPLATE_KEYS.join(", ")
                ));
            }
        }
    }
    check_labels(&t)?;
    Ok(t)
}

fn labels(v: &Value) -> Result<BTreeMap<String, String>, String> {
    let Value::Map(m) = v else {
        return Err("spec.template.labels: not a map".into());
    };
    m.map
        .iter()
        .map(|(k, v)| {
            let Key::String(k) = k else {
                return Err("spec.template.labels: keys must be strings".to_string());
            };
            Ok((
                k.to_string(),
                string(&format!("spec.template.labels[{k:?}]"), v)?,
            ))
        })
        .collect()
}

fn check_labels(t: &Template) -> Result<(), String> {
    let mut all: HashMap<String, String> = t.labels.clone().into_iter().collect();
    if let Some(set) = &t.cluster_set {
        flotilla_api::names::validate_dns1123_label("spec.template.clusterSet", set)
            .map_err(|e| e.to_string())?;
        all.insert(flotilla_api::meta::CLUSTERSET_LABEL.into(), set.clone());
    }
    match flotilla_api::names::validate_labels("spec.template.labels", &all)
        .into_iter()
        .next()
    {
        Some(e) => Err(e.to_string()),
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

//! JSON ↔ template values, and JSON ↔ the YAML text templates are executed over.
//!
//! Integers stay integers and other numbers are floats, as Go's decoders give `int64` and
//! `float64`; map keys are sorted (Go prints and ranges maps sorted too).

use gotmpl::Value as T;
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A JSON value as a template value.
pub fn to_template(v: &Value) -> T {
    match v {
        Value::Null => T::Nil,
        Value::Bool(b) => T::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => T::Int(i),
            (None, Some(u)) => T::Uint(u),
            _ => T::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => T::String(Arc::from(s.as_str())),
        Value::Array(a) => T::List(a.iter().map(to_template).collect::<Vec<_>>().into()),
        Value::Object(m) => T::Map(Arc::new(
            m.iter()
                .map(|(k, v)| (Arc::from(k.as_str()), to_template(v)))
                .collect::<BTreeMap<_, _>>(),
        )),
    }
}

/// A template value as JSON (functions become null; non-finite floats null, as JSON has none).
pub fn to_json(v: &T) -> Value {
    match v {
        T::Nil | T::Function(_) => Value::Null,
        T::Bool(b) => Value::Bool(*b),
        T::Int(i) => Value::Number((*i).into()),
        T::Uint(u) => Value::Number((*u).into()),
        T::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        T::String(s) => Value::String(s.to_string()),
        T::List(l) => Value::Array(l.iter().map(to_json).collect()),
        T::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.to_string(), to_json(v)))
                .collect::<Map<_, _>>(),
        ),
    }
}

/// A map value from string pairs.
pub fn map_of(entries: impl IntoIterator<Item = (String, T)>) -> T {
    T::Map(Arc::new(
        entries
            .into_iter()
            .map(|(k, v)| (Arc::from(k.as_str()), v))
            .collect(),
    ))
}

/// A string value.
pub fn string(s: impl AsRef<str>) -> T {
    T::String(Arc::from(s.as_ref()))
}

/// JSON as the YAML text a template is executed over (go-template-utils' `JSONToYAML`: block
/// style, two-space indent, no line folding; multi-line strings as literal blocks).
pub fn yaml_text(v: &Value) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(v)
}

/// The executed text back as JSON (go-template-utils' `yamlToJSON`). Empty text is null.
pub fn from_yaml_text(text: &str) -> Result<Value, serde_yaml::Error> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_yaml::from_str(text)
}

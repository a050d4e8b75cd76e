//! Object matching with config-policy-controller's semantics.
//!
//! The template is merged into the existing object and the result compared with the existing
//! object: equal means the object satisfies the template, and the merged object is what enforce
//! writes.
//!
//! - Maps: `musthave` keeps the existing keys and merges the template's in (extra fields on the
//!   cluster are fine); `mustonlyhave` keeps only the template's keys, so an extra field is a
//!   difference.
//! - Lists: `musthave` keeps every existing item in its place and merges each template item into
//!   the existing item that already contains it, else into the existing item with the same
//!   `name`, else appends it — so enforcing a compliant result again changes nothing (no
//!   "thrashing"), and a template item the list already holds adds no duplicate. `mustonlyhave`
//!   lists are the template's exactly (order does not matter).
//! - A field the cluster leaves out equals the zero value of the template's (`""`, `0`,
//!   `false`, `[]`, `{}`), as Kubernetes omits empty fields; a `null` template value means
//!   "anything".
//! - Scalars compare as config-policy-controller prints them (`"80"` equals `80`); strings that
//!   are both Kubernetes quantities compare as quantities (`512Mi` equals `0.5Gi`).
//! - Top level: `apiVersion` and `kind` are identity; of `metadata`, only `labels` and
//!   `annotations` are compared (with `metadataComplianceType` when given); every other
//!   templated key (`spec`, `data`, `rules`, even `status`) is compared.

use super::config::ComplianceType;
use serde_json::{Map, Value};

/// At most this many differing paths are reported.
pub const MAX_DIFFS: usize = 20;

/// The result of comparing one existing object with a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Whether the object satisfies the template.
    pub matches: bool,
    /// The object enforce would write: the existing object with the template merged in.
    pub desired: Value,
    /// Paths of the fields that differ (`spec.limits`, `metadata.labels.env`), at most
    /// [`MAX_DIFFS`].
    pub diffs: Vec<String>,
}

/// Compares `existing` with the object template `template` under `compliance` (a
/// `mustnothave` template is compared as `musthave`: "does an object like this exist").
pub fn compare(
    template: &Map<String, Value>,
    existing: &Value,
    compliance: ComplianceType,
    metadata_compliance: Option<ComplianceType>,
) -> Comparison {
    let mode = Mode::of(compliance);
    let meta_mode = metadata_compliance.map(Mode::of).unwrap_or(mode);
    let mut desired = existing.clone();
    if !desired.is_object() {
        desired = Value::Object(Map::new());
    }
    let mut matches = true;
    let mut diffs = Vec::new();
    for (key, t) in template {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                for part in ["labels", "annotations"] {
                    let Some(tv) = t.get(part) else { continue };
                    let ev = existing.get("metadata").and_then(|m| m.get(part));
                    let merged = merge(tv, ev, meta_mode);
                    let ev = ev.cloned().unwrap_or(Value::Null);
                    if !equivalent(&merged, &ev) {
                        matches = false;
                        diff_paths(&merged, &ev, &format!("metadata.{part}"), &mut diffs);
                    }
                    if let Some(meta) = object_entry(&mut desired, "metadata") {
                        meta.insert(part.to_string(), merged);
                    }
                }
            }
            _ => {
                let ev = existing.get(key);
                let merged = merge(t, ev, mode);
                let ev = ev.cloned().unwrap_or(Value::Null);
                if !equivalent(&merged, &ev) {
                    matches = false;
                    diff_paths(&merged, &ev, key, &mut diffs);
                }
                if let Some(obj) = desired.as_object_mut() {
                    obj.insert(key.clone(), merged);
                }
            }
        }
    }
    diffs.truncate(MAX_DIFFS);
    Comparison {
        matches,
        desired,
        diffs,
    }
}

fn object_entry<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let obj = v.as_object_mut()?;
    let entry = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Merge,
    Exact,
}

impl Mode {
    fn of(c: ComplianceType) -> Self {
        match c {
            ComplianceType::MustOnlyHave => Mode::Exact,
            ComplianceType::MustHave | ComplianceType::MustNotHave => Mode::Merge,
        }
    }
}

/// The template value `t` merged into the existing value `e`.
fn merge(t: &Value, e: Option<&Value>, mode: Mode) -> Value {
    match (t, e) {
        // A null template value does not care: keep what is there.
        (Value::Null, e) => e.cloned().unwrap_or(Value::Null),
        (Value::Object(tm), Some(Value::Object(em))) => {
            let mut out = match mode {
                Mode::Merge => em.clone(),
                Mode::Exact => Map::new(),
            };
            for (k, tv) in tm {
                out.insert(k.clone(), merge(tv, em.get(k), mode));
            }
            Value::Object(out)
        }
        (Value::Array(tl), Some(Value::Array(el))) if mode == Mode::Merge && !el.is_empty() => {
            Value::Array(merge_lists(tl, el))
        }
        (Value::Object(tm), _) => {
            // Nothing (or something of another type) there: the template's value, with its
            // own nulls resolved to nothing.
            Value::Object(
                tm.iter()
                    .map(|(k, v)| (k.clone(), merge(v, None, mode)))
                    .collect(),
            )
        }
        (t, _) => t.clone(),
    }
}

/// `musthave` lists: existing items stay in place; each template item is merged into the item
/// that already contains it, else the same-named item, else appended (once).
fn merge_lists(t: &[Value], e: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = e.to_vec();
    let mut claimed = vec![false; e.len()];
    for item in t {
        if let Some(i) = (0..e.len()).find(|&i| !claimed[i] && contains(item, &e[i])) {
            claimed[i] = true;
            continue;
        }
        if let Some(i) = (0..e.len()).find(|&i| !claimed[i] && same_name(item, &e[i])) {
            out[i] = merge(item, Some(&e[i]), Mode::Merge);
            claimed[i] = true;
            continue;
        }
        // Already there (matched by an earlier template item, or appended): no new duplicate.
        let merged = merge(item, None, Mode::Merge);
        if (0..e.len()).any(|i| claimed[i] && contains(item, &e[i]))
            || out[e.len()..].iter().any(|o| equivalent(&merged, o))
        {
            continue;
        }
        out.push(merged);
    }
    out
}

fn contains(t: &Value, e: &Value) -> bool {
    equivalent(&merge(t, Some(e), Mode::Merge), e)
}

fn same_name(t: &Value, e: &Value) -> bool {
    match (t.get("name"), e.get("name")) {
        (Some(Value::String(a)), Some(Value::String(b))) => !a.is_empty() && a == b,
        _ => false,
    }
}

/// Whether `a` (merged) and `b` (existing) are the same object as config-policy-controller
/// judges it: lists in any order, missing fields equal to zero values, scalars as printed,
/// quantities by value.
pub fn equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(am), Value::Object(bm)) => {
            am.iter().all(|(k, av)| match bm.get(k) {
                Some(bv) => equivalent(av, bv),
                None => is_zero(av),
            }) && bm.iter().all(|(k, bv)| am.contains_key(k) || is_zero(bv))
        }
        (Value::Array(al), Value::Array(bl)) => {
            if al.len() != bl.len() {
                return false;
            }
            let mut used = vec![false; bl.len()];
            al.iter().all(
                |av| match (0..bl.len()).find(|&i| !used[i] && equivalent(av, &bl[i])) {
                    Some(i) => {
                        used[i] = true;
                        true
                    }
                    None => false,
                },
            )
        }
        (Value::Null, v) | (v, Value::Null) => is_zero(v),
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        (Value::String(x), Value::String(y)) => {
            x == y
                || match (quantity(x), quantity(y)) {
                    (Some(qx), Some(qy)) => (qx - qy).abs() <= f64::EPSILON * qx.abs().max(1.0),
                    _ => false,
                }
        }
        (x, y) => scalar_text(x) == scalar_text(y),
    }
}

/// Zero values, which Kubernetes leaves out of stored objects.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(l) => l.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A Kubernetes quantity (`512Mi`, `0.5Gi`, `100m`, `1e3`, `2k`) as a number, `None` when `s`
/// is not one.
pub fn quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    if num.is_empty() || num == "+" || num == "-" {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    Some(n * scale)
}

fn diff_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_DIFFS || equivalent(a, b) {
        return;
    }
    match (a, b) {
        (Value::Object(am), Value::Object(bm)) => {
            let mut keys: Vec<&String> = am.keys().chain(bm.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let av = am.get(k).unwrap_or(&Value::Null);
                let bv = bm.get(k).unwrap_or(&Value::Null);
                diff_paths(av, bv, &format!("{path}.{k}"), out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

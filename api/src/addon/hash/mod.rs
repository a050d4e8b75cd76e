//! OCM's spec hash of an add-on config and the key it is recorded under.
//!
//! [`spec_hash`] is the addon-framework's `GetSpecHash` (`utils/helpers.go`): the object without
//! its top-level `apiVersion`, `kind`, `metadata` and `status`, encoded as Go's `json.Marshal`
//! encodes a `map[string]interface{}` (keys sorted at every level, no spaces), then sha256 in
//! lower-case hex. The hub writes it into `desiredConfig.specHash` and, keyed by
//! [`config_key`], into the `open-cluster-management.io/config-spec-hash` annotation of the
//! add-on's work, so the encoding must be byte-for-byte Go's for hashes to agree with OCM's:
//!
//! - Keys are sorted by bytes (Go sorts map keys as strings; the sort is explicit here, so it
//!   does not depend on serde_json's `preserve_order` feature).
//! - Strings are escaped as Go escapes them: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
//!   control characters as `\u00XX` (lower-case hex), and — Go's HTML-safe default — `<`, `>`
//!   and `&` as `\u003c`, `\u003e`, `\u0026`, and U+2028, U+2029 as `\u2028`, `\u2029`.
//!   Everything else, non-ASCII included, is written as UTF-8.
//! - Integers are written as they are; other numbers as Go writes a `float64` (shortest
//!   round-trip digits; exponent form `1e+21`, `1e-7` below 1e-6 and from 1e21 on).
//!
//! The object must be the OCM JSON form of the config (what `kubectl get -o json` shows, empty
//! optional fields left out), not its protobuf: that is what OCM hashes.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Top-level fields that are not part of a config's spec (OCM's list).
const NOT_SPEC: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// OCM's `GetSpecHash`: sha256 (64 lower-case hex characters) of the object without
/// `apiVersion`, `kind`, `metadata` and `status`, encoded as Go's `json.Marshal` does (see the
/// module documentation). A value that is not an object is hashed whole.
pub fn spec_hash(object: &Value) -> String {
    let mut text = String::new();
    match object {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map
                .iter()
                .filter(|(k, _)| !NOT_SPEC.contains(&k.as_str()))
                .collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            write_object(&mut text, entries);
        }
        other => write_value(&mut text, other),
    }
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of a config in the work's `config-spec-hash` annotation (OCM's `ConfigsToMap`):
/// `<resource>.<group>/<namespace>/<name>`, or `<resource>/<namespace>/<name>` for the core
/// group; the namespace is empty for a cluster-scoped config
/// (`addontemplates.addon.open-cluster-management.io//hello-template`).
pub fn config_key(group: &str, resource: &str, namespace: &str, name: &str) -> String {
    if group.is_empty() {
        format!("{resource}/{namespace}/{name}")
    } else {
        format!("{resource}.{group}/{namespace}/{name}")
    }
}

/// Go's `json.Marshal` of a value (keys sorted).
pub(crate) fn go_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            write_object(out, entries);
        }
    }
}

fn write_object(out: &mut String, entries: Vec<(&String, &Value)>) {
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_value(out, v);
    }
    out.push('}');
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
    } else if let Some(u) = n.as_u64() {
        out.push_str(&u.to_string());
    } else if let Some(f) = n.as_f64() {
        out.push_str(&go_float(f));
    } else {
        out.push_str(&n.to_string());
    }
}

/// A `float64` as Go's encoding/json writes it: `strconv.FormatFloat(f, 'f', -1, 64)` from 1e-6
/// up to 1e21 (and for 0), otherwise the `'e'` form with a signed exponent of at least one digit
/// (`1e+21`, `1.5e-7`).
fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        // Rust's Display prints the shortest round-trip digits without an exponent, as Go's
        // 'f' with precision -1 does.
        return format!("{f}");
    }
    let e = format!("{f:e}");
    match e.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => e,
    }
}

/// A JSON string literal, escaped as Go's encoding/json escapes it (HTML-safe).
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    escape_into(out, s);
    out.push('"');
}

/// The inside of a JSON string literal for `s`, escaped as Go's encoding/json escapes it.
pub(crate) fn escape_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' | '\u{0}'..='\u{1f}' => {
                let code = c as u32;
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((code >> shift) & 0xf) as usize] as char);
                }
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests;

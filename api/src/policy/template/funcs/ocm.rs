//! OCM's template functions (stolostron/go-template-utils `pkg/templates/`: `templates.go`,
//! `k8sresource_funcs.go`, `generic_lookup_func.go`, `clusterconfig_funcs.go`), with its
//! error texts.

use super::{Call, Fail, Func, Mode, arity, at_least, int_arg, str_arg};
use crate::policy::template::source::{
    Answer, CLUSTER_CLAIM, CLUSTER_CLAIM_API_VERSION, Query, not_found,
};
use crate::policy::template::value::{map_of, string, to_json, to_template};
use data_encoding::BASE64;
use gotmpl::Value;
use std::sync::Arc;

/// OCM's functions by name.
pub const FUNCS: &[(&str, Func)] = &[
    ("fromConfigMap", from_config_map),
    ("fromSecret", from_secret),
    ("copyConfigMapData", copy_config_map_data),
    ("copySecretData", copy_secret_data),
    ("fromClusterClaim", from_cluster_claim),
    ("lookupClusterClaim", lookup_cluster_claim),
    ("lookup", lookup),
    ("base64enc", base64enc),
    ("base64dec", base64dec),
    ("b64enc", base64enc),
    ("b64dec", base64dec),
    ("autoindent", autoindent),
    ("indent", indent),
    ("atoi", atoi),
    ("toInt", to_int),
    ("toBool", to_bool),
    ("toLiteral", to_literal),
    ("fromJSON", super::sprig::from_json),
    ("mustFromJSON", super::sprig::must_from_json),
    ("toJSON", super::sprig::to_json_fn),
    ("mustToJSON", super::sprig::to_json_fn),
    ("toRawJSON", super::sprig::to_raw_json),
    ("mustToRawJSON", super::sprig::to_raw_json),
    ("fromYAML", from_yaml),
    ("fromYaml", from_yaml),
    ("toYAML", to_yaml),
    ("toYaml", to_yaml),
    ("protect", protect),
    ("env", env),
    ("expandenv", expandenv),
];

/// go-template-utils' `ErrInvalidInput`.
const INVALID_INPUT: &str = "the input is invalid";
/// go-template-utils' `ErrMissingAPIResource`.
pub const MISSING_API_RESOURCE: &str =
    "one or more API resources are not installed on the API server";

/// What `getOrList` gives back.
enum Got {
    /// Not fetched yet: the caller returns a placeholder and the resolution runs again.
    Pending,
    /// One object, or `None` when it does not exist.
    One(Option<Arc<serde_json::Value>>),
    /// A list's items.
    Many(Vec<serde_json::Value>),
}

/// go-template-utils' `getNamespace`: the hub's lookups stay in the policy's namespace.
fn namespace(call: &Call<'_>, ns: &str) -> Result<String, Fail> {
    match call.mode() {
        Mode::Hub { namespace } if ns.is_empty() => Ok(namespace),
        Mode::Hub { namespace } if ns != namespace => Err(Fail::Calling(format!(
            "the namespace argument is restricted to {namespace}"
        ))),
        _ => Ok(ns.to_string()),
    }
}

/// go-template-utils' `getOrList`: one object by name, or a list when `name` is empty.
fn get_or_list(
    call: &Call<'_>,
    api_version: &str,
    kind: &str,
    ns: &str,
    name: &str,
    selector: &[String],
) -> Result<Got, Fail> {
    if api_version.is_empty() || kind.is_empty() {
        return Err(Fail::Calling("the apiVersion and kind are required".into()));
    }
    let namespace = namespace(call, ns)?;
    if matches!(call.mode(), Mode::Hub { .. }) && !is_hub_kind(api_version, kind) {
        return Err(Fail::Calling(MISSING_API_RESOURCE.into()));
    }
    let query = if name.is_empty() {
        Query::List {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace,
            // go-template-utils ignores every selector when the first is empty.
            selector: if selector.first().is_none_or(|s| s.is_empty()) {
                String::new()
            } else {
                selector
                    .iter()
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            },
        }
    } else {
        Query::Get {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace,
            name: name.into(),
        }
    };
    let got = match call.fetch(query) {
        None => Got::Pending,
        Some(Answer::Object(o)) => Got::One(o),
        Some(Answer::Objects(items)) => Got::Many(items),
        Some(Answer::Unserved) => return Err(Fail::Calling(MISSING_API_RESOURCE.into())),
        Some(Answer::Failed(m)) => return Err(Fail::Calling(m)),
    };
    // A Secret read on the spoke makes the resolution sensitive (errors withheld, differences
    // censored); on the hub every Secret value is protected as it is read, so no plaintext
    // reaches an error and errors stay readable.
    if kind == "Secret"
        && api_version == "v1"
        && call.mode() == Mode::Spoke
        && !matches!(got, Got::Pending)
    {
        call.sensitive();
    }
    Ok(got)
}

/// What the hub serves to its templates: its ConfigMaps and Secrets (deviation: OCM's hub
/// reads any kind in the policy's namespace).
fn is_hub_kind(api_version: &str, kind: &str) -> bool {
    api_version == "v1" && (kind == "ConfigMap" || kind == "Secret")
}

fn data_of(object: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    object
        .get("data")
        .and_then(|d| d.as_object())
        .cloned()
        .unwrap_or_default()
}

fn key_of(object: &serde_json::Value, key: &str) -> String {
    object
        .get("data")
        .and_then(|d| d.get(key))
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Reads one ConfigMap or Secret for the `from…`/`copy…` functions: `Ok(None)` while pending.
fn one(
    call: &Call<'_>,
    kind: &str,
    ns: &str,
    name: &str,
    failed: &str,
) -> Result<Option<Arc<serde_json::Value>>, Fail> {
    // go-template-utils wraps every getOrList error in the function's own words.
    let got = get_or_list(call, "v1", kind, ns, name, &[]).map_err(|e| match e {
        Fail::Calling(m) => Fail::Calling(format!("{failed} {name} from {ns}: {m}")),
        args => args,
    })?;
    match got {
        Got::Pending => Ok(None),
        Got::One(Some(o)) => Ok(Some(o)),
        Got::One(None) | Got::Many(_) => Err(Fail::Calling(format!(
            "{failed} {name} from {ns}: {}",
            not_found("v1", kind, name)
        ))),
    }
}

fn spoke_needs_namespace(call: &Call<'_>, ns: &str) -> bool {
    ns.is_empty() && call.mode() == Mode::Spoke
}

fn from_config_map(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("fromConfigMap", args, 3)?;
    let (ns, name, key) = (str_arg(args, 0)?, str_arg(args, 1)?, str_arg(args, 2)?);
    if name.is_empty() || spoke_needs_namespace(call, &ns) || key.is_empty() {
        return Err(Fail::Calling(format!(
            "{INVALID_INPUT}: namespace, name, and key must be specified"
        )));
    }
    let object = one(
        call,
        "ConfigMap",
        &ns,
        &name,
        "failed getting the ConfigMap",
    )?;
    Ok(string(object.map(|o| key_of(&o, &key)).unwrap_or_default()))
}

fn from_secret(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("fromSecret", args, 3)?;
    let (ns, name, key) = (str_arg(args, 0)?, str_arg(args, 1)?, str_arg(args, 2)?);
    if name.is_empty() || spoke_needs_namespace(call, &ns) || key.is_empty() {
        return Err(Fail::Calling(format!(
            "{INVALID_INPUT}: namespace, name, and key must be specified"
        )));
    }
    let object = one(call, "Secret", &ns, &name, "failed to get the secret")?;
    let value = object.map(|o| key_of(&o, &key)).unwrap_or_default();
    Ok(string(hub_protected(call, value)?))
}

fn copy_config_map_data(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("copyConfigMapData", args, 2)?;
    let (ns, name) = (str_arg(args, 0)?, str_arg(args, 1)?);
    if name.is_empty() || spoke_needs_namespace(call, &ns) {
        return Err(Fail::Calling(format!(
            "{INVALID_INPUT}: namespace and name must be specified"
        )));
    }
    let object = one(
        call,
        "ConfigMap",
        &ns,
        &name,
        "failed getting the ConfigMap",
    )?;
    let data = object.map(|o| data_of(&o)).unwrap_or_default();
    Ok(string(serde_json::Value::Object(data).to_string()))
}

fn copy_secret_data(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("copySecretData", args, 2)?;
    let (ns, name) = (str_arg(args, 0)?, str_arg(args, 1)?);
    if name.is_empty() || spoke_needs_namespace(call, &ns) {
        return Err(Fail::Calling(format!(
            "{INVALID_INPUT}: namespace and name must be specified"
        )));
    }
    let object = one(call, "Secret", &ns, &name, "failed to get the secret")?;
    let mut data = object.map(|o| data_of(&o)).unwrap_or_default();
    for v in data.values_mut() {
        if let serde_json::Value::String(s) = v {
            *s = hub_protected(call, std::mem::take(s))?;
        }
    }
    Ok(string(serde_json::Value::Object(data).to_string()))
}

/// A Secret's value as a hub template gives it: protected, as the propagator rewrites every
/// `fromSecret`/`copySecretData` of a hub template to pipe into `protect`; on the spoke as read.
fn hub_protected(call: &Call<'_>, value: String) -> Result<String, Fail> {
    match call.mode() {
        Mode::Hub { .. } => call.protect(&value),
        Mode::Spoke => Ok(value),
    }
}

fn claim(call: &Call<'_>, args: &[Value], name: &str, absent_ok: bool) -> Result<Value, Fail> {
    arity(name, args, 1)?;
    let claim = str_arg(args, 0)?;
    if claim.is_empty() {
        return Err(Fail::Calling("a claim name must be provided".into()));
    }
    match get_or_list(
        call,
        CLUSTER_CLAIM_API_VERSION,
        CLUSTER_CLAIM,
        "",
        &claim,
        &[],
    )? {
        Got::Pending => Ok(string("")),
        Got::One(Some(o)) => match o.get("spec").and_then(|s| s.as_object()) {
            Some(spec) => Ok(string(
                spec.get("value")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default(),
            )),
            None => Err(Fail::Calling(format!(
                "unexpected ClusterClaim format: {claim}"
            ))),
        },
        Got::One(None) | Got::Many(_) if absent_ok => Ok(string("")),
        Got::One(None) | Got::Many(_) => Err(Fail::Calling(not_found(
            CLUSTER_CLAIM_API_VERSION,
            CLUSTER_CLAIM,
            &claim,
        ))),
    }
}

fn from_cluster_claim(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    claim(call, args, "fromClusterClaim", false)
}

fn lookup_cluster_claim(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    claim(call, args, "lookupClusterClaim", true)
}

/// `lookup apiVersion kind namespace name [selector…]`: the object as a map, an empty map when
/// it does not exist, `{"items": […]}` for a list.
fn lookup(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    at_least("lookup", args, 4)?;
    let mut strs = Vec::with_capacity(args.len());
    for i in 0..args.len() {
        strs.push(str_arg(args, i)?);
    }
    let got = get_or_list(call, &strs[0], &strs[1], &strs[2], &strs[3], &strs[4..])?;
    let secret = strs[0] == "v1" && strs[1] == "Secret";
    Ok(match got {
        Got::Pending | Got::One(None) => map_of([]),
        Got::One(Some(o)) if secret => {
            let mut o = Arc::unwrap_or_clone(o);
            protect_data(call, &mut o)?;
            to_template(&o)
        }
        Got::One(Some(o)) => to_template(&o),
        Got::Many(mut items) => {
            if secret {
                for o in &mut items {
                    protect_data(call, o)?;
                }
            }
            map_of([(
                "items".to_string(),
                Value::List(items.iter().map(to_template).collect::<Vec<_>>().into()),
            )])
        }
    })
}

/// A hub Secret looked up by a hub template: each `data` value protected, as `fromSecret`'s
/// (deviation: OCM's hub `lookup` gives a Secret in the clear, and the replicated policy
/// carries it; Flotilla never lets a hub Secret's value leave the hub unsealed). On the spoke
/// nothing changes.
fn protect_data(call: &Call<'_>, object: &mut serde_json::Value) -> Result<(), Fail> {
    if let Some(data) = object.get_mut("data").and_then(|d| d.as_object_mut()) {
        for v in data.values_mut() {
            if let serde_json::Value::String(s) = v {
                *s = hub_protected(call, std::mem::take(s))?;
            }
        }
    }
    Ok(())
}

fn base64enc(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("base64enc", args, 1)?;
    Ok(string(BASE64.encode(str_arg(args, 0)?.as_bytes())))
}

/// Decodes standard base64; on bad input the *error text* is the value, as OCM does.
fn base64dec(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("base64dec", args, 1)?;
    let s = str_arg(args, 0)?;
    Ok(string(match BASE64.decode(s.as_bytes()) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => format!("illegal base64 data at input byte {}", e.position),
    }))
}

fn autoindent(_: &Call<'_>, _: &[Value]) -> Result<Value, Fail> {
    Err(Fail::Calling(
        "an unexpected error occurred where autoindent could not be processed".into(),
    ))
}

/// OCM's `indent`: every line after the first padded, the whole trimmed (the first line sits
/// where the template is).
fn indent(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("indent", args, 2)?;
    let padded = super::sprig::pad_lines(int_arg(args, 0)?, &str_arg(args, 1)?)?;
    Ok(string(padded.trim()))
}

fn atoi(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("atoi", args, 1)?;
    Ok(Value::Int(str_arg(args, 0)?.parse::<i64>().unwrap_or(0)))
}

fn to_int(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("toInt", args, 1)?;
    Ok(Value::Int(cast_to_int(&args[0])))
}

/// spf13/cast v1.10.0 `ToInt` (the version go-template-utils pins): numbers truncated, booleans
/// 1/0, strings parsed as Go's `ParseInt(s, 0, 0)` after `trimDecimal` drops a decimal part
/// (`"3.5"` is 3, `"-2.9"` is -2, `".5"` is 0); anything else 0.
pub fn cast_to_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::Uint(u) => i64::try_from(*u).unwrap_or(0),
        // Saturating like Go's conversion on amd64 is not defined; cast truncates.
        Value::Float(f) => f.trunc() as i64,
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => parse_go_int(&trim_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// cast's `trimDecimal` (`number.go`): a plain decimal number `^([-+]?\d*)(\.\d*)?$` loses its
/// decimal part, an empty integer part (`""`, `"+"`, `"-"`) becoming `"0"`; anything else is
/// kept as it is (`0x1F`, `1_000`, `1e3`).
fn trim_decimal(s: &str) -> std::borrow::Cow<'_, str> {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !frac.is_none_or(digits) {
        return s.into();
    }
    let sign_len = s.len() - body.len();
    let kept = &s[..sign_len + int.len()];
    if int.is_empty() {
        "0".into()
    } else {
        kept.into()
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`: sign, then `0x`, `0o`, `0b` or a leading `0` (octal);
/// underscores only between digits (or after a base prefix), as base 0 allows (`1_000`).
pub fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let lower = rest.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower.clone(), false)
    };
    // Go's underscoreOK: '_' must separate digits; a base prefix counts as a digit before it.
    if (!prefixed && digits.starts_with('_')) || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let digits = digits.replace('_', "");
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = i128::from_str_radix(&digits, radix).ok()?;
    let signed = if neg { -magnitude } else { magnitude };
    i64::try_from(signed).ok()
}

fn to_bool(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("toBool", args, 1)?;
    let s = str_arg(args, 0)?;
    Ok(Value::Bool(matches!(
        s.as_str(),
        "1" | "t" | "T" | "TRUE" | "true" | "True"
    )))
}

fn to_literal(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("toLiteral", args, 1)?;
    let s = str_arg(args, 0)?;
    if s.contains('\n') {
        return Err(Fail::Calling(
            "new lines are not allowed in the string passed to the toLiteral function".into(),
        ));
    }
    Ok(string(s))
}

fn from_yaml(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("fromYAML", args, 1)?;
    let s = str_arg(args, 0)?;
    match serde_yaml::from_str::<serde_json::Value>(&s) {
        Ok(v) => Ok(to_template(&v)),
        Err(e) => Err(Fail::Calling(e.to_string())),
    }
}

/// YAML of a value, unindented, its one trailing newline trimmed.
fn to_yaml(_: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("toYAML", args, 1)?;
    match serde_yaml::to_string(&to_json(&args[0])) {
        Ok(s) => Ok(string(s.strip_suffix('\n').unwrap_or(&s))),
        Err(e) => Err(Fail::Calling(format!("yaml marshal error: {e}"))),
    }
}

fn protect(call: &Call<'_>, args: &[Value]) -> Result<Value, Fail> {
    arity("protect", args, 1)?;
    let plain = str_arg(args, 0)?;
    Ok(string(call.protect(&plain)?))
}

fn denied(name: &str) -> Fail {
    Fail::Calling(format!(
        "use of denylisted template function: function '{name}' is considered a security risk"
    ))
}

fn env(_: &Call<'_>, _: &[Value]) -> Result<Value, Fail> {
    Err(denied("env"))
}

fn expandenv(_: &Call<'_>, _: &[Value]) -> Result<Value, Fail> {
    Err(denied("expandenv"))
}

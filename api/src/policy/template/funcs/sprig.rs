//! The sprig functions Flotilla's templates offer (Masterminds/sprig v3 semantics; OCM enables
//! all of sprig but `env` and `expandenv`). Left out, so a clear `function "…" not defined`:
//! time (`now`, `date`, …) and random (`randAlpha`, `uuidv4`, …) functions, whose output would
//! change a replica every evaluation, crypto generators, network and path functions.

use super::ocm::cast_to_int;
use super::{Call, Fail, Func, arity, at_least, int_arg, str_arg, strval};
use crate::policy::template::budget;
use crate::policy::template::value::{map_of, string, to_json, to_template};
use gotmpl::Value;
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The sprig subset by name.
pub const FUNCS: &[(&str, Func)] = &[
    ("trim", trim),
    ("trimAll", trim_all),
    ("trimPrefix", trim_prefix),
    ("trimSuffix", trim_suffix),
    ("upper", upper),
    ("lower", lower),
    ("title", title),
    ("repeat", repeat),
    ("substr", substr),
    ("trunc", trunc),
    ("nospace", nospace),
    ("contains", contains),
    ("hasPrefix", has_prefix),
    ("hasSuffix", has_suffix),
    ("quote", quote),
    ("squote", squote),
    ("cat", cat),
    ("replace", replace),
    ("nindent", nindent),
    ("split", split),
    ("splitn", splitn),
    ("splitList", split_list),
    ("join", join),
    ("default", default),
    ("empty", empty),
    ("coalesce", coalesce),
    ("ternary", ternary),
    ("fail", fail),
    ("list", list),
    ("first", first),
    ("last", last),
    ("rest", rest),
    ("initial", initial),
    ("append", append),
    ("prepend", prepend),
    ("concat", concat),
    ("reverse", reverse),
    ("uniq", uniq),
    ("has", has),
    ("compact", compact),
    ("sortAlpha", sort_alpha),
    ("until", until),
    ("untilStep", until_step),
    ("without", without),
    ("dig", dig),
    ("dict", dict),
    ("get", get),
    ("hasKey", has_key),
    ("keys", keys),
    ("values", values),
    ("pick", pick),
    ("omit", omit),
    ("toString", to_string),
    ("toStrings", to_strings),
    ("int", int),
    ("int64", int),
    ("float64", float64),
    ("add", add),
    ("add1", add1),
    ("sub", sub),
    ("mul", mul),
    ("div", div),
    ("mod", modulo),
    ("max", max),
    ("min", min),
    ("toJson", to_json_fn),
    ("mustToJson", to_json_fn),
    ("toRawJson", to_raw_json),
    ("mustToRawJson", to_raw_json),
    ("toPrettyJson", to_pretty_json),
    ("fromJson", from_json),
    ("mustFromJson", must_from_json),
    ("regexMatch", regex_match),
    ("regexFind", regex_find),
    ("regexFindAll", regex_find_all),
    ("regexReplaceAll", regex_replace_all),
    ("regexReplaceAllLiteral", regex_replace_all_literal),
    ("regexSplit", regex_split),
    ("typeOf", type_of),
    ("typeIs", type_is),
    ("sha256sum", sha256sum),
    ("b32enc", b32enc),
    ("b32dec", b32dec),
    ("kindOf", kind_of),
    ("kindIs", kind_is),
    ("deepEqual", deep_equal),
];

fn s1(name: &str, args: &[Value], f: impl Fn(&str) -> String) -> Result<Value, Fail> {
    arity(name, args, 1)?;
    Ok(string(f(&str_arg(args, 0)?)))
}

fn trim(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    s1("trim", a, |s| s.trim().to_string())
}
fn upper(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    s1("upper", a, str::to_uppercase)
}
fn lower(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    s1("lower", a, str::to_lowercase)
}
fn nospace(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    s1("nospace", a, |s| {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    })
}
fn title(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    // Go's `strings.Title`: a rune after a separator is title-cased, where a separator is any
    // ASCII rune but letters, digits and `_`, and beyond ASCII a space (`hello-world` →
    // `Hello-World`).
    fn separator(c: char) -> bool {
        if c.is_ascii() {
            return !(c.is_ascii_alphanumeric() || c == '_');
        }
        !c.is_alphanumeric() && c.is_whitespace()
    }
    s1("title", a, |s| {
        let mut out = String::with_capacity(s.len());
        let mut prev = ' ';
        for c in s.chars() {
            let mut upper = c.to_uppercase();
            match (separator(prev), upper.next(), upper.next()) {
                // Go maps one rune to one rune: a character whose capital is several is kept.
                (true, Some(u), None) => out.push(u),
                _ => out.push(c),
            }
            prev = c;
        }
        out
    })
}

/// Go's `strings.Trim(s, cutset)`.
fn trim_all(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("trimAll", a, 2)?;
    let cut = str_arg(a, 0)?;
    Ok(string(str_arg(a, 1)?.trim_matches(|c| cut.contains(c))))
}
fn trim_prefix(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("trimPrefix", a, 2)?;
    let (p, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
    Ok(string(s.strip_prefix(p.as_str()).unwrap_or(&s)))
}
fn trim_suffix(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("trimSuffix", a, 2)?;
    let (p, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
    Ok(string(s.strip_suffix(p.as_str()).unwrap_or(&s)))
}
fn repeat(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("repeat", a, 2)?;
    let n = repeat_count(int_arg(a, 0)?)?;
    let s = str_arg(a, 1)?;
    budget::room(s.len().saturating_mul(n))?;
    Ok(string(s.repeat(n)))
}

/// sprig's `substr start end s` (byte offsets; `end < 0` or past the end: to the end).
/// sprig's `substring`: Go slices the string, and a slice out of range panics, which the
/// template reports with the runtime's words (`runtime error: slice bounds out of range [3:1]`).
fn substr(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("substr", a, 3)?;
    let (start, end, s) = (int_arg(a, 0)?, int_arg(a, 1)?, str_arg(a, 2)?);
    let len = s.len() as i64;
    let out_of_range = |m: String| {
        Err(Fail::Calling(format!(
            "runtime error: slice bounds out of range {m}"
        )))
    };
    let (from, to) = if start < 0 {
        // s[:end]
        if end < 0 {
            return out_of_range(format!("[:{end}]"));
        }
        if end > len {
            return out_of_range(format!("[:{end}] with length {len}"));
        }
        (0, end)
    } else if end < 0 || end > len {
        // s[start:]
        if start > len {
            return out_of_range(format!("[{start}:{len}]"));
        }
        (start, len)
    } else {
        // s[start:end]
        if start > end {
            return out_of_range(format!("[{start}:{end}]"));
        }
        (start, end)
    };
    Ok(string(
        s.get(from as usize..to as usize).unwrap_or_default(),
    ))
}

fn trunc(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("trunc", a, 2)?;
    let (c, s) = (int_arg(a, 0)?, str_arg(a, 1)?);
    let len = s.len() as i64;
    let out = if c < 0 && len + c > 0 {
        s.get((len + c) as usize..).unwrap_or_default()
    } else if c >= 0 && len > c {
        s.get(..c as usize).unwrap_or_default()
    } else {
        &s
    };
    Ok(string(out))
}

fn contains(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("contains", a, 2)?;
    Ok(Value::Bool(str_arg(a, 1)?.contains(&str_arg(a, 0)?)))
}
fn has_prefix(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("hasPrefix", a, 2)?;
    Ok(Value::Bool(str_arg(a, 1)?.starts_with(&str_arg(a, 0)?)))
}
fn has_suffix(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("hasSuffix", a, 2)?;
    Ok(Value::Bool(str_arg(a, 1)?.ends_with(&str_arg(a, 0)?)))
}

fn quote(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let parts: Vec<String> = a
        .iter()
        .filter(|v| !matches!(v, Value::Nil))
        .map(|v| crate::policy::template::check::go_quote(&strval(v)))
        .collect();
    Ok(string(parts.join(" ")))
}
fn squote(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let parts: Vec<String> = a
        .iter()
        .filter(|v| !matches!(v, Value::Nil))
        .map(|v| format!("'{}'", strval(v)))
        .collect();
    Ok(string(parts.join(" ")))
}
fn cat(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let parts: Vec<String> = a
        .iter()
        .filter(|v| !matches!(v, Value::Nil))
        .map(strval)
        .collect();
    Ok(string(parts.join(" ")))
}
fn replace(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("replace", a, 3)?;
    let (old, new, s) = (str_arg(a, 0)?, str_arg(a, 1)?, str_arg(a, 2)?);
    let count = if old.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(old.as_str()).count()
    };
    budget::room(
        s.len()
            .saturating_add(count.saturating_mul(new.len()))
            .saturating_sub(count.saturating_mul(old.len())),
    )?;
    Ok(string(s.replace(&old, &new)))
}

/// Go's `strings.Repeat` count: a negative one panics, which the template reports.
pub fn repeat_count(n: i64) -> Result<usize, Fail> {
    usize::try_from(n).map_err(|_| Fail::Calling("strings: negative Repeat count".into()))
}

/// `s` with every line after the first padded by `n` spaces, refused before it is built when
/// it would be too large.
pub fn pad_lines(n: i64, s: &str) -> Result<String, Fail> {
    let n = repeat_count(n)?;
    let lines = s.matches('\n').count() + 1;
    budget::room(
        s.len()
            .saturating_add(lines.saturating_mul(n.saturating_add(1))),
    )?;
    let pad = " ".repeat(n);
    Ok(format!("\n{pad}{}", s.replace('\n', &format!("\n{pad}"))))
}

/// sprig's `nindent`: a newline, then every line padded.
fn nindent(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("nindent", a, 2)?;
    Ok(string(pad_lines(int_arg(a, 0)?, &str_arg(a, 1)?)?))
}

fn indexed(parts: Vec<&str>) -> Value {
    map_of(
        parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| (format!("_{i}"), string(p))),
    )
}
fn split(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("split", a, 2)?;
    let (sep, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
    Ok(indexed(go_split(&s, &sep, usize::MAX)))
}
fn splitn(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("splitn", a, 3)?;
    let (sep, n, s) = (str_arg(a, 0)?, int_arg(a, 1)?, str_arg(a, 2)?);
    let n = if n < 0 { usize::MAX } else { n as usize };
    Ok(indexed(go_split(&s, &sep, n)))
}
fn split_list(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("splitList", a, 2)?;
    let (sep, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
    Ok(Value::List(
        go_split(&s, &sep, usize::MAX)
            .into_iter()
            .map(string)
            .collect::<Vec<_>>()
            .into(),
    ))
}

/// Go's `strings.SplitN` (an empty separator splits after each character; `n == 0` is none).
fn go_split<'a>(s: &'a str, sep: &str, n: usize) -> Vec<&'a str> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let mut out: Vec<&str> = Vec::new();
        for (i, c) in s.char_indices() {
            if out.len() + 1 == n {
                out.push(&s[i..]);
                return out;
            }
            out.push(&s[i..i + c.len_utf8()]);
        }
        return out;
    }
    s.splitn(n, sep).collect()
}

fn items(v: &Value) -> Vec<Value> {
    match v {
        Value::List(l) => l.to_vec(),
        Value::Nil => Vec::new(),
        other => vec![other.clone()],
    }
}

fn join(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("join", a, 2)?;
    let sep = strval(&a[0]);
    let parts: Vec<String> = items(&a[1])
        .iter()
        .filter(|v| !matches!(v, Value::Nil))
        .map(strval)
        .collect();
    let len = parts.iter().map(String::len).sum::<usize>();
    budget::room(len.saturating_add(sep.len().saturating_mul(parts.len())))?;
    Ok(string(parts.join(&sep)))
}

/// sprig's `empty`: nil, false, 0, "" and empty lists and maps.
pub fn is_empty(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Float(f) => *f == 0.0,
        Value::String(s) => s.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Function(_) => false,
    }
}

fn default(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("default", a, 1)?;
    match a.get(1) {
        Some(v) if !is_empty(v) => Ok(v.clone()),
        _ => Ok(a[0].clone()),
    }
}
fn empty(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("empty", a, 1)?;
    Ok(Value::Bool(is_empty(&a[0])))
}
fn coalesce(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(a.iter()
        .find(|v| !is_empty(v))
        .cloned()
        .unwrap_or(Value::Nil))
}
fn ternary(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("ternary", a, 3)?;
    Ok(if a[2].is_truthy() {
        a[0].clone()
    } else {
        a[1].clone()
    })
}
fn fail(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("fail", a, 1)?;
    Err(Fail::Calling(strval(&a[0])))
}

fn list(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(Value::List(a.to_vec().into()))
}
fn list_arg(name: &str, a: &[Value], n: usize) -> Result<Vec<Value>, Fail> {
    arity(name, a, n)?;
    match &a[0] {
        Value::List(l) => Ok(l.to_vec()),
        Value::Nil => Ok(Vec::new()),
        other => Err(Fail::Calling(format!(
            "Cannot find {name} on type {}",
            super::go_type(other)
        ))),
    }
}
fn first(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(list_arg("first", a, 1)?
        .first()
        .cloned()
        .unwrap_or(Value::Nil))
}
fn last(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(list_arg("last", a, 1)?
        .last()
        .cloned()
        .unwrap_or(Value::Nil))
}
fn rest(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let l = list_arg("rest", a, 1)?;
    Ok(Value::List(l.get(1..).unwrap_or_default().to_vec().into()))
}
fn initial(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let l = list_arg("initial", a, 1)?;
    Ok(Value::List(
        l.get(..l.len().saturating_sub(1))
            .unwrap_or_default()
            .to_vec()
            .into(),
    ))
}
fn append(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("append", a, 2)?;
    let mut l = items(&a[0]);
    l.push(a[1].clone());
    Ok(Value::List(l.into()))
}
fn prepend(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("prepend", a, 2)?;
    let mut l = vec![a[1].clone()];
    l.extend(items(&a[0]));
    Ok(Value::List(l.into()))
}
fn concat(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(Value::List(
        a.iter().flat_map(items).collect::<Vec<_>>().into(),
    ))
}
fn reverse(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let mut l = list_arg("reverse", a, 1)?;
    l.reverse();
    Ok(Value::List(l.into()))
}
fn same(x: &Value, y: &Value) -> bool {
    to_json(x) == to_json(y)
}
fn uniq(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let mut out: Vec<Value> = Vec::new();
    for v in list_arg("uniq", a, 1)? {
        if !out.iter().any(|o| same(o, &v)) {
            out.push(v);
        }
    }
    Ok(Value::List(out.into()))
}
fn has(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("has", a, 2)?;
    Ok(Value::Bool(items(&a[1]).iter().any(|v| same(v, &a[0]))))
}
fn compact(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let l = list_arg("compact", a, 1)?;
    Ok(Value::List(
        l.into_iter()
            .filter(|v| !is_empty(v))
            .collect::<Vec<_>>()
            .into(),
    ))
}
fn sort_alpha(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("sortAlpha", a, 1)?;
    let mut l: Vec<String> = items(&a[0]).iter().map(strval).collect();
    l.sort();
    Ok(Value::List(
        l.into_iter().map(string).collect::<Vec<_>>().into(),
    ))
}
fn until(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("until", a, 1)?;
    let n = cast_to_int(&a[0]);
    if n.unsigned_abs() > 100_000 {
        return Err(Fail::Calling("until count too large".into()));
    }
    let out: Vec<Value> = if n >= 0 {
        (0..n).map(Value::Int).collect()
    } else {
        (n + 1..=0).rev().map(Value::Int).collect()
    };
    Ok(Value::List(out.into()))
}

fn map_arg(v: &Value) -> BTreeMap<Arc<str>, Value> {
    match v {
        Value::Map(m) => (**m).clone(),
        _ => BTreeMap::new(),
    }
}
fn dict(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let mut m = BTreeMap::new();
    for pair in a.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_else(|| string(""));
        m.insert(Arc::from(strval(&pair[0]).as_str()), v);
    }
    Ok(Value::Map(Arc::new(m)))
}
fn get(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("get", a, 2)?;
    Ok(map_arg(&a[0])
        .get(strval(&a[1]).as_str())
        .cloned()
        .unwrap_or_else(|| string("")))
}
fn has_key(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("hasKey", a, 2)?;
    Ok(Value::Bool(
        map_arg(&a[0]).contains_key(strval(&a[1]).as_str()),
    ))
}
fn keys(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    let out: Vec<Value> = a
        .iter()
        .flat_map(|m| map_arg(m).into_keys())
        .map(Value::String)
        .collect();
    Ok(Value::List(out.into()))
}
fn values(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("values", a, 1)?;
    Ok(Value::List(
        map_arg(&a[0]).into_values().collect::<Vec<_>>().into(),
    ))
}
fn pick(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("pick", a, 1)?;
    let names: Vec<String> = a[1..].iter().map(strval).collect();
    let m = map_arg(&a[0])
        .into_iter()
        .filter(|(k, _)| names.iter().any(|n| n.as_str() == &**k))
        .collect();
    Ok(Value::Map(Arc::new(m)))
}
fn omit(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("omit", a, 1)?;
    let names: Vec<String> = a[1..].iter().map(strval).collect();
    let m = map_arg(&a[0])
        .into_iter()
        .filter(|(k, _)| !names.iter().any(|n| n.as_str() == &**k))
        .collect();
    Ok(Value::Map(Arc::new(m)))
}

fn to_string(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("toString", a, 1)?;
    Ok(string(strval(&a[0])))
}
fn to_strings(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("toStrings", a, 1)?;
    Ok(Value::List(
        items(&a[0])
            .iter()
            .map(|v| string(strval(v)))
            .collect::<Vec<_>>()
            .into(),
    ))
}
fn int(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("int", a, 1)?;
    Ok(Value::Int(cast_to_int(&a[0])))
}
fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Uint(u) => *u as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}
fn float64(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("float64", a, 1)?;
    Ok(Value::Float(to_f64(&a[0])))
}
fn add(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(Value::Int(
        a.iter().fold(0i64, |s, v| s.wrapping_add(cast_to_int(v))),
    ))
}
fn add1(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("add1", a, 1)?;
    Ok(Value::Int(cast_to_int(&a[0]).wrapping_add(1)))
}
fn sub(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("sub", a, 2)?;
    Ok(Value::Int(
        cast_to_int(&a[0]).wrapping_sub(cast_to_int(&a[1])),
    ))
}
fn mul(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    Ok(Value::Int(
        a.iter().fold(1i64, |s, v| s.wrapping_mul(cast_to_int(v))),
    ))
}
fn div(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("div", a, 2)?;
    match cast_to_int(&a[1]) {
        0 => Err(Fail::Calling(
            "runtime error: integer divide by zero".into(),
        )),
        d => Ok(Value::Int(cast_to_int(&a[0]).wrapping_div(d))),
    }
}
fn modulo(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("mod", a, 2)?;
    match cast_to_int(&a[1]) {
        0 => Err(Fail::Calling(
            "runtime error: integer divide by zero".into(),
        )),
        d => Ok(Value::Int(cast_to_int(&a[0]).wrapping_rem(d))),
    }
}
fn max(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("max", a, 1)?;
    Ok(Value::Int(a.iter().map(cast_to_int).max().unwrap_or(0)))
}
fn min(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("min", a, 1)?;
    Ok(Value::Int(a.iter().map(cast_to_int).min().unwrap_or(0)))
}

/// Go's `json.Marshal` escapes `<`, `>` and `&` (and U+2028/2029) inside strings; they can
/// only occur inside strings, so the whole text is rewritten.
fn html_escape_json(s: &str) -> String {
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}
/// sprig's `toJson` (Go's `json.Marshal`).
pub fn to_json_fn(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("toJson", a, 1)?;
    Ok(string(html_escape_json(&to_json(&a[0]).to_string())))
}
/// sprig's `toRawJson` (no HTML escaping).
pub fn to_raw_json(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("toRawJson", a, 1)?;
    Ok(string(to_json(&a[0]).to_string()))
}
fn to_pretty_json(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("toPrettyJson", a, 1)?;
    let text = serde_json::to_string_pretty(&to_json(&a[0])).unwrap_or_default();
    Ok(string(html_escape_json(&text)))
}

/// Go decodes every JSON number into `float64`.
fn floats(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or_default()),
        serde_json::Value::Array(a) => {
            Value::List(a.into_iter().map(floats).collect::<Vec<_>>().into())
        }
        serde_json::Value::Object(m) => map_of(m.into_iter().map(|(k, v)| (k, floats(v)))),
        other => to_template(&other),
    }
}
/// sprig's `fromJson`: nil on bad input.
pub fn from_json(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("fromJson", a, 1)?;
    let s = str_arg(a, 0)?;
    Ok(serde_json::from_str(&s).map(floats).unwrap_or(Value::Nil))
}
/// sprig's `mustFromJson`: the decoder's error on bad input.
pub fn must_from_json(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("mustFromJson", a, 1)?;
    let s = str_arg(a, 0)?;
    serde_json::from_str(&s)
        .map(floats)
        .map_err(|e| Fail::Calling(e.to_string()))
}

fn re(pattern: &str) -> Result<Regex, Fail> {
    Regex::new(pattern).map_err(|e| Fail::Calling(e.to_string()))
}
fn regex_match(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("regexMatch", a, 2)?;
    Ok(Value::Bool(re(&str_arg(a, 0)?)?.is_match(&str_arg(a, 1)?)))
}
fn regex_find(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("regexFind", a, 2)?;
    let s = str_arg(a, 1)?;
    Ok(string(
        re(&str_arg(a, 0)?)?.find(&s).map_or("", |m| m.as_str()),
    ))
}
fn regex_find_all(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("regexFindAll", a, 3)?;
    let (r, s, n) = (re(&str_arg(a, 0)?)?, str_arg(a, 1)?, int_arg(a, 2)?);
    let n = if n < 0 { usize::MAX } else { n as usize };
    Ok(Value::List(
        r.find_iter(&s)
            .take(n)
            .map(|m| string(m.as_str()))
            .collect::<Vec<_>>()
            .into(),
    ))
}
/// `$1`/`${name}` expansion as Go's `Regexp.ReplaceAllString`.
fn regex_replace_all(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("regexReplaceAll", a, 3)?;
    let (r, s, with) = (re(&str_arg(a, 0)?)?, str_arg(a, 1)?, str_arg(a, 2)?);
    bounded_replace(&r, &s, |caps, out| caps.expand(&with, out))
}
fn regex_replace_all_literal(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("regexReplaceAllLiteral", a, 3)?;
    let (r, s, with) = (re(&str_arg(a, 0)?)?, str_arg(a, 1)?, str_arg(a, 2)?);
    bounded_replace(&r, &s, |_, out| out.push_str(&with))
}
/// `Regex::replace_all` built match by match, refused as soon as it grows too large (a
/// replacement like `$0$0$0…` multiplies its input).
fn bounded_replace(
    r: &Regex,
    s: &str,
    expand: impl Fn(&regex::Captures<'_>, &mut String),
) -> Result<Value, Fail> {
    let mut out = String::new();
    let mut last = 0;
    for caps in r.captures_iter(s) {
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&s[last..m.start()]);
        expand(&caps, &mut out);
        last = m.end();
        budget::room(out.len())?;
    }
    out.push_str(&s[last..]);
    budget::room(out.len())?;
    Ok(string(out))
}
fn regex_split(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("regexSplit", a, 3)?;
    let (r, s, n) = (re(&str_arg(a, 0)?)?, str_arg(a, 1)?, int_arg(a, 2)?);
    let parts: Vec<Value> = if n < 0 {
        r.split(&s).map(string).collect()
    } else {
        r.splitn(&s, n as usize).map(string).collect()
    };
    Ok(Value::List(parts.into()))
}

fn type_of(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("typeOf", a, 1)?;
    Ok(string(super::go_type(&a[0])))
}
fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "invalid",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Uint(_) => "uint64",
        Value::Float(_) => "float64",
        Value::String(_) => "string",
        Value::List(_) => "slice",
        Value::Map(_) => "map",
        Value::Function(_) => "func",
    }
}
fn kind_of(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("kindOf", a, 1)?;
    Ok(string(kind_name(&a[0])))
}
fn kind_is(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("kindIs", a, 2)?;
    Ok(Value::Bool(strval(&a[0]) == kind_name(&a[1])))
}
fn deep_equal(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("deepEqual", a, 2)?;
    Ok(Value::Bool(same(&a[0], &a[1])))
}

/// sprig's `untilStep start stop step`: integers from `start` towards `stop`, `step` apart.
fn until_step(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("untilStep", a, 3)?;
    let (start, stop, step) = (cast_to_int(&a[0]), cast_to_int(&a[1]), cast_to_int(&a[2]));
    let mut out = Vec::new();
    let mut i = start;
    while step != 0 && ((step > 0 && i < stop) || (step < 0 && i > stop)) {
        if out.len() >= 100_000 {
            return Err(Fail::Calling("untilStep count too large".into()));
        }
        out.push(Value::Int(i));
        i = i.saturating_add(step);
    }
    Ok(Value::List(out.into()))
}
fn without(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("without", a, 1)?;
    let drop = &a[1..];
    Ok(Value::List(
        items(&a[0])
            .into_iter()
            .filter(|v| !drop.iter().any(|d| same(d, v)))
            .collect::<Vec<_>>()
            .into(),
    ))
}
/// sprig's `dig key… default dict`: the value at the path of keys, else the default.
fn dig(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    at_least("dig", a, 3)?;
    let (keys, rest) = a.split_at(a.len() - 2);
    let (default, dict) = (&rest[0], &rest[1]);
    let mut at = dict.clone();
    for k in keys {
        match map_arg(&at).get(strval(k).as_str()) {
            Some(v) => at = v.clone(),
            None => return Ok(default.clone()),
        }
    }
    Ok(at)
}
fn type_is(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("typeIs", a, 2)?;
    Ok(Value::Bool(strval(&a[0]) == super::go_type(&a[1])))
}
fn sha256sum(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    use sha2::Digest;
    arity("sha256sum", a, 1)?;
    let digest = sha2::Sha256::digest(strval(&a[0]).as_bytes());
    Ok(string(data_encoding::HEXLOWER.encode(&digest)))
}
fn b32enc(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("b32enc", a, 1)?;
    Ok(string(
        data_encoding::BASE32.encode(strval(&a[0]).as_bytes()),
    ))
}
/// sprig's `b32dec`: the decoder's error text as the value on bad input, as sprig does.
fn b32dec(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    arity("b32dec", a, 1)?;
    Ok(string(
        match data_encoding::BASE32.decode(strval(&a[0]).as_bytes()) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => format!("illegal base32 data at input byte {}", e.position),
        },
    ))
}

//! Go's built-ins whose result joins their arguments (`printf`, `print`, `println`, `html`,
//! `js`, `urlquery`), put in front of `gotmpl`'s own: the arguments are weighed first (a
//! `printf "%s%s"` of two 1 MiB strings, repeated, would double without end), then `gotmpl`'s
//! built-in runs on them through a one-command template, so its output is exactly Go's.

use super::{Call, Fail, Func};
use crate::policy::template::budget::{self, Output};
use gotmpl::{Template, Value};

/// The built-ins wrapped, by name.
pub const FUNCS: &[(&str, Func)] = &[
    ("printf", printf),
    ("print", print),
    ("println", println),
    ("html", html),
    ("js", js),
    ("urlquery", urlquery),
];

fn printf(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    delegate("printf", a)
}
fn print(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    delegate("print", a)
}
fn println(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    delegate("println", a)
}
fn html(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    delegate("html", a)
}
fn js(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    delegate("js", a)
}
fn urlquery(_: &Call<'_>, a: &[Value]) -> Result<Value, Fail> {
    delegate("urlquery", a)
}

/// `gotmpl`'s `name` called with `args`, its output bounded while it is written.
fn delegate(name: &str, args: &[Value]) -> Result<Value, Fail> {
    budget::joined(args)?;
    let mut text = format!("{{{{{name}");
    for i in 0..args.len() {
        text.push_str(&format!(" (index . {i})"));
    }
    text.push_str("}}");
    let template = Template::new("builtin")
        .parse(&text)
        .map_err(|e| Fail::Args(e.to_string()))?;
    let mut out = Output::default();
    match template.execute_fmt(&mut out, &Value::List(args.to_vec().into())) {
        Ok(()) => Ok(Value::String(out.text.into())),
        Err(_) if out.overflowed => Err(budget::Over::Value.into()),
        Err(e) => Err(Fail::Args(inner_error(e))),
    }
}

/// The built-in's own message, without the one-command template's position.
fn inner_error(e: gotmpl::TemplateError) -> String {
    match e {
        gotmpl::TemplateError::Exec(m) => m,
        other => other.to_string(),
    }
}

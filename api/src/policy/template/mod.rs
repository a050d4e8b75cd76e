//! OCM's policy templates: Go `text/template` (through the `gotmpl` crate) with OCM's functions
//! and a sprig subset, resolved as stolostron/go-template-utils' `ResolveTemplate` does —
//! JSON → YAML text → quote removal for typed values → `autoindent` → parse → execute →
//! YAML → JSON — with its error texts. Pure: what templates read comes from a [`Source`], and
//! a read not answered yet makes the resolution [`Outcome::Pending`] (the caller fetches and
//! resolves again).
//!
//! - [`source`]: queries, answers, the [`source::Fetched`] cache.
//! - [`funcs`]: the functions ([`funcs::names`] lists them).
//! - [`policy`]: a ConfigurationPolicy's templates resolved, failures as findings.
//! - [`check`]: Go's parse-time check of undefined functions and its error context, from
//!   `gotmpl`'s tree.
//! - [`preprocess`]: go-template-utils' text rewrites; the delimiters of each side.
//! - [`value`]: JSON ↔ template values and YAML text.
//! - [`protected`]: hub template errors and protected values as the agent receives them.
//!
//! Go fidelity, measured against Go's `text/template` source: a missing map key is "no value"
//! and a field of it is too (Go's default `missingkey=invalid`, which go-template-utils keeps),
//! as in `gotmpl`. A field of an explicit JSON `null` is an error in Go (`nil pointer
//! evaluating interface {}.x`) and "no value" here — `gotmpl` has one nil for both.

pub mod budget;
pub mod check;
pub mod funcs;
pub mod policy;
pub mod preprocess;
pub mod protected;
pub mod source;
pub mod value;

use funcs::{Mode, Shared};
use gotmpl::Template;
use preprocess::Delims;
use source::{Query, Source};
use std::collections::BTreeSet;
use std::sync::Arc;

pub use budget::{MAX_OUTPUT, MAX_RANGE_ITERS};
/// How many rounds of dependent lookups a caller should allow before giving up.
pub const MAX_ROUNDS: usize = 16;
/// How many reads one resolution may make, every round together (Flotilla's bound).
pub const MAX_READS: usize = 1_000;

/// What stands for an execution error's text once the template has read a Secret.
pub const WITHHELD: &str = "(message withheld: the template read a Secret)";

/// A template that could not be resolved, worded as OCM words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The JSON input could not be written as YAML.
    #[error("failed to convert the policy template to YAML: {0}")]
    Yaml(String),
    /// Go's parse error (syntax, or a function not defined).
    #[error("failed to parse the template JSON string {raw}: {go}")]
    Parse {
        /// The input as given (JSON text, or the raw YAML string).
        raw: String,
        /// Go's error, `template: tmpl:<line>: …`.
        go: String,
    },
    /// Go's execution error.
    #[error("failed to resolve the template {raw}: {go}")]
    Exec {
        /// The input as given.
        raw: String,
        /// Go's error, `template: tmpl:<line>:<col>: executing "tmpl" at <…>: …`.
        go: String,
    },
    /// The output is not YAML.
    #[error("failed to convert the resolved template to JSON: {0}")]
    Output(String),
    /// More dependent lookups than [`MAX_ROUNDS`] (Flotilla's bound).
    #[error("the template needs more than {MAX_ROUNDS} rounds of lookups")]
    Rounds,
    /// More reads than [`MAX_READS`] (Flotilla's bound).
    #[error("the template reads more than {MAX_READS} objects (Flotilla's bound)")]
    Reads,
}

/// A resolved template.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The result.
    pub value: serde_json::Value,
    /// What the resolution read.
    pub reads: BTreeSet<Query>,
    /// Whether it read a Secret (its values must not be quoted in messages).
    pub sensitive: bool,
}

/// The outcome of one resolution.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done.
    Resolved(Resolved),
    /// Reads not answered yet: fetch them and resolve again.
    Pending(BTreeSet<Query>),
}

/// What a resolution needs besides its input.
pub struct Resolver {
    /// Which side (hub or spoke) and its delimiters.
    pub mode: Mode,
    /// The values `.Name` reads (`.ManagedClusterName` on the hub; nothing on the spoke yet).
    pub context: gotmpl::Value,
    /// Where reads are answered.
    pub source: Arc<dyn Source>,
    /// How `protect` seals for the cluster (the hub's, per cluster); `None` on the spoke.
    pub protect: Option<Arc<dyn funcs::Protect>>,
    /// When the resolution must stop, made on the thread that resolves (see
    /// [`budget::MAX_TIME`]).
    pub deadline: budget::Deadline,
}

impl Resolver {
    /// Go's name of the context's type, as its field errors print it: config-policy-controller
    /// gives templates without an object context `struct{}{}`; the propagator its
    /// `templateCtx`.
    fn context_type(&self) -> &'static str {
        match self.mode {
            Mode::Hub { .. } => {
                "struct { ManagedClusterName string; ManagedClusterLabels map[string]string; \
                 PolicyMetadata map[string]interface {} }"
            }
            Mode::Spoke => "struct {}",
        }
    }

    fn delims(&self) -> Delims {
        match self.mode {
            Mode::Hub { .. } => preprocess::HUB,
            Mode::Spoke => preprocess::SPOKE,
        }
    }

    /// Resolves a JSON value (an `objectDefinition`): written as YAML, executed, read back.
    pub fn resolve_json(&self, raw: &serde_json::Value) -> Result<Outcome, TemplateError> {
        let text = value::yaml_text(raw).map_err(|e| TemplateError::Yaml(e.to_string()))?;
        self.resolve_text(&raw.to_string(), &text)
    }

    /// Resolves YAML text (`object-templates-raw`).
    pub fn resolve_yaml(&self, raw: &str) -> Result<Outcome, TemplateError> {
        self.resolve_text(raw, raw)
    }

    fn resolve_text(&self, raw: &str, text: &str) -> Result<Outcome, TemplateError> {
        let delims = self.delims();
        let text = preprocess::data_types(text, delims);
        let text = preprocess::autoindent(&text, delims);
        let cell = Shared::new(
            self.source.clone(),
            self.mode.clone(),
            self.protect.clone(),
            self.deadline,
        );
        let map = funcs::func_map(&cell);
        let parse_error = |go: String| TemplateError::Parse {
            raw: raw.to_string(),
            go,
        };
        let (body, defines) = gotmpl::parse::Parser::new(&text, delims.start, delims.stop)
            .and_then(|p| p.parse())
            .map_err(|e| parse_error(go_parse_error(&e)))?;
        if let Some((name, line)) =
            check::undefined_function(&body, &defines, &|n| map.contains_key(n))
        {
            return Err(parse_error(format!(
                "template: tmpl:{line}: function \"{name}\" not defined"
            )));
        }
        let known = |f: &str| matches!(&self.context, gotmpl::Value::Map(m) if m.contains_key(f));
        if let Some((line, col, node, field)) = check::unknown_root_field(&body, &text, &known) {
            return Err(TemplateError::Exec {
                raw: raw.to_string(),
                go: format!(
                    "template: tmpl:{line}:{col}: executing \"tmpl\" at <{node}>: can't \
                     evaluate field {field} in type {}",
                    self.context_type()
                ),
            });
        }
        if let Some(line) = check::template_call(&body, &defines) {
            return Err(parse_error(format!(
                "template: tmpl:{line}: define, template and block are not supported in \
                 policy templates (Flotilla's bound: a template calling templates may recurse \
                 without end)"
            )));
        }
        let iterations = budget::range_budget(check::largest_loop(&body));
        let template = Template::new("tmpl")
            .delims(delims.start, delims.stop)
            .max_range_iters(iterations)
            .funcs(map)
            .parse(&text)
            .map_err(|e| parse_error(go_parse_error(&e)))?;
        let mut out = budget::Output::default();
        let executed = template.execute_fmt(&mut out, &self.context);
        let mut cell = cell.lock();
        if !cell.pending.is_empty() {
            // Placeholders stood in for what was not fetched: nothing else is meaningful yet.
            return Ok(Outcome::Pending(std::mem::take(&mut cell.pending)));
        }
        if let Err(e) = executed {
            let go = match cell.failure.take() {
                Some(mut f) => {
                    if cell.sensitive {
                        // A function's own text may quote what it was given: a Secret's value.
                        f.message = WITHHELD.to_string();
                    }
                    let at = check::call_site(&body, &text, &f.function);
                    go_exec_error(at, &f)
                }
                None if cell.sensitive => {
                    format!("template: tmpl: executing \"tmpl\": {WITHHELD}")
                }
                None => format!(
                    "template: tmpl: executing \"tmpl\": {}",
                    bound_error(&e, &out, iterations)
                ),
            };
            return Err(TemplateError::Exec {
                raw: raw.to_string(),
                go,
            });
        }
        let out = out.text;
        let value =
            value::from_yaml_text(&out).map_err(|e| TemplateError::Output(e.to_string()))?;
        Ok(Outcome::Resolved(Resolved {
            value,
            reads: std::mem::take(&mut cell.reads),
            sensitive: cell.sensitive,
        }))
    }
}

/// `gotmpl`'s error, or the bound it ran into worded as Flotilla's.
fn bound_error(e: &gotmpl::TemplateError, out: &budget::Output, iterations: u64) -> String {
    match e {
        _ if out.overflowed => {
            format!("the output is larger than {MAX_OUTPUT} bytes (Flotilla's bound)")
        }
        gotmpl::TemplateError::RangeIterLimit => format!(
            "the template's range loops ran more than {iterations} iterations (Flotilla's \
             bound for loops of this size)"
        ),
        other => other.to_string(),
    }
}

/// Go's parse errors carry the line only: `template: tmpl:<line>: <message>`.
fn go_parse_error(e: &gotmpl::TemplateError) -> String {
    match e {
        gotmpl::TemplateError::Parse { line, message, .. }
        | gotmpl::TemplateError::Lex { line, message, .. } => {
            format!("template: tmpl:{line}: {message}")
        }
        other => format!("template: tmpl: {other}"),
    }
}

/// Go's execution error of a function call:
/// `template: tmpl:<line>:<col>: executing "tmpl" at <<command>>: error calling <f>: <err>`.
fn go_exec_error(at: Option<(usize, usize, String)>, f: &funcs::Failure) -> String {
    let what = if f.calling {
        format!("error calling {}: {}", f.function, f.message)
    } else {
        f.message.clone()
    };
    match at {
        Some((line, col, node)) => {
            format!("template: tmpl:{line}:{col}: executing \"tmpl\" at <{node}>: {what}")
        }
        None => format!("template: tmpl: executing \"tmpl\": {what}"),
    }
}

#[cfg(test)]
mod tests;

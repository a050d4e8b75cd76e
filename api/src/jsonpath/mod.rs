//! A kubectl-style JSONPath subset evaluated over [`serde_json::Value`].
//!
//! OCM evaluates ManifestWork `JSONPaths` feedback rules with `k8s.io/client-go/util/jsonpath`
//! (the engine behind `kubectl -o jsonpath`), so rules are written in that dialect:
//! `.status.readyReplicas`, `.status.conditions[?(@.type=="Available")].status`,
//! `.spec.template.spec.containers[0].image`. This module implements the part of the dialect
//! that selects values; the templating part (literal text, `range`/`end`) is out of scope.
//!
//! Supported syntax, optionally wrapped in `{` `}` and optionally starting with `$` or `@` (both
//! the whole object at the top level):
//!
//! | form | selects |
//! |---|---|
//! | `.name`, `['name']`, `["name"]` | an object member (`\` escapes the next character) |
//! | `[n]`, `[-n]` | an array element, negative counts from the end |
//! | `[*]`, `.*` | every array element or object member value |
//! | `[start:end]`, `[start:end:step]` | an array slice (bounds are clamped, step ≥ 1) |
//! | `..name`, `..*`, `..[...]` | the selector applied to the node and all its descendants |
//! | `[?(@.a.b == "x")]` | array elements whose `@`-relative path compares true |
//! | `[?(@.a)]` | array elements where the `@`-relative path selects something |
//!
//! Filters compare with `==`, `!=`, `<`, `<=`, `>`, `>=` against a quoted string, a number, or
//! `true`/`false`. Strings compare bytewise, numbers numerically (integers exactly), booleans only
//! with `==` and `!=`.
//!
//! Evaluation never fails: where kubectl reports an error (a missing key, an index out of range,
//! a filter on a non-array, comparing values of different types), this evaluator selects nothing,
//! which is what OCM's `AllowMissingKeys(true)` amounts to for feedback. Object members are
//! visited in `serde_json::Map` iteration order.
//!
//! Evaluation does not allocate except for the output vector ([`JsonPath::eval_into`] can reuse
//! one) and a small work stack for recursive descent.
//!
//! ```
//! use serde_json::json;
//! use flotilla_api::jsonpath::parse;
//!
//! let deployment = json!({"status": {"conditions": [
//!     {"type": "Progressing", "status": "True"},
//!     {"type": "Available", "status": "False"},
//! ]}});
//! let path = parse(r#".status.conditions[?(@.type=="Available")].status"#).unwrap();
//! assert_eq!(path.eval(&deployment), [&json!("False")]);
//! ```

use std::cmp::Ordering;

use std::ops::ControlFlow;
use std::str::FromStr;

use serde_json::{Number, Value};

/// Most steps (`.a`, `[0]`, `..b`, …) one path, or one filter's path, may have.
///
/// Evaluation recurses once per step, so the bound keeps hostile rules from exhausting the stack.
pub const MAX_STEPS: usize = 64;

/// Deepest nesting of filters inside filter paths (`[?(@.a[?(@.b)])]` nests 2 deep).
pub const MAX_FILTER_DEPTH: usize = 4;

/// Result of parsing a JSONPath.
pub type Result<T, E = JsonPathError> = std::result::Result<T, E>;

/// A parsed JSONPath; build one with [`parse`] or [`str::parse`].
///
/// [`Display`](fmt::Display) prints a canonical form (no braces, no `$`, dot form for plain
/// member names, `['…']` otherwise, `[*]`, filters without spaces) that parses back to an equal
/// path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    /// Apply the selector to the current node.
    Child(Selector),
    /// Apply the selector to the current node and every descendant, in pre-order (`..`).
    Descendant(Selector),
}

/// What a step selects from one node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Selector {
    Name(String),
    Wildcard,
    Index(i64),
    /// `step` is at least 1; the parser rejects anything else.
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    },
    Filter(Box<Filter>),
}

/// `[?(@path)]` or `[?(@path op literal)]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Filter {
    /// Path relative to the array element (`@`).
    path: Vec<Segment>,
    /// `None` for an existence test.
    test: Option<(CmpOp, Literal)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Literal {
    String(String),
    Number(Number),
    Bool(bool),
}

/// A JSONPath that could not be parsed: what was wrong and where.
///
/// Displays as `path ".a[": unclosed '[' at position 3`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("path {path:?}: {kind} at position {position}")]
pub struct JsonPathError {
    path: String,
    position: usize,
    kind: JsonPathErrorKind,
}

impl JsonPathError {
    /// The path as given to [`parse`].
    pub fn path(&self) -> &str {
        &self.path
    }

    /// 1-based character (not byte) position of the problem in [`path`](Self::path); for
    /// unclosed constructs, the position where the construct opens.
    pub fn position(&self) -> usize {
        self.position
    }

    /// What was wrong.
    pub fn kind(&self) -> &JsonPathErrorKind {
        &self.kind
    }
}

/// The ways a JSONPath can be malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonPathErrorKind {
    /// Nothing to evaluate: an empty string, only whitespace, or `{}` (`$` alone is the root).
    #[error("empty path")]
    Empty,
    /// A character that cannot appear here.
    #[error("unexpected {found:?}, expected {expected}")]
    UnexpectedChar {
        /// The offending character.
        found: char,
        /// What the parser was looking for.
        expected: &'static str,
    },
    /// The path stops where more is required.
    #[error("path ends early, expected {expected}")]
    UnexpectedEnd {
        /// What the parser was looking for.
        expected: &'static str,
    },
    /// A `[` without its `]`.
    #[error("unclosed '['")]
    UnclosedBracket,
    /// A `[?(` without its `)]`.
    #[error("unclosed filter")]
    UnclosedFilter,
    /// A quoted name or string without its closing quote.
    #[error("unclosed string literal")]
    UnclosedString,
    /// A leading `{` without its `}`.
    #[error("missing closing '}}'")]
    UnclosedBrace,
    /// A `\` at the very end of a member name.
    #[error("dangling '\\' escape")]
    DanglingEscape,
    /// `[]`.
    #[error("empty brackets")]
    EmptyBrackets,
    /// An index or slice bound that is not a 64-bit integer.
    #[error("invalid array index {0:?}")]
    InvalidIndex(String),
    /// A slice step of zero or below; only forward slices are supported.
    #[error("slice step must be a positive integer, got {0}")]
    InvalidStep(i64),
    /// A filter number that is not a valid JSON number.
    #[error("invalid number {0:?}")]
    InvalidNumber(String),
    /// A filter operator other than `==`, `!=`, `<`, `<=`, `>`, `>=`.
    #[error("unknown comparison operator {0:?} (use ==, !=, <, <=, > or >=)")]
    UnknownOperator(String),
    /// A filter value that is not a quoted string, a number, `true` or `false`.
    #[error("invalid filter value {0:?} (use a quoted string, a number, true or false)")]
    InvalidLiteral(String),
    /// A filter whose tested path does not start with `@`.
    #[error("filter must test a path starting with '@'")]
    FilterWithoutCurrent,
    /// `[a,b]`: kubectl unions are not supported.
    #[error("unions ([a,b]) are not supported")]
    UnsupportedUnion,
    /// More than [`MAX_STEPS`] steps in one path.
    #[error("more than {MAX_STEPS} steps")]
    TooManySteps,
    /// Filters nested more than [`MAX_FILTER_DEPTH`] deep.
    #[error("filters nested more than {MAX_FILTER_DEPTH} deep")]
    FilterTooDeep,
}

impl FromStr for JsonPath {
    type Err = JsonPathError;

    fn from_str(s: &str) -> Result<Self> {
        parse(s)
    }
}

impl JsonPath {
    /// All values the path selects in `root`, in document order; empty when nothing matches.
    pub fn eval<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut out = Vec::new();
        self.eval_into(root, &mut out);
        out
    }

    /// Like [`eval`](Self::eval) but appends to `out`, so a caller evaluating many paths can
    /// reuse one buffer.
    pub fn eval_into<'a>(&self, root: &'a Value, out: &mut Vec<&'a Value>) {
        let _ = walk(&self.segments, root, &mut |v| {
            out.push(v);
            ControlFlow::Continue(())
        });
    }

    /// The first value the path selects, stopping the walk there.
    pub fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        let mut found = None;
        let _ = walk(&self.segments, root, &mut |v| {
            found = Some(v);
            ControlFlow::Break(())
        });
        found
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// Visitor called with every match; `Break` stops the walk early.
type Visit<'v, 'a> = dyn FnMut(&'a Value) -> ControlFlow<()> + 'v;

fn walk<'a>(segments: &[Segment], node: &'a Value, visit: &mut Visit<'_, 'a>) -> ControlFlow<()> {
    let Some((segment, rest)) = segments.split_first() else {
        return visit(node);
    };
    match segment {
        Segment::Child(selector) => select(selector, node, &mut |v| walk(rest, v, visit)),
        Segment::Descendant(selector) => {
            // Explicit stack: documents can be deeper than the thread stack allows recursion.
            let mut stack = vec![node];
            while let Some(current) = stack.pop() {
                select(selector, current, &mut |v| walk(rest, v, visit))?;
                match current {
                    Value::Array(items) => stack.extend(items.iter().rev()),
                    Value::Object(members) => stack.extend(members.values().rev()),
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
}

fn select<'a>(selector: &Selector, node: &'a Value, visit: &mut Visit<'_, 'a>) -> ControlFlow<()> {
    match (selector, node) {
        (Selector::Name(name), Value::Object(members)) => match members.get(name) {
            Some(v) => visit(v),
            None => ControlFlow::Continue(()),
        },
        (Selector::Wildcard, Value::Array(items)) => items.iter().try_for_each(visit),
        (Selector::Wildcard, Value::Object(members)) => members.values().try_for_each(visit),
        (Selector::Index(index), Value::Array(items)) => {
            match resolve_index(*index, items.len()).and_then(|i| items.get(i)) {
                Some(v) => visit(v),
                None => ControlFlow::Continue(()),
            }
        }
        (&Selector::Slice { start, end, step }, Value::Array(items)) => {
            let len = items.len();
            let start = start.map_or(0, |s| clamp_bound(s, len));
            let end = end.map_or(len, |e| clamp_bound(e, len));
            if start >= end {
                return ControlFlow::Continue(());
            }
            let step = usize::try_from(step).unwrap_or(usize::MAX).max(1);
            items[start..end].iter().step_by(step).try_for_each(visit)
        }
        (Selector::Filter(filter), Value::Array(items)) => items
            .iter()
            .filter(|item| filter.matches(item))
            .try_for_each(visit),
        _ => ControlFlow::Continue(()),
    }
}

/// Index into a slice of `len`, negative from the end; `None` when out of range.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if index < 0 {
        index.checked_add(len)?
    } else {
        index
    };
    (0..len)
        .contains(&i)
        .then(|| usize::try_from(i).ok())
        .flatten()
}

/// Slice bound clamped into `0..=len`, negative from the end (Python semantics).
fn clamp_bound(bound: i64, len: usize) -> usize {
    let ilen = i64::try_from(len).unwrap_or(i64::MAX);
    let b = if bound < 0 {
        bound.saturating_add(ilen)
    } else {
        bound
    };
    usize::try_from(b.clamp(0, ilen)).unwrap_or(len)
}

impl Filter {
    fn matches(&self, item: &Value) -> bool {
        match &self.test {
            None => walk(&self.path, item, &mut |_| ControlFlow::Break(())).is_break(),
            Some((op, literal)) => {
                // Like kubectl, compare only when the path selects exactly one value.
                let mut first = None;
                let mut count = 0usize;
                let _ = walk(&self.path, item, &mut |v| {
                    count += 1;
                    first = Some(v);
                    if count > 1 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
                match first {
                    Some(v) if count == 1 => compare(v, *op, literal),
                    _ => false,
                }
            }
        }
    }
}

fn compare(value: &Value, op: CmpOp, literal: &Literal) -> bool {
    let ordering = match (value, literal) {
        (Value::String(a), Literal::String(b)) => Some(a.as_str().cmp(b.as_str())),
        (Value::Number(a), Literal::Number(b)) => compare_numbers(a, b),
        (Value::Bool(a), Literal::Bool(b)) => {
            return match op {
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
                _ => false,
            };
        }
        _ => None,
    };
    let Some(ordering) = ordering else {
        // Different types are not comparable; kubectl errors, we select nothing.
        return false;
    };
    match op {
        CmpOp::Eq => ordering == Ordering::Equal,
        CmpOp::Ne => ordering != Ordering::Equal,
        CmpOp::Lt => ordering == Ordering::Less,
        CmpOp::Le => ordering != Ordering::Greater,
        CmpOp::Gt => ordering == Ordering::Greater,
        CmpOp::Ge => ordering != Ordering::Less,
    }
}

fn compare_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    fn exact(n: &Number) -> Option<i128> {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    }
    match (exact(a), exact(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

mod display;
mod parser;

pub use parser::parse;

#[cfg(test)]
mod tests;

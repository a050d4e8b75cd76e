//! A kubectl-style JSONPath subset evaluated over [`serde_json::Value`].
//!
//! OCM evaluates ManifestWork `JSONPaths` feedback rules with `k8s.io/client-go/util/jsonpath`
//! (the engine behind `kubectl -o jsonpath`), so rules are written in that dialect:
//! `.status.readyReplicas`, `.status.conditions[?(@.type=="Available")].status`,
//! `.spec.template.spec.containers[0].image`. This module implements the part of the dialect
//! that selects values; the templating part (literal text, `range`/`end`) is out of scope.
//!
//! Supported syntax, optionally wrapped in `{` `}` and optionally starting with `$`:
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
//! use flotilla_agent::work::jsonpath::parse;
//!
//! let deployment = json!({"status": {"conditions": [
//!     {"type": "Progressing", "status": "True"},
//!     {"type": "Available", "status": "False"},
//! ]}});
//! let path = parse(r#".status.conditions[?(@.type=="Available")].status"#).unwrap();
//! assert_eq!(path.eval(&deployment), [&json!("False")]);
//! ```

use std::cmp::Ordering;
use std::fmt::{self, Write as _};
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
#[error("path \"{path}\": {kind} at position {position}")]
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

/// Parses a kubectl-style JSONPath (see the [module docs](self) for the syntax).
///
/// Surrounding whitespace, one pair of surrounding `{` `}` and a leading `$` are accepted and
/// dropped. Errors carry the 1-based character position of the problem.
pub fn parse(path: &str) -> Result<JsonPath> {
    let mut p = Parser { src: path, pos: 0 };
    p.skip_ws();
    let brace = (p.peek() == Some('{')).then_some(p.pos);
    if brace.is_some() {
        p.bump();
        p.skip_ws();
    }
    let rooted = p.eat('$');
    if !rooted && matches!(p.peek(), None | Some('}')) {
        if let (Some(open), None) = (brace, p.peek()) {
            return Err(p.err_at(open, JsonPathErrorKind::UnclosedBrace));
        }
        return Err(p.err_at(p.pos, JsonPathErrorKind::Empty));
    }
    let segments = p.segments(0)?;
    p.skip_ws();
    if let Some(open) = brace {
        match p.peek() {
            Some('}') => {
                p.bump();
                p.skip_ws();
            }
            None => return Err(p.err_at(open, JsonPathErrorKind::UnclosedBrace)),
            Some(_) => return Err(p.unexpected("'.', '[' or '}'")),
        }
    }
    if p.peek().is_some() {
        return Err(p.unexpected("'.', '[' or the end of the path"));
    }
    Ok(JsonPath { segments })
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

// ---------------------------------------------------------------------------------------------
// Parsing

struct Parser<'s> {
    src: &'s str,
    /// Byte offset of the next character.
    pos: usize,
}

/// Characters allowed in a member name written in dot form without a `\` escape.
fn is_plain(c: char) -> bool {
    !c.is_whitespace()
        && !c.is_control()
        && !matches!(
            c,
            '.' | '['
                | ']'
                | '('
                | ')'
                | '{'
                | '}'
                | ','
                | '$'
                | '@'
                | '='
                | '!'
                | '<'
                | '>'
                | '\''
                | '"'
                | '*'
                | '\\'
        )
}

fn is_operator_char(c: char) -> bool {
    matches!(c, '=' | '!' | '<' | '>')
}

impl<'s> Parser<'s> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.pos += c.len_utf8();
        }
        found
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn err_at(&self, byte: usize, kind: JsonPathErrorKind) -> JsonPathError {
        JsonPathError {
            path: self.src.to_owned(),
            position: self.src[..byte].chars().count() + 1,
            kind,
        }
    }

    /// Error for whatever is at the current position when `expected` was wanted.
    fn unexpected(&self, expected: &'static str) -> JsonPathError {
        let kind = match self.peek() {
            Some(found) => JsonPathErrorKind::UnexpectedChar { found, expected },
            None => JsonPathErrorKind::UnexpectedEnd { expected },
        };
        self.err_at(self.pos, kind)
    }

    /// Steps until something that cannot start one; `depth` counts enclosing filters.
    fn segments(&mut self, depth: usize) -> Result<Vec<Segment>> {
        let mut out = Vec::new();
        loop {
            let start = self.pos;
            let segment = match self.peek() {
                Some('.') => {
                    self.bump();
                    if self.eat('.') {
                        Segment::Descendant(self.descendant_selector(depth)?)
                    } else {
                        Segment::Child(self.dot_selector()?)
                    }
                }
                Some('[') => Segment::Child(self.bracket(depth)?),
                _ => return Ok(out),
            };
            if out.len() == MAX_STEPS {
                return Err(self.err_at(start, JsonPathErrorKind::TooManySteps));
            }
            out.push(segment);
        }
    }

    fn dot_selector(&mut self) -> Result<Selector> {
        match self.peek() {
            Some('*') => {
                self.bump();
                Ok(Selector::Wildcard)
            }
            Some(c) if c == '\\' || is_plain(c) => Ok(Selector::Name(self.name()?)),
            _ => Err(self.unexpected("a member name or '*' after '.'")),
        }
    }

    fn descendant_selector(&mut self, depth: usize) -> Result<Selector> {
        match self.peek() {
            Some('*') => {
                self.bump();
                Ok(Selector::Wildcard)
            }
            Some('[') => self.bracket(depth),
            Some(c) if c == '\\' || is_plain(c) => Ok(Selector::Name(self.name()?)),
            _ => Err(self.unexpected("a member name, '*' or '[' after '..'")),
        }
    }

    /// A dot-form member name: plain characters and `\`-escaped ones.
    fn name(&mut self) -> Result<String> {
        let mut name = String::new();
        loop {
            match self.peek() {
                Some('\\') => {
                    let at = self.pos;
                    self.bump();
                    match self.bump() {
                        Some(c) => name.push(c),
                        None => return Err(self.err_at(at, JsonPathErrorKind::DanglingEscape)),
                    }
                }
                Some(c) if is_plain(c) => {
                    self.bump();
                    name.push(c);
                }
                _ => return Ok(name),
            }
        }
    }

    fn bracket(&mut self, depth: usize) -> Result<Selector> {
        let open = self.pos;
        self.bump();
        self.skip_ws();
        let selector = match self.peek() {
            None => return Err(self.err_at(open, JsonPathErrorKind::UnclosedBracket)),
            Some('?') => return self.filter(open, depth),
            Some(']') => return Err(self.err_at(open, JsonPathErrorKind::EmptyBrackets)),
            Some(quote @ ('\'' | '"')) => Selector::Name(self.quoted(quote)?),
            Some('*') => {
                self.bump();
                Selector::Wildcard
            }
            Some(c) if c == '-' || c == ':' || c.is_ascii_digit() => self.index_or_slice()?,
            Some(_) => {
                return Err(
                    self.unexpected("an index, a slice, '*', a quoted name or a filter after '['")
                );
            }
        };
        self.skip_ws();
        match self.peek() {
            Some(']') => {
                self.bump();
                Ok(selector)
            }
            Some(',') => Err(self.err_at(self.pos, JsonPathErrorKind::UnsupportedUnion)),
            None => Err(self.err_at(open, JsonPathErrorKind::UnclosedBracket)),
            Some(_) => Err(self.unexpected("']'")),
        }
    }

    fn index_or_slice(&mut self) -> Result<Selector> {
        let start = self.integer()?;
        self.skip_ws();
        if !self.eat(':') {
            return match start {
                Some(index) => Ok(Selector::Index(index)),
                None => Err(self.unexpected("an index or ':'")),
            };
        }
        self.skip_ws();
        let end = self.integer()?;
        self.skip_ws();
        let mut step = 1;
        if self.eat(':') {
            self.skip_ws();
            let at = self.pos;
            if let Some(s) = self.integer()? {
                if s < 1 {
                    return Err(self.err_at(at, JsonPathErrorKind::InvalidStep(s)));
                }
                step = s;
            }
        }
        Ok(Selector::Slice { start, end, step })
    }

    /// An optional signed 64-bit integer.
    fn integer(&mut self) -> Result<Option<i64>> {
        let at = self.pos;
        if !matches!(self.peek(), Some('-' | '0'..='9')) {
            return Ok(None);
        }
        self.eat('-');
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        let text = &self.src[at..self.pos];
        text.parse()
            .map(Some)
            .map_err(|_| self.err_at(at, JsonPathErrorKind::InvalidIndex(text.to_owned())))
    }

    /// A `'…'` or `"…"` string; `\` escapes the next character.
    fn quoted(&mut self, quote: char) -> Result<String> {
        let open = self.pos;
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err(self.err_at(open, JsonPathErrorKind::UnclosedString)),
                Some('\\') => match self.bump() {
                    Some(c) => out.push(c),
                    None => return Err(self.err_at(open, JsonPathErrorKind::UnclosedString)),
                },
                Some(c) if c == quote => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    /// `[?( … )]`; `open` is the byte offset of the `[`.
    fn filter(&mut self, open: usize, depth: usize) -> Result<Selector> {
        self.bump(); // '?'
        if !self.eat('(') {
            return Err(self.unexpected("'(' after '[?'"));
        }
        if depth >= MAX_FILTER_DEPTH {
            return Err(self.err_at(open, JsonPathErrorKind::FilterTooDeep));
        }
        self.skip_ws();
        if !self.eat('@') {
            return Err(match self.peek() {
                None => self.err_at(open, JsonPathErrorKind::UnclosedFilter),
                Some(_) => self.err_at(self.pos, JsonPathErrorKind::FilterWithoutCurrent),
            });
        }
        let path = self.segments(depth + 1)?;
        self.skip_ws();
        let test = match self.peek() {
            Some(')') => None,
            Some(c) if is_operator_char(c) => {
                let at = self.pos;
                while self.peek().is_some_and(is_operator_char) {
                    self.bump();
                }
                let op = match &self.src[at..self.pos] {
                    "==" => CmpOp::Eq,
                    "!=" => CmpOp::Ne,
                    "<" => CmpOp::Lt,
                    "<=" => CmpOp::Le,
                    ">" => CmpOp::Gt,
                    ">=" => CmpOp::Ge,
                    other => {
                        let kind = JsonPathErrorKind::UnknownOperator(other.to_owned());
                        return Err(self.err_at(at, kind));
                    }
                };
                self.skip_ws();
                let literal = self.literal()?;
                self.skip_ws();
                Some((op, literal))
            }
            None | Some(']') => return Err(self.err_at(open, JsonPathErrorKind::UnclosedFilter)),
            Some(_) => return Err(self.unexpected("a comparison operator or ')'")),
        };
        match self.peek() {
            Some(')') => {
                self.bump();
            }
            None | Some(']') => return Err(self.err_at(open, JsonPathErrorKind::UnclosedFilter)),
            Some(_) => return Err(self.unexpected("')'")),
        }
        if !self.eat(']') {
            return Err(self.err_at(open, JsonPathErrorKind::UnclosedFilter));
        }
        Ok(Selector::Filter(Box::new(Filter { path, test })))
    }

    fn literal(&mut self) -> Result<Literal> {
        const EXPECTED: &str = "a quoted string, a number, true or false";
        let at = self.pos;
        match self.peek() {
            Some(quote @ ('\'' | '"')) => Ok(Literal::String(self.quoted(quote)?)),
            Some(c) if c == '-' || c.is_ascii_digit() => {
                // JSON number grammar (leading zeros tolerated).
                self.eat('-');
                let mut well_formed = self.digits() > 0;
                let mut integral = true;
                if self.eat('.') {
                    integral = false;
                    well_formed &= self.digits() > 0;
                }
                if self.eat('e') || self.eat('E') {
                    integral = false;
                    let _ = self.eat('+') || self.eat('-');
                    well_formed &= self.digits() > 0;
                }
                let text = &self.src[at..self.pos];
                well_formed
                    .then(|| number(text, integral))
                    .flatten()
                    .map(Literal::Number)
                    .ok_or_else(|| {
                        self.err_at(at, JsonPathErrorKind::InvalidNumber(text.to_owned()))
                    })
            }
            Some(c) if c.is_alphabetic() => {
                while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    self.bump();
                }
                match &self.src[at..self.pos] {
                    "true" => Ok(Literal::Bool(true)),
                    "false" => Ok(Literal::Bool(false)),
                    word => {
                        Err(self.err_at(at, JsonPathErrorKind::InvalidLiteral(word.to_owned())))
                    }
                }
            }
            _ => Err(self.unexpected(EXPECTED)),
        }
    }

    /// Skips ASCII digits, returning how many.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        self.pos - start
    }
}

/// A well-formed JSON number: exact for integers that fit 64 bits, otherwise the nearest finite
/// `f64`. `f64::from_str` rounds correctly, unlike serde_json without `float_roundtrip`, so the
/// canonical form parses back to the same number.
fn number(text: &str, integral: bool) -> Option<Number> {
    if integral {
        if let Ok(i) = text.parse::<i64>() {
            return Some(i.into());
        }
        if let Ok(u) = text.parse::<u64>() {
            return Some(u.into());
        }
    }
    Number::from_f64(text.parse::<f64>().ok()?)
}

// ---------------------------------------------------------------------------------------------
// Canonical form

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("$");
        }
        write_segments(f, &self.segments)
    }
}

fn write_segments(f: &mut fmt::Formatter<'_>, segments: &[Segment]) -> fmt::Result {
    for segment in segments {
        match segment {
            Segment::Child(Selector::Name(name)) if is_plain_name(name) => {
                f.write_char('.')?;
                f.write_str(name)?;
            }
            Segment::Child(selector) => write_bracket(f, selector)?,
            Segment::Descendant(selector) => {
                f.write_str("..")?;
                match selector {
                    Selector::Name(name) if is_plain_name(name) => f.write_str(name)?,
                    Selector::Wildcard => f.write_char('*')?,
                    other => write_bracket(f, other)?,
                }
            }
        }
    }
    Ok(())
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(is_plain)
}

fn write_bracket(f: &mut fmt::Formatter<'_>, selector: &Selector) -> fmt::Result {
    match selector {
        Selector::Name(name) => {
            f.write_char('[')?;
            write_quoted(f, name, '\'')?;
            f.write_char(']')
        }
        Selector::Wildcard => f.write_str("[*]"),
        Selector::Index(i) => write!(f, "[{i}]"),
        Selector::Slice { start, end, step } => {
            f.write_char('[')?;
            if let Some(start) = start {
                write!(f, "{start}")?;
            }
            f.write_char(':')?;
            if let Some(end) = end {
                write!(f, "{end}")?;
            }
            if *step != 1 {
                write!(f, ":{step}")?;
            }
            f.write_char(']')
        }
        Selector::Filter(filter) => {
            f.write_str("[?(@")?;
            write_segments(f, &filter.path)?;
            if let Some((op, literal)) = &filter.test {
                f.write_str(match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                })?;
                match literal {
                    Literal::String(s) => write_quoted(f, s, '"')?,
                    Literal::Number(n) => write!(f, "{n}")?,
                    Literal::Bool(b) => write!(f, "{b}")?,
                }
            }
            f.write_str(")]")
        }
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, s: &str, quote: char) -> fmt::Result {
    f.write_char(quote)?;
    for c in s.chars() {
        if c == quote || c == '\\' {
            f.write_char('\\')?;
        }
        f.write_char(c)?;
    }
    f.write_char(quote)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn eval(path: &str, doc: &Value) -> Vec<Value> {
        parse(path)
            .unwrap_or_else(|e| panic!("{e}"))
            .eval(doc)
            .into_iter()
            .cloned()
            .collect()
    }

    fn err(path: &str) -> JsonPathError {
        match parse(path) {
            Ok(p) => panic!("{path:?} parsed as {p:?}"),
            Err(e) => e,
        }
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "hello",
                "labels": {"app.kubernetes.io/name": "hello", "tier-1": "web"},
            },
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "envoy:1.30", "ports": [{"containerPort": 9901}]},
            ]}}},
            "status": {
                "observedGeneration": 4,
                "replicas": 3,
                "readyReplicas": 2,
                "conditions": [
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                    {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
                ],
            },
        })
    }

    // --- selection ------------------------------------------------------------------------

    #[test]
    fn dotted_fields_select_nested_value() {
        assert_eq!(eval(".status.readyReplicas", &deployment()), [json!(2)]);
        assert_eq!(eval(".metadata.name", &deployment()), [json!("hello")]);
    }

    #[test]
    fn braces_dollar_and_whitespace_are_optional() {
        for path in [
            ".status.replicas",
            "{.status.replicas}",
            "$.status.replicas",
            "{$.status.replicas}",
            "  { .status.replicas }  ",
        ] {
            assert_eq!(eval(path, &deployment()), [json!(3)], "{path}");
        }
    }

    #[test]
    fn dollar_alone_selects_root() {
        let doc = json!({"a": 1});
        assert_eq!(eval("$", &doc), [json!({"a": 1})]);
        assert_eq!(eval("{$}", &doc), [doc]);
    }

    #[test]
    fn bracket_name_allows_dots_dashes_and_slashes() {
        let doc = deployment();
        assert_eq!(
            eval(".metadata.labels['app.kubernetes.io/name']", &doc),
            [json!("hello")]
        );
        assert_eq!(eval(r#".metadata.labels["tier-1"]"#, &doc), [json!("web")]);
        assert_eq!(eval("['status']['readyReplicas']", &doc), [json!(2)]);
    }

    #[test]
    fn dot_name_allows_dashes_slashes_and_escaped_dots() {
        let doc = deployment();
        assert_eq!(eval(".metadata.labels.tier-1", &doc), [json!("web")]);
        assert_eq!(
            eval(r".metadata.labels.app\.kubernetes\.io/name", &doc),
            [json!("hello")]
        );
    }

    #[test]
    fn quoted_name_unescapes_backslash_sequences() {
        let doc = json!({"it's": 1, "a\"b": 2, "back\\slash": 3});
        assert_eq!(eval(r"['it\'s']", &doc), [json!(1)]);
        assert_eq!(eval(r#"["a\"b"]"#, &doc), [json!(2)]);
        assert_eq!(eval(r"['back\\slash']", &doc), [json!(3)]);
    }

    #[test]
    fn index_selects_array_element() {
        assert_eq!(
            eval(".spec.template.spec.containers[0].image", &deployment()),
            [json!("nginx:1.27")]
        );
    }

    #[test]
    fn negative_index_counts_from_end() {
        let doc = json!({"a": [1, 2, 3]});
        assert_eq!(eval(".a[-1]", &doc), [json!(3)]);
        assert_eq!(eval(".a[-3]", &doc), [json!(1)]);
        assert!(eval(".a[-4]", &doc).is_empty());
    }

    #[test]
    fn index_out_of_range_yields_no_match() {
        let doc = json!({"a": [1, 2, 3]});
        assert!(eval(".a[3]", &doc).is_empty());
        assert!(eval(".a[9223372036854775807]", &doc).is_empty());
        assert!(eval(".a[-9223372036854775808]", &doc).is_empty());
    }

    #[test]
    fn wildcard_selects_array_elements_and_object_values() {
        let doc = deployment();
        assert_eq!(
            eval(".spec.template.spec.containers[*].name", &doc),
            [json!("app"), json!("sidecar")]
        );
        assert_eq!(
            eval(".spec.template.spec.containers.*.name", &doc),
            [json!("app"), json!("sidecar")]
        );
        let obj = json!({"m": {"x": 1, "y": 2}});
        assert_eq!(eval(".m.*", &obj), [json!(1), json!(2)]);
        assert_eq!(eval(".m[*]", &obj), [json!(1), json!(2)]);
        assert!(eval(".m.x[*]", &obj).is_empty());
    }

    #[test]
    fn slice_selects_half_open_range() {
        let doc = json!({"a": [0, 1, 2, 3, 4]});
        assert_eq!(eval(".a[1:3]", &doc), [json!(1), json!(2)]);
        assert_eq!(eval(".a[:2]", &doc), [json!(0), json!(1)]);
        assert_eq!(eval(".a[3:]", &doc), [json!(3), json!(4)]);
        assert_eq!(eval(".a[:]", &doc).len(), 5);
    }

    #[test]
    fn slice_bounds_are_clamped_and_may_be_negative() {
        let doc = json!({"a": [0, 1, 2, 3, 4]});
        assert_eq!(eval(".a[-2:]", &doc), [json!(3), json!(4)]);
        assert_eq!(eval(".a[:-3]", &doc), [json!(0), json!(1)]);
        assert_eq!(eval(".a[2:100]", &doc), [json!(2), json!(3), json!(4)]);
        assert!(eval(".a[4:2]", &doc).is_empty());
        assert!(eval(".a[-100:-50]", &doc).is_empty());
    }

    #[test]
    fn slice_step_skips_elements() {
        let doc = json!({"a": [0, 1, 2, 3, 4]});
        assert_eq!(eval(".a[::2]", &doc), [json!(0), json!(2), json!(4)]);
        assert_eq!(eval(".a[1:5:3]", &doc), [json!(1), json!(4)]);
    }

    #[test]
    fn recursive_descent_finds_members_in_document_order() {
        let doc = deployment();
        assert_eq!(
            eval("..image", &doc),
            [json!("nginx:1.27"), json!("envoy:1.30")]
        );
        assert_eq!(eval("..containerPort", &doc), [json!(80), json!(9901)]);
        let nested = json!({"a": {"a": {"a": 1}}});
        assert_eq!(
            eval("..a", &nested),
            [json!({"a": {"a": 1}}), json!({"a": 1}), json!(1)]
        );
    }

    #[test]
    fn recursive_descent_accepts_wildcard_index_and_filter() {
        let doc = json!({"x": [1, [2, 3]], "y": {"z": [4]}});
        assert_eq!(eval("..[0]", &doc), [json!(1), json!(2), json!(4)]);
        assert_eq!(eval(".y..*", &doc), [json!([4]), json!(4)]);
        let pods = json!({"items": [{"s": {"c": [{"t": "Ready", "v": "True"}]}}]});
        assert_eq!(eval(r#"..c[?(@.t=="Ready")].v"#, &pods), [json!("True")]);
        assert_eq!(eval(r#"..[?(@.t=="Ready")].v"#, &pods), [json!("True")]);
    }

    #[test]
    fn filter_selects_condition_status() {
        let doc = deployment();
        assert_eq!(
            eval(r#".status.conditions[?(@.type=="Available")].status"#, &doc),
            [json!("False")]
        );
        assert_eq!(
            eval(
                ".status.conditions[?(@.type == 'Progressing')].reason",
                &doc
            ),
            [json!("NewReplicaSetAvailable")]
        );
    }

    #[test]
    fn filter_not_equal_excludes_match() {
        assert_eq!(
            eval(
                r#".status.conditions[?(@.type!="Available")].type"#,
                &deployment()
            ),
            [json!("Progressing")]
        );
    }

    #[test]
    fn filter_compares_numbers_numerically() {
        let doc = json!({"p": [{"n": 1}, {"n": 2.5}, {"n": 10}, {"n": -3}]});
        let names = |path: &str| eval(path, &doc);
        assert_eq!(names(".p[?(@.n > 2)].n"), [json!(2.5), json!(10)]);
        assert_eq!(names(".p[?(@.n >= 2.5)].n"), [json!(2.5), json!(10)]);
        assert_eq!(names(".p[?(@.n < 1)].n"), [json!(-3)]);
        assert_eq!(names(".p[?(@.n <= 1)].n"), [json!(1), json!(-3)]);
        assert_eq!(names(".p[?(@.n == 10.0)].n"), [json!(10)]);
        assert_eq!(names(".p[?(@.n == 1e1)].n"), [json!(10)]);
        assert_eq!(names(".p[?(@.n != 1)].n").len(), 3);
    }

    #[test]
    fn filter_compares_strings_bytewise() {
        let doc = json!({"v": [{"s": "apple"}, {"s": "banana"}, {"s": "Cherry"}]});
        assert_eq!(
            eval(r#".v[?(@.s < "b")].s"#, &doc),
            [json!("apple"), json!("Cherry")]
        );
        assert_eq!(eval(r#".v[?(@.s >= "banana")].s"#, &doc), [json!("banana")]);
    }

    #[test]
    fn filter_compares_booleans_for_equality_only() {
        let doc = json!({"c": [{"ready": true, "n": "a"}, {"ready": false, "n": "b"}]});
        assert_eq!(eval(".c[?(@.ready==true)].n", &doc), [json!("a")]);
        assert_eq!(eval(".c[?(@.ready != true)].n", &doc), [json!("b")]);
        assert!(eval(".c[?(@.ready < true)].n", &doc).is_empty());
    }

    #[test]
    fn filter_existence_selects_elements_with_the_path() {
        let doc = json!({"c": [{"a": {"b": null}}, {"a": {}}, {"x": 1}]});
        assert_eq!(eval(".c[?(@.a.b)]", &doc), [json!({"a": {"b": null}})]);
        assert_eq!(eval(".c[?(@.a)]", &doc).len(), 2);
    }

    #[test]
    fn filter_at_alone_tests_scalar_elements() {
        let doc = json!({"finalizers": ["a/b", "c", "a/b"]});
        assert_eq!(
            eval(r#".finalizers[?(@=="a/b")]"#, &doc),
            [json!("a/b"), json!("a/b")]
        );
    }

    #[test]
    fn filter_with_bracket_name_and_nested_filter() {
        let doc = json!({"pods": [
            {"meta": {"x-y": "1"}, "cs": [{"ok": true}]},
            {"meta": {"x-y": "2"}, "cs": [{"ok": false}]},
        ]});
        assert_eq!(
            eval(r#".pods[?(@.meta['x-y']=="2")].cs[0].ok"#, &doc),
            [json!(false)]
        );
        assert_eq!(
            eval(".pods[?(@.cs[?(@.ok==true)])].meta['x-y']", &doc),
            [json!("1")]
        );
    }

    #[test]
    fn filter_type_mismatch_selects_nothing() {
        let doc = json!({"c": [{"n": 1}, {"n": "1"}, {"n": true}, {"n": null}]});
        assert_eq!(eval(".c[?(@.n==1)].n", &doc), [json!(1)]);
        assert_eq!(eval(r#".c[?(@.n=="1")].n"#, &doc), [json!("1")]);
        assert_eq!(eval(r#".c[?(@.n!="x")].n"#, &doc), [json!("1")]);
    }

    #[test]
    fn filter_with_several_matches_on_left_selects_nothing() {
        let doc = json!({"c": [{"t": ["a", "b"]}]});
        assert!(eval(r#".c[?(@.t[*]=="a")]"#, &doc).is_empty());
        assert_eq!(eval(r#".c[?(@.t[0]=="a")]"#, &doc).len(), 1);
    }

    #[test]
    fn filter_on_object_or_scalar_selects_nothing() {
        let doc = json!({"o": {"a": {"t": "x"}}, "s": "x"});
        assert!(eval(r#".o[?(@.t=="x")]"#, &doc).is_empty());
        assert!(eval(r#".s[?(@=="x")]"#, &doc).is_empty());
    }

    #[test]
    fn missing_field_yields_no_match() {
        let doc = deployment();
        assert!(eval(".status.availableReplicas", &doc).is_empty());
        assert!(eval(".nope.deeper.still", &doc).is_empty());
        assert!(eval(r#".status.conditions[?(@.type=="Missing")].status"#, &doc).is_empty());
    }

    #[test]
    fn selectors_on_wrong_type_yield_no_match() {
        let doc = json!({"s": "text", "n": 1, "a": [1], "o": {"0": 1}});
        assert!(eval(".s.x", &doc).is_empty());
        assert!(eval(".s[0]", &doc).is_empty());
        assert!(eval(".n[0:1]", &doc).is_empty());
        assert!(eval(".a.x", &doc).is_empty());
        assert!(eval(".o[0]", &doc).is_empty());
        assert_eq!(eval(".o['0']", &doc), [json!(1)]);
    }

    #[test]
    fn first_stops_at_first_match() {
        let doc = json!({"a": [{"b": 1}, {"b": 2}]});
        let path = parse(".a[*].b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path.first(&doc), Some(&json!(1)));
        let missing = parse(".a[*].c").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(missing.first(&doc), None);
    }

    #[test]
    fn eval_into_appends_to_buffer() {
        let doc = json!({"a": 1, "b": 2});
        let mut buf = Vec::new();
        for path in [".a", ".b", ".c"] {
            parse(path)
                .unwrap_or_else(|e| panic!("{e}"))
                .eval_into(&doc, &mut buf);
        }
        assert_eq!(buf, [&json!(1), &json!(2)]);
    }

    #[test]
    fn deep_document_does_not_overflow_recursive_descent() {
        let mut doc = json!(1);
        for _ in 0..10_000 {
            doc = Value::Array(vec![doc]);
        }
        let found = parse("..*")
            .unwrap_or_else(|e| panic!("{e}"))
            .eval(&doc)
            .len();
        assert_eq!(found, 10_000);
        // serde_json drops values recursively; unwrap iteratively to keep the test stack small.
        while let Value::Array(mut items) = doc {
            doc = items.pop().unwrap_or(Value::Null);
        }
        assert_eq!(doc, json!(1));
    }

    // --- canonical form ----------------------------------------------------------------------

    #[test]
    fn display_prints_canonical_form() {
        let cases = [
            ("{$.status.readyReplicas}", ".status.readyReplicas"),
            ("$", "$"),
            ("['a']", ".a"),
            (r#"["a.b"]"#, "['a.b']"),
            (r".a\.b", "['a.b']"),
            (".a.*", ".a[*]"),
            ("..[*]", "..*"),
            ("..['x y']", "..['x y']"),
            (".a[ 1 : 3 ]", ".a[1:3]"),
            (".a[::1]", ".a[:]"),
            (".a[-1:]", ".a[-1:]"),
            (".a[::2]", ".a[::2]"),
            (
                ".status.conditions[?( @.type == 'Complete' )].status",
                r#".status.conditions[?(@.type=="Complete")].status"#,
            ),
            (".c[?(@.n>=1.5)]", ".c[?(@.n>=1.5)]"),
            (".c[?(@.ok != false)]", ".c[?(@.ok!=false)]"),
            (".c[?(@['a b'])]", ".c[?(@['a b'])]"),
            (r#".c[?(@=="say \"hi\"")]"#, r#".c[?(@=="say \"hi\"")]"#),
            (r"['it\'s']", r"['it\'s']"),
            ("['']", "['']"),
            ("['*']", "['*']"),
        ];
        for (input, canonical) in cases {
            let path = parse(input).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(path.to_string(), canonical, "{input}");
            assert_eq!(parse(canonical).as_ref(), Ok(&path), "{canonical}");
        }
    }

    #[test]
    fn from_str_matches_parse() {
        let path: JsonPath = ".a[0]".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Ok(path), parse(".a[0]"));
    }

    // --- errors ------------------------------------------------------------------------------

    #[test]
    fn error_unclosed_filter_reports_where_it_opens() {
        let e = err(r#".status.conditions[?(@.type=="Available").status"#);
        assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedFilter);
        assert_eq!(e.position(), 19);
        assert_eq!(
            e.to_string(),
            r#"path ".status.conditions[?(@.type=="Available").status": unclosed filter at position 19"#
        );
        assert_eq!(
            err(r#".c[?(@.type=="A""#).kind(),
            &JsonPathErrorKind::UnclosedFilter
        );
        assert_eq!(
            err(r#".c[?(@.type=="A"]"#).kind(),
            &JsonPathErrorKind::UnclosedFilter
        );
        assert_eq!(err(".c[?(@.a").kind(), &JsonPathErrorKind::UnclosedFilter);
        assert_eq!(err(".c[?(").kind(), &JsonPathErrorKind::UnclosedFilter);
    }

    #[test]
    fn error_empty_path() {
        for path in ["", "   ", "{}", "{ }"] {
            assert_eq!(err(path).kind(), &JsonPathErrorKind::Empty, "{path:?}");
        }
        assert_eq!(err("").to_string(), r#"path "": empty path at position 1"#);
    }

    #[test]
    fn error_unclosed_brace_and_stray_brace() {
        let e = err("{.a.b");
        assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedBrace);
        assert_eq!(e.position(), 1);
        assert_eq!(err("{").kind(), &JsonPathErrorKind::UnclosedBrace);
        assert!(matches!(
            err(".a}").kind(),
            JsonPathErrorKind::UnexpectedChar { found: '}', .. }
        ));
        assert!(matches!(
            err("{.a}}").kind(),
            JsonPathErrorKind::UnexpectedChar { found: '}', .. }
        ));
    }

    #[test]
    fn error_unclosed_bracket_points_at_bracket() {
        let e = err(".a[0");
        assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedBracket);
        assert_eq!(e.position(), 3);
        assert_eq!(err(".a[").kind(), &JsonPathErrorKind::UnclosedBracket);
        assert_eq!(err(".a['b'").kind(), &JsonPathErrorKind::UnclosedBracket);
    }

    #[test]
    fn error_unclosed_string_points_at_quote() {
        let e = err(".a['b]");
        assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedString);
        assert_eq!(e.position(), 4);
        assert_eq!(
            err(r#".c[?(@.t=="x)]"#).kind(),
            &JsonPathErrorKind::UnclosedString
        );
        assert_eq!(err(r"['a\").kind(), &JsonPathErrorKind::UnclosedString);
    }

    #[test]
    fn error_missing_leading_dot_or_name() {
        assert!(matches!(
            err("status.replicas").kind(),
            JsonPathErrorKind::UnexpectedChar { found: 's', .. }
        ));
        assert!(matches!(
            err(".a.").kind(),
            JsonPathErrorKind::UnexpectedEnd { .. }
        ));
        assert!(matches!(
            err(".a..").kind(),
            JsonPathErrorKind::UnexpectedEnd { .. }
        ));
        assert!(matches!(
            err("...a").kind(),
            JsonPathErrorKind::UnexpectedChar { found: '.', .. }
        ));
        assert!(matches!(
            err(".a.[0]").kind(),
            JsonPathErrorKind::UnexpectedChar { found: '[', .. }
        ));
        assert_eq!(
            err(".a b").to_string(),
            r#"path ".a b": unexpected 'b', expected '.', '[' or the end of the path at position 4"#
        );
    }

    #[test]
    fn error_dangling_escape() {
        let e = err(r".a\");
        assert_eq!(e.kind(), &JsonPathErrorKind::DanglingEscape);
        assert_eq!(e.position(), 3);
    }

    #[test]
    fn error_bad_index_or_slice() {
        assert_eq!(err(".a[]").kind(), &JsonPathErrorKind::EmptyBrackets);
        assert_eq!(
            err(".a[-]").kind(),
            &JsonPathErrorKind::InvalidIndex("-".into())
        );
        assert_eq!(
            err(".a[99999999999999999999]").kind(),
            &JsonPathErrorKind::InvalidIndex("99999999999999999999".into())
        );
        assert!(matches!(
            err(".a[1a]").kind(),
            JsonPathErrorKind::UnexpectedChar { found: 'a', .. }
        ));
        assert!(matches!(
            err(".a[x]").kind(),
            JsonPathErrorKind::UnexpectedChar { found: 'x', .. }
        ));
        assert!(matches!(
            err(".a[1:2:3:4]").kind(),
            JsonPathErrorKind::UnexpectedChar { found: ':', .. }
        ));
    }

    #[test]
    fn error_slice_step_must_be_positive() {
        let e = err(".a[0:5:0]");
        assert_eq!(e.kind(), &JsonPathErrorKind::InvalidStep(0));
        assert_eq!(e.position(), 8);
        assert_eq!(err(".a[::-1]").kind(), &JsonPathErrorKind::InvalidStep(-1));
    }

    #[test]
    fn error_union_is_unsupported() {
        let e = err(".a[0,1]");
        assert_eq!(e.kind(), &JsonPathErrorKind::UnsupportedUnion);
        assert_eq!(e.position(), 5);
        assert_eq!(
            err(".a['x','y']").kind(),
            &JsonPathErrorKind::UnsupportedUnion
        );
    }

    #[test]
    fn error_unknown_operator() {
        let e = err(r#".c[?(@.t="x")]"#);
        assert_eq!(e.kind(), &JsonPathErrorKind::UnknownOperator("=".into()));
        assert_eq!(e.position(), 9);
        assert_eq!(
            err(r#".c[?(@.t=<"x")]"#).kind(),
            &JsonPathErrorKind::UnknownOperator("=<".into())
        );
    }

    #[test]
    fn error_invalid_filter_value() {
        assert_eq!(
            err(".c[?(@.t==Available)]").kind(),
            &JsonPathErrorKind::InvalidLiteral("Available".into())
        );
        assert_eq!(
            err(".c[?(@.n==1.)]").kind(),
            &JsonPathErrorKind::InvalidNumber("1.".into())
        );
        assert_eq!(
            err(".c[?(@.n==-)]").kind(),
            &JsonPathErrorKind::InvalidNumber("-".into())
        );
        assert_eq!(
            err(".c[?(@.n==1e)]").kind(),
            &JsonPathErrorKind::InvalidNumber("1e".into())
        );
        assert_eq!(
            err(".c[?(@.n==1e999)]").kind(),
            &JsonPathErrorKind::InvalidNumber("1e999".into())
        );
        assert!(matches!(
            err(".c[?(@.n==)]").kind(),
            JsonPathErrorKind::UnexpectedChar { found: ')', .. }
        ));
        assert!(matches!(
            err(".c[?(@.n==").kind(),
            JsonPathErrorKind::UnexpectedEnd { .. }
        ));
    }

    #[test]
    fn error_filter_must_start_with_at() {
        let e = err(r#".c[?(.t=="x")]"#);
        assert_eq!(e.kind(), &JsonPathErrorKind::FilterWithoutCurrent);
        assert_eq!(e.position(), 6);
        assert!(matches!(
            err(".c[?@.t]").kind(),
            JsonPathErrorKind::UnexpectedChar { found: '@', .. }
        ));
    }

    #[test]
    fn error_logical_operators_are_unsupported() {
        assert!(matches!(
            err(r#".c[?(@.a=="x" && @.b=="y")]"#).kind(),
            JsonPathErrorKind::UnexpectedChar { found: '&', .. }
        ));
    }

    #[test]
    fn error_too_many_steps() {
        let long = ".a".repeat(MAX_STEPS + 1);
        let e = err(&long);
        assert_eq!(e.kind(), &JsonPathErrorKind::TooManySteps);
        assert_eq!(e.position(), 2 * MAX_STEPS + 1);
        assert!(parse(&".a".repeat(MAX_STEPS)).is_ok());
    }

    #[test]
    fn error_filters_nested_too_deep() {
        let nested = |n: usize| format!("{}{}", ".x[?(@".repeat(n), ")]".repeat(n));
        assert!(parse(&nested(MAX_FILTER_DEPTH)).is_ok());
        assert_eq!(
            err(&nested(MAX_FILTER_DEPTH + 1)).kind(),
            &JsonPathErrorKind::FilterTooDeep
        );
    }

    #[test]
    fn error_position_counts_characters_not_bytes() {
        let e = err(".größe[");
        assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedBracket);
        assert_eq!(e.position(), 7);
    }

    // --- properties --------------------------------------------------------------------------

    fn arb_name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z_][a-zA-Z0-9_-]{0,8}",
            "[a-z./'\"\\\\ *@$=!()\\[\\]{}-]{0,6}",
            any::<String>().prop_map(|s| s.chars().take(6).collect()),
        ]
    }

    fn arb_literal() -> impl Strategy<Value = Literal> {
        prop_oneof![
            arb_name().prop_map(Literal::String),
            any::<i64>().prop_map(|n| Literal::Number(n.into())),
            any::<u64>().prop_map(|n| Literal::Number(n.into())),
            any::<f64>()
                .prop_filter_map("finite", Number::from_f64)
                .prop_map(Literal::Number),
            any::<bool>().prop_map(Literal::Bool),
        ]
    }

    fn arb_op() -> impl Strategy<Value = CmpOp> {
        prop_oneof![
            Just(CmpOp::Eq),
            Just(CmpOp::Ne),
            Just(CmpOp::Lt),
            Just(CmpOp::Le),
            Just(CmpOp::Gt),
            Just(CmpOp::Ge),
        ]
    }

    fn arb_selector(depth: u32) -> BoxedStrategy<Selector> {
        let leaf = prop_oneof![
            arb_name().prop_map(Selector::Name),
            Just(Selector::Wildcard),
            any::<i64>().prop_map(Selector::Index),
            (
                proptest::option::of(-10i64..10),
                proptest::option::of(-10i64..10),
                1i64..4
            )
                .prop_map(|(start, end, step)| Selector::Slice { start, end, step }),
        ];
        if depth == 0 {
            return leaf.boxed();
        }
        let filter = (
            proptest::collection::vec(arb_segment(depth - 1), 0..3),
            proptest::option::of((arb_op(), arb_literal())),
        )
            .prop_map(|(path, test)| Selector::Filter(Box::new(Filter { path, test })));
        prop_oneof![4 => leaf, 1 => filter].boxed()
    }

    fn arb_segment(depth: u32) -> BoxedStrategy<Segment> {
        prop_oneof![
            3 => arb_selector(depth).prop_map(Segment::Child),
            1 => arb_selector(depth).prop_map(Segment::Descendant),
        ]
        .boxed()
    }

    fn arb_path() -> impl Strategy<Value = JsonPath> {
        proptest::collection::vec(arb_segment(2), 0..6).prop_map(|segments| JsonPath { segments })
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter_map("finite", Number::from_f64)
                .prop_map(Value::Number),
            "[a-c]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c]{1,2}|type|x-y", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Path-ish strings: mostly JSONPath punctuation so the parser's error paths get exercised.
    fn arb_path_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[.\\[\\]?()@$*'\"=!<>:,{} \\\\0-9a-c-]{0,24}",
            "\\PC{0,24}",
            arb_path().prop_map(|p| p.to_string()),
        ]
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(path in arb_path()) {
            let text = path.to_string();
            prop_assert_eq!(parse(&text), Ok(path), "canonical form {}", text);
        }

        #[test]
        fn eval_never_panics_and_accepted_paths_round_trip(
            text in arb_path_text(),
            doc in arb_json(),
        ) {
            match parse(&text) {
                Ok(path) => {
                    let matches = path.eval(&doc);
                    prop_assert_eq!(path.first(&doc), matches.first().copied());
                    let canonical = path.to_string();
                    let reparsed = parse(&canonical);
                    prop_assert_eq!(reparsed.as_ref(), Ok(&path), "canonical form {}", canonical);
                }
                Err(e) => {
                    prop_assert_eq!(e.path(), text.as_str());
                    prop_assert!(e.position() >= 1 && e.position() <= text.chars().count() + 1);
                }
            }
        }

        #[test]
        fn generated_paths_evaluate_without_panicking(path in arb_path(), doc in arb_json()) {
            let matches = path.eval(&doc);
            prop_assert_eq!(path.first(&doc), matches.first().copied());
        }

        #[test]
        fn dotted_path_agrees_with_direct_indexing(
            doc in arb_json(),
            keys in proptest::collection::vec("[a-c]{1,2}|type|x-y|a\\.b|q'r", 1..5),
        ) {
            let text: String = keys
                .iter()
                .map(|k| {
                    if k.chars().all(is_plain) {
                        format!(".{k}")
                    } else {
                        format!("['{}']", k.replace('\\', "\\\\").replace('\'', "\\'"))
                    }
                })
                .collect();
            let path = parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let direct = keys.iter().try_fold(&doc, |v, k| v.get(k.as_str()));
            prop_assert_eq!(path.eval(&doc), direct.into_iter().collect::<Vec<_>>());
        }

        #[test]
        fn index_agrees_with_direct_indexing(items in proptest::collection::vec(any::<i64>(), 0..8), i in -10i64..10) {
            let doc = json!({ "a": items });
            let path = parse(&format!(".a[{i}]")).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let len = items.len() as i64;
            let expected = if (-len..len).contains(&i) {
                vec![json!(items[((i + len) % len) as usize])]
            } else {
                vec![]
            };
            prop_assert_eq!(path.eval(&doc).into_iter().cloned().collect::<Vec<_>>(), expected);
        }
    }
}

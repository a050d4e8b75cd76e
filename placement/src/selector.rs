//! Kubernetes label selectors: the data type, validation, a compiled matcher for the hot path
//! and the kubectl string form (`env=prod,tier!=db,gpu,!legacy,region in (eu,us)`).
//!
//! One type serves three purposes, exactly as in OCM: placement label selectors (matched
//! against a cluster's labels), claim selectors (matched against its claims, name → value) and
//! `LabelSelector` ManagedClusterSets.
//!
//! Semantics follow `k8s.io/apimachinery`: requirements are ANDed, `NotIn` and `DoesNotExist`
//! match when the key is absent, and an empty selector matches everything.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, FieldError};
use crate::pairs::Labels;

/// A selector operator. Unknown operators are kept (not rejected at deserialisation) so that
/// validation can name them and the field they sit in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Operator {
    /// The key is present and its value is one of `values`.
    In,
    /// The key is absent, or its value is none of `values`.
    NotIn,
    /// The key is present (any value).
    Exists,
    /// The key is absent.
    DoesNotExist,
    /// Anything else, as written; never matches and fails validation.
    Unknown(String),
}

impl Operator {
    /// The operator as written in YAML.
    pub fn as_str(&self) -> &str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Unknown(s) => s,
        }
    }
}

impl From<String> for Operator {
    fn from(s: String) -> Self {
        match s.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            _ => Operator::Unknown(s),
        }
    }
}

impl From<&str> for Operator {
    fn from(s: &str) -> Self {
        Operator::from(s.to_owned())
    }
}

impl From<Operator> for String {
    fn from(op: Operator) -> Self {
        op.as_str().to_owned()
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    /// The label (or claim) name the requirement looks at.
    pub key: String,
    /// How `values` are compared with the key's value.
    pub operator: Operator,
    /// Required for `In`/`NotIn`, forbidden for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl Requirement {
    /// A requirement from its parts.
    pub fn new<I, S>(key: impl Into<String>, operator: impl Into<Operator>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Requirement {
            key: key.into(),
            operator: operator.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}

/// A Kubernetes `LabelSelector`: `matchLabels` and `matchExpressions`, all ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Exact key = value matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// Why a selector cannot be evaluated. Validation turns these into [`FieldError`]s that name
/// the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `matchExpressions[i].operator` is not one of the four known operators.
    #[error("unknown operator {0:?} (want In, NotIn, Exists, DoesNotExist)")]
    UnknownOperator(String),
    /// `In`/`NotIn` with an empty `values` list.
    #[error("values must be non-empty when operator is {0}")]
    MissingValues(Operator),
    /// `Exists`/`DoesNotExist` with values.
    #[error("values must be empty when operator is {0}")]
    UnexpectedValues(Operator),
    /// An empty key in `matchLabels` or `matchExpressions`.
    #[error("key must not be empty")]
    EmptyKey,
}

impl LabelSelector {
    /// The empty selector, which matches everything.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// True when the selector has no requirement at all (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Adds a `matchLabels` entry (builder style).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.match_labels.insert(key.into(), value.into());
        self
    }

    /// Adds a `matchExpressions` entry (builder style).
    pub fn expression(mut self, requirement: Requirement) -> Self {
        self.match_expressions.push(requirement);
        self
    }

    /// Adds `key In (values)`.
    pub fn in_values<I, S>(self, key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.expression(Requirement::new(key, Operator::In, values))
    }

    /// Adds `key NotIn (values)`.
    pub fn not_in<I, S>(self, key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.expression(Requirement::new(key, Operator::NotIn, values))
    }

    /// Adds `key Exists`.
    pub fn exists(self, key: impl Into<String>) -> Self {
        self.expression(Requirement::new(
            key,
            Operator::Exists,
            Vec::<String>::new(),
        ))
    }

    /// Adds `key DoesNotExist`.
    pub fn does_not_exist(self, key: impl Into<String>) -> Self {
        self.expression(Requirement::new(
            key,
            Operator::DoesNotExist,
            Vec::<String>::new(),
        ))
    }

    /// Every problem in the selector, each with its field path below `path`
    /// (for example `spec.predicates[0].requiredClusterSelector.labelSelector`).
    pub fn validate(&self, path: &str, kind: ErrorKind) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for key in self.match_labels.keys() {
            if key.is_empty() {
                errors.push(FieldError::new(
                    format!("{path}.matchLabels"),
                    kind,
                    SelectorError::EmptyKey.to_string(),
                ));
            }
        }
        for (i, req) in self.match_expressions.iter().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            if req.key.is_empty() {
                errors.push(FieldError::new(
                    format!("{at}.key"),
                    kind,
                    SelectorError::EmptyKey.to_string(),
                ));
            }
            if let Err(e) = check_values(req) {
                let field = match e {
                    SelectorError::UnknownOperator(_) => "operator",
                    _ => "values",
                };
                errors.push(FieldError::new(
                    format!("{at}.{field}"),
                    kind,
                    e.to_string(),
                ));
            }
        }
        errors
    }

    /// Compiles the selector into a matcher. Fails on the first problem; use
    /// [`LabelSelector::validate`] to see all of them.
    pub fn compile(&self) -> Result<CompiledSelector, SelectorError> {
        let mut reqs = Vec::with_capacity(self.match_labels.len() + self.match_expressions.len());
        for (k, v) in &self.match_labels {
            if k.is_empty() {
                return Err(SelectorError::EmptyKey);
            }
            reqs.push(Compiled::Equals(k.clone(), v.clone()));
        }
        for req in &self.match_expressions {
            if req.key.is_empty() {
                return Err(SelectorError::EmptyKey);
            }
            check_values(req)?;
            let mut values = req.values.clone();
            values.sort_unstable();
            values.dedup();
            let key = req.key.clone();
            reqs.push(match req.operator {
                Operator::In => Compiled::In(key, values),
                Operator::NotIn => Compiled::NotIn(key, values),
                Operator::Exists => Compiled::Exists(key),
                Operator::DoesNotExist => Compiled::DoesNotExist(key),
                Operator::Unknown(ref op) => {
                    return Err(SelectorError::UnknownOperator(op.clone()));
                }
            });
        }
        Ok(CompiledSelector { reqs })
    }

    /// Evaluates the selector against `labels` without compiling it first. An invalid selector
    /// matches nothing. Prefer [`CompiledSelector`] in loops.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.compile().is_ok_and(|c| c.matches(labels))
    }
}

fn check_values(req: &Requirement) -> Result<(), SelectorError> {
    match &req.operator {
        Operator::In | Operator::NotIn if req.values.is_empty() => {
            Err(SelectorError::MissingValues(req.operator.clone()))
        }
        Operator::Exists | Operator::DoesNotExist if !req.values.is_empty() => {
            Err(SelectorError::UnexpectedValues(req.operator.clone()))
        }
        Operator::Unknown(op) => Err(SelectorError::UnknownOperator(op.clone())),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Compiled {
    Equals(String, String),
    /// Values sorted and deduplicated, for binary search.
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A validated selector ready for repeated matching: no allocation per match, `In`/`NotIn`
/// value lists sorted for binary search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompiledSelector {
    reqs: Vec<Compiled>,
}

impl CompiledSelector {
    /// True when the selector matches everything.
    pub fn is_everything(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether `labels` (or claims) satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let among = |vs: &[String], v: &str| vs.binary_search_by(|x| x.as_str().cmp(v)).is_ok();
        self.reqs.iter().all(|req| match req {
            Compiled::Equals(k, v) => labels.get(k) == Some(v.as_str()),
            Compiled::In(k, vs) => labels.get(k).is_some_and(|v| among(vs, v)),
            Compiled::NotIn(k, vs) => labels.get(k).is_none_or(|v| !among(vs, v)),
            Compiled::Exists(k) => labels.contains_key(k.as_str()),
            Compiled::DoesNotExist(k) => !labels.contains_key(k.as_str()),
        })
    }

    /// The keys this selector reads (used to decide whether a label change can matter).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.reqs.iter().map(|r| match r {
            Compiled::Equals(k, _)
            | Compiled::In(k, _)
            | Compiled::NotIn(k, _)
            | Compiled::Exists(k)
            | Compiled::DoesNotExist(k) => k.as_str(),
        })
    }
}

/// Why the string form of a selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseSelectorError {
    /// Two commas in a row, or a trailing comma.
    #[error("empty requirement at position {0} in selector {1:?}")]
    EmptyTerm(usize, String),
    /// A key with characters outside `[A-Za-z0-9._/-]`, or an empty key.
    #[error("invalid key {key:?} in requirement {term:?}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// The whole requirement it appears in.
        term: String,
    },
    /// A value with characters outside `[A-Za-z0-9._-]`.
    #[error("invalid value {value:?} in requirement {term:?}")]
    InvalidValue {
        /// The offending value.
        value: String,
        /// The whole requirement it appears in.
        term: String,
    },
    /// `in`/`notin` without a parenthesised, non-empty value list.
    #[error(
        "requirement {0:?}: want `key in (v1,v2)` or `key notin (v1,v2)` with at least one value"
    )]
    BadSet(String),
    /// Parentheses that do not pair up.
    #[error("unbalanced parentheses in selector {0:?}")]
    Unbalanced(String),
}

/// Parses the kubectl form: comma-separated requirements, each one of `key=value`,
/// `key==value`, `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`.
/// An empty (or all-blank) string is the empty selector, which matches everything.
///
/// `key=value` goes to `matchLabels`, unless the key is already there (then it becomes an `In`
/// expression so that nothing is lost); everything else becomes a `matchExpressions` entry in
/// the order written.
pub fn parse_selector(input: &str) -> Result<LabelSelector, ParseSelectorError> {
    let mut selector = LabelSelector::default();
    if input.trim().is_empty() {
        return Ok(selector);
    }
    let mut depth = 0i32;
    let mut start = 0;
    let mut terms = Vec::new();
    for (i, ch) in input.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(ParseSelectorError::Unbalanced(input.to_owned()));
                }
            }
            ',' if depth == 0 => {
                terms.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(ParseSelectorError::Unbalanced(input.to_owned()));
    }
    terms.push((start, &input[start..]));
    for (pos, raw) in terms {
        let term = raw.trim();
        if term.is_empty() {
            return Err(ParseSelectorError::EmptyTerm(pos, input.to_owned()));
        }
        parse_term(term, &mut selector)?;
    }
    Ok(selector)
}

fn parse_term(term: &str, selector: &mut LabelSelector) -> Result<(), ParseSelectorError> {
    let key_err = |key: &str| ParseSelectorError::InvalidKey {
        key: key.to_owned(),
        term: term.to_owned(),
    };
    let value_ok = |value: &str| -> Result<String, ParseSelectorError> {
        if value.chars().all(is_value_char) {
            Ok(value.to_owned())
        } else {
            Err(ParseSelectorError::InvalidValue {
                value: value.to_owned(),
                term: term.to_owned(),
            })
        }
    };
    if let Some(rest) = term.strip_prefix('!') {
        let key = rest.trim();
        if !is_key(key) {
            return Err(key_err(key));
        }
        selector.match_expressions.push(Requirement::new(
            key,
            Operator::DoesNotExist,
            Vec::<String>::new(),
        ));
        return Ok(());
    }
    if let Some(i) = term.find("!=") {
        let (key, value) = (term[..i].trim(), term[i + 2..].trim());
        if !is_key(key) {
            return Err(key_err(key));
        }
        let value = value_ok(value)?;
        selector
            .match_expressions
            .push(Requirement::new(key, Operator::NotIn, [value]));
        return Ok(());
    }
    if let Some(i) = term.find('=') {
        let key = term[..i].trim();
        let rest = &term[i + 1..];
        let value = rest.strip_prefix('=').unwrap_or(rest).trim();
        if !is_key(key) {
            return Err(key_err(key));
        }
        let value = value_ok(value)?;
        if selector.match_labels.contains_key(key) {
            selector
                .match_expressions
                .push(Requirement::new(key, Operator::In, [value]));
        } else {
            selector.match_labels.insert(key.to_owned(), value);
        }
        return Ok(());
    }
    // `key`, `key in (..)` or `key notin (..)`.
    let key_end = term
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(term.len());
    let key = &term[..key_end];
    let rest = term[key_end..].trim_start();
    if !is_key(key) {
        return Err(key_err(key));
    }
    if rest.is_empty() {
        selector.match_expressions.push(Requirement::new(
            key,
            Operator::Exists,
            Vec::<String>::new(),
        ));
        return Ok(());
    }
    let (operator, set) = if let Some(set) = rest.strip_prefix("notin") {
        (Operator::NotIn, set)
    } else if let Some(set) = rest.strip_prefix("in") {
        (Operator::In, set)
    } else {
        return Err(ParseSelectorError::BadSet(term.to_owned()));
    };
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| ParseSelectorError::BadSet(term.to_owned()))?;
    let mut values = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        if v.is_empty() {
            return Err(ParseSelectorError::BadSet(term.to_owned()));
        }
        values.push(value_ok(v)?);
    }
    selector
        .match_expressions
        .push(Requirement::new(key, operator, values));
    Ok(())
}

fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The kubectl form; [`parse_selector`] reads it back. Unknown operators print as
/// `key <Op> (values)`, which does not parse.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            if first {
                first = false;
                Ok(())
            } else {
                f.write_str(",")
            }
        };
        for (k, v) in &self.match_labels {
            sep(f)?;
            write!(f, "{k}={v}")?;
        }
        for r in &self.match_expressions {
            sep(f)?;
            match &r.operator {
                Operator::Exists => write!(f, "{}", r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
                Operator::In => write!(f, "{} in ({})", r.key, r.values.join(","))?,
                Operator::NotIn => write!(f, "{} notin ({})", r.key, r.values.join(","))?,
                Operator::Unknown(op) => write!(f, "{} {op} ({})", r.key, r.values.join(","))?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(LabelSelector::everything().matches(&labels(&[])));
        assert!(LabelSelector::everything().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_require_exact_value() {
        let s = LabelSelector::default().label("env", "prod");
        assert!(s.matches(&labels(&[("env", "prod")])));
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn in_requires_key_present_with_listed_value() {
        let s = LabelSelector::default().in_values("region", ["eu", "us"]);
        assert!(s.matches(&labels(&[("region", "us")])));
        assert!(!s.matches(&labels(&[("region", "ap")])));
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn not_in_matches_when_key_absent() {
        let s = LabelSelector::default().not_in("tier", ["db"]);
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("tier", "web")])));
        assert!(!s.matches(&labels(&[("tier", "db")])));
    }

    #[test]
    fn exists_and_does_not_exist_look_only_at_key() {
        let e = LabelSelector::default().exists("gpu");
        let d = LabelSelector::default().does_not_exist("gpu");
        assert!(e.matches(&labels(&[("gpu", "")])));
        assert!(!e.matches(&labels(&[])));
        assert!(d.matches(&labels(&[])));
        assert!(!d.matches(&labels(&[("gpu", "x")])));
    }

    #[test]
    fn requirements_are_anded() {
        let s = LabelSelector::default().label("env", "prod").exists("gpu");
        assert!(s.matches(&labels(&[("env", "prod"), ("gpu", "a100")])));
        assert!(!s.matches(&labels(&[("env", "prod")])));
    }

    #[test]
    fn unknown_operator_is_named_with_its_field_path() {
        let s = LabelSelector::default()
            .exists("a")
            .expression(Requirement::new("b", "Foo", ["x"]));
        let errs = s.validate(
            "spec.predicates[0].requiredClusterSelector.labelSelector",
            ErrorKind::Misconfigured,
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[1].operator: \
             unknown operator \"Foo\" (want In, NotIn, Exists, DoesNotExist)"
        );
        assert!(
            !s.matches(&labels(&[("a", ""), ("b", "x")])),
            "invalid selector matches nothing"
        );
    }

    #[test]
    fn in_without_values_and_exists_with_values_are_rejected() {
        let s = LabelSelector::default()
            .in_values("a", Vec::<String>::new())
            .expression(Requirement::new("b", Operator::Exists, ["x"]))
            .expression(Requirement::new("", Operator::Exists, Vec::<String>::new()));
        let errs = s.validate("sel", ErrorKind::Invalid);
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "sel.matchExpressions[0].values: values must be non-empty when operator is In",
                "sel.matchExpressions[1].values: values must be empty when operator is Exists",
                "sel.matchExpressions[2].key: key must not be empty",
            ]
        );
        assert_eq!(s.compile(), Err(SelectorError::MissingValues(Operator::In)));
    }

    #[test]
    fn parses_kubectl_form() {
        let s = parse_selector("env=prod,tier!=db,gpu,!legacy,region in (eu, us), zone notin (z1)")
            .unwrap();
        let want = LabelSelector::default()
            .label("env", "prod")
            .not_in("tier", ["db"])
            .exists("gpu")
            .does_not_exist("legacy")
            .in_values("region", ["eu", "us"])
            .not_in("zone", ["z1"]);
        assert_eq!(s, want);
    }

    #[test]
    fn parse_double_equals_and_repeated_key() {
        let s = parse_selector("a==1,a=2").unwrap();
        assert_eq!(s.match_labels.get("a").map(String::as_str), Some("1"));
        assert_eq!(
            s.match_expressions,
            vec![Requirement::new("a", Operator::In, ["2"])]
        );
    }

    #[test]
    fn parse_empty_string_is_everything() {
        assert_eq!(parse_selector("  ").unwrap(), LabelSelector::everything());
    }

    #[test]
    fn parse_errors_name_the_problem() {
        assert!(matches!(
            parse_selector("a=1,,b"),
            Err(ParseSelectorError::EmptyTerm(4, _))
        ));
        assert!(matches!(
            parse_selector("a in (x"),
            Err(ParseSelectorError::Unbalanced(_))
        ));
        assert!(matches!(
            parse_selector("a in ()"),
            Err(ParseSelectorError::BadSet(_))
        ));
        assert!(matches!(
            parse_selector("a in x"),
            Err(ParseSelectorError::BadSet(_))
        ));
        assert!(matches!(
            parse_selector("a b"),
            Err(ParseSelectorError::BadSet(_))
        ));
        assert!(matches!(
            parse_selector("=x"),
            Err(ParseSelectorError::InvalidKey { .. })
        ));
        assert!(matches!(
            parse_selector("a=b c"),
            Err(ParseSelectorError::InvalidValue { .. })
        ));
        assert!(matches!(
            parse_selector("!"),
            Err(ParseSelectorError::InvalidKey { .. })
        ));
    }

    #[test]
    fn display_round_trips_through_parse() {
        let s = LabelSelector::default()
            .label("env", "prod")
            .not_in("tier", ["db", "cache"])
            .exists("gpu")
            .does_not_exist("legacy")
            .in_values("region", ["eu"]);
        assert_eq!(parse_selector(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn operator_string_form_keeps_unknown_spelling() {
        for op in ["In", "NotIn", "Exists", "DoesNotExist", "Bogus"] {
            assert_eq!(String::from(Operator::from(op)), op);
        }
        assert_eq!(
            Operator::from("in"),
            Operator::Unknown("in".into()),
            "operators are case-sensitive"
        );
    }
}
